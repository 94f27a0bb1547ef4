"""Encoded entries on their way to the task that writes their subtask: chunks.

A value edit's tasks encode rows where the rows are (`table_rows.encode_batch`) and emit, per
batch and key group, one chunk: the key group's entries of that batch packed into one byte
string (a length-prefixed composite key, then a length-prefixed stored value, entry after
entry). The shuffle moves chunks, not entries, so its cost is per batch and key group; it
sorts them by (subtask, key group, …), and the writing task reads them back one key group at
a time (`ShuffledRows`), holding one key group's rows: what `keyed_rewrite` writes.
"""

from __future__ import annotations

import heapq
import itertools
import os
import struct
import tempfile
from collections.abc import Callable, Iterable, Iterator
from typing import BinaryIO

from statectl.errors import FormatError

Row = tuple[bytes, bytes]  # composite key (no flag), stored value

_LENGTHS = struct.Struct(">ii")  # key length, value length


def pack(rows: Iterable[Row]) -> bytes:
    """Rows as one chunk."""
    parts: list[bytes] = []
    for key, value in rows:
        parts += (_LENGTHS.pack(len(key), len(value)), key, value)
    return b"".join(parts)


def unpack(chunk: bytes) -> Iterator[Row]:
    """A chunk's rows, in the order packed."""
    view = memoryview(chunk)
    pos = 0
    while pos < len(view):
        key_length, value_length = _LENGTHS.unpack_from(view, pos)
        key_end = pos + _LENGTHS.size + key_length
        end = key_end + value_length
        yield bytes(view[pos + _LENGTHS.size : key_end]), bytes(view[key_end:end])
        pos = end


class ShuffledRows:
    """A subtask's replaced rows from a stream of (key group, chunk) sorted by key group: what
    `keyed_rewrite.StateChange.rows` takes. Key groups are asked for in ascending order (both
    writers do); each comes back sorted by composite key, and a key given twice (in one chunk
    or two) is a FormatError saying `describe(key)` appears more than once."""

    def __init__(
        self, chunks: Iterable[tuple[int, bytes]], describe: Callable[[bytes], str]
    ) -> None:
        self._chunks = iter(chunks)
        self._pending = next(self._chunks, None)
        self._describe = describe
        self._asked = -1
        self.count = 0  # rows handed out so far

    def get(self, key_group: int) -> list[Row] | None:
        if key_group <= self._asked:
            raise ValueError(f"key group {key_group} asked for after {self._asked}")
        self._asked = key_group
        if self._pending is not None and self._pending[0] < key_group:
            # Chunks of key groups outside the subtask's range: statectl routed them wrongly.
            raise FormatError(f"rows of key group {self._pending[0]} reached the wrong subtask")
        rows: list[Row] = []
        while self._pending is not None and self._pending[0] == key_group:
            rows.extend(unpack(self._pending[1]))
            self._pending = next(self._chunks, None)
        if not rows:
            return None
        rows.sort()
        for (key, _), (following, _) in itertools.pairwise(rows):
            if key == following:
                raise FormatError(f"{self._describe(key)} appears more than once")
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
