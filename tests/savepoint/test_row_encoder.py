"""A state's rows encoded a batch at a time (`formats.entry_batches`, `RowEncoder`'s fast path)
give, byte for byte, the entries the per-row path gives (`StateCodec.encode_*`,
`KeyType.key_group`, `build_composite_key`), for every state whose parts it covers; a batch it
does not encode (a null key, an empty list, …) is encoded row by row, with the same error."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from statectl.errors import FormatError
from statectl.formats import java_types
from statectl.formats.java_types import KEY_TYPES, KeyType
from statectl.formats.state_values import StateCodec
from statectl.formats.values import TtlCodec, batch_encode, scalars
from statectl.formats.values.composites import WindowCodec
from statectl.savepoint import table_rows
from statectl.savepoint.entry_chunks import pack
from statectl.savepoint.table_rows import EncodedBatch, RowEncoder, encode_rows

_BASE = "org.apache.flink.api.common.typeutils.base."
TIME_WINDOW = WindowCodec(
    "org.apache.flink.streaming.api.windowing.windows.TimeWindow", ["start", "end"]
)
COUNT_WINDOW = WindowCodec("org.apache.flink.streaming.api.windowing.windows.CountWindow", ["id"])


def ints(bits: int) -> st.SearchStrategy[int]:
    return st.integers(-(1 << (bits - 1)), (1 << (bits - 1)) - 1)


# Java strings as Arrow holds them (UTF-8: no lone surrogate): empty ones, NUL, ASCII, accents,
# CJK, characters past U+FFFF (a surrogate pair each), long ones (a length of two varint bytes).
TEXT = st.one_of(
    st.text(st.characters(blacklist_categories=("Cs",)), max_size=12),
    st.text(st.sampled_from("a\x00é€\U0001f600\uffff\x7f\x80"), max_size=8),
    st.text(st.sampled_from("abc"), min_size=120, max_size=300),
)
# (codec, key serializer, values)
KEYS: dict[str, tuple[Any, str, st.SearchStrategy[Any]]] = {
    "STRING": (scalars.STRING, "StringSerializer", TEXT),
    "BIGINT": (scalars.LONG, "LongSerializer", ints(64)),
    "INT": (scalars.INT, "IntSerializer", ints(32)),
    "SMALLINT": (scalars.SHORT, "ShortSerializer", ints(16)),
    "TINYINT": (scalars.BYTE, "ByteSerializer", ints(8)),
}
# (codec, values, whether a null is a value of its own)
SCALARS: dict[str, tuple[Any, st.SearchStrategy[Any], bool]] = {
    "BIGINT": (scalars.LONG, ints(64), False),
    "INT": (scalars.INT, ints(32), False),
    "SMALLINT": (scalars.SHORT, ints(16), False),
    "TINYINT": (scalars.BYTE, ints(8), False),
    "DOUBLE": (scalars.DOUBLE, st.floats(allow_nan=True, allow_infinity=True), False),
    "BOOLEAN": (scalars.BOOLEAN, st.booleans(), False),
    "STRING": (scalars.STRING, TEXT, True),
}
NAMESPACES: dict[str, tuple[Any, st.SearchStrategy[Any]]] = {
    "VOID": (scalars.VOID, st.none()),
    "TIMEWINDOW": (TIME_WINDOW, st.fixed_dictionaries({"start": ints(64), "end": ints(64)})),
    "COUNTWINDOW": (COUNT_WINDOW, st.fixed_dictionaries({"id": ints(64)})),
    "STRING": (scalars.STRING, st.none() | TEXT),  # with a STRING key: length suffixes
}
TIMESTAMPS = st.integers(-(1 << 50), 1 << 50)


def key_type(name: str) -> KeyType:
    return KEY_TYPES[_BASE + KEYS[name][1]]


def nullable(values: st.SearchStrategy[Any], null: bool) -> st.SearchStrategy[Any]:
    return st.none() | values if null else values


def row_strategy(
    kind: str, key: str, namespace: str, value: str, ttl: bool
) -> st.SearchStrategy[Any]:
    """A row of the state's table, with only what every entry can be written from."""
    null_element = SCALARS[value][2]
    parts: dict[str, st.SearchStrategy[Any]] = {
        "key": KEYS[key][2],
        "namespace": NAMESPACES[namespace][1],
    }
    element = SCALARS[value][1]
    if kind == "TIMERS":
        parts["timestamp"] = ints(64)
        return st.fixed_dictionaries(parts)
    if kind == "LIST":
        if ttl:
            pairs = st.lists(
                st.tuples(nullable(element, null_element), TIMESTAMPS), min_size=1, max_size=5
            )
            return st.tuples(st.fixed_dictionaries(parts), pairs).map(
                lambda r: {
                    **r[0],
                    "value": [v for v, _ in r[1]],
                    "ttl_timestamp": [t for _, t in r[1]],
                }
            )
        parts["value"] = st.lists(nullable(element, null_element), min_size=1, max_size=5)
        return st.fixed_dictionaries(parts)
    if kind == "MAP":
        parts["user_key"] = KEYS[key][2]
        if ttl:  # a null value with no time, a value with its time (or a null one a STRING writes)
            timed = st.tuples(nullable(element, null_element), TIMESTAMPS)
            pair = st.one_of(st.just((None, None)), timed)
            return st.tuples(st.fixed_dictionaries(parts), pair).map(
                lambda r: {**r[0], "value": r[1][0], "ttl_timestamp": r[1][1]}
            )
        parts["value"] = st.none() | element
        return st.fixed_dictionaries(parts)
    parts["value"] = element
    if ttl:
        parts["ttl_timestamp"] = TIMESTAMPS
    return st.fixed_dictionaries(parts)


def state_codec(kind: str, key: str, namespace: str, value: str, ttl: bool) -> StateCodec:
    key_codec, namespace_codec = KEYS[key][0], NAMESPACES[namespace][0]
    if kind == "TIMERS":
        return StateCodec(kind, True, key_codec, namespace_codec)
    value_codec = SCALARS[value][0]
    user_key = key_codec if kind == "MAP" else None
    wrapped = TtlCodec(value_codec) if ttl else value_codec
    return StateCodec(kind, True, key_codec, namespace_codec, user_key, wrapped, ttl)


def encoders(codec: StateCodec, key: str, max_parallelism: int) -> tuple[RowEncoder, RowEncoder]:
    """The encoder with its fast path, and one without (the per-row reference)."""
    fast = RowEncoder(codec, key_type(key), max_parallelism)
    assert fast._fast is not None, "the state is one the fast path covers"
    reference = RowEncoder(codec, key_type(key), max_parallelism)
    reference._fast = None
    return fast, reference


def table_of(codec: StateCodec, rows: list[dict[str, Any]]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=codec.arrow_schema())


State = tuple[str, str, str, str, bool]  # kind, key, namespace, value (or element), TTL


def _states() -> list[State]:
    """Every value type in every kind (with and without TTL), every key type and every
    namespace type once or twice, timers."""
    states: list[State] = [
        (kind, "STRING", "VOID", value, ttl)
        for kind in ("VALUE", "LIST", "MAP")
        for value in SCALARS
        for ttl in (False, True)
    ]
    states += [
        ("REDUCING", "STRING", "VOID", "BIGINT", False),
        ("AGGREGATING", "INT", "VOID", "STRING", True),
    ]
    for key in KEYS:
        states += [
            ("VALUE", key, "VOID", "BIGINT", False),
            ("MAP", key, "TIMEWINDOW", "STRING", False),
        ]
        states += [
            ("TIMERS", key, namespace, "BIGINT", False) for namespace in ("VOID", "TIMEWINDOW")
        ]
    for namespace in NAMESPACES:
        states += [
            (kind, "STRING", namespace, "STRING", False) for kind in ("VALUE", "LIST", "MAP")
        ]
    return list(dict.fromkeys(states))


@st.composite
def tables(draw: st.DrawFn, state: State) -> pa.Table | pa.RecordBatch:
    """A table of the state's rows: in one chunk, in two, or a record batch (sliced or not)."""
    codec = state_codec(*state)
    rows = draw(st.lists(row_strategy(*state), max_size=40))
    table = table_of(codec, rows)
    shape = draw(st.sampled_from(["table", "batch", "slice", "chunks"]))
    if shape == "batch" and rows:
        return table.combine_chunks().to_batches()[0]
    if shape == "slice" and rows:  # an offset into every buffer
        start = draw(st.integers(0, len(rows)))
        return table.combine_chunks().to_batches()[0].slice(start)
    if shape == "chunks" and len(rows) > 1:
        cut = draw(st.integers(1, len(rows) - 1))
        return pa.concat_tables([table.slice(0, cut), table.slice(cut)])
    return table


@pytest.mark.parametrize("state", _states(), ids=["-".join(map(str, s)) for s in _states()])
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), max_parallelism=st.sampled_from([128, 300, 32768]))
def test_batches_encode_as_rows_do(state: State, data: st.DataObject, max_parallelism: int) -> None:
    codec = state_codec(*state)
    table = data.draw(tables(state))
    fast, reference = encoders(codec, state[1], max_parallelism)
    assert fast._fast is not None
    assert fast._fast.encode(table) is not None, "every row is one the fast path writes"
    expected = reference.batch(table, 7)
    assert fast.batch(table, 7) == expected
    assert list(fast.rows(table, 7)) == list(reference.rows(table, 7))


# --- what the fast path leaves to the per-row path ------------------------------------------------


def refusals(codec: StateCodec, key: str, rows: list[dict[str, Any]]) -> tuple[str, str]:
    fast, reference = encoders(codec, key, 128)
    table = table_of(codec, rows)
    assert fast._fast is not None and fast._fast.encode(table) is None
    messages = []
    for encoder in (fast, reference):
        with pytest.raises(FormatError) as caught:
            encoder.batch(table, 10)
        messages.append(caught.value.message)
        with pytest.raises(FormatError) as caught:
            list(encoder.rows(table, 10))
        assert caught.value.message == messages[-1]
    return messages[0], messages[1]


ROWS = [{"key": f"k{n}", "namespace": None, "value": n} for n in range(5)]


@pytest.mark.parametrize(
    ("kind", "value", "row", "message"),
    [
        ("VALUE", "BIGINT", {"key": None}, "row 12: key is null"),
        (
            "VALUE",
            "BIGINT",
            {"value": None},
            "row 12: value is null: a VALUE state stores none (leave the row out)",
        ),
        (
            "VALUE",
            "STRING",
            {"value": None},
            "row 12: value is null: a VALUE state stores none (leave the row out)",
        ),
        (
            "LIST",
            "BIGINT",
            {"value": []},
            "row 12: value is an empty list: Flink stores none (leave the row out)",
        ),
        (
            "LIST",
            "BIGINT",
            {"value": None},
            "row 12: value is null: a LIST state stores none (leave the row out)",
        ),
        ("LIST", "BIGINT", {"value": [1, None]}, "row 12: LIST element None is not a BIGINT"),
        ("MAP", "BIGINT", {"user_key": None}, "row 12: user_key is null"),
    ],
)
def test_a_row_that_cannot_be_written_is_refused_as_row_by_row(
    kind: str, value: str, row: dict[str, Any], message: str
) -> None:
    codec = state_codec(kind, "STRING", "VOID", value, False)
    rows = [dict(r) for r in ROWS]
    for r in rows:
        r["value"] = {"STRING": f"v{r['value']}", "BIGINT": r["value"]}[value]
        if kind == "LIST":
            r["value"] = [r["value"]]
        if kind == "MAP":
            r["user_key"] = "u"
    rows[2].update(row)
    fast, reference = refusals(codec, "STRING", rows)
    assert fast == reference
    assert fast.startswith(message)


def test_a_ttl_value_without_its_time_is_refused_as_row_by_row() -> None:
    codec = state_codec("VALUE", "STRING", "VOID", "BIGINT", True)
    rows = [{**r, "ttl_timestamp": 5} for r in ROWS]
    rows[3]["ttl_timestamp"] = None
    fast, reference = refusals(codec, "STRING", rows)
    assert fast == reference and fast.startswith("row 13: a VALUE state with TTL needs")


def test_a_key_of_another_type_than_the_jobs_is_refused_row_by_row() -> None:
    """A key codec that does not write the key type's bytes is never encoded in batches."""
    codec = state_codec("VALUE", "BIGINT", "VOID", "BIGINT", False)
    encoder = RowEncoder(codec, key_type("INT"), 128)
    assert encoder._fast is None
    table = table_of(codec, [{"key": 1, "namespace": None, "value": 2}])
    with pytest.raises(
        FormatError, match=r"^row 0: the key's bytes are not one key of the job's key type$"
    ):
        encoder.batch(table)


def test_a_null_window_is_refused_as_row_by_row() -> None:
    codec = state_codec("VALUE", "STRING", "TIMEWINDOW", "BIGINT", False)
    rows = [{**r, "namespace": {"start": 0, "end": 10}} for r in ROWS]
    rows[1]["namespace"] = None
    fast, reference = refusals(codec, "STRING", rows)
    assert fast == reference and fast.startswith("row 11: namespace")


def test_states_the_fast_path_does_not_cover_are_encoded_row_by_row() -> None:
    codec = StateCodec("VALUE", True, scalars.STRING, scalars.VOID, None, scalars.BIG_DECIMAL)
    encoder = RowEncoder(codec, key_type("STRING"), 128)
    assert encoder._fast is None
    table = pa.Table.from_pylist(
        [{"key": "a", "namespace": None, "value": "1.5"}], schema=codec.arrow_schema()
    )
    assert encoder.batch(table).count == 1


# --- packing, slices, encode_rows -----------------------------------------------------------------


def test_a_batch_past_the_slice_size_is_packed_as_one(monkeypatch: pytest.MonkeyPatch) -> None:
    codec = state_codec("LIST", "STRING", "VOID", "STRING", False)
    rows = [
        {
            "key": f"key-{n % 50}-é" if n % 7 else f"k{n}",
            "namespace": None,
            "value": [f"v{n}", None],
        }
        for n in range(500)
    ]
    table = table_of(codec, rows)
    fast, reference = encoders(codec, "STRING", 128)
    expected = reference.batch(table)
    monkeypatch.setattr(table_rows, "SLICE_ROWS", 64)
    assert fast.batch(table) == expected
    by_key_group: dict[int, list[tuple[bytes, bytes]]] = {}
    for key_group, key, value in reference.rows(table):
        by_key_group.setdefault(key_group, []).append((key, value))
    assert expected == EncodedBatch({kg: pack(r) for kg, r in by_key_group.items()}, 500)
    assert list(fast.batch(table).chunks) == list(expected.chunks)  # key groups in first-row order


def test_encode_rows_gives_what_row_by_row_gives(monkeypatch: pytest.MonkeyPatch) -> None:
    codec = state_codec("MAP", "STRING", "VOID", "BIGINT", False)
    rows = [
        {
            "key": f"k{n % 97}",
            "namespace": None,
            "user_key": f"u{n}",
            "value": None if n % 5 == 0 else n,
        }
        for n in range(3000)
    ]
    tables = [table_of(codec, rows[:1000]), table_of(codec, rows[1000:])]
    fast = encode_rows(tables, codec, key_type("STRING"), 256)
    monkeypatch.setattr(table_rows, "entry_encoder", lambda *args: None)
    reference = encode_rows(tables, codec, key_type("STRING"), 256)
    assert fast.count == reference.count == 3000
    assert {kg: list(fast.by_key_group[kg]) for kg in fast.by_key_group} == {
        kg: list(reference.by_key_group[kg]) for kg in reference.by_key_group
    }


EDGES = [
    0,
    1,
    127,
    128,
    255,
    256,
    16383,
    16384,
    65535,
    65536,
    (1 << 21) - 1,
    1 << 21,
    (1 << 24) - 1,
    1 << 24,
    1 << 28,
    (1 << 31) - 1,
]


def test_varints_and_length_suffixes_are_javas() -> None:
    values = np.array(EDGES, np.int64)
    assert batch_encode.varints(values).to_pylist() == [java_types.write_varint(v) for v in EDGES]
    suffixes = batch_encode.little_endian_lengths(values).to_pylist()
    assert suffixes == [java_types._length_suffix(v) for v in EDGES]
