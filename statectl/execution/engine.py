"""Where the tasks of a command run: in this process, or as a Spark job.

Every command that runs tasks (rescale, export, diff) hands functions and picklable tasks to
an `Engine` (`LocalEngine` here, `spark.SparkEngine`), so a small savepoint never pays for
starting Spark and a large one spreads over executors with the same results. Errors inside
tasks reach the caller as one-line `StatectlError`s on either engine. pyspark is imported only
when a Spark engine runs something.
"""

from __future__ import annotations

import operator
import os
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar, cast

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


def usable_cores() -> int:
    """The cores this process may use (its CPU affinity where the platform has one)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1


@dataclass(frozen=True)
class Job(Generic[T, R]):
    """The arguments of one `Engine.run`, as each engine's `_run` takes them."""

    tasks: Sequence[T]
    fn: Callable[[T], R]
    work: Work[T] | None
    progress: ProgressCallback | None
    gil_bound: Callable[[T], bool] | None


@dataclass(frozen=True)
class Grouping(Generic[T, K, V, R]):
    """The arguments of one `Engine.group_reduce`, as each engine's `_group_reduce` takes them."""

    tasks: Sequence[T]
    emit: Callable[[T], list[tuple[K, V]]]
    reduce: Callable[[K, list[V]], R]


@dataclass(frozen=True)
class Shuffle(Generic[T, SortKey, V, R]):
    """The arguments of one `Engine.sort_partitions`, as each engine's `_sort_partitions` takes
    them."""

    sources: Sequence[T]
    records: Callable[[T], Iterable[tuple[SortKey, V]]]
    partitions: int
    write: Callable[[int, Iterator[tuple[SortKey, V]]], R]
    work: Work[T] | None
    gil_bound: Callable[[T], bool] | None


class Engine(ABC):
    """What every engine does (`LocalEngine`, `spark.SparkEngine`, `head_start.HeadStartEngine`;
    `factory.choose_engine` picks one). The public methods are here once; an engine implements
    the hooks (`_run`, `_group_reduce`, `_sort_partitions`) that take their arguments bundled."""

    name: str
    tasks_run: Counter[str]
    """Tasks run so far, by where they ran ("driver", "processes": statectl's workers,
    "spark")."""

    @abstractmethod
    def start(self) -> None:
        """Get ready to run tasks now rather than on first use (Spark: start the context)."""

    @abstractmethod
    def start_in_background(self) -> None:
        """Begin `start` without waiting for it (Spark: the context starts in a thread)."""

    def run(
        self,
        tasks: Sequence[T],
        fn: Callable[[T], R],
        work: Work[T] | None = None,
        progress: ProgressCallback | None = None,
        gil_bound: Callable[[T], bool] | None = None,
    ) -> list[R]:
        """`fn` over every task, results in task order; `progress` counts the `work` of the
        tasks done (Spark balances its tasks by the bytes). `gil_bound`: tasks that hold the
        GIL, which a head start gives to worker processes rather than threads (`head_start`);
        other engines run every task alike."""
        if not tasks:
            return []
        return self._run(Job(tasks, fn, work, progress, gil_bound))

    @abstractmethod
    def flat_map(self, tasks: Sequence[T], fn: Callable[[T], list[R]]) -> list[R]:
        """`fn` over every task, results concatenated in task order."""

    def group_reduce(
        self,
        tasks: Sequence[T],
        emit: Callable[[T], list[tuple[K, V]]],
        reduce: Callable[[K, list[V]], R],
    ) -> list[R]:
        """`emit` (key, value) pairs from every task, then `reduce` each key's values."""
        if not tasks:
            return []
        return self._group_reduce(Grouping(tasks, emit, reduce))

    def sort_partitions(
        self,
        sources: Sequence[T],
        records: Callable[[T], Iterable[tuple[SortKey, V]]],
        partitions: int,
        write: Callable[[int, Iterator[tuple[SortKey, V]]], R],
        work: Work[T] | None = None,
        gil_bound: Callable[[T], bool] | None = None,
    ) -> list[R]:
        """The shuffle: every source's (key, value) records, each key a tuple whose first item
        is its partition, sorted by key within the partition and streamed to `write(partition,
        records)`; one result per partition, in partition order. `work` and `gil_bound` are
        as for `run` (a head start's pace and what it gives to worker processes)."""
        return self._sort_partitions(Shuffle(sources, records, partitions, write, work, gil_bound))

    @abstractmethod
    def _run(self, job: Job[T, R]) -> list[R]:
        """`run` over at least one task."""

    @abstractmethod
    def _group_reduce(self, grouping: Grouping[T, K, V, R]) -> list[R]:
        """`group_reduce` over at least one task."""

    @abstractmethod
    def _sort_partitions(self, shuffle: Shuffle[T, SortKey, V, R]) -> list[R]:
        """`sort_partitions`."""


class LocalEngine(Engine):
    """Tasks one after the other in this process; a shuffle sorts in memory.

    The reference for what an engine does: `spark.SparkEngine` gives the same results.
    """

    name = "local"

    def __init__(self) -> None:
        self.tasks_run: Counter[str] = Counter()  # {"driver": tasks run here}

    def start(self) -> None:
        pass

    def start_in_background(self) -> None:
        pass

    def _run(self, job: Job[T, R]) -> list[R]:
        results = []
        total_files, total_bytes = total_work(job.tasks, job.work)
        files = size = 0
        for task in job.tasks:
            results.append(job.fn(task))
            self.tasks_run["driver"] += 1
            if job.progress is not None and job.work is not None:
                task_files, task_bytes = job.work(task)
                files, size = files + task_files, size + task_bytes
                job.progress(Progress(files, total_files, size, total_bytes))
        return results

    def flat_map(self, tasks: Sequence[T], fn: Callable[[T], list[R]]) -> list[R]:
        return [result for task in tasks for result in fn(task)]

    def _group_reduce(self, grouping: Grouping[T, K, V, R]) -> list[R]:
        groups: dict[K, list[V]] = {}
        for task in grouping.tasks:
            for key, value in grouping.emit(task):
                groups.setdefault(key, []).append(value)
        return [grouping.reduce(key, values) for key, values in groups.items()]

    def _sort_partitions(self, shuffle: Shuffle[T, SortKey, V, R]) -> list[R]:
        self.tasks_run["driver"] += shuffle.partitions
        by_partition: list[list[tuple[SortKey, V]]] = [[] for _ in range(shuffle.partitions)]
        for source in shuffle.sources:
            for record in shuffle.records(source):
                by_partition[cast(int, record[0][0])].append(record)
        return [
            shuffle.write(n, iter(sorted(found, key=operator.itemgetter(0))))
            for n, found in enumerate(by_partition)
        ]


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
