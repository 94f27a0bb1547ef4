"""`upgrade` reads the values of the states it converts with its engine's tasks, as it writes
them: a task per subtask file for all of that file's flagged states (one pass over the file,
not one per state, in the driver, with every value of a state held at once). Every value is
converted as a trial before anything is written; a POJO with collection fields needs the
classes of their elements first, gathered by the pass that tries the other states. A state
whose values fail is dropped (or refused)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from statectl.execution.engine import Job, LocalEngine
from statectl.operations.upgrade import plan_upgrade
from statectl.savepoint.reader import open_savepoint

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
