"""Batch readers (`formats.values.batch`) give what the codecs' per-value reads give: the same
Arrow values and the same JSON text, for every row they take; rows they leave are the codecs'."""

from __future__ import annotations

import json
import math
from decimal import Decimal
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from statectl.errors import FormatError
from statectl.formats.logical_types import LogicalType
from statectl.formats.state_values import DECODE_ERRORS, join_list, split_list
from statectl.formats.values import batch, scalars
from statectl.formats.values.composites import (
    EnumCodec,
    ListCodec,
    MapCodec,
    NullableCodec,
    ObjectArrayCodec,
    OptionCodec,
    RowCodec,
    SetCodec,
    StructCodec,
    Tuple0Codec,
    WindowCodec,
)
from statectl.formats.values.model import Codec
from statectl.formats.values.pojo import PojoCodec
from statectl.formats.values.row_data import RowDataCodec

POJO = PojoCodec(
    "com.acme.Order",
    ["city", "count", "flag", "id", "name", "score", "small"],
    [
        scalars.STRING,
        scalars.INT,
        scalars.BOOLEAN,
        scalars.LONG,
        scalars.STRING,
        scalars.DOUBLE,
        scalars.FLOAT,
    ],
    [],
    {},
)
ROW = RowDataCodec(
    (
        LogicalType("BIGINT"),
        LogicalType("INTEGER"),
        LogicalType("DOUBLE"),
        LogicalType("VARCHAR", length=100),
        LogicalType("VARCHAR", length=100),
        LogicalType("DECIMAL", precision=10, scale=2),
        LogicalType("BOOLEAN"),
        LogicalType("SMALLINT"),
    )
)
TUPLE = StructCodec(
    "TUPLE4",
    "org.apache.flink.api.java.tuple.Tuple4",
    ["f0", "f1", "f2", "f3"],
    [scalars.INT, scalars.STRING, scalars.DOUBLE, POJO],
)
TIME_WINDOW = WindowCodec(
    "org.apache.flink.streaming.api.windowing.windows.TimeWindow", ["start", "end"]
)

texts = st.one_of(
    st.text(alphabet=st.characters(max_codepoint=0x7F), max_size=40),
    st.text(max_size=12),  # any plane: 1 to 3 varint bytes per UTF-16 unit, surrogate pairs
    st.sampled_from(['a"b', "back\\slash", "tab\there", "", "x" * 300, "Kraków", "東京", "🙂"]),
)
java_texts = st.one_of(texts, st.text(st.characters(categories=["Cs"]), min_size=1, max_size=3))
doubles = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 1.0, 1e-4, 1e-5, 1e9, 1e16, 123.456, 1 / 7]),
)
pojo_values = st.one_of(
    st.none(),
    st.fixed_dictionaries(
        {
            "city": st.one_of(st.none(), java_texts),
            "count": st.one_of(st.none(), st.integers(-(2**31), 2**31 - 1)),
            "flag": st.one_of(st.none(), st.booleans()),
            "id": st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1)),
            "name": texts,
            "score": st.one_of(st.none(), doubles),
            "small": st.one_of(st.none(), st.floats(width=32)),
        }
    ),
)
longs = st.integers(-(2**63), 2**63 - 1)
tuple_values = st.fixed_dictionaries(
    {
        "f0": st.integers(-(2**31), 2**31 - 1),
        "f1": st.one_of(st.none(), java_texts),
        "f2": doubles,
        "f3": pojo_values,
    }
)
window_values = st.fixed_dictionaries({"start": longs, "end": longs})
row_values = st.fixed_dictionaries(
    {
        "__row_kind": st.integers(0, 3),
        "f0": st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1)),
        "f1": st.integers(-(2**31), 2**31 - 1),
        "f2": st.one_of(st.none(), doubles),
        "f3": texts,
        "f4": st.one_of(st.none(), texts),
        "f5": st.one_of(
            st.none(), st.integers(-(10**10) + 1, 10**10 - 1).map(lambda u: Decimal(u).scaleb(-2))
        ),
        "f6": st.booleans(),
        "f7": st.integers(-(2**15), 2**15 - 1),
    }
)


def encoded(codec: Codec, values: list[Any]) -> tuple[batch.Buffer, np.ndarray, np.ndarray]:
    """The values' bytes one after another, each after two bytes of noise (as in a block)."""
    data = bytearray()
    starts, ends = [], []
    for value in values:
        data += b"\x07\x7f"
        starts.append(len(data))
        codec.write(value, data)
        ends.append(len(data))
    return batch.Buffer(data), np.array(starts, np.int64), np.array(ends, np.int64)


def json_text(codec: Codec, value: Any) -> str:
    return json.dumps(None if value is None else codec.to_json(value), ensure_ascii=False)


def check(codec: Codec, values: list[Any]) -> int:
    """Batch and per-value reads agree on every row the batch reader takes, and it takes every
    row whose strings UTF-8 can hold; how many it took."""
    reader = batch.reader_for(codec)
    assert reader is not None
    buf, starts, ends = encoded(codec, values)
    live = np.ones(len(values), np.bool_)
    arrays, after, bad = reader.read(buf, starts, live)
    assert arrays.type == codec.arrow_type()
    texts = reader.json(arrays).to_pylist()
    taken = 0
    for i, value in enumerate(values):
        assert bad[i] == _has_unpaired_surrogate(value), (i, value)
        if bad[i]:
            continue
        taken += 1
        assert after[i] == ends[i]
        view = memoryview(bytes(buf.data[starts[i] : ends[i]]))
        expected = codec.decode(view)
        arrow = None if expected is None else codec.to_arrow(expected)
        assert _same(arrays[i].as_py(), arrow), (i, value)
        assert texts[i] == json_text(codec, expected), (i, value)
    return taken


def _has_unpaired_surrogate(value: Any) -> bool:
    """A string of `value` that keeps a surrogate once written as UTF-16 and read back."""
    if isinstance(value, dict):
        return any(_has_unpaired_surrogate(v) for v in value.values())
    if not isinstance(value, str):
        return False
    read_back = value.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    return any(0xD800 <= ord(c) < 0xE000 for c in read_back)


def _same(got: Any, want: Any) -> bool:
    if isinstance(got, dict) and isinstance(want, dict):
        return got.keys() == want.keys() and all(_same(got[k], want[k]) for k in got)
    if isinstance(got, float) and isinstance(want, float):
        return (math.isnan(got) and math.isnan(want)) or (got == want and str(got) == str(want))
    return bool(got == want)


@settings(max_examples=150, deadline=None)
@given(st.lists(pojo_values, min_size=1, max_size=30))
def test_pojo_batches_equal_per_value_reads(values: list[Any]) -> None:
    check(POJO, values)


@settings(max_examples=150, deadline=None)
@given(st.lists(tuple_values, min_size=1, max_size=30))
def test_tuple_batches_equal_per_value_reads(values: list[Any]) -> None:
    check(TUPLE, values)


@settings(max_examples=50, deadline=None)
@given(st.lists(window_values, min_size=1, max_size=30))
def test_time_window_batches_equal_per_value_reads(values: list[Any]) -> None:
    assert check(TIME_WINDOW, values) == len(values)


@settings(max_examples=50, deadline=None)
@given(st.lists(longs, min_size=1, max_size=30))
def test_ttl_timestamps_are_epoch_ms(stamps: list[int]) -> None:
    """`TtlSerializer`'s timestamp as the `ttl_timestamp` column holds it (`_put_value`)."""
    buf, starts, ends = encoded(scalars.LONG, stamps)
    reader = batch.TtlTimestamp()
    values, after, bad = reader.read(buf, starts, np.ones(len(stamps), np.bool_))
    assert not bad.any()
    assert after.tolist() == ends.tolist()
    assert values.equals(pa.array(stamps, pa.timestamp("ms", "UTC")))
    assert reader.json(values).to_pylist() == [json.dumps(t) for t in stamps]


@settings(max_examples=150, deadline=None)
@given(st.lists(row_values, min_size=1, max_size=30))
def test_row_data_batches_equal_per_value_reads(values: list[Any]) -> None:
    check(ROW, values)


def test_strings_of_every_plane_are_taken_and_unpaired_surrogates_left() -> None:
    values = [
        {"city": "Kraków", "count": 1, "flag": True, "id": 2, "name": "a", "score": 0.5,
         "small": 1.5},
        {"city": "Oslo", "count": None, "flag": None, "id": None, "name": 'q"\\', "score": None,
         "small": None},
        None,
        {"city": "東京 🙂", "count": 7, "flag": False, "id": 3, "name": "ß", "score": 1.0,
         "small": 2.0},
        {"city": "half \ud83d", "count": 7, "flag": False, "id": 3, "name": "x", "score": 1.0,
         "small": 2.0},
    ]  # fmt: skip
    assert check(POJO, values) == 4
    row = {"__row_kind": 0, "f0": 1, "f1": 2, "f2": 0.5, "f4": None, "f5": None, "f6": True,
           "f7": 3}  # fmt: skip
    # SQL strings are UTF-8; invalid bytes (read back as surrogates) are left to the codec
    assert check(ROW, [{**row, "f3": "ünï 🙂"}, {**row, "f3": "bad \udcff"}]) == 1


@pytest.mark.parametrize("codec", [scalars.LONG, scalars.INT, scalars.STRING, scalars.DOUBLE])
def test_scalars(codec: Codec) -> None:
    samples = {
        id(scalars.LONG): [0, -1, 2**63 - 1, -(2**63)],
        id(scalars.INT): [0, -5, 2**31 - 1],
        id(scalars.STRING): ["", "plain", None, "ünï", "new\nline", "日本語", "🙂" * 40],
        id(scalars.DOUBLE): [0.0, float("nan"), float("-inf"), 2.5, 1e300, 5e-324],
    }[id(codec)]
    assert check(codec, samples) >= len(samples) - 1


def test_truncated_values_are_left_to_the_codec() -> None:
    reader = batch.reader_for(POJO)
    assert reader is not None
    buf, starts, _ = encoded(POJO, [{"name": "abc", "id": 1}])
    short = batch.Buffer(bytes(buf.data[: len(buf) - 3]))
    _, _, bad = reader.read(short, starts, np.ones(1, np.bool_))
    assert bad.tolist() == [True]


@pytest.mark.parametrize("cut", range(1, 17))
def test_truncated_structs_are_left_to_the_codec(cut: int) -> None:
    value = {"f0": 1, "f1": "abc", "f2": 0.5, "f3": None}
    for codec, sample in ((TUPLE, value), (TIME_WINDOW, {"start": 1, "end": 2})):
        reader = batch.reader_for(codec)
        assert reader is not None
        buf, starts, ends = encoded(codec, [sample])
        if cut <= ends[0] - starts[0]:
            short = batch.Buffer(bytes(buf.data[: ends[0] - cut]))
            _, _, bad = reader.read(short, starts, np.ones(1, np.bool_))
            assert bad.tolist() == [True]


def test_unsupported_codecs_have_no_reader() -> None:
    with_subclass = PojoCodec("A", ["x"], [scalars.LONG], [], {"B": None})
    assert batch.reader_for(with_subclass) is None
    assert batch.reader_for(scalars.BIG_DECIMAL) is None
    assert batch.reader_for(None) is None
    assert batch.reader_for(Tuple0Codec()) is None  # the byte 42, no fields
    assert batch.reader_for(RowCodec(["f0"], [scalars.LONG], True)) is None  # a null mask first
    with_bytes = StructCodec("TUPLE1", "Tuple1", ["f0"], [scalars.BIG_DECIMAL])
    assert batch.reader_for(with_bytes) is None
    assert pa.types.is_struct(batch.reader_for(ROW).arrow_type)  # type: ignore[union-attr]


# --- enums ---------------------------------------------------------------------------------------

COLORS = EnumCodec("com.acme.Color", ("RED", "GREEN", "BLUE", 'ÜBER "q"', "tab\there"))
POJO_WITH_ENUM = PojoCodec("com.acme.Paint", ["color", "name"], [COLORS, scalars.STRING], [], {})
TUPLE_WITH_ENUM = StructCodec(
    "TUPLE2", "org.apache.flink.api.java.tuple.Tuple2", ["f0", "f1"], [COLORS, scalars.LONG]
)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.one_of(st.integers(-3, 8), st.integers(-(2**31), 2**31 - 1)), max_size=30))
def test_enum_batches_equal_per_value_reads(indexes: list[int]) -> None:
    """Every index in range is the constant's name; the others are left to the codec, which
    raises on them."""
    reader = batch.reader_for(COLORS)
    assert reader is not None
    data = b"".join(b"\x07" + i.to_bytes(4, "big", signed=True) for i in indexes)
    starts = np.arange(len(indexes), dtype=np.int64) * 5 + 1
    live = np.ones(len(indexes), np.bool_)
    values, after, bad = reader.read(batch.Buffer(data), starts, live)
    assert values.type == COLORS.arrow_type()
    texts = reader.json(values).to_pylist()
    for i, index in enumerate(indexes):
        view = memoryview(data[starts[i] : starts[i] + 4])
        if not 0 <= index < len(COLORS.constants):
            assert bad[i]
            with pytest.raises(FormatError):
                COLORS.decode(view)
            continue
        assert not bad[i] and after[i] == starts[i] + 4
        assert values[i].as_py() == COLORS.to_arrow(COLORS.decode(view))
        assert texts[i] == json_text(COLORS, COLORS.decode(view))


def test_truncated_enums_are_left_to_the_codec() -> None:
    reader = batch.reader_for(COLORS)
    assert reader is not None
    buf = batch.Buffer(b"\x00\x00\x01")
    _, _, bad = reader.read(buf, np.zeros(1, np.int64), np.ones(1, np.bool_))
    assert bad.tolist() == [True]


def test_enums_without_constants_or_with_unpaired_surrogates() -> None:
    empty = batch.reader_for(EnumCodec("E", ()))
    assert empty is not None
    buf = batch.Buffer(b"\x00\x00\x00\x00")
    values, _, bad = empty.read(buf, np.zeros(1, np.int64), np.ones(1, np.bool_))
    assert bad.tolist() == [True] and values.null_count == 1
    assert batch.reader_for(EnumCodec("E", ("half \ud83d",))) is None  # UTF-8 cannot hold it


paint_values = st.one_of(
    st.none(),
    st.fixed_dictionaries(
        {"color": st.one_of(st.none(), st.sampled_from(COLORS.constants)), "name": texts}
    ),
)


@settings(max_examples=100, deadline=None)
@given(st.lists(paint_values, min_size=1, max_size=30))
def test_enum_fields_of_pojos_equal_per_value_reads(values: list[Any]) -> None:
    check(POJO_WITH_ENUM, values)


@settings(max_examples=50, deadline=None)
@given(
    st.lists(
        st.fixed_dictionaries({"f0": st.sampled_from(COLORS.constants), "f1": longs}),
        min_size=1,
        max_size=30,
    )
)
def test_enum_fields_of_tuples_equal_per_value_reads(values: list[Any]) -> None:
    assert check(TUPLE_WITH_ENUM, values) == len(values)


# --- keyed LIST values: elements joined by "," ---------------------------------------------------

LIST_ELEMENTS = {
    "long": (scalars.LONG, longs),
    "enum": (COLORS, st.sampled_from(COLORS.constants)),
    "window": (TIME_WINDOW, window_values),  # fixed width, located at once
    "string": (scalars.STRING, st.one_of(st.none(), java_texts)),
    "tuple": (StructCodec(  # variable width, located in rounds
        "TUPLE2", "Tuple2", ["f0", "f1"], [scalars.STRING, COLORS]
    ), st.fixed_dictionaries(
        {"f0": st.one_of(st.none(), texts), "f1": st.sampled_from(COLORS.constants)}
    )),
}  # fmt: skip
LIST_DAMAGE = [None, None, None, "cut", "extra", "trailing-comma", "semicolon", "empty"]


def _list_bytes(element: Codec, values: list[Any], damage: str | None) -> bytes:
    stored = join_list(element, values)
    if damage == "cut":
        return stored[:-1]
    if damage == "extra":
        return stored + b"\x00"
    if damage == "trailing-comma":
        return stored + b","
    if damage == "semicolon":
        return stored.replace(b",", b";", 1)
    if damage == "empty":
        return b""
    return stored


@pytest.mark.parametrize("name", LIST_ELEMENTS)
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_list_batches_equal_per_value_reads(name: str, data: st.DataObject) -> None:
    """Every list the batch reader takes equals `split_list`'s (Arrow values and JSON text);
    it takes every list `split_list` reads whose strings UTF-8 can hold and that has no more
    elements than its rounds (here 4)."""
    element, values = LIST_ELEMENTS[name]
    lists = data.draw(
        st.lists(
            st.tuples(st.lists(values, max_size=7), st.sampled_from(LIST_DAMAGE)),
            min_size=1,
            max_size=20,
        )
    )
    reader = batch.list_reader_for(element)
    assert reader is not None
    reader.MAX_ROUNDS = 4
    stored = [_list_bytes(element, items, damage) for items, damage in lists]
    buf = batch.Buffer(b"".join(b"\x07" + s for s in stored))
    sizes = np.array([len(s) for s in stored], np.int64)
    starts = np.cumsum(sizes + 1) - sizes
    live = np.ones(len(lists), np.bool_)
    arrays, bad = reader.read_until(buf, starts, starts + sizes, live)
    assert arrays.type == pa.list_(element.arrow_type())
    texts = reader.json(arrays).to_pylist()
    for i in range(len(lists)):
        try:
            expected = split_list(element, stored[i])
        except DECODE_ERRORS:
            assert bad[i]
            continue
        fits = reader.width is not None or len(expected) <= reader.MAX_ROUNDS
        assert bad[i] == (any(map(_has_unpaired_surrogate, expected)) or not fits), i
        if bad[i]:
            continue
        want = [None if v is None else element.to_arrow(v) for v in expected]
        assert _same_list(arrays[i].as_py(), want), i
        json_form = [None if v is None else element.to_json(v) for v in expected]
        assert texts[i] == json.dumps(json_form, ensure_ascii=False), i


def _same_list(got: list[Any], want: list[Any]) -> bool:
    return len(got) == len(want) and all(_same(g, w) for g, w in zip(got, want, strict=True))


def test_list_readers_need_element_readers() -> None:
    assert batch.list_reader_for(scalars.BIG_DECIMAL) is None
    assert batch.list_reader_for(scalars.VOID) is None
    assert batch.list_reader_for(None) is None
    fixed = batch.list_reader_for(scalars.LONG)
    assert fixed is not None and fixed.width == 8
    with pytest.raises(TypeError):  # a list is read up to its entry's end
        fixed.read(batch.Buffer(b""), np.zeros(0, np.int64), np.zeros(0, np.bool_))


# --- collections: List, Set, Map, object and primitive arrays, Nullable, Option --------------------

NULLABLE_STRING = NullableCodec(scalars.STRING, 0)
PAIR = StructCodec(
    "TUPLE2", "org.apache.flink.api.java.tuple.Tuple2", ["f0", "f1"], [scalars.STRING, scalars.LONG]
)
COLLECTIONS: dict[str, tuple[Codec, Any]] = {
    "list-string": (ListCodec(scalars.STRING), st.lists(st.one_of(st.none(), java_texts))),
    "list-long": (ListCodec(scalars.LONG), st.lists(longs)),
    "set-int": (SetCodec(scalars.INT), st.lists(st.one_of(st.none(), st.integers(-99, 99)))),
    "set-string": (SetCodec(NULLABLE_STRING), st.lists(st.one_of(st.none(), texts))),
    "set-tuple": (SetCodec(PAIR), st.lists(st.fixed_dictionaries({"f0": texts, "f1": longs}))),
    "set-double": (SetCodec(scalars.DOUBLE), st.lists(doubles)),
    "map-string-long": (
        MapCodec(NULLABLE_STRING, scalars.LONG),
        st.lists(st.tuples(st.one_of(st.none(), st.sampled_from("abc"), texts), st.none() | longs)),
    ),
    "map-int-string": (
        MapCodec(scalars.INT, scalars.STRING),
        st.lists(st.tuples(st.integers(-20, 20), st.none() | texts)),
    ),
    "map-tuple-enum": (
        MapCodec(PAIR, COLORS),
        st.lists(
            st.tuples(
                st.fixed_dictionaries({"f0": texts, "f1": longs}), st.sampled_from(COLORS.constants)
            )
        ),
    ),
    "object-array": (ObjectArrayCodec(scalars.LONG), st.lists(st.none() | longs)),
}
PRIMITIVE_ARRAYS: dict[str, tuple[str, Any]] = {
    "IntPrimitiveArray": ("i", st.integers(-(2**31), 2**31 - 1)),
    "LongPrimitiveArray": ("q", longs),
    "ShortPrimitiveArray": ("h", st.integers(-(2**15), 2**15 - 1)),
    "DoublePrimitiveArray": ("d", doubles),
    "FloatPrimitiveArray": ("f", st.floats(width=32)),
    "BooleanPrimitiveArray": ("?", st.booleans()),
}
for _name, (_, _elements) in PRIMITIVE_ARRAYS.items():
    COLLECTIONS[_name] = (scalars.PRIMITIVE_ARRAYS[_name], st.lists(_elements))
COLLECTIONS["bytes"] = (scalars.BYTES, st.binary(max_size=40))
COLLECTIONS["nullable-padded-long"] = (NullableCodec(scalars.LONG, 8), st.none() | longs)
COLLECTIONS["option-string"] = (OptionCodec(scalars.STRING), st.none() | texts)
FIXTURE_POJO = PojoCodec(
    "statectl.values.Model$Pojo",
    ["codes", "counts", "payload", "tags"],
    [
        NullableCodec(SetCodec(scalars.INT), 0),
        NullableCodec(MapCodec(NULLABLE_STRING, scalars.LONG), 0),
        scalars.BYTES,
        NullableCodec(ListCodec(NULLABLE_STRING), 0),
    ],
    [],
    {},
)
COLLECTIONS["pojo"] = (
    FIXTURE_POJO,
    st.none()
    | st.fixed_dictionaries(
        {
            "codes": st.none() | st.lists(st.none() | st.integers(-5, 50)),
            "counts": st.none() | st.lists(st.tuples(texts, st.none() | longs)),
            "payload": st.none() | st.binary(max_size=10),
            "tags": st.none() | st.lists(st.none() | java_texts),
        }
    ),
)


def _left_to_codec(value: Any) -> bool:
    """A value the batch readers leave: an unpaired surrogate, a null map key, or more elements
    than `Sized.MAX_ROUNDS`."""
    if isinstance(value, dict):
        return any(_left_to_codec(v) for v in value.values())
    if isinstance(value, list | tuple):
        if isinstance(value, list) and len(value) > batch.Sized.MAX_ROUNDS:
            return True
        if any(isinstance(v, tuple) and v[0] is None for v in value):  # a map's null key
            return True
        return any(_left_to_codec(v) for v in value)
    return _has_unpaired_surrogate(value)


def check_collections(codec: Codec, values: list[Any]) -> None:
    """Each row the reader takes equals the codec's read; the others are those it must leave."""
    reader = batch.reader_for(codec)
    assert reader is not None
    buf, starts, ends = encoded(codec, values)
    arrays, after, bad = reader.read(buf, starts, np.ones(len(values), np.bool_))
    assert arrays.type == codec.arrow_type()
    texts = reader.json(arrays).to_pylist()
    for i, value in enumerate(values):
        if bad[i]:
            assert _left_to_codec(value), (i, value)
            continue
        assert after[i] == ends[i]
        expected = codec.decode(memoryview(bytes(buf.data[starts[i] : ends[i]])))
        arrow = None if expected is None else codec.to_arrow(expected)
        assert _same_nested(arrays[i].as_py(), arrow), (i, value)
        assert texts[i] == json_text(codec, expected), (i, value)


def _same_nested(got: Any, want: Any) -> bool:
    if isinstance(got, list) and isinstance(want, list):
        return len(got) == len(want) and all(map(_same_nested, got, want))
    if isinstance(got, tuple) and isinstance(want, tuple):
        return len(got) == len(want) and all(map(_same_nested, got, want))
    if isinstance(got, dict) and isinstance(want, dict):
        return got.keys() == want.keys() and all(_same_nested(got[k], want[k]) for k in got)
    return _same(got, want)


@pytest.mark.parametrize("name", sorted(COLLECTIONS))
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_collection_batches_equal_per_value_reads(name: str, data: st.DataObject) -> None:
    codec, values = COLLECTIONS[name]
    check_collections(codec, data.draw(st.lists(values, min_size=1, max_size=12)))


def test_long_collections_are_left_to_the_codec() -> None:
    many = list(range(batch.Sized.MAX_ROUNDS + 1))
    check_collections(SetCodec(scalars.INT), [many, many[:3]])
    check_collections(ListCodec(scalars.LONG), [many * 10, []])  # fixed width: no rounds


@pytest.mark.parametrize("name", sorted(COLLECTIONS))
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_damaged_collections_are_taken_only_as_the_codec_reads_them(
    name: str, data: st.DataObject
) -> None:
    """Random, cut or rewritten bytes never raise: a row taken is what the codec reads."""
    codec, values = COLLECTIONS[name]
    reader = batch.reader_for(codec)
    assert reader is not None
    value = data.draw(values)
    good = bytearray()
    codec.write(value, good)
    damaged = data.draw(
        st.one_of(
            st.binary(max_size=30),
            st.integers(0, len(good)).map(lambda cut: bytes(good[:cut])),
            st.tuples(st.integers(0, max(len(good) - 1, 0)), st.integers(0, 255)).map(
                lambda at_byte: _with_byte(bytes(good), *at_byte)
            ),
        )
    )
    buf = batch.Buffer(damaged)
    _, after, bad = reader.read(buf, np.zeros(1, np.int64), np.ones(1, np.bool_))
    if bad[0] or after[0] > len(damaged):
        return
    expected, end = codec.read(memoryview(damaged), 0)
    assert end == after[0]
    check_collections(codec, [expected])


def _with_byte(data: bytes, at: int, byte: int) -> bytes:
    return data[:at] + bytes([byte]) + data[at + 1 :] if data else data


def test_collections_of_voids_or_unread_elements_have_no_reader() -> None:
    assert batch.reader_for(ListCodec(scalars.VOID)) is None
    assert batch.reader_for(MapCodec(scalars.STRING, scalars.BIG_DECIMAL)) is None
    assert batch.reader_for(NullableCodec(scalars.BIG_DECIMAL, 0)) is None


# --- declared sizes that overlap (hostile input) -------------------------------------------------

BOMB_ROWS, BOMB_BYTES = 4096, 4 << 20


def _overlapping_rows(write_row: Any, spacing: int, rows: int) -> tuple[batch.Buffer, np.ndarray]:
    """`rows` values `spacing` bytes apart in a buffer of `BOMB_BYTES`, each declaring a size
    that runs far past the next one (most to the buffer's end): each fits, together they ask
    for many times the buffer."""
    data = bytearray(BOMB_BYTES)
    starts = np.arange(rows, dtype=np.int64) * spacing
    for start in starts.tolist():
        write_row(data, start, BOMB_BYTES - start)
    return batch.Buffer(data), starts


def _byte_array(data: bytearray, at: int, left: int) -> None:
    data[at : at + 4] = (left - 4).to_bytes(4, "big")


def _int_array(data: bytearray, at: int, left: int) -> None:
    data[at : at + 4] = ((left - 4) // 4).to_bytes(4, "big")


def _java_string(data: bytearray, at: int, left: int) -> None:
    data[at : at + 2] = b"\xff\x7f"  # varint 16383: the longest string the batch path takes


def _sql_row(data: bytearray, at: int, left: int) -> None:
    """A BinaryRowData running to the end, its VARCHAR slot (3) spanning all of it."""
    size = left - 4
    data[at : at + 4] = size.to_bytes(4, "big")
    data[at + 4 + 8 + 3 * 8 : at + 4 + 8 + 4 * 8] = size.to_bytes(8, "little")  # offset 0


@pytest.mark.parametrize(
    ("codec", "write_row", "spacing", "rows"),
    [
        (scalars.BYTES, _byte_array, 8, BOMB_ROWS),
        (scalars.PRIMITIVE_ARRAYS["IntPrimitiveArray"], _int_array, 8, BOMB_ROWS),
        (ROW, _sql_row, 80, BOMB_ROWS),
        (scalars.STRING, _java_string, 16, 200_000),
    ],
    ids=["byte[]", "int[]", "RowData", "String"],
)
def test_overlapping_declared_sizes_are_left_to_the_codec_before_allocating(
    codec: Codec, write_row: Any, spacing: int, rows: int
) -> None:
    """Before any row failed, the readers asked for every row's declared bytes at once (here
    3 GiB or more for a 4 MiB batch); rows whose bytes run into the next row's are now left to
    the codec (which reads each value from its own bytes), the last one is taken."""
    from tests.formats.test_bombs import bounded

    reader = batch.reader_for(codec)
    assert reader is not None

    def read() -> None:
        buf, starts = _overlapping_rows(write_row, spacing, rows)
        _, _, bad = reader.read(buf, starts, np.ones(rows, np.bool_))
        assert bad[:-1].all() and not bad[-1], np.flatnonzero(~bad)

    assert bounded(read) == "no error"
