"""Renaming operators' uids, dropping operators, and state-level edits: a new, self-contained
savepoint.

State edits (`state_edits`: drop, rename, TTL, replaced entries; `upgrade`'s conversions) rewrite
the affected operators' keyed state and operator-state files subtask by subtask
(`savepoint.keyed_rewrite`, `savepoint.operator_rewrite`); everything below holds for the rest.

`plan_migration` is the pure metadata transformation: a renamed operator takes the operator id
Flink derives from its new uid (murmur3_128 of the UTF-8 bytes, flink-savepoint-format.md §6.6)
and, in V5+ metadata, the new uid; a dropped operator leaves `_metadata` entirely, so a job
without it restores without `allowNonRestoredState`. Everything else stays as it was: the
metadata version, checkpoint id, master states and the properties tail.

`migrate` writes the result like rescale does: every remaining operator's files are copied into
the destination and referenced by relative handles (code 6), inline state stays inline, RocksDB
native handles are relocated file by file. The copies and rewrites are an engine's tasks
(this process unless Spark is asked for or the work is long, as for rescale),
`_metadata` is written last into a staging sibling that is then published; the input is never
modified.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from statectl.errors import StatectlError
from statectl.execution.engine import Engine, LocalEngine
from statectl.formats.handles import KeyedHandle, RelativeFileHandle
from statectl.formats.java_io import encode_modified_utf8
from statectl.formats.metadata import CheckpointMetadata, OperatorState
from statectl.operations.publish import publish
from statectl.operations.shuffled_edits import FedFile, unchecked_counts, write_fed
from statectl.operations.state_edits import (
    RowFeed,
    StateEdit,
    StateEditPlan,
    StateEditReport,
    plan_state_edits,
)
from statectl.progress import ProgressCallback, begun
from statectl.savepoint import entries, writer
from statectl.savepoint.files import CopyTask, copy_file
from statectl.savepoint.keyed_rewrite import (
    SubtaskRewrite,
    rows_one_by_one,
    source_size,
    write_subtask,
)
from statectl.savepoint.model import Savepoint, describe_operator, operator_id_for_uid
from statectl.savepoint.operator_rewrite import OperatorStateChange, rewrite_file
from statectl.savepoint.relocate import CopyNames, carry_over
from statectl.savepoint.storage import Location, locate

RENAMED, DROPPED, CARRIED = "renamed", "dropped", "carried"


@dataclass(frozen=True)
class OperatorChange:
    """What happens to one operator of the input. `new_*` are None for a dropped operator."""

    action: str  # RENAMED | DROPPED | CARRIED
    old_id: str
    old_uid: str | None
    new_id: str | None
    new_uid: str | None


@dataclass(frozen=True)
class MigrationPlan:
    source: Savepoint
    changes: tuple[OperatorChange, ...]  # one per input operator, in input order
    metadata: CheckpointMetadata  # the output's metadata, handles still pointing at the input
    states: StateEditPlan | None = None  # state-level edits (`state_edits`)


def plan_migration(
    source: Savepoint,
    renames: Sequence[tuple[str, str]] = (),
    drops: Sequence[str] = (),
    state_edits: Sequence[StateEdit] = (),
) -> MigrationPlan:
    """Resolve `renames` (OLD uid or id → NEW uid), `drops` (uid or id) and `state_edits`
    against `source`.

    Errors (unknown operator, an operator named twice, an empty uid, two operators that would
    end up with the same operator id) are StatectlErrors naming the savepoint.
    """
    where = source.directory.url
    named: dict[bytes, str] = {}  # operator id → the option that named it

    def resolve(name: str, option: str) -> OperatorState:
        op = source.find_operator(name)
        if op.operator_id in named:
            raise StatectlError(
                f"operator {describe_operator(op)} is named twice ({named[op.operator_id]} and "
                f"{option})",
                where,
            )
        named[op.operator_id] = option
        return op

    new_uids: dict[bytes, str] = {}
    for old, new in renames:
        if not new:
            raise StatectlError(f"--rename-uid {old}=: the new uid is empty", where)
        if len(encode_modified_utf8(new)) > 0xFFFF:
            raise StatectlError(f"--rename-uid {old}=…: the new uid is too long", where)
        new_uids[resolve(old, f"--rename-uid {old}={new}").operator_id] = new
    dropped = {resolve(name, f"--drop {name}").operator_id for name in drops}

    changes: list[OperatorChange] = []
    operators: list[OperatorState] = []
    owner: dict[bytes, OperatorChange] = {}  # output operator id → the change that put it there
    for op in source.operators:
        if op.operator_id in dropped:
            changes.append(OperatorChange(DROPPED, op.operator_id_hex, op.uid, None, None))
            continue
        if op.operator_id in new_uids:
            uid = new_uids[op.operator_id]
            new_id = operator_id_for_uid(uid)
            change = OperatorChange(RENAMED, op.operator_id_hex, op.uid, new_id.hex(), uid)
            op = dataclasses.replace(op, operator_id=new_id, uid=uid)
        else:
            change = OperatorChange(CARRIED, op.operator_id_hex, op.uid, op.operator_id_hex, op.uid)
        if op.operator_id in owner:
            _id_taken(owner[op.operator_id], change, where)
        owner[op.operator_id] = change
        changes.append(change)
        operators.append(op)
    metadata = dataclasses.replace(source.metadata, operators=tuple(operators))
    states = plan_state_edits(source, state_edits) if state_edits else None
    edited = [*states.rewrites, *states.operator_changes] if states else []
    both = [states.labels[op_id] for op_id in edited if op_id in dropped] if states else []
    if both:
        raise StatectlError(f"operator {both[0]} is dropped and has its states edited", where)
    return MigrationPlan(source, tuple(changes), metadata, states)


def _id_taken(first: OperatorChange, second: OperatorChange, where: str) -> None:
    """Two operators of the output would share an operator id: name the rename at fault."""
    renamed, other = (second, first) if second.action == RENAMED else (first, second)
    if other.action == RENAMED:
        taken = f"the new id of {other.old_uid or other.old_id} (renamed to {other.new_uid!r})"
    else:
        owner = f"operator {other.new_uid} ({other.new_id})" if other.new_uid else other.new_id
        taken = f"taken by {owner}; drop or rename that one too"
    raise StatectlError(
        f"cannot rename {renamed.old_uid or renamed.old_id} to {renamed.new_uid!r}: its "
        f"operator id {renamed.new_id} is {taken}",
        where,
    )


# --- writing ------------------------------------------------------------------------------


@dataclass(frozen=True)
class OperatorReport:
    change: OperatorChange
    files: int
    bytes: int


@dataclass(frozen=True)
class MigrationReport:
    source: str
    destination: str
    metadata_version: int
    operators: tuple[OperatorReport, ...]
    states: tuple[StateEditReport, ...] = ()
    tasks_run: tuple[tuple[str, int], ...] = ()  # ("driver" | "processes" | "spark", tasks)

    def count(self, action: str) -> int:
        return sum(op.change.action == action for op in self.operators)

    @property
    def files(self) -> int:
        return sum(op.files for op in self.operators)

    @property
    def bytes(self) -> int:
        return sum(op.bytes for op in self.operators)


def relocated_metadata(plan: MigrationPlan) -> tuple[CheckpointMetadata, list[CopyTask]]:
    """The output's `_metadata` with every file handle relative, and the copies it needs.

    Copies are named `<output operator id>-<n>`; raises for state that cannot be carried
    (unaligned channel state, changelog state). State that state edits rewrite is left out
    (`migrate` writes it anew)."""
    names = CopyNames(plan.source)
    keyed, operator = _rewritten_operators(plan)
    try:
        operators = tuple(
            carry_over(_without(op, n in keyed, n in operator), names)
            for n, op in enumerate(plan.metadata.operators)
        )
    except StatectlError as exc:
        raise exc.with_source(plan.source.metadata_location.url) from None
    return dataclasses.replace(plan.metadata, operators=operators), names.tasks


def migrate(
    plan: MigrationPlan,
    destination: str,
    *,
    overwrite: bool = False,
    storage_options: dict[str, Any] | None = None,
    progress: ProgressCallback | None = None,
    engine: Engine | None = None,
) -> MigrationReport:
    """Write `plan` into `destination`; nothing is published unless every file was written.

    The copies and every rewritten subtask file are tasks of `engine` (this process if none:
    `factory.choose_engine` picks one), so they run where rescale's run; a replaced state fed
    by tasks (`state_edits.RowFeed`) is written through the engine's shuffle
    (`shuffled_edits`). The driver writes only the operator-state files and `_metadata`."""
    writer.ensure_not_inside(plan.source.directory, destination, storage_options)
    metadata, copies = relocated_metadata(plan)
    staged = writer.stage(destination, overwrite, storage_options)
    engine = engine or LocalEngine()
    try:
        written = _write_files(engine, plan, copies, staged.staging_url, storage_options, progress)
        metadata = _with_keyed_handles(metadata, written.keyed)
        output = locate(staged.staging_url, storage_options)
        metadata = _write_operator_states(plan, metadata, output)
        rewritten = {metadata.operators[position].operator_id for position, _ in written.keyed}
        if progress is not None:
            progress(begun("checking the output"))
        publish(staged, metadata, rewritten)
    except BaseException:
        writer.discard(staged)
        raise
    report = _report(plan, metadata, staged.destination.url)
    return dataclasses.replace(
        report, states=_fed_reports(plan, written), tasks_run=tuple(engine.tasks_run.items())
    )


@dataclass(frozen=True)
class _Written:
    keyed: dict[tuple[int, int], KeyedHandle | None]  # (position, subtask) → new handle
    # (input operator id, state) → the feed and the files its tasks wrote
    fed: dict[tuple[bytes, str], tuple[RowFeed, list[FedFile]]]


def _write_files(
    engine: Engine,
    plan: MigrationPlan,
    copies: list[CopyTask],
    output_url: str,
    storage_options: dict[str, Any] | None,
    progress: ProgressCallback | None,
) -> _Written:
    """Fed states' operators through the engine's shuffle first (a bad row or a function's
    error ends the write before anything else is copied), then the copies and other rewritten
    subtask files as its tasks."""
    checkpoint_id = plan.source.metadata.checkpoint_id
    written = _Written({}, {})
    for op_id, position, state, feed, subtask_rewrites in _fed_operators(plan):
        if progress is not None:  # a query's or a function's rows, through the shuffle
            label = plan.metadata.operators[position].uid or op_id.hex()
            progress(begun(f"writing state {state} (operator {label})"))
        names = [_keyed_name(plan, position, r) for r in subtask_rewrites]
        files = write_fed(
            engine, subtask_rewrites, state, feed, names, output_url, storage_options,
            checkpoint_id,
        )  # fmt: skip
        for file in files:
            written.keyed[position, subtask_rewrites[file.subtask].source.subtask] = file.handle
        written.fed[op_id, state] = feed, files
    rewrites = [(p, r) for p, r in _rewrites(plan) if not _fed_states(r)]
    names = [_keyed_name(plan, position, rewrite) for position, rewrite in rewrites]
    tasks: list[tuple[int, int]] = [(COPY, n) for n in range(len(copies))]
    tasks += [(REWRITE, n) for n in range(len(rewrites))]

    def run(task: tuple[int, int]) -> Any:  # what it closes over travels to Spark's tasks
        kind, n = task
        output = locate(output_url, storage_options)
        if kind == COPY:
            return copy_checked(copies[n], output)
        return write_subtask(rewrites[n][1], output, names[n], checkpoint_id)

    def work(task: tuple[int, int]) -> tuple[int, int]:
        kind, n = task
        return 1, copies[n].source.size if kind == COPY else source_size(rewrites[n][1].source)

    def moves_rows(task: tuple[int, int]) -> bool:
        kind, n = task
        return kind == REWRITE and rows_one_by_one(rewrites[n][1])

    if progress is not None:
        progress(begun("writing files"))
    results = engine.run(tasks, run, work, progress, gil_bound=moves_rows)
    for (position, rewrite), handle in zip(rewrites, results[len(copies) :], strict=True):
        written.keyed[position, rewrite.source.subtask] = handle
    return written


COPY, REWRITE = 0, 1


def _keyed_name(plan: MigrationPlan, position: int, rewrite: SubtaskRewrite) -> str:
    op = plan.metadata.operators[position]
    return f"{op.operator_id_hex}-{rewrite.source.subtask:05d}-keyed"


def _fed_states(rewrite: SubtaskRewrite) -> list[str]:
    return [name for name, change in rewrite.changes.items() if change.fed]


def _fed_operators(
    plan: MigrationPlan,
) -> Iterator[tuple[bytes, int, str, RowFeed, tuple[SubtaskRewrite, ...]]]:
    """(input operator id, output position, state, feed, rewrites) of each fed state."""
    if plan.states is None:
        return
    positions = _output_positions(plan)
    feeds = {(e.operator, e.state): e.feed for e in plan.states.edits if e.feed is not None}
    for op_id, rewrites in plan.states.rewrites.items():
        fed = _fed_states(rewrites[0]) if rewrites else []
        if len(fed) > 1:
            raise StatectlError("one state of an operator at a time can be fed by tasks")
        for state in fed:
            feed = next(f for (op, s), f in feeds.items() if s == state and _names(plan, op, op_id))
            yield op_id, positions[op_id], state, feed, rewrites


def _names(plan: MigrationPlan, name: str, op_id: bytes) -> bool:
    return plan.source.find_operator(name).operator_id == op_id


def _with_keyed_handles(
    metadata: CheckpointMetadata, handles: Mapping[tuple[int, int], KeyedHandle | None]
) -> CheckpointMetadata:
    """`metadata` with each rewritten subtask's new keyed handle."""
    operators = list(metadata.operators)
    for (position, index), handle in handles.items():
        op = operators[position]
        subtasks = tuple(
            dataclasses.replace(s, managed_keyed_state=handle) if s.index == index else s
            for s in op.subtasks or ()
        )
        operators[position] = dataclasses.replace(op, subtasks=subtasks)
    return dataclasses.replace(metadata, operators=tuple(operators))


def _fed_reports(plan: MigrationPlan, written: _Written) -> tuple[StateEditReport, ...]:
    """The edits' reports, fed states' with the rows their tasks wrote and their warnings."""
    if plan.states is None:
        return ()
    feeds = {(plan.states.labels[op_id], state): fed for (op_id, state), fed in written.fed.items()}
    reports = []
    for report in plan.states.reports:
        fed = feeds.get((report.operator, report.state))
        if fed is not None:
            feed, files = fed
            unchecked = unchecked_counts(files)
            warnings = feed.warnings(unchecked) if unchecked else ()
            report = dataclasses.replace(
                report, rows=sum(f.rows for f in files), warnings=report.warnings + warnings
            )
        reports.append(report)
    return tuple(reports)


def _output_positions(plan: MigrationPlan) -> dict[bytes, int]:
    """Input operator id → its position among the output's operators (dropped: absent)."""
    kept = (
        (op.operator_id, change)
        for op, change in zip(plan.source.operators, plan.changes, strict=True)
        if change.action != DROPPED
    )
    return {op_id: n for n, (op_id, _) in enumerate(kept)}


def _rewritten_operators(plan: MigrationPlan) -> tuple[set[int], set[int]]:
    """Positions in the output's operators of those whose keyed state, and of those whose
    operator state, is rewritten."""
    if plan.states is None:
        return set(), set()
    positions = _output_positions(plan)
    return (
        {positions[op_id] for op_id in plan.states.rewrites},
        {positions[op_id] for op_id in plan.states.operator_changes},
    )


def _without(op: OperatorState, keyed: bool, operator: bool) -> OperatorState:
    """The operator without the state it gets anew (its handles left out of the copies)."""
    if op.subtasks is None or not (keyed or operator):
        return op
    subtasks = tuple(
        dataclasses.replace(
            s,
            managed_keyed_state=None if keyed else s.managed_keyed_state,
            managed_operator_state=None if operator else s.managed_operator_state,
        )
        for s in op.subtasks
    )
    return dataclasses.replace(op, subtasks=subtasks)


def _rewrites(plan: MigrationPlan) -> list[tuple[int, SubtaskRewrite]]:
    """(position in the output's operators, subtask rewrite) of every rewritten subtask."""
    if plan.states is None:
        return []
    positions = _output_positions(plan)
    return [
        (positions[op_id], rewrite)
        for op_id, rewrites in plan.states.rewrites.items()
        for rewrite in rewrites
    ]


def _write_operator_states(
    plan: MigrationPlan, metadata: CheckpointMetadata, output: Location
) -> CheckpointMetadata:
    """Every subtask's operator-state file of the operators whose operator states change."""
    if plan.states is None:
        return metadata
    positions = _output_positions(plan)
    operators = list(metadata.operators)
    for op_id, changes in plan.states.operator_changes.items():
        source_op = next(op for op in plan.source.operators if op.operator_id == op_id)
        out_op = operators[positions[op_id]]
        handles = {
            file.subtask: rewrite_file(
                file, changes, output, f"{out_op.operator_id_hex}-{file.subtask:05d}-operator"
            )
            for file in entries.operator_files(plan.source, source_op)
        }
        _check_subtasks(changes, handles, source_op)
        subtasks = tuple(
            dataclasses.replace(s, managed_operator_state=handles.get(s.index))
            for s in out_op.subtasks or ()
        )
        operators[positions[op_id]] = dataclasses.replace(out_op, subtasks=subtasks)
    return dataclasses.replace(metadata, operators=tuple(operators))


def _check_subtasks(
    changes: Mapping[str, OperatorStateChange], written: Mapping[int, object], op: OperatorState
) -> None:
    """New list elements must go to subtasks that hold operator state."""
    for name, change in changes.items():
        missing = sorted(set(change.elements or ()) - set(written))
        if missing:
            raise StatectlError(
                f"state {name!r}: subtask {missing[0]} holds no operator state (the operator "
                f"has {op.parallelism} subtasks)",
                describe_operator(op),
            )


def copy_checked(task: CopyTask, output: Location) -> RelativeFileHandle:
    """One file copied into `output`, checked to be the size its handle says; an OS error (a
    file that vanished since the plan, a full disk) is one line naming the file."""
    try:
        result = copy_file(task, output)
    except OSError as exc:
        raise StatectlError(
            exc.strerror or str(exc), str(exc.filename or task.source.description)
        ) from None
    if result.size != task.source.size:
        raise StatectlError(
            f"copied {result.size} bytes, the handle says {task.source.size}",
            task.source.description,
        )
    return result


def _report(plan: MigrationPlan, metadata: CheckpointMetadata, destination: str) -> MigrationReport:
    """Per operator of the input, the files and bytes the output holds of it: copied or
    written anew (every file of the output is a relative handle in `_metadata`)."""
    sizes = {op.operator_id_hex: [f.size for f in _relative_files(op)] for op in metadata.operators}
    return MigrationReport(
        plan.source.directory.url,
        destination,
        plan.metadata.version,
        tuple(
            OperatorReport(
                change,
                len(sizes.get(change.new_id or "", ())),
                sum(sizes.get(change.new_id or "", ())),
            )
            for change in plan.changes
        ),
        plan.states.reports if plan.states else (),
    )


def _relative_files(part: object) -> Iterator[RelativeFileHandle]:
    """Every relative file handle in a part of the metadata (an operator, a handle, …)."""
    if isinstance(part, RelativeFileHandle):
        yield part
    elif isinstance(part, tuple | list):
        for item in part:
            yield from _relative_files(item)
    elif dataclasses.is_dataclass(part) and not isinstance(part, type):
        for field in dataclasses.fields(part):
            yield from _relative_files(getattr(part, field.name))
