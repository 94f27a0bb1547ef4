"""The batch paths of the exports equal the per-entry paths on every canonical fixture: the JSON
export's rows (`_keyed_tables` against `_keyed_rows`) and the typed tables (one pass over a file,
`keyed_state_batches`, against a pass per state, `keyed_batches`)."""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from statectl.formats.state_headers import StateMetaInfo
from statectl.formats.state_values import StateCodec
from statectl.formats.values import TtlCodec, scalars
from statectl.formats.values.batch import Buffer
from statectl.formats.values.composites import EnumCodec, StructCodec, WindowCodec
from statectl.operations import export
from statectl.savepoint import entries, tables
from statectl.savepoint.reader import open_savepoint
from tests.conftest import FIXTURES

CANONICAL = sorted(
    p.parent
    for p in [
        *FIXTURES.glob("*/savepoint/_metadata"),
        *FIXTURES.glob("values/*/savepoint/_metadata"),
    ]
    if "native" not in p.parts[-3] and "checkpoint" not in p.parts[-3]
)


def keyed_files(savepoint: Path) -> list[entries.KeyedFile]:
    sp = open_savepoint(str(savepoint))
    found = [f for op in sp.operators for f in entries.keyed_files(sp, op)]
    return [f for f in found if isinstance(f, entries.KeyedFile)]


@pytest.mark.parametrize("savepoint", CANONICAL, ids=lambda p: p.parent.name)
def test_json_rows_equal(savepoint: Path) -> None:
    for file in keyed_files(savepoint):
        expected = [row._asdict() for row in export._keyed_rows(file, None, None)]
        got = []
        for item in export._keyed_tables(file, None, None):
            got += item.to_pylist() if isinstance(item, pa.Table) else [item._asdict()]
        assert got == expected


@pytest.mark.parametrize("savepoint", CANONICAL, ids=lambda p: p.parent.name)
def test_typed_tables_equal(savepoint: Path) -> None:
    for file in keyed_files(savepoint):
        codecs = entries.codecs_for(file.header(), file.flink_major)
        raws: dict[str, tables.RawTally] = {}
        one_pass: dict[str, list[pa.Table]] = {name: [] for name in codecs}
        for name, batch in tables.keyed_state_batches(file, codecs, None, raws):
            one_pass[name].append(batch)
        for name, codec in codecs.items():
            raw = tables.RawTally()
            per_state = list(tables.keyed_batches(file, name, codec, None, raw))
            schema = codec.arrow_schema()
            want = pa.Table.from_batches(per_state, schema)
            got = pa.Table.from_batches([b for t in one_pass[name] for b in t.to_batches()], schema)
            assert _values(got) == _values(want), name
            assert raws.get(name, tables.RawTally()).rows == raw.rows
            assert raws.get(name, tables.RawTally()).first_reason == raw.first_reason


def _values(table: pa.Table) -> list[dict[str, Any]]:
    """Rows with NaN made comparable (Arrow's `equals` holds NaN unequal to itself)."""
    return [_nan_free(row) for row in table.to_pylist()]


def _nan_free(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    if isinstance(value, dict):
        return {k: _nan_free(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_nan_free(v) for v in value]
    return value


def test_the_fixtures_take_the_batch_path() -> None:
    """Some states of the values fixtures are read in batches (else the tests above prove
    nothing about them)."""
    (values,) = [p for p in CANONICAL if p.parent.name == "2.3.0-hashmap-canonical"]
    codecs = [
        codec
        for file in keyed_files(values)
        for codec in entries.codecs_for(file.header(), file.flink_major).values()
    ]
    typed = {codec.describe() for codec in codecs if tables.readers_for(codec) is not None}
    assert sum(tables.readers_for(codec) is not None for codec in codecs) >= 32
    assert {
        "ENUM(RED, GREEN, BLUE, VIOLET)",
        "MAP<BIGINT, ENUM(RED, GREEN, BLUE, VIOLET)>",
        "LIST<TUPLE2{f0 STRING, f1 BIGINT}>",
        "TUPLE2{f0 STRING, f1 BIGINT}",  # a Tuple value
        "BIGINT",  # window-contents: a TimeWindow namespace (and plain BIGINT values)
        "STRING, TTL",
        "BIGINT, TTL",
        "TUPLE2{f0 BIGINT, f1 BIGINT}, TTL",
        "MAP<STRING, BIGINT>, TTL",
        "LIST<BIGINT>",  # a List value
        "MAP<STRING, INT>",  # a Map value
        "ARRAY<INT>",  # int[]
        "ARRAY<BOOLEAN>",
        "BYTES",
    } <= typed
    timers = [c for c in codecs if c.kind == "TIMERS"]
    assert timers and all(tables.readers_for(c) is not None for c in timers)
    pojos = [
        c
        for c in codecs
        if c.describe().startswith(
            (
                "POJO statectl.values.Model$Pojo",
                "LIST<POJO statectl.values.Model$Pojo",
                "MAP<STRING, POJO statectl.values.Model$Pojo",
            )
        )
    ]
    assert pojos and all(tables.readers_for(c) is not None for c in pojos)  # SET, MAP, LIST fields
    assert "LIST<STRING>, TTL" not in typed  # each element has its timestamp: per entry
    windowed = [c for c in codecs if isinstance(c.namespace, WindowCodec) and c.kind != "TIMERS"]
    assert windowed and all(tables.readers_for(c) is not None for c in windowed)


# --- synthetic entries: MAP and TTL values, their null flags and damaged bytes ------------------

TUPLE = StructCodec(
    "TUPLE2", "org.apache.flink.api.java.tuple.Tuple2", ["f0", "f1"], [scalars.STRING, scalars.LONG]
)
TIME_WINDOW = WindowCodec(
    "org.apache.flink.streaming.api.windowing.windows.TimeWindow", ["start", "end"]
)
COLORS = EnumCodec("com.acme.Color", ("RED", "GREEN", "BLUE"))
SYNTHETIC = {
    "map-ttl": StateCodec(
        "MAP", True, scalars.STRING, TIME_WINDOW, scalars.STRING, TtlCodec(TUPLE), True
    ),
    "map": StateCodec("MAP", True, scalars.STRING, scalars.VOID, scalars.STRING, TUPLE),
    "value-ttl": StateCodec(
        "VALUE", True, scalars.STRING, TIME_WINDOW, None, TtlCodec(scalars.STRING), True
    ),
    # lists of the item's user key characters and value (`_list_value`): longs are fixed width
    "list": StateCodec("LIST", True, scalars.STRING, TIME_WINDOW, None, TUPLE),
    "list-long": StateCodec("LIST", True, scalars.STRING, scalars.VOID, None, scalars.LONG),
    "value-enum": StateCodec("VALUE", True, scalars.STRING, scalars.VOID, None, COLORS),
}
MAX_PARALLELISM = 128  # a one-byte key-group prefix
DAMAGE = [
    None,
    None,
    None,
    "cut",
    "extra",
    "flag",
    "heap-null",
    "user-key",
    "ttl-only",
    "comma",
    "out-of-range",
]

longs = st.integers(-(2**63), 2**63 - 1)
synthetic_entries = st.lists(
    st.tuples(
        st.integers(0, MAX_PARALLELISM - 1),
        st.text(max_size=6),  # key
        st.fixed_dictionaries({"start": longs, "end": longs}),  # namespace
        st.text(max_size=6),  # user key
        st.one_of(  # value
            st.none(), st.fixed_dictionaries({"f0": st.one_of(st.none(), st.text()), "f1": longs})
        ),
        longs,  # TTL timestamp
        st.sampled_from(DAMAGE),
    ),
    min_size=1,
    max_size=25,
)


def _synthetic_batch(codec: StateCodec, items: list[tuple[Any, ...]]) -> tables.EntryBatch:
    """The items as a block's entries: composite key, i32 value length, stored value."""
    data = bytearray()
    columns: dict[str, list[int]] = {"groups": [], "starts": [], "key_ends": [], "ends": []}
    for group, key, namespace, user_key, value, ttl, damage in items:
        composite = bytearray(bytes([group]) + codec.encode_key(key))
        composite += codec.encode_namespace(namespace if codec.namespace is TIME_WINDOW else None)
        if codec.kind == "MAP":
            composite += codec.encode_user_key(user_key) + (b"!" if damage == "user-key" else b"")
        stored = _stored(codec, value, ttl, damage, user_key)
        composite[0] |= 0x80 if len(columns["starts"]) % 3 == 0 else 0  # the run-end flag
        columns["groups"].append(group)
        columns["starts"].append(len(data))
        data += composite
        columns["key_ends"].append(len(data))
        data += len(stored).to_bytes(4, "big") + stored
        columns["ends"].append(len(data))
    arrays = [np.array(c, np.int64) for c in columns.values()]
    groups, starts, key_ends, ends = arrays
    ids = np.zeros(len(items), np.int64)
    return tables.EntryBatch(Buffer(data), groups, starts, key_ends, ends, ids)


def _epoch_ms(table: pa.Table) -> pa.Table:
    """TTL timestamps as numbers (Python's datetime holds only years 1 to 9999)."""
    if "ttl_timestamp" not in table.column_names:
        return table
    at = table.column_names.index("ttl_timestamp")
    return table.set_column(at, "ttl_timestamp", table["ttl_timestamp"].cast(pa.int64()))


def _stored(codec: StateCodec, value: Any, ttl: int, damage: str | None, chars: str) -> bytes:
    """The stored value of `value` (as the state's value type holds it), then damaged; a
    LIST's holds a tuple per character of `chars` first."""
    if codec.kind == "LIST":
        value = _list_value(codec, chars, value)
    elif codec.user_value_codec() is COLORS:
        value = COLORS.constants[ttl % len(COLORS.constants)]  # damaged: "out-of-range"
    elif codec.kind != "MAP" and value is None:
        value = {"f0": None, "f1": 0} if codec.user_value_codec() is TUPLE else None
    if codec.user_value_codec() is scalars.STRING and value is not None:
        value = value["f0"]
    with_ttl = codec.ttl and (value is not None or codec.kind != "MAP")  # a null MAP value: none
    stored = codec.encode_value(value, ttl if with_ttl else None)
    if damage == "cut":
        return stored[:-1]
    if damage == "extra":
        return stored + b"\x00"
    if damage == "flag" and codec.kind == "MAP":
        return b"\x02" + stored[1:]
    if damage == "heap-null" and codec.kind == "MAP":
        return b"\x01" + stored[1:] if value is not None else stored + b"\x00"
    if damage == "ttl-only" and codec.ttl:
        return stored[: 9 if codec.kind == "MAP" else 8]
    if damage == "comma" and codec.kind == "LIST":
        return stored + b","
    if damage == "out-of-range" and codec.user_value_codec() is COLORS:
        return (len(COLORS.constants) + ttl % 3).to_bytes(4, "big")
    return stored


def _list_value(codec: StateCodec, chars: str, value: Any) -> list[Any]:
    """A LIST value: a tuple per character, then the value (longs: the tuples' f1s)."""
    tuples = [{"f0": c, "f1": i} for i, c in enumerate(chars)] + ([value] if value else [])
    if codec.user_value_codec() is scalars.LONG:
        return [t["f1"] for t in tuples]
    return tuples


@pytest.mark.parametrize("name", SYNTHETIC)
@settings(max_examples=60, deadline=None)
@given(items=synthetic_entries)
def test_synthetic_entries_equal_per_entry_rows(name: str, items: list[tuple[Any, ...]]) -> None:
    """The batch-decoded table (rows not taken decoded one by one) equals the per-entry table,
    and every undamaged entry is taken."""
    codec = SYNTHETIC[name]
    meta = StateMetaInfo(name, "KEY_VALUE", {"KEYED_STATE_TYPE": codec.kind}, {})
    entry_batch = _synthetic_batch(codec, items)
    readers = tables.readers_for(codec)
    assert readers is not None
    rows = np.arange(len(items))
    fast = tables.decode_fast(readers, entry_batch, rows, prefix=1)
    file: Any = SimpleNamespace(
        max_parallelism=MAX_PARALLELISM,
        description="synthetic",
        operator="op",
        operator_id="0" * 32,
        subtask=0,
    )
    want_raw, got_raw = tables.RawTally(), tables.RawTally()
    want = tables._slow_table(file, codec, entry_batch, rows, meta, want_raw)
    got = tables._fast_table(codec, fast)
    left = fast.left
    if len(left):
        slow = tables._slow_table(file, codec, entry_batch, left, meta, got_raw)
        got = tables.patched(got, left, slow)
    assert (got_raw.rows, got_raw.first_reason) == (want_raw.rows, want_raw.first_reason)
    assert _values(_epoch_ms(got)) == _values(_epoch_ms(want))
    undamaged = np.array([item[-1] is None for item in items])
    assert fast.taken[undamaged].all()
    # the JSON export's rows of the same entries, batch and per entry
    json_rows = export._fast_table(file, meta, codec, readers, entry_batch, rows, fast)
    if len(left):
        slow_rows = export._slow_table(file, codec, entry_batch, left, meta)
        json_rows = tables.patched(json_rows, left, slow_rows)
    assert (
        json_rows.to_pylist()
        == export._slow_table(file, codec, entry_batch, rows, meta).to_pylist()
    )
