"""A new key group's rows out of the re-hash's chunks, sorted as RocksDB takes them.

A chunk's runs hold entries as canonical blocks do (`i32 keyLen, key, i32 valueLen, value`),
without the run-end flags. Laid out as a block (each run behind its state id, its last key
flagged, the end mark after), `entry_scan` locates them with no Python step per entry; their
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


def sorted_rows(
    chunks: list[Chunk], key_group: int, prefix_bytes: int
) -> Iterator[tuple[int, Iterator[Row]]]:
    """(state id, its rows sorted by key) of one key group's chunks, state ids ascending.
    Each chunk leaves `chunks` as its rows are copied out: a key group is held about once."""
    by_state: dict[int, list[tuple[pa.Array, pa.Array]]] = {}
    chunks.reverse()  # taken from the end, in order
    while chunks:
        for state_id, keys, values in _chunk_rows(chunks.pop(), key_group, prefix_bytes):
            by_state.setdefault(state_id, []).append((keys, values))
    for state_id, parts in sorted(by_state.items()):
        keys = pa.concat_arrays([k.cast(pa.large_binary()) for k, _ in parts])
        values = pa.concat_arrays([v.cast(pa.large_binary()) for _, v in parts])
        yield state_id, _in_order(keys, values, pc.sort_indices(keys))


def _chunk_rows(
    chunk: Chunk, key_group: int, prefix_bytes: int
) -> Iterator[tuple[int, pa.Array, pa.Array]]:
    """(state id, keys, values) of each run of a chunk."""
    payload, runs = chunk
    block = bytearray()
    for state_id, start, end, flag in runs:
        block += _U16.pack(state_id)
        at = len(block)
        block += payload[start:end]
        block[at + flag - start] |= keyed_blocks.FIRST_BIT_IN_BYTE_MASK
    block += _U16.pack(keyed_blocks.END_OF_KEY_GROUP_MARK)
    buffer = batch.Buffer(block)
    block_view = buffer.data[: buffer.size].data  # located in place
    located = entry_scan.locate(block_view, key_group, prefix_bytes, None)
    key_starts, key_ends, value_ends, found = located
    buffer.data[key_starts] &= ~keyed_blocks.FIRST_BIT_IN_BYTE_MASK & 0xFF  # the flags we set
    valid = np.ones(len(key_starts), np.bool_)
    keys = batch.binary_array(_BINARY, buffer, key_starts, key_ends - key_starts, valid)
    value_starts = key_ends + 4
    values = batch.binary_array(_BINARY, buffer, value_starts, value_ends - value_starts, valid)
    first = 0
    for state_id, count in found:
        yield state_id, keys.slice(first, count), values.slice(first, count)
        first += count


def _in_order(keys: pa.Array, values: pa.Array, order: pa.Array) -> Iterator[Row]:
    for start in range(0, len(order), _ROWS_PER_SLICE):
        rows = order.slice(start, _ROWS_PER_SLICE)
        yield from zip(keys.take(rows).to_pylist(), values.take(rows).to_pylist(), strict=True)
