"""Write-back, proven by real Flink: statectl edits the values job's savepoints (tables replaced
through the library, states renamed or dropped, TTL turned on and off with `migrate`), Flink
restores each output into the values job (`harness.restore_values`: with the matching
descriptors, without allowing non-restored state), takes a new CANONICAL savepoint, and
Flink's own serializers dump it. The dump must equal the fixture's truth with exactly the edit
applied, entry by entry; every key must be reachable where the job looks for it (its key group
by Flink's own assignment), so inserted keys landed in the right subtask. One JVM per version.

Expected values are built in the dumper's JSON (the truth), independently of statectl's
decoding; key groups are compared through reachability (`unreachable`, `misplaced`), not
recomputed here.
"""

from __future__ import annotations

import copy
import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import statectl
from tests.flink import harness

pytestmark = [pytest.mark.flink, pytest.mark.spark]

VALUES = harness.VALUES_FIXTURES
KINDS = ("hashmap-canonical", "rocksdb-native")
NEW_KEYS = [f"new-{i}" for i in range(8)]  # enough that both subtasks get some
TTL_OFF = ["ttl-value", "ttl-list", "ttl-map"]
TTL_ON_LISTS = ["tuple2-list", "pojo-list"]  # each element gains its time (a batch at a time)


def fixture(version: str, kind: str) -> Path:
    return VALUES / f"{version}-{kind}"


def truth(version: str, kind: str) -> list[dict[str, Any]]:
    return harness.load_truth(fixture(version, kind))


def comparable(lines: list[dict[str, Any]], union_subtask: int | None = None) -> Counter[str]:
    """Entries as canonical JSON without key group and uid (placement is checked by
    reachability). UNION elements without their subtask: Flink hands every subtask the whole
    union on restore, so the restored side's `union_subtask` holds what all of the input's
    subtasks held together."""
    out: Counter[str] = Counter()
    for line in lines:
        if line.get("kind") == "UNION":
            if union_subtask is not None and line["subtask"] != union_subtask:
                continue
            line = {k: v for k, v in line.items() if k != "subtask"}
        kept = {k: v for k, v in line.items() if k not in ("key_group", "uid")}
        out[json.dumps(kept, sort_keys=True, ensure_ascii=False)] += 1
    return out


def assert_equal(restored: list[dict[str, Any]], expected: list[dict[str, Any]]) -> None:
    got, want = comparable(restored, union_subtask=0), comparable(expected)
    assert comparable(restored, union_subtask=1) == got, "restored subtasks hold other unions"
    missing, extra = want - got, got - want
    assert not missing and not extra, (
        f"missing {sum(missing.values())}: {list(missing)[:3]}\n"
        f"extra {sum(extra.values())}: {list(extra)[:3]}"
    )


# --- the edits, in statectl (tables) and in the truth (JSON) ----------------------------------


def edit_tables(sp: statectl.Savepoint) -> None:
    """pojo: k03 deleted, k05 updated, NEW_KEYS inserted; tuple2-list: k10 deleted, k05 one
    element more; pojo-map: (k10, m0) deleted, (k12, m0) updated, (k05, m-new) inserted."""
    values = sp.operator("values")
    pojo = values.state("pojo")
    table = pojo.to_arrow()
    rows = [r for r in table.to_pylist() if r["key"] != "k03"]
    for row in rows:
        if row["key"] == "k05":
            row["value"] = {**row["value"], "name": "edited", "count": 42}
            template = row
    rows += [{**copy.deepcopy(template), "key": key} for key in NEW_KEYS]
    pojo.replace(pa.Table.from_pylist(rows, schema=table.schema))

    tuples = values.state("tuple2-list")
    table = tuples.to_arrow()
    rows = [r for r in table.to_pylist() if r["key"] != "k10"]
    for row in rows:
        if row["key"] == "k05":
            row["value"] = [*row["value"], {"f0": "added", "f1": 7}]
    tuples.replace(pa.Table.from_pylist(rows, schema=table.schema))

    pojo_map = values.state("pojo-map")
    table = pojo_map.to_arrow()
    rows = [r for r in table.to_pylist() if (r["key"], r["user_key"]) != ("k10", "m0")]
    for row in rows:
        if (row["key"], row["user_key"]) == ("k12", "m0"):
            row["value"] = {**row["value"], "count": 99}
            template = row
    rows.append({**copy.deepcopy(template), "key": "k05", "user_key": "m-new"})
    pojo_map.replace(pa.Table.from_pylist(rows, schema=table.schema))


def edit_truth(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The same edits on the dumper's lines."""
    out = []
    for line in lines:
        state, key, user_key = line["state"], line.get("key"), line.get("user_key")
        if (state, key) in {("pojo", "k03"), ("tuple2-list", "k10")}:
            continue
        if (state, key, user_key) == ("pojo-map", "k10", "m0"):
            continue
        line = copy.deepcopy(line)
        if (state, key) == ("pojo", "k05"):
            line["value"].update(name="edited", count=42)
            out += [{**copy.deepcopy(line), "key": k} for k in NEW_KEYS]
        if (state, key) == ("tuple2-list", "k05"):
            line["value"].append({"f0": "added", "f1": 7})
        if (state, key, user_key) == ("pojo-map", "k12", "m0"):
            line["value"]["count"] = 99
            out.append({**copy.deepcopy(line), "key": "k05", "user_key": "m-new"})
        out.append(line)
    return out


UNION = [(0, 7), (1, 8), (1, 9)]  # (subtask, element): the union state's new elements


def edit_operator_tables(sp: statectl.Savepoint) -> None:
    """op-list: subtask 0's element of the smallest id moves to subtask 1; op-union: new
    elements; op-broadcast: `b0` deleted, `b1`'s count set to 77."""
    op = sp.operator("opstate")
    listed = op.state("op-list")
    table = listed.to_arrow()
    rows = table.to_pylist()
    moved = min((r for r in rows if r["subtask"] == 0), key=lambda r: r["value"]["id"])
    moved["subtask"] = 1
    listed.replace(pa.Table.from_pylist(rows, schema=table.schema))
    union = op.state("op-union")
    rows = [{"subtask": subtask, "value": value} for subtask, value in UNION]
    union.replace(pa.Table.from_pylist(rows, schema=union.schema))
    broadcast = op.state("op-broadcast")
    table = broadcast.to_arrow()
    rows = [r for r in table.to_pylist() if r["key"] != "b0"]
    for row in rows:
        if row["key"] == "b1":
            row["value"] = {**row["value"], "count": 77}
    broadcast.replace(pa.Table.from_pylist(rows, schema=table.schema))


def operator_truth(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The same edits on the dumper's lines."""
    listed = [line for line in lines if line["state"] == "op-list" and line["subtask"] == 0]
    moved = min(listed, key=lambda line: line["value"]["id"])
    out = []
    for line in lines:
        state = line["state"]
        if state == "op-union" or (state == "op-broadcast" and line["key"] == "b0"):
            continue
        line = copy.deepcopy(line)
        if line == moved:
            line["subtask"] = 1
        if state == "op-broadcast" and line["key"] == "b1":
            line["value"]["count"] = 77
        out.append(line)
    template = next(line for line in lines if line["state"] == "op-union")
    out += [{**template, "subtask": subtask, "value": value} for subtask, value in UNION]
    return out


def ttl_truth(lines: list[dict[str, Any]], last_access: int) -> list[dict[str, Any]]:
    out = []
    for line in lines:
        line = dict(line)
        if line["state"] == "string":
            line["ttl_timestamp"] = last_access
        elif line["state"] in TTL_ON_LISTS:  # a time per element
            line["ttl_timestamp"] = [last_access] * len(line["value"])
        elif line["state"] in TTL_OFF:
            line.pop("ttl_timestamp", None)
        out.append(line)
    return out


def renamed_truth(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for line in lines:
        if line["state"] == "enum":
            continue
        if line["state"] == "string":
            line = {**line, "state": "string-renamed"}
        out.append(line)
    return out


# --- statectl writes, Flink restores --------------------------------------------------------


def _pojo(count: str, name: str) -> str:
    """The POJO struct of `value` with `count` and `name` replaced (Spark SQL)."""
    fields = [
        "codes",
        "color",
        "count",
        "counts",
        "id",
        "inner",
        "name",
        "payload",
        "score",
        "tags",
    ]
    given = {"count": count, "name": name}
    return "named_struct(" + ", ".join(f"'{f}', {given.get(f, 'value.' + f)}" for f in fields) + ")"


# The edits of `edit_tables`, as Spark SQL over each state (`statectl.transform(sql=…)`).
SQL_EDITS = {
    "pojo": f"""
        SELECT key, namespace, IF(key = 'k05', {_pojo("42", "'edited'")}, value) AS value
        FROM state WHERE key <> 'k03'
        UNION ALL
        SELECT concat('new-', n), namespace, {_pojo("42", "'edited'")}
        FROM state LATERAL VIEW explode(sequence(0, {len(NEW_KEYS) - 1})) t AS n
        WHERE key = 'k05'""",
    "tuple2-list": """
        SELECT key, namespace,
               IF(key = 'k05', concat(value, array(named_struct('f0', 'added', 'f1', 7L))), value)
                 AS value
        FROM state WHERE key <> 'k10'""",
    "pojo-map": f"""
        SELECT key, namespace, user_key,
               IF(key = 'k12' AND user_key = 'm0', {_pojo("99", "value.name")}, value) AS value
        FROM state WHERE NOT (key = 'k10' AND user_key = 'm0')
        UNION ALL
        SELECT 'k05', namespace, 'm-new', {_pojo("99", "value.name")}
        FROM state WHERE key = 'k12' AND user_key = 'm0'""",
}


def transform_by_sql(source: Path, out: Path) -> None:
    """Each state of SQL_EDITS transformed in turn, through intermediate savepoints."""
    current = source
    for n, (state, query) in enumerate(SQL_EDITS.items()):
        target = out if n == len(SQL_EDITS) - 1 else out.with_name(f"{out.name}-step{n}")
        statectl.transform(str(current), str(target), "values", state, sql=query)
        current = target


CASES = ("unchanged-ttl-on", "tables", "sql", "operator-tables", "ttl", "rename-drop")


def write_case(case: str, source: Path, out: Path, last_access: int) -> dict[str, Any]:
    """Write the case's output (when it has one) and return its restore request."""
    if case == "unchanged-ttl-on":  # the input as it is, under a descriptor with TTL
        return {"savepoint": str(source), "ttl_on": ["string"]}
    if case == "sql":
        transform_by_sql(source, out)
        return {"savepoint": str(out)}
    if case in ("tables", "operator-tables"):
        sp = statectl.open(str(source))
        (edit_tables if case == "tables" else edit_operator_tables)(sp)
        sp.write(str(out))
        return {"savepoint": str(out)}
    if case == "ttl":
        plan = statectl.plan_migration(
            str(source),
            ttl=[("values", name, 86_400_000) for name in ("string", *TTL_ON_LISTS)],
            no_ttl=[("values", name) for name in TTL_OFF],
        )
        # The last-access time is the migration's; fixed here so the expectation is exact.
        plan = _with_last_access(plan, last_access)
        statectl.write_migration(plan, str(out))
        return {"savepoint": str(out), "ttl_on": ["string", *TTL_ON_LISTS], "ttl_off": TTL_OFF}
    plan = statectl.plan_migration(
        str(source),
        drop_states=[("values", "enum")],
        rename_states=[("values", "string", "string-renamed")],
    )
    statectl.write_migration(plan, str(out))
    return {"savepoint": str(out), "rename": {"string": "string-renamed"}, "drop": ["enum"]}


def _with_last_access(plan: Any, last_access: int) -> Any:
    from statectl.operations.migrate import plan_migration
    from statectl.operations.state_edits import StateEdit

    edits = [
        StateEdit(e.operator, e.state, e.action, e.new_name, e.ttl_ms, last_access)
        for e in plan.states.edits
    ]
    return plan_migration(plan.source, (), (), edits)


VERSIONS = ("1.20.3", "2.3.0")
# Flink 1.x serializes a POJO's List and Map fields with Kryo, which statectl writes back from
# bytes only (not from edited JSON): the table edits run on 2.x's POJOs.
TABLE_VERSIONS = ("2.3.0",)


@pytest.fixture(scope="module")
def restored(
    tmp_path_factory: pytest.TempPathFactory, spark: Any
) -> dict[tuple[str, str, str], Any]:
    root = tmp_path_factory.mktemp("state-edits")
    last_access = time.time_ns() // 1_000_000
    results = {}
    for version in VERSIONS:
        requests, names = [], []
        for kind in KINDS:
            for case in CASES:
                if case in ("tables", "sql", "operator-tables") and version not in TABLE_VERSIONS:
                    continue
                out = root / f"{version}-{kind}-{case}"
                request = write_case(case, fixture(version, kind) / "savepoint", out, last_access)
                request["out"] = str(root / f"restored-{version}-{kind}-{case}")
                requests.append(request)
                names.append((version, kind, case))
        results.update(zip(names, harness.restore_values(version, requests), strict=True))
    return {**results, ("last_access", "", ""): last_access}


def _ok(result: dict[str, Any]) -> list[dict[str, Any]]:
    assert result["ok"], result["error"]
    assert result["unreachable"] == [], result["unreachable"][:5]
    assert result["misplaced"] == [], result["misplaced"][:5]
    assert result["checked"] > 0
    return result["lines"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("version", TABLE_VERSIONS)
def test_edited_tables_restore_with_exactly_the_edit(
    restored: dict[Any, Any], version: str, kind: str
) -> None:
    lines = _ok(restored[version, kind, "tables"])
    assert_equal(lines, edit_truth(truth(version, kind)))


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("version", TABLE_VERSIONS)
def test_sql_transform_restores_with_exactly_the_edit(
    restored: dict[Any, Any], version: str, kind: str
) -> None:
    """The same edits as Spark SQL (`transform --sql`): the same restored state."""
    lines = _ok(restored[version, kind, "sql"])
    assert_equal(lines, edit_truth(truth(version, kind)))


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("version", TABLE_VERSIONS)
def test_edited_operator_state_restores_with_exactly_the_edit(
    restored: dict[Any, Any], version: str, kind: str
) -> None:
    lines = _ok(restored[version, kind, "operator-tables"])
    assert_equal(lines, operator_truth(truth(version, kind)))


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("version", VERSIONS)
def test_ttl_turned_on_and_off(restored: dict[Any, Any], version: str, kind: str) -> None:
    unchanged = restored[version, kind, "unchanged-ttl-on"]
    if version.startswith("1."):  # Flink before 2.2 refuses a state that gained TTL
        assert not unchanged["ok"]
        assert "StateMigrationException" in unchanged["error"]
    lines = _ok(restored[version, kind, "ttl"])
    last_access = restored["last_access", "", ""]
    assert_equal(lines, ttl_truth(truth(version, kind), last_access))


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("version", VERSIONS)
def test_renamed_and_dropped_states(restored: dict[Any, Any], version: str, kind: str) -> None:
    lines = _ok(restored[version, kind, "rename-drop"])
    assert_equal(lines, renamed_truth(truth(version, kind)))
    assert not any(line["state"] in ("string", "enum") for line in lines)
