"""A Flink SQL GroupAggregate's accumulator edited with statectl, proven by real Flink: the job's
next emitted aggregates for the edited key reflect the edit exactly, and nothing else changes.

tests/flink/sql/src/statectl/flinkjobs/SqlJob.java's query `agg` is
`SELECT k, COUNT(DISTINCT v) AS dv, COUNT(*) AS c, SUM(v) AS s FROM src GROUP BY k`
(ONE_PHASE, insert-only input). Its GroupAggregate keeps per key `accState`, a RowData of the
planner's accumulator fields in call order: f0 the COUNT DISTINCT's count, f1 COUNT(*)'s count1,
f2 SUM's sum, f3 the RAW placeholder of the distinct MapView (whose entries live in the
`distinctAcc_0` map state). The SqlJob savepoints (hashmap canonical and RocksDB native, after 300
of 500 records) are read as Arrow, one key's COUNT(*) and SUM accumulators are raised, the table
is written back (`State.replace`, `Savepoint.write`), and Flink 2.3 restores the originals and the
edited copies in one JVM (`harness.restore_sql`) and reads the other 200 records. Every `-U`/`+U`
row it then emits for the edited key must be the unedited restore's row with exactly the edit
added to `c` and `s`; every other row of every query must be the unedited restore's.
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import statectl
from tests.flink import harness
from tests.flink.harness import RestoreRequest

pytestmark = [pytest.mark.flink, pytest.mark.spark]

# The very savepoints of tests/operations/rescale/test_sql_e2e.py (shared cache).
SOURCES = {
    "hashmap": {"backend": "hashmap", "format": "CANONICAL", "parallelism": 2, "max_parallelism": 128},
    "native": {"backend": "rocksdb", "format": "NATIVE", "parallelism": 2, "max_parallelism": 128},
}  # fmt: skip
RESTORE_BACKEND = {"hashmap": "hashmap", "native": "rocksdb"}
EDITED_KEY = "k5"
COUNT_DELTA = 1000  # accState f1: COUNT(*)
SUM_DELTA = 1_000_000  # accState f2: SUM(v)
# SqlJob.record(i) = (i, "k" + i % 23, i * 7 % 11); records 300..499 follow the savepoint.
LATER_RECORDS = sum(1 for i in range(300, 500) if f"k{i % 23}" == EDITED_KEY)

AGG_ROW = re.compile(r"agg\|([+-][IUD])\[(\w+), (\d+), (\d+), (\d+)\]")


def parse_agg(row: str) -> tuple[str, str, int, int, int] | None:
    """(kind, k, dv, c, s) of an `agg` changelog line, None for another query's line."""
    match = AGG_ROW.fullmatch(row)
    if match is None:
        assert not row.startswith("agg|"), row
        return None
    kind, key, dv, c, s = match.groups()
    return kind, key, int(dv), int(c), int(s)


def with_edit(row: str) -> str:
    """The line the edited job must emit where the unedited one emitted `row`."""
    parsed = parse_agg(row)
    if parsed is None or parsed[1] != EDITED_KEY:
        return row
    kind, key, dv, c, s = parsed
    return f"agg|{kind}[{key}, {dv}, {c + COUNT_DELTA}, {s + SUM_DELTA}]"


def last_aggregates(rows: list[str]) -> dict[str, tuple[int, int, int]]:
    """Per key, the (dv, c, s) of its latest aggregate (COUNT(*) only grows: the largest c)."""
    latest: dict[str, tuple[int, int, int]] = {}
    for row in rows:
        parsed = parse_agg(row)
        if parsed is not None and parsed[0] in ("+I", "+U"):
            _, key, dv, c, s = parsed
            if key not in latest or c > latest[key][1]:
                latest[key] = (dv, c, s)
    return latest


def group_aggregate(sp: statectl.Savepoint) -> statectl.Operator:
    (operator,) = [op for op in sp.operators if (op.name or "").startswith("GroupAggregate[")]
    return operator


def edit_accumulator(source: Path, out: Path) -> dict[str, Any]:
    """Raise EDITED_KEY's COUNT(*) and SUM accumulators, write the savepoint to `out`; the
    accumulators as read before the edit (key -> value struct) and the state's type."""
    sp = statectl.open(str(source))
    state = group_aggregate(sp).state("accState")
    table = state.to_arrow()
    rows = table.to_pylist()
    before = {row["key"]["f0"]: dict(row["value"]) for row in rows}
    for row in rows:
        if row["key"]["f0"] == EDITED_KEY:
            row["value"]["f1"] += COUNT_DELTA
            row["value"]["f2"] += SUM_DELTA
    state.replace(pa.Table.from_pylist(rows, schema=table.schema))
    sp.write(str(out))
    return {"accumulators": before, "type": state.type, "kind": state.kind}


# The same edit as Spark SQL over the state's table (`statectl transform --sql`).
SQL_EDIT = f"""
    SELECT key, namespace,
           IF(key.f0 = '{EDITED_KEY}',
              named_struct('f0', value.f0, 'f1', value.f1 + {COUNT_DELTA},
                           'f2', value.f2 + {SUM_DELTA}, 'f3', value.f3,
                           '__row_kind', value.__row_kind),
              value) AS value
    FROM state"""


def edit_by_sql(source: Path, out: Path) -> None:
    operator = group_aggregate(statectl.open(str(source))).id
    statectl.transform(str(source), str(out), operator, "accState", sql=SQL_EDIT)


@pytest.fixture(scope="module")
def outcome(tmp_path_factory: pytest.TempPathFactory, spark: Any) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("sql-edit")
    manifests = harness.sql_savepoints(SOURCES)
    savepoints = {name: path.parent / "savepoint" for name, path in manifests.items()}
    edits, requests = {}, []
    for name, source in savepoints.items():
        edits[name] = edit_accumulator(source, root / f"{name}-edited")
        edit_by_sql(source, root / f"{name}-sql")
        backend = RESTORE_BACKEND[name]
        requests += [
            RestoreRequest(source, 2, backend=backend),
            RestoreRequest(root / f"{name}-edited", 2, backend=backend),
            RestoreRequest(root / f"{name}-sql", 2, backend=backend),
        ]
    started = time.monotonic()
    results = harness.restore_sql(requests)
    seconds = time.monotonic() - started
    restored = {}
    for i, name in enumerate(savepoints):
        trio = results[3 * i : 3 * i + 3]
        restored[name, "original"], restored[name, "edited"], restored[name, "sql"] = trio
    return {
        "manifests": {name: json.loads(path.read_text()) for name, path in manifests.items()},
        "edited": {name: root / f"{name}-edited" for name in savepoints},
        "edits": edits,
        "restored": restored,
        "seconds": seconds,
    }


def _rows(result: dict[str, Any]) -> list[str]:
    assert result["ok"], result["error"]
    rows: list[str] = result["rows"]
    return rows


@pytest.mark.parametrize("source", list(SOURCES))
def test_accumulator_fields_are_the_last_emitted_aggregate(
    outcome: dict[str, Any], source: str
) -> None:
    """The layout the edit relies on: per key, accState (f0, f1, f2) is the (dv, c, s) of the
    last aggregate emitted before the savepoint; f3 the distinct MapView's placeholder."""
    edit = outcome["edits"][source]
    assert (edit["kind"], edit["type"]) == (
        "VALUE",
        "ROW<f0 BIGINT, f1 BIGINT, f2 BIGINT, f3 RAW('org.apache.flink.table.api.dataview.MapView')>",
    )
    accumulators = edit["accumulators"]
    latest = last_aggregates(outcome["manifests"][source]["before"])
    assert len(accumulators) == len(latest) == 23
    assert {k: (v["f0"], v["f1"], v["f2"]) for k, v in accumulators.items()} == latest


@pytest.mark.parametrize("source", list(SOURCES))
def test_edited_table_reads_back_from_the_written_savepoint(
    outcome: dict[str, Any], source: str
) -> None:
    sp = statectl.open(str(outcome["edited"][source]))
    table = group_aggregate(sp).state("accState").to_arrow()
    got = {row["key"]["f0"]: row["value"] for row in table.to_pylist()}
    want = {k: dict(v) for k, v in outcome["edits"][source]["accumulators"].items()}
    want[EDITED_KEY]["f1"] += COUNT_DELTA
    want[EDITED_KEY]["f2"] += SUM_DELTA
    assert got == want


@pytest.mark.parametrize("source", list(SOURCES))
def test_unedited_restore_emits_the_rest_of_the_uninterrupted_run(
    outcome: dict[str, Any], source: str
) -> None:
    rows = _rows(outcome["restored"][source, "original"])
    manifest = outcome["manifests"][source]
    assert Counter(manifest["before"]) + Counter(rows) == Counter(manifest["full"])
    # Both sources read the same records: one original for both.
    assert rows == _rows(outcome["restored"]["hashmap", "original"])


@pytest.mark.parametrize("source", list(SOURCES))
def test_edited_accumulator_shows_in_every_later_aggregate_of_its_key(
    outcome: dict[str, Any], source: str
) -> None:
    original = _rows(outcome["restored"][source, "original"])
    edited = _rows(outcome["restored"][source, "edited"])
    expected = sorted(with_edit(row) for row in original)
    # Each later record of the key retracts the previous aggregate and emits the next one.
    changed = [row for row in original if with_edit(row) != row]
    assert len(changed) == 2 * LATER_RECORDS == 18
    assert Counter(p[0] for p in map(parse_agg, changed) if p) == {"-U": 9, "+U": 9}
    # The first retraction is of the edited accumulator itself, as written by statectl.
    accumulator = outcome["edits"][source]["accumulators"][EDITED_KEY]
    first = f"agg|-U[{EDITED_KEY}, {accumulator['f0']}, {accumulator['f1'] + COUNT_DELTA}, "
    assert f"{first}{accumulator['f2'] + SUM_DELTA}]" in edited
    # Every other key and every other query: exactly the unedited restore's rows.
    missing, extra = Counter(expected) - Counter(edited), Counter(edited) - Counter(expected)
    assert not missing and not extra, (sorted(missing)[:4], sorted(extra)[:4])
    assert edited == expected


@pytest.mark.parametrize("source", list(SOURCES))
def test_the_same_edit_as_spark_sql_emits_the_same_rows(
    outcome: dict[str, Any], source: str
) -> None:
    edited = _rows(outcome["restored"][source, "edited"])
    assert _rows(outcome["restored"][source, "sql"]) == edited
