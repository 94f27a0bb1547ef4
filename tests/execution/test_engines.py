"""Both engines give the same results, and an error inside a task reaches the caller as it was."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from statectl.errors import FormatError
from statectl.execution.engine import Engine, LocalEngine
from statectl.progress import Progress


def _records(source: int) -> Iterator[tuple[tuple[int, int, int], str]]:
    for i in range(5):
        yield (i % 3, source, i), f"v{source}{i}"


def _failing_records(source: int) -> Iterator[tuple[tuple[int, int, int], str]]:
    if source == 2:
        raise FormatError("bad block", "file-2")
    yield from _records(source)


def _keys(partition: int, records: Iterator[tuple[tuple[int, int, int], str]]) -> list[object]:
    return [partition, *(key for key, _ in records)]


def _engines(spark: object) -> list[Engine]:
    from statectl.execution.spark import SparkEngine

    return [LocalEngine(), SparkEngine("local[2]")]


@pytest.mark.spark
def test_sort_partitions_sorts_each_partition_by_key(spark: object) -> None:
    for engine in _engines(spark):
        assert engine.sort_partitions([0, 1, 2], _records, 4, _keys) == [
            [0, (0, 0, 0), (0, 0, 3), (0, 1, 0), (0, 1, 3), (0, 2, 0), (0, 2, 3)],
            [1, (1, 0, 1), (1, 0, 4), (1, 1, 1), (1, 1, 4), (1, 2, 1), (1, 2, 4)],
            [2, (2, 0, 2), (2, 1, 2), (2, 2, 2)],
            [3],
        ], engine.name


@pytest.mark.spark
def test_an_error_in_a_task_is_raised_as_it_was(spark: object) -> None:
    for engine in _engines(spark):
        with pytest.raises(FormatError) as error:
            engine.sort_partitions([0, 1, 2], _failing_records, 3, _keys)
        assert (error.value.source, error.value.message) == ("file-2", "bad block")
        with pytest.raises(FormatError, match="bad block"):
            engine.run([0, 1, 2], lambda n: list(_failing_records(n)))


@pytest.mark.spark
def test_run_keeps_task_order_and_counts_progress(spark: object) -> None:
    for engine in _engines(spark):
        seen: list[Progress] = []
        assert engine.run([3, 1, 2], lambda n: n * 10, lambda n: (1, n), seen.append) == [
            30,
            10,
            20,
        ]
        assert seen[-1] == Progress(3, 3, 6, 6), engine.name
        assert engine.flat_map([2, 1], lambda n: [n] * n) == [2, 2, 1]
        groups = engine.group_reduce(
            [1, 2, 3], lambda n: [(n % 2, n)], lambda k, vs: (k, sorted(vs))
        )
        assert sorted(groups) == [(0, [2]), (1, [1, 3])]
