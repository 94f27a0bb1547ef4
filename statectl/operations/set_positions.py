"""Moving sources' positions: a new savepoint whose sources resume where they are told to.

Edits (`KafkaOffsetEdit`, `FilePositionEdit`) name a source operator (uid, id or name, as
`Savepoint.find_operator` resolves it) and the splits to move. Where positions live
(flink-state-values.md §10, `formats/source_state.py`):

* **KafkaSource**: each reader's `SourceReaderState` split (`KafkaPartitionSplit.startingOffset`,
  the next offset to read, or a marker: `earliest` -2, `latest` -1, `committed` -3, which the
  split reader resolves on restore). The enumerator's state (coordinator state) of connector
  ≤ 4.x (serializer v1/v2) keeps partitions only, no offsets: it is left as it is. Connector
  5.0's v3 keeps a split with offsets per known partition: the matching ones are set too, so
  enumerator and readers agree (and a partition discovered but not yet assigned, held by the
  enumerator alone, is moved there).
* **FlinkKafkaConsumer** (Flink 1.x): the `topic-partition-offset-states` union list. It stores
  the last processed offset (restore seeks to offset + 1), so an edit to offset N stores N - 1;
  markers become `KafkaTopicPartitionStateSentinel` EARLIEST_OFFSET, LATEST_OFFSET and
  GROUP_OFFSET (committed).
* **FileSource**: each reader's `SourceReaderState` split (its `CheckpointedPosition`: an
  offset, or -1 for formats that count records only, and the records after it already
  emitted; no position = from the split's start), and the enumerator's pending splits
  (`PendingSplitsCheckpoint`: splits not yet assigned; ones given back by a failed reader keep
  a position). Both are edited wherever the split is.

Only the bytes of a position change: the operator-state files holding an edited element are
written anew (their header copied, the compression flag cleared and every element written
uncompressed, like rescale; inline state stays inline), the coordinator state is rewritten in
`_metadata`, and everything else is carried over as `migrate` does: files copied and named by
relative handles, `_metadata` published last, the input never modified.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from statectl.errors import StatectlError
from statectl.formats import operator_state, state_headers
from statectl.formats import source_state as ss
from statectl.formats.handles import (
    ByteStreamHandle,
    HandleCode,
    OperatorStateHandle,
    OperatorStateOffsets,
    RelativeFileHandle,
)
from statectl.formats.metadata import CheckpointMetadata, OperatorState
from statectl.operations.migrate import MigrationPlan, copy_checked
from statectl.operations.positions import LEGACY_KAFKA, source_positions
from statectl.operations.publish import publish
from statectl.progress import Progress, ProgressCallback
from statectl.savepoint import writer
from statectl.savepoint.entries import OperatorFile, operator_files
from statectl.savepoint.files import CopyTask, OutputFile
from statectl.savepoint.model import Savepoint, describe_operator
from statectl.savepoint.relocate import CopyNames, carry_over
from statectl.savepoint.storage import Location, locate

EARLIEST, LATEST, COMMITTED = "earliest", "latest", "committed"
MARKERS = (EARLIEST, LATEST, COMMITTED)
# KafkaPartitionSplit.EARLIEST_OFFSET, LATEST_OFFSET, COMMITTED_OFFSET
KAFKA_SOURCE_MARKERS = {EARLIEST: -2, LATEST: -1, COMMITTED: -3}
# KafkaTopicPartitionStateSentinel.EARLIEST_OFFSET, LATEST_OFFSET, GROUP_OFFSET
LEGACY_KAFKA_MARKERS = {EARLIEST: -915623761775, LATEST: -915623761774, COMMITTED: -915623761773}
ENUMERATOR = "enumerator"  # PositionChange.state of a change in the coordinator state

Position = int | tuple[int, int] | None


@dataclass(frozen=True)
class KafkaOffsetEdit:
    """Move Kafka partitions of `operator` (KafkaSource or FlinkKafkaConsumer).

    `topic` None: every topic; `partition` None: every partition of the topic(s). `offset`:
    the next offset to read (≥ 0), or `earliest`, `latest`, `committed`."""

    operator: str
    topic: str | None
    partition: int | None
    offset: int | str

    def describe(self) -> str:
        where = f"{self.operator}:{self.topic or '*'}"
        where += f":{self.partition}" if self.partition is not None else ""
        return f"kafka offset {where}={self.offset}"


@dataclass(frozen=True)
class FilePositionEdit:
    """Move FileSource splits of `operator`: `split` is a split id or a file's path (as
    `statectl positions` shows it, or without its scheme). `position`: (offset, records to
    skip after it), offset -1 for formats that count records only (text lines); None: read
    the split from its start."""

    operator: str
    split: str
    position: tuple[int, int] | None

    def describe(self) -> str:
        to = "start" if self.position is None else ",".join(map(str, self.position))
        return f"file position {self.operator}:{self.split}={to}"


PositionEdit = KafkaOffsetEdit | FilePositionEdit


@dataclass(frozen=True)
class PositionChange:
    """One split moved. `old`/`new`: for Kafka the stored offset (markers as their values:
    `render_position` names them), for a file split (offset, records to skip) or None."""

    operator_id: str  # in the output (a renamed operator's new id)
    uid: str | None
    kind: str  # file | kafka | legacy-kafka
    state: str  # SourceReaderState, topic-partition-offset-states or ENUMERATOR
    subtask: int | None  # None: the enumerator's
    split_id: str  # file: the split id; Kafka: topic-partition
    old: Position
    new: Position

    @property
    def old_text(self) -> str:
        return render_position(self.kind, self.old)

    @property
    def new_text(self) -> str:
        return render_position(self.kind, self.new)


def render_position(kind: str, position: Position) -> str:
    """A stored position as text: markers by name, a legacy offset as the next one to read."""
    if position is None:
        return "start"
    if isinstance(position, tuple):
        offset, records = position
        if offset == ss.FILE_NO_OFFSET:
            return f"{records} records"
        return f"offset {offset} + {records} records"
    if kind == LEGACY_KAFKA:
        marker = ss.LEGACY_KAFKA_MARKERS.get(position)
        return marker or f"{position + 1} (stored {position})"
    return ss.KAFKA_STARTING_MARKERS.get(position) or str(position)


@dataclass(frozen=True)
class NewFile:
    """An operator-state file written anew into the destination."""

    name: str
    data: bytes


@dataclass(frozen=True)
class PositionsPlan:
    source: Savepoint
    changes: tuple[PositionChange, ...]
    metadata: CheckpointMetadata  # the output's: relative handles only
    copies: tuple[CopyTask, ...]
    new_files: tuple[NewFile, ...]


@dataclass(frozen=True)
class PositionsReport:
    source: str
    destination: str
    metadata_version: int
    changes: tuple[PositionChange, ...]
    new_files: tuple[str, ...]  # operator-state files written anew
    copied_files: int
    copied_bytes: int


# --- planning --------------------------------------------------------------------------------


def plan_positions(
    source: Savepoint, edits: Sequence[PositionEdit], *, migration: MigrationPlan | None = None
) -> PositionsPlan:
    """Resolve and apply `edits` in memory (later edits win for a split two of them name).

    With `migration` (`plan_migration` of the same savepoint), its renames and drops are
    applied as well: edits name operators as the input does. An edit that matches no split, or
    names an operator that is not a source of its kind, is a StatectlError naming the
    savepoint; nothing is written then."""
    where = source.directory.url
    base = migration.metadata if migration is not None else source.metadata
    renamed = {c.old_id: c.new_id for c in migration.changes} if migration else {}
    by_output: dict[str, list[PositionEdit]] = {}
    originals: dict[str, OperatorState] = {}
    for edit in edits:
        _check_edit(edit, where)
        op = source.find_operator(edit.operator)
        out_id = renamed[op.operator_id_hex] if migration else op.operator_id_hex
        if out_id is None:
            raise StatectlError(
                f"{edit.describe()}: operator {describe_operator(op)} is dropped", where
            )
        by_output.setdefault(out_id, []).append(edit)
        originals[out_id] = op
    names = CopyNames(source)
    operators: list[OperatorState] = []
    changes: list[PositionChange] = []
    new_files: list[NewFile] = []
    for out_op in base.operators:
        wanted = by_output.get(out_op.operator_id_hex)
        if not wanted:
            operators.append(_carry(out_op, names, source))
            continue
        edited = _OperatorEdit(source, originals[out_op.operator_id_hex], out_op, wanted)
        operators.append(edited.apply(names))
        changes.extend(edited.changes)
        new_files.extend(edited.new_files)
    metadata = dataclasses.replace(base, operators=tuple(operators))
    return PositionsPlan(source, tuple(changes), metadata, tuple(names.tasks), tuple(new_files))


def _carry(op: OperatorState, names: CopyNames, source: Savepoint) -> OperatorState:
    try:
        return carry_over(op, names)
    except StatectlError as exc:
        raise exc.with_source(source.metadata_location.url) from None


def _check_edit(edit: PositionEdit, where: str) -> None:
    if isinstance(edit, KafkaOffsetEdit):
        if isinstance(edit.offset, str):
            ok = edit.offset in MARKERS
        else:
            ok = not isinstance(edit.offset, bool) and edit.offset >= 0
        if not ok:
            raise StatectlError(
                f"{edit.describe()}: an offset is a number ≥ 0 or one of {', '.join(MARKERS)}",
                where,
            )
        if edit.partition is not None and edit.partition < 0:
            raise StatectlError(f"{edit.describe()}: a partition is a number ≥ 0", where)
    elif edit.position is not None:
        offset, records = edit.position
        if offset < ss.FILE_NO_OFFSET or records < 0:
            raise StatectlError(
                f"{edit.describe()}: the offset is -1 (records only) or ≥ 0, the records to "
                "skip ≥ 0",
                where,
            )


class _OperatorEdit:
    """The edits of one source operator, applied to its reader and coordinator state."""

    def __init__(
        self, sp: Savepoint, op: OperatorState, out_op: OperatorState, edits: list[PositionEdit]
    ) -> None:
        self.sp, self.op, self.out_op, self.edits = sp, op, out_op, edits
        self.where = sp.directory.url
        self.matched = [False] * len(edits)
        self.changes: list[PositionChange] = []
        self.new_files: list[NewFile] = []
        found = source_positions(sp, op)
        self.kind = found.kind if found is not None else None
        self.seen: list[str] = []  # split ids, for the error of an edit that matches nothing
        self._check_kind()

    def _check_kind(self) -> None:
        for edit in self.edits:
            kafka = isinstance(edit, KafkaOffsetEdit)
            fits = self.kind in ((ss.KAFKA, LEGACY_KAFKA) if kafka else (ss.FILE,))
            if not fits:
                what = self.kind or "no recognised"
                expected = "KafkaSource or FlinkKafkaConsumer" if kafka else "FileSource"
                raise StatectlError(
                    f"{edit.describe()}: operator {describe_operator(self.op)} is {what} "
                    f"source, not a {expected}",
                    self.where,
                )

    def apply(self, names: CopyNames) -> OperatorState:
        rewritten: dict[int, OperatorStateHandle] = {}
        for file in operator_files(self.sp, self.op):
            handle = self._rewrite_file(file)
            if handle is not None:
                rewritten[file.subtask] = handle
        coordinator = self._rewrite_coordinator()
        for edit, matched in zip(self.edits, self.matched, strict=True):
            if not matched:
                self._unmatched(edit)
        op = self.out_op
        if rewritten:  # the old files of rewritten subtasks are not copied
            subtasks = tuple(
                dataclasses.replace(s, managed_operator_state=None) if s.index in rewritten else s
                for s in op.subtasks or ()
            )
            op = dataclasses.replace(op, subtasks=subtasks)
        op = _carry(op, names, self.sp)
        if rewritten:
            subtasks = tuple(
                dataclasses.replace(s, managed_operator_state=rewritten[s.index])
                if s.index in rewritten
                else s
                for s in op.subtasks or ()
            )
            op = dataclasses.replace(op, subtasks=subtasks)
        if coordinator is not None:
            op = dataclasses.replace(op, coordinator_state=coordinator)
        return op

    def _unmatched(self, edit: PositionEdit) -> None:
        known = ", ".join(dict.fromkeys(self.seen)) or "none"
        if len(known) > 200:
            known = known[:200] + "…"
        raise StatectlError(
            f"{edit.describe()}: no split of operator {describe_operator(self.op)} matches "
            f"(its splits: {known})",
            self.where,
        )

    # --- reader state: operator-state files

    def _rewrite_file(self, file: OperatorFile) -> OperatorStateHandle | None:
        wanted = {ss.READER_STATE, ss.LEGACY_KAFKA_STATE}
        if not wanted & {s.name for s in file.handle.states}:
            return None
        stream = file.stream
        try:
            data = stream.read()
            layout = operator_state.file_layout(file.handle.states, stream.size, data)
            header = data[: layout.header_length]
            if layout.compressed:
                header = state_headers.set_operator_header_compression(header, False)
            out = bytearray(header)
            states, changed = [], False
            for state in layout.states:
                offsets = []
                for index, (start, end) in enumerate(state.spans):
                    value = operator_state.element_bytes(data[start:end], layout.compressed)
                    if state.name in wanted:
                        where = (
                            f"{stream.description} (state {state.name}, subtask "
                            f"{file.subtask}, element {index})"
                        )
                        new = self._element(state.name, file.subtask, value, where)
                        changed = changed or new != value
                        value = new
                    offsets.append(len(out))
                    out += value
                states.append(OperatorStateOffsets(state.name, state.mode, tuple(offsets)))
        except StatectlError as exc:
            raise exc.with_source(stream.description) from None
        if not changed:
            return None
        code = HandleCode.PARTITIONABLE_OPERATOR_STATE
        old = file.handle.delegate
        if isinstance(old, ByteStreamHandle):  # inline state stays inline
            return OperatorStateHandle(code, tuple(states), ByteStreamHandle(old.name, bytes(out)))
        name = f"{self.out_op.operator_id_hex}-positions-{file.subtask:05d}"
        self.new_files.append(NewFile(name, bytes(out)))
        return OperatorStateHandle(code, tuple(states), RelativeFileHandle(name, len(out)))

    def _element(self, state: str, subtask: int, value: bytes, where: str) -> bytes:
        try:
            if state == ss.LEGACY_KAFKA_STATE:
                return self._legacy(subtask, value)
            framed = ss.read_reader_state_element(value)
            if self.kind == ss.KAFKA:
                new = self._kafka_split(ss.READER_STATE, subtask, framed)
            else:
                new = self._file_split(subtask, framed)
            return ss.write_reader_state_element(new) if new is not None else value
        except StatectlError as exc:
            raise exc.with_source(where) from None

    def _kafka_target(self, topic: str, partition: int) -> int | str | None:
        self.seen.append(f"{topic}-{partition}")
        target = None
        for n, edit in enumerate(self.edits):
            if not isinstance(edit, KafkaOffsetEdit):
                continue
            if edit.topic not in (None, topic) or edit.partition not in (None, partition):
                continue
            self.matched[n] = True
            target = edit.offset
        return target

    def _kafka_split(self, state: str, subtask: int, framed: ss.Versioned) -> ss.Versioned | None:
        split = ss.read_kafka_split(framed.data, framed.version)
        target = self._kafka_target(split.topic, split.partition)
        if target is None:
            return None
        new = KAFKA_SOURCE_MARKERS[target] if isinstance(target, str) else target
        self._change(state, subtask, split.split_id, split.starting_offset, new)
        moved = dataclasses.replace(split, starting_offset=new)
        return ss.Versioned(framed.version, ss.write_kafka_split(moved, framed.version))

    def _legacy(self, subtask: int, value: bytes) -> bytes:
        offset = ss.read_legacy_kafka_element(value)
        target = self._kafka_target(offset.topic, offset.partition)
        if target is None:
            return value
        new = LEGACY_KAFKA_MARKERS[target] if isinstance(target, str) else target - 1
        split_id = f"{offset.topic}-{offset.partition}"
        self._change(ss.LEGACY_KAFKA_STATE, subtask, split_id, offset.offset, new)
        return ss.write_legacy_kafka_element(dataclasses.replace(offset, offset=new))

    def _file_target(self, split: ss.FileSplit) -> tuple[bool, tuple[int, int] | None]:
        self.seen.append(split.split_id)
        found, target = False, None
        for n, edit in enumerate(self.edits):
            if not isinstance(edit, FilePositionEdit) or not _names_split(edit.split, split):
                continue
            if edit.position is not None:
                _check_in_split(edit, split, self.where)
            self.matched[n] = True
            found, target = True, edit.position
        return found, target

    def _file_split(self, subtask: int, framed: ss.Versioned) -> ss.Versioned | None:
        split = ss.read_file_split(framed.data, framed.version)
        found, target = self._file_target(split)
        if not found:
            return None
        self._change(ss.READER_STATE, subtask, split.split_id, ss.file_position(split), target)
        data = ss.set_file_split_position(framed.data, target, framed.version)
        return ss.Versioned(framed.version, data)

    def _change(
        self, state: str, subtask: int | None, split_id: str, old: Position, new: Position
    ) -> None:
        op, kind = self.out_op, self.kind or ""
        change = PositionChange(
            op.operator_id_hex, op.uid, kind, state, subtask, split_id, old, new
        )
        self.changes.append(change)

    # --- enumerator: the coordinator state in _metadata

    def _rewrite_coordinator(self) -> ByteStreamHandle | None:
        handle = self.op.coordinator_state
        if handle is None or self.kind == LEGACY_KAFKA:
            return None
        try:
            state = ss.read_coordinator_state(self.sp.stream(handle).read())
        except StatectlError:
            return None  # not a SourceCoordinator's (positions reads it the same way)
        where = (
            f"{self.sp.metadata_location.url} (coordinator state of {describe_operator(self.op)})"
        )
        try:
            body = self._enumerator(state.enumerator)
        except StatectlError as exc:
            raise exc.with_source(where) from None
        if body is None:
            return None
        moved = dataclasses.replace(state, enumerator=ss.Versioned(state.enumerator.version, body))
        return ByteStreamHandle(handle.name, ss.write_coordinator_state(moved))

    def _enumerator(self, state: ss.Versioned) -> bytes | None:
        if self.kind == ss.FILE:
            enum = ss.read_file_enumerator(state.data, state.version)
            targets: dict[str, tuple[int, int] | None] = {}
            for split in enum.pending:
                found, target = self._file_target(split)
                if found:
                    old = ss.file_position(split)
                    self._change(ENUMERATOR, None, split.split_id, old, target)
                    targets[split.split_id] = target
            if not targets:
                return None
            return ss.set_file_enumerator_positions(state.data, targets, state.version)
        kafka = ss.read_kafka_enumerator(state.data, state.version)
        if kafka.version != 3:  # v1/v2: partitions without offsets
            return None
        parts, changed = [], False
        for part in kafka.partitions:
            offset = self._kafka_target(part.topic, part.partition)
            if offset is not None:
                new = KAFKA_SOURCE_MARKERS[offset] if isinstance(offset, str) else offset
                split_id = f"{part.topic}-{part.partition}"
                self._change(ENUMERATOR, None, split_id, part.starting_offset, new)
                part = dataclasses.replace(part, starting_offset=new)
                changed = True
            parts.append(part)
        if not changed:
            return None
        return ss.write_kafka_enumerator(dataclasses.replace(kafka, partitions=tuple(parts)))


def _names_split(name: str, split: ss.FileSplit) -> bool:
    """A split id, its path as rendered, or that path without its scheme and authority."""
    if name in (split.split_id, split.path):
        return True
    match = _SCHEME_AUTHORITY.fullmatch(split.path or "")
    return match is not None and name == match.group(1)


_SCHEME_AUTHORITY = re.compile(r"(?:[A-Za-z][A-Za-z0-9+.\-]*:)?(?://[^/]*)?(/.*)", re.DOTALL)


def _check_in_split(edit: FilePositionEdit, split: ss.FileSplit, where: str) -> None:
    assert edit.position is not None
    offset = edit.position[0]
    end = split.offset + split.length
    if offset != ss.FILE_NO_OFFSET and not split.offset <= offset <= end:
        raise StatectlError(
            f"{edit.describe()}: offset {offset} is outside split {split.split_id} "
            f"(bytes {split.offset}–{end} of {split.path})",
            where,
        )


# --- writing ---------------------------------------------------------------------------------


def write_positions(
    plan: PositionsPlan,
    destination: str,
    *,
    overwrite: bool = False,
    storage_options: dict[str, Any] | None = None,
    progress: ProgressCallback | None = None,
) -> PositionsReport:
    """Write `plan` into `destination`: copies, new operator-state files, then `_metadata`
    (published last; nothing is published unless every file was written)."""
    source = plan.source
    writer.ensure_not_inside(source.directory, destination, storage_options)
    staged = writer.stage(destination, overwrite, storage_options)
    try:
        output = locate(staged.staging_url, storage_options)
        total = sum(t.source.size for t in plan.copies) + sum(len(f.data) for f in plan.new_files)
        steps = len(plan.copies) + len(plan.new_files)
        done = _Done(progress, steps, total)
        copied = 0
        for task in plan.copies:
            copied += copy_checked(task, output).size
            done.add(task.source.size)
        for new in plan.new_files:
            _write(output, new)
            done.add(len(new.data))
        publish(staged, plan.metadata, rewritten=())  # keyed state is copied, never rewritten
    except BaseException:
        writer.discard(staged)
        raise
    return PositionsReport(
        source.directory.url,
        staged.destination.url,
        plan.metadata.version,
        plan.changes,
        tuple(f.name for f in plan.new_files),
        len(plan.copies),
        copied,
    )


def set_positions(
    source: Savepoint,
    edits: Sequence[PositionEdit],
    destination: str,
    *,
    overwrite: bool = False,
    storage_options: dict[str, Any] | None = None,
    progress: ProgressCallback | None = None,
) -> PositionsReport:
    """`plan_positions` then `write_positions`."""
    plan = plan_positions(source, edits)
    return write_positions(
        plan, destination, overwrite=overwrite, storage_options=storage_options, progress=progress
    )


class _Done:
    def __init__(self, progress: ProgressCallback | None, steps: int, total: int) -> None:
        self.progress: Callable[[Progress], None] | None = progress
        self.steps, self.total, self.step, self.bytes = steps, total, 0, 0

    def add(self, size: int) -> None:
        self.step += 1
        self.bytes += size
        if self.progress is not None:
            self.progress(Progress(self.step, self.steps, self.bytes, self.total))


def _write(output: Location, new: NewFile) -> None:
    out = OutputFile(output.child(new.name))
    try:
        out.write(new.data)
    except OSError as exc:
        raise StatectlError(exc.strerror or str(exc), output.child(new.name).url) from None
    finally:
        out.close()
