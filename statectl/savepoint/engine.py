"""Where a data-parallel pass over a savepoint's files runs: in this process, or as a Spark job.

Both engines run the same module-level functions over the same picklable tasks, so a small
savepoint never pays for starting Spark and a large one spreads over executors with the same
results. pyspark is imported only when a Spark engine is used.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    from statectl.savepoint.storage import Location

T = TypeVar("T")
R = TypeVar("R")
K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class Engine(Protocol):
    name: str

    def flat_map(self, tasks: Sequence[T], fn: Callable[[T], list[R]]) -> list[R]:
        """`fn` over every task, results concatenated in task order."""
        ...

    def group_reduce(
        self,
        tasks: Sequence[T],
        emit: Callable[[T], list[tuple[K, V]]],
        reduce: Callable[[K, list[V]], R],
    ) -> list[R]:
        """`emit` (key, value) pairs from every task, then `reduce` each key's values."""
        ...


class LocalEngine:
    name = "local"

    def flat_map(self, tasks: Sequence[T], fn: Callable[[T], list[R]]) -> list[R]:
        return [result for task in tasks for result in fn(task)]

    def group_reduce(
        self,
        tasks: Sequence[T],
        emit: Callable[[T], list[tuple[K, V]]],
        reduce: Callable[[K, list[V]], R],
    ) -> list[R]:
        groups: dict[K, list[V]] = {}
        for task in tasks:
            for key, value in emit(task):
                groups.setdefault(key, []).append(value)
        return [reduce(key, values) for key, values in groups.items()]


@dataclass
class SparkEngine:
    """The shared SparkSession (`spark_job.spark_session`): `--master`, `--conf` as for rescale."""

    master: str = "local[*]"
    conf: Mapping[str, str] = field(default_factory=dict)
    name: str = "spark"
    _session: Any = None

    @property
    def session(self) -> Any:
        if self._session is None:
            from statectl.rescale import spark_job  # lazy: pyspark is heavy

            self._session = spark_job.spark_session(self.master, dict(self.conf))
        return self._session

    def flat_map(self, tasks: Sequence[T], fn: Callable[[T], list[R]]) -> list[R]:
        if not tasks:
            return []
        from statectl.rescale import spark_job

        run = spark_job.guarded(fn)

        def results(task: T) -> list[Any]:
            result = run(task)
            return [result] if isinstance(result, spark_job.TaskFailure) else result

        context = self.session.sparkContext
        rdd = context.parallelize(list(tasks), numSlices=len(tasks)).flatMap(results)
        return spark_job.raise_failures(spark_job.collect(rdd))

    def group_reduce(
        self,
        tasks: Sequence[T],
        emit: Callable[[T], list[tuple[K, V]]],
        reduce: Callable[[K, list[V]], R],
    ) -> list[R]:
        if not tasks:
            return []
        from statectl.rescale import spark_job

        # Bad input inside a task comes back as a TaskFailure value, raised on the driver as
        # one line (a raised error would arrive as a Java exception with the worker's traceback).
        guarded_emit = spark_job.guarded(emit)
        guarded_reduce = spark_job.guarded(lambda kv: reduce(kv[0], list(kv[1])))

        def pairs(task: T) -> list[Any]:
            emitted = guarded_emit(task)
            if isinstance(emitted, spark_job.TaskFailure):
                return [(_FAILED, emitted)]
            return emitted

        def reduced(group: tuple[Any, Any]) -> Any:
            return next(iter(group[1])) if group[0] == _FAILED else guarded_reduce(group)

        context = self.session.sparkContext
        rdd = context.parallelize(list(tasks), numSlices=len(tasks)).flatMap(pairs)
        return spark_job.raise_failures(spark_job.collect(rdd.groupByKey().map(reduced)))


_FAILED = "\0statectl: task failed"  # the key of a failed task's TaskFailure


def choose_engine(
    use_spark: bool, master: str | None, conf: Mapping[str, str], *locations: Location
) -> Engine:
    """Spark when asked, except over storage only this process sees (`memory://`), whose files
    Spark's workers could not read: that work runs here."""
    if not use_spark or any(location.is_process_local for location in locations):
        return LocalEngine()
    return SparkEngine(master or "local[*]", conf)
