"""Executing one piece of a plan: the code an engine's task runs, on either engine.

A subtask task writes one keyed-state file (header, then the planned block runs copied as
bytes) and one operator-state file (header, then the planned elements), and returns the new
offsets; `savepoint.files` does the byte-range copies, so memory stays flat whatever the state
size.
"""

from __future__ import annotations

import itertools
import operator as operators
import shutil
import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from statectl.errors import FormatError, StatectlError
from statectl.formats import keyed_blocks, snappy_framed
from statectl.formats.handles import (
    HandleCode,
    IncrementalKeyedHandle,
    KeyGroupsHandle,
    OperatorStateHandle,
    OperatorStateOffsets,
    RelativeFileHandle,
)
from statectl.operations.rescale.plan import (
    BlockRun,
    HeapRun,
    KeyedTarget,
    NativeRun,
    OperatorTarget,
    SubtaskTarget,
)
from statectl.operations.rescale.rekey import Chunk, RekeyOperator
from statectl.savepoint import native
from statectl.savepoint.entries import HeapKeyGroup, heap_key_group_rows
from statectl.savepoint.files import CopyTask, OutputFile, copy_file
from statectl.savepoint.native_files import FileCounts, FileSource, NotByFiles, assemble
from statectl.savepoint.native_writer import InstanceWriter, NativeOutput
from statectl.savepoint.storage import Location, locate

_FLUSH_BYTES = 1 << 20  # re-hashed entries are small: write them in pieces of this size


@dataclass(frozen=True, slots=True)
class SubtaskResult:
    """A new subtask's files, as the handles of the new `_metadata` reference them."""

    operator_id: str
    index: int
    keyed: KeyGroupsHandle | IncrementalKeyedHandle | None
    operator: OperatorStateHandle | None
    sst_files: FileCounts | None = None  # a RocksDB instance assembled by files


Task = SubtaskTarget | CopyTask
Result = SubtaskResult | RelativeFileHandle  # a new subtask's files, or a copied file


def task_bytes(task: Task) -> int:
    """Bytes a task reads (native runs: their share of the instance): what balances Spark
    tasks and what progress counts."""
    if isinstance(task, CopyTask):
        return task.source.size
    size = 0
    if task.keyed is not None:
        size += task.keyed.size
        for run in task.keyed.native:
            owned = run.instance.key_groups or (run.first, run.last)
            size += run.instance.size * (run.last - run.first + 1) // (owned[1] - owned[0] + 1)
        size += sum(run.size for run in task.keyed.heap)
    if task.operator is not None:
        size += task.operator.size
    return size


def task_files(task: Task) -> int:
    """Files a task writes: a copy one, a new subtask its keyed and operator-state files."""
    if isinstance(task, CopyTask):
        return 1
    return (task.keyed is not None) + (task.operator is not None)


def task_work(task: Task) -> tuple[int, int]:
    """A task's share of the progress (`engine.Work`): files written, bytes read."""
    return task_files(task), task_bytes(task)


def moves_rows(task: Task) -> bool:
    """Whether the task moves RocksDB rows or heap-format entries through Python one by one
    (native input or output, heap input): work that holds the GIL, which a driver's threads
    cannot share but processes can (a head start's workers, Spark's)."""
    keyed = task.keyed if isinstance(task, SubtaskTarget) else None
    return keyed is not None and (bool(keyed.native or keyed.heap) or keyed.output is not None)


def run_task(task: Task, output_url: str, storage_options: dict[str, Any] | None) -> Result:
    """Entry point of a Spark task: write the task's file(s) into the output folder."""
    output = locate(output_url, storage_options)
    if isinstance(task, CopyTask):
        return copy_file(task, output)
    name = f"{task.file_prefix}-keyed"
    keyed: KeyGroupsHandle | IncrementalKeyedHandle | None = None
    counts = None
    if task.keyed is not None and task.keyed.output is not None:
        keyed, counts = write_native_keyed(task.keyed, task.keyed.output, output, name)
    elif task.keyed is not None:
        keyed = _write_keyed(task.keyed, output, name)
    operator = (
        _write_operator(task.operator, output, f"{task.file_prefix}-operator")
        if task.operator
        else None
    )
    return SubtaskResult(task.operator_id, task.index, keyed, operator, counts)


def _write_keyed(target: KeyedTarget, output: Location, name: str) -> KeyGroupsHandle:
    first, last = target.key_groups
    offsets = [0] * (last - first + 1)
    out = OutputFile(output.child(name))
    try:
        out.write(target.header)
        for run in target.runs:
            _write_run(out, run, offsets, first, target.compressed)
        for native_run in target.native:
            _write_native_run(out, native_run, offsets, first)
        for heap_run in target.heap:
            _write_heap_run(out, heap_run, offsets, first)
    finally:
        size = out.close()
    return _keyed_handle(name, size, first, offsets)


def _write_run(
    out: OutputFile, run: BlockRun, offsets: list[int], first_key_group: int, compressed: bool
) -> None:
    if run.state_id_map is None:
        base = out.pos
        out.copy(run.source, run.start, run.end)
        for key_group, old_offset in run.offsets:
            offsets[key_group - first_key_group] = base + old_offset - run.start
        return
    mapping = dict(run.state_id_map)
    ends = [offset for _, offset in run.offsets[1:]] + [run.end]
    for (key_group, start), end in zip(run.offsets, ends, strict=True):
        block = run.source.read(start, end)
        offsets[key_group - first_key_group] = out.pos
        try:
            out.write(keyed_blocks.remap_state_ids(block, mapping, compressed))
        except StatectlError as exc:
            raise exc.with_source(f"{run.source.description} (key group {key_group})") from None


def _write_native_run(
    out: OutputFile, run: NativeRun, offsets: list[int], first_key_group: int
) -> None:
    """Canonical blocks built from a RocksDB instance (opened on this executor's local disk)."""
    pieces = native.read_block_pieces(
        run.instance, run.states, run.first, run.last, run.prefix_bytes
    )
    started = None
    for key_group, piece in pieces:
        if key_group != started:
            offsets[key_group - first_key_group] = out.pos
            started = key_group
        out.write(piece)


def _heap_key_groups(run: HeapRun) -> Iterator[HeapKeyGroup]:
    """The run's key groups as rows per state id of the new header (`entries`)."""
    return heap_key_group_rows(
        run.source, run.spans, run.header, run.max_parallelism, run.flink_major, run.state_id_map
    )


def _write_heap_run(
    out: OutputFile, run: HeapRun, offsets: list[int], first_key_group: int
) -> None:
    """Canonical blocks built from key groups in the hashmap backend's own snapshot format,
    each state's entries in the order that format holds them (Flink's own canonical savepoint
    of the hashmap backend writes its maps' order too)."""
    for key_group, states in _heap_key_groups(run):
        offsets[key_group - first_key_group] = out.pos
        try:
            out.write(keyed_blocks.build_block(states))
        except ValueError as exc:
            where = f"{run.source.description} (key group {key_group})"
            raise FormatError(str(exc), where) from None


def _write_operator(target: OperatorTarget, output: Location, name: str) -> OperatorStateHandle:
    out = OutputFile(output.child(name))
    states = []
    try:
        out.write(target.header)
        for share in target.states:
            offsets = []
            for element in share.spans:
                offsets.append(out.pos)
                if element.compressed:
                    chunks = element.source.read(element.start, element.end)
                    try:
                        out.write(snappy_framed.decompress_chunks(chunks))
                    except StatectlError as exc:
                        raise exc.with_source(element.source.description) from None
                else:
                    out.copy(element.source, element.start, element.end)
            states.append(OperatorStateOffsets(share.name, share.mode, tuple(offsets)))
    finally:
        size = out.close()
    file = RelativeFileHandle(name, size)
    return OperatorStateHandle(HandleCode.PARTITIONABLE_OPERATOR_STATE, tuple(states), file)


def write_rekeyed(
    operator: RekeyOperator,
    index: int,
    chunks: Iterable[tuple[int, Chunk]],
    output_url: str,
    storage_options: dict[str, Any] | None,
) -> SubtaskResult:
    """The keyed-state file of new subtask `index` of a re-hashed operator, from its (key
    group, chunk) pairs sorted by key group (the shuffle's order); written a key group at a
    time, so memory holds one key group's chunks."""
    if operator.native is not None:
        return write_rekeyed_native(
            operator, operator.native, index, chunks, output_url, storage_options
        )
    first, last = operator.key_groups(index)
    offsets = [0] * (last - first + 1)
    name = operator.file_name(index)
    out = OutputFile(locate(output_url, storage_options).child(name))
    pending = bytearray()
    try:
        out.write(operator.header)
        for key_group, group in itertools.groupby(chunks, key=operators.itemgetter(0)):
            if not first <= key_group <= last:
                raise FormatError(
                    f"key group {key_group} is outside subtask {index}'s range {first}–{last}"
                )
            offsets[key_group - first] = out.pos + len(pending)
            _append_block([chunk for _, chunk in group], pending)
            if len(pending) >= _FLUSH_BYTES:
                out.write(pending)
                pending = bytearray()
        out.write(pending)
    finally:
        size = out.close()
    keyed = _keyed_handle(name, size, first, offsets)
    return SubtaskResult(operator.operator_id, index, keyed, None)


_U16 = struct.Struct(">H")


def _append_block(chunks: list[Chunk], out: bytearray) -> None:
    """One key group's block from its chunks: per state id (ascending), the chunks' runs in
    shuffle order, the last entry of each run flagged (`keyed_blocks` layout), the end mark."""
    views = [memoryview(payload) for payload, _ in chunks]
    runs = sorted(
        (state_id, n, start, end, flag)
        for n, (_, chunk_runs) in enumerate(chunks)
        for state_id, start, end, flag in chunk_runs
    )
    for state_id, state_runs in itertools.groupby(runs, key=operators.itemgetter(0)):
        out += _U16.pack(state_id)
        *middle, (_, n, start, end, flag) = state_runs
        for _, m, a, b, _ in middle:
            out += views[m][a:b]
        view = views[n]
        out += view[start:flag]
        out.append(view[flag] | keyed_blocks.FIRST_BIT_IN_BYTE_MASK)
        out += view[flag + 1 : end]
    out += _U16.pack(keyed_blocks.END_OF_KEY_GROUP_MARK)


def _keyed_handle(
    name: str, size: int, first_key_group: int, offsets: list[int]
) -> KeyGroupsHandle:
    """A new canonical keyed-state file, as a savepoint's `_metadata` references it."""
    file = RelativeFileHandle(name, size)
    return KeyGroupsHandle(HandleCode.SAVEPOINT_KEY_GROUPS, first_key_group, tuple(offsets), file)


# --- RocksDB native output -----------------------------------------------------------------


def write_native_keyed(
    target: KeyedTarget, how: NativeOutput, output: Location, name: str
) -> tuple[IncrementalKeyedHandle, FileCounts | None]:
    """A new subtask's RocksDB instance: assembled from the old instances' SST files when it
    is made of old instances only (`native_files`), else from canonical block runs,
    heap-format runs and old instances' rows; what became of the SST files, if by files.

    Runs come in key-group order, so each column family receives its rows ascending; the
    entries of a canonical block or heap-format key group are sorted per state (the hashmap
    backend writes them in its maps' order, RocksDB's iterator in key order)."""
    with InstanceWriter(how.families, target.key_groups, how.prefix_bytes) as instance:
        counts = _by_files(target, how, instance)
        if counts is not None:
            return instance.finish(target.header, output, name, how.checkpoint_id), counts
        others = list(target.native)
        if not target.runs and others:  # the widest old instance clipped by RocksDB
            widest = max(others, key=lambda run: run.last - run.first)
            instance.adopt(widest.instance, widest.first, widest.last)
            others.remove(widest)
        for run in target.runs:
            _put_block_run(instance, run, target.compressed)
        for heap_run in target.heap:  # in key-group order: each family's rows ascend
            for _, states in _heap_key_groups(heap_run):
                for state_id, entries in states:
                    instance.put_rows(state_id, sorted(entries))
        for native_run in others:
            with native.opened(native_run.instance) as db:
                for family, state_id in native_run.states:
                    first, last = native_run.first, native_run.last
                    rows = db.rows(family, first, last, native_run.prefix_bytes)
                    instance.put_rows(state_id, rows)
        return instance.finish(target.header, output, name, how.checkpoint_id), None


def _by_files(
    target: KeyedTarget, how: NativeOutput, instance: InstanceWriter
) -> FileCounts | None:
    """The instance assembled from the old instances' files, if the target is made of old
    instances only whose column families are the new header's states, by the same names;
    None (nothing done) when it cannot be, and rows move instead."""
    if target.runs or target.heap or not target.native or not how.by_files:
        return None
    for run in target.native:
        if any(how.families[state_id] != family for family, state_id in run.states):
            return None
    sources = [FileSource(run.instance, run.first, run.last) for run in target.native]
    folder = instance.folder + "/db"
    try:
        counts = assemble(sources, folder, target.key_groups, how.prefix_bytes, how.families)
    except NotByFiles:
        shutil.rmtree(folder, ignore_errors=True)
        return None
    instance.use_instance(folder)
    return counts


def _put_block_run(instance: InstanceWriter, run: BlockRun, compressed: bool) -> None:
    """The run's canonical blocks as rows: each state's entries located by `entry_scan` and
    sorted by Arrow's kernels (`chunk_rows`), not walked and sorted entry by entry."""
    from statectl.formats.values.batch import Buffer
    from statectl.operations.rescale import chunk_rows  # Arrow: a canonical rescale needs none

    mapping = dict(run.state_id_map or ())
    ends = [offset for _, offset in run.offsets[1:]] + [run.end]
    for (key_group, start), end in zip(run.offsets, ends, strict=True):
        try:
            block = Buffer(keyed_blocks.raw_block(run.source.read(start, end), compressed))
            found = chunk_rows.block_rows(block, key_group, instance.prefix_bytes)
            for state_id, keys, values in found:
                rows = chunk_rows.in_key_order(keys, values)
                instance.put_rows(mapping.get(state_id, state_id), rows)
        except StatectlError as exc:
            raise exc.with_source(f"{run.source.description} (key group {key_group})") from None


def write_rekeyed_native(
    operator: RekeyOperator,
    how: NativeOutput,
    index: int,
    chunks: Iterable[tuple[int, Chunk]],
    output_url: str,
    storage_options: dict[str, Any] | None,
) -> SubtaskResult:
    """New subtask `index` of a re-hashed operator as a RocksDB instance, from its (key group,
    chunk) pairs sorted by key group: each key group's rows sorted by key per column family,
    so every column family receives its rows ascending."""
    from statectl.operations.rescale import chunk_rows  # Arrow: a canonical rescale needs none

    name = f"{operator.operator_id}-{index:05d}"
    output = locate(output_url, storage_options)
    with InstanceWriter(how.families, operator.key_groups(index), how.prefix_bytes) as instance:
        for key_group, group in itertools.groupby(chunks, key=operators.itemgetter(0)):
            found = [chunk for _, chunk in group]
            for state_id, rows in chunk_rows.sorted_rows(found, key_group, how.prefix_bytes):
                instance.put_rows(state_id, rows)
        keyed = instance.finish(operator.header, output, name, how.checkpoint_id)
    return SubtaskResult(operator.operator_id, index, keyed, None)
