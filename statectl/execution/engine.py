"""Where the tasks of a command run: in this process, or as a Spark job.

Every command that runs tasks (rescale, export, diff) hands functions and picklable tasks to
an `Engine` (`LocalEngine` here, `spark.SparkEngine`), so a small savepoint never pays for
starting Spark and a large one spreads over executors with the same results. Errors inside
tasks reach the caller as one-line `StatectlError`s on either engine. pyspark is imported only
when a Spark engine runs something.
"""

from __future__ import annotations

import operator
from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from typing import Protocol, TypeVar, cast

from statectl.progress import Progress, ProgressCallback, begun

T = TypeVar("T")
R = TypeVar("R")
K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
SortKey = TypeVar("SortKey", bound=tuple[object, ...])

# Shuffled chunks of encoded entries (`operations.shuffled_edits`) whose key group is one of
# these carry no entries: a source's notes, or (from a DataFrame's tasks) its TaskFailure.
NOTES_KEY_GROUP, FAILURE_KEY_GROUP = -1, -2

Work = Callable[[T], tuple[int, int]]
"""A task's share of the progress: the files it writes and the bytes it reads."""


class LocalEngine:
    """Tasks one after the other in this process; a shuffle sorts in memory.

    The reference for what an engine does: `spark.SparkEngine` has the same methods and
    gives the same results.
    """

    name = "local"

    def __init__(self) -> None:
        self.tasks_run: Counter[str] = Counter()  # {"driver": tasks run here}

    def start(self) -> None:
        """Get ready to run tasks now rather than on first use (Spark: start the context)."""

    def start_in_background(self) -> None:
        """Begin `start` without waiting for it (Spark: the context starts in a thread)."""

    def run(
        self,
        tasks: Sequence[T],
        fn: Callable[[T], R],
        work: Work[T] | None = None,
        progress: ProgressCallback | None = None,
        spark_only: Callable[[T], bool] | None = None,
    ) -> list[R]:
        """`fn` over every task, results in task order; `progress` counts the `work` of the
        tasks done (Spark balances its tasks by the bytes). `spark_only`: tasks a head start
        must leave to Spark (`head_start`); other engines run every task alike."""
        results = []
        total_files, total_bytes = total_work(tasks, work)
        files = size = 0
        for task in tasks:
            results.append(fn(task))
            self.tasks_run["driver"] += 1
            if progress is not None and work is not None:
                task_files, task_bytes = work(task)
                files, size = files + task_files, size + task_bytes
                progress(Progress(files, total_files, size, total_bytes))
        return results

    def flat_map(self, tasks: Sequence[T], fn: Callable[[T], list[R]]) -> list[R]:
        """`fn` over every task, results concatenated in task order."""
        return [result for task in tasks for result in fn(task)]

    def group_reduce(
        self,
        tasks: Sequence[T],
        emit: Callable[[T], list[tuple[K, V]]],
        reduce: Callable[[K, list[V]], R],
    ) -> list[R]:
        """`emit` (key, value) pairs from every task, then `reduce` each key's values."""
        groups: dict[K, list[V]] = {}
        for task in tasks:
            for key, value in emit(task):
                groups.setdefault(key, []).append(value)
        return [reduce(key, values) for key, values in groups.items()]

    def sort_partitions(
        self,
        sources: Sequence[T],
        records: Callable[[T], Iterable[tuple[SortKey, V]]],
        partitions: int,
        write: Callable[[int, Iterator[tuple[SortKey, V]]], R],
        work: Work[T] | None = None,
        spark_only: Callable[[T], bool] | None = None,
    ) -> list[R]:
        """The shuffle: every source's (key, value) records, each key a tuple whose first item
        is its partition, sorted by key within the partition and streamed to `write(partition,
        records)`; one result per partition, in partition order. `work` and `spark_only` are
        as for `run` (a head start's pace and what it leaves to Spark)."""
        self.tasks_run["driver"] += partitions
        by_partition: list[list[tuple[SortKey, V]]] = [[] for _ in range(partitions)]
        for source in sources:
            for record in records(source):
                by_partition[cast(int, record[0][0])].append(record)
        return [
            write(n, iter(sorted(found, key=operator.itemgetter(0))))
            for n, found in enumerate(by_partition)
        ]


class Engine(Protocol):
    """What every engine does (`LocalEngine`, `spark.SparkEngine`, `head_start.HeadStartEngine`;
    `factory.choose_engine` picks one): a protocol, so this module imports none of them."""

    @property
    def name(self) -> str: ...
    @property
    def tasks_run(self) -> Counter[str]: ...
    def start(self) -> None: ...
    def start_in_background(self) -> None: ...
    def run(
        self,
        tasks: Sequence[T],
        fn: Callable[[T], R],
        work: Work[T] | None = None,
        progress: ProgressCallback | None = None,
        spark_only: Callable[[T], bool] | None = None,
    ) -> list[R]: ...
    def flat_map(self, tasks: Sequence[T], fn: Callable[[T], list[R]]) -> list[R]: ...
    def group_reduce(
        self,
        tasks: Sequence[T],
        emit: Callable[[T], list[tuple[K, V]]],
        reduce: Callable[[K, list[V]], R],
    ) -> list[R]: ...
    def sort_partitions(
        self,
        sources: Sequence[T],
        records: Callable[[T], Iterable[tuple[SortKey, V]]],
        partitions: int,
        write: Callable[[int, Iterator[tuple[SortKey, V]]], R],
        work: Work[T] | None = None,
        spark_only: Callable[[T], bool] | None = None,
    ) -> list[R]: ...


def total_work(tasks: Sequence[T], work: Work[T] | None) -> tuple[int, int]:
    """Files the tasks write and bytes they read, in all: what progress counts toward."""
    if work is None:
        return 0, 0
    shares = [work(task) for task in tasks]
    return sum(files for files, _ in shares), sum(size for _, size in shares)


def start_named(engine: Engine, progress: ProgressCallback | None) -> None:
    """`engine.start()`, named in `progress` when it starts Spark (seconds of a JVM's start
    show as that phase rather than as work stuck at none done)."""
    if progress is not None and engine.name != "local":
        progress(begun("starting Spark"))
    engine.start()
