"""A command imports only what it runs: `statectl --help` loads no operation, and a canonical
`rescale --json` loads neither numpy, pyarrow, pyspark nor rich.

Each check runs a fresh interpreter: this test process has imported everything already.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import fixture_savepoint

# Heavy packages, and rich (tables and progress bars: not for `--json`).
HEAVY = ("numpy", "pyarrow", "pyspark", "rocksdict", "matplotlib", "rich")

# Prints, at exit, the heavy packages and the statectl layers below cli that were imported.
_REPORT = f"""
import atexit, json, sys

def _loaded():
    roots = {{m.split(".")[0] for m in sys.modules}}
    layers = {{".".join(m.split(".")[:2]) for m in sys.modules if m.startswith("statectl.")}}
    heavy = sorted(roots & set({HEAVY!r}))
    below_cli = sorted(layers - {{"statectl.cli", "statectl.errors"}})
    print(json.dumps({{"heavy": heavy, "below_cli": below_cli}}), file=sys.stderr)

atexit.register(_loaded)
"""


def _run(code: str, *argv: str) -> tuple[subprocess.CompletedProcess[str], dict[str, list[str]]]:
    done = subprocess.run(
        [sys.executable, "-c", _REPORT + code, *argv],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return done, json.loads(done.stderr.splitlines()[-1])


def test_cli_main_imports_no_operation_and_no_heavy_package() -> None:
    done, loaded = _run("from statectl.cli.main import main")
    assert done.returncode == 0, done.stderr
    assert loaded == {"heavy": [], "below_cli": []}


def test_help_imports_no_operation_and_no_heavy_package() -> None:
    done, loaded = _run("from statectl.cli.main import main; main(['--help'])")
    assert done.returncode == 0, done.stderr
    assert "rescale" in done.stdout
    assert loaded["below_cli"] == []
    assert [m for m in loaded["heavy"] if m != "rich"] == []  # typer draws the help with rich


def test_canonical_rescale_json_imports_no_heavy_package(tmp_path: Path) -> None:
    source = fixture_savepoint("hashmap_canonical_files")
    out = tmp_path / "rescaled"
    done, loaded = _run(
        "import runpy; runpy.run_module('statectl', run_name='__main__')",
        *("rescale", str(source), "-o", str(out), "-p", "3", "--json"),
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["destination"] == str(out)
    assert loaded["heavy"] == []
