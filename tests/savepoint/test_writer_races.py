"""A destination that appears while a run writes is not replaced silently; stale staging folders
of killed runs are found (and left alone)."""

from __future__ import annotations

import uuid
from pathlib import Path

import fsspec
import pytest

from statectl.errors import SavepointError
from statectl.formats.metadata import CheckpointMetadata
from statectl.savepoint import writer
from tests.conftest import fixture_savepoint


@pytest.fixture(params=["local", "memory"])
def destination(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "local":
        return str(tmp_path / "out")
    return f"memory://statectl-tests/{uuid.uuid4().hex}/out"


def _metadata() -> CheckpointMetadata:
    from statectl.formats.metadata import read_metadata

    real = read_metadata((fixture_savepoint("hashmap_canonical_files") / "_metadata").read_bytes())
    return CheckpointMetadata(6, 7, (), (), real.properties)


def test_destination_appearing_while_writing_is_not_replaced(destination: str) -> None:
    staged = writer.stage(destination, overwrite=False)
    fs, path = fsspec.core.url_to_fs(destination)
    fs.makedirs(path, exist_ok=True)
    fs.pipe_file(path + "/_metadata", b"another run's savepoint")
    with pytest.raises(SavepointError, match="destination appeared while writing"):
        writer.publish(staged, _metadata())
    assert fs.cat_file(path + "/_metadata") == b"another run's savepoint"


def test_stale_staging_folders_are_listed(destination: str) -> None:
    assert writer.stale_staging(destination) == []
    killed = writer.stage(destination, overwrite=False)  # a run that never published
    writer.stage(destination + "-other", overwrite=False)  # another destination's: not listed
    assert writer.stale_staging(destination) == [killed.staging.url]
    assert killed.staging.exists()  # listing never deletes
