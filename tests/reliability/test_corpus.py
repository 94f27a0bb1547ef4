"""Every command on every corrupted savepoint of the corpus: one clear line, nothing written.

For each (case, command): the command fails with exit 1 and exactly one stderr line
`statectl: error: <file at fault>: <problem>` (no traceback, nothing on stdout), or — for
`verify` — exit 1 with the problem as a finding on stdout; the input's files are byte-identical
afterwards and the output folder stays empty (no DST, no staging sibling). Commands that are not
registered in the typer app yet are skipped. Corruptions only visible inside blocks
(`detected_by`) must be caught by the commands that read them; the others must still neither
crash nor touch their input. Nothing here starts Spark except the one test that requests the
session's `spark` fixture.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import typer

from statectl.cli.main import app, main
from statectl.errors import one_line
from tests.conftest import checksums
from tests.reliability.corpus import COMMANDS, Case, Command, copy_fixture, corrupted_cases

CASES = corrupted_cases()
REGISTERED = frozenset(typer.main.get_command(app).commands)  # type: ignore[attr-defined]


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    out, err = capsys.readouterr()
    return int(exit_info.value.code or 0), out, err


def test_corpus_has_at_least_40_distinct_cases() -> None:
    names = [case.name for case in CASES]
    assert len(names) >= 40
    assert len(set(names)) == len(names)


@pytest.mark.usefixtures("no_spark")
@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c.id)
@pytest.mark.parametrize("case", [c for c in CASES if not c.reaches_spark], ids=lambda c: c.name)
def test_command_on_corrupted_savepoint(
    case: Case, command: Command, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if command.name not in REGISTERED:
        pytest.skip(f"`statectl {command.name}` is not registered")
    must_fail = case.must_fail(command.id)
    if command.spark and not must_fail:
        pytest.skip("copies the damaged bytes verbatim: it would only run a Spark job")
    built = case.build(tmp_path)
    pristine = copy_fixture(case.fixture, tmp_path / "pristine")
    out = tmp_path / "out"
    out.mkdir()
    before = checksums(tmp_path / "input"), checksums(tmp_path / "pristine")

    code, stdout, stderr = run(command.argv(built.savepoint, pristine, out), capsys)

    assert (checksums(tmp_path / "input"), checksums(tmp_path / "pristine")) == before
    assert "Traceback" not in stdout + stderr
    assert "internal error" not in stderr, stderr
    assert code != 2, f"usage error, fix the argv template: {stderr}"
    if command.name == "verify":
        if must_fail:
            assert_finding(code, stdout, stderr, case, built.culprit)
        return
    if must_fail:
        assert_one_line_error(code, stdout, stderr, case, built.culprit)
    if code != 0 and stderr.startswith("statectl: error: "):
        assert len(stderr.strip().splitlines()) == 1, stderr
        assert list(out.iterdir()) == [], "a failed command left output behind"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["input", "out", "pristine"]


def assert_one_line_error(code: int, stdout: str, stderr: str, case: Case, culprit: Path) -> None:
    lines = stderr.strip().splitlines()
    assert code == 1, (code, stderr)
    assert len(lines) == 1, stderr
    assert stdout == "", stdout
    assert lines[0].startswith("statectl: error: "), stderr
    assert one_line(str(culprit)) in lines[0], (str(culprit), stderr)  # NUL printed escaped
    assert any(problem in lines[0] for problem in case.problems), (case.problems, stderr)


def assert_finding(code: int, stdout: str, stderr: str, case: Case, culprit: Path) -> None:
    assert code == 1, (code, stdout, stderr)
    assert "error" not in stderr, stderr  # only notes go to stderr
    findings = stdout.strip().splitlines()
    assert findings, "verify found nothing"
    assert any(
        line.startswith(one_line(str(culprit))) and any(p in line for p in case.problems)
        for line in findings
    ), (str(culprit), case.problems, findings)


@pytest.mark.spark
@pytest.mark.parametrize("case", [c for c in CASES if c.reaches_spark], ids=lambda c: c.name)
def test_rescale_fails_inside_spark_with_one_line(
    case: Case, tmp_path: Path, capsys: pytest.CaptureFixture[str], spark: object
) -> None:
    """Corruption only a Spark task sees still ends as one line naming the file; DST and the
    staging folder are gone and the input is untouched."""
    built = case.build(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    before = checksums(tmp_path / "input")
    argv = ["rescale", str(built.savepoint), "-o", str(out / "result"), "-p", "3"]
    code, stdout, stderr = run(argv, capsys)
    assert_one_line_error(code, stdout, stderr, case, built.culprit)
    assert checksums(tmp_path / "input") == before
    assert list(out.iterdir()) == []


SPARK_BLOCK_READERS = {
    "rescale --max-parallelism": lambda sp, _, out: [
        "rescale",
        str(sp),
        "-o",
        str(out / "result"),
        "--max-parallelism",
        "256",
    ],
    "diff --spark": lambda sp, p, _: ["diff", "--spark", str(sp), str(p)],
    "export --spark": lambda sp, _, out: ["export", "--spark", str(sp), "-o", str(out / "x")],
}


@pytest.mark.spark
@pytest.mark.parametrize("reader", SPARK_BLOCK_READERS)
@pytest.mark.parametrize(
    "case",
    [c for c in CASES if c.detected_by and "export" in c.detected_by],
    ids=lambda c: c.name,
)
def test_block_corruption_inside_spark_tasks_is_one_line(
    case: Case, reader: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], spark: object
) -> None:
    """Commands that read key-group blocks inside Spark tasks (re-hashing, digests, export)
    report a damaged block as one line naming the file, and leave nothing behind."""
    built = case.build(tmp_path)
    pristine = copy_fixture(case.fixture, tmp_path / "pristine")
    out = tmp_path / "out"
    out.mkdir()
    before = checksums(tmp_path / "input")
    code, stdout, stderr = run(SPARK_BLOCK_READERS[reader](built.savepoint, pristine, out), capsys)
    assert_one_line_error(code, stdout, stderr, case, built.culprit)
    assert checksums(tmp_path / "input") == before
    assert list(out.iterdir()) == []
