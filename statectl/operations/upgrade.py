"""Will Flink 2.x restore this 1.x savepoint, state by state? (`statectl upgrade --check`)

Flink 2.x changed how some types are serialized (FLIP-398 and the Kryo 5 upgrade), so state a
1.x job wrote can be refused or, worse, restored with wrong values by the same job built
against 2.x. What decides it is in the serializer snapshots of the state headers:

- **Kryo** (`KryoSerializerSnapshot`, a GenericTypeInfo): 2.x reads the bytes with Kryo 5 where
  1.x wrote Kryo 2. For a few types the two write the same bytes (String, the boxed primitives,
  and classes Kryo's FieldSerializer writes field by field); for the JDK collections and maps
  they differ, and Flink 2.x restores those values wrong without an error (measured: lists
  lose elements, maps entries). Where the type alone does not say (`Object`, a user class),
  the values do: each is read as Kryo 2 and written as Kryo 5, and a state whose bytes would
  change is flagged; a value statectl cannot decode (a user class without `--classpath`) makes
  the state `unknown`.
- **POJO fields of type List, Map or Set**, which 1.x serialized with Kryo and 2.x with its own
  collection serializers: the POJO serializers are incompatible, and Flink 2.x refuses the
  restore (`StateMigrationException` with RocksDB; the heap backend fails restoring the POJO).
- **Serializers 2.x removed**: the Scala API's, and snapshot classes of before Flink 1.7.
- **The legacy FlinkKafkaConsumer's offsets** (`topic-partition-offset-states`): the Kafka
  connector for Flink 2.x no longer has that consumer.

Only state headers are read, and the values of the Kryo states whose type does not decide.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from statectl.errors import StatectlError
from statectl.formats import source_state
from statectl.formats.metadata import OperatorState
from statectl.formats.serializer_snapshots import SerializerSnapshot
from statectl.formats.state_headers import StateMetaInfo
from statectl.formats.state_values import MAP_NULL_VALUE, StateCodec, keyed_codec, operator_codec
from statectl.formats.values import Raw
from statectl.formats.values.kryo import KRYO_SNAPSHOT
from statectl.operations import verify
from statectl.savepoint import entries
from statectl.savepoint.model import Savepoint

OK, REFUSED, WRONG, UNKNOWN = "ok", "refused", "wrong", "unknown"
FAILING = (REFUSED, WRONG, UNKNOWN)

# Types whose Kryo 2 and Kryo 5 bytes are the same (measured on Flink 1.20.3 and 2.3.0).
_BOXED = ("String", "Long", "Integer", "Short", "Byte", "Boolean", "Character", "Double", "Float")
_SAME_IN_KRYO_5 = frozenset(f"java.lang.{name}" for name in _BOXED)
# Type names a Kryo snapshot can hold that say nothing of the runtime class.
_OPEN_TYPES = frozenset({"java.lang.Object", "java.io.Serializable", "java.lang.Comparable"})
_COLLECTION_FIELDS = frozenset({"java.util.List", "java.util.Map", "java.util.Set"})
_POJO_SNAPSHOT = "org.apache.flink.api.java.typeutils.runtime.PojoSerializerSnapshot"
_SCALA_PREFIX = "org.apache.flink.api.scala."
_VALUES_CHECKED = 100_000  # entries of one Kryo state read to decide its verdict


@dataclass(frozen=True)
class StateVerdict:
    """What Flink 2.x does with one state: `ok`, `refused`, `wrong` or `unknown`, and why."""

    operator: str  # the operator's label
    operator_id: str
    state: str
    scope: str  # keyed | operator
    verdict: str
    reason: str = ""


@dataclass(frozen=True)
class UpgradeCheck:
    source: str
    metadata_version: int
    target: str  # the Flink version checked against, e.g. "2.3"
    states: tuple[StateVerdict, ...]

    @property
    def ok(self) -> bool:
        return not any(s.verdict in FAILING for s in self.states)

    def count(self, verdict: str) -> int:
        return sum(s.verdict == verdict for s in self.states)


def check_upgrade(sp: Savepoint, target: str = "2.3") -> UpgradeCheck:
    """Every state's verdict (`StateVerdict`) for a restore by Flink `target` (2.x)."""
    if not target.startswith("2."):
        raise StatectlError(f"--to {target}: only Flink 2.x is a target of upgrade")
    verdicts = []
    for op in sp.operators:
        verify.ensure_consistent(sp, [op])
        label = entries.operator_label(op)
        for scope, meta, key in _states(sp, op):
            verdict, reason = _verdict(sp, op, meta, key, scope)
            verdicts.append(
                StateVerdict(label, op.operator_id_hex, meta.name, scope, verdict, reason)
            )
    return UpgradeCheck(sp.directory.url, sp.metadata.version, target, tuple(verdicts))


def _states(
    sp: Savepoint, op: OperatorState
) -> Iterator[tuple[str, StateMetaInfo, SerializerSnapshot | None]]:
    """(scope, state, the keyed backend's key serializer) of every state, once."""
    seen: set[tuple[str, str]] = set()
    for file in entries.keyed_files(sp, op):
        header = file.header()
        for state in header.states:
            if ("keyed", state.name) not in seen:
                seen.add(("keyed", state.name))
                yield "keyed", state, header.key_serializer_snapshot
    for holder in entries.operator_files(sp, op):
        for name, state in holder.state_metas().items():
            if ("operator", name) not in seen:
                seen.add(("operator", name))
                yield "operator", state, None


def _verdict(
    sp: Savepoint,
    op: OperatorState,
    meta: StateMetaInfo,
    key: SerializerSnapshot | None,
    scope: str,
) -> tuple[str, str]:
    if sp.metadata.version >= 5:
        return OK, "written by Flink 2.x"
    if meta.name == source_state.LEGACY_KAFKA_STATE:
        return (
            REFUSED,
            "FlinkKafkaConsumer's offsets: the Kafka connector for Flink 2.x has no such "
            "consumer (move them to a KafkaSource)",
        )
    snapshots = [s for s in (key, *meta.serializers.values()) if s is not None]
    for snapshot in snapshots:
        problem = _refused(snapshot)
        if problem:
            return REFUSED, problem
    kryo = [k for s in snapshots for k in _kryo_leaves(s)]
    if not kryo:
        return OK, ""
    types = sorted({k.type_name or "?" for k in kryo})
    if all(t in _SAME_IN_KRYO_5 for t in types):
        return OK, f"Kryo of {', '.join(types)}: the same bytes in Kryo 5"
    if not any(t in _OPEN_TYPES for t in types) and not _user_types(types):
        return WRONG, f"Kryo of {', '.join(types)}: Flink 2.x reads Kryo 2's bytes of it wrong"
    return _kryo_values_verdict(sp, op, meta, key, scope, types)


def _refused(snapshot: SerializerSnapshot) -> str | None:
    """Why Flink 2.x refuses a state with this serializer, if it does."""
    for node in _walk(snapshot):
        if node.class_name.startswith(_SCALA_PREFIX):
            return f"{node.label}: the Scala API's serializers are gone in Flink 2.x"
        if node.class_name.endswith("ConfigSnapshot"):
            return f"{node.label}: a serializer snapshot of before Flink 1.7, gone in Flink 2.x"
        if node.class_name == _POJO_SNAPSHOT:
            for name, field in zip(node.field_names, node.nested, strict=False):
                if field.class_name == KRYO_SNAPSHOT and field.type_name in _COLLECTION_FIELDS:
                    return (
                        f"POJO {node.type_name} field {name!r} ({field.type_name}): Flink 1.x "
                        "serialized it with Kryo, Flink 2.x with its collection serializers"
                    )
    return None


def _walk(snapshot: SerializerSnapshot) -> Iterator[SerializerSnapshot]:
    yield snapshot
    for nested in snapshot.nested:
        yield from _walk(nested)


def _kryo_leaves(snapshot: SerializerSnapshot) -> Iterator[SerializerSnapshot]:
    return (node for node in _walk(snapshot) if node.class_name == KRYO_SNAPSHOT)


def _user_types(types: list[str]) -> bool:
    return any(not t.startswith("java.") for t in types)


def _kryo_values_verdict(
    sp: Savepoint, op: OperatorState, meta: StateMetaInfo, key: SerializerSnapshot | None,
    scope: str, types: list[str],
) -> tuple[str, str]:  # fmt: skip
    """Whether the state's values have the same bytes in Kryo 5: read as 1.x wrote them,
    written as 2.x would."""
    what = f"Kryo of {', '.join(types)}"
    old, new = (_state_codec(meta, key, scope, major) for major in (1, 2))
    for n, stored in enumerate(_stored_values(sp, op, meta, scope)):
        if n >= _VALUES_CHECKED:
            break
        decoded = old.decode_value(stored)
        if isinstance(decoded.value, Raw):
            reason = decoded.value.reason
            return UNKNOWN, f"{what}: {reason} (give the job's jar with --classpath)"
        heap_null = len(stored) > 1 and stored[0] == MAP_NULL_VALUE
        try:
            again = new.encode_value(
                decoded.value, decoded.ttl_timestamp, heap_null_map_value=heap_null
            )
        except StatectlError as exc:
            return UNKNOWN, f"{what}: {exc.message}"
        if again != stored:
            return (
                WRONG,
                f"{what}: its values have other bytes in Kryo 5, which Flink 2.x reads wrong",
            )
    return OK, f"{what}: every value has the same bytes in Kryo 5"


def _state_codec(
    meta: StateMetaInfo, key: SerializerSnapshot | None, scope: str, flink_major: int
) -> StateCodec:
    if scope == "keyed":
        return keyed_codec(meta, key, flink_major)
    kind = "BROADCAST" if meta.backend_state_type == "BROADCAST" else "LIST"
    return operator_codec(meta, kind, flink_major)


def _stored_values(
    sp: Savepoint, op: OperatorState, meta: StateMetaInfo, scope: str
) -> Iterator[bytes]:
    """The state's stored values (keyed entries' values, operator list elements or maps)."""
    if scope == "keyed":
        for file in entries.keyed_files(sp, op):
            for entry in file.entries():
                if entry.state.name == meta.name:
                    yield entry.value
    else:
        for holder in entries.operator_files(sp, op):
            for element in holder.elements():
                if element.state == meta.name:
                    yield element.value
