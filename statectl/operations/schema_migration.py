"""Every state whose type the new version of a job changed, rewritten into that version's
layout (`statectl migrate --classpath`), so that it restores them with nothing refused and
nothing lost.

`check` (`operations/check.py`) says which states change: an `as-is` state is carried over as
bytes; one that `migrates`, `loses` or is `refused` by Flink gets the serializer snapshot the
new job writes and every value converted to it (`formats/schema_evolution.py`); an `unknown`
one is refused (statectl cannot tell what the new job writes: drop it or leave the job's type
as it was). A state that `loses` values (a POJO field gone while another appeared) is refused
unless `--rename-field` names its rename; one whose snapshot statectl would write unchanged is
left to Flink if it `migrates` (an Avro schema Flink resolves), else refused. Before anything
is written, every value is converted once (a trial, in this process): the first that cannot be
is one line naming the state, the key and the field. The rewrite itself is a state edit like
TTL's (`state_edits.SCHEMA`): the engine's tasks write the changed subtask files, every other
file is copied.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from statectl.errors import FormatError, StatectlError
from statectl.formats.class_files import ClassFinder
from statectl.formats.compatibility import AS_IS, LOSES, MIGRATES, UNKNOWN_VERDICT
from statectl.formats.job_types import LIST, DeclaredType, parse_type
from statectl.formats.schema_evolution import ConversionError, SnapshotEvolver, ValueEvolver
from statectl.formats.serializer_snapshots import SerializerSnapshot
from statectl.formats.state_headers import StateMetaInfo
from statectl.formats.state_values import (
    StateCodec,
    flink_major,
    keyed_codec,
    operator_codec,
)
from statectl.formats.values import Undecodable
from statectl.operations.check import StateCheck, check
from statectl.operations.state_edits import SCHEMA, StateEdit
from statectl.operations.upgrade import each_state, element_codec, reencoded
from statectl.savepoint import entries
from statectl.savepoint.model import Savepoint
from statectl.savepoint.table_rows import describe_composite_key

FieldRenames = Mapping[str, Mapping[str, str]]  # "OPERATOR/STATE" → {old field: new field}


@dataclass(frozen=True)
class NewSerializers:
    """A `StateChange.meta`: the state's serializers replaced (picklable, for the tasks)."""

    serializers: Mapping[str, SerializerSnapshot]

    def __call__(self, meta: StateMetaInfo) -> StateMetaInfo:
        return dataclasses.replace(meta, serializers=dict(self.serializers))


@dataclass
class ValueConverter:
    """A `StateChange.value`: one stored value (a keyed list: every element of it) read with
    the old codec, written with the new."""

    old: StateCodec
    new: StateCodec
    evolver: ValueEvolver = field(default_factory=ValueEvolver)

    def __call__(self, data: bytes) -> bytes:
        old_user, new_user = element_codec(self.old), element_codec(self.new)
        evolve = self.evolver.evolve
        return reencoded(self.old, self.new, data, lambda v: evolve(old_user, new_user, v))


def plan_schema_migration(
    sp: Savepoint,
    classes: ClassFinder,
    types: Mapping[str, str] | None = None,
    field_renames: FieldRenames | None = None,
    *,
    narrow: bool = False,
    nulls_on_error: bool = False,
    untouched: Sequence[tuple[str, str]] = (),
) -> tuple[StateEdit, ...]:
    """The edits that carry every changed state of `sp` into the types of the job whose
    classes `classes` finds (`types`: "OPERATOR/STATE" → a type declared in code, in
    `inspect`'s syntax; `field_renames`: "OPERATOR/STATE" → {old POJO field: new}). `narrow`
    lets numbers narrow (each value checked to fit); `nulls_on_error` turns a value that cannot
    be converted into null where the new field is nullable. `untouched` ((operator id, state))
    are states other edits take care of (dropped ones). Every value is converted once here;
    the first that fails raises a StatectlError naming the state, the key and the field."""
    report = check(sp, classes, types)
    renames = _resolve_renames(sp, report.states, field_renames or {})
    given = {_target_id(sp, t): parse_type(text) for t, text in (types or {}).items()}
    skipped = set(untouched)
    edits = []
    for state in report.states:
        target = (state.operator_id, state.state)
        if target in skipped or (state.verdict == AS_IS and target not in renames):
            continue  # copied as bytes
        mine = renames.get(target, {})
        _refuse_unconvertible(state, mine)
        evolver = ValueEvolver(mine, narrow, nulls_on_error)
        edit = _state_edit(sp, classes, state, given.get(target), evolver)
        if edit is not None:
            edits.append(edit)
    return tuple(edits)


def _target_id(sp: Savepoint, target: str) -> tuple[str, str]:
    operator, _, state = target.rpartition("/")
    return sp.find_operator(operator).operator_id_hex, state


def _resolve_renames(
    sp: Savepoint, states: Sequence[StateCheck], renames: FieldRenames
) -> dict[tuple[str, str], Mapping[str, str]]:
    """{"OPERATOR/STATE": {old: new}} by (operator id, state); an unknown state raises."""
    known = {(s.operator_id, s.state) for s in states}
    resolved = {}
    for target, fields in renames.items():
        key = _target_id(sp, target)
        if key not in known:
            raise StatectlError(f"--rename-field {target}: no such state", sp.directory.url)
        resolved[key] = fields
    return resolved


def _refuse_unconvertible(state: StateCheck, renames: Mapping[str, str]) -> None:
    if state.verdict == UNKNOWN_VERDICT:
        raise StatectlError(
            f"state {state.state!r}: check says unknown ({state.reason}): statectl cannot tell "
            "what the new job writes (--drop-state drops it)",
            state.operator,
        )
    if state.verdict == LOSES and not renames:
        raise StatectlError(
            f"state {state.state!r}: {state.reason}; give --rename-field "
            f"{state.operator}/{state.state}:OLD=NEW for a rename",
            state.operator,
        )


def _state_edit(
    sp: Savepoint,
    classes: ClassFinder,
    state: StateCheck,
    new_type: DeclaredType | None,
    evolver: ValueEvolver,
) -> StateEdit | None:
    """The state's edit (its new serializers and value converter) after the trial; the
    values `evolver` turned into nulls are the edit's warning. None: statectl writes the same
    snapshot and Flink migrates the state itself (an Avro schema it resolves)."""
    op = sp.find_operator(state.operator_id)
    meta, key = _meta(sp, op, state)
    major = flink_major(sp.metadata.version)
    try:
        snapshots = SnapshotEvolver(classes, evolver.renames, major)
        serializers = _evolved_serializers(meta, state.scope, new_type, snapshots)
    except FormatError as exc:
        raise StatectlError(f"state {state.state!r}: {exc.message}", state.operator) from None
    if _same(serializers, meta):
        if state.verdict != MIGRATES:
            reason = f"statectl cannot rewrite its type: {state.reason}"
            raise StatectlError(f"state {state.state!r}: {reason}", state.operator)
        return None
    new_meta = dataclasses.replace(meta, serializers=serializers)
    old_codec = _codec(meta, key, state.scope, major, None)
    new_codec = _codec(new_meta, key, state.scope, major, classes)
    converter = ValueConverter(old_codec, new_codec, evolver)
    _trial(sp, op, state, converter)
    nulls, evolver.nulls = evolver.nulls, 0
    warnings = (f"{nulls} values that could not be converted written as null",) if nulls else ()
    edit = StateEdit(
        state.operator_id, state.state, SCHEMA, warnings=warnings,
        schema_meta=NewSerializers(serializers), schema_value=converter,
    )  # fmt: skip
    return edit


def _same(serializers: Mapping[str, SerializerSnapshot], meta: StateMetaInfo) -> bool:
    old = meta.value_serializer
    return old is not None and serializers["VALUE_SERIALIZER"].raw == old.raw


def _evolved_serializers(
    meta: StateMetaInfo, scope: str, new_type: DeclaredType | None, evolver: SnapshotEvolver
) -> dict[str, SerializerSnapshot]:
    """The state's serializer snapshots as the new job writes them: its values' (an operator
    list state's are its elements': the given `LIST<T>` unwrapped); keys unchanged."""
    if meta.backend_state_type == "BROADCAST":
        raise FormatError("broadcast state: statectl does not migrate its types")
    value = meta.value_serializer
    if value is None:
        raise FormatError("no value serializer snapshot")
    if scope == "operator" and new_type is not None:
        if new_type.kind != LIST:
            raise FormatError("give the type of an operator list state as LIST<T>")
        (new_type,) = new_type.args
    evolved = evolver.evolve(value, new_type)
    unused = evolver.unused_renames()
    if unused:
        raise FormatError(f"--rename-field {unused[0]}: no POJO field of the state to rename")
    map_key_changed = evolved.nested and evolved.nested[0].raw != value.nested[0].raw
    if scope == "keyed" and meta.kind == "MAP" and map_key_changed:
        raise FormatError("the map's key type changed: statectl does not re-key map state")
    return {**meta.serializers, "VALUE_SERIALIZER": evolved}


def _codec(
    meta: StateMetaInfo,
    key: SerializerSnapshot | None,
    scope: str,
    major: int | None,
    classes: ClassFinder | None,
) -> StateCodec:
    if scope == "keyed":
        return keyed_codec(meta, key, major, classes)
    return operator_codec(meta, "LIST", major, classes)


def _meta(
    sp: Savepoint, op: Any, state: StateCheck
) -> tuple[StateMetaInfo, SerializerSnapshot | None]:
    for scope, meta, key in each_state(sp, op):
        if scope == state.scope and meta.name == state.state:
            return meta, key
    raise StatectlError(f"state {state.state!r} vanished", state.operator)


def _trial(sp: Savepoint, op: Any, state: StateCheck, converter: ValueConverter) -> None:
    """Every value of the state converted once: the first that fails is one line naming the
    state, the key (or the subtask and element of operator state) and the field."""
    for where, data in _stored_values(sp, op, state, converter.old):
        try:
            converter(data)
        except (ConversionError, Undecodable) as exc:
            raise StatectlError(
                f"state {state.state!r}, {where()}: {exc.message}", state.operator
            ) from None


def _stored_values(
    sp: Savepoint, op: Any, state: StateCheck, codec: StateCodec
) -> Iterator[tuple[Any, bytes]]:
    """(a function describing where the value is, the stored value) of every value."""
    if state.scope == "operator":
        for file in entries.operator_files(sp, op):
            n = 0
            for element in file.elements():
                if element.state == state.state:
                    yield (lambda s=file.subtask, i=n: f"subtask {s} element {i}"), element.value
                    n += 1
        return
    for source in entries.keyed_files(sp, op):
        for entry in source.entries(states={state.state}):
            parallelism = source.max_parallelism
            yield (
                (lambda k=entry.key, p=parallelism: describe_composite_key(k, codec, p)),
                entry.value,
            )
