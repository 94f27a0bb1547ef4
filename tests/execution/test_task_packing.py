"""Tasks packed into Spark tasks: about equal bytes per bin, every task exactly once."""

from __future__ import annotations

from statectl.execution.spark import pack


def test_largest_first_into_the_lightest_bin() -> None:
    assert pack([1, 10, 8, 9, 1, 1], 2) == [[1, 0, 4, 5], [3, 2]]  # 13 and 17 bytes


def test_no_more_bins_than_tasks_and_none_empty() -> None:
    assert pack([5, 5, 5], 8) == [[0], [1], [2]]
    assert pack([5, 5, 5], 1) == [[0, 1, 2]]
    assert pack([], 4) == []
