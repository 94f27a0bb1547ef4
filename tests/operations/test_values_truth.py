"""Every value of real Flink savepoints, read by statectl, equals what Flink's own serializers
read: entry by entry, for every state of the values job (tests/flink/values: POJO, Tuple, Row,
enum, arrays, dates and times, Value types, List/Map, TTL on VALUE/LIST/MAP/REDUCING/AGGREGATING,
Kryo fallbacks, windows, timers, operator list/union/broadcast state) as written by Flink 1.15,
1.20, 2.0 and 2.3 on the hashmap backend (canonical) and RocksDB (native).

`truth.jsonl` beside each fixture is the state dumper's output (StateDumper.java: each state's
serializers restored from their snapshots, with the job's classes on the classpath, every entry
printed by the JSON rules of docs/values.md; a native savepoint's truth is its canonical twin's,
taken with no record in between). `make fixtures-values` regenerates both.
"""

from __future__ import annotations

import base64
import datetime as dt
import itertools
import json
import math
from collections import Counter, defaultdict
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from statectl.operations.export import export
from statectl.operations.typed_export import export_typed, folder_name
from statectl.savepoint.reader import open_savepoint

VALUES = Path(__file__).parent.parent / "fixtures" / "values"
FIXTURES = sorted(p.name for p in VALUES.iterdir() if (p / "truth.jsonl").is_file())

# The only entries allowed to stay raw, and why: a user class Kryo wrote with its
# FieldSerializer (its fields are not in the savepoint), and a POJO subclass the snapshot does
# not register (its fields are not in it either; RocksDB's snapshot caches it, the heap's not).
MAY_STAY_RAW = {
    "kryo-custom": "FieldSerializer",
    "pojo-subclass-unregistered": "not in the snapshot",
}
OPERATOR_KINDS = {"LIST", "UNION", "BROADCAST"}


def truth_lines(fixture: str) -> list[dict[str, Any]]:
    with open(VALUES / fixture / "truth.jsonl", encoding="utf-8") as lines:
        return [json.loads(line) for line in lines]


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def entry_key(line: dict[str, Any]) -> tuple[Any, ...]:
    """What identifies an entry: its state, subtask (operator state), key, namespace, user key
    and timer timestamp. Lists of equal keys (operator list elements) compare as multisets."""
    operator_state = line["kind"] in OPERATOR_KINDS and "key_group" not in line
    return (
        line["operator_id"],
        line["state"],
        line["subtask"] if operator_state else None,
        canonical(line.get("key")),
        canonical(line.get("namespace")),
        canonical(line.get("user_key")),
        line.get("timestamp"),
    )


def truth_by_entry(
    fixture: str, lines: list[dict[str, Any]] | None = None
) -> dict[tuple[Any, ...], list[dict[str, Any]]]:
    """The fixture's truth (or `lines`) grouped by `entry_key`."""
    grouped: dict[tuple[Any, ...], list[dict[str, Any]]] = defaultdict(list)
    for line in truth_lines(fixture) if lines is None else lines:
        grouped[entry_key(line)].append(line)
    return grouped


def exported_lines(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Export rows in the dumper's shape (its JSON columns parsed)."""

    def parsed(text: str | None) -> Any:
        return None if text is None else json.loads(text)

    lines = []
    for row in rows:
        line = {
            "operator_id": row["operator_id"],
            "state": row["state"],
            "kind": row["kind"],
            "key": parsed(row["key_json"]),
            "namespace": parsed(row["namespace_json"]),
            "user_key": parsed(row["user_key_json"]),
            "value": parsed(row["value_json"]),
            "ttl_timestamp": parsed(row["ttl_timestamp_json"]),
            "raw_reason": row["raw_reason"],
        }
        if row["scope"] == "keyed":
            line["key_group"] = row["key_group"]
            line["timestamp"] = row["timestamp"]
        else:
            line["subtask"] = row["subtask"]
        lines.append(line)
    return lines


def compare(
    fixture: str,
    lines: list[dict[str, Any]],
    *,
    unordered_lists: bool = False,
    broadcast_once: bool = False,
    broadcast_first_copy: bool = False,
    normalize: Any = None,
    truth_lines_: list[dict[str, Any]] | None = None,
) -> None:
    """statectl's lines equal the truth, entry by entry; only MAY_STAY_RAW states may be raw
    there (never wrong). `broadcast_once`: a broadcast map is read from the first subtask only
    (a state's typed table has no subtask column for it); `broadcast_first_copy`: from the first
    subtask, which names it (a JSON export's rows, docs/counts.md). `truth_lines_`: the truth's lines when
    they are not the committed fixture's (e.g. a cached checkpoint's twin)."""
    truth = truth_by_entry(fixture, truth_lines_)
    if broadcast_once or broadcast_first_copy:
        truth = _broadcast_from_first_subtask(truth, keep_subtask=broadcast_first_copy)
    ours: dict[tuple[Any, ...], list[dict[str, Any]]] = defaultdict(list)
    for line in lines:
        ours[entry_key(line)].append(line)
    assert set(ours) == set(truth), (
        f"entries only statectl has: {sorted(set(ours) - set(truth))[:3]}; "
        f"only Flink has: {sorted(set(truth) - set(ours))[:3]}"
    )
    raw: Counter[str] = Counter()
    for key, expected in truth.items():
        got = ours[key]
        if any(line["raw_reason"] for line in got):
            state = key[1]
            reason = next(line["raw_reason"] for line in got if line["raw_reason"])
            assert state in MAY_STAY_RAW and MAY_STAY_RAW[state] in reason, (key, reason)
            raw[state] += len(got)
            continue
        norm = _normalizer(unordered_lists, normalize)
        want = sorted(canonical(norm(e.get("value"))) for e in expected)
        have = sorted(canonical(norm(g.get("value"))) for g in got)
        assert have == want, key
        want_ttl = sorted(canonical(e.get("ttl_timestamp")) for e in expected)
        assert sorted(canonical(g.get("ttl_timestamp")) for g in got) == want_ttl, key
    decoded = sum(len(v) for v in truth.values()) - sum(raw.values())
    assert decoded > 900, f"only {decoded} entries decoded"


def _normalizer(unordered_lists: bool, normalize: Any) -> Any:
    def norm(value: Any) -> Any:
        value = normalize(value) if normalize else value
        return _unordered(value) if unordered_lists else value

    return norm


def _broadcast_from_first_subtask(
    truth: dict[tuple[Any, ...], list[dict[str, Any]]], keep_subtask: bool = False
) -> dict[tuple[Any, ...], list[dict[str, Any]]]:
    kept: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for key, lines in truth.items():
        if lines[0]["kind"] != "BROADCAST":
            kept[key] = lines
        elif key[2] == 0:
            kept[key if keep_subtask else (*key[:2], None, *key[3:])] = lines
    return kept


def _unordered(value: Any) -> Any:
    """Lists sorted by their JSON text: Arrow keeps a set in Flink's order, JSON sorts it."""
    if isinstance(value, list):
        return sorted((_unordered(v) for v in value), key=canonical)
    if isinstance(value, dict):
        return {k: _unordered(v) for k, v in value.items()}
    return value


@pytest.mark.parametrize("fixture", FIXTURES)
def test_export_json_equals_what_flink_reads(fixture: str, tmp_path: Path) -> None:
    sp = open_savepoint(str(VALUES / fixture / "savepoint"))
    out = tmp_path / "export.parquet"
    export(sp, str(out))
    compare(fixture, exported_lines(pq.read_table(out).to_pylist()), broadcast_first_copy=True)


@pytest.mark.parametrize("fixture", FIXTURES)
def test_typed_export_equals_what_flink_reads(fixture: str, tmp_path: Path) -> None:
    """The typed Parquet, read back and put in the JSON form by its Arrow types alone."""
    sp = open_savepoint(str(VALUES / fixture / "savepoint"))
    report = export_typed(sp, str(tmp_path / "typed"))
    kinds = {(line["operator_id"], line["state"]): line["kind"] for line in truth_lines(fixture)}
    labels = {op.operator_id_hex: op for op in sp.operators}
    lines = []
    for (operator_id, state), kind in kinds.items():
        from statectl.savepoint.entries import operator_label

        folder = tmp_path / "typed" / folder_name(operator_label(labels[operator_id]), state)
        table = ds.dataset(folder).to_table()
        raw = report.raw.get(folder_name(operator_label(labels[operator_id]), state))
        raw_column = "value" in table.column_names and pa.types.is_binary(
            table.schema.field("value").type
        )
        for row in _json_rows(table):
            lines.append(_typed_line(operator_id, state, kind, row, raw, raw_column))
    compare(fixture, lines, unordered_lists=True, broadcast_once=True)


def lines_of_typed_tables(
    tables: dict[tuple[str, str], tuple[pa.Table, str | None]], kinds: dict[tuple[str, str], str]
) -> list[dict[str, Any]]:
    """Typed tables of states (keyed by operator id and state, each with the reason its raw rows
    stayed raw, if any) as the dumper's lines, by their Arrow types alone."""
    lines = []
    for (operator_id, state), (table, reason) in tables.items():
        if (operator_id, state) not in kinds:
            assert table.num_rows == 0, (operator_id, state)
            continue
        raw = None if reason is None else _Reason(reason)
        raw_column = "value" in table.column_names and pa.types.is_binary(
            table.schema.field("value").type
        )
        for row in _json_rows(table):
            lines.append(_typed_line(operator_id, state, kinds[operator_id, state], row, raw, raw_column))  # fmt: skip
    return lines


def state_kinds(fixture: str) -> dict[tuple[str, str], str]:
    return {(line["operator_id"], line["state"]): line["kind"] for line in truth_lines(fixture)}


class _Reason:
    def __init__(self, reason: str) -> None:
        self.first_reason = reason


def _typed_line(
    operator_id: str, state: str, kind: str, row: dict[str, Any], raw: Any, raw_column: bool
) -> dict[str, Any]:
    """A typed row in the dumper's shape; raw where the state has raw rows and this one's value
    is null or the column holds the undecoded bytes."""
    line = {"operator_id": operator_id, "state": state, "kind": kind, **row}
    if "ttl_timestamp" in row:  # a timestamp column; the dumper prints epoch ms
        stamp = row["ttl_timestamp"]
        line["ttl_timestamp"] = (
            [_epoch_ms(t) for t in stamp] if isinstance(stamp, list) else _epoch_ms(stamp)
        )
    if "subtask" not in row:
        line["key_group"] = None
    is_raw = raw is not None and (row.get("value") is None or raw_column)
    line["raw_reason"] = raw.first_reason if is_raw else None
    return line


def _json_rows(table: pa.Table) -> list[dict[str, Any]]:
    columns = {
        name: _array_json(table.column(name).combine_chunks()) for name in table.column_names
    }
    return [
        dict(zip(columns, values, strict=True)) for values in zip(*columns.values(), strict=True)
    ]


def _array_json(array: pa.Array) -> list[Any]:
    """An Arrow array's values in the JSON form of docs/values.md, from its Arrow type alone."""
    arrow = array.type
    valid = array.is_valid().to_pylist()
    if getattr(arrow, "extension_name", None) == "arrow.json":  # a Kryo value's JSON text
        texts = array.storage.to_pylist()
        values = [json.loads(t) if ok else None for t, ok in zip(texts, valid, strict=True)]
    elif pa.types.is_struct(arrow):
        # flatten(): the children with the struct's own nulls (field() keeps only theirs)
        fields = {f.name: _array_json(c) for f, c in zip(arrow, array.flatten(), strict=True)}
        values = [
            {name: fields[name][i] for name in fields} if ok else None for i, ok in enumerate(valid)
        ]
        values = [None if v is None else _struct_json(v, [f.name for f in arrow]) for v in values]
    elif pa.types.is_map(arrow):
        keys, items = _array_json(array.keys), _array_json(array.items)
        values = [_map_json(keys, items, start, end) for start, end in _spans(array)]
    elif pa.types.is_list(arrow) or pa.types.is_large_list(arrow):
        elements = _array_json(array.values)
        values = [elements[start:end] for start, end in _spans(array)]
    elif pa.types.is_timestamp(arrow) or pa.types.is_time(arrow):
        width = pa.int32() if pa.types.is_time32(arrow) else pa.int64()
        counts = array.view(width).to_pylist()
        values = [_temporal_json(arrow, v) for v in counts]
    elif pa.types.is_date32(arrow) or pa.types.is_date64(arrow):
        days = array.cast(pa.date32()).view(pa.int32()).to_pylist()
        values = [None if v is None else (EPOCH + dt.timedelta(days=v)).isoformat() for v in days]
    else:
        values = [_scalar_json(arrow, v) for v in array.to_pylist()]
    return [v if ok else None for v, ok in zip(values, valid, strict=True)]


def _epoch_ms(iso: str | None) -> int | None:
    if iso is None:
        return None
    delta = dt.datetime.fromisoformat(iso.replace("Z", "+00:00")) - dt.datetime(
        1970, 1, 1, tzinfo=dt.UTC
    )
    return delta // dt.timedelta(milliseconds=1)


def _struct_json(value: dict[str, Any], names: list[str]) -> dict[str, Any]:
    if set(names) == {"left", "right"}:  # Either: the side that is set
        return {k: v for k, v in value.items() if v is not None}
    if "__row_kind" in names:  # a Row's kind: in the typed table, not in the JSON form
        value = {k: v for k, v in value.items() if k != "__row_kind"}
    if "__class" in names:  # a POJO with subclasses: a subclass value is its own struct
        return _pojo_json(value, names)
    return value


def _pojo_json(value: dict[str, Any], names: list[str]) -> dict[str, Any]:
    """Fields before `__class` are the POJO's own; after it, one struct per subclass."""
    subclass = value["__class"]
    if subclass is not None:
        return value[subclass]
    return {name: value[name] for name in names[: names.index("__class")]}


def _spans(array: pa.Array) -> list[tuple[int, int]]:
    offsets = array.offsets.to_pylist()
    base = offsets[0] if offsets else 0
    return [(a - base, b - base) for a, b in itertools.pairwise(offsets)]


def _map_json(keys: list[Any], items: list[Any], start: int, end: int) -> Any:
    pairs = list(zip(keys[start:end], items[start:end], strict=True))
    if all(isinstance(k, str) for k, _ in pairs):
        return dict(pairs)
    return [list(p) for p in sorted(pairs, key=lambda p: canonical(p[0]))]


def _scalar_json(arrow: pa.DataType, value: Any) -> Any:
    if value is None:
        return None
    if pa.types.is_binary(arrow) or pa.types.is_large_binary(arrow):
        return base64.b64encode(value).decode("ascii")
    if pa.types.is_floating(arrow):
        value = float(value)
        if math.isnan(value):
            return "NaN"
        return ("Infinity" if value > 0 else "-Infinity") if math.isinf(value) else value
    if pa.types.is_decimal(arrow):
        return f"{value:.{arrow.scale}f}" if isinstance(value, Decimal) else str(value)
    return value


EPOCH = dt.date(1970, 1, 1)
UNIT_NANOS = {"s": 1_000_000_000, "ms": 1_000_000, "us": 1_000, "ns": 1}


def _temporal_json(arrow: pa.DataType, count: int | None) -> str | None:
    if count is None:
        return None
    nanos = count * UNIT_NANOS[arrow.unit]
    seconds, fraction = divmod(nanos, 1_000_000_000)
    if pa.types.is_time(arrow):
        text = (dt.datetime(1970, 1, 1) + dt.timedelta(seconds=seconds)).time().isoformat()
    else:
        text = (dt.datetime(1970, 1, 1) + dt.timedelta(seconds=seconds)).isoformat()
    text += f".{fraction:09d}".rstrip("0").rstrip(".")
    zoned = pa.types.is_timestamp(arrow) and arrow.tz is not None
    return text + ("Z" if zoned else "")


def test_fixtures_cover_every_version_and_backend() -> None:
    versions = {name.split("-", 1)[0] for name in FIXTURES}
    kinds = {name.split("-", 1)[1] for name in FIXTURES}
    assert versions == {"1.15.4", "1.20.3", "2.0.1", "2.3.0"}
    assert kinds == {"hashmap-canonical", "rocksdb-native"}


def test_inspect_names_each_states_type_on_one_line() -> None:
    from statectl.operations.summary import summarize

    sp = open_savepoint(str(VALUES / "2.3.0-hashmap-canonical" / "savepoint"))
    summary = summarize(sp, "values", deep=True)
    types = {s.name: s.type for op in summary.operators for s in op.states}
    assert types["ttl-list"] == "LIST<STRING>, TTL"
    assert types["ttl-map"] == "MAP<STRING, BIGINT>, TTL"
    assert types["enum"] == "ENUM(RED, GREEN, BLUE, VIOLET)"
    assert types["tuple2"] == "TUPLE2{f0 STRING, f1 BIGINT}"
    assert types["pojo"].startswith("POJO statectl.values.Model$Pojo{codes SET<INT>, color ENUM(")
    raw = {s.name: s.raw for op in summary.operators for s in op.states}
    assert raw["pojo"] == 0 and raw["kryo-custom"] == 16
