"""A RocksDB instance's rows a batch at a time, and the canonical blocks made of them.

rocksdict hands rows out one Python tuple at a time. Taken by `itertools.islice` into a list
and joined into Arrow arrays (keys, values) by calls that loop in C, a batch costs Python
steps per batch, not per row; the blocks `convert` writes are then cut by key group and laid
out by Arrow's kernels (`entry_chunks.append_entries`). A batch holds about `BATCH_BYTES`,
whatever the rows' sizes.
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import operator
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from statectl.formats import keyed_blocks
from statectl.formats.arrays import Int64s
from statectl.formats.values.batch_encode import (
    big_endian_lengths,
    binary_rows,
    data_of,
    join,
    offsets_of,
)
from statectl.savepoint.entry_chunks import append_entries

Rows = tuple[pa.Array, pa.Array]  # keys, values

BATCH_BYTES = 2 << 20  # amortises Arrow's and numpy's steps, stays in the CPU caches
PIECE_BYTES = 1 << 20  # a canonical block streamed out of an instance: bytes per piece
_FIRST_ROWS, _MOST_ROWS = 256, 16384
_KEY, _VALUE = operator.itemgetter(0), operator.itemgetter(1)


def batches(rows: Iterator[Any]) -> Iterator[Rows]:
    """(keys, values) of the next rows, about `BATCH_BYTES` at a time: the first batch small,
    each next one sized by the bytes per row of the one before."""
    size = _FIRST_ROWS
    while True:
        with _gc_paused():
            batch = list(itertools.islice(rows, size))
            if not batch:
                return
            found = binary_rows(list(map(_KEY, batch))), binary_rows(list(map(_VALUE, batch)))
            count = len(batch)
            del batch  # before the collector resumes, or its next pass walks every tuple
        yield found
        per_row = max(1, (found[0].nbytes + found[1].nbytes) // count)
        size = min(_MOST_ROWS, max(1, BATCH_BYTES // per_row))


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """Python's cycle collector paused while a batch's tuples are made: they hold no cycles,
    and each collection would walk every one of them (it tripled a batch's cost)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def key_groups(keys: pa.Array, prefix_bytes: int) -> Int64s:
    """Each key's key group: its first `prefix_bytes` bytes, big-endian."""
    starts = offsets_of(keys)
    if len(keys) and int(np.diff(starts).min()) < prefix_bytes:
        raise ValueError(f"a key is shorter than its {prefix_bytes}-byte key-group prefix")
    data, starts = data_of(keys), starts[:-1]
    groups = data[starts].astype(np.int64)
    for step in range(1, prefix_bytes):
        groups = (groups << 8) | data[starts + step]
    return groups


def laid_out(keys: pa.Array, values: pa.Array) -> tuple[bytes, Int64s, Int64s, Int64s]:
    """Rows laid out as block entries are (i32 length, key, i32 length, value, no flags), and
    where each key starts and ends and each value ends in those bytes."""
    entries = join(big_endian_lengths(keys), keys, big_endian_lengths(values), values)
    offsets = offsets_of(entries)
    data = data_of(entries)[int(offsets[0]) : int(offsets[-1])].tobytes()
    offsets -= offsets[0]
    key_starts = offsets[:-1] + 4
    return data, key_starts, key_starts + np.diff(offsets_of(keys)), offsets[1:]


class KeyGroupCursor:
    """One state's rows, ascending, taken a key group at a time from its batches."""

    def __init__(self, rows: Iterator[Rows], prefix_bytes: int) -> None:
        self._rows, self._prefix_bytes = rows, prefix_bytes
        self._keys = self._values = binary_rows([])
        self._groups: Int64s = np.zeros(0, np.int64)
        self._position = 0
        self._load()

    @property
    def key_group(self) -> int | None:
        """The key group of the next row; None once the rows are done."""
        return int(self._groups[self._position]) if self._position < len(self._groups) else None

    def take(self, key_group: int) -> tuple[pa.Array, pa.Array, bool]:
        """The next rows of `key_group` (the next row's) in this batch, and whether they are
        its last: False when the next batch begins with the same key group."""
        start = self._position
        end = int(np.searchsorted(self._groups, key_group, side="right"))
        keys, values = self._keys.slice(start, end - start), self._values.slice(start, end - start)
        self._position = end
        if end == len(self._groups):
            self._load()
        return keys, values, self.key_group != key_group

    def _load(self) -> None:
        for keys, values in self._rows:
            if len(keys):
                self._keys, self._values = keys, values
                self._groups, self._position = key_groups(keys, self._prefix_bytes), 0
                return
        self._groups, self._position = np.zeros(0, np.int64), 0


def block_pieces(
    cursors: Sequence[KeyGroupCursor], state_ids: Sequence[int]
) -> Iterator[tuple[int, bytearray]]:
    """(key group, piece) of every non-empty key group's canonical block, ascending: a run per
    state (`cursors[i]`'s rows under `state_ids[i]`, ids ascending), then the end mark. A key
    group's pieces are consecutive and, joined, its block; a piece holds about `PIECE_BYTES`
    or a batch, never a whole key group. A ValueError names the key group and what is wrong."""
    while True:
        present = [c.key_group for c in cursors if c.key_group is not None]
        if not present:
            return
        key_group = min(present)
        try:
            yield from _key_group_pieces(key_group, cursors, state_ids)
        except ValueError as exc:
            raise ValueError(f"key group {key_group}: {exc}") from None


def _key_group_pieces(
    key_group: int, cursors: Sequence[KeyGroupCursor], state_ids: Sequence[int]
) -> Iterator[tuple[int, bytearray]]:
    piece = bytearray()
    for cursor, state_id in zip(cursors, state_ids, strict=True):
        if cursor.key_group != key_group:
            continue
        keyed_blocks.append_run_start(piece, state_id)
        ended = False
        while not ended:
            keys, values, ended = cursor.take(key_group)
            append_entries(piece, keys, values, last_of_run=ended)
            if len(piece) >= PIECE_BYTES:
                yield key_group, piece
                piece = bytearray()
    keyed_blocks.append_end_mark(piece)
    yield key_group, piece
