"""A new key group's rows out of the re-hash's chunks (or a canonical block's), sorted as
RocksDB takes them.

A chunk's runs hold entries as canonical blocks do (`i32 keyLen, key, i32 valueLen, value`),
without the run-end flags. Chunks laid out as a block (a run per state behind its id, its last
key flagged, the end mark after), `entry_scan` locates them with no Python step per entry; their
keys and values become Arrow arrays, sorted by Arrow's kernels, and reach the RocksDB writer
as Python objects a slice at a time.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from statectl.formats import entry_scan, keyed_blocks
from statectl.formats.values import batch
from statectl.operations.rescale.rekey import Chunk

Row = tuple[bytes, bytes]

_U16 = struct.Struct(">H")
_BINARY = pa.binary()
_ROWS_PER_SLICE = 1 << 14  # rows made into Python objects at a time
_BLOCK_BYTES = 64 << 20  # chunks located as one block: few steps per key group, offsets in i32


def sorted_rows(
    chunks: list[Chunk], key_group: int, prefix_bytes: int
) -> Iterator[tuple[int, Iterator[Row]]]:
    """(state id, its rows sorted by key) of one key group's chunks, state ids ascending.
    Chunks leave `chunks` as their rows are copied out: a key group is held about once."""
    by_state: dict[int, list[tuple[pa.Array, pa.Array]]] = {}
    chunks.reverse()  # taken from the end, in order
    while chunks:
        group = [chunks.pop()]
        size = len(group[0][0])
        while chunks and size + len(chunks[-1][0]) <= _BLOCK_BYTES:
            group.append(chunks.pop())
            size += len(group[-1][0])
        for state_id, keys, values in _block_rows(group, key_group, prefix_bytes):
            by_state.setdefault(state_id, []).append((keys, values))
    for state_id, parts in sorted(by_state.items()):
        keys = pa.concat_arrays([k.cast(pa.large_binary()) for k, _ in parts])
        values = pa.concat_arrays([v.cast(pa.large_binary()) for _, v in parts])
        yield state_id, in_key_order(keys, values)


def _block_rows(
    chunks: list[Chunk], key_group: int, prefix_bytes: int
) -> Iterator[tuple[int, pa.Array, pa.Array]]:
    """(state id, keys, values) of the chunks' rows, laid out and located as one block: a run
    per state (its runs in every chunk, one after another), its last key flagged."""
    runs: dict[int, list[tuple[bytes, int, int, int]]] = {}
    for payload, chunk_runs in chunks:
        for state_id, start, end, flag in chunk_runs:
            runs.setdefault(state_id, []).append((payload, start, end, flag))
    parts: list[bytes | memoryview] = []
    flags, at = [], 0
    for state_id in sorted(runs):
        parts.append(_U16.pack(state_id))
        at += _U16.size
        for payload, start, end, flag in runs[state_id]:
            parts.append(memoryview(payload)[start:end])
            last_key, at = at + flag - start, at + end - start
        flags.append(last_key)
    parts.append(_U16.pack(keyed_blocks.END_OF_KEY_GROUP_MARK))
    buffer = batch.Buffer(*parts)
    del parts, runs
    buffer.data[flags] |= keyed_blocks.FIRST_BIT_IN_BYTE_MASK
    return block_rows(buffer, key_group, prefix_bytes)


def block_rows(
    buffer: batch.Buffer, key_group: int, prefix_bytes: int
) -> Iterator[tuple[int, pa.Array, pa.Array]]:
    """(state id, keys, values) of each run of a key group's uncompressed block, located by
    `entry_scan` (the keys without the run-end flag)."""
    block_view = buffer.data[: buffer.size].data  # located in place
    key_starts, key_ends, value_ends, found = entry_scan.locate(
        block_view, key_group, prefix_bytes, None
    )
    buffer.data[key_starts] &= ~keyed_blocks.FIRST_BIT_IN_BYTE_MASK & 0xFF  # the run-end flags
    valid = np.ones(len(key_starts), np.bool_)
    keys = batch.binary_array(_BINARY, buffer, key_starts, key_ends - key_starts, valid)
    value_starts = key_ends + 4
    values = batch.binary_array(_BINARY, buffer, value_starts, value_ends - value_starts, valid)
    first = 0
    for state_id, count in found:
        yield state_id, keys.slice(first, count), values.slice(first, count)
        first += count


def in_key_order(keys: pa.Array, values: pa.Array) -> Iterator[Row]:
    """(key, value) rows sorted by key (bytewise: RocksDB's order), a slice at a time."""
    order = pc.sort_indices(keys)
    for start in range(0, len(order), _ROWS_PER_SLICE):
        rows = order.slice(start, _ROWS_PER_SLICE)
        yield from zip(keys.take(rows).to_pylist(), values.take(rows).to_pylist(), strict=True)
