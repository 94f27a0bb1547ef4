"""Staging and publishing: `_metadata` last, no overwrite unless asked, nothing left on failure."""

from __future__ import annotations

import dataclasses
import errno
import os
import uuid
from pathlib import Path
from typing import Any

import fsspec
import pytest

from statectl.errors import SavepointError
from statectl.formats.metadata import CheckpointMetadata, read_metadata, write_metadata
from statectl.savepoint import writer
from statectl.savepoint.storage import locate
from tests.conftest import fixture_savepoint

# No operators, and the CheckpointProperties tail of a real Flink 2.3 savepoint.
_FIXTURE = fixture_savepoint("hashmap_canonical_files") / "_metadata"
EMPTY = CheckpointMetadata(6, 7, (), (), read_metadata(_FIXTURE.read_bytes()).properties)


@pytest.fixture(params=["local", "memory"])
def destination(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "local":
        return str(tmp_path / "out")
    return f"memory://statectl-tests/{uuid.uuid4().hex}/out"


def _files(url: str) -> dict[str, bytes]:
    fs, path = fsspec.core.url_to_fs(url)
    return {p.rsplit("/", 1)[-1]: fs.cat_file(p) for p in fs.find(path)}


def test_publish_moves_state_files_and_metadata_into_place(destination: str) -> None:
    staged = writer.stage(destination, overwrite=False)
    staged.staging.fs.pipe_file(staged.staging.child("state-1").path, b"abc")
    writer.publish(staged, EMPTY)
    files = _files(destination)
    assert files["state-1"] == b"abc"
    assert read_metadata(files["_metadata"]) == EMPTY
    assert not staged.staging.exists()


def _previous_savepoint(destination: str) -> None:
    fs, path = fsspec.core.url_to_fs(destination)
    fs.makedirs(path, exist_ok=True)
    fs.pipe_file(path + "/old-state", b"old")
    fs.pipe_file(path + "/_metadata", write_metadata(EMPTY))


def test_existing_savepoint_is_refused_unless_overwrite(destination: str) -> None:
    _previous_savepoint(destination)
    with pytest.raises(SavepointError, match="destination exists; pass --overwrite"):
        writer.stage(destination, overwrite=False)
    staged = writer.stage(destination, overwrite=True)
    staged.staging.fs.pipe_file(staged.staging.child("new-state").path, b"new")
    writer.publish(staged, EMPTY)
    assert _files(destination) == {"new-state": b"new", "_metadata": write_metadata(EMPTY)}
    assert _siblings(destination) == ["out"]


def test_a_folder_without_metadata_is_never_replaced(destination: str) -> None:
    fs, path = fsspec.core.url_to_fs(destination)
    fs.makedirs(path, exist_ok=True)
    fs.pipe_file(path + "/old-file", b"old")
    for overwrite in (False, True):
        with pytest.raises(SavepointError) as error:
            writer.stage(destination, overwrite=overwrite)
        assert str(error.value) == (
            f"{destination}: is not a savepoint (no _metadata); refusing to replace it"
        )
    assert _files(destination) == {"old-file": b"old"}
    assert _siblings(destination) == ["out"]  # no staging folder


def test_a_file_is_never_replaced(destination: str) -> None:
    fs, path = fsspec.core.url_to_fs(destination)
    fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
    fs.pipe_file(path, b"a file")
    with pytest.raises(SavepointError) as error:
        writer.stage(destination, overwrite=True)
    assert (
        str(error.value)
        == f"{destination}: is a file, not a savepoint folder; refusing to replace it"
    )
    assert fs.cat_file(path) == b"a file"


def test_a_savepoint_that_became_something_else_while_writing_is_not_replaced(
    destination: str,
) -> None:
    _previous_savepoint(destination)
    staged = writer.stage(destination, overwrite=True)
    fs, path = fsspec.core.url_to_fs(destination)
    fs.rm(path + "/_metadata")  # someone put their own files there meanwhile
    with pytest.raises(SavepointError, match="no _metadata\\); refusing to replace it"):
        writer.publish(staged, EMPTY)
    assert _files(destination) == {"old-state": b"old"}


def test_the_old_savepoint_stays_when_moving_the_new_one_in_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    destination = str(tmp_path / "out")
    _previous_savepoint(destination)
    before = _files(destination)
    staged = writer.stage(destination, overwrite=True)
    staged.staging.fs.pipe_file(staged.staging.child("new-state").path, b"new")
    rename = os.rename
    seen: list[dict[str, bytes]] = []

    def failing(src: str, dst: str) -> None:
        if src == staged.staging.path:  # the old one is aside now: the new one fails to move in
            seen.append(_files(dst) if os.path.exists(dst) else {})
            raise OSError(errno.EIO, "Input/output error", src)
        rename(src, dst)

    monkeypatch.setattr(writer.os, "rename", failing)
    with pytest.raises(SavepointError) as error:
        writer.publish(staged, EMPTY)
    assert str(error.value) == f"{destination}: cannot write here: input/output error"
    assert seen == [{}]  # it was attempted with the old savepoint aside
    assert _files(destination) == before  # and the old savepoint was put back
    assert _siblings(destination) == sorted(
        ["out", staged.staging.name]
    )  # discard() is the caller's


def test_on_object_stores_there_is_always_a_metadata_while_replacing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    destination = f"memory://statectl-tests/{uuid.uuid4().hex}/out"
    _previous_savepoint(destination)
    staged = writer.stage(destination, overwrite=True)
    staged.staging.fs.pipe_file(staged.staging.child("new-state").path, b"new")
    fs, path = fsspec.core.url_to_fs(destination)
    moves: list[tuple[str, bytes]] = []
    move = type(fs).mv

    def recorded(self: Any, src: str, dst: str, *args: Any, **kwargs: Any) -> None:
        move(self, src, dst, *args, **kwargs)
        moves.append((dst.rsplit("/", 1)[-1], fs.cat_file(path + "/_metadata")))

    monkeypatch.setattr(type(fs), "mv", recorded)
    new_metadata = dataclasses.replace(EMPTY, checkpoint_id=8)
    writer.publish(staged, new_metadata)
    old, new = write_metadata(EMPTY), write_metadata(new_metadata)
    assert moves == [("new-state", old), ("_metadata", new)]  # new files in, then `_metadata`
    assert _files(destination) == {"new-state": b"new", "_metadata": new}


def test_an_empty_folder_is_replaced_with_overwrite(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    with pytest.raises(SavepointError, match="destination exists; pass --overwrite"):
        writer.stage(str(tmp_path / "out"), overwrite=False)
    writer.publish(writer.stage(str(tmp_path / "out"), overwrite=True), EMPTY)
    assert sorted(_files(str(tmp_path / "out"))) == ["_metadata"]


def test_an_unwritable_destination_is_one_line_naming_it() -> None:
    for destination, reason in (
        ("/sys/statectl-out", "permission denied"),  # root too may not write under /sys
        ("/etc/hostname/statectl-out", "a parent is not a folder"),
    ):
        with pytest.raises(SavepointError) as error:
            writer.stage(destination, overwrite=False)
        assert str(error.value) == f"{destination}: cannot write here: {reason}"


def test_the_owner_marker_is_not_published(destination: str) -> None:
    staged = writer.stage(destination, overwrite=False)
    assert staged.staging.child(writer.OWNER_FILE).exists()
    writer.publish(staged, EMPTY)
    assert sorted(_files(destination)) == ["_metadata"]


def _siblings(destination: str) -> list[str]:
    fs, path = fsspec.core.url_to_fs(destination)
    return sorted(
        p.rstrip("/").rsplit("/", 1)[-1] for p in fs.ls(path.rsplit("/", 1)[0], detail=False)
    )


def test_discard_leaves_nothing(destination: str) -> None:
    staged = writer.stage(destination, overwrite=False)
    staged.staging.fs.pipe_file(staged.staging.child("state-1").path, b"abc")
    writer.discard(staged)
    assert not staged.staging.exists()
    assert not staged.destination.exists()


def test_destination_inside_the_source_is_refused(tmp_path: Path) -> None:
    source = locate(str(tmp_path / "sp"))
    with pytest.raises(SavepointError, match="must not be the source"):
        writer.ensure_not_inside(source, str(tmp_path / "sp" / "nested"), None)
    with pytest.raises(SavepointError, match="must not be the source"):
        writer.ensure_not_inside(source, str(tmp_path / "sp"), None)
    writer.ensure_not_inside(source, str(tmp_path / "sp-2"), None)


def test_a_bare_relative_destination_stages_beside_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    staged = writer.stage("out", overwrite=False)
    assert staged.staging_url.startswith("./.statectl-staging-out-")
    assert locate(staged.staging_url).path == staged.staging.path
    assert Path(staged.staging.path).parent == tmp_path
    writer.publish(staged, EMPTY)
    assert read_metadata((tmp_path / "out" / "_metadata").read_bytes()) == EMPTY


def test_a_destination_at_the_root_of_a_filesystem_stages_on_that_filesystem() -> None:
    """`memory://x` stages in `memory://.statectl-staging-x-…`, not in a local `memory:/` path."""
    name = f"root-{uuid.uuid4().hex[:8]}"
    staged = writer.stage(f"memory://{name}", overwrite=False)
    assert staged.staging_url.startswith(f"memory://.statectl-staging-{name}-")
    assert locate(staged.staging_url).is_process_local
    assert locate(staged.staging_url).path == staged.staging.path
    writer.publish(staged, EMPTY)
    assert read_metadata(fsspec.filesystem("memory").cat_file(f"/{name}/_metadata")) == EMPTY
