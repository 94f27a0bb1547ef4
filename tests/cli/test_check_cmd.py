"""`statectl check` from the command line: exit 0 when every state is as-is or migrates, 1
otherwise, 2 for usage errors (a missing --classpath entry, a --type naming no state or not in
inspect's syntax); `--json`; one-line errors. The savepoint is the evolution job's v1 (written
once by Flink and cached: tests/flink/evolution); real Flink's verdicts are asserted in
tests/operations/test_check_e2e.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from statectl.cli.main import main
from tests.flink import harness

pytestmark = pytest.mark.flink

ROW_TYPE = "op-row-added/row-added=ROW{id STRING, qty INT, comment STRING}"


@pytest.fixture(scope="module")
def savepoint() -> str:
    return str(harness.evolution_savepoints()["hashmap-canonical"])


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    try:
        main(argv)
        code = 0
    except SystemExit as exit_info:
        code = int(exit_info.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def test_the_job_that_wrote_it_passes(savepoint: str, capsys: pytest.CaptureFixture[str]) -> None:
    jar = str(harness.evolution_jar("v1"))
    code, out, _ = run(["check", savepoint, "--classpath", jar], capsys)
    assert code == 0
    assert "14 states, 14 as-is, 0 migrates, 0 loses, 0 refused, 0 unknown" in out


def test_the_new_job_fails_with_every_state_in_json(
    savepoint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    jar = str(harness.evolution_jar("v2"))
    code, out, _ = run(["check", savepoint, "--classpath", jar, "--type", ROW_TYPE, "--json"], capsys)  # fmt: skip
    assert code == 1
    report = json.loads(out)
    assert report["ok"] is False and report["classpath"] == [jar]
    assert report["counts"] == {"as-is": 4, "migrates": 4, "loses": 1, "refused": 5, "unknown": 0}
    row = next(s for s in report["states"] if s["state"] == "row-added")
    assert row == {
        "operator": "op-row-added", "operator_id": row["operator_id"], "state": "row-added",
        "scope": "keyed", "type": "ROW{f0 STRING, f1 INT}", "verdict": "refused",
        "reason": "ROW of 2 fields → 3 fields", "new_type": "ROW{id STRING, qty INT, comment STRING}",
    }  # fmt: skip


def test_the_table_lists_what_changes(savepoint: str, capsys: pytest.CaptureFixture[str]) -> None:
    jar = str(harness.evolution_jar("v2"))
    code, out, _ = run(["check", savepoint, "--classpath", jar], capsys)
    assert code == 1
    assert "pojo-renamed" in out and "loses" in out and "pojo-same" not in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--classpath", "missing.jar"], "missing.jar: no such file or folder"),
        (["--type", "op-row-added/row-added=ROW{id STRANG}"], "unknown type 'STRANG'"),
        (["--type", "op-row-added/nope=INT"], "unknown state 'nope'"),
        (["--type", "row-added=INT"], "expected OP/STATE=TYPE"),
    ],
)
def test_usage_errors_exit_2(
    savepoint: str, args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    jar = str(harness.evolution_jar("v2"))
    code, _, err = run(["check", savepoint, "--classpath", jar, *args], capsys)
    assert code == 2
    assert message in " ".join(err.replace("│", " ").split())


def test_an_unreadable_savepoint_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    jar = str(harness.evolution_jar("v2"))
    code, _, err = run(["check", str(tmp_path), "--classpath", jar], capsys)
    assert code == 1
    assert len(err.strip().splitlines()) == 1 and err.startswith("statectl: error:")
