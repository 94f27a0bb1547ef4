"""`statectl upgrade` from the command line: the check's exit code and JSON, the refusal of a
state that cannot be converted (one line, nothing written), `--drop-unconvertible`. (Flink 2.3
restores the upgraded savepoints in tests/operations/test_upgrade_e2e.py.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from statectl.cli.main import main

VALUES = Path(__file__).parents[1] / "fixtures" / "values"
OLD = str(VALUES / "1.20.3-rocksdb-native" / "savepoint")
NEW = str(VALUES / "2.3.0-rocksdb-native" / "savepoint")


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    try:
        main(argv)
        code = 0
    except SystemExit as exit_info:
        code = int(exit_info.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def test_check_fails_a_1x_savepoint_with_the_states_named(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = run(["upgrade", OLD, "--check", "--json"], capsys)
    assert code == 1
    report = json.loads(out)
    flagged = {s["state"]: s["verdict"] for s in report["states"] if s["verdict"] != "ok"}
    assert flagged == {
        "pojo": "refused", "pojo-list": "refused", "pojo-map": "refused", "op-list": "refused",
        "op-broadcast": "refused", "kryo-arraylist": "wrong", "kryo-hashmap": "wrong",
        "kryo-custom": "unknown",
    }  # fmt: skip
    assert report["counts"] == {"ok": 56, "refused": 5, "wrong": 2, "unknown": 1}


def test_check_passes_a_2x_savepoint(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["upgrade", NEW, "--check"], capsys)
    assert code == 0 and "64 ok, 0 refused, 0 wrong, 0 unknown" in out


def test_an_unconvertible_state_is_refused_and_nothing_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "up"
    code, _, err = run(["upgrade", OLD, "-o", str(out)], capsys)
    assert code == 1
    assert len(err.strip().splitlines()) == 1
    assert "state 'kryo-custom' cannot be converted" in err and "Model$Opaque" in err
    assert not out.exists()


def test_drop_unconvertible_drops_exactly_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "up"
    code, stdout, err = run(
        ["upgrade", OLD, "-o", str(out), "--drop-unconvertible", "--json"], capsys
    )
    assert code == 0, err
    report = json.loads(stdout)
    assert [s["state"] for s in report["dropped"]] == ["kryo-custom"]
    assert len(report["converted"]) == 7 and report["metadata_version"] == 6
    code, stdout, _ = run(["upgrade", str(out), "--check"], capsys)
    assert code == 0


def test_check_and_output_are_exclusive(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["upgrade", OLD, "--check", "-o", str(tmp_path / "x")], capsys)
    assert code == 2 and "exactly one" in err


@pytest.fixture(scope="module")
def job_jar(tmp_path_factory: pytest.TempPathFactory) -> str:
    from tests.operations.test_upgrade_e2e import job_jar as build

    return str(build("1.20.3", tmp_path_factory.mktemp("jar")))


@pytest.mark.flink  # builds the job's jar with javac
def test_with_the_jobs_jar_the_user_class_is_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], job_jar: str
) -> None:
    code, out, _ = run(["upgrade", OLD, "--check", "--json", "--classpath", job_jar], capsys)
    verdicts = {s["state"]: s["verdict"] for s in json.loads(out)["states"]}
    assert code == 1 and verdicts["kryo-custom"] == "ok"  # Kryo 2 and 5 write it alike
    code, _, err = run(["upgrade", OLD, "-o", str(tmp_path / "up"), "--classpath", job_jar], capsys)
    assert code == 0, err


def test_a_classpath_entry_that_is_no_jar(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bogus = tmp_path / "job.jar"
    bogus.write_text("not a zip")
    code, _, err = run(["upgrade", OLD, "--check", "--classpath", str(bogus)], capsys)
    assert code == 1 and "not a jar (zip) file" in err and len(err.strip().splitlines()) == 1
