"""Re-hashing on the sources' side, in batches, without a Python step per entry.

A batch holds the entries of several old blocks in one buffer (`formats.entry_scan` finds
them), their new key groups are computed at once (`formats.key_hashing`), and it leaves as one
shuffle record per new key group: a `rekey.Chunk`, the group's entries with their new
prefixes as one byte string. Imported by `job.rekey` only, so rescales without a re-hash
never load numpy.
"""

from __future__ import annotations

import itertools
import struct
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from numpy.lib.stride_tricks import as_strided, sliding_window_view

from statectl.errors import StatectlError
from statectl.formats import entry_scan, key_hashing, keyed_blocks
from statectl.formats.arrays import Int64s
from statectl.formats.java_types import key_group_prefix_bytes
from statectl.formats.key_groups import operator_index_for_key_group
from statectl.operations.rescale.rekey import (
    TIMER_TIMESTAMP_BYTES,
    CanonicalSource,
    Chunk,
    HeapSource,
    KeyRegrouper,
    NativeSource,
    RekeyOperator,
    RekeySource,
    describe_source,
)
from statectl.savepoint import native, native_rows
from statectl.savepoint.entries import heap_key_group_rows

_BATCH_BYTES = 2 << 20  # entries hashed together: amortises numpy, stays in the CPU caches
_I32 = struct.Struct(">i")


@dataclass(frozen=True, slots=True)
class EntryBatch:
    """Entries of old blocks in one buffer: key i is data[key_starts[i]:key_ends[i]] (flag
    bit possibly set), its value runs from key_ends[i] + 4 to value_ends[i]."""

    data: bytes
    state_ids: Int64s  # ids of the new header
    key_starts: Int64s
    key_ends: Int64s
    value_ends: Int64s

    def __len__(self) -> int:
        return len(self.key_starts)


def batch_key_groups(regrouper: KeyRegrouper, batch: EntryBatch) -> Int64s:
    """The new key group of every entry of `batch`, computed at once.

    Each key's hash must also give the key group it is stored in: a key type hashed unlike
    the job hashed it (a RowData key that is not a BinaryRowData, say) would otherwise be
    moved to wrong key groups without a word.
    """
    timers = np.isin(batch.state_ids, np.fromiter(regrouper.timer_states, np.int64))
    prefix_bytes = key_group_prefix_bytes(regrouper.old_max_parallelism)
    offsets = prefix_bytes + TIMER_TIMESTAMP_BYTES * timers
    codes = key_hashing.hash_codes(
        regrouper.key_type, batch.data, batch.key_starts, batch.key_ends, offsets
    )
    hashes = key_hashing.murmur_hash(codes)
    _check_stored_key_groups(regrouper, batch, hashes % regrouper.old_max_parallelism)
    return (hashes % regrouper.max_parallelism).astype(np.int64)


def _check_stored_key_groups(regrouper: KeyRegrouper, batch: EntryBatch, hashed: Int64s) -> None:
    data = np.frombuffer(batch.data, np.uint8) if len(batch.data) else np.zeros(1, np.uint8)
    stored = (data[batch.key_starts] & 0x7F).astype(np.int64)  # without the end-of-run flag
    if key_group_prefix_bytes(regrouper.old_max_parallelism) == 2:
        stored = stored * 256 + data[batch.key_starts + 1]
    wrong = np.flatnonzero(stored != hashed)
    if len(wrong):
        first = wrong[0]
        raise StatectlError(
            f"{len(wrong)} of {len(batch)} keys do not hash to the key group they are stored in "
            f"(first: stored in key group {stored[first]}, hashes to {hashed[first]} under max "
            f"parallelism {regrouper.old_max_parallelism}): statectl hashes "
            f"{regrouper.key_type.name} keys unlike this job, so re-hashing would misplace "
            "them; nothing is written"
        )


def source_batches(source: RekeySource, old_max_parallelism: int) -> Iterator[EntryBatch]:
    """The entries of a source in batches of about `_BATCH_BYTES`."""
    if isinstance(source, NativeSource):
        return _native_batches(source, old_max_parallelism)
    if isinstance(source, HeapSource):
        return _heap_batches(source, old_max_parallelism)
    return _canonical_batches(source, key_group_prefix_bytes(old_max_parallelism))


def _canonical_batches(source: CanonicalSource, prefix_bytes: int) -> Iterator[EntryBatch]:
    """Old blocks read a run of them at a time (one storage read per run), entries located
    without copying them."""
    mapping = dict(source.state_id_map or ())
    batch = _BatchBuilder()
    for spans in _contiguous(source.spans, _BATCH_BYTES):
        run = memoryview(source.stream.read(spans[0].start, spans[-1].end))
        for span in spans:
            block = run[span.start - spans[0].start : span.end - spans[0].start]
            try:
                raw = keyed_blocks.raw_block(block, source.compressed)
                found = entry_scan.locate(
                    raw, span.key_group, prefix_bytes, source.num_states, batch.size
                )
            except StatectlError as exc:
                raise exc.with_source(
                    f"{source.stream.description} (key group {span.key_group})"
                ) from None
            batch.add(raw, found, mapping)
        if batch.size >= _BATCH_BYTES:
            yield batch.build()
            batch = _BatchBuilder()
    if batch.size:
        yield batch.build()


def _contiguous(
    spans: Sequence[keyed_blocks.BlockSpan], max_bytes: int
) -> Iterator[list[keyed_blocks.BlockSpan]]:
    """Runs of adjacent blocks of at most `max_bytes` (or one larger block)."""
    run: list[keyed_blocks.BlockSpan] = []
    for span in spans:
        if run and (span.start != run[-1].end or span.end - run[0].start > max_bytes):
            yield run
            run = []
        run.append(span)
    if run:
        yield run


class _BatchBuilder:
    def __init__(self) -> None:
        self.parts: list[Any] = []
        self.size = 0
        self.positions: list[entry_scan.Positions] = []
        self.state_ids: list[int] = []
        self.run_lengths: list[int] = []

    def add(self, raw: Any, found: entry_scan.Positions, mapping: dict[int, int]) -> None:
        self.parts.append(raw)
        self.size += len(raw)
        self.positions.append(found)
        for state_id, count in found[3]:
            self.state_ids.append(mapping.get(state_id, state_id))
            self.run_lengths.append(count)

    def build(self) -> EntryBatch:
        key_starts, key_ends, value_ends = (
            np.concatenate([found[n] for found in self.positions]) for n in range(3)
        )
        state_ids = np.repeat(np.array(self.state_ids, np.int64), self.run_lengths)
        return EntryBatch(b"".join(self.parts), state_ids, key_starts, key_ends, value_ends)


def _native_batches(source: NativeSource, old_max_parallelism: int) -> Iterator[EntryBatch]:
    """RocksDB rows, laid out as block entries are, a batch of rows at a time."""
    owned = source.instance.key_groups
    if owned is None:
        return
    prefix_bytes = key_group_prefix_bytes(old_max_parallelism)
    with native.opened(source.instance) as db:
        for name, state_id in source.states:
            for keys, values in db.row_batches(name, owned[0], owned[1], prefix_bytes):
                data, key_starts, key_ends, value_ends = native_rows.laid_out(keys, values)
                state_ids = np.full(len(key_starts), state_id, np.int64)
                yield EntryBatch(data, state_ids, key_starts, key_ends, value_ends)


def _heap_batches(source: HeapSource, old_max_parallelism: int) -> Iterator[EntryBatch]:
    """Entries of the hashmap backend's snapshot format (in canonical form), laid out as
    `native_rows.laid_out` lays out RocksDB rows, whole key groups at a time."""
    key_groups = heap_key_group_rows(
        source.stream,
        source.spans,
        source.header,
        old_max_parallelism,
        source.flink_major,
        source.state_id_map,
    )
    laid_out = _LaidOutRows()
    for _, states in key_groups:
        for state_id, rows in states:
            laid_out.add(rows, state_id)
        if len(laid_out.buffer) >= _BATCH_BYTES:
            yield laid_out.batch()
            laid_out = _LaidOutRows()
    if laid_out.key_starts:
        yield laid_out.batch()


class _LaidOutRows:
    """(key, value) rows laid out as block entries are (i32 length, key, i32 length, value),
    with where each key and value ends: the makings of an `EntryBatch`."""

    def __init__(self) -> None:
        self.buffer = bytearray()
        self.state_ids: list[int] = []
        self.key_starts: list[int] = []
        self.key_ends: list[int] = []
        self.value_ends: list[int] = []

    def add(self, rows: Iterable[Any], state_id: int) -> None:
        """`rows` of `state_id` after those added so far."""
        buffer, pack = self.buffer, _I32.pack
        key_starts, key_ends, value_ends = self.key_starts, self.key_ends, self.value_ends
        added = len(key_starts)
        for key, value in rows:
            buffer += pack(len(key))
            key_starts.append(len(buffer))
            buffer += key
            key_ends.append(len(buffer))
            buffer += pack(len(value))
            buffer += value
            value_ends.append(len(buffer))
        self.state_ids += [state_id] * (len(key_starts) - added)

    def batch(self) -> EntryBatch:
        return EntryBatch(
            bytes(self.buffer),
            np.array(self.state_ids, np.int64),
            np.array(self.key_starts, np.int64),
            np.array(self.key_ends, np.int64),
            np.array(self.value_ends, np.int64),
        )


def shuffle_chunks(
    operator: RekeyOperator, source: RekeySource, old_max_parallelism: int
) -> Iterator[tuple[tuple[int, int, int], Chunk]]:
    """((new subtask, new key group, batch number), chunk) for the shuffle, per batch of the
    source and key group found in it."""
    for number, batch in enumerate(source_batches(source, old_max_parallelism)):
        try:
            key_groups = batch_key_groups(operator.regrouper, batch)
        except StatectlError as exc:
            raise exc.with_source(describe_source(source)) from None
        for key_group, chunk in rekey_batch(operator, batch, key_groups):
            subtask = operator_index_for_key_group(
                operator.max_parallelism, operator.parallelism, key_group
            )
            yield (subtask, key_group, number), chunk


def rekey_batch(
    operator: RekeyOperator, batch: EntryBatch, key_groups: Int64s
) -> Iterator[tuple[int, Chunk]]:
    """The batch's entries with their new prefixes, sorted by (key group, state id) — stable,
    so entries keep their order within a state — as one chunk per key group."""
    if not len(batch):
        return
    order = np.lexsort((batch.state_ids, key_groups))
    groups, states = key_groups[order], batch.state_ids[order]
    payload, starts, lengths = _reprefixed(operator.regrouper, batch, order, groups)
    # State runs: where (key group, state id) changes in sorted order.
    edges = np.flatnonzero((groups[1:] != groups[:-1]) | (states[1:] != states[:-1])) + 1
    firsts = np.concatenate(([0], edges))
    lasts = np.concatenate((edges, [len(order)])) - 1
    run_starts = starts[firsts]
    run_ends = starts[lasts] + lengths[lasts]
    flags = starts[lasts] + 4
    run_groups = groups[firsts].tolist()
    runs = zip(
        states[firsts].tolist(), run_starts.tolist(), run_ends.tolist(), flags.tolist(), strict=True
    )
    for key_group, group_runs in itertools.groupby(
        zip(run_groups, runs, strict=True), key=lambda pair: pair[0]
    ):
        chunk_runs = [run for _, run in group_runs]
        base, end = chunk_runs[0][1], chunk_runs[-1][2]
        relative = tuple((sid, a - base, b - base, f - base) for sid, a, b, f in chunk_runs)
        yield key_group, (payload[base:end], relative)


def _reprefixed(
    regrouper: KeyRegrouper, batch: EntryBatch, order: Int64s, groups: Int64s
) -> tuple[bytes, Int64s, Int64s]:
    """The entries in `order`, each with its new key length and key-group prefix (no flag),
    as one byte string; and where each entry starts in it, and its length."""
    old_prefix = key_group_prefix_bytes(regrouper.old_max_parallelism)
    new_prefix = key_group_prefix_bytes(regrouper.max_parallelism)
    key_starts = batch.key_starts[order]
    body_starts = key_starts + old_prefix  # the key after its prefix, then the value
    body_lengths = batch.value_ends[order] - body_starts
    width = 4 + new_prefix
    lengths = body_lengths + width
    starts = np.cumsum(lengths) - lengths
    heads = np.zeros((len(order), width), np.uint8)
    key_lengths = batch.key_ends[order] - key_starts - old_prefix + new_prefix
    heads[:, :4] = key_lengths.astype(">i4").view(np.uint8).reshape(-1, 4)
    for n in range(new_prefix):  # big-endian key group
        heads[:, 4 + n] = (groups >> (8 * (new_prefix - 1 - n))) & 0xFF
    out = np.empty(int(lengths.sum()), np.uint8)
    _rows(out, width)[starts] = heads
    source = np.frombuffer(batch.data, np.uint8)
    _copy_ranges(out, starts + width, source, body_starts, body_lengths)
    return out.tobytes(), starts, lengths


def _rows(buffer: npt.NDArray[np.uint8], length: int) -> npt.NDArray[np.uint8]:
    """Every `length` bytes of `buffer` from each position: row i is buffer[i:i + length]
    (a view; assigning to rows writes the buffer)."""
    shape = (len(buffer) - length + 1, length)
    rows: npt.NDArray[np.uint8] = as_strided(buffer, shape=shape, strides=(1, 1))
    return rows


_MANY_LENGTHS = 512  # more distinct range lengths than this: gather by one index per byte


def _copy_ranges(
    out: npt.NDArray[np.uint8],
    positions: Int64s,
    source: npt.NDArray[np.uint8],
    starts: Int64s,
    lengths: Int64s,
) -> None:
    """out[positions[i]:][:lengths[i]] = source[starts[i]:][:lengths[i]] for every i (lengths
    above 0). Ranges of one length move as rows of two strided views, one row copy each; with
    very many lengths, one index per byte instead."""
    order = np.argsort(lengths, kind="stable")
    edges = np.flatnonzero(np.diff(lengths[order])) + 1
    if len(edges) >= _MANY_LENGTHS:
        out[_byte_indexes(positions, lengths)] = source[_byte_indexes(starts, lengths)]
        return
    for rows in np.split(order, edges):
        length = int(lengths[rows[0]])
        _rows(out, length)[positions[rows]] = sliding_window_view(source, length)[starts[rows]]


def _byte_indexes(starts: Int64s, lengths: Int64s) -> Int64s:
    """The index of every byte of the ranges: its predecessor's plus one, or a jump."""
    steps = np.ones(int(lengths.sum()), np.int64)
    firsts = np.cumsum(lengths) - lengths
    steps[0] = starts[0]
    steps[firsts[1:]] = starts[1:] - (starts[:-1] + lengths[:-1]) + 1
    indexes: Int64s = np.cumsum(steps)
    return indexes
