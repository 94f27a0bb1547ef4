"""`statectl rescale` in a fresh process, where no Spark runs yet: the driver runs the tasks
itself (a re-hash's shuffle too, spilled to local disk) while the work is shorter than Spark's
start (`HeadStartEngine`), except RocksDB rows, which wait for Spark. The output equals, byte for byte, what the Spark job of the test
session writes (outputs that real Flink restores in tests/operations/rescale/*e2e*).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import files_under, fixture_savepoint, run_cli

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
    # New subtasks whose RocksDB rows pass through Python wait for Spark; the rest run here.
    rows = sum(
        op["new_parallelism"]
        for op in report["operators"]
        if "native" in (op["old_keyed_format"], op["new_keyed_format"])
    )
    assert fresh == {"driver": on_spark["spark"] - rows, "spark": rows}
    written = files_under(tmp_path / "fresh")
    assert "_metadata" in written
    assert written == files_under(tmp_path / "spark")
