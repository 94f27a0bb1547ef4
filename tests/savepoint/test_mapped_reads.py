"""A local file's block batches are read as views of it mapped into memory (`read_view`): the
same bytes as a read, from any offset, and the same errors."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from statectl.errors import SavepointError
from statectl.savepoint.model import StateStream
from statectl.savepoint.storage import locate

SIZE = 3 << 20


@pytest.fixture
def data(tmp_path: Path) -> tuple[Path, bytes]:
    content = os.urandom(SIZE)
    path = tmp_path / "state"
    path.write_bytes(content)
    return path, content


@pytest.mark.parametrize("start, end", [(0, SIZE), (4097, SIZE - 3), (1 << 20, (2 << 20) + 5)])
def test_a_local_view_equals_the_read(data: tuple[Path, bytes], start: int, end: int) -> None:
    path, content = data
    stream = StateStream(str(path), SIZE, None, locate(str(path)))
    view = stream.read_view(start, end)
    assert isinstance(view, memoryview)
    assert bytes(view) == stream.read(start, end) == content[start:end]


def test_a_segment_is_mapped_from_its_offset(data: tuple[Path, bytes]) -> None:
    path, content = data
    segment = StateStream(str(path), SIZE - 12345, None, locate(str(path)), start=12345)
    assert bytes(segment.read_view(7, (2 << 20) + 7)) == content[12352 : 12345 + (2 << 20) + 7]


def test_a_short_file_is_the_same_error(data: tuple[Path, bytes]) -> None:
    path, _ = data
    stream = StateStream(str(path), SIZE + 10, None, locate(str(path)))
    with pytest.raises(SavepointError, match="shorter than its handle says"):
        stream.read_view(0, SIZE + 10)


def test_remote_storage_is_read() -> None:
    location = locate("memory://mapped-reads/state")
    location.fs.pipe_file(location.path, b"x" * SIZE)
    stream = StateStream(location.url, SIZE, None, location)
    assert stream.read_view(1, SIZE) == b"x" * (SIZE - 1)
