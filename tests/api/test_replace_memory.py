"""Replacing a state from batches takes memory that stays flat with its size: `State.replace`
of a stream of batches (each value + 1, computed batch by batch from `State.read()`) and
`Savepoint.write` peak at the same resident memory for a savepoint and for one with four times
its entries and bytes.

The savepoints are `bench.synthetic`'s (see tests/api/test_read_memory.py, whose child-process
measurement this reuses). The rows are encoded batch by batch and spilled to local disk in
sorted runs (`spilled_rows`, 64 MiB; 512 KiB here, so that both savepoints spill), merged by key
group, and written one key group at a time.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bench import synthetic
from tests.api.test_read_memory import ALLOCATORS_WITHOUT_CACHES, PROC_STATUS, _kib
from tests.conftest import REPO

SMALL_BYTES = 3 << 20
GROWTH = 4
RUN_BYTES = 512 << 10
WINDOW = 1 << 20
FLAT = 1.5  # the large savepoint's peak growth over the small one's, at most

pytestmark = pytest.mark.skipif(
    not Path("/proc/self/clear_refs").exists(), reason="needs Linux's resettable VmHWM"
)


@pytest.fixture(scope="module")
def savepoints(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, synthetic.Built]]:
    cache = tmp_path_factory.mktemp("replace-memory")
    sizes = {"small": SMALL_BYTES, "large": GROWTH * SMALL_BYTES}
    built = {
        name: synthetic.ensure(
            synthetic.Params(size, parallelism=2, max_parallelism=1024, list_elements=16), cache
        )
        for name, size in sizes.items()
    }
    yield built
    for b in built.values():
        shutil.rmtree(b.path, ignore_errors=True)


def _measure_in_child(path: Path) -> dict[str, Any]:
    env = {**os.environ, **ALLOCATORS_WITHOUT_CACHES}
    run = subprocess.run(
        [sys.executable, "-m", "tests.api.test_replace_memory", str(path)],
        cwd=REPO, capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    result: dict[str, Any] = json.loads(run.stdout)
    print(f"{path.name} replace: {result}", file=sys.stderr)
    return result


def test_peak_memory_of_a_replace_is_flat_with_state_size(
    savepoints: dict[str, synthetic.Built],
) -> None:
    small, large = (_measure_in_child(savepoints[s].path) for s in ("small", "large"))
    for name, result in (("small", small), ("large", large)):
        assert result["rows"] == result["written"] == savepoints[name].entries["cnt"]
    assert large["rows"] >= GROWTH * small["rows"] * 0.99
    assert large["growth_kib"] < FLAT * small["growth_kib"], (small, large)


# --- the child: one replace and write, measured ------------------------------------------------


def measure(path: str) -> dict[str, Any]:
    """Rows replaced (every `cnt` value + 1) and written, and the peak RSS growth (KiB)."""
    import pyarrow.compute as pc

    import statectl
    from statectl.savepoint import keyed, spilled_rows, tables

    keyed._BLOCK_BATCH_BYTES = WINDOW
    tables.BATCH_BLOCK_BYTES = WINDOW // 4
    spilled_rows.RUN_BYTES = RUN_BYTES
    sp = statectl.open(path)
    state = sp.operator(synthetic.OPERATOR).state("cnt")
    next(iter(state.read()))  # warm-up: imports, codecs, Arrow's kernels
    rows = [0]

    def plus_one() -> Iterator[Any]:
        for batch in state.read():
            rows[0] += batch.num_rows
            yield batch.set_column(2, "value", pc.add(batch.column(2), 1))

    Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS
    base = _kib("VmRSS")
    started = time.monotonic()
    state.replace(plus_one())
    with tempfile.TemporaryDirectory() as out:
        report = sp.write(os.path.join(out, "edited"))
    return {
        "rows": rows[0],
        "written": report.states[0].rows,
        "growth_kib": _kib("VmHWM") - base,
        "seconds": round(time.monotonic() - started, 2),
    }


if __name__ == "__main__":
    assert PROC_STATUS.exists()
    print(json.dumps(measure(sys.argv[1])))
