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
is written, every value is converted once (a trial) by the engine's tasks, a task per subtask
file as `upgrade`'s trial (`value_tasks`), so on the head start or Spark as the write itself:
the first value that cannot be converted, in subtask order, is one line naming the state, the
key and the field; with `--on-error null` the tasks count the values written as null. The
rewrite itself is a state edit like TTL's (`state_edits.SCHEMA`): the engine's tasks write the
changed subtask files, every other file is copied.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from statectl.errors import FormatError, StatectlError
from statectl.execution.engine import Engine, LocalEngine
from statectl.formats.class_files import ClassFinder
from statectl.formats.compatibility import AS_IS, LOSES, MIGRATES, UNKNOWN_VERDICT
from statectl.formats.job_types import LIST, DeclaredType, parse_type
from statectl.formats.schema_evolution import SnapshotEvolver, ValueEvolver
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
from statectl.operations.value_tasks import FileValues, run_per_file
from statectl.progress import ProgressCallback
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


@dataclass(frozen=True)
class ValueConverter:
    """A `StateChange.value`: one stored value (a keyed list: every element of it) read with
    the old codec, written with the new. It travels to the tasks pickled; the values its
    writing tasks turn into nulls are not counted back (the trial counts them)."""

    old: StateCodec
    new: StateCodec
    evolver: ValueEvolver = field(default_factory=ValueEvolver)

    def __call__(self, data: bytes) -> bytes:
        return self.convert(data, self.evolver)

    def convert(self, data: bytes, evolver: ValueEvolver) -> bytes:
        """`data` converted by `evolver` (`self.evolver`, or a trial task's own copy)."""
        old_user, new_user = element_codec(self.old), element_codec(self.new)
        evolve = evolver.evolve
        return reencoded(self.old, self.new, data, lambda v: evolve(old_user, new_user, v))


@dataclass(frozen=True)
class _Rewrite:
    """A changed state's new serializers and value converter, before the trial."""

    serializers: Mapping[str, SerializerSnapshot]
    converter: ValueConverter


def plan_schema_migration(
    sp: Savepoint,
    classes: ClassFinder,
    types: Mapping[str, str] | None = None,
    field_renames: FieldRenames | None = None,
    *,
    narrow: bool = False,
    nulls_on_error: bool = False,
    untouched: Sequence[tuple[str, str]] = (),
    engine: Engine | None = None,
    progress: ProgressCallback | None = None,
) -> tuple[StateEdit, ...]:
    """The edits that carry every changed state of `sp` into the types of the job whose
    classes `classes` finds (`types`: "OPERATOR/STATE" → a type declared in code, in
    `inspect`'s syntax; `field_renames`: "OPERATOR/STATE" → {old POJO field: new}). `narrow`
    lets numbers narrow (each value checked to fit); `nulls_on_error` turns a value that cannot
    be converted into null where the new field is nullable. `untouched` ((operator id, state))
    are states other edits take care of (dropped ones). Every value is converted once by
    `engine`'s tasks (this process if none), a task per subtask file; the first that fails
    raises a StatectlError naming the state, the key and the field."""
    report = check(sp, classes, types)
    renames = _resolve_renames(sp, report.states, field_renames or {})
    given = {_target_id(sp, t): parse_type(text) for t, text in (types or {}).items()}
    skipped = set(untouched)
    rewrites: dict[StateCheck, _Rewrite] = {}
    for state in report.states:
        target = (state.operator_id, state.state)
        if target in skipped or (state.verdict == AS_IS and target not in renames):
            continue  # copied as bytes
        mine = renames.get(target, {})
        _refuse_unconvertible(state, mine)
        evolver = ValueEvolver(mine, narrow, nulls_on_error)
        rewrite = _rewrite(sp, classes, state, given.get(target), evolver)
        if rewrite is not None:
            rewrites[state] = rewrite
    nulls = _trial(sp, rewrites, engine or LocalEngine(), progress)
    return tuple(_state_edit(state, rewrites[state], nulls[state]) for state in rewrites)


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


def _rewrite(
    sp: Savepoint,
    classes: ClassFinder,
    state: StateCheck,
    new_type: DeclaredType | None,
    evolver: ValueEvolver,
) -> _Rewrite | None:
    """The state's new serializers and value converter. None: statectl writes the same
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
    return _Rewrite(serializers, ValueConverter(old_codec, new_codec, evolver))


def _state_edit(state: StateCheck, rewrite: _Rewrite, nulls: int) -> StateEdit:
    """The state's edit after the trial; the values turned into nulls are its warning."""
    warnings = (f"{nulls} values that could not be converted written as null",) if nulls else ()
    return StateEdit(
        state.operator_id, state.state, SCHEMA, warnings=warnings, nulls=nulls,
        schema_meta=NewSerializers(rewrite.serializers), schema_value=rewrite.converter,
    )  # fmt: skip


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


def _trial(
    sp: Savepoint,
    rewrites: Mapping[StateCheck, _Rewrite],
    engine: Engine,
    progress: ProgressCallback | None,
) -> dict[StateCheck, int]:
    """Every value of the states converted once by `engine`'s tasks: per state the values
    written as null. The first value that fails (in report order, then subtask order: the same
    whichever task ran first) raises one line naming the state, the key and the field."""
    converters = {state: rewrite.converter for state, rewrite in rewrites.items()}
    phase = "converting every value (a trial)"
    results = run_per_file(sp, engine, converters, _trial_task, progress, phase)
    outcomes: dict[StateCheck, int | str] = dict.fromkeys(rewrites, 0)
    for by_name, task_outcomes in results:
        for name, outcome in task_outcomes.items():
            state = by_name[name]
            before = outcomes[state]
            if not isinstance(before, str):  # a failure stays the first one
                outcomes[state] = outcome if isinstance(outcome, str) else before + outcome
    for state, outcome in outcomes.items():
        if isinstance(outcome, str):
            raise StatectlError(outcome, state.operator)
    return {state: int(outcome) for state, outcome in outcomes.items()}


def _trial_task(task: FileValues[ValueConverter]) -> dict[str, int | str]:
    """A task of the trial: per state, how many of its values in the file became null, or
    the first that cannot be converted (the one line naming it). Each state's nulls are counted
    by an evolver of the task's own, returned, not by the driver's."""
    evolvers = {name: dataclasses.replace(c.evolver, nulls=0) for name, c in task.states.items()}
    failures: dict[str, str] = {}
    for name, where, data in _located_values(task):
        if name in failures:
            continue
        try:
            task.states[name].convert(data, evolvers[name])
        except (StatectlError, Undecodable) as exc:
            failures[name] = f"state {name!r}, {where()}: {exc.message}"
    return {name: failures.get(name, evolvers[name].nulls) for name in task.states}


def _located_values(
    task: FileValues[ValueConverter],
) -> Iterator[tuple[str, Callable[[], str], bytes]]:
    """(state, a function describing where the value is, the stored value) of the task's
    states: a key as `describe_composite_key` writes it, or an operator state's subtask and
    element (described only for a value that fails)."""
    source = task.source
    if isinstance(source, entries.OperatorFile):
        seen: dict[str, int] = {}
        for element in source.elements():
            if element.state in task.states:
                n = seen[element.state] = seen.get(element.state, -1) + 1
                where = partial("subtask {} element {}".format, source.subtask, n)
                yield element.state, where, element.value
        return
    parallelism = source.max_parallelism
    for entry in source.entries(states=task.states):
        codec = task.states[entry.state.name].old
        key = partial(describe_composite_key, entry.key, codec, parallelism)
        yield entry.state.name, key, entry.value
