"""One subtask's keyed state written anew with some of its states changed.

What changes is said per state, by its name in the input: dropped, renamed, its serializer
snapshot replaced (TTL on or off) with its stored values changed to match, or its entries
replaced wholesale by new ones (an edited table). Every other state's entries are carried over
as bytes. The subtask keeps its key-group range and its format: a CANONICAL file stays
key-group blocks (written uncompressed), a RocksDB native instance stays an instance (one
column family per state of the new header, rows ascending), as Flink restores either.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import shutil
import struct
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import numpy as np

from statectl.errors import StatectlError
from statectl.formats import entry_scan, keyed_blocks
from statectl.formats.arrays import Int64s
from statectl.formats.handles import HandleCode, KeyedHandle, KeyGroupsHandle, RelativeFileHandle
from statectl.formats.java_types import key_group_prefix_bytes
from statectl.formats.keyed_blocks import Buffer
from statectl.formats.state_headers import KeyedStateHeader, StateMetaInfo, write_keyed_header
from statectl.savepoint import native
from statectl.savepoint.entries import (
    HeapKeyedFile,
    KeyedEntry,
    KeyedFile,
    KeyedSource,
    NativeKeyedFile,
)
from statectl.savepoint.files import OutputFile
from statectl.savepoint.keyed import block_spans, iter_blocks
from statectl.savepoint.native_files import FileSource, NotByFiles, assemble
from statectl.savepoint.native_writer import InstanceWriter
from statectl.savepoint.storage import Location

if TYPE_CHECKING:  # Arrow is loaded by the rewrites that change entries only
    import pyarrow as pa

Row = tuple[bytes, bytes]  # composite key (no flag), stored value
ValueChange = Callable[[bytes], bytes]


class ReplacedRows(Protocol):
    """A replaced state's rows by key group, each key group's sorted by composite key: a
    mapping (`spilled_rows`), or rows streamed from a shuffle (`entry_chunks.ShuffledRows`),
    which the writers ask for in ascending key-group order."""

    def get(self, key_group: int) -> Sequence[Row] | None: ...


@dataclass(frozen=True)
class StateChange:
    """What happens to one state (by its name in the input) of every subtask."""

    drop: bool = False
    meta: Callable[[StateMetaInfo], StateMetaInfo] | None = None  # rename, TTL on/off
    value: ValueChange | None = None  # each stored value, as the new meta needs it
    # `value` a batch at a time (stored values as an Arrow large_binary array), where the
    # change allows: a canonical file's runs are then changed without a step per entry.
    values: Callable[[pa.Array], pa.Array] | None = None
    # Replaced entries: the state's new rows by key group (composite keys of this operator's
    # max parallelism); the input's entries of the state are left out.
    rows: ReplacedRows | None = None
    # The replaced rows come from tasks at write time (`with_rows` gives them to a subtask).
    fed: bool = False

    @property
    def replaces(self) -> bool:
        return self.rows is not None or self.fed


@dataclass(frozen=True)
class SubtaskRewrite:
    """One subtask's new header and how each of its states' entries are made."""

    source: KeyedSource
    header: KeyedStateHeader  # the new header (compression off)
    new_ids: Mapping[str, int]  # input state name → id in the new header (dropped: absent)
    changes: Mapping[str, StateChange] = field(default_factory=dict)
    # key group → its source block's length and runs, found by the tasks that read the block
    # (filled as the fed rows arrive, a key group's before its rows are taken)
    spans: Mapping[int, entry_scan.BlockRuns] = field(default_factory=dict)

    @property
    def header_bytes(self) -> bytes:
        return write_keyed_header(self.header)


def with_rows(
    rewrite: SubtaskRewrite,
    rows: Mapping[str, ReplacedRows],
    spans: Mapping[int, entry_scan.BlockRuns] | None = None,
) -> SubtaskRewrite:
    """The rewrite with the replaced rows of fed states (by name) given, and the runs of the
    source's blocks where the tasks that read them found them."""
    changes = dict(rewrite.changes)
    for name, state_rows in rows.items():
        changes[name] = dataclasses.replace(changes[name], rows=state_rows, fed=False)
    found = spans if spans is not None else {}  # the caller's: it fills as the rows arrive
    return dataclasses.replace(rewrite, changes=changes, spans=found)


def plan_subtask(source: KeyedSource, changes: Mapping[str, StateChange]) -> SubtaskRewrite:
    """The new header of `source`'s subtask under `changes`, states kept in their order."""
    old = source.header()
    states: list[StateMetaInfo] = []
    new_ids: dict[str, int] = {}
    for state in old.states:
        change = changes.get(state.name, StateChange())
        if change.drop:
            continue
        new_ids[state.name] = len(states)
        states.append(change.meta(state) if change.meta else state)
    names = [s.name for s in states]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise StatectlError(f"two states would be named {twice[0]!r}", source.description)
    header = dataclasses.replace(old, compressed=False, states=tuple(states))
    return SubtaskRewrite(source, header, new_ids, changes)


def key_groups_of(source: KeyedSource) -> tuple[int, int] | None:
    if isinstance(source, KeyedFile | HeapKeyedFile):
        return source.handle.key_groups
    return source.instance.key_groups


def rows_one_by_one(rewrite: SubtaskRewrite) -> bool:
    """Whether the rewrite takes rows one by one through Python (RocksDB rows, heap-format
    entries, values changed entry by entry), holding the GIL, rather than copying runs."""
    if isinstance(rewrite.source, NativeKeyedFile | HeapKeyedFile):
        return True
    return any(change.value is not None for change in rewrite.changes.values())


def source_size(source: KeyedSource) -> int:
    """The bytes a subtask's rewrite reads: its progress share."""
    if isinstance(source, NativeKeyedFile):
        return source.instance.size
    return source.stream.size


def write_subtask(
    rewrite: SubtaskRewrite, output: Location, name: str, checkpoint_id: int
) -> KeyedHandle | None:
    """The subtask's new keyed state under `name` in `output` (None: it owns no key groups)."""
    if key_groups_of(rewrite.source) is None:
        return None
    try:
        if isinstance(rewrite.source, NativeKeyedFile):
            return _write_native(rewrite, rewrite.source, output, name, checkpoint_id)
        return _write_canonical(rewrite, rewrite.source, output, name)
    except StatectlError as exc:
        raise exc.with_source(rewrite.source.description) from None


# --- canonical -----------------------------------------------------------------------------


def _write_canonical(
    rewrite: SubtaskRewrite, source: KeyedFile | HeapKeyedFile, output: Location, name: str
) -> KeyGroupsHandle:
    first, last = source.handle.key_groups or (0, -1)
    offsets = [0] * (last - first + 1)  # 0: an empty key group, as Flink marks it
    out = OutputFile(output.child(name))
    blocks = (
        _copied_blocks(rewrite, source, first, last)
        if isinstance(source, KeyedFile)
        else (
            (kg, [keyed_blocks.build_block(runs)])
            for kg, runs in _key_group_runs(rewrite, source, first, last)
        )
    )
    try:
        out.write(rewrite.header_bytes)
        for key_group, parts in blocks:
            offsets[key_group - first] = out.pos
            for part in parts:
                out.write(part)
    finally:
        size = out.close()
    file = RelativeFileHandle(name, size)
    return KeyGroupsHandle(HandleCode.SAVEPOINT_KEY_GROUPS, first, tuple(offsets), file)


def _copied_blocks(
    rewrite: SubtaskRewrite, source: KeyedFile, first: int, last: int
) -> Iterator[tuple[int, list[Buffer]]]:
    """Each non-empty key group's new block as the parts to write one after another, key
    groups ascending: a carried state's run is a view of the source's block under its new id
    (`entry_scan` finds the runs without a Python step per entry), so a block is never copied
    whole; only states whose values change are taken entry by entry."""
    header = source.header()
    names = [state.name for state in header.states]
    prefix = key_group_prefix_bytes(source.max_parallelism)
    blocks = iter_blocks(source.stream, block_spans(source.stream, source.handle))
    pending = next(blocks, None)  # (span, its bytes): the next block of the file
    for key_group in range(first, last + 1):
        runs: dict[int, tuple[Buffer, ...]] = {}  # new state id → its run's parts
        # The new rows first: the runs the readers found for this block arrive with them.
        for name, change in rewrite.changes.items():
            rows = change.rows.get(key_group) if change.rows is not None else None
            if rows and name in rewrite.new_ids:
                runs[rewrite.new_ids[name]] = (_run_bytes(rewrite.new_ids[name], rows),)
        if pending is not None and pending[0].key_group == key_group:
            data = keyed_blocks.raw_block(pending[1], header.compressed)
            _copy_runs(rewrite, names, data, key_group, prefix, runs)
            pending = next(blocks, None)
        if runs:
            yield key_group, [part for i in sorted(runs) for part in runs[i]] + [_END]
    if pending is not None:
        raise StatectlError(
            f"key group {pending[0].key_group} lies outside the file's range {first}–{last}"
        )


def _run_bytes(state_id: int, rows: Sequence[Row]) -> bytes:
    from statectl.savepoint.entry_chunks import PackedRows

    if isinstance(rows, PackedRows):
        return rows.run_bytes(state_id)  # by Arrow's kernels, not entry by entry
    return keyed_blocks.run_bytes(state_id, rows)


def _copy_runs(
    rewrite: SubtaskRewrite,
    names: list[str],
    data: memoryview,
    key_group: int,
    prefix: int,
    runs: dict[int, tuple[Buffer, ...]],
) -> None:
    """The carried runs of one block, by new state id: each its id and its entries. A block
    whose runs only move is not scanned when the task that read it sent its runs."""
    if _copy_by_spans(rewrite, names, data, key_group, runs):
        return
    key_starts, key_ends, value_ends, located = entry_scan.locate(
        data, key_group, prefix, len(names)
    )
    first = 0
    for state_id, count in located:
        run = slice(first, first + count)
        first += count
        name = names[state_id]
        change = rewrite.changes.get(name, StateChange())
        if change.drop or change.replaces:
            continue
        new_id = rewrite.new_ids[name]
        start, end = int(key_starts[run.start]) - 4, int(value_ends[run.stop - 1])
        if change.value is None:
            runs[new_id] = (_STATE_ID.pack(new_id), data[start:end])
        elif change.values is not None:
            positions = key_starts[run], key_ends[run], value_ends[run]
            runs[new_id] = (_changed_run(new_id, data, positions, change.values),)
        else:
            entries = keyed_blocks.iter_entries(
                keyed_blocks.copied_run(0, data[start:end]) + _END, False
            )
            value = change.value
            changed = [(e.key, value(e.value)) for e in entries]
            runs[new_id] = (keyed_blocks.run_bytes(new_id, changed),)


def _copy_by_spans(
    rewrite: SubtaskRewrite,
    names: list[str],
    data: memoryview,
    key_group: int,
    runs: dict[int, tuple[Buffer, ...]],
) -> bool:
    """`_copy_runs` by the runs a reader found in this block, when it sent them, they are this
    block's, and every state in it is carried whole, dropped or replaced (no value of it
    changes here); False (nothing done) otherwise."""
    found = rewrite.spans.get(key_group)
    if found is None or found[0] != len(data) or not entry_scan.spans_tile(data, found[1]):
        return False
    spans = found[1]
    if any(state_id >= len(names) for state_id, _, _ in spans):
        return False
    changes = [rewrite.changes.get(names[state_id], StateChange()) for state_id, _, _ in spans]
    if any(c.value is not None and not (c.drop or c.replaces) for c in changes):
        return False
    for (state_id, start, end), change in zip(spans, changes, strict=True):
        if not (change.drop or change.replaces):
            new_id = rewrite.new_ids[names[state_id]]
            runs[new_id] = (_STATE_ID.pack(new_id), data[start:end])
    return True


def _changed_run(
    state_id: int,
    data: memoryview,
    positions: tuple[Int64s, Int64s, Int64s],
    change: Callable[[pa.Array], pa.Array],
) -> bytes:
    """A run of `data` (its entries' key starts, key ends, value ends) with its values changed
    by `change` at once: keys (the run's last one keeps its flag) and new values joined by
    Arrow's kernels, never an entry at a time."""
    import pyarrow as pa

    from statectl.formats.values.batch_encode import (
        BINARY,
        big_endian_lengths,
        data_of,
        join,
        offsets_of,
    )

    key_starts, key_ends, value_ends = positions
    # The run cut at every key's and value's bounds: key, value length, value, next key length…
    bounds = np.stack([key_starts, key_ends, key_ends + 4, value_ends], axis=1).ravel()
    pieces = pa.Array.from_buffers(
        BINARY, len(bounds) - 1, [None, pa.py_buffer(bounds), pa.py_buffer(data)]
    )
    every_fourth = np.arange(0, len(bounds) - 1, 4, dtype=np.int64)
    keys, values = pieces.take(every_fourth), pieces.take(every_fourth + 2)
    changed = change(values)
    entries = join(big_endian_lengths(keys), keys, big_endian_lengths(changed), changed)
    offsets = offsets_of(entries)
    return _STATE_ID.pack(state_id) + data_of(entries)[offsets[0] : offsets[-1]].tobytes()


_END = keyed_blocks.END_OF_KEY_GROUP_MARK.to_bytes(2, "big")
_STATE_ID = struct.Struct(">H")


def _key_group_runs(
    rewrite: SubtaskRewrite, source: KeyedFile | HeapKeyedFile, first: int, last: int
) -> Iterator[tuple[int, list[tuple[int, list[Row]]]]]:
    """Each non-empty key group's runs (new state id, rows), key groups ascending."""
    carried = itertools.groupby(source.entries(), key=lambda entry: entry.key_group)
    pending = next(carried, None)
    for key_group in range(first, last + 1):
        runs: dict[int, list[Row]] = {}
        if pending is not None and pending[0] == key_group:
            _carry(rewrite, pending[1], runs)
            pending = next(carried, None)
        _add_replaced(rewrite, key_group, runs)
        if runs:
            yield key_group, sorted(runs.items())
    if pending is not None:
        raise StatectlError(f"key group {pending[0]} lies outside the file's range {first}–{last}")


def _carry(
    rewrite: SubtaskRewrite, entries: Iterable[KeyedEntry], runs: dict[int, list[Row]]
) -> None:
    for entry in entries:
        name = entry.state.name
        change = rewrite.changes.get(name)
        if change is not None and (change.drop or change.replaces):
            continue
        value = change.value(entry.value) if change is not None and change.value else entry.value
        runs.setdefault(rewrite.new_ids[name], []).append((entry.key, value))


def _add_replaced(rewrite: SubtaskRewrite, key_group: int, runs: dict[int, list[Row]]) -> None:
    for name, change in rewrite.changes.items():
        if change.rows is None or name not in rewrite.new_ids:
            continue
        rows = change.rows.get(key_group)
        if rows:
            runs.setdefault(rewrite.new_ids[name], []).extend(rows)


# --- RocksDB native ------------------------------------------------------------------------


def _write_native(
    rewrite: SubtaskRewrite,
    source: NativeKeyedFile,
    output: Location,
    name: str,
    checkpoint_id: int,
) -> KeyedHandle:
    owned = source.instance.key_groups
    assert owned is not None
    prefix = key_group_prefix_bytes(source.max_parallelism)
    families = [state.name for state in rewrite.header.states]
    with InstanceWriter(families, owned, prefix) as instance, native.opened(source.instance) as db:
        carried = _carried_by_files(rewrite, source, instance)
        for state in source.header().states:
            new_id = rewrite.new_ids.get(state.name)
            if new_id is None or state.name in carried:
                continue
            change = rewrite.changes.get(state.name, StateChange())
            if change.rows is not None:
                instance.put_rows(new_id, _replaced_rows(change.rows, owned))
                continue
            if change.values is not None:
                batches = db.row_batches(state.name, owned[0], owned[1], prefix)
                instance.put_rows(new_id, _changed_rows(batches, change.values))
                continue
            rows = db.rows(state.name, owned[0], owned[1], prefix)
            if change.value is not None:
                rows = ((key, change.value(value)) for key, value in rows)
            instance.put_rows(new_id, rows)
        return instance.finish(rewrite.header_bytes, output, name, checkpoint_id)


def _carried_by_files(
    rewrite: SubtaskRewrite, source: NativeKeyedFile, instance: InstanceWriter
) -> set[str]:
    """The states whose rows stay as they are, carried into the new instance as the old
    instance's SST files (linked; `native_files.assemble`), not row by row: when the new
    instance's column families are the old one's (no state dropped or renamed). The others'
    column families are left empty for their new rows. Empty when the files cannot be carried
    (`NotByFiles`: every state's rows move then, as before)."""
    old = [state.name for state in source.header().states]
    if sorted(instance.families) != sorted(old):
        return set()
    carried = {name for name in old if _unchanged(rewrite.changes.get(name, StateChange()))}
    if not carried:
        return set()
    owned = source.instance.key_groups
    assert owned is not None
    folder = os.path.join(instance.folder, "db")
    whole = FileSource(source.instance, owned[0], owned[1])
    try:
        assemble([whole], folder, owned, instance.prefix_bytes, instance.families, carried)
    except NotByFiles:
        shutil.rmtree(folder, ignore_errors=True)
        return set()
    instance.use_instance(folder)
    return carried


def _unchanged(change: StateChange) -> bool:
    edited = change.value is not None or change.values is not None
    return not (change.drop or change.replaces or edited)


def _changed_rows(
    batches: Iterable[tuple[pa.Array, pa.Array]], change: Callable[[pa.Array], pa.Array]
) -> Iterator[Row]:
    """The rows with their values changed a batch at a time."""
    for keys, values in batches:
        yield from zip(keys.to_pylist(), change(values).to_pylist(), strict=True)


def _replaced_rows(rows: ReplacedRows, owned: tuple[int, int]) -> Iterator[Row]:
    """The subtask's replaced rows, key groups ascending, as RocksDB takes them."""
    for key_group in range(owned[0], owned[1] + 1):
        yield from rows.get(key_group) or ()
