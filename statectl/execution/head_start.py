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
Work that holds the GIL (`spark_only`) waits for Spark, unless it is small enough to end here
before Spark would start (`GIL_BOUND_DRIVER_BYTES`).
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Callable, Hashable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import TypeAlias, TypeVar, cast

from statectl.execution.engine import Engine, Grouping, Job, Shuffle, SortKey, Work, total_work
from statectl.execution.spark import SparkEngine
from statectl.execution.spill import IndexEntry, Spill
from statectl.progress import Progress, ProgressCallback

T = TypeVar("T")
R = TypeVar("R")
K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
Shuffled: TypeAlias = Iterator[tuple[SortKey, V]]


@dataclass
class HeadStartEngine(Engine):
    """`spark` (local mode), started only when the work calls for it; until it is up, the
    driver runs tasks itself, `threads` at a time (copies and numpy release the GIL)."""

    spark: SparkEngine
    name: str = "spark"
    threads: int = field(default_factory=lambda: driver_threads(os.cpu_count() or 1))
    driver_tasks: int = 0

    @property  # read-only here: the sum of two engines' counts
    def tasks_run(self) -> Counter[str]:  # type: ignore[override]
        """Tasks run so far in this process ("driver") and by Spark ("spark")."""
        return Counter(driver=self.driver_tasks) + self.spark.tasks_run

    def start(self) -> None:
        """Nothing to wait for: Spark starts when the work calls for it."""

    def start_in_background(self) -> None:
        """Start Spark now, for work that needs it (a shuffle)."""
        self.spark.start_in_background()

    def _run(self, job: Job[T, R]) -> list[R]:
        """`fn` over the tasks, results in task order: in this process until Spark is up, then
        every task not yet begun as one Spark job; `progress` counts both. Tasks `spark_only`
        picks (work that holds the GIL, which threads cannot share) wait for Spark, which is
        then started at once, unless they are few enough to end well before it starts."""
        tasks, fn, work, progress = job.tasks, job.fn, job.work, job.progress
        held = _held(tasks, work, job.spark_only)
        if held:
            self.spark.start_in_background()  # needed whatever the pace: at full priority
        eligible = [i for i in range(len(tasks)) if i not in held]
        finished, done = self._drive(tasks, eligible, fn, work, progress)
        self.driver_tasks += len(finished)
        rest = [i for i in range(len(tasks)) if i not in finished]
        if rest:

            def spark_progress(spark_done: Progress) -> None:
                if progress is not None:
                    files, size = done.files + spark_done.files, done.bytes + spark_done.bytes
                    progress(Progress(files, done.total_files, size, done.total_bytes))

            on_spark = self.spark.run([tasks[i] for i in rest], fn, work, spark_progress)
            finished.update(zip(rest, on_spark, strict=True))
        return [finished[i] for i in range(len(tasks))]

    def _sort_partitions(self, shuffle: Shuffle[T, SortKey, V, R]) -> list[R]:
        """The shuffle: sources are spilled to local disk here until Spark is up; then Spark
        shuffles the rest, and each of its partition writers merges in the spilled records of
        its partition (a file on this machine: local mode). Without Spark, the partitions are
        written here. Sources `spark_only` picks send the whole shuffle to Spark, unless they
        are few enough to end well before it starts."""
        sources, records, work = shuffle.sources, shuffle.records, shuffle.work
        partitions, write = shuffle.partitions, shuffle.write
        if self.spark.started() or _held(sources, work, shuffle.spark_only):
            return self.spark.sort_partitions(sources, records, partitions, write)
        with Spill() as spill:

            def spill_source(numbered: tuple[int, T]) -> list[IndexEntry]:
                return spill.write(numbered[0], records(numbered[1]))

            def source_work(numbered: tuple[int, T]) -> tuple[int, int]:
                return work(numbered[1]) if work is not None else (1, 1)

            numbered = list(enumerate(sources))
            indexes, _ = self._drive(numbered, range(len(numbered)), spill_source, source_work)
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

    def _drive(
        self,
        tasks: Sequence[T],
        eligible: Sequence[int],
        fn: Callable[[T], R],
        work: Work[T] | None = None,
        progress: ProgressCallback | None = None,
    ) -> tuple[dict[int, R], Progress]:
        """`fn` over the `eligible` tasks in order, here, `threads` at a time, until Spark is up
        (starting it once the work left would outlast its start): their results by index, and
        the progress they make (of all `tasks`)."""
        total_files, total_bytes = _totals(tasks, work)
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
                    if progress is not None:
                        progress(done)
                under_way = _plus(done, [tasks[i] for i in running.values()], work)
                if _seconds_left(done, under_way, time.monotonic() - began) > SPARK_START_SECONDS:
                    self.spark.start_in_background(niceness=SPARK_START_NICENESS)
        return finished, done

    def flat_map(self, tasks: Sequence[T], fn: Callable[[T], list[R]]) -> list[R]:
        return self.spark.flat_map(tasks, fn)

    def _group_reduce(self, grouping: Grouping[T, K, V, R]) -> list[R]:
        return self.spark.group_reduce(grouping.tasks, grouping.emit, grouping.reduce)


SPARK_START_SECONDS = 6.0
"""About what an embedded Spark takes to be of use (JVM, context, first Python workers: 5-7 s
on a 2-core machine): work projected to take longer in the driver alone starts Spark."""


SPARK_START_NICENESS = 10
"""The embedded Spark started while the driver works runs at a lower CPU priority: its start
must not slow the work it is meant to speed up (local mode shares this machine's cores)."""


GIL_BOUND_DRIVER_BYTES = 32 << 20
"""GIL-bound input (RocksDB rows, heap-format entries, one by one through Python) the driver
still takes itself rather than wait for Spark. Measured on 2 loaded cores, rescaling a native
savepoint to 3 subtasks in the driver alone: 16 MiB in 1.4 s (to native; 0.3 s to canonical),
64 MiB in 3.8 s (1.5 s): this much ends before an embedded Spark would be up."""


def _held(
    tasks: Sequence[T], work: Work[T] | None, spark_only: Callable[[T], bool] | None
) -> set[int]:
    """The tasks that wait for Spark: those `spark_only` picks, unless their input is small
    (`GIL_BOUND_DRIVER_BYTES`; without `work` to size them, they always wait)."""
    picked = [i for i, task in enumerate(tasks) if spark_only is not None and spark_only(task)]
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
