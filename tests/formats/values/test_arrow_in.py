"""Values back from Arrow (`arrow_in`, `Codec.from_arrow`) and the `StateCodec` encoders, on
hand-made values: the cases the fixture savepoints do not hold (see test_roundtrip.py for them).

A value goes to Arrow as the typed table builds it (`to_arrow`, built in the storage type then
cast, as `savepoint/tables.py` does), comes back with `values_from_arrow` and must encode to the
bytes the original value encodes to.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest

from statectl.errors import FormatError
from statectl.formats.logical_types import LogicalType
from statectl.formats.state_values import StateCodec
from statectl.formats.values import Codec, Raw, RawCodec, TtlCodec, Undecodable
from statectl.formats.values.arrow_in import storage_type, values_from_arrow
from statectl.formats.values.avro import AvroCodec, Branch, parse_writer_schema
from statectl.formats.values.composites import (
    Either,
    EitherCodec,
    ListCodec,
    MapCodec,
    NullableCodec,
    ObjectArrayCodec,
    RowCodec,
    StructCodec,
)
from statectl.formats.values.kryo import KRYO5, KryoCodec, KryoObject, build_registry
from statectl.formats.values.pojo import CLASS, PojoCodec
from statectl.formats.values.row_data import RowDataCodec, TimestampDataCodec
from statectl.formats.values.scalars import (
    BIG_DECIMAL,
    BIG_INTEGER,
    DOUBLE,
    INSTANT,
    INT,
    JAVA_DATE,
    LOCAL_DATE,
    LOCAL_DATE_TIME,
    LOCAL_TIME,
    LONG,
    SQL_DATE,
    SQL_TIME,
    SQL_TIMESTAMP,
    STRING,
    VOID,
    JavaBigInteger,
)

DAY_MS = 86_400_000


def through_arrow(codec: Codec, values: list[Any]) -> list[Any]:
    """`values` into a column as `tables._array` builds it, and back."""
    arrow = codec.arrow_type()
    storage = storage_type(arrow)
    column = pa.array([None if v is None else codec.to_arrow(v) for v in values], type=storage)
    if storage != arrow:
        column = column.cast(arrow)
    return values_from_arrow(codec, pa.chunked_array([column.slice(0, 1), column.slice(1)]))


def pojo() -> PojoCodec:
    point = PojoCodec("Point3", ["x", "z"], [INT, INT], [], {})
    return PojoCodec("Point", ["x"], [INT], ["Point3"], {"Point3": point})


AVRO = AvroCodec(
    "Rec",
    parse_writer_schema(
        '{"type":"record","name":"Rec","fields":['
        '{"name":"d","type":{"type":"int","logicalType":"date"}},'
        '{"name":"t","type":{"type":"long","logicalType":"timestamp-micros"}},'
        '{"name":"u","type":["null","int","string"]},'
        '{"name":"m","type":{"type":"map","values":["null","long"]}},'
        '{"name":"x","type":{"type":"fixed","name":"Money","size":4,'
        '"logicalType":"decimal","precision":6,"scale":2}}]}'
    ),
)
ROW = RowDataCodec(
    (
        LogicalType("TIMESTAMP_WITHOUT_TIME_ZONE", precision=6),
        LogicalType("DATE"),
        LogicalType("TIME_WITHOUT_TIME_ZONE", precision=0),
        LogicalType(
            "ROW",
            children=(LogicalType("TIMESTAMP_WITH_LOCAL_TIME_ZONE", precision=9),),
            field_names=("ts",),
        ),
        LogicalType("ARRAY", children=(LogicalType("DECIMAL", precision=20, scale=3),)),
    )
)

CASES: list[tuple[str, Codec, list[Any]]] = [
    # date64 keeps the millis of a local midnight that `as_py()`'s date would drop
    ("sql date", SQL_DATE, [-3_600_000, 0, None, 19_000 * DAY_MS + 1]),
    ("sql time", SQL_TIME, [0, 45_296_789, DAY_MS - 1]),
    ("sql timestamp", SQL_TIMESTAMP, [1_700_000_000_123_456_789, -1, 0]),
    ("instant", INSTANT, [-5, 1_700_000_000_000_000_001]),
    ("java date", JAVA_DATE, [1_700_000_000_123, -1]),
    ("local date", LOCAL_DATE, [-719_528, 0, 2_932_896]),
    ("local time", LOCAL_TIME, [0, 86_399_999_999_999]),
    ("local date time", LOCAL_DATE_TIME, [-1, 1_700_000_000_123_456_789]),
    ("big integer", BIG_INTEGER, [-(10**40), 12345, 0, 10]),
    ("big decimal", BIG_DECIMAL, [Decimal("1.500"), Decimal("-0.0000001"), Decimal("12")]),
    ("double", DOUBLE, [float("nan"), float("-inf"), -0.0]),
    ("list of instants", ListCodec(INSTANT), [[1, 2], []]),
    ("array with nulls", ObjectArrayCodec(SQL_DATE), [[None, -3_600_000]]),
    ("map", MapCodec(STRING, LOCAL_TIME), [[("a", 1), ("b", None)], []]),
    ("nullable", NullableCodec(SQL_TIME, 0), [None, 7]),
    ("either", EitherCodec(LONG, STRING), [Either(True, 5), Either(False, "x")]),
    (
        "tuple",
        StructCodec("TUPLE2", "Tuple2", ["f0", "f1"], [INSTANT, STRING]),
        [{"f0": 1, "f1": None}],
    ),
    ("row", RowCodec(["f0"], [SQL_DATE], True), [{"f0": 5, "__row_kind": 3}]),
    ("pojo", pojo(), [{"x": 1}, {"x": None}, {"x": 2, "z": 3, CLASS: "Point3"}]),
    (
        "avro",
        AVRO,
        [
            {
                "d": 1,
                "t": -1,
                "u": Branch(2, "s"),
                "m": [("k", None), ("k", 7)],
                "x": Decimal("1.25"),
            },
            {"d": 0, "t": 0, "u": None, "m": [], "x": Decimal("-0.01")},
            {"d": 0, "t": 0, "u": Branch(1, 3), "m": [], "x": Decimal("0.00")},
        ],
    ),
    (
        "row data",
        ROW,
        [
            {
                "__row_kind": 2,
                "f0": 1_700_000_000_123_456_000,
                "f1": -1,
                "f2": 3_600_000,
                "f3": {"__row_kind": 0, "ts": 1_700_000_000_123_456_789},
                "f4": [Decimal("1.250"), None],
            }
        ],
    ),
    ("timestamp data", TimestampDataCodec(9), [1_700_000_000_123_456_789]),
]


@pytest.mark.parametrize(("name", "codec", "values"), CASES, ids=[c[0] for c in CASES])
def test_values_come_back_from_arrow_to_their_bytes(
    name: str, codec: Codec, values: list[Any]
) -> None:
    back = through_arrow(codec, values)
    assert len(back) == len(values)
    for value, again in zip(values, back, strict=True):
        if value is None:
            assert again is None
        else:
            assert codec.encode(again) == codec.encode(value), (value, again)


def test_temporal_columns_come_back_as_the_integers_of_their_unit() -> None:
    assert through_arrow(SQL_DATE, [-3_600_000]) == [-3_600_000]
    assert through_arrow(INSTANT, [1_700_000_000_000_000_001]) == [1_700_000_000_000_000_001]
    assert storage_type(pa.struct([("t", pa.list_(pa.time64("ns")))])) == pa.struct(
        [("t", pa.list_(pa.int64()))]
    )


def test_kryo_json_does_not_come_back() -> None:
    codec = KryoCodec("java.lang.Object", KRYO5, build_registry((), KRYO5))
    value = KryoObject("java.lang.Integer", 5)
    with pytest.raises(Undecodable, match="Kryo"):
        through_arrow(codec, [value])


def test_a_column_without_a_codec_comes_back_raw() -> None:
    assert values_from_arrow(None, pa.array([b"\x01", None])) == [
        Raw(b"\x01", "unknown", "no serializer"),
        None,
    ]
    codec = RawCodec("com.acme.Thing", "no decoder")
    (raw,) = values_from_arrow(codec, pa.array([b"\x02"]))
    assert raw == Raw(b"\x02", "com.acme.Thing", "no decoder") and codec.encode(raw) == b"\x02"


# --- StateCodec encoders ---------------------------------------------------------------------------


def state(kind: str, value: Codec | None, *, ttl: bool = False, **parts: Codec) -> StateCodec:
    wrapped = TtlCodec(value) if ttl and value is not None else value
    return StateCodec(
        kind, True, parts.get("key", STRING), VOID, parts.get("user_key"), wrapped, ttl
    )


def test_void_namespace_is_one_zero_byte() -> None:
    codec = state("VALUE", LONG)
    assert codec.encode_namespace(None) == b"\x00"
    assert codec.decode_namespace(b"\x00") is None


@pytest.mark.parametrize(
    ("codec", "value", "ttl", "stored"),
    [
        (state("VALUE", LONG), 7, None, bytes(7) + b"\x07"),
        (state("VALUE", LONG, ttl=True), 7, 1, bytes(7) + b"\x01" + bytes(7) + b"\x07"),
        (state("LIST", INT), [1, 2], None, b"\x00\x00\x00\x01,\x00\x00\x00\x02"),
        (state("LIST", INT), [], None, b""),
        (
            state("LIST", INT, ttl=True),
            [1, 2],
            [3, 4],
            bytes(7) + b"\x03\x00\x00\x00\x01," + bytes(7) + b"\x04\x00\x00\x00\x02",
        ),
        (state("MAP", INT, user_key=STRING), 1, None, b"\x00\x00\x00\x00\x01"),
        (state("MAP", INT, user_key=STRING), None, None, b"\x01"),
        (
            state("MAP", STRING, user_key=STRING, ttl=True),
            None,
            9,
            b"\x00" + bytes(7) + b"\x09\x00",
        ),
        (state("MAP", STRING, user_key=STRING, ttl=True), None, None, b"\x01"),
    ],
)
def test_encode_value_inverts_decode_value(
    codec: StateCodec, value: Any, ttl: Any, stored: bytes
) -> None:
    assert codec.encode_value(value, ttl) == stored
    decoded = codec.decode_value(stored)
    assert (decoded.value, decoded.ttl_timestamp) == (value, ttl)


def test_a_heap_null_map_value_keeps_the_serializers_null() -> None:
    codec = state("MAP", STRING, user_key=STRING)
    heap = codec.encode_value(None, heap_null_map_value=True)
    assert heap == b"\x01\x00"  # StringSerializer's null: length 0
    assert codec.decode_value(heap).value is None
    assert codec.encode_value(None) == b"\x01"


def test_raw_parts_encode_to_their_own_bytes() -> None:
    codec = state("VALUE", LONG)
    raw = Raw(b"\xde\xad", "Long", "bad")
    assert codec.encode_value(raw) == b"\xde\xad"
    assert codec.encode_key(raw) == b"\xde\xad"
    unknown = StateCodec("VALUE", True, RawCodec("K", "no decoder"), VOID, None, None)
    assert unknown.encode_key(Raw(b"\x01", "K", "no decoder")) == b"\x01"
    with pytest.raises(FormatError, match="no decoder"):
        unknown.encode_key("k")
    with pytest.raises(FormatError, match="no serializer"):
        unknown.encode_value(5)


def test_timers_have_no_value_bytes() -> None:
    assert StateCodec("TIMERS", True, STRING, VOID).encode_value(None) == b""


@pytest.mark.parametrize(
    ("codec", "value", "ttl", "message"),
    [
        (state("VALUE", LONG, ttl=True), 7, None, "needs the value's ttl_timestamp"),
        (state("LIST", INT, ttl=True), [1, 2], [3], "one ttl_timestamp per element"),
        (state("LIST", INT, ttl=True), [1], 3, "one ttl_timestamp per element"),
        (state("LIST", INT), 5, None, "list of elements"),
        (state("LIST", INT), [1, "x"], None, "LIST element 'x' is not a INT"),
        (state("MAP", INT, user_key=STRING, ttl=True), 1, None, "needs the value's ttl"),
        (state("VALUE", LONG), "seven", None, "VALUE value 'seven' is not a BIGINT"),
    ],
)
def test_values_that_cannot_be_written_say_why(
    codec: StateCodec, value: Any, ttl: Any, message: str
) -> None:
    with pytest.raises(FormatError, match=message):
        codec.encode_value(value, ttl)


def test_state_columns_come_back_from_a_table() -> None:
    codec = state("LIST", SQL_DATE, ttl=True)
    table = pa.table(
        {
            "key": ["a", "b"],
            "namespace": pa.array([None, None], pa.null()),
            "value": pa.array([[-3_600_000, None], None], pa.list_(pa.int64())).cast(
                pa.list_(pa.date64())
            ),
            "ttl_timestamp": pa.array([[1, 2], None], pa.list_(pa.timestamp("ms", "UTC"))),
        }
    )
    assert table.schema.equals(codec.arrow_schema(), check_metadata=False)
    assert codec.column_from_arrow("key", table["key"]) == ["a", "b"]
    assert codec.column_from_arrow("value", table["value"]) == [[-3_600_000, None], None]
    assert codec.column_from_arrow("ttl_timestamp", table["ttl_timestamp"]) == [[1, 2], None]


# --- what Arrow cannot carry back ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("codec", "value", "why"),
    [
        # plain notation (docs/values.md) keeps a BigDecimal's value, not a negative scale
        (BIG_DECIMAL, Decimal("5E+3"), "5000 at scale 0"),
        # a BigInteger 0, 1 or 10 Flink wrote in bytes (not as its constant) comes back as one
        (BIG_INTEGER, JavaBigInteger(10), "the constant TEN"),
        # time32(ms) is a time of day: a java.sql.Time before 1970-01-01 (a zone east of UTC)
        (SQL_TIME, -1_800_000, "23:30 on 1970-01-01"),
        # Arrow strings are UTF-8: a lone surrogate becomes U+FFFD
        (STRING, "a\ud800", "a\ufffd"),
    ],
)
def test_arrow_forms_that_keep_the_value_but_not_the_bytes(
    codec: Codec, value: Any, why: str
) -> None:
    """Known limits of the typed table: each comes back, but encodes differently (a write-back
    has to keep such a part's original bytes unless it was edited)."""
    (back,) = through_arrow(codec, [value])
    assert codec.encode(back) != codec.encode(value), why
