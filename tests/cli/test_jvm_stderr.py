"""A Spark command's stderr carries no JVM start-up noise: Spark 4's launcher always adds the
`jdk.incubator.vector` module, and the JVM announces it on stderr."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import fixture_savepoint

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.spark


def test_no_incubator_warning_on_stderr(tmp_path: Path) -> None:
    source = fixture_savepoint("hashmap_canonical_files")
    argv = ["rescale", str(source), "-o", str(tmp_path / "out"), "-p", "3", "--no-head-start"]
    done = subprocess.run(
        [sys.executable, "-m", "statectl", *argv, "--json"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["tasks"]["spark"] > 0  # Spark's JVM ran the tasks
    assert "incubator" not in done.stderr, done.stderr
