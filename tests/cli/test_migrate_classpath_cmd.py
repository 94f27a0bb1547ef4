"""`statectl migrate --classpath` from the command line: the states rewritten listed, a
conversion statectl cannot make one line naming state, key and field (exit 1, nothing
written), usage errors exit 2. The savepoint is the evolution job's v1 (cached); Flink's
restore of the output is asserted in tests/operations/test_schema_migrate_e2e.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.test_check_cmd import run
from tests.flink import harness

pytestmark = pytest.mark.flink

TYPES = [
    "--type", "op-row-added/row-added=ROW{id STRING, qty INT, comment STRING}",
    "--type", "op-tuple-retyped/tuple-retyped=TUPLE2{f0 STRING, f1 BIGINT}",
]  # fmt: skip
RENAME = ["--rename-field", "op-pojo-renamed/pojo-renamed:name=title"]
DROPS = ["--drop", "op-enum-removed", "--drop", "op-pojo-to-kryo"]


@pytest.fixture(scope="module")
def savepoint() -> str:
    return str(harness.evolution_savepoints()["hashmap-canonical"])


def _argv(savepoint: str, out: Path, *extra: str) -> list[str]:
    jar = str(harness.evolution_jar("v2"))
    return ["migrate", savepoint, "-o", str(out), "--classpath", jar, *TYPES, *extra]


def test_every_changed_state_is_rewritten(
    savepoint: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = _argv(savepoint, tmp_path / "out", *RENAME, *DROPS, "--drop", "op-map-pojo-retyped")
    code, out, _ = run(argv, capsys)
    assert code == 0
    rewritten = [line for line in out.splitlines() if "rewritten into the new job's types" in line]
    assert len(rewritten) == 8
    assert "state op-pojo-renamed/pojo-renamed: rewritten" in out
    assert (tmp_path / "out" / "_metadata").exists()


def test_a_value_that_does_not_convert_is_one_line(
    savepoint: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(_argv(savepoint, tmp_path / "out", *RENAME, *DROPS), capsys)
    assert code == 1
    assert len(err.strip().splitlines()) == 1 and err.startswith("statectl: error:")
    assert "state 'map-pojo-retyped', key 'k" in err and "field label:" in err
    assert not (tmp_path / "out").exists()


def test_on_error_null_needs_a_nullable_field(
    savepoint: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = _argv(savepoint, tmp_path / "out", *RENAME, *DROPS, "--on-error", "null")
    code, _, err = run(argv, capsys)
    assert code == 1  # MapValue.label is an int: no null for it
    assert "field label:" in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--rename-field", "op-pojo-renamed/pojo-renamed:name"], "expected OP/STATE:OLD=NEW"),
        (["--on-error", "skip"], "expected fail or null"),
        (["--classpath", "missing.jar"], "missing.jar: no such file or folder"),
    ],
)
def test_usage_errors_exit_2(
    savepoint: str,
    tmp_path: Path,
    args: list[str],
    message: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, _, err = run(_argv(savepoint, tmp_path / "out", *args), capsys)
    assert code == 2
    assert message in " ".join(err.replace("│", " ").split())


def test_schema_options_need_the_classpath(
    savepoint: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(["migrate", savepoint, "-o", str(tmp_path / "o"), *RENAME], capsys)
    assert code == 2
    assert "need the new job's classpath" in " ".join(err.replace("│", " ").split())


def test_a_rename_of_no_field_is_refused(
    savepoint: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    typo = ["--rename-field", "op-pojo-renamed/pojo-renamed:nmae=title"]
    argv = _argv(savepoint, tmp_path / "out", *typo, *DROPS, "--drop", "op-map-pojo-retyped")
    code, _, err = run(argv, capsys)
    assert code == 1
    assert "--rename-field nmae=title: no POJO field of the state to rename" in err
