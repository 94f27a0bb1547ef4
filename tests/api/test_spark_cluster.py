"""The Spark data sources on a real Spark standalone cluster (`tests/spark_cluster.py`): every
state of real-Flink fixtures reads through `flink-state` equal to the dumper's truth, its
partitions read on both workers by executors whose Python cannot import an installed statectl:
`statectl.spark.register` ships the package to them. Then `df.write.format("flink-state")`
writes an edited state back, its tasks staging rows on both workers (the write's local tests:
test_spark_write.py).

The test process holds the suite's local SparkSession, so the cluster's driver is a child
Python process (`main` below): it reads every state and writes each table as an Arrow IPC
file; the comparison runs here, as `test_spark_datasource.py` makes it.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import statectl
from tests.api import test_spark_write as spark_write
from tests.api.test_spark_datasource import _micros, read_state
from tests.conftest import REPO
from tests.operations.test_values_truth import (
    MAY_STAY_RAW,
    VALUES,
    compare,
    lines_of_typed_tables,
    state_kinds,
)
from tests.spark_cluster import (
    WORKERS,
    Cluster,
    executor_python,
    run_in_own_group,
    spark_env,
    standalone_cluster,
    statectl_importable,
)

pytestmark = [pytest.mark.cluster, pytest.mark.spark]

APP_NAME = "statectl-data-source"
# One savepoint on the cluster: what it adds to test_spark_datasource.py (which reads every
# version's in local mode) is the package shipped to executors and partitions on both workers.
CLUSTER_FIXTURES = ["2.3.0-rocksdb-native"]
WRITTEN = CLUSTER_FIXTURES[0]  # its `pojo` state edited and written back by the write's tasks
DRIVER = f"import sys; sys.path.insert(0, {str(REPO)!r}); from {__name__} import main; main()"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with standalone_cluster(tmp_path_factory.mktemp("spark-cluster")) as running:
        yield running


@pytest.fixture(scope="module")
def outcome(cluster: Cluster) -> dict[str, Any]:
    """The child driver's report (states read, tasks per executor), and what it left."""
    root = cluster.root
    python = executor_python(root)
    out, written = root / "tables", root / "written"
    out.mkdir()
    written.mkdir()
    env = {**spark_env(root), "PYSPARK_PYTHON": str(python)}
    # Run outside the checkout (its working directory would put statectl on Python's path).
    argv = [sys.executable, "-c", DRIVER, cluster.master_url, str(out), str(written / "dst")]
    run = run_in_own_group(argv, env, timeout=900, cwd=root)
    assert run.returncode == 0, f"exit {run.returncode}\n{run.stdout}\n{run.stderr[-20000:]}"
    report: dict[str, Any] = json.loads(run.stdout.splitlines()[-1])
    return {
        **report,
        "out": out,
        "written": written,
        "apps": cluster.state()["completedapps"],
        "executors_on": cluster.executors_on(report["app_id"]),
        "statectl_importable": statectl_importable(python, cwd=root),
    }


# --- tests --------------------------------------------------------------------------------


def test_executors_cannot_import_an_installed_statectl(outcome: dict[str, Any]) -> None:
    """Precondition: the reads succeed only through the package `register` ships."""
    assert outcome["statectl_importable"] is False


@pytest.mark.parametrize("fixture", CLUSTER_FIXTURES)
def test_every_state_reads_as_flink_wrote_it(outcome: dict[str, Any], fixture: str) -> None:
    sp = statectl.open(str(VALUES / fixture / "savepoint"))
    read = {(s["operator"], s["state"]): s["file"] for s in outcome["states"] if s["fixture"] == fixture}  # fmt: skip
    tables = {}
    for op in sp.operators:
        for state in op.states:
            with pa.memory_map(str(outcome["out"] / read.pop((op.id, state.name)))) as source:
                table = pa.ipc.open_file(source).read_all()
            if "subtask" not in state.schema.names:
                table = table.drop_columns(["subtask"])
            # Spark's Arrow types (µs, date32, strings for Kryo's JSON) back to the state's.
            tables[op.id, state.name] = (table.cast(state.schema), MAY_STAY_RAW.get(state.name))
    assert read == {}, "states the driver read that the savepoint does not hold"
    lines = [_micros(line) for line in lines_of_typed_tables(tables, state_kinds(fixture))]
    compare(fixture, lines, unordered_lists=True, broadcast_once=True, normalize=_micros)


def test_partitions_ran_on_both_workers(outcome: dict[str, Any]) -> None:
    """Spark's status API counts each executor's tasks; each worker ran one executor."""
    assert [(a["name"], a["state"]) for a in outcome["apps"]] == [(APP_NAME, "FINISHED")]
    tasks_by_worker: dict[str, int] = {}
    for executor, tasks in outcome["tasks"].items():
        worker = outcome["executors_on"][executor]
        tasks_by_worker[worker] = tasks_by_worker.get(worker, 0) + tasks
    print(f"tasks per worker: {tasks_by_worker}", file=sys.stderr)
    assert sorted(tasks_by_worker) == [f"worker{i}" for i in range(WORKERS)]
    assert all(tasks > 0 for tasks in tasks_by_worker.values()), tasks_by_worker
    assert sum(tasks_by_worker.values()) == sum(s["partitions"] for s in outcome["states"])


def test_the_spark_writer_s_tasks_ran_on_both_workers(outcome: dict[str, Any]) -> None:
    write = outcome["write"]
    assert write["partitions"] == 2
    workers = {outcome["executors_on"][e] for e, tasks in write["tasks"].items() if tasks > 0}
    assert sorted(workers) == [f"worker{i}" for i in range(WORKERS)], write["tasks"]
    src = spark_write.source(WRITTEN)
    dst = str(outcome["written"] / "dst")
    assert spark_write.entries(dst, "pojo") == spark_write.pojo_expected(src)
    assert sorted(p.name for p in outcome["written"].iterdir()) == ["dst"]  # no staging left


# --- the child: the cluster's driver ------------------------------------------------------------


def _session(master: str) -> Any:
    from pyspark.sql import SparkSession

    return (
        SparkSession.builder.master(master)
        .appName(APP_NAME)
        .config("spark.executor.memory", "512m")
        # Both executors registered before the first task: else early jobs run on one.
        .config("spark.scheduler.minRegisteredResourcesRatio", "1.0")
        .getOrCreate()
    )


def _read_all(spark: Any, out: Path) -> list[dict[str, Any]]:
    """Every state of CLUSTER_FIXTURES through `flink-state`, each table written to `out`; a
    few at once (each is a small job, its time mostly planning)."""
    from concurrent.futures import ThreadPoolExecutor

    todo = [
        (fixture, op.id, state.name)
        for fixture in CLUSTER_FIXTURES
        for op in statectl.open(str(VALUES / fixture / "savepoint")).operators
        for state in op.states
    ]

    def read(number: int, fixture: str, operator: str, state: str) -> dict[str, Any]:
        frame = read_state(spark, fixture, operator, state)
        table = frame.toArrow()
        file = f"{number}.arrow"
        with pa.ipc.new_file(str(out / file), table.schema) as writer:
            writer.write_table(table)
        return {
            "fixture": fixture, "operator": operator, "state": state, "file": file,
            "partitions": frame.rdd.getNumPartitions(),
        }  # fmt: skip

    with ThreadPoolExecutor(4) as pool:
        return list(pool.map(read, range(len(todo)), *zip(*todo, strict=True)))


def _tasks_by_executor(spark: Any) -> dict[str, int]:
    """Executor id → tasks it ran, from Spark's REST status API (the driver excluded)."""
    import urllib.request

    context = spark.sparkContext
    url = f"{context.uiWebUrl}/api/v1/applications/{context.applicationId}/executors"
    with urllib.request.urlopen(url, timeout=60) as response:  # a loaded machine
        executors = json.load(response)
    return {e["id"]: e["totalTasks"] for e in executors if e["id"] != "driver"}


def _write_back(spark: Any, dst: Path) -> dict[str, Any]:
    """The `pojo` state of WRITTEN edited and written back in two partitions: their count, and
    the tasks each executor ran for the write (its count after, less its count before)."""
    before = _tasks_by_executor(spark)
    src = spark_write.source(WRITTEN)
    edited = spark_write.pojo_edit(spark, spark_write.read(spark, src, "pojo")).repartition(2)
    spark_write.write(edited, src, "pojo", dst)
    return {
        "partitions": edited.rdd.getNumPartitions(),
        "tasks": _tasks_since(spark, before),
    }


def _tasks_since(spark: Any, before: dict[str, int], wait: float = 30.0) -> dict[str, int]:
    """Tasks per executor since `before`. The status API counts a task once its listener
    event is handled, which may trail the job's end: wait (a while) for every executor to
    show some."""
    import time

    deadline = time.monotonic() + wait
    while True:
        now = _tasks_by_executor(spark)
        since = {e: n - before.get(e, 0) for e, n in now.items()}
        if all(n > 0 for n in since.values()) or time.monotonic() > deadline:
            return since
        time.sleep(0.5)


def main() -> None:
    """The driver: `MASTER OUT_DIR DST`; prints its report as JSON on its last line."""
    import statectl.spark

    master, out, dst = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
    spark = _session(master)
    try:
        statectl.spark.register(spark)
        statectl.spark.register(spark)  # again: the package is shipped once
        states = _read_all(spark, out)
        tasks = _tasks_by_executor(spark)
        report = {
            "app_id": spark.sparkContext.applicationId,
            "states": states,
            "tasks": tasks,
            "write": _write_back(spark, dst),
        }
    finally:
        spark.stop()
    print(json.dumps(report))
