"""The Spark data sources on a real local Spark (`local[2]`, the suite's one session):
`flink-state` reads every state of real-Flink fixtures equal to what Flink's own serializers
read (the dumper's truth; Spark keeps timestamps in microseconds, so nanoseconds are compared
cut to microseconds), one Spark task per subtask file, `subtask` filters pushed down; a Spark SQL
aggregation equals the same aggregation over the truth; `flink-savepoint-metadata` equals
`inspect`."""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

import statectl
import statectl.spark
from tests.operations.test_values_truth import (
    MAY_STAY_RAW,
    VALUES,
    compare,
    lines_of_typed_tables,
    state_kinds,
    truth_lines,
)

pytestmark = pytest.mark.spark

# What Spark adds to the library's reads of every fixture (tests/api/test_library.py, the same
# reader) is its types: the oldest and a 1.x native savepoint (Kryo 2), a 2.x one (Kryo 5); the
# cluster (tests/api/test_spark_cluster.py) reads 2.3.0's native one.
SPARK_FIXTURES = ["1.15.4-hashmap-canonical", "1.20.3-rocksdb-native", "2.3.0-hashmap-canonical"]
_NANOS = re.compile(r"^(\d{4}-\d\d-\d\dT)?\d\d:\d\d:\d\d\.\d{7,9}Z?$")


@pytest.fixture(scope="module")
def registered(spark: Any) -> Any:
    statectl.spark.register(spark)
    return spark


def read_state(spark: Any, fixture: str, operator: str, state: str) -> Any:
    path = str(VALUES / fixture / "savepoint")
    reader = spark.read.format("flink-state").option("operator", operator).option("state", state)
    return reader.load(path)


def _micros(value: Any) -> Any:
    """ISO times cut to microseconds, as Spark holds them."""
    if isinstance(value, str) and _NANOS.match(value):
        zone = "Z" if value.endswith("Z") else ""
        head, fraction = value.rstrip("Z").split(".")
        fraction = fraction[:6].rstrip("0")
        return f"{head}.{fraction}{zone}" if fraction else f"{head}{zone}"
    if isinstance(value, list):
        return [_micros(v) for v in value]
    if isinstance(value, dict):
        return {k: _micros(v) for k, v in value.items()}
    return value


@pytest.mark.parametrize("fixture", SPARK_FIXTURES)
def test_every_state_reads_as_flink_wrote_it(registered: Any, fixture: str) -> None:
    sp = statectl.open(str(VALUES / fixture / "savepoint"))
    states = [(op, state) for op in sp.operators for state in op.states]

    def read(op: Any, state: Any) -> Any:
        table = read_state(registered, fixture, op.id, state.name).toArrow()
        if "subtask" not in state.schema.names:
            table = table.drop_columns(["subtask"])
        # Spark's Arrow types (µs, date32, strings for Kryo's JSON) back to the state's.
        return table.cast(state.schema)

    # Each read is a small Spark job, its time mostly planning: a few at once.
    with ThreadPoolExecutor(4) as pool:
        read_tables = pool.map(read, *zip(*states, strict=True))
        tables = {
            (op.id, state.name): (table, MAY_STAY_RAW.get(state.name))
            for (op, state), table in zip(states, read_tables, strict=True)
        }
    lines = [_micros(line) for line in lines_of_typed_tables(tables, state_kinds(fixture))]
    compare(fixture, lines, unordered_lists=True, broadcast_once=True, normalize=_micros)


def test_one_task_per_subtask_file_and_subtask_filters_pushed_down(registered: Any) -> None:
    fixture = "2.3.0-rocksdb-native"
    frame = read_state(registered, fixture, "values", "pojo")
    assert frame.rdd.getNumPartitions() == 2  # one RocksDB instance per subtask
    tracker = registered.sparkContext.statusTracker()
    registered.sparkContext.setJobGroup("flink-state-tasks", "count pojo")
    try:
        assert frame.count() == 16
    finally:
        registered.sparkContext.setLocalProperty("spark.jobGroup.id", None)
    stages = [
        tracker.getStageInfo(stage)
        for job in tracker.getJobIdsForGroup("flink-state-tasks")
        for stage in tracker.getJobInfo(job).stageIds
    ]
    assert max(s.numTasks for s in stages if s is not None) == 2
    only_one = frame.where("subtask = 1")
    assert only_one.rdd.getNumPartitions() == 1
    truth = [t for t in truth_lines(fixture) if t["state"] == "pojo" and t["key_group"] >= 64]
    assert only_one.count() == len(truth)


def test_spark_sql_aggregation_equals_the_truth(registered: Any) -> None:
    fixture = "2.3.0-hashmap-canonical"
    read_state(registered, fixture, "values", "aggregating").createOrReplaceTempView("agg")
    got = registered.sql("SELECT sum(value.f0) AS s, sum(value.f1) AS c, count(*) AS n FROM agg")
    rows = [t for t in truth_lines(fixture) if t["state"] == "aggregating"]
    expected = (sum(r["value"]["f0"] for r in rows), sum(r["value"]["f1"] for r in rows), len(rows))
    assert tuple(got.first()) == expected


def test_metadata_table_equals_inspect(registered: Any) -> None:
    fixture = "2.3.0-rocksdb-native"
    path = str(VALUES / fixture / "savepoint")
    table = registered.read.format("flink-savepoint-metadata").load(path).toArrow()
    summary = statectl.open(path).inspect()
    expected = {
        (op.id, s.name, sub.index, sub.keyed_bytes, sub.key_groups)
        for op in summary.operators
        for s in (op.states or (None,))
        for sub in op.subtasks
        for s in [s]
        if s is not None
    }
    got = {
        (r["operator_id"], r["state"], r["subtask"], r["keyed_bytes"],
         (r["key_group_start"], r["key_group_end"]) if r["key_group_start"] is not None else None)
        for r in table.to_pylist()
        if r["state"] is not None
    }  # fmt: skip
    assert got == expected
    types = {(r["operator_uid"], r["state"]): r["type"] for r in table.to_pylist()}
    assert types["values", "ttl-map"] == "MAP<STRING, BIGINT>, TTL"


def test_missing_options_are_one_clear_error(registered: Any) -> None:
    path = str(VALUES / "2.3.0-hashmap-canonical" / "savepoint")
    with pytest.raises(Exception, match="the 'state' option is required"):
        _ = registered.read.format("flink-state").option("operator", "values").load(path).schema
