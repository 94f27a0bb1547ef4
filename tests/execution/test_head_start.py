"""HeadStartEngine: tasks run in the driver until Spark is up, then Spark takes every task not
yet begun; results and progress are those of one engine."""

from __future__ import annotations

import pytest

from statectl.errors import FormatError
from statectl.execution.head_start import HeadStartEngine, _seconds_left
from statectl.execution.spark import SparkEngine
from statectl.progress import Progress


class SparkUpAfter(SparkEngine):
    """The real engine, reported up once the driver has run `after` tasks (its start is what
    decides the hand-over, and a real start's timing is not a test's to choose)."""

    head: HeadStartEngine | None = None
    after: int = 0

    def started(self) -> bool:
        return self.head is not None and self.head.driver_tasks >= self.after


def _engine(after: int) -> HeadStartEngine:
    spark = SparkUpAfter("local[2]")
    head = HeadStartEngine(spark, threads=1)
    spark.head, spark.after = head, after
    return head


@pytest.mark.spark
def test_spark_takes_the_tasks_not_begun_once_it_is_up(spark: object) -> None:
    engine = _engine(after=3)
    seen: list[Progress] = []
    tasks = [5, 1, 4, 2, 3, 6, 7]
    results = engine.run(tasks, lambda n: n * 10, lambda n: (1, n), seen.append)
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
    engine = _engine(after=10**9)
    assert engine.run(list(range(20)), lambda n: n + 1) == list(range(1, 21))
    assert engine.tasks_run == {"driver": 20}
    assert engine.spark._starting is None  # never asked to start


def test_an_error_in_a_driver_task_is_raised_as_it_was() -> None:
    def fail_on_two(n: int) -> int:
        if n == 2:
            raise FormatError("bad block", "file-2")
        return n

    with pytest.raises(FormatError) as error:
        _engine(after=10**9).run([0, 1, 2, 3], fail_on_two)
    assert (error.value.source, error.value.message) == ("file-2", "bad block")


def test_spark_starts_when_the_work_left_would_outlast_its_start() -> None:
    # 1 of 100 bytes in 0.1 s: 9.9 s to go alone. 90 of 100 in 1 s: 0.11 s to go.
    assert _seconds_left(Progress(1, 4, 1, 100), 0.1) == pytest.approx(9.9)
    assert _seconds_left(Progress(3, 4, 90, 100), 1.0) == pytest.approx(1 / 9)
    assert _seconds_left(Progress(2, 4, 0, 0), 1.0) == pytest.approx(1.0)  # by files
