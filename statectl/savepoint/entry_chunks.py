"""Encoded entries on their way to the task that writes their subtask: chunks.

A value edit's tasks encode rows where the rows are (`table_rows.encode_batch`) and emit, per
batch and key group, one chunk: the key group's entries of that batch packed into one byte
string (their count, every key's length, every value's length, the keys, the values: lengths
first, so that a chunk is read back as Arrow arrays without a Python step per entry). The
shuffle moves chunks, not entries, so its cost is per batch and key group; it sorts them by
(subtask, key group, …), and the writing task reads them back one key group at a time
(`ShuffledRows`), holding one key group's entries in two Arrow arrays: what `keyed_rewrite`
writes.
"""

from __future__ import annotations

import heapq
import os
import struct
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import BinaryIO, overload

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from statectl.errors import FormatError
from statectl.formats import keyed_blocks
from statectl.formats.arrays import Int64s
from statectl.formats.values.batch_encode import (
    BINARY,
    big_endian_lengths,
    data_of,
    join,
    offsets_of,
)

Row = tuple[bytes, bytes]  # composite key (no flag), stored value

_COUNT = struct.Struct(">i")
_STATE_ID = struct.Struct(">H")
_LENGTH = np.dtype(">i4")


def pack(rows: Iterable[Row]) -> bytes:
    """Rows as one chunk."""
    pairs = list(rows)
    keys = pa.array([key for key, _ in pairs], BINARY)
    values = pa.array([value for _, value in pairs], BINARY)
    return pack_arrays(keys, values)


def pack_arrays(keys: pa.Array, values: pa.Array) -> bytes:
    """Rows given as two binary arrays (keys, values) as one chunk."""
    key_offsets, value_offsets = offsets_of(keys), offsets_of(values)
    return b"".join(
        (
            _COUNT.pack(len(keys)),
            np.diff(key_offsets).astype(_LENGTH).tobytes(),
            np.diff(value_offsets).astype(_LENGTH).tobytes(),
            _data(keys, key_offsets),
            _data(values, value_offsets),
        )
    )


def _data(rows: pa.Array, offsets: Int64s) -> memoryview:
    data = rows.buffers()[2]
    if data is None:
        return memoryview(b"")
    return memoryview(data)[int(offsets[0]) : int(offsets[-1])]


def join_chunks(chunks: Sequence[bytes]) -> bytes:
    """Chunks of one key group as one, their rows in order."""
    if len(chunks) == 1:
        return chunks[0]
    parts = [_arrays(chunk) for chunk in chunks]
    keys = pa.concat_arrays([keys for keys, _ in parts])
    values = pa.concat_arrays([values for _, values in parts])
    return pack_arrays(keys, values)


def unpack(chunk: bytes) -> Iterator[Row]:
    """A chunk's rows, in the order packed."""
    keys, values = _arrays(chunk)
    return zip(keys.to_pylist(), values.to_pylist(), strict=True)


def _arrays(chunk: bytes) -> tuple[pa.Array, pa.Array]:
    """A chunk's keys and values, as views of it."""
    (count,) = _COUNT.unpack_from(chunk)
    lengths = np.frombuffer(chunk, _LENGTH, 2 * count, _COUNT.size).astype(np.int64)
    if count < 0 or (count and int(lengths.min()) < 0):
        raise FormatError("a chunk of entries is damaged")
    buffer = pa.py_buffer(chunk)
    start = _COUNT.size + 8 * count
    keys, key_bytes = _rows(buffer, start, lengths[:count])
    values, value_bytes = _rows(buffer, start + key_bytes, lengths[count:])
    if start + key_bytes + value_bytes != len(chunk):
        raise FormatError("a chunk of entries is damaged")
    return keys, values


def _rows(buffer: pa.Buffer, start: int, lengths: Int64s) -> tuple[pa.Array, int]:
    offsets = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    size = int(offsets[-1])
    if start + size > buffer.size:
        raise FormatError("a chunk of entries is damaged")
    data = buffer.slice(start, size)
    return pa.Array.from_buffers(BINARY, len(lengths), [None, pa.py_buffer(offsets), data]), size


class PackedRows(Sequence[Row]):
    """One key group's rows of a replaced state, sorted by composite key: two Arrow arrays,
    not a Python object per entry (a key group may hold millions)."""

    def __init__(self, keys: pa.Array, values: pa.Array) -> None:
        self.keys, self.values = keys, values

    def __len__(self) -> int:
        return len(self.keys)

    @overload
    def __getitem__(self, index: int) -> Row: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Row]: ...
    def __getitem__(self, index: int | slice) -> Row | Sequence[Row]:
        if isinstance(index, slice):
            keys, values = self.keys[index].to_pylist(), self.values[index].to_pylist()
            return list(zip(keys, values, strict=True))
        return self.keys[index].as_py(), self.values[index].as_py()

    def __iter__(self) -> Iterator[Row]:
        step = 1 << 14  # rows made into Python objects at a time
        for start in range(0, len(self.keys), step):
            keys = self.keys.slice(start, step).to_pylist()
            yield from zip(keys, self.values.slice(start, step).to_pylist(), strict=True)

    def run_bytes(self, state_id: int) -> bytes:
        """The rows as one state's run of a key-group block (`keyed_blocks.run_bytes`), built
        by Arrow's kernels: per entry the key's length, the key (the last one flagged), the
        value's length, the value."""
        if not 0 <= state_id < keyed_blocks.END_OF_KEY_GROUP_MARK:
            raise ValueError(f"state id {state_id} is out of range")
        if not len(self.keys):
            raise ValueError("a run needs entries")
        run = bytearray(_STATE_ID.pack(state_id))
        append_entries(run, self.keys, self.values, last_of_run=True)
        return bytes(run)


def append_entries(block: bytearray, keys: pa.Array, values: pa.Array, last_of_run: bool) -> None:
    """Rows appended as a block's entries (`keyed_blocks.append_entry`), laid out by Arrow's
    kernels: per entry the key's length, the key, the value's length, the value; the last key
    flagged when `last_of_run`."""
    if not len(keys):
        return
    key_offsets = offsets_of(keys)
    if int(np.diff(key_offsets).min()) <= 0:
        raise ValueError("a key must be non-empty")
    key_data = data_of(keys)
    if int(key_data[key_offsets[:-1]].max()) & keyed_blocks.FIRST_BIT_IN_BYTE_MASK:
        raise ValueError("a key must start below 0x80 (the flag bit)")
    entries = join(big_endian_lengths(keys), keys, big_endian_lengths(values), values)
    entry_offsets = offsets_of(entries)
    last_key = len(block) + int(entry_offsets[-2] - entry_offsets[0]) + 4  # past its i32 length
    block += _data(entries, entry_offsets)
    if last_of_run:
        block[last_key] |= keyed_blocks.FIRST_BIT_IN_BYTE_MASK


def sorted_rows(chunks: Sequence[bytes], describe: Callable[[bytes], str]) -> PackedRows:
    """The rows of one key group's chunks, sorted by composite key; a key given twice is a
    FormatError saying `describe(key)` appears more than once."""
    parts = [_arrays(chunk) for chunk in chunks]
    keys = pa.concat_arrays([keys for keys, _ in parts])
    values = pa.concat_arrays([values for _, values in parts])
    order = pc.sort_indices(keys)
    keys, values = keys.take(order), values.take(order)
    if len(keys) > 1:
        repeated = pc.equal(keys.slice(1), keys.slice(0, len(keys) - 1))
        if pc.any(repeated).as_py():
            first = int(np.flatnonzero(repeated.to_numpy(zero_copy_only=False))[0])
            raise FormatError(f"{describe(keys[first].as_py())} appears more than once")
    return PackedRows(keys, values)


class ShuffledRows:
    """A subtask's replaced rows from a stream of (key group, chunk) sorted by key group: what
    `keyed_rewrite.StateChange.rows` takes. Key groups are asked for in ascending order (both
    writers do); each comes back sorted by composite key (`sorted_rows`)."""

    def __init__(
        self, chunks: Iterable[tuple[int, bytes]], describe: Callable[[bytes], str]
    ) -> None:
        self._chunks = iter(chunks)
        self._pending = next(self._chunks, None)
        self._describe = describe
        self._asked = -1
        self.count = 0  # rows handed out so far

    def get(self, key_group: int) -> PackedRows | None:
        if key_group <= self._asked:
            raise ValueError(f"key group {key_group} asked for after {self._asked}")
        self._asked = key_group
        if self._pending is not None and self._pending[0] < key_group:
            # Chunks of key groups outside the subtask's range: statectl routed them wrongly.
            raise FormatError(f"rows of key group {self._pending[0]} reached the wrong subtask")
        chunks: list[bytes] = []
        while self._pending is not None and self._pending[0] == key_group:
            chunks.append(self._pending[1])
            self._pending = next(self._chunks, None)
        rows = sorted_rows(chunks, self._describe) if chunks else None
        if not rows:
            return None
        self.count += len(rows)
        return rows

    def finish(self) -> None:
        """Every chunk must have been taken: one left lies past the subtask's key groups."""
        if self._pending is not None:
            raise FormatError(f"rows of key group {self._pending[0]} reached the wrong subtask")


# --- runs: a task's chunks for one subtask, sorted, in a file -------------------------------------

_RUN_HEAD = struct.Struct(">iqi")  # key group, seq, chunk length
Chunk = tuple[int, int, bytes]  # key group, seq, packed rows


class RunWriter:
    """A task's chunks by subtask, gathered on local disk in arrival order (only an index of
    them in memory), then written out per subtask sorted by (key group, seq): the runs the
    subtask's writer merges (`merged_runs`)."""

    def __init__(self) -> None:
        local = os.environ.get("STATECTL_LOCAL_DIR")
        self._spool = tempfile.TemporaryFile(dir=local)  # noqa: SIM115 - closed by close()
        self._index: dict[int, list[tuple[int, int, int, int]]] = {}  # subtask → kg, seq, pos, len

    def add(self, subtask: int, key_group: int, seq: int, chunk: bytes) -> None:
        position = self._spool.seek(0, os.SEEK_END)
        self._spool.write(chunk)
        self._index.setdefault(subtask, []).append((key_group, seq, position, len(chunk)))

    @property
    def subtasks(self) -> list[int]:
        return sorted(self._index)

    def write_run(self, subtask: int, out: BinaryIO) -> int:
        """Subtask `subtask`'s chunks into `out`, sorted; returns the chunks written."""
        chunks = sorted(self._index[subtask])
        for key_group, seq, position, length in chunks:
            self._spool.seek(position)
            out.write(_RUN_HEAD.pack(key_group, seq, length))
            out.write(self._spool.read(length))
        return len(chunks)

    def close(self) -> None:
        self._spool.close()


def read_run(source: BinaryIO) -> Iterator[Chunk]:
    """A run's chunks, in its (sorted) order."""
    while head := source.read(_RUN_HEAD.size):
        key_group, seq, length = _RUN_HEAD.unpack(head)
        yield key_group, seq, source.read(length)


def merged_runs(runs: Iterable[Iterator[Chunk]]) -> Iterator[tuple[int, bytes]]:
    """Sorted runs merged into one stream of (key group, chunk), key groups ascending."""
    merged = heapq.merge(*runs, key=lambda chunk: (chunk[0], chunk[1]))
    return ((key_group, chunk) for key_group, _, chunk in merged)
