"""Writing a savepoint from Spark: `df.write.format("flink-state")` on a real local Spark (the
suite's one session). A state read through `flink-state`, edited with Spark SQL (a key deleted,
fields updated, a row inserted) and written back reads from the new savepoint exactly as the
library's table of the source with the same edit; the rows' staging folder is gone afterwards;
an existing destination is refused (left untouched) unless `overwrite`; a column that does not
fit the state fails the write with statectl's one-line message, writing nothing.

The same write on the suite's standalone cluster, its tasks on both workers:
test_spark_cluster.py (one cluster and one driver for the reads and the write).
"""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import pytest

import statectl
import statectl.spark
from tests.conftest import checksums
from tests.operations.test_values_truth import VALUES

pytestmark = pytest.mark.spark

FIXTURES = ["2.3.0-hashmap-canonical", "2.3.0-rocksdb-native"]
NEW_POJO = {
    "codes": [1, 2], "color": "RED", "count": 7, "counts": [("x", 9)], "id": 99,
    "inner": {"label": "in99", "n": 3}, "name": "new", "payload": b"\xca\xfe", "score": 1.5,
    "tags": ["a", "é"],
}  # fmt: skip
NEW_POJO_SQL = """named_struct(
    'codes', array(1, 2), 'color', 'RED', 'count', 7, 'counts', map('x', 9L), 'id', 99L,
    'inner', named_struct('label', 'in99', 'n', 3), 'name', 'new', 'payload', X'CAFE',
    'score', 1.5D, 'tags', array('a', 'é'))"""


@pytest.fixture(scope="module")
def registered(spark: Any) -> Any:
    statectl.spark.register(spark)
    return spark


def source(fixture: str) -> str:
    return str(VALUES / fixture / "savepoint")


def read(spark: Any, src: str, state: str) -> Any:
    reader = spark.read.format("flink-state").option("operator", "values").option("state", state)
    return reader.load(src)


def write(frame: Any, src: str, state: str, dst: Path, mode: str = "append") -> None:
    writer = frame.write.format("flink-state").option("source", src).option("operator", "values")
    writer.option("state", state).mode(mode).save(str(dst))


def entries(url: str, state: str) -> list[dict[str, Any]]:
    """The state's rows as Python values, in key order."""
    rows = statectl.open(url).operator("values").state(state).to_arrow().to_pylist()
    return sorted(rows, key=lambda r: r["key"])


def pojo_edit(spark: Any, frame: Any) -> Any:
    """k03 deleted, k05's `name` and `inner.n` updated (`withField`), k99 inserted (SQL)."""
    from pyspark.sql import functions as F

    updated = F.col("value").withField("name", F.lit("renamed")).withField("inner.n", F.lit(1234))
    value = F.when(F.col("key") == "k05", updated).otherwise(F.col("value"))
    kept = frame.where("key <> 'k03'").withColumn("value", value)
    new = spark.sql(
        f"SELECT 'k99' AS key, NULL AS namespace, {NEW_POJO_SQL} AS value, 1 AS subtask"
    )
    return kept.unionByName(new)


def pojo_expected(src: str) -> list[dict[str, Any]]:
    """The library's table of the source with the same edit."""
    rows = [r for r in entries(src, "pojo") if r["key"] != "k03"]
    for row in rows:
        if row["key"] == "k05":
            row["value"] = {**row["value"], "name": "renamed"}
            row["value"]["inner"] = {**row["value"]["inner"], "n": 1234}
    rows.append({"key": "k99", "namespace": None, "value": NEW_POJO})
    return sorted(rows, key=lambda r: r["key"])


def _names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


# --- tests --------------------------------------------------------------------------------


@pytest.mark.parametrize("fixture", FIXTURES)
def test_edited_pojo_state_writes_back(registered: Any, fixture: str, tmp_path: Path) -> None:
    src, dst = source(fixture), tmp_path / "dst"
    edited = pojo_edit(registered, read(registered, src, "pojo"))
    write(edited, src, "pojo", dst)
    got = entries(str(dst), "pojo")
    assert got == pojo_expected(src)
    assert [r["key"] for r in got if r["key"] in ("k03", "k05", "k99")] == ["k05", "k99"]
    # The other states are carried over unchanged.
    assert entries(str(dst), "ttl-map") == entries(src, "ttl-map")
    assert _names(tmp_path) == ["dst"]  # no rows folder, no staging folder left


@pytest.mark.parametrize("fixture", FIXTURES)
def test_ttl_state_writes_back(registered: Any, fixture: str, tmp_path: Path) -> None:
    """A TTL state: Spark's microsecond `ttl_timestamp` cast back to the state's milliseconds."""
    src, dst = source(fixture), tmp_path / "dst"
    frame = read(registered, src, "ttl-value")
    edited = frame.where("key <> 'k01'").selectExpr(
        "key", "namespace", "upper(value) AS value",
        "ttl_timestamp + INTERVAL 1 DAY AS ttl_timestamp", "subtask",
    )  # fmt: skip
    write(edited, src, "ttl-value", dst)
    day = datetime.timedelta(days=1)
    expected = [
        {**r, "value": r["value"].upper(), "ttl_timestamp": r["ttl_timestamp"] + day}
        for r in entries(src, "ttl-value")
        if r["key"] != "k01"
    ]
    assert entries(str(dst), "ttl-value") == expected
    assert _names(tmp_path) == ["dst"]


def test_existing_destination_refused_unless_overwrite(registered: Any, tmp_path: Path) -> None:
    src, dst = source("2.3.0-hashmap-canonical"), tmp_path / "dst"
    frame = read(registered, src, "pojo")
    write(frame.where("key <> 'k03'"), src, "pojo", dst)
    before = checksums(dst)
    with pytest.raises(Exception, match=r'destination exists; write with mode\("overwrite"\)'):
        write(frame.where("key <> 'k05'"), src, "pojo", dst)
    assert checksums(dst) == before
    assert _names(tmp_path) == ["dst"]
    write(frame.where("key <> 'k05'"), src, "pojo", dst, mode="overwrite")
    keys = [r["key"] for r in entries(str(dst), "pojo")]
    assert "k03" in keys and "k05" not in keys
    assert _names(tmp_path) == ["dst"]


def test_a_mistyped_column_fails_with_statectls_message(registered: Any, tmp_path: Path) -> None:
    src, dst = source("2.3.0-rocksdb-native"), tmp_path / "dst"
    bad = read(registered, src, "pojo").selectExpr("key", "namespace", "value.name AS value")
    with pytest.raises(statectl.StatectlError) as expected:  # what the library says
        statectl.open(src).operator("values").state("pojo").replace(bad.toArrow())
    message = str(expected.value)
    assert "column 'value': expected struct<" in message and "\n" not in message
    with pytest.raises(Exception) as failed:
        write(bad, src, "pojo", dst)
    assert message in str(failed.value)
    assert _names(tmp_path) == []


def test_a_value_spark_cannot_write_back_aborts(registered: Any, tmp_path: Path) -> None:
    """Rows that conform in type but not in value fail in the driver's commit, after the tasks
    staged them: the abort removes the staged rows."""
    src, dst = source("2.3.0-hashmap-canonical"), tmp_path / "dst"
    frame = read(registered, src, "pojo")
    twice = frame.unionByName(frame.where("key = 'k05'"))
    with pytest.raises(Exception, match="key 'k05' appears more than once"):
        write(twice, src, "pojo", dst)
    assert _names(tmp_path) == []


# --- State.replace(DataFrame): Spark's shuffle writes the files --------------------------------


@pytest.mark.parametrize("fixture", FIXTURES)
def test_a_dataframe_replaces_a_state_as_the_writer_does(
    registered: Any, fixture: str, tmp_path: Path
) -> None:
    """`State.replace(frame)` then `Savepoint.write`: the frame's tasks encode, Spark's shuffle
    takes the entries to the task writing each subtask's file. The output holds what the
    data source writer's of the same rows holds, state by state (entries in another order
    within a key group, which Flink does not keep)."""
    src = source(fixture)
    edited = pojo_edit(registered, read(registered, src, "pojo"))
    write(edited, src, "pojo", tmp_path / "by-writer")
    sp = statectl.open(src)
    assert sp.operator("values").state("pojo").replace(edited) == ()
    report = sp.write(str(tmp_path / "by-shuffle"))
    assert dict(report.tasks_run).get("spark", 0) > 0
    assert entries(str(tmp_path / "by-shuffle"), "pojo") == pojo_expected(src)
    assert _names(tmp_path / "by-shuffle") == _names(tmp_path / "by-writer")
    for state in statectl.open(src).operator("values").states:
        written = [
            entries(str(tmp_path / name), state.name) for name in ("by-writer", "by-shuffle")
        ]
        assert repr(written[1]) == repr(written[0])  # repr: NaN equals NaN


def test_a_dataframe_that_does_not_fit_is_refused_before_any_task(
    registered: Any, tmp_path: Path
) -> None:
    src = source("2.3.0-hashmap-canonical")
    bad = read(registered, src, "pojo").selectExpr("key", "namespace", "value.name AS value")
    with pytest.raises(statectl.StatectlError, match=r"column 'value': expected struct<"):
        statectl.open(src).operator("values").state("pojo").replace(bad)


def test_a_dataframe_with_a_key_twice_writes_nothing(registered: Any, tmp_path: Path) -> None:
    src, dst = source("2.3.0-rocksdb-native"), tmp_path / "dst"
    frame = read(registered, src, "pojo")
    sp = statectl.open(src)
    sp.operator("values").state("pojo").replace(frame.unionByName(frame.where("key = 'k05'")))
    with pytest.raises(statectl.StatectlError, match="key 'k05' appears more than once"):
        sp.write(str(dst))
    assert _names(tmp_path) == []
