"""An embedded Spark with a head start: the driver runs tasks itself until Spark is up.

Starting an embedded Spark costs seconds (a JVM, a SparkContext, Python workers): more than
copying a few GiB of key-group blocks, which the kernel does (`copy_file_range`), or re-hashing
a few million entries. In local mode Spark's executors are this machine's cores anyway, so the
driver takes the tasks, a few per core at a time, and measures its pace; once the
work left would outlast Spark's start, Spark starts in the background, and as soon as it is up
it takes every task not yet begun. A job shorter than Spark's start never pays for it; a
longer one loses nothing. A shuffle (re-hash) is handed over the same way: the driver spills
the records of the sources it read to local disk (`spill`), Spark shuffles the other sources,
and each partition's writer merges the two, so the output is the same bytes either way.

Work that holds the GIL (`gil_bound`: RocksDB rows and heap-format entries one by one through
Python, upgrade's trial of values), which threads cannot share, goes to statectl's own worker
processes (`processes`, one per core), not to Spark, which is not started for it: such work
needs no Java on one machine. A shuffle with such sources is spilled and written by the
workers whole. A few such tasks stay in the driver (`GIL_BOUND_DRIVER_BYTES`): they end
before the workers would have started. A Spark already up (a context of the caller's) takes
every task, as it always did.
"""

from __future__ import annotations

import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any, Generic, TypeAlias, TypeVar, cast

from statectl.execution import processes
from statectl.execution.engine import Engine, Grouping, Job, Shuffle, SortKey, Work, total_work
from statectl.execution.spark import SparkEngine
from statectl.execution.spill import IndexEntry, Spill, SpilledPartition
from statectl.progress import Progress, ProgressCallback

T = TypeVar("T")
R = TypeVar("R")
K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
Shuffled: TypeAlias = Iterator[tuple[SortKey, V]]


@dataclass
class HeadStartEngine(Engine):
    """`spark` (local mode), started only when the work calls for it; until it is up, the
    driver runs tasks itself, `threads` at a time (copies and numpy release the GIL), and
    worker processes take the tasks that hold the GIL."""

    spark: SparkEngine
    name: str = "spark"
    threads: int = field(default_factory=lambda: driver_threads(os.cpu_count() or 1))
    driver_tasks: int = 0
    process_tasks: int = 0

    @property  # read-only here: the sum of the counts of where tasks ran
    def tasks_run(self) -> Counter[str]:  # type: ignore[override]
        """Tasks run so far in this process ("driver"), in statectl's worker processes
        ("processes") and by Spark ("spark")."""
        here = Counter(driver=self.driver_tasks, processes=self.process_tasks)
        return here + self.spark.tasks_run

    def start(self) -> None:
        """Nothing to wait for: Spark starts when the work calls for it."""

    def start_in_background(self) -> None:
        """Start Spark now, for work that needs it (a shuffle)."""
        self.spark.start_in_background()

    def _run(self, job: Job[T, R]) -> list[R]:
        """`fn` over the tasks, results in task order: in this process until Spark is up, then
        every task not yet begun as one Spark job; the tasks `gil_bound` picks in worker
        processes meanwhile (unless few, or Spark is up already); `progress` counts them all."""
        tasks, fn, work = job.tasks, job.fn, job.work
        pooled = set() if self.spark.started() else _for_workers(tasks, work, job.gil_bound)
        tally = _Tally(tasks, work, job.progress)
        in_workers = _submitted(tasks, pooled, fn, work, tally)
        try:
            eligible = [i for i in range(len(tasks)) if i not in pooled]
            finished = self._drive(tasks, eligible, fn, work, tally)
            self.driver_tasks += len(finished)
            rest = [i for i in eligible if i not in finished]
            if rest:
                on_spark = self.spark.run([tasks[i] for i in rest], fn, work, tally.spark)
                finished.update(zip(rest, on_spark, strict=True))
            finished.update(_gathered(in_workers))
        except BaseException:
            _abandon(in_workers.values())
            raise
        self.process_tasks += len(in_workers)
        return [finished[i] for i in range(len(tasks))]

    def _sort_partitions(self, shuffle: Shuffle[T, SortKey, V, R]) -> list[R]:
        """The shuffle: sources are spilled to local disk here until Spark is up; then Spark
        shuffles the rest, and each of its partition writers merges in the spilled records of
        its partition (a file on this machine: local mode). Without Spark, the partitions are
        written here. Sources `gil_bound` picks send the whole shuffle to worker processes,
        unless they are few; a Spark already up takes it whole."""
        sources, records, work = shuffle.sources, shuffle.records, shuffle.work
        partitions, write = shuffle.partitions, shuffle.write
        if self.spark.started():
            return self.spark.sort_partitions(sources, records, partitions, write)
        if _for_workers(sources, work, shuffle.gil_bound):
            return self._sort_in_workers(shuffle)
        with Spill() as spill:

            def spill_source(numbered: tuple[int, T]) -> list[IndexEntry]:
                return spill.write(numbered[0], records(numbered[1]))

            def source_work(numbered: tuple[int, T]) -> tuple[int, int]:
                return work(numbered[1]) if work is not None else (1, 1)

            numbered = list(enumerate(sources))
            tally = _Tally(numbered, source_work, None)
            indexes = self._drive(numbered, range(len(numbered)), spill_source, source_work, tally)
            spilled = spill.partitions(indexes.values(), partitions)
            rest = sources[len(indexes) :]
            if not rest:
                self.driver_tasks += partitions

                def write_spilled(n: int) -> R:
                    return write(n, cast(Shuffled[SortKey, V], spilled[n].records()))

                with ThreadPoolExecutor(self.threads, thread_name_prefix="statectl-task") as pool:
                    return list(pool.map(write_spilled, range(partitions)))

            def write_merged(n: int, shuffled: Shuffled[SortKey, V]) -> R:
                return write(n, cast(Shuffled[SortKey, V], spilled[n].merged(shuffled)))

            return self.spark.sort_partitions(rest, records, partitions, write_merged)

    def _sort_in_workers(self, shuffle: Shuffle[T, SortKey, V, R]) -> list[R]:
        """The shuffle in worker processes: each source spilled to local disk by a worker,
        then each partition's spilled records written, in key order, by a worker."""
        records, write = shuffle.records, shuffle.write
        with Spill() as spill:

            def spill_source(numbered: tuple[int, T]) -> list[IndexEntry]:
                return spill.write(numbered[0], records(numbered[1]))

            def write_spilled(numbered: tuple[int, SpilledPartition]) -> R:
                n, partition = numbered
                return write(n, cast(Shuffled[SortKey, V], partition.records()))

            sources = list(enumerate(shuffle.sources))
            indexes = _in_workers(spill_source, sources)
            spilled = spill.partitions(indexes, shuffle.partitions)
            written = _in_workers(write_spilled, list(enumerate(spilled)))
        self.process_tasks += shuffle.partitions
        return written

    def _drive(
        self,
        tasks: Sequence[T],
        eligible: Sequence[int],
        fn: Callable[[T], R],
        work: Work[T] | None,
        tally: _Tally[T],
    ) -> dict[int, R]:
        """`fn` over the `eligible` tasks in order, here, `threads` at a time, until Spark is up
        (starting it once the work left would outlast its start): their results by index,
        their progress added to `tally`. The pace is theirs alone."""
        total_files, total_bytes = _totals([tasks[i] for i in eligible], work)
        done = Progress(0, total_files, 0, total_bytes)
        finished: dict[int, R] = {}
        queue = iter(eligible)
        began = time.monotonic()
        with ThreadPoolExecutor(self.threads, thread_name_prefix="statectl-task") as pool:
            running: dict[Future[R], int] = {}
            while True:
                while len(running) < self.threads and not self.spark.started():
                    index = next(queue, None)
                    if index is None:
                        break
                    running[pool.submit(fn, tasks[index])] = index
                if not running:
                    break
                ended, _ = wait(running, return_when=FIRST_COMPLETED)
                for future in ended:
                    index = running.pop(future)
                    finished[index] = future.result()  # an error: `with` waits for the rest
                    done = _plus(done, [tasks[index]], work)
                    tally.add(tasks[index])
                under_way = _plus(done, [tasks[i] for i in running.values()], work)
                if _seconds_left(done, under_way, time.monotonic() - began) > SPARK_START_SECONDS:
                    self.spark.start_in_background(niceness=SPARK_START_NICENESS)
        return finished

    def flat_map(self, tasks: Sequence[T], fn: Callable[[T], list[R]]) -> list[R]:
        return self.spark.flat_map(tasks, fn)

    def _group_reduce(self, grouping: Grouping[T, K, V, R]) -> list[R]:
        return self.spark.group_reduce(grouping.tasks, grouping.emit, grouping.reduce)


class _Tally(Generic[T]):
    """The progress of one job's tasks wherever they run (the driver's threads, worker
    processes, Spark), reported as one: a worker's task ends in another thread, and Spark
    reports its own job's progress."""

    def __init__(
        self, tasks: Sequence[T], work: Work[T] | None, progress: ProgressCallback | None
    ) -> None:
        total_files, total_bytes = _totals(tasks, work)
        self._done = Progress(0, total_files, 0, total_bytes)  # here and in workers
        self._on_spark = Progress(0, 0, 0, 0)
        self._work, self._progress = work, progress
        self._lock = threading.Lock()

    def add(self, task: T) -> None:
        """`task` is done (here or in a worker)."""
        with self._lock:
            self._done = _plus(self._done, [task], self._work)
            self._report()

    def spark(self, on_spark: Progress) -> None:
        """Spark's job has done `on_spark` of the tasks it took."""
        with self._lock:
            self._on_spark = on_spark
            self._report()

    def _report(self) -> None:
        if self._progress is not None:
            done, spark = self._done, self._on_spark
            files, size = done.files + spark.files, done.bytes + spark.bytes
            self._progress(Progress(files, done.total_files, size, done.total_bytes))


def _submitted(
    tasks: Sequence[T],
    picked: set[int],
    fn: Callable[[T], R],
    work: Work[T] | None,
    tally: _Tally[T],
) -> dict[int, Future[Any]]:
    """The `picked` tasks submitted to the worker processes, by index; each counted in
    `tally` when it ends well. The largest first (as Spark's bins are packed): one large task
    begun last would leave the other workers idle while it ends."""
    if not picked:
        return {}
    shipped = processes.shipped(fn)
    futures = {}
    for index in sorted(picked, key=lambda i: -work(tasks[i])[1] if work is not None else i):
        future = processes.submit(shipped, tasks[index])
        future.add_done_callback(_counting(tally, tasks[index]))
        futures[index] = future
    return futures


def _counting(tally: _Tally[T], task: T) -> Callable[[Future[Any]], None]:
    def count(future: Future[Any]) -> None:
        if not future.cancelled() and future.exception() is None:
            tally.add(task)

    return count


def _in_workers(fn: Callable[[T], R], tasks: Sequence[T]) -> list[R]:
    """`fn` over every task in the worker processes, results in task order."""
    shipped = processes.shipped(fn)
    futures = [processes.submit(shipped, task) for task in tasks]
    try:
        return [processes.result(future) for future in futures]
    except BaseException:
        _abandon(futures)
        raise


def _gathered(futures: dict[int, Future[Any]]) -> dict[int, Any]:
    """The results of the workers' tasks, by index (the first error raised)."""
    return {index: processes.result(future) for index, future in futures.items()}


def _abandon(futures: Iterable[Future[Any]]) -> None:
    """After an error: the workers' tasks not begun are dropped, and those under way are
    waited for, so that none still writes into an output that is about to be discarded."""
    futures = list(futures)
    for future in futures:
        future.cancel()
    wait(futures)


SPARK_START_SECONDS = 6.0
"""About what an embedded Spark takes to be of use (JVM, context, first Python workers: 5-7 s
on a 2-core machine): work projected to take longer in the driver alone starts Spark."""


SPARK_START_NICENESS = 10
"""The embedded Spark started while the driver works runs at a lower CPU priority: its start
must not slow the work it is meant to speed up (local mode shares this machine's cores)."""


GIL_BOUND_DRIVER_BYTES = 32 << 20
"""GIL-bound input (RocksDB rows, heap-format entries, one by one through Python) the driver
still takes itself rather than hand to worker processes. Measured on 2 loaded cores, rescaling
a native savepoint to 3 subtasks in the driver alone: 16 MiB in 1.4 s (to native; 0.3 s to
canonical), 64 MiB in 3.8 s (1.5 s); the workers' start (a fork server importing statectl,
then each worker its readers) costs about half a second before they share the cores."""


def _for_workers(
    tasks: Sequence[T], work: Work[T] | None, gil_bound: Callable[[T], bool] | None
) -> set[int]:
    """The tasks for the worker processes: those `gil_bound` picks, unless their input is small
    (`GIL_BOUND_DRIVER_BYTES`; without `work` to size them, always)."""
    picked = [i for i, task in enumerate(tasks) if gil_bound is not None and gil_bound(task)]
    if picked and work is not None:
        _, size = total_work([tasks[i] for i in picked], work)
        if size <= GIL_BOUND_DRIVER_BYTES:
            return set()
    return set(picked)


def driver_threads(cores: int) -> int:
    """Tasks the driver runs at once: twice the cores, as copies wait on storage and tasks of
    unequal size then still share the cores; at most 16, as each re-hash holds a batch's
    arrays."""
    return min(2 * cores, 16)


def _totals(tasks: Sequence[T], work: Work[T] | None) -> tuple[int, int]:
    """Files and bytes of all the tasks; without `work`, every task counts as one of each."""
    return total_work(tasks, work) if work is not None else (len(tasks), len(tasks))


def _plus(done: Progress, tasks: Sequence[T], work: Work[T] | None) -> Progress:
    """`done` with the work of `tasks` added."""
    files, size = _totals(tasks, work)
    return Progress(done.files + files, done.total_files, done.bytes + size, done.total_bytes)


def _seconds_left(done: Progress, under_way: Progress, elapsed: float) -> float:
    """The driver's time to finish alone at its pace so far (by bytes, else by files), the
    tasks under way counted half done: with several at a time, the first to end would
    otherwise make the pace look several times slower than it is."""
    if done.total_bytes:
        finished, total = (done.bytes + under_way.bytes) / 2, done.total_bytes
    else:
        finished, total = (done.files + under_way.files) / 2, done.total_files
    return elapsed * (total - finished) / finished if finished else 0.0
