"""A destination that appears while a run writes is not replaced silently; staging folders of
killed runs are removed by the next successful run, those of runs that may still write are not;
runs overwriting one destination at once end with one complete savepoint."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import threading
import time
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


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def _owned_by(staged: writer.StagedSavepoint, owner: writer.Owner) -> None:
    staged.staging.fs.pipe_file(staged.staging.child(writer.OWNER_FILE).path, owner.to_bytes())


def test_a_successful_run_removes_staging_folders_of_dead_runs_only(destination: str) -> None:
    here = writer.Owner.current()
    killed = writer.stage(destination, overwrite=False)
    _owned_by(killed, dataclasses.replace(here, pid=_dead_pid(), started=None))
    reused = writer.stage(destination, overwrite=False)  # its pid now runs another process
    _owned_by(reused, dataclasses.replace(here, started="1"))
    rebooted = writer.stage(destination, overwrite=False)
    _owned_by(rebooted, dataclasses.replace(here, boot="an earlier boot"))
    running = writer.stage(destination, overwrite=False)  # this process: alive
    elsewhere = writer.stage(destination, overwrite=False)
    _owned_by(elsewhere, dataclasses.replace(here, host="another-host", pid=_dead_pid()))
    kept = sorted([running.staging.url, elsewhere.staging.url])
    assert writer.stale_staging(destination) == kept  # the ones a success will not remove

    winner = writer.stage(destination, overwrite=False)
    writer.publish(winner, _metadata())
    assert [s.exists() for s in (killed.staging, reused.staging, rebooted.staging)] == [False] * 3
    assert running.staging.exists() and elsewhere.staging.exists()
    assert writer.stale_staging(destination) == kept


def test_unmarked_staging_folders_are_removed_only_when_a_day_old(tmp_path: Path) -> None:
    destination = str(tmp_path / "out")
    old, young = (writer.stage(destination, overwrite=False) for _ in range(2))
    for staged in (old, young):  # as a statectl version without owner markers left them
        staged.staging.fs.rm(staged.staging.child(writer.OWNER_FILE).path)
    day_ago = time.time() - writer.UNMARKED_STALE_SECONDS - 60
    os.utime(old.staging.path, (day_ago, day_ago))
    assert writer.stale_staging(destination) == [young.staging.url]
    writer.publish(writer.stage(destination, overwrite=False), _metadata())
    assert not old.staging.exists() and young.staging.exists()


def test_concurrent_overwriting_runs_end_with_one_valid_savepoint(tmp_path: Path) -> None:
    destination = str(tmp_path / "out")
    outcomes: list[str] = []

    def run(name: str) -> None:
        for round_ in range(30):
            staged = writer.stage(destination, overwrite=True)
            staged.staging.fs.pipe_file(staged.staging.child(name).path, b"%d" % round_)
            try:
                writer.publish(staged, _metadata())
                outcomes.append("published")
            except SavepointError as exc:
                writer.discard(staged)
                outcomes.append(exc.message)

    threads = [threading.Thread(target=run, args=(name,)) for name in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert set(outcomes) <= {
        "published",
        "another run published here while this one was writing; its output was kept",
    }
    assert len(outcomes) == 60 and "published" in outcomes
    files = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert files in (["_metadata", "a"], ["_metadata", "b"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # nothing aside, no staging
