"""Every value a Flink SQL job keeps in state, read by statectl, equals what Flink's own
serializers read, and writes back to the very bytes Flink wrote.

tests/flink/sql/src/statectl/flinkjobs/SqlJob.java: a group aggregation with COUNT DISTINCT, a
regular join, a window TVF, a rowtime deduplication, a top-N and MATCH_RECOGNIZE; its `typed`
variant adds a deduplication keeping a row with a column of nearly every SQL type (DECIMAL compact
and not, TIMESTAMP(3/9), TIMESTAMP_LTZ(3/6), CHAR, VARCHAR and VARBINARY inline and not, DATE,
TIME, ARRAY, MAP, nested ROW, nulls) and an aggregation whose accumulator holds a structured type,
RAW data-view placeholders and a MapView (COLLECT); that variant runs with `table.exec.state.ttl`
so every SQL state is TTL-wrapped. The truth is the state dumper's (StateDumper + TableJson.java:
each state's serializers restored from their snapshots by Flink 2.3, every entry printed by the
rules of docs/values.md), cached beside the savepoints (`harness.sql_dumps`).

The MATCH_RECOGNIZE operator's states are flink-cep's own serializers (NFAState, Lockable,
NodeId, EventId), not the Table runtime's: they stay raw, with a reason, and are never wrong.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from statectl.formats.state_values import MAP_NULL_VALUE
from statectl.formats.values import Raw
from statectl.operations.export import export
from statectl.savepoint.entries import codecs_for, keyed_files, split_key
from statectl.savepoint.reader import open_savepoint
from tests.flink import harness
from tests.operations.test_values_truth import canonical, entry_key, exported_lines

pytestmark = [pytest.mark.flink]

_COMMON = {"format": "CANONICAL", "parallelism": 2, "max_parallelism": 128}
# hashmap and rocksdb: the very savepoints of tests/operations/rescale/test_sql_e2e.py (shared cache).
SPECS: dict[str, dict[str, Any]] = {
    "hashmap": {"backend": "hashmap", **_COMMON},
    "rocksdb": {"backend": "rocksdb", **_COMMON},
    "typed-ttl-hashmap": {"backend": "hashmap", **_COMMON, "ttl": "1 h", "typed": True},
    "typed-ttl-rocksdb": {"backend": "rocksdb", **_COMMON, "ttl": "1 h", "typed": True},
}
# flink-cep's serializers (MATCH_RECOGNIZE): statectl has no codec for them (yet).
CEP_STATES = {
    "nfaStateName",
    "sharedBuffer-events",
    "sharedBuffer-entries-with-lockable-edges",
}
# SQL states the TTL variant must have wrapped (flink-state-values.md §7.10).
TTL_STATES = {
    "accState",
    "distinctAcc_0",
    "agg5$map",
    "deduplicate-state",
    "left-records",
    "right-records",
    "data-state-with-append",
}


@pytest.fixture(scope="module")
def truths() -> dict[str, list[dict[str, Any]]]:
    return harness.sql_dumps(SPECS)


def savepoint_of(name: str) -> Path:
    return harness.sql_savepoints({name: SPECS[name]})[name].parent / "savepoint"


def exported(name: str, tmp_path: Path) -> list[dict[str, Any]]:
    """`statectl export`'s rows in the dumper's shape (JSON columns parsed)."""
    out = tmp_path / "export.parquet"
    export(open_savepoint(str(savepoint_of(name))), str(out))
    return exported_lines(pq.read_table(out).to_pylist())


def grouped(lines: list[dict[str, Any]]) -> dict[tuple[Any, ...], list[dict[str, Any]]]:
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = defaultdict(list)
    for line in lines:
        if line["state"] not in CEP_STATES:
            groups[entry_key(line)].append(line)
    return groups


@pytest.mark.parametrize("name", list(SPECS))
def test_export_json_equals_what_flink_reads(
    truths: dict[str, list[dict[str, Any]]], name: str, tmp_path: Path
) -> None:
    lines = exported(name, tmp_path)
    truth, ours = grouped(truths[name]), grouped(lines)
    assert not [
        line for line in truths[name] if "error" in line and line["state"] not in CEP_STATES
    ]
    assert set(ours) == set(truth), (
        f"only statectl: {sorted(set(ours) - set(truth))[:3]}; "
        f"only Flink: {sorted(set(truth) - set(ours))[:3]}"
    )
    for key, expected in truth.items():
        got = ours[key]
        assert not any(line["raw_reason"] for line in got), (key, got[0]["raw_reason"])
        assert sorted(canonical(g["value"]) for g in got) == sorted(
            canonical(e.get("value")) for e in expected
        ), key
        assert sorted(canonical(g["ttl_timestamp"]) for g in got) == sorted(
            canonical(e.get("ttl_timestamp")) for e in expected
        ), key
    # flink-cep's states stay raw, never decoded wrongly.
    cep = [line for line in lines if line["state"] in CEP_STATES]
    assert cep and all(line["raw_reason"] or line["value"] is None for line in cep)
    assert len(truth) > 1000


def test_the_ttl_variant_wraps_every_sql_state(truths: dict[str, list[dict[str, Any]]]) -> None:
    with_ttl = {line["state"] for line in truths["typed-ttl-hashmap"] if "ttl_timestamp" in line}
    assert with_ttl >= TTL_STATES
    assert not {line["state"] for line in truths["hashmap"] if "ttl_timestamp" in line}


def test_the_typed_row_holds_every_sql_type(truths: dict[str, list[dict[str, Any]]]) -> None:
    """The typed deduplication's row: the JSON rules of each SQL type, as Flink printed them."""
    rows = [
        line["value"]
        for line in truths["typed-ttl-hashmap"]
        if line["state"] == "deduplicate-state" and len(line["value"]) > 20
    ]
    assert rows
    row = rows[0]
    assert row["f11"].endswith("000000000000") and len(row["f11"].split(".")[1]) == 18
    assert row["f20"].startswith("2024-01-01T") and row["f20"].endswith(".123456789")
    assert row["f21"].endswith("Z") and not row["f17"].endswith("Z")
    assert isinstance(row["f24"], dict) and isinstance(row["f25"], list)
    assert set(row["f26"]) == {"EXPR$0", "EXPR$1", "EXPR$2"}


@pytest.mark.parametrize("name", list(SPECS))
def test_every_entry_writes_back_to_the_bytes_flink_wrote(name: str) -> None:
    """Keys, namespaces, user keys and values of every SQL entry: decoded by the state's codec
    and encoded again (`StateCodec.encode_*`, TTL and null map values included), the very
    bytes; none of them raw."""
    sp = open_savepoint(str(savepoint_of(name)))
    checked = 0
    for op in sp.operators:
        for file in keyed_files(sp, op):
            header = file.header()
            codecs = codecs_for(header, file.flink_major)
            for entry in file.entries(header=header):
                if entry.state.name in CEP_STATES or entry.state.kind == "TIMERS":
                    continue
                codec = codecs[entry.state.name]
                parts = split_key(entry, op.max_parallelism, codec)
                where = (entry.state.name, entry.key.hex())
                key = codec.decode_key(parts.key)
                assert not isinstance(key, Raw) and codec.encode_key(key) == parts.key, where
                if parts.namespace is not None:
                    namespace = codec.decode_namespace(parts.namespace)
                    assert not isinstance(namespace, Raw), where
                    assert codec.encode_namespace(namespace) == parts.namespace, where
                if parts.user_key is not None:
                    user_key = codec.decode_user_key(parts.user_key)
                    assert not isinstance(user_key, Raw), where
                    assert codec.encode_user_key(user_key) == parts.user_key, where
                decoded = codec.decode_value(entry.value)
                assert not decoded.raw, (where, decoded.value)
                heap_null = codec.kind == "MAP" and entry.value[:1] == bytes((MAP_NULL_VALUE,))
                again = codec.encode_value(
                    decoded.value,
                    decoded.ttl_timestamp,
                    heap_null_map_value=heap_null and len(entry.value) > 1,
                )
                assert again == entry.value, (where, entry.value.hex())
                checked += 1
    assert checked > 1000
