"""Writing a new savepoint's files: byte-range copies and writes with a known position.

Local-to-local copies use `os.copy_file_range`, so state bytes never pass through Python;
other filesystems stream in bounded chunks. Memory stays flat whatever the state size.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import BinaryIO

from statectl.errors import StatectlError
from statectl.formats.handles import RelativeFileHandle
from statectl.savepoint.model import StateStream
from statectl.savepoint.storage import Location

CHUNK_BYTES = 8 << 20


@dataclass(frozen=True, slots=True)
class CopyTask:
    """Carry a file over unchanged (operators whose parallelism does not change)."""

    source: StateStream
    name: str


class OutputFile:
    """A new state file being written, with its position, and byte-range copies into it.

    Local files are written through a raw descriptor so `os.copy_file_range` and plain writes
    share one file position; other filesystems go through fsspec in bounded chunks.
    """

    def __init__(self, location: Location) -> None:
        self.location = location
        self.pos = 0
        self._fd: int | None = None
        self._file: BinaryIO | None = None
        if location.is_local:
            self._fd = os.open(location.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        else:
            self._file = location.fs.open(location.path, "wb")

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if self._fd is not None:
            view = memoryview(data)
            while view:
                view = view[os.write(self._fd, view) :]
        elif self._file is not None:
            self._file.write(data)
        else:
            raise ValueError(f"{self.location.url} is closed")
        self.pos += len(data)

    def copy(self, source: StateStream, start: int, end: int) -> None:
        if end <= start:
            return
        location = source.location
        if self._fd is not None and location is not None and location.is_local:
            self._copy_file_range(self._fd, location.path, source, start, end)
        else:
            for chunk_start in range(start, end, CHUNK_BYTES):
                self.write(source.read(chunk_start, min(end, chunk_start + CHUNK_BYTES)))

    def _copy_file_range(
        self, fd: int, path: str, source: StateStream, start: int, end: int
    ) -> None:
        """Bytes [start, end) of `source`, the file at `path`, copied by the kernel into `fd`."""
        with open(path, "rb") as src:
            offset, remaining = source.start + start, end - start
            while remaining:
                copied = os.copy_file_range(src.fileno(), fd, remaining, offset)
                if copied == 0:
                    raise StatectlError(
                        f"file ended before byte {source.start + end}", source.description
                    )
                offset += copied
                remaining -= copied
                self.pos += copied

    def close(self) -> int:
        if self._file is not None:
            self._file.close()
        elif self._fd is not None:
            os.close(self._fd)
        self._file = self._fd = None
        return self.pos


def copy_file(task: CopyTask, output: Location) -> RelativeFileHandle:
    """Carry `task.source` over byte for byte into `output`; the copy as `_metadata` names it."""
    out = OutputFile(output.child(task.name))
    try:
        out.copy(task.source, 0, task.source.size)
    finally:
        size = out.close()
    return RelativeFileHandle(task.name, size)
