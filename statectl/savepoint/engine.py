"""Where a data-parallel pass over a savepoint's files runs: in this process, or as a Spark job.

Both engines run the same module-level functions over the same picklable tasks, so a small
savepoint never pays for starting Spark and a large one spreads over executors with the same
results. pyspark is imported only when a Spark engine is used.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

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
        context = self.session.sparkContext
        return context.parallelize(list(tasks), numSlices=len(tasks)).flatMap(fn).collect()

    def group_reduce(
        self,
        tasks: Sequence[T],
        emit: Callable[[T], list[tuple[K, V]]],
        reduce: Callable[[K, list[V]], R],
    ) -> list[R]:
        if not tasks:
            return []
        context = self.session.sparkContext
        rdd = context.parallelize(list(tasks), numSlices=len(tasks)).flatMap(emit)
        return rdd.groupByKey().map(lambda kv: reduce(kv[0], list(kv[1]))).collect()
