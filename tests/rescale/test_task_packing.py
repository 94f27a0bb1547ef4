"""Plan tasks packed into Spark tasks: about equal bytes per bin, every task exactly once."""

from __future__ import annotations

from statectl.rescale.execute import CopyTask
from statectl.rescale.spark_job import pack, task_bytes
from statectl.savepoint.model import StateStream


def _copies(*sizes: int) -> list[CopyTask]:
    return [
        CopyTask(StateStream(f"f{i}", size, inline=b""), f"f{i}") for i, size in enumerate(sizes)
    ]


def test_largest_first_into_the_lightest_bin() -> None:
    tasks = _copies(1, 10, 8, 9, 1, 1)
    assert [task_bytes(t) for t in tasks] == [1, 10, 8, 9, 1, 1]
    assert pack(tasks, 2) == [[1, 0, 4, 5], [3, 2]]  # 13 and 17 bytes


def test_no_more_bins_than_tasks_and_none_empty() -> None:
    tasks = _copies(5, 5, 5)
    assert pack(tasks, 8) == [[0], [1], [2]]
    assert pack(tasks, 1) == [[0, 1, 2]]
    assert pack([], 4) == []
