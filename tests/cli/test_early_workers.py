"""The entry point starts the worker processes' fork server before the command line only for
commands that rewrite RocksDB instances in worker processes (`statectl.__main__`)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from statectl.__main__ import _rewrites_rocksdb
from tests.conftest import fixture_savepoint


@pytest.fixture(scope="module")
def native() -> str:
    return str(fixture_savepoint("rocksdb_native_full"))


@pytest.fixture(scope="module")
def canonical() -> str:
    return str(fixture_savepoint("hashmap_canonical_files"))


def test_rewrites_of_rocksdb_instances_start_the_workers_early(native: str, canonical: str) -> None:
    assert _rewrites_rocksdb(["rescale", native, "-o", "out", "-p", "2"])
    assert _rewrites_rocksdb(["rescale", "-o", "out", f"{native}/_metadata", "-p", "2"])
    assert _rewrites_rocksdb(["convert", native, "-o", "out", "--format", "canonical"])
    assert _rewrites_rocksdb(["convert", canonical, "-o", "out", "--format", "native"])
    assert _rewrites_rocksdb(["convert", canonical, "-o", "out", "--format=native"])
    assert _rewrites_rocksdb(["rescale", native, "-o", "out", "-p", "2", "--master", "local[*]"])


def test_other_commands_and_canonical_state_do_not(native: str, canonical: str) -> None:
    assert not _rewrites_rocksdb([])
    assert not _rewrites_rocksdb(["inspect", native])
    assert not _rewrites_rocksdb(["rescale", canonical, "-o", "out", "-p", "2"])
    assert not _rewrites_rocksdb(["convert", canonical, "-o", "out", "--format", "canonical"])
    assert not _rewrites_rocksdb(["rescale", "no/such/savepoint", "-o", "out", "-p", "2"])
    # Tasks on Spark, or none at all: no worker process would be forked.
    assert not _rewrites_rocksdb(["rescale", native, "-o", "out", "-p", "2", "--dry-run"])
    assert not _rewrites_rocksdb(["rescale", native, "-o", "out", "--master", "spark://h:7077"])
    assert not _rewrites_rocksdb(["rescale", native, "-o", "out", "--master=yarn"])
    assert not _rewrites_rocksdb(["rescale", native, "-o", "out", "--no-head-start"])


def test_a_fork_server_that_serves_no_task_ends_with_the_command(
    native: str, tmp_path: Path
) -> None:
    """A small instance's tasks run in the driver: the server started early forks no worker,
    and the command still ends at once, with its output."""
    out = tmp_path / "rescaled"
    done = subprocess.run(
        [sys.executable, "-m", "statectl", "rescale", native, "-o", str(out), "-p", "3", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["tasks"]["processes"] == 0
    assert (out / "_metadata").exists()
