"""`migrate --classpath` tries every value on its engine before writing, as `upgrade` does: a
task per subtask file for all of that file's changed states of one operator and scope; the
failure reported is the first in subtask order, whichever task ended first, and the values
`--on-error null` turns into nulls are counted by the tasks and reported. On Spark (no head
start) it writes the same bytes as in this process. The savepoint is the evolution job's v1
(cached); Flink's restore of a migration is asserted in test_schema_migrate_e2e."""

from __future__ import annotations

import json
import pickle
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

import statectl
from statectl.execution.engine import Job, LocalEngine
from statectl.operations.schema_migration import plan_schema_migration
from statectl.operations.upgrade import each_state
from statectl.savepoint.classpath import ClassPath
from statectl.savepoint.table_rows import describe_composite_key
from tests.conftest import files_under
from tests.flink import harness
from tests.operations.test_schema_migrate_e2e import DROPPED, RENAMES, V2_TYPES

pytestmark = pytest.mark.flink

# The Row's `id` STRING ("id8" … "id11") declared an INT: no value parses, and a Row's field is
# nullable, so with `--on-error null` every row keeps its `qty` and gets a null `id`.
ROW_ID_INT = {**V2_TYPES, "op-row-added/row-added": "ROW{id INT, qty INT, comment STRING}"}


class RecordingEngine(LocalEngine):
    """A local engine that keeps the tasks of every run; `backwards`: runs them last first."""

    def __init__(self, backwards: bool = False) -> None:
        super().__init__()
        self.runs: list[Sequence[Any]] = []
        self.backwards = backwards

    def _run(self, job: Job[Any, Any]) -> list[Any]:
        self.runs.append(job.tasks)
        if not self.backwards:
            return super()._run(job)
        backwards = Job(job.tasks[::-1], job.fn, job.work, job.progress, job.gil_bound)
        return super()._run(backwards)[::-1]


def _plan(
    source: Path,
    engine: RecordingEngine,
    drops: Sequence[str],
    types: dict[str, str] = V2_TYPES,
    nulls_on_error: bool = False,
) -> Any:
    """The schema edits of v1's `source` into v2, the operators `drops` names left alone."""
    sp = statectl.open(str(source)).parsed
    untouched = [
        (op.operator_id_hex, meta.name)
        for op in map(sp.find_operator, drops)
        for _, meta, _ in each_state(sp, op)
    ]
    with ClassPath([str(harness.evolution_jar("v2"))]) as classes:
        return plan_schema_migration(
            sp, classes, types, RENAMES, untouched=untouched, nulls_on_error=nulls_on_error,
            engine=engine,
        )  # fmt: skip


@pytest.fixture(scope="module")
def two_subtasks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """v1's savepoint (parallelism 1) rescaled to 2: two subtask files per operator."""
    out = tmp_path_factory.mktemp("evolution") / "p2"
    statectl.rescale(str(harness.evolution_savepoints()["hashmap-canonical"]), str(out), 2)
    return out


def test_a_task_per_subtask_file_tries_all_its_changed_states(two_subtasks: Path) -> None:
    engine = RecordingEngine()
    edits = _plan(two_subtasks, engine, DROPPED)
    (tasks,) = engine.runs
    files = [(t.source.operator, t.source.subtask, tuple(t.states)) for t in tasks]
    assert len(files) == len(set(files)) == 2 * len(edits)  # each file once
    assert {states for _, _, states in files} == {(edit.state,) for edit in edits}
    assert [subtask for _, subtask, _ in files] == [0, 1] * len(edits)  # in subtask order
    assert len(edits) == 8  # every changed state (the job: one per operator), none other
    again = pickle.loads(pickle.dumps(tasks[0]))  # Spark's tasks travel pickled
    assert again.states.keys() == tasks[0].states.keys()


def test_the_failure_reported_is_the_first_in_subtask_order(two_subtasks: Path) -> None:
    """Two states fail (a value of each in both subtasks): the first in report order is
    reported, at its first value in subtask order, whether the tasks ran first to last or
    last to first."""
    messages = []
    for engine in (RecordingEngine(backwards=True), RecordingEngine()):
        with pytest.raises(statectl.StatectlError) as refused:
            _plan(two_subtasks, engine, DROPPED[:2], ROW_ID_INT)
        messages.append(str(refused.value))
    assert messages[0] == messages[1]
    (first,) = [
        t for t in engine.runs[0] if t.source.subtask == 0 and "row-added" in t.states
    ]  # fmt: skip
    entry = next(first.source.entries(states={"row-added"}))
    key = describe_composite_key(
        entry.key, first.states["row-added"].old, first.source.max_parallelism
    )
    assert re.fullmatch(
        rf"op-row-added: state 'row-added', {key}: field f0: 'id\d+' does not parse as INT",
        messages[0],
    ), (messages[0], key)


def test_nulls_are_counted_by_the_tasks(two_subtasks: Path) -> None:
    """The values made null in each task, summed; the driver's evolvers count none."""
    edits = _plan(two_subtasks, RecordingEngine(backwards=True), DROPPED, ROW_ID_INT, True)
    nulls = {edit.state: edit.nulls for edit in edits}
    assert nulls.pop("row-added") == 4
    assert set(nulls.values()) == {0}
    assert {edit.schema_value.evolver.nulls for edit in edits} == {0}


@pytest.mark.parametrize("kind", harness.EVOLUTION_KINDS)
def test_on_error_null_writes_nulls_exactly_where_values_do_not_convert(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--on-error null --json`: the count per state, and the output's values read back."""
    from tests.cli.test_check_cmd import run

    source = harness.evolution_savepoints()[kind]
    types = [arg for target, t in ROW_ID_INT.items() for arg in ("--type", f"{target}={t}")]
    renames = ["--rename-field", "op-pojo-renamed/pojo-renamed:name=title"]
    drops = [arg for name in DROPPED for arg in ("--drop", name)]
    argv = [
        "migrate", str(source), "-o", str(tmp_path / "out"), "--classpath",
        str(harness.evolution_jar("v2")), *types, *renames, *drops, "--on-error", "null", "--json",
    ]  # fmt: skip
    code, out, err = run(argv, capsys)
    assert code == 0, err
    states = {s["state"]: s for s in json.loads(out)["states"]}
    assert states["row-added"]["nulls"] == 4
    assert {s["nulls"] for name, s in states.items() if name != "row-added"} == {0}
    before = _values(source, "row-added")
    after = _values(tmp_path / "out", "row-added")
    assert after == {
        key: {"f0": None, "f1": value["f1"], "f2": None, "__row_kind": 0}
        for key, value in before.items()
    }
    assert _values(tmp_path / "out", "pojo-same") == _values(source, "pojo-same")


def _values(path: Path, state: str) -> dict[str, Any]:
    table = statectl.open(str(path)).operator(f"op-{state}").state(state).to_arrow()
    return {row["key"]: row["value"] for row in table.to_pylist()}


@pytest.mark.spark
def test_on_spark_the_same_bytes_as_in_this_process(spark: Any, tmp_path: Path) -> None:
    """The trial and the write as Spark tasks (no head start): every file of the output the
    same bytes as a migration whose tasks ran in this process, and the report says where the
    tasks ran. (With the session's Spark up, a head start would hand its tasks to it: the
    baseline gets a local engine. Canonical state: a RocksDB instance written anew holds a
    random session id in its MANIFEST.)"""
    source = str(harness.evolution_savepoints()["hashmap-canonical"])
    options: dict[str, Any] = {
        "classpath": [str(harness.evolution_jar("v2"))], "types": V2_TYPES,
        "rename_fields": RENAMES,
    }  # fmt: skip
    local = LocalEngine()
    plan = statectl.plan_migration(source, drops=DROPPED, engine=local, **options)
    here = statectl.write_migration(plan, str(tmp_path / "here"), engine=local)
    there = statectl.migrate(
        source, str(tmp_path / "spark"), drops=DROPPED, head_start=False, **options
    )
    (ran_here,) = dict(here.tasks_run).values()  # the trial's 8 tasks, then the write's
    assert dict(here.tasks_run) == {"driver": ran_here} and ran_here > 8
    assert dict(there.tasks_run) == {"spark": ran_here}
    assert files_under(tmp_path / "spark") == files_under(tmp_path / "here")
