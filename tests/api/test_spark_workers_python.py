"""Which interpreter Spark's Python workers run for the data sources (`statectl.spark.register`
in local mode): this one, unless `PYSPARK_PYTHON` chose another that can import statectl; else
one line that says what to set. A fake context: no JVM here (tests/reliability/
test_any_machine.py reads a state through a plain SparkSession outside the virtualenv)."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from statectl.errors import StatectlError
from statectl.spark import _local_workers_python


def _interpreter(folder: Path, flags: str) -> str:
    """A `python` that is this interpreter with `flags` (-S: without its site-packages)."""
    program = folder / "python"
    program.write_text(f'#!/bin/sh\nexec {sys.executable} {flags} "$@"\n')
    program.chmod(0o755)
    return str(program)


def test_pysparks_default_becomes_this_interpreter(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    context = SimpleNamespace(pythonExec="python3")
    _local_workers_python(context)  # type: ignore[arg-type]
    assert context.pythonExec == sys.executable


def test_a_chosen_interpreter_that_imports_statectl_stands(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chosen = _interpreter(tmp_path, "")
    monkeypatch.setenv("PYSPARK_PYTHON", chosen)
    context = SimpleNamespace(pythonExec=chosen)
    _local_workers_python(context)  # type: ignore[arg-type]
    assert context.pythonExec == chosen


def test_a_chosen_interpreter_without_statectl_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chosen = _interpreter(tmp_path, "-S")
    monkeypatch.setenv("PYSPARK_PYTHON", chosen)
    with pytest.raises(StatectlError) as raised:
        _local_workers_python(SimpleNamespace(pythonExec=chosen))  # type: ignore[arg-type]
    assert str(raised.value) == (
        f"Spark's Python workers run {chosen} (PYSPARK_PYTHON), which cannot import statectl "
        "(ModuleNotFoundError: No module named 'pyarrow'): set "
        f"PYSPARK_PYTHON={sys.executable} before the SparkSession starts"
    )
