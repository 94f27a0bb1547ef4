"""A replaced state's entries by key group, gathered with bounded memory.

What `State.replace` and `transform` hand the write path (`keyed_rewrite.StateChange.rows`):
rows arrive in any order (a table, or batch after batch from a reader), are held in memory up
to `run_bytes`, then sorted by (key group, composite key) and written as a run to a folder of
local disk (`$STATECTL_LOCAL_DIR`, else the temp dir). `finish` merges the runs into one file
in that order with an index of each key group's byte range, and refuses a key given twice
(neighbours once sorted). The writers then read one key group at a time (`rows[key_group]`),
so a state of any size is rewritten holding one key group's rows. Rows that fit in one run
never touch the disk.
"""

from __future__ import annotations

import heapq
import os
import shutil
import struct
import tempfile
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import BinaryIO

from statectl.errors import FormatError

Row = tuple[bytes, bytes]  # composite key (no flag), stored value
Record = tuple[int, bytes, bytes]  # key group, composite key, stored value

_HEAD = struct.Struct(">iii")  # a record on disk: key group, key length, value length
_RECORD_OVERHEAD = 120  # bytes a buffered record costs beyond its key and value (tuple, bytes)
RUN_BYTES = 64 << 20  # rows held in memory before a sorted run goes to disk


class KeyGroupRows(Mapping[int, Sequence[Row]]):
    """Rows by key group, each key group's sorted by composite key."""

    def __init__(self, count: int) -> None:
        self.count = count  # rows in all


class _InMemory(KeyGroupRows):
    def __init__(self, by_key_group: dict[int, list[Row]], count: int) -> None:
        super().__init__(count)
        self._rows = by_key_group

    def __getitem__(self, key_group: int) -> Sequence[Row]:
        return self._rows[key_group]

    def __iter__(self) -> Iterator[int]:
        return iter(self._rows)

    def __len__(self) -> int:
        return len(self._rows)


class _OnDisk(KeyGroupRows):
    """Rows in one file sorted by key group; only the index of key groups is in memory."""

    def __init__(self, path: Path, index: dict[int, tuple[int, int]], count: int) -> None:
        super().__init__(count)
        self._path, self._index = path, index

    def __getitem__(self, key_group: int) -> Sequence[Row]:
        start, end = self._index[key_group]
        with open(self._path, "rb") as file:
            file.seek(start)
            data = memoryview(file.read(end - start))
        rows, pos = [], 0
        while pos < len(data):
            _, key_length, value_length = _HEAD.unpack_from(data, pos)
            key_start = pos + _HEAD.size
            key_end = key_start + key_length
            pos = key_end + value_length
            rows.append((bytes(data[key_start:key_end]), bytes(data[key_end:pos])))
        return rows

    def __iter__(self) -> Iterator[int]:
        return iter(self._index)

    def __len__(self) -> int:
        return len(self._index)


class RowSpill:
    """Gathers (key group, composite key, value) records; `finish` gives them by key group."""

    def __init__(self, run_bytes: int | None = None) -> None:
        self.run_bytes = run_bytes or RUN_BYTES
        self._buffer: list[Record] = []
        self._buffered = 0
        self._runs: list[Path] = []
        self._folder: Path | None = None
        self._remove_folder: weakref.finalize[[str, bool], RowSpill] | None = None
        self.count = 0

    def add(self, key_group: int, key: bytes, value: bytes) -> None:
        self._buffer.append((key_group, key, value))
        self.count += 1
        self._buffered += len(key) + len(value) + _RECORD_OVERHEAD
        if self._buffered >= self.run_bytes:
            self._spill()

    def finish(self, describe: Callable[[bytes], str]) -> KeyGroupRows:
        """The rows by key group; a composite key given twice is a FormatError saying
        `describe(key)` appears more than once."""
        if not self._runs:
            self._buffer.sort()
            return _InMemory(_grouped(self._buffer, describe), self.count)
        self._spill()
        assert self._folder is not None
        merged_path = self._folder / "rows"
        with open(merged_path, "wb") as out:
            index = _write_merged(self._runs, out, describe)
        for run in self._runs:
            run.unlink()
        rows = _OnDisk(merged_path, index, self.count)
        # The folder now lives as long as the rows read from it.
        assert self._remove_folder is not None
        self._remove_folder.detach()
        weakref.finalize(rows, shutil.rmtree, str(self._folder), True)
        return rows

    def _spill(self) -> None:
        if not self._buffer:
            return
        if self._folder is None:
            local = os.environ.get("STATECTL_LOCAL_DIR")
            folder = tempfile.mkdtemp(prefix="statectl-rows-", dir=local)
            self._folder = Path(folder)
            self._remove_folder = weakref.finalize(self, shutil.rmtree, folder, True)
        self._buffer.sort()
        run = self._folder / f"run-{len(self._runs):05d}"
        with open(run, "wb") as out:
            for record in self._buffer:
                _write_record(out, record)
        self._runs.append(run)
        self._buffer, self._buffered = [], 0


def _grouped(records: list[Record], describe: Callable[[bytes], str]) -> dict[int, list[Row]]:
    by_key_group: dict[int, list[Row]] = {}
    previous = None
    for key_group, key, value in records:
        if key == previous:
            raise FormatError(f"{describe(key)} appears more than once")
        previous = key
        by_key_group.setdefault(key_group, []).append((key, value))
    return by_key_group


def _write_merged(
    runs: list[Path], out: BinaryIO, describe: Callable[[bytes], str]
) -> dict[int, tuple[int, int]]:
    index: dict[int, tuple[int, int]] = {}
    previous: bytes | None = None
    start = pos = 0
    current = -1
    files = [open(run, "rb") for run in runs]  # noqa: SIM115 - closed below
    try:
        for key_group, key, value in heapq.merge(*(_read_records(f) for f in files)):
            if key == previous:
                raise FormatError(f"{describe(key)} appears more than once")
            previous = key
            if key_group != current:
                if current >= 0:
                    index[current] = (start, pos)
                current, start = key_group, pos
            pos += _write_record(out, (key_group, key, value))
        if current >= 0:
            index[current] = (start, pos)
    finally:
        for file in files:
            file.close()
    return index


def _write_record(out: BinaryIO, record: Record) -> int:
    key_group, key, value = record
    out.write(_HEAD.pack(key_group, len(key), len(value)))
    out.write(key)
    out.write(value)
    return _HEAD.size + len(key) + len(value)


def _read_records(file: BinaryIO) -> Iterator[Record]:
    while head := file.read(_HEAD.size):
        key_group, key_length, value_length = _HEAD.unpack(head)
        yield key_group, file.read(key_length), file.read(value_length)
