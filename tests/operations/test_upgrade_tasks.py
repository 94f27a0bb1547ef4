"""`upgrade` reads the values of the states it converts with its engine's tasks, as it writes
them: a task per subtask file for all of that file's flagged states (one pass over the file,
not one per state, in the driver, with every value of a state held at once). Every value is
converted as a trial before anything is written; a POJO with collection fields needs the
classes of their elements first, gathered by the pass that tries the other states. A state
whose values fail is dropped (or refused). `upgrade` itself writes first, untried, and plans
with the trial only when a value fails."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import statectl
from statectl.execution.engine import Job, LocalEngine
from statectl.operations.upgrade import plan_upgrade, upgrade, write_upgrade
from statectl.savepoint.reader import open_savepoint
from tests.conftest import run_cli

SOURCE = (
    Path(__file__).parents[1] / "fixtures" / "values" / "1.20.3-hashmap-canonical" / "savepoint"
)
VALUES = "8918828246c22e7d25902f74d971b709"  # pojo, pojo-list, pojo-map, kryo-*, …
OPSTATE = "21991e99748be05b56fddb2033c0ff3b"  # op-list, op-broadcast
KEYED = ["kryo-arraylist", "kryo-custom", "kryo-hashmap", "pojo", "pojo-list", "pojo-map"]


class RecordingEngine(LocalEngine):
    """A local engine that keeps the tasks of every run."""

    def __init__(self) -> None:
        super().__init__()
        self.runs: list[Sequence[Any]] = []

    def _run(self, job: Job[Any, Any]) -> list[Any]:
        self.runs.append(job.tasks)
        return super()._run(job)


def files_and_states(tasks: Sequence[Any]) -> list[tuple[str, int, list[str]]]:
    return sorted((t.source.operator, t.source.subtask, sorted(t.states)) for t in tasks)


def test_a_task_per_subtask_file_reads_all_its_flagged_states() -> None:
    """The first pass gathers (POJOs) or tries (Kryo); the second tries the POJOs."""
    engine = RecordingEngine()
    plan = plan_upgrade(open_savepoint(str(SOURCE)), drop_unconvertible=True, engine=engine)
    first, second = engine.runs
    operator = ["op-broadcast", "op-list"]
    assert files_and_states(first) == [
        (OPSTATE, 0, operator), (OPSTATE, 1, operator), (VALUES, 0, KEYED), (VALUES, 1, KEYED),
    ]  # fmt: skip
    pojos = ["pojo", "pojo-list", "pojo-map"]
    assert files_and_states(second) == [
        (OPSTATE, 0, operator), (OPSTATE, 1, operator), (VALUES, 0, pojos), (VALUES, 1, pojos),
    ]  # fmt: skip
    assert [v.state for v in plan.dropped] == ["kryo-custom"]  # its values: no class to read
    assert engine.tasks_run["driver"] == 8


# --- `upgrade`: the write goes first, untried ---------------------------------------------------


def _trial_runs(engine: RecordingEngine) -> list[int]:
    """Which of the engine's runs convert values as a trial: `FileValues` tasks with a state's
    2.x codec (the pass that only gathers element classes has none)."""
    return [
        n
        for n, tasks in enumerate(engine.runs)
        if any(new is not None for t in tasks for _, new in getattr(t, "states", {}).values())
    ]


def _tried(source: Path, out: Path) -> Path:
    """The upgrade as planned with a trial of every value, then written."""
    plan = plan_upgrade(open_savepoint(str(source)), drop_unconvertible=True, trial=True)
    write_upgrade(plan, str(out))
    return out


def test_a_write_that_converts_every_value_reads_them_once(tmp_path: Path) -> None:
    """Without the state whose user class is missing, every flagged value converts: the write
    converts each once, no trial reads them first, and the savepoint is the tried one."""
    convertible = tmp_path / "convertible"
    code, _, err = run_cli("migrate", str(SOURCE), "-o", str(convertible), "--drop-state",
                           f"{VALUES}/kryo-custom")  # fmt: skip
    assert code == 0, err
    engine = RecordingEngine()
    report = upgrade(open_savepoint(str(convertible)), str(tmp_path / "once"), engine=engine)
    assert not report.dropped and len(report.converted) == 7
    assert _trial_runs(engine) == []
    assert statectl.diff(
        str(tmp_path / "once"), str(_tried(convertible, tmp_path / "tried"))
    ).identical


def test_a_value_the_write_cannot_convert_sends_it_to_the_trial(tmp_path: Path) -> None:
    """kryo-custom's values need a class only the job's jar has: the untried write meets one,
    publishes nothing, and the upgrade is planned again with a trial, which drops that state;
    the savepoint is the tried one, and no staging folder is left."""
    engine = RecordingEngine()
    out = tmp_path / "upgraded"
    report = upgrade(open_savepoint(str(SOURCE)), str(out), drop_unconvertible=True, engine=engine)
    assert [v.state for v in report.dropped] == ["kryo-custom"]
    runs = _trial_runs(engine)
    assert runs and runs[0] > 0  # after the write that failed
    assert statectl.diff(str(out), str(_tried(SOURCE, tmp_path / "tried"))).identical
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tried", "upgraded"]
