"""Staging and publishing: `_metadata` last, no overwrite unless asked, nothing left on failure."""

from __future__ import annotations

import uuid
from pathlib import Path

import fsspec
import pytest

from statectl.errors import SavepointError
from statectl.formats.metadata import CheckpointMetadata, read_metadata
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


def test_existing_destination_is_refused_unless_overwrite(destination: str) -> None:
    fs, path = fsspec.core.url_to_fs(destination)
    fs.makedirs(path, exist_ok=True)
    fs.pipe_file(path + "/old-file", b"old")
    with pytest.raises(SavepointError, match="destination exists; pass --overwrite"):
        writer.stage(destination, overwrite=False)
    staged = writer.stage(destination, overwrite=True)
    writer.publish(staged, EMPTY)
    assert sorted(_files(destination)) == ["_metadata"]


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
