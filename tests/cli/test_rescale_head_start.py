"""`statectl rescale` in a fresh process, where no Spark runs yet: the driver runs the tasks
itself (a re-hash's shuffle too, spilled to local disk) while the work is shorter than Spark's
start (`HeadStartEngine`), RocksDB rows and heap-format entries too when they are few. The
output equals, byte for byte, what the Spark job of the test session writes (outputs that real Flink restores in tests/operations/rescale/*e2e*).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import files_under, fixture_savepoint, run_cli
from tests.flink import harness

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.spark


def _statectl(*argv: str) -> dict[str, object]:
    """`statectl ... --json` as its own process: the JSON report."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-m", "statectl", *argv, "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    report: dict[str, object] = json.loads(done.stdout)
    return report


@pytest.mark.parametrize(
    ("fixture", "options"),
    [
        ("hashmap_canonical_files", ("-p", "3")),
        ("hashmap_compressed", ("-p", "1")),
        ("rocksdb_native_full", ("-p", "3", "--format", "canonical")),
        ("hashmap_canonical_files", ("--max-parallelism", "256", "-p", "3")),
        ("rocksdb_native_full", ("--max-parallelism", "256", "-p", "3", "--format", "canonical")),
    ],
)
def test_a_fresh_process_writes_what_the_spark_job_writes(
    spark: object, tmp_path: Path, fixture: str, options: tuple[str, ...]
) -> None:
    source = fixture_savepoint(fixture)
    code, out, err = run_cli(
        "rescale", str(source), "-o", str(tmp_path / "spark"), *options, "--json"
    )
    assert code == 0, err
    report = json.loads(out)
    on_spark = report["tasks"]
    assert on_spark["driver"] == 0 and on_spark["spark"] > 0  # the session's context ran all
    fresh = _statectl("rescale", str(source), "-o", str(tmp_path / "fresh"), *options)["tasks"]
    assert fresh == {"driver": on_spark["spark"], "processes": 0, "spark": 0}  # rows too: few
    written = files_under(tmp_path / "fresh")
    assert "_metadata" in written
    assert written == files_under(tmp_path / "spark")


def _heap_checkpoint() -> Path:
    return harness.checkpoint_in_place(harness.heap_snapshots()["checkpoint"])


def _native_savepoint() -> Path:
    return fixture_savepoint("rocksdb_native_full")


@pytest.mark.parametrize(
    ("source", "argv", "output_format", "tasks"),
    [
        (_native_savepoint, ("rescale", "-p", "3"), "NATIVE", 12),
        (_native_savepoint, ("convert",), "CANONICAL", 8),
        pytest.param(
            _heap_checkpoint, ("rescale", "-p", "3"), "CANONICAL", 12, marks=pytest.mark.flink
        ),
        pytest.param(_heap_checkpoint, ("convert",), "CANONICAL", 8, marks=pytest.mark.flink),
        pytest.param(
            _heap_checkpoint,
            ("convert", "--format", "native"),
            "NATIVE",
            8,
            marks=pytest.mark.flink,
        ),
    ],
    ids=["native-rescale", "native-convert", "heap-rescale", "heap-convert", "heap-to-native"],
)
def test_small_native_and_heap_inputs_never_start_spark(
    tmp_path: Path, source: Any, argv: tuple[str, ...], output_format: str, tasks: int
) -> None:
    """A 250 KiB input: every task in the driver (RocksDB rows and heap-format entries one by
    one, too few to start worker processes for); the report names the format written."""
    command, *options = argv
    report = _statectl(command, str(source()), "-o", str(tmp_path / "out"), *options)
    assert report["tasks"] == {"driver": tasks, "processes": 0, "spark": 0}
    assert report["format"] == output_format
    assert report["timings"]["spark_start"] == 0.0
