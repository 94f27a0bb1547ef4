"""HeadStartEngine: tasks run in the driver until Spark is up, then Spark takes every task not
yet begun; results and progress are those of one engine."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from pytest import approx

from statectl.errors import FormatError
from statectl.execution.engine import LocalEngine
from statectl.execution.head_start import GIL_BOUND_DRIVER_BYTES, HeadStartEngine, _seconds_left
from statectl.execution.spark import SparkEngine
from statectl.progress import Progress
from tests.conftest import REPO


class SparkUpAfter(SparkEngine):
    """The real engine, reported up once the driver has begun `after` tasks (counted in `ran`
    by the tasks themselves): its start is what decides the hand-over, and a real start's
    timing is not a test's to choose."""

    ran: list[object]
    after: int

    def started(self) -> bool:
        return len(self.ran) >= self.after


def _engine(after: int) -> tuple[HeadStartEngine, list[object]]:
    spark = SparkUpAfter("local[2]")
    spark.ran, spark.after = [], after
    return HeadStartEngine(spark, threads=1), spark.ran


@pytest.mark.spark
def test_spark_takes_the_tasks_not_begun_once_it_is_up(spark: object) -> None:
    engine, ran = _engine(after=3)
    seen: list[Progress] = []
    tasks = [5, 1, 4, 2, 3, 6, 7]

    def times_ten(n: int) -> int:
        ran.append(n)  # in the driver; a Spark worker appends to its own copy
        return n * 10

    results = engine.run(tasks, times_ten, lambda n: (1, n), seen.append)
    assert results == [n * 10 for n in tasks]
    assert engine.tasks_run == {"driver": 3, "spark": 4}
    assert seen[:3] == [Progress(1, 7, 5, 28), Progress(2, 7, 6, 28), Progress(3, 7, 10, 28)]
    assert seen[-1] == Progress(7, 7, 28, 28)


@pytest.mark.spark
def test_a_running_context_takes_every_task(spark: object) -> None:
    engine = HeadStartEngine(SparkEngine("local[2]"))
    assert engine.run([1, 2, 3], lambda n: -n) == [-1, -2, -3]
    assert engine.tasks_run == {"spark": 3}


def test_work_shorter_than_sparks_start_never_starts_it() -> None:
    engine, _ = _engine(after=10**9)
    assert engine.run(list(range(20)), lambda n: n + 1) == list(range(1, 21))
    assert engine.tasks_run == {"driver": 20}
    assert engine.spark._starting is None  # never asked to start


def _even(n: int) -> bool:
    return n % 2 == 0


def test_tasks_that_hold_the_gil_run_in_worker_processes() -> None:
    engine, _ = _engine(after=10**9)  # Spark never reported up: the driver runs the others
    results = engine.run([1, 2, 3, 4, 5], lambda n: n * n, gil_bound=_even)
    assert results == [1, 4, 9, 16, 25]
    assert engine.tasks_run == {"driver": 3, "processes": 2}
    assert engine.spark._starting is None  # never asked to start: no JVM for this work


def test_tasks_that_hold_the_gil_run_in_worker_processes_when_their_input_is_large() -> None:
    engine, _ = _engine(after=10**9)
    half = GIL_BOUND_DRIVER_BYTES // 2
    seen: list[Progress] = []

    def work(n: int) -> tuple[int, int]:
        return 1, half + 1 if n == 4 else half  # the GIL-bound 2 and 4: one byte too many

    results = engine.run([1, 2, 3, 4, 5], lambda n: n * n, work, seen.append, gil_bound=_even)
    assert results == [1, 4, 9, 16, 25]
    assert engine.tasks_run == {"driver": 3, "processes": 2}
    assert engine.spark._starting is None
    total = 5 * half + 1
    assert seen[-1] == Progress(5, 5, total, total)  # the workers' tasks counted too
    assert [p.files for p in seen] == [1, 2, 3, 4, 5]


def test_an_error_in_a_worker_process_is_raised_as_it_was() -> None:
    with pytest.raises(FormatError) as error:
        _engine(after=10**9)[0].run([0, 1, 2, 3], _fail_on_two, gil_bound=_even)
    assert (error.value.source, error.value.message) == ("file-2", "bad block")


def _fail_on_two(n: int) -> int:
    if n == 2:
        raise FormatError("bad block", "file-2")
    return n


def test_a_few_tasks_that_hold_the_gil_run_in_the_driver() -> None:
    engine, _ = _engine(after=10**9)
    half = GIL_BOUND_DRIVER_BYTES // 2  # the GIL-bound 2 and 4 together: exactly the limit
    results = engine.run([1, 2, 3, 4, 5], lambda n: n * n, lambda n: (1, half), gil_bound=_even)
    assert results == [1, 4, 9, 16, 25]
    assert engine.tasks_run == {"driver": 5}
    assert engine.spark._starting is None  # never asked to start


def test_an_error_in_a_driver_task_is_raised_as_it_was() -> None:
    with pytest.raises(FormatError) as error:
        _engine(after=10**9)[0].run([0, 1, 2, 3], _fail_on_two)
    assert (error.value.source, error.value.message) == ("file-2", "bad block")


def test_spark_starts_when_the_work_left_would_outlast_its_start() -> None:
    nothing = Progress(0, 4, 0, 100)
    # 1 of 100 bytes done in 0.1 s: 9.9 s to go alone. 90 of 100 in 1 s: 0.11 s to go.
    assert _seconds_left(Progress(1, 4, 1, 100), Progress(1, 4, 1, 100), 0.1) == approx(9.9)
    assert _seconds_left(Progress(3, 4, 90, 100), Progress(3, 4, 90, 100), 1) == approx(1 / 9)
    # Tasks under way count half: 10 done and 30 under way in 1 s is 25 of 100.
    assert _seconds_left(Progress(1, 4, 10, 100), Progress(4, 4, 40, 100), 1) == approx(3.0)
    # Without bytes, by files: 2 of 4 in 1 s.
    assert _seconds_left(Progress(2, 4, 0, 0), Progress(2, 4, 0, 0), 1) == approx(1.0)
    assert _seconds_left(nothing, nothing, 1) == 0.0  # no pace yet


def _records(source: int) -> Iterator[tuple[tuple[int, int, int], str]]:
    for i in range(5):
        yield (i % 3, source, i), f"v{source}{i}"


def _keys(partition: int, records: Iterator[tuple[tuple[int, int, int], str]]) -> list[object]:
    return [partition, *(f"{key}={value}" for key, value in records)]


@pytest.mark.spark
@pytest.mark.parametrize("spilled_sources", [0, 2, 4])
def test_a_shuffle_handed_over_writes_what_one_engine_writes(
    spark: object, spilled_sources: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STATECTL_LOCAL_DIR", str(tmp_path))  # where the driver spills
    engine, ran = _engine(after=spilled_sources)

    def records(source: int) -> Iterator[tuple[tuple[int, int, int], str]]:
        ran.append(source)
        yield from _records(source)

    expected = LocalEngine().sort_partitions([0, 1, 2, 3], _records, 4, _keys)
    assert expected[0][:3] == [0, "(0, 0, 0)=v00", "(0, 0, 3)=v03"]
    assert engine.sort_partitions([0, 1, 2, 3], records, 4, _keys) == expected
    assert engine.tasks_run == ({"driver": 4} if spilled_sources == 4 else {"spark": 4})
    assert list(tmp_path.iterdir()) == []  # the spill is gone


def test_a_shuffle_of_sources_that_hold_the_gil_runs_in_worker_processes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STATECTL_LOCAL_DIR", str(tmp_path))  # where the workers spill
    engine, _ = _engine(after=10**9)
    expected = LocalEngine().sort_partitions([0, 1, 2, 3], _records, 4, _keys)
    shuffled = engine.sort_partitions([0, 1, 2, 3], _records, 4, _keys, gil_bound=_even)
    assert shuffled == expected
    assert engine.tasks_run == {"processes": 4}  # one writer per partition
    assert engine.spark._starting is None
    assert list(tmp_path.iterdir()) == []  # the spill is gone


@pytest.mark.spark
def test_the_spark_started_while_the_driver_works_runs_at_a_lower_priority() -> None:
    script = """
import os, subprocess, time
from statectl.execution import head_start
from statectl.execution.spark import SparkEngine
engine = SparkEngine("local[1]")
engine.start_in_background(niceness=head_start.SPARK_START_NICENESS)
deadline = time.monotonic() + 60
while time.monotonic() < deadline:
    found = subprocess.run(["ps", "-ww", "-o", "ni=,args=", "--ppid", str(os.getpid())],
                           capture_output=True, text=True).stdout.splitlines()
    jvm = [line.split()[0] for line in found if "pyspark-shell" in line]
    if jvm:
        print(jvm[0], os.getpriority(os.PRIO_PROCESS, 0))
        break
    time.sleep(0.05)
"""
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert len(done.stdout.split()) == 2, f"no Spark JVM seen\n{done.stderr[-2000:]}"
    jvm, driver = (int(nice) for nice in done.stdout.split())
    assert jvm == min(19, driver + 10), done.stderr  # the JVM niced by 10, the driver not
