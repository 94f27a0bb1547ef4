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

import dataclasses
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from statectl.errors import NotConvertible, StatectlError
from statectl.execution.engine import Engine, LocalEngine
from statectl.formats import operator_state, source_state
from statectl.formats.class_files import ClassFinder
from statectl.formats.handles import IncrementalKeyedHandle
from statectl.formats.metadata import CANONICAL_SAVEPOINT_PROPERTIES, OperatorState
from statectl.formats.serializer_snapshots import SerializerSnapshot
from statectl.formats.state_headers import StateMetaInfo
from statectl.formats.state_values import MAP_NULL_VALUE, StateCodec, keyed_codec, operator_codec
from statectl.formats.upgrade import (
    COLLECTION_KINDS,
    ElementClasses,
    collect_element_classes,
    hints_from,
    merge_element_classes,
    upgrade_value,
    upgraded_snapshot,
)
from statectl.formats.values import Codec, Raw, RawCodec, Undecodable
from statectl.formats.values.kryo import KRYO_SNAPSHOT
from statectl.operations import verify
from statectl.operations.migrate import MigrationPlan, MigrationReport, migrate, plan_migration
from statectl.operations.state_edits import StateEditPlan, StateEditReport
from statectl.operations.value_tasks import (
    FileValues,
    run_per_file,
    source_values,
    value_sources,
)
from statectl.progress import ProgressCallback
from statectl.savepoint import entries, native
from statectl.savepoint.keyed_rewrite import StateChange, plan_subtask
from statectl.savepoint.model import Savepoint
from statectl.savepoint.operator_rewrite import OperatorStateChange

OK, REFUSED, WRONG, UNKNOWN = "ok", "refused", "wrong", "unknown"
# The `_metadata` version of the output: V6, as Flink 2.1–2.3 write it, so that it says (to
# statectl too) that its Kryo values are Kryo 5's.
TARGET_METADATA_VERSION = 6
FAILING = (REFUSED, WRONG, UNKNOWN)

# Types whose Kryo 2 and Kryo 5 bytes are the same (measured on Flink 1.20.3 and 2.3.0).
_BOXED = ("String", "Long", "Integer", "Short", "Byte", "Boolean", "Character", "Double", "Float")
_SAME_IN_KRYO_5 = frozenset(f"java.lang.{name}" for name in _BOXED)
# Type names a Kryo snapshot can hold that say nothing of the runtime class.
_OPEN_TYPES = frozenset({"java.lang.Object", "java.io.Serializable", "java.lang.Comparable"})
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


def check_upgrade(
    sp: Savepoint, target: str = "2.3", classpath: ClassFinder | None = None
) -> UpgradeCheck:
    """Every state's verdict (`StateVerdict`) for a restore by Flink `target` (2.x);
    `classpath`: the job's classes, for Kryo values of user classes."""
    if not target.startswith("2."):
        raise StatectlError(f"--to {target}: only Flink 2.x is a target of upgrade")
    verdicts = []
    for op in sp.operators:
        verify.ensure_consistent(sp, [op])
        label = entries.operator_label(op)
        for scope, meta, key in each_state(sp, op):
            verdict, reason = _verdict(sp, op, meta, key, scope, classpath)
            verdicts.append(
                StateVerdict(label, op.operator_id_hex, meta.name, scope, verdict, reason)
            )
    return UpgradeCheck(sp.directory.url, sp.metadata.version, target, tuple(verdicts))


def each_state(
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
    classpath: ClassFinder | None = None,
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
    return _kryo_values_verdict(sp, op, meta, key, scope, types, classpath)


def _refused(snapshot: SerializerSnapshot) -> str | None:
    """Why Flink 2.x refuses a state with this serializer, if it does."""
    for node in _walk(snapshot):
        if node.class_name.startswith(_SCALA_PREFIX):
            return f"{node.label}: the Scala API's serializers are gone in Flink 2.x"
        if node.class_name.endswith("ConfigSnapshot"):
            return f"{node.label}: a serializer snapshot of before Flink 1.7, gone in Flink 2.x"
        if node.class_name == _POJO_SNAPSHOT:
            for name, field in zip(node.field_names, node.nested, strict=False):
                # 2.x gives a parameterized List, Map or Set field (interface or JDK class)
                # its collection serializer; a raw one stays Kryo, which the snapshot (erased)
                # cannot tell: flagged, and `upgrade` says so if it finds no element types.
                if field.class_name == KRYO_SNAPSHOT and field.type_name in COLLECTION_KINDS:
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
    scope: str, types: list[str], classpath: ClassFinder | None,
) -> tuple[str, str]:  # fmt: skip
    """Whether the state's values have the same bytes in Kryo 5: read as 1.x wrote them,
    written as 2.x would."""
    what = f"Kryo of {', '.join(types)}"
    old, new = (_state_codec(meta, key, scope, major, classpath) for major in (1, 2))
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
    meta: StateMetaInfo,
    key: SerializerSnapshot | None,
    scope: str,
    flink_major: int,
    classpath: ClassFinder | None = None,
) -> StateCodec:
    if scope == "keyed":
        return keyed_codec(meta, key, flink_major, classpath)
    kind = "BROADCAST" if meta.backend_state_type == "BROADCAST" else "LIST"
    return operator_codec(meta, kind, flink_major, classpath)


def _stored_values(
    sp: Savepoint, op: OperatorState, meta: StateMetaInfo, scope: str
) -> Iterator[bytes]:
    """The state's stored values (keyed entries' values, operator list elements or maps)."""
    for source in value_sources(sp, op, scope):
        yield from (value for _, value in source_values(source, {meta.name}))


# --- rewriting: `statectl upgrade -o` ------------------------------------------------------------


@dataclass(frozen=True)
class UpgradePlan:
    """What `upgrade` writes: the check, the states it converts and those it drops."""

    check: UpgradeCheck
    migration: MigrationPlan
    converted: tuple[StateVerdict, ...]
    dropped: tuple[StateVerdict, ...]


@dataclass(frozen=True)
class UpgradeReport:
    check: UpgradeCheck
    converted: tuple[StateVerdict, ...]
    dropped: tuple[StateVerdict, ...]
    written: MigrationReport


@dataclass(frozen=True)
class _Conversion:
    """How one state becomes what Flink 2.x reads: its new meta info and each stored value."""

    meta: StateMetaInfo
    value: Callable[[bytes], bytes]


def upgrade(
    sp: Savepoint,
    destination: str,
    target: str = "2.3",
    *,
    drop_unconvertible: bool = False,
    classpath: ClassFinder | None = None,
    overwrite: bool = False,
    storage_options: dict[str, Any] | None = None,
    engine: Engine | None = None,
    progress: ProgressCallback | None = None,
) -> UpgradeReport:
    """`plan_upgrade` then `write_upgrade`, converting each value once: the write goes first,
    untried. A value it cannot convert discards it (nothing is published), and the upgrade
    is planned again with a trial of every value, which finds the states that cannot be
    converted (dropped, or refused with their reason), then written."""

    def planned(trial: bool) -> UpgradePlan:
        return plan_upgrade(
            sp, target, drop_unconvertible=drop_unconvertible, classpath=classpath,
            engine=engine, progress=progress, trial=trial,
        )  # fmt: skip

    def written(plan: UpgradePlan) -> UpgradeReport:
        return write_upgrade(
            plan, destination, overwrite=overwrite, storage_options=storage_options,
            progress=progress, engine=engine,
        )  # fmt: skip

    try:
        return written(planned(trial=False))
    except NotConvertible:
        return written(planned(trial=True))


def plan_upgrade(
    sp: Savepoint,
    target: str = "2.3",
    *,
    drop_unconvertible: bool = False,
    classpath: ClassFinder | None = None,
    engine: Engine | None = None,
    progress: ProgressCallback | None = None,
    trial: bool = True,
) -> UpgradePlan:
    """Every state the check flags converted (Kryo 2 values written as Kryo 5, POJO List,
    Map and Set fields as 2.x's collection serializers write them, their snapshots as 2.x
    writes them), or, with `drop_unconvertible`, dropped; otherwise one that cannot be
    converted is a StatectlError naming it and why, and nothing is written. The values are
    read by `engine`'s tasks (this process if none), a task per subtask file. Without `trial`
    they are not converted first: the plan's conversions raise `NotConvertible` where a value
    fails (the writer discards its output)."""
    check = check_upgrade(sp, target, classpath)
    failing = [v for v in check.states if v.verdict in FAILING]
    reader = _ValueReader(sp, engine or LocalEngine(), progress)
    conversions, failures = _conversions(sp, failing, classpath, reader, trial)
    keyed: dict[bytes, dict[str, StateChange]] = {}
    operator: dict[bytes, dict[str, OperatorStateChange]] = {}
    converted, dropped = [], []
    for verdict in failing:
        op = sp.find_operator(verdict.operator_id)
        if verdict in failures:
            if not drop_unconvertible:
                raise StatectlError(
                    f"state {verdict.state!r} cannot be converted for Flink 2.x: "
                    f"{failures[verdict]} (--drop-unconvertible drops it)",
                    verdict.operator,
                )
            dropped.append(verdict)
            _add(keyed, operator, op, verdict, drop=True)
            continue
        converted.append(verdict)
        _add(keyed, operator, op, verdict, conversion=conversions[verdict])
    migration = plan_migration(sp)
    rewrites = {
        op_id: tuple(
            plan_subtask(f, changes) for f in entries.keyed_files(sp, sp.find_operator(op_id.hex()))
        )
        for op_id, changes in keyed.items()
    }
    labels = {op.operator_id: entries.operator_label(op) for op in sp.operators}
    reports = tuple(
        StateEditReport(v.operator, v.state, "upgrade" if v in converted else "drop")
        for v in (*converted, *dropped)
    )
    states = StateEditPlan(rewrites, (), labels, reports, operator)
    metadata = dataclasses.replace(
        migration.metadata, version=TARGET_METADATA_VERSION, properties=_properties(sp)
    )
    migration = dataclasses.replace(migration, metadata=metadata, states=states)
    return UpgradePlan(check, migration, tuple(converted), tuple(dropped))


def _properties(sp: Savepoint) -> bytes:
    """The `_metadata` tail of the output: the input's, or (V3 has none) a savepoint's."""
    if sp.metadata.properties:
        return sp.metadata.properties
    native_state = any(
        isinstance(s.managed_keyed_state, IncrementalKeyedHandle)
        for op in sp.operators
        for s in op.subtasks or ()
    )
    if native_state:
        return native.native_savepoint_properties(CANONICAL_SAVEPOINT_PROPERTIES)
    return CANONICAL_SAVEPOINT_PROPERTIES


def write_upgrade(
    plan: UpgradePlan,
    destination: str,
    *,
    overwrite: bool = False,
    storage_options: dict[str, Any] | None = None,
    progress: ProgressCallback | None = None,
    engine: Engine | None = None,
) -> UpgradeReport:
    """The upgraded savepoint, its values converted by `engine`'s tasks subtask by subtask."""
    written = migrate(
        plan.migration,
        destination,
        overwrite=overwrite,
        storage_options=storage_options,
        progress=progress,
        engine=engine,
    )
    return UpgradeReport(plan.check, plan.converted, plan.dropped, written)


def _add(
    keyed: dict[bytes, dict[str, StateChange]],
    operator: dict[bytes, dict[str, OperatorStateChange]],
    op: OperatorState,
    verdict: StateVerdict,
    *,
    drop: bool = False,
    conversion: _Conversion | None = None,
) -> None:
    meta = (lambda _: conversion.meta) if conversion else None
    value = conversion.value if conversion else None
    if verdict.scope == "keyed":
        change = StateChange(drop=drop, meta=meta, value=value)
        keyed.setdefault(op.operator_id, {})[verdict.state] = change
    else:
        op_change = OperatorStateChange(drop=drop, meta=meta, value=value)
        operator.setdefault(op.operator_id, {})[verdict.state] = op_change


@dataclass(frozen=True)
class _Codecs:
    """A flagged state's meta info, and its codecs as 1.x wrote it and (once its element types
    are known) as 2.x writes it."""

    meta: StateMetaInfo
    key: SerializerSnapshot | None  # the keyed backend's key serializer
    old: StateCodec
    new: StateCodec | None = None


def _conversions(
    sp: Savepoint,
    verdicts: list[StateVerdict],
    classpath: ClassFinder | None,
    reader: _ValueReader,
    trial: bool,
) -> tuple[dict[StateVerdict, _Conversion], dict[StateVerdict, str]]:
    """Each state's conversion, or why it has none. With `trial`, `reader`'s tasks convert
    every value first, so that writing cannot fail half-way; the 2.x serializer of a POJO
    with collection fields needs their element classes, gathered from its values (every one
    decoded) by the pass before its trial, which the other states' trials share."""
    failures: dict[StateVerdict, str] = {}
    codecs: dict[StateVerdict, _Codecs] = {}
    for verdict in verdicts:
        try:
            codecs[verdict] = _first_codecs(sp, verdict, classpath)
        except (StatectlError, Undecodable) as exc:
            failures[verdict] = exc.message
    first = codecs if trial else {v: c for v, c in codecs.items() if c.new is None}
    trials: dict[StateVerdict, _Codecs] = {}
    for verdict, found in reader.read(first, "reading the values to convert").items():
        try:
            if isinstance(found, str):
                raise Undecodable(found)
            if codecs[verdict].new is None:
                codecs[verdict] = _new_codecs(codecs[verdict], verdict.scope, found, classpath)
                trials[verdict] = codecs[verdict]
        except (StatectlError, Undecodable) as exc:
            failures[verdict] = exc.message
            del codecs[verdict]
    if trial:
        for verdict, found in reader.read(trials, "converting every value (a trial)").items():
            if isinstance(found, str):
                failures[verdict] = found
                del codecs[verdict]
    return {v: _Conversion(c.meta, _converter(c)) for v, c in codecs.items()}, failures


def _first_codecs(sp: Savepoint, verdict: StateVerdict, classpath: ClassFinder | None) -> _Codecs:
    """The state's 1.x codec, and its 2.x one unless that needs the element classes of POJO
    collection fields."""
    op = sp.find_operator(verdict.operator_id)
    meta, key = _meta(sp, op, verdict)
    if meta.name == source_state.LEGACY_KAFKA_STATE or _refused_for_good(meta, key):
        raise StatectlError(verdict.reason)
    old = _state_codec(meta, key, verdict.scope, 1, classpath)
    element_codec(old)
    codecs = _Codecs(meta, key, old)
    try:
        return _new_codecs(codecs, verdict.scope, {}, classpath)
    except (StatectlError, Undecodable):
        return codecs  # the values tell the element classes


def _new_codecs(
    codecs: _Codecs, scope: str, seen: ElementClasses, classpath: ClassFinder | None
) -> _Codecs:
    """The state's meta info with its value serializer as 2.x writes it, for the element
    classes `seen` in its values."""
    meta = codecs.meta
    value_snapshot = meta.value_serializer
    assert value_snapshot is not None
    hints = hints_from(seen)
    serializers = {**meta.serializers, "VALUE_SERIALIZER": upgraded_snapshot(value_snapshot, hints)}
    new_meta = dataclasses.replace(meta, serializers=serializers)
    new = _state_codec(new_meta, codecs.key, scope, 2, classpath)
    return dataclasses.replace(codecs, meta=new_meta, new=new)


def _converter(codecs: _Codecs) -> Callable[[bytes], bytes]:
    old, new = codecs.old, codecs.new
    assert new is not None

    def convert(data: bytes) -> bytes:
        try:
            return _converted(old, new, data)
        except (StatectlError, Undecodable) as exc:  # where no trial read the value first
            raise NotConvertible(exc.message) from None

    return convert


@dataclass(frozen=True)
class _ValueReader:
    """Reads the values of flagged states with `engine`'s tasks, a task per subtask file: with
    a state's 2.x codec, each value is converted; without, decoded for the element classes of
    its collection fields."""

    sp: Savepoint
    engine: Engine
    progress: ProgressCallback | None

    def read(
        self, codecs: dict[StateVerdict, _Codecs], phase: str
    ) -> dict[StateVerdict, ElementClasses | str]:
        """Per state, the element classes its values hold (or nothing, when converted), or
        why one of its values cannot be read or converted."""
        if not codecs:
            return {}
        states = {v: (c.old, c.new) for v, c in codecs.items()}
        results = run_per_file(self.sp, self.engine, states, _task_values, self.progress, phase)
        return _merged(codecs, results)


def _merged(
    codecs: dict[StateVerdict, _Codecs],
    results: Iterable[tuple[dict[str, StateVerdict], dict[str, ElementClasses | str]]],
) -> dict[StateVerdict, ElementClasses | str]:
    """The tasks' findings by state: the element classes of all, or the first failure."""
    found: dict[StateVerdict, ElementClasses | str] = {v: {} for v in codecs}
    for by_name, task_results in results:
        for name, result in task_results.items():
            verdict = by_name[name]
            before = found[verdict]
            if isinstance(result, str) or isinstance(before, str):
                found[verdict] = before if isinstance(before, str) else result
            else:
                merge_element_classes(before, result)
    return found


def _task_values(
    task: FileValues[tuple[StateCodec, StateCodec | None]],
) -> dict[str, ElementClasses | str]:
    """A task of `_ValueReader.read`: per state, the element classes seen, or why a value
    failed."""
    found: dict[str, ElementClasses | str] = {name: {} for name in task.states}
    for name, data in source_values(task.source, task.states):
        seen = found[name]
        if isinstance(seen, str):
            continue
        old, new = task.states[name]
        try:
            if new is None:
                collect_element_classes(element_codec(old), _decoded(old, data), seen)
            else:
                _converted(old, new, data)
        except (StatectlError, Undecodable) as exc:
            found[name] = exc.message
    return found


def _meta(
    sp: Savepoint, op: OperatorState, verdict: StateVerdict
) -> tuple[StateMetaInfo, SerializerSnapshot | None]:
    for scope, meta, key in each_state(sp, op):
        if scope == verdict.scope and meta.name == verdict.state:
            return meta, key
    raise StatectlError(f"state {verdict.state!r} vanished", verdict.operator)


def _refused_for_good(meta: StateMetaInfo, key: SerializerSnapshot | None) -> bool:
    """Serializers 2.x removed, which no rewrite of values brings back."""
    return any(
        node.class_name.startswith(_SCALA_PREFIX) or node.class_name.endswith("ConfigSnapshot")
        for snapshot in (key, *meta.serializers.values())
        if snapshot is not None
        for node in _walk(snapshot)
    )


def element_codec(codec: StateCodec) -> Codec:
    """The codec of the values `upgrade_value` converts (a list's elements, a map's values)."""
    user = codec.user_value_codec()
    if user is None or isinstance(user, RawCodec):
        raise Undecodable(user.reason if isinstance(user, RawCodec) else "no value serializer")
    return user


def _decoded(codec: StateCodec, data: bytes) -> list[Any]:
    """The user values of one stored value: one, a list's elements or a broadcast map's values."""
    if codec.kind == "BROADCAST":
        assert codec.key is not None and codec.value is not None
        pairs = operator_state.split_broadcast_entries(data, codec.key, codec.value)
        return [codec.value.decode(v) for _, v in pairs]
    decoded = codec.decode_value(data)
    if isinstance(decoded.value, Raw):
        raise Undecodable(decoded.value.reason)
    if codec.kind == "LIST" and codec.keyed:
        return list(decoded.value)
    return [decoded.value]


def _converted(old: StateCodec, new: StateCodec, data: bytes) -> bytes:
    """One stored value read as 1.x wrote it, written as 2.x writes it."""
    old_user, new_user = element_codec(old), element_codec(new)
    if old.kind == "BROADCAST":
        assert old.key is not None and new.key is not None and old.value is not None
        pairs = operator_state.split_broadcast_entries(data, old.key, old.value)
        return operator_state.build_broadcast_element(
            (
                new.key.encode(upgrade_value(old.key, new.key, old.key.decode(k))),
                new_user.encode(upgrade_value(old_user, new_user, old_user.decode(v))),
            )
            for k, v in pairs
        )
    return reencoded(old, new, data, lambda value: upgrade_value(old_user, new_user, value))


def reencoded(
    old: StateCodec, new: StateCodec, data: bytes, convert: Callable[[Any], Any]
) -> bytes:
    """One stored value of a keyed or operator list state read with `old`, each user value in
    it (a keyed list's elements one by one) passed through `convert`, written with `new`: its
    TTL time and a heap map's null-value marker kept."""
    decoded = old.decode_value(data)
    if isinstance(decoded.value, Raw):
        raise Undecodable(decoded.value.reason)
    if old.kind == "LIST" and old.keyed:
        value: Any = [convert(v) for v in decoded.value]
    else:
        value = convert(decoded.value)
    heap_null = len(data) > 1 and data[0] == MAP_NULL_VALUE and old.kind == "MAP"
    return new.encode_value(value, decoded.ttl_timestamp, heap_null_map_value=heap_null)
