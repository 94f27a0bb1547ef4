"""The Spark engine: a command's tasks as a PySpark job, packed into one Spark task per core.

`local[*]` starts an embedded session; any other `--master` is a cluster, to which the
`statectl` package is shipped as a zip (workers need its dependencies: docs/commands/index.md).
Spark's console progress is off and its log level WARN; progress is reported through a
callback fed by accumulators of files written and their state bytes. Spark's own failures (its
JVM not starting or dying, a failed job) are one `SparkError` each (`spark_failures`).

Start-up dominates small and medium jobs, so the engine starts a bare SparkContext (no SQL
session, which costs as much again) and the driver JVM, which only schedules, skips the
optimising JIT. Tasks are packed by bytes into at most one Spark task per core: a Spark task
costs tens of milliseconds, most of statectl's tasks (operator state, small files) far less.
"""

from __future__ import annotations

import atexit
import contextlib
import heapq
import itertools
import os
import pickle
import re
import shutil
import signal
import sys
import tempfile
import threading
import uuid
from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from statectl import errors
from statectl.execution.engine import (
    FAILURE_KEY_GROUP,
    Engine,
    Grouping,
    Job,
    Shuffle,
    SortKey,
    total_work,
    usable_cores,
)
from statectl.execution.spark_failures import (
    DID_NOT_START,
    JOB_FAILED,
    JVM_OPTIONS,
    jvm_death,
    launch_jvm,
    quiet_py4j,
    quiet_query_logs,
    reports_failures,
    watch_interrupts,
)
from statectl.progress import Progress, ProgressCallback, finished

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark import SparkConf, SparkContext
    from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[*]"

T = TypeVar("T")
R = TypeVar("R")
K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

_QUIET_CONF = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "8",
}


def spark_session(
    master: str = DEFAULT_MASTER, conf: Mapping[str, str] | None = None
) -> SparkSession:
    """The active SparkSession, or a new one; flags win over spark-defaults.conf."""
    from pyspark.sql import SparkSession

    quiet_query_logs()
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    spark_context(master, conf)
    return SparkSession.builder.getOrCreate()  # over the context just started


def spark_context(
    master: str = DEFAULT_MASTER, conf: Mapping[str, str] | None = None
) -> SparkContext:
    """The active SparkContext, or a new one without a SQL session (tasks need none)."""
    from pyspark import SparkConf, SparkContext

    active = SparkContext._active_spark_context
    if active is not None:
        died = jvm_death()  # a context whose JVM is gone would answer no call
        if died is not None:
            raise died
        watch_interrupts()
        return active
    log_config = Path(__file__).with_name("log4j2.properties")
    java_options = (
        f"-Dlog4j2.configurationFile={log_config.as_uri()} -XX:TieredStopAtLevel=1 {JVM_OPTIONS}"
    )
    settings = {**_QUIET_CONF, **(conf or {})}
    # The caller's JVM options come after ours (a later one wins), not instead of them.
    extra_options = settings.get("spark.driver.extraJavaOptions")
    settings["spark.driver.extraJavaOptions"] = f"{java_options} {extra_options or ''}".strip()
    if master.startswith("local"):
        # An embedded session talks to nothing but itself, and its Python workers must see
        # the driver's packages: PySpark otherwise starts whatever `python3` is on PATH.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        settings.setdefault("spark.driver.host", "127.0.0.1")
        settings.setdefault("spark.driver.bindAddress", "127.0.0.1")
        settings.setdefault("spark.python.daemon.module", "statectl.execution.spark_daemon")
        # Spark keeps every idle Python worker it started (one stage's readers, the next
        # one's encoders, each 100 MiB or more): one per core is enough to reuse.
        settings.setdefault("spark.python.factory.idleWorkerMaxPoolSize", str(_local_cores(master)))
        if "spark.driver.memory" not in settings and not _gc_chosen(extra_options):
            # The default 1 GiB heap: with the serial collector a transform's JVM stayed at
            # 540 MiB where G1 grew to 990 (`bench.writeback`, 10 M entries), no slower; a
            # re-hash, whose shuffle fills the heap, takes 0.8 to 1.4 GiB with either.
            settings["spark.driver.extraJavaOptions"] += " -XX:+UseSerialGC"
    spark_conf = SparkConf().setMaster(master).setAppName("statectl")
    for key, value in settings.items():
        spark_conf.set(key, value)
    quiet_py4j()
    with SparkContext._lock:  # getOrCreate's, over a JVM launched by `launch_jvm`
        context = SparkContext._active_spark_context or _new_context(spark_conf)
    context.setLogLevel("WARN")
    if not master.startswith("local"):
        _ship_package(context)
    watch_interrupts()
    return context


@reports_failures(DID_NOT_START)
def _new_context(conf: SparkConf) -> SparkContext:
    from pyspark import SparkContext

    return SparkContext(conf=conf, gateway=None if SparkContext._gateway else launch_jvm(conf))


def _local_cores(master: str) -> int:
    """The cores of a local master: `local` 1, `local[N]` (or `local[N,F]`) N, `local[*]` all."""
    found = re.fullmatch(r"local(?:\[(\*|\d+)(?:,\d+)?\])?", master)
    if found is None or found.group(1) == "*":
        return usable_cores()
    return int(found.group(1) or 1)


def _gc_chosen(java_options: str | None) -> bool:
    """Whether the caller or the environment picks the JVM's collector (two are an error)."""
    chosen = [java_options or ""]
    chosen += [
        os.environ.get(v, "") for v in ("JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS")
    ]
    return any(re.search(r"-XX:[+-]Use\w*GC", options) for options in chosen)


def _context_running() -> bool:
    """Whether a SparkContext is running in this process."""
    if "pyspark" not in sys.modules:  # no context without it; importing it costs 0.3 s
        return False
    from pyspark import SparkContext

    return SparkContext._active_spark_context is not None


def _spark_submit_children() -> list[int]:
    """The spark-submit processes (the JVM pyspark launches) this process started."""
    me = str(os.getpid())
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):
            # "pid (comm) state ppid ...": comm may hold spaces, so split after its ")"
            parent = stat.read_text().rpartition(")")[2].split()[1]
            command = (stat.parent / "cmdline").read_bytes()
            if parent == me and b"pyspark-shell" in command:
                found.append(int(stat.parent.name))
    return found


def _ship_package(context: SparkContext) -> None:
    """Put `statectl` on the executors' Python path (its dependencies must be installed there)."""
    package_dir = Path(__file__).resolve().parents[1]
    scratch = Path(tempfile.mkdtemp(prefix="statectl-pyfiles-"))
    # The driver serves the zip from here for as long as the session lives: remove it at exit.
    atexit.register(shutil.rmtree, scratch, ignore_errors=True)
    archive_base = scratch / "statectl"
    archive = shutil.make_archive(str(archive_base), "zip", package_dir.parent, package_dir.name)
    context.addPyFile(archive)


@dataclass
class SparkEngine(Engine):
    """The active SparkContext, or one started on first use with `--master` and `--conf`."""

    master: str = DEFAULT_MASTER
    conf: Mapping[str, str] = field(default_factory=dict)
    name: str = "spark"
    tasks_run: Counter[str] = field(default_factory=Counter, init=False)  # {"spark": tasks}
    _starting: threading.Thread | None = field(default=None, init=False, repr=False)
    _start_errors: list[BaseException] = field(default_factory=list, init=False, repr=False)

    @property
    def context(self) -> SparkContext:
        self.start()
        return spark_context(self.master, dict(self.conf))

    def start_in_background(self, niceness: int = 0) -> None:
        """Begin starting the context in a daemon thread (seconds of JVM start-up the driver
        spends reading and planning meanwhile); `start` waits for it. A daemon thread: a
        command that fails before it needs Spark exits at once, and the JVM follows it.
        `niceness` > 0 lowers the CPU priority of the JVM (and of the Python workers it
        starts) by that much, so that its start takes only cores the driver leaves idle."""
        if self._starting is not None or _context_running():
            return

        def start() -> None:
            try:
                if niceness > 0:  # this thread's; the JVM launched from it inherits it
                    with contextlib.suppress(OSError, AttributeError):
                        thread = threading.get_native_id()
                        lower = min(19, os.getpriority(os.PRIO_PROCESS, thread) + niceness)
                        os.setpriority(os.PRIO_PROCESS, thread, lower)
                spark_context(self.master, dict(self.conf))
            except BaseException as exc:  # raised again by `start`, in the caller's thread
                self._start_errors.append(exc)

        self._starting = threading.Thread(target=start, name="statectl-spark-start", daemon=True)
        self._starting.start()
        atexit.register(self._abandon_start)

    def started(self) -> bool:
        """Whether `start` would return (or raise) at once: the context is up, or its
        background start has ended."""
        if self._starting is not None:
            return not self._starting.is_alive()
        return _context_running()

    def _abandon_start(self) -> None:
        """At exit, a start still under way (its context never needed) is cut short: the
        JVM being launched is stopped, so it leaves neither a process nor pyspark's
        connection folder behind."""
        if self._starting is None or not self._starting.is_alive():
            return
        for pid in _spark_submit_children():
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGTERM)
        self._starting.join(timeout=10)

    @reports_failures(DID_NOT_START)
    def start(self) -> None:
        if self._starting is not None:
            self._starting.join()
            self._starting = None
            if self._start_errors:
                raise self._start_errors.pop()
        spark_context(self.master, dict(self.conf))

    @reports_failures(JOB_FAILED)
    def _run(self, job: Job[T, R]) -> list[R]:
        tasks, work, progress = job.tasks, job.work, job.progress
        context = self.context
        weights = [work(task)[1] if work is not None else 0 for task in tasks]
        bins = pack(weights, max(1, context.defaultParallelism))
        # Spark tasks carry task indexes; the tasks travel once per executor, so many tasks
        # packed into few Spark tasks never make oversized ones.
        shared = context.broadcast(list(tasks))
        files_done, bytes_done = context.accumulator(0), context.accumulator(0)
        run = guarded(job.fn)

        def run_counted(index: int) -> tuple[int, R | TaskFailure]:
            task = shared.value[index]
            result = run(task)
            if work is not None and not isinstance(result, TaskFailure):
                task_files, task_bytes = work(task)
                files_done.add(task_files)
                bytes_done.add(task_bytes)
            return index, result

        self.tasks_run["spark"] += len(tasks)
        rdd = context.parallelize(bins, numSlices=len(bins)).flatMap(_items).map(run_counted)
        _name_job(context, f"{len(tasks)} tasks")
        total_files, total_bytes = total_work(tasks, work)
        stop = threading.Event()
        watcher = None
        if progress is not None:

            def report() -> Progress:
                files = min(files_done.value, total_files)
                return Progress(files, total_files, min(bytes_done.value, total_bytes), total_bytes)

            watcher = threading.Thread(target=_watch, args=(report, progress, stop), daemon=True)
            watcher.start()
        try:
            results = raise_failures([r for _, r in sorted(collect(rdd), key=_first)])
        finally:
            stop.set()
            if watcher is not None:
                watcher.join()
            with contextlib.suppress(Exception):  # never hide the job's own error
                shared.destroy()
        if progress is not None:  # only a job that succeeded has run every task
            progress(finished(total_files, total_bytes))
        return results

    def flat_map(self, tasks: Sequence[T], fn: Callable[[T], list[R]]) -> list[R]:
        return [result for results in self.run(tasks, fn) for result in results]

    @reports_failures(JOB_FAILED)
    def _group_reduce(self, grouping: Grouping[T, K, V, R]) -> list[R]:
        tasks, reduce = grouping.tasks, grouping.reduce
        guarded_emit = guarded(grouping.emit)

        def reduce_group(group: tuple[K, Iterable[V]]) -> R:
            return reduce(group[0], list(group[1]))

        guarded_reduce = guarded(reduce_group)

        def pairs(task: T) -> list[Any]:
            emitted = guarded_emit(task)
            return [(_FAILED, emitted)] if isinstance(emitted, TaskFailure) else emitted

        def reduced(group: tuple[Any, Any]) -> Any:
            return next(iter(group[1])) if group[0] == _FAILED else guarded_reduce(group)

        context = self.context
        rdd = context.parallelize(list(tasks), numSlices=len(tasks)).flatMap(pairs)
        _name_job(context, f"group {len(tasks)} tasks")
        return raise_failures(collect(rdd.groupByKey().map(reduced)))

    @reports_failures(JOB_FAILED)
    def _sort_partitions(self, shuffle: Shuffle[T, SortKey, V, R]) -> list[R]:
        """`repartitionAndSortWithinPartitions`: Spark spills what does not fit in memory."""
        sources, records, partitions = shuffle.sources, shuffle.records, shuffle.partitions
        context = self.context
        shared = context.broadcast(list(sources))

        def emitted(index: int) -> Iterator[tuple[Any, Any]]:
            try:
                yield from records(shared.value[index])
            except (errors.StatectlError, OSError) as exc:
                yield _FAILURE_KEY, failure(exc)

        written = _partition_writer(shuffle.write)

        self.tasks_run["spark"] += partitions
        _name_job(context, f"shuffle {len(sources)} sources")
        try:
            job = (
                context.parallelize(range(len(sources)), numSlices=max(1, len(sources)))
                .flatMap(emitted)
                .repartitionAndSortWithinPartitions(partitions, partitionFunc=_first)
                .mapPartitionsWithIndex(written)
            )
            return raise_failures(collect(job))
        finally:
            with contextlib.suppress(Exception):
                shared.destroy()

    @reports_failures(JOB_FAILED)
    def sort_frame(
        self,
        frame: Any,
        partition_of: Sequence[int],
        partitions: int,
        write: Callable[[int, Iterator[tuple[SortKey, bytes]]], R],
    ) -> list[R]:
        """The shuffle of `sort_partitions` over chunks a DataFrame's own tasks made: rows of
        (key group, seq, chunk bytes), each sent to `partition_of[key group]` and sorted by
        (partition, key group, seq) in Spark's JVM, which spills what does not fit in its
        memory; then `write(partition, records)` once per partition. A row of key group
        `NOTES_KEY_GROUP` goes to partition 0, first; one of `FAILURE_KEY_GROUP` holds a
        pickled TaskFailure, raised here."""
        from pyspark.sql import functions as F

        session = frame.sparkSession
        keys = spark_partition_keys(partitions)
        routes = session.createDataFrame(_routes(partition_of, keys))  # no Python task
        routed = (
            frame.join(F.broadcast(routes), "key_group", "left")
            .fillna({"partition": 0, "route": keys[0]})  # notes and failures: partition 0
            .repartition(partitions, "route")
            .sortWithinPartitions("partition", "key_group", "seq")
            .select("partition", "key_group", "seq", "chunk")
        )
        _name_job(self.context, f"shuffle into {partitions} files")
        # Chunks are whole batches of entries: a batch of chunk rows is cut by bytes too.
        with _session_conf(session, ARROW_BATCH_BYTES, str(CHUNK_BATCH_BYTES)):
            rows = collect(routed.mapInArrow(_frame_writer(write), WRITTEN_SCHEMA))
        self.tasks_run["spark"] += len(rows)
        results: dict[int, R | TaskFailure] = {n: pickle.loads(result) for n, result in rows}
        unfed = sorted(set(range(partitions)) - set(results))  # no row was sent to them
        if unfed:
            results.update(zip(unfed, self.run(unfed, lambda n: write(n, iter(()))), strict=True))
        return raise_failures([results[n] for n in range(partitions)])


def _routes(partition_of: Sequence[int], keys: Sequence[int]) -> pa.Table:
    """Key group → (partition, the value that routes a row to that Spark partition)."""
    import pyarrow as pa

    return pa.table(
        {
            "key_group": pa.array(range(len(partition_of)), pa.int32()),
            "partition": pa.array(partition_of, pa.int32()),
            "route": pa.array([keys[n] for n in partition_of], pa.int32()),
        }
    )


@contextlib.contextmanager
def _session_conf(session: SparkSession, key: str, value: str) -> Iterator[None]:
    """`key` set to `value` while the block runs, then as it was (the session may be a
    user's)."""
    before = session.conf.get(key, None)
    session.conf.set(key, value)
    try:
        yield
    finally:
        if before is None:
            session.conf.unset(key)
        else:
            session.conf.set(key, before)


ARROW_BATCH_BYTES = "spark.sql.execution.arrow.maxBytesPerBatch"
CHUNK_BATCH_BYTES = 8 << 20
WRITTEN_SCHEMA = "partition int, result binary"


def spark_partition_keys(partitions: int) -> list[int]:
    """For each of `partitions`, the smallest int that Spark's hash partitioning
    (`pmod(murmur3(value, seed 42), n)`, `HashPartitioning`) sends to it: routed by these,
    each partition's rows make exactly one Spark task. (Were Spark's hash to change, rows
    would still reach one writer each, only some writers sharing a task.)"""
    keys: dict[int, int] = {}
    value = 0
    while len(keys) < partitions:
        keys.setdefault(_spark_hash_int(value) % partitions, value)
        value += 1
    return [keys[n] for n in range(partitions)]


def _spark_hash_int(value: int, seed: int = 42) -> int:
    """Spark's `Murmur3_x86_32.hashInt(value, seed)` as a signed int (`Murmur3Hash` of an
    IntegerType column)."""
    mask = 0xFFFFFFFF

    def rotl(x: int, r: int) -> int:
        return ((x << r) | (x >> (32 - r))) & mask

    k1 = rotl((value & mask) * 0xCC9E2D51 & mask, 15) * 0x1B873593 & mask
    h1 = (rotl(seed ^ k1, 13) * 5 + 0xE6546B64) & mask
    h1 ^= 4
    h1 = (h1 ^ (h1 >> 16)) * 0x85EBCA6B & mask
    h1 = (h1 ^ (h1 >> 13)) * 0xC2B2AE35 & mask
    h1 ^= h1 >> 16
    return h1 - (1 << 32) if h1 & 0x80000000 else h1


def _frame_writer(
    write: Callable[[int, Iterator[Any]], R],
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """`sort_frame`'s writer for `mapInArrow`: rows sorted by (partition, key group, seq), each
    partition's written by `write`, its result pickled into one row (a failed source's
    TaskFailure, sorted first in partition 0, instead of that partition's file)."""

    def written(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow as pa

        rows = (row for batch in batches for row in zip(*batch.to_pydict().values(), strict=True))
        for partition, group in itertools.groupby(rows, key=_first):
            records = (((p, kg, seq), chunk) for p, kg, seq, chunk in group)
            head = next(records)
            if head[0][1] == FAILURE_KEY_GROUP:
                result: R | TaskFailure = pickle.loads(head[1])
            else:
                result = guarded(_writing(write, itertools.chain((head,), records)))(partition)
            for _ in records:  # what a writer left unread (none, unless it failed)
                pass
            yield pa.RecordBatch.from_pydict(
                {"partition": [partition], "result": [pickle.dumps(result)]},
                pa.schema([("partition", pa.int32()), ("result", pa.binary())]),
            )

    return written


def _writing(
    write: Callable[[int, Iterator[Any]], R], records: Iterator[Any]
) -> Callable[[int], R]:
    return lambda partition: write(partition, records)


def _partition_writer(
    write: Callable[[int, Iterator[Any]], R],
) -> Callable[[int, Iterable[Any]], Iterator[R | TaskFailure]]:
    """A shuffle partition's writer for `mapPartitionsWithIndex`: a failed source's
    TaskFailure (sorted first in partition 0) is passed on instead of writing."""

    def written(partition: int, sorted_records: Iterable[Any]) -> Iterator[R | TaskFailure]:
        stream = iter(sorted_records)
        head = next(stream, None)
        if head is not None and head[0] == _FAILURE_KEY:
            yield head[1]
            return
        if head is not None:
            stream = itertools.chain((head,), stream)

        def write_partition(n: int) -> R:
            return write(n, stream)

        yield guarded(write_partition)(partition)

    return written


_FAILED = "\0statectl: task failed"  # group_reduce: the key of a failed task's TaskFailure
# sort_partitions: a failed source's key, first in partition 0, whose writer reports it
_FAILURE_KEY = (0,)


def _name_job(context: SparkContext, what: str) -> None:
    context.setJobGroup(f"statectl-{uuid.uuid4().hex}", f"statectl: {what}", interruptOnCancel=True)


def pack(weights: Sequence[int], slots: int) -> list[list[int]]:
    """Task indexes in at most `slots` bins of about equal weight (heaviest first, to the
    lightest bin); no bin is empty."""
    bins: list[list[int]] = [[] for _ in range(min(slots, len(weights)))]
    loads = [(0, n) for n in range(len(bins))]
    for index in sorted(range(len(weights)), key=lambda i: -weights[i]):
        load, n = heapq.heappop(loads)
        bins[n].append(index)
        heapq.heappush(loads, (load + weights[index], n))
    return bins


def _items(bin_: list[int]) -> list[int]:
    return bin_


def _first(pair: tuple[int, Any]) -> int:
    """A (task index, result) pair's index; a shuffle key's partition."""
    return pair[0]


def _watch(
    report: Callable[[], Progress], progress: ProgressCallback, stop: threading.Event
) -> None:
    while not stop.wait(0.25):  # the accumulators count the Spark tasks that finished
        progress(report())


# --- errors inside tasks -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TaskFailure:
    """A task's bad-input error, returned as a value: raised inside a Spark task it would reach
    the driver as a Java exception carrying the worker's traceback instead of one clear line."""

    kind: str  # the StatectlError subclass name
    message: str
    source: str | None

    def error(self) -> errors.StatectlError:
        error_class = getattr(errors, self.kind, errors.StatectlError)
        return error_class(self.message, self.source)


def guarded(fn: Callable[[T], R]) -> Callable[[T], R | TaskFailure]:
    """`fn` for a Spark task: statectl's own errors and I/O errors come back as TaskFailure."""

    def run(item: T) -> R | TaskFailure:
        try:
            return fn(item)
        except (errors.StatectlError, OSError) as exc:
            return failure(exc)

    return run


def failure(exc: errors.StatectlError | OSError) -> TaskFailure:
    """The TaskFailure of a task's error: its message and the file it names."""
    if isinstance(exc, errors.StatectlError):
        return TaskFailure(type(exc).__name__, exc.message, exc.source)
    source = None if exc.filename is None else str(exc.filename)
    return TaskFailure("SavepointError", exc.strerror or str(exc), source)


def raise_failures(results: list[Any]) -> list[Any]:
    """The results, after raising the first TaskFailure among them on the driver."""
    for result in results:
        if isinstance(result, TaskFailure):
            raise result.error()
    return results


def collect(rdd: Any) -> list[Any]:
    """`rdd.collect()`, with an error a task raised anyway (one `guarded` did not catch) as one
    line instead of the Java exception that carries the worker's traceback."""
    try:
        results: list[Any] = rdd.collect()
        return results
    except Exception as exc:
        error = task_error(exc)
        if error is None:
            raise
        raise error from exc


_OS_ERROR = re.compile(r"\[Errno (\d+)\] (.+?)(?:: '(.*)')?$")


def task_error(exc: BaseException) -> Exception | None:
    """The Python exception inside a failed Spark job's error (Py4JJavaError or PythonException
    text: '... Traceback (most recent call last): ... <Type>: <message>'), rebuilt: statectl's
    errors and OSErrors as a StatectlError naming their file, others as a RuntimeError."""
    text = str(exc)
    marker = "Traceback (most recent call last):"
    if marker not in text:
        return None
    frames = text.rsplit(marker, 1)[1].splitlines()[1:]
    line = next((f for f in frames if f.strip() and not f.startswith((" ", "\t"))), None)
    if line is None:
        return None
    qualified, _, message = line.partition(": ")
    kind = qualified.rsplit(".", 1)[-1]
    error_class = getattr(errors, kind, None)
    if isinstance(error_class, type) and issubclass(error_class, errors.StatectlError):
        source, sep, rest = message.partition(": ")
        return error_class(rest, source) if sep else error_class(message)
    os_error = _OS_ERROR.match(message)
    if os_error is not None and kind.endswith("Error"):
        return errors.SavepointError(os_error[2], os_error[3])
    return RuntimeError(f"a Spark task failed: {kind}: {message}")


@reports_failures("the SQL query failed")
def sql_over_table(
    table: pa.Table,
    query: str,
    view: str,
    master: str = DEFAULT_MASTER,
    conf: Mapping[str, str] | None = None,
) -> pa.Table:
    """`query` over `table` registered as the temporary view `view` in the active session (or
    one of `master` and `conf`), collected as Arrow. Spark holds timestamps in microseconds and
    no Arrow extension types: the table is cast to what it takes first (the caller casts back).
    A query that fails is one line, as bad input is."""
    spark = spark_session(master, conf)
    frame = spark.createDataFrame(table.cast(spark_arrow_schema(table.schema)))
    frame.createOrReplaceTempView(view)
    return spark.sql(query).toArrow()


def spark_arrow_type(arrow: pa.DataType) -> pa.DataType:
    """The Arrow type Spark exchanges for `arrow`: microsecond timestamps and times, date32,
    extension types as their storage (Kryo's JSON as a string)."""
    import pyarrow as pa

    if isinstance(arrow, pa.BaseExtensionType):
        return spark_arrow_type(arrow.storage_type)
    if pa.types.is_timestamp(arrow):
        return pa.timestamp("us", arrow.tz)
    if pa.types.is_time(arrow):
        return pa.time64("us")
    if pa.types.is_date64(arrow):
        return pa.date32()
    if pa.types.is_struct(arrow):
        return pa.struct([f.with_type(spark_arrow_type(f.type)) for f in arrow])
    if pa.types.is_map(arrow):
        return pa.map_(spark_arrow_type(arrow.key_type), spark_arrow_type(arrow.item_type))
    if pa.types.is_list(arrow) or pa.types.is_large_list(arrow):
        return pa.list_(spark_arrow_type(arrow.value_type))
    if pa.types.is_large_string(arrow):
        return pa.string()
    if pa.types.is_large_binary(arrow):
        return pa.binary()
    return arrow


def spark_arrow_schema(schema: pa.Schema) -> pa.Schema:
    import pyarrow as pa

    return pa.schema([f.with_type(spark_arrow_type(f.type)) for f in schema])


# --- frames for value edits ----------------------------------------------------------------------


def frame_of_sources(
    spark: SparkSession,
    sources: Sequence[T],
    batches: Callable[[T], Iterable[pa.RecordBatch]],
    schema: pa.Schema,
) -> Any:
    """A DataFrame whose partition n holds `batches(sources[n])`, in Spark's Arrow types: a
    state read by Spark's own tasks, as the `flink-state` data source reads it."""
    from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema

    struct = from_arrow_schema(spark_arrow_schema(schema))
    arrow_schema = to_arrow_schema(struct, timezone="UTC")  # exactly what Spark checks

    def read(ids: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in ids:
            for n in batch.column(0).to_pylist():
                for part in batches(sources[n]):
                    yield part.cast(arrow_schema, safe=False)  # ns → µs: cut, as documented

    count = max(1, len(sources))
    return spark.range(0, len(sources), numPartitions=count).mapInArrow(read, struct)


@reports_failures("the SQL query failed")
def sql_frame(spark: SparkSession, frame: Any, view: str, query: str) -> Any:
    """`query` over `frame` registered as the temporary view `view`: a DataFrame, not run yet.
    A query Spark refuses is one line, as bad input is."""
    frame.createOrReplaceTempView(view)
    return spark.sql(query)


ChunkRows = Callable[[Iterator["pa.RecordBatch"], int], Iterable[tuple[int, int, bytes]]]
CHUNK_SCHEMA = "key_group int, seq long, chunk binary"


def chunk_frame(frame: Any, chunks: ChunkRows) -> Any:
    """`frame`'s rows as chunks of encoded entries, made by its own tasks: `chunks(batches,
    partition)` over each partition's Arrow batches gives (key group, seq, bytes); a task's
    StatectlError becomes one `FAILURE_KEY_GROUP` row, which `sort_frame` raises."""

    def encode(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        context = TaskContext.get()
        partition = context.partitionId() if context is not None else 0
        pending: list[tuple[int, int, bytes]] = []
        try:
            for row in chunks(batches, partition):
                pending.append(row)
                if len(pending) >= 256:
                    yield _chunk_batch(pending)
                    pending = []
        except (errors.StatectlError, OSError) as exc:
            pending = [(FAILURE_KEY_GROUP, 0, pickle.dumps(failure(exc)))]
        if pending:
            yield _chunk_batch(pending)

    return frame.mapInArrow(encode, CHUNK_SCHEMA)


def _chunk_batch(rows: list[tuple[int, int, bytes]]) -> pa.RecordBatch:
    import pyarrow as pa

    key_groups, seqs, chunks = zip(*rows, strict=True)
    return pa.RecordBatch.from_arrays(
        [
            pa.array(key_groups, pa.int32()),
            pa.array(seqs, pa.int64()),
            pa.array(chunks, pa.binary()),
        ],
        names=["key_group", "seq", "chunk"],
    )


def ship_by_value(function: Callable[..., Any]) -> None:
    """Let Spark's tasks call a function of a module they cannot import (a user's file in the
    current directory): its module is pickled with it, by value, rather than by name."""
    from pyspark import cloudpickle

    module = sys.modules.get(getattr(function, "__module__", "") or "")
    path = getattr(module, "__file__", None)
    if module is None or path is None or module.__name__ == "__main__":
        return
    installed = any(
        Path(path).is_relative_to(p) for p in map(Path, sys.path) if "-packages" in str(p)
    )
    if not installed:
        cloudpickle.register_pickle_by_value(module)  # type: ignore[no-untyped-call]
