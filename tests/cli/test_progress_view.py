"""What the progress bar says: the phase by name, no `0/? bytes` before anything is counted;
and the phases the operations report (`transform --sql` names Spark's start before it waits)."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from rich.console import Console

import statectl
from statectl.cli import progress_view
from statectl.cli.progress_view import TaskProgress
from statectl.progress import Progress, begun
from tests.conftest import fixture_savepoint

_ESCAPE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


@pytest.fixture
def terminal(monkeypatch: pytest.MonkeyPatch) -> io.StringIO:
    """stderr as a terminal 120 columns wide; what it got, without escape sequences, on exit."""
    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, width=120, color_system=None)
    monkeypatch.setattr(progress_view, "stderr_console", lambda: console)
    return screen


def _shown(screen: io.StringIO) -> str:
    return _ESCAPE.sub("", screen.getvalue())


def test_a_phase_begun_shows_its_name_and_no_counts(terminal: io.StringIO) -> None:
    with TaskProgress("transform") as progress:
        progress.update(begun("starting Spark"))
    shown = _shown(terminal)
    assert "transform: starting Spark" in shown
    assert "?" not in shown  # rich's `0/? bytes` of a total not known yet
    assert "files" not in shown


def test_counts_follow_the_phase_they_belong_to(terminal: io.StringIO) -> None:
    with TaskProgress("verify", writes=False) as progress:
        progress.phase("reading metadata")
        progress.update(Progress(0, 2, 0, 4096, "walking key groups (operator [a])"))
        progress.update(Progress(2, 2, 4096, 4096))  # no phase: the one named before
    shown = _shown(terminal)
    assert "verify: reading metadata" in shown
    assert "verify: walking key groups (operator [a]) " in shown  # markup-like names as typed
    assert "2/2 files 4.0/4.0 KiB" in shown


def test_a_reading_command_prints_nothing_off_a_terminal(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with TaskProgress("verify", writes=False) as progress:  # stderr is no terminal here
        progress.phase("reading metadata")
        progress.update(Progress(2, 2, 4096, 4096, "walking key groups (operator a)"))
    assert capsys.readouterr().err == ""


def test_transform_sql_names_spark_starting_before_it_waits_for_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from statectl.execution import spark

    seen: list[Progress] = []

    class Started(Exception):
        pass

    def spark_session(*_: object) -> None:
        assert seen, "nothing named before Spark's start"
        raise Started

    monkeypatch.setattr(spark, "spark_session", spark_session)
    source = str(fixture_savepoint("hashmap_canonical_files"))
    with pytest.raises(Started):
        statectl.transform(
            source, str(tmp_path / "out"), "keyed-str", "cnt", sql="SELECT * FROM state",
            progress=seen.append,
        )  # fmt: skip
    assert [(p.phase, p.counted) for p in seen] == [("starting Spark", False)]
    assert not (tmp_path / "out").exists()


def test_export_counts_every_task_under_its_phase(tmp_path: Path) -> None:
    source = str(fixture_savepoint("hashmap_canonical_files"))
    seen: list[Progress] = []
    statectl.export(source, str(tmp_path / "out.parquet"), progress=seen.append)
    exporting = [p for p in seen if p.phase and p.phase.startswith("exporting")]
    assert {p.phase for p in exporting} >= {
        "exporting operator keyed-str",
        "exporting operator bcast",
    }
    last = seen[-1]
    assert (last.files, last.bytes) == (last.total_files, last.total_bytes)
    assert last.total_bytes > 0
