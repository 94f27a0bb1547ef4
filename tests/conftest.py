"""Shared fixtures: the real Flink jars, fixture savepoints, one SparkSession per test session."""

from __future__ import annotations

import json
import logging
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from statectl.savepoint.model import Savepoint

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures"

# The longest files, started first: `make test` hands whole files to its workers
# (`--dist loadfile --no-loadscope-reorder`, so in this order), and one of these begun last would
# leave a worker running it alone.
LONGEST_FIRST = (
    "tests/operations/test_value_edits_at_size.py",
    "tests/operations/test_upgrade_at_size.py",
    "tests/api/test_spark_cluster.py",
    "tests/operations/rescale/test_cluster.py",
    "tests/reliability/test_any_machine.py",
    "tests/compat/test_flink_versions.py",
    "tests/api/test_spark_datasource.py",
    "tests/operations/rescale/test_heap_e2e.py",
    # each over 30 s in one test or fixture (a fresh clone's --durations): none of them left for the end either
    "tests/operations/rescale/test_sql_e2e.py",
    "tests/operations/test_state_edits_e2e.py",
    "tests/operations/rescale/test_native_levels_e2e.py",
    "tests/reliability/test_kill.py",
    "tests/operations/rescale/test_window_e2e.py",
    "tests/flink/test_upgrade_truth.py",
    "tests/operations/test_sql_edit_e2e.py",
)


@pytest.hookimpl(trylast=True)  # after pytest-randomly's shuffle, which it keeps otherwise
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        path = item.nodeid.split("::", 1)[0]
        return LONGEST_FIRST.index(path) if path in LONGEST_FIRST else len(LONGEST_FIRST)

    items.sort(key=rank)  # stable: the shuffled order holds within a rank


def fixture_names() -> list[str]:
    return sorted(p.parent.name for p in FIXTURES.glob("*/manifest.json"))


def load_manifest(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / name / "manifest.json").read_text())


def fixture_savepoint(name: str) -> Path:
    """The fixture's savepoint directory. A retained checkpoint's `_metadata` holds absolute
    paths, so it is first put where they point (tests must not rely on an earlier test, or an
    earlier run, having done that)."""
    from tests.flink import harness

    return harness.checkpoint_in_place(FIXTURES / name)


def run_cli(*argv: str) -> tuple[int, str, str]:
    """statectl in-process (Spark commands use the session's SparkSession): exit code, stdout,
    stderr."""
    import io
    from contextlib import redirect_stderr, redirect_stdout

    from statectl.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err), pytest.raises(SystemExit) as done:
        main(list(argv))
    return int(done.value.code or 0), out.getvalue(), err.getvalue()


def checksums(root: Path) -> dict[str, str]:
    """SHA-256 of every file below `root`, by its relative path (inputs must stay untouched)."""
    import hashlib

    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def files_under(url: str | Path, storage_options: dict[str, Any] | None = None) -> dict[str, bytes]:
    """Every file below a folder (a path or any fsspec URL), by its path relative to it."""
    from fsspec.core import url_to_fs

    fs, root = url_to_fs(str(url), **(storage_options or {}))
    root = root.rstrip("/")
    return {path[len(root) :].strip("/"): fs.cat_file(path) for path in fs.find(root)}


def key_group_blocks(sp: Savepoint, uid: str) -> dict[int, bytes]:
    """Key group → its canonical block's bytes (stored form), over all subtasks of `uid`;
    every key group in one subtask only."""
    from statectl.formats import keyed_blocks
    from statectl.formats.handles import KeyGroupsHandle

    blocks: dict[int, bytes] = {}
    for subtask in sp.subtasks(sp.find_operator(uid)):
        handle = subtask.managed_keyed_state
        assert isinstance(handle, KeyGroupsHandle)
        stream = sp.stream(handle)
        data = stream.read()
        for span in keyed_blocks.block_spans(handle.start_key_group, handle.offsets, stream.size):
            assert span.key_group not in blocks
            blocks[span.key_group] = data[span.start : span.end]
    return blocks


S3_BUCKET = "savepoints"


@pytest.fixture(scope="session")
def s3() -> Iterator[tuple[object, dict[str, str]]]:
    """A real S3 protocol server (moto's, on 127.0.0.1) with the bucket `S3_BUCKET`: (an s3fs
    filesystem, the storage options that reach the same server)."""
    from moto.server import ThreadedMotoServer
    from s3fs import S3FileSystem

    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # a line per request otherwise
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    options = {"endpoint_url": f"http://127.0.0.1:{port}", "key": "statectl", "secret": "statectl"}
    fs = S3FileSystem(**options, use_listings_cache=False)
    fs.mkdir(S3_BUCKET)
    yield fs, options
    server.stop()


def storage_flags(options: dict[str, str]) -> list[str]:
    """The CLI's `--storage-option k=v` flags for these storage options."""
    return [flag for k, v in options.items() for flag in ("--storage-option", f"{k}={v}")]


@pytest.fixture
def no_spark(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fails a test that starts Spark: bad input must be refused while the input is checked,
    and commands that copy in-process (migrate) never need it."""
    from statectl.execution import spark

    def refuse(*args: object, **kwargs: object) -> None:
        pytest.fail("the command started Spark")

    monkeypatch.setattr(spark, "spark_session", refuse)
    monkeypatch.setattr(spark, "spark_context", refuse)


@pytest.fixture(scope="session")
def flink_dist() -> Path:
    """flink-dist-2.3.0.jar, installed into the git-ignored cache on first use."""
    from tests.flink import harness

    lib = harness.ensure_flink()
    return next(lib.glob("flink-dist-*.jar"))


@pytest.fixture(scope="session")
def spark():
    """The one embedded SparkSession of the test session; `rescale()` picks it up as active."""
    from statectl.execution.spark import spark_session

    session = spark_session("local[2]")
    yield session
    session.stop()
