"""`rescale --json` reports where the driver's seconds go, phase by phase."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import fsspec

from tests.conftest import fixture_savepoint, run_cli

PHASES = ["read_metadata", "plan", "spark_start", "tasks", "publish"]


def _upload(local: Path) -> str:
    """memory:// runs on the LocalEngine: no JVM for this test."""
    memory = fsspec.filesystem("memory")
    root = f"memory://statectl-tests/{uuid.uuid4().hex}/{local.name}"
    for path in local.rglob("*"):
        if path.is_file():
            memory.pipe(f"{root}/{path.relative_to(local).as_posix()}", path.read_bytes())
    return root


def test_json_timings_name_every_phase() -> None:
    source = _upload(fixture_savepoint("hashmap_canonical_files"))
    for args in (["-p", "3"], ["--max-parallelism", "256", "-p", "2"]):
        code, out, err = run_cli("rescale", source, "-o", f"{source}-{len(args)}", *args, "--json")
        assert code == 0, err
        timings = json.loads(out)["timings"]
        assert list(timings) == PHASES
        assert all(isinstance(t, float) and t >= 0 for t in timings.values())
