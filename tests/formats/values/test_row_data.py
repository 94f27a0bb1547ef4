"""The Table runtime codecs (row_data.py, binary_row.py) on the byte examples of
flink-state-values.md §7: each decodes to the documented value, gives the JSON of docs/values.md,
re-encodes to the very same bytes, and converts to its Arrow type."""

from __future__ import annotations

import pickle
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest

from statectl.formats.logical_types import LogicalType
from statectl.formats.serializer_snapshots import SerializerSnapshot
from statectl.formats.values import Codec, RawCodec, codec_for

TYPEUTILS = "org.apache.flink.table.runtime.typeutils."
ROW_DATA = TYPEUTILS + "RowDataSerializer$RowDataSerializerSnapshot"

STRING = LogicalType("VARCHAR", length=2147483647)
BIGINT = LogicalType("BIGINT")
INT = LogicalType("INTEGER")


def decimal(precision: int, scale: int) -> LogicalType:
    return LogicalType("DECIMAL", precision=precision, scale=scale)


def timestamp(precision: int, zone: bool = False) -> LogicalType:
    root = "TIMESTAMP_WITH_LOCAL_TIME_ZONE" if zone else "TIMESTAMP_WITHOUT_TIME_ZONE"
    return LogicalType(root, precision=precision)


def row_type(**fields: LogicalType) -> LogicalType:
    return LogicalType("ROW", children=tuple(fields.values()), field_names=tuple(fields))


def snapshot(name: str, *nested: SerializerSnapshot, **params: Any) -> SerializerSnapshot:
    return SerializerSnapshot(name, 3, nested, params=tuple(params.items()))


def row_data(*types: LogicalType) -> SerializerSnapshot:
    return snapshot(ROW_DATA, types=types)


def unhex(text: str) -> bytes:
    return bytes.fromhex(text.replace(" ", "").replace("|", "").replace("\n", ""))


def check(codec_snapshot: SerializerSnapshot, hexbytes: str, json_form: Any) -> Any:
    """Decodes to `json_form`, re-encodes to the same bytes, converts to its Arrow type."""
    codec = codec_for(codec_snapshot)
    assert not isinstance(codec, RawCodec), codec
    data = unhex(hexbytes)
    value = codec.decode(data)
    assert codec.to_json(value) == json_form
    assert codec.encode(value) == data
    assert pa.array([codec.to_arrow(value)], codec.arrow_type()).type == codec.arrow_type()
    return value


# --- §7.1, §7.5: rows --------------------------------------------------------------------------


def test_row_of_an_inline_string_and_a_long() -> None:
    value = check(
        row_data(STRING, BIGINT),
        "00000018 | 0000000000000000 | 6100000000000081 | 0500000000000000",
        {"f0": "a", "f1": 5},
    )
    assert value["__row_kind"] == 0


def test_row_kind_and_null_bits() -> None:
    value = check(
        row_data(STRING, BIGINT),
        "00000018 | 0303000000000000 | 0000000000000000 | 0000000000000000",
        {"f0": None, "f1": None},
    )
    assert value["__row_kind"] == 3  # -D


def test_empty_row() -> None:
    check(row_data(), "00000008 | 0000000000000000", {})


def test_raw_field_is_base64_of_its_bytes() -> None:
    raw = LogicalType("RAW", class_name="java.lang.String")
    check(
        row_data(raw),
        "00000018 | 0000000000000000 | 0200000010000000 | 0278000000000000",
        {"f0": "Ang="},
    )


# The measured 21-field row of §7.2 (RowKind -U, field 10 null), every slot and chunk.
ROW_21 = (
    BIGINT, INT, LogicalType("BOOLEAN"), LogicalType("DOUBLE"), LogicalType("VARCHAR", length=10),
    STRING, decimal(10, 2), decimal(20, 3), timestamp(3), timestamp(9), timestamp(6, zone=True),
    LogicalType("VARBINARY", length=100), LogicalType("DATE"),
    LogicalType("TIME_WITHOUT_TIME_ZONE", precision=0), LogicalType("ARRAY", children=(INT,)),
    LogicalType("MAP", children=(STRING, BIGINT)), row_type(a=INT, b=STRING),
    LogicalType("SMALLINT"), LogicalType("TINYINT"), LogicalType("FLOAT"),
    LogicalType("CHAR", length=3),
)  # fmt: skip
ROW_21_BYTES = """00000140
01 00 04 00 00 00 00 00  01 00 00 00 00 00 00 00  02 00 00 00 00 00 00 00  01 00 00 00 00 00 00 00
00 00 00 00 00 00 F8 3F  61 62 63 00 00 00 00 83  0C 00 00 00 B0 00 00 00  D2 04 00 00 00 00 00 00
02 00 00 00 C0 00 00 00  E8 03 00 00 00 00 00 00  05 00 00 00 D0 00 00 00  00 00 00 00 00 00 00 00
09 00 00 00 D8 00 00 00  38 4A 00 00 00 00 00 00  80 EE 36 00 00 00 00 00  18 00 00 00 E8 00 00 00
24 00 00 00 00 01 00 00  18 00 00 00 28 01 00 00  2C 01 00 00 00 00 00 00  FF 00 00 00 00 00 00 00
00 00 C0 3F 00 00 00 00  61 62 20 00 00 00 00 83
68 65 6C 6C 6F 20 77 6F 72 6C 64 21 00 00 00 00
FA 24 00 00 00 00 00 00 00 00 00 00 00 00 00 00
E8 03 00 00 00 00 00 00
01 02 03 04 05 06 07 08 09 00 00 00 00 00 00 00
03 00 00 00 02 00 00 00 01 00 00 00 00 00 00 00 03 00 00 00 00 00 00 00
10 00 00 00 01 00 00 00 00 00 00 00 6B 00 00 00 00 00 00 81
01 00 00 00 00 00 00 00 07 00 00 00 00 00 00 00 00 00 00 00
00 00 00 00 00 00 00 00 05 00 00 00 00 00 00 00 78 00 00 00 00 00 00 81"""
ROW_21_JSON = {
    "f0": 1, "f1": 2, "f2": True, "f3": 1.5, "f4": "abc", "f5": "hello world!", "f6": "12.34",
    "f7": "-1.500", "f8": "1970-01-01T00:00:01", "f9": "1970-01-01T00:00:01.000000005",
    "f10": None, "f11": "AQIDBAUGBwgJ", "f12": "2022-01-08", "f13": "01:00:00",
    "f14": [1, None, 3], "f15": {"k": 7}, "f16": {"a": 5, "b": "x"}, "f17": 300, "f18": -1,
    "f19": 1.5, "f20": "ab ",
}  # fmt: skip


def test_the_measured_21_field_row() -> None:
    value = check(row_data(*ROW_21), ROW_21_BYTES, ROW_21_JSON)
    assert value["__row_kind"] == 1  # -U
    assert value["f6"] == Decimal("12.34") and value["f7"] == Decimal("-1.500")
    assert value["f9"] == 1_000_000_005  # epoch nanos (p > 3)
    assert value["f15"] == [("k", 7)]


def test_row_arrow_type_names_top_level_fields_by_position() -> None:
    codec = codec_for(row_data(*ROW_21))
    arrow = codec.arrow_type()
    assert arrow.names[:3] == ["f0", "f1", "f2"] and arrow.names[-1] == "__row_kind"
    assert arrow.field("f7").type == pa.decimal128(20, 3)
    assert arrow.field("f8").type == pa.timestamp("ms")
    assert arrow.field("f9").type == pa.timestamp("ns")
    assert arrow.field("f10").type == pa.timestamp("us", "UTC")
    assert arrow.field("f13").type == pa.time32("ms")
    assert arrow.field("f15").type == pa.map_(pa.string(), pa.int64())
    assert arrow.field("f16").type == pa.struct([("a", pa.int32()), ("b", pa.string())])


def test_description() -> None:
    codec = codec_for(row_data(BIGINT, decimal(38, 18)))
    assert codec.describe() == "ROW<f0 BIGINT, f1 DECIMAL(38, 18)>"
    assert codec.tree()["fields"][1] == {"name": "f1", "type": "DECIMAL(38, 18)"}


# --- values written by RowDataSerializer from any row (encode, then decode) -------------------

WIDE = (
    decimal(38, 18), decimal(18, 0), timestamp(9, zone=True), timestamp(3, zone=True),
    LogicalType("MULTISET", children=(STRING,)), LogicalType("ARRAY", children=(STRING,)),
    LogicalType("ARRAY", children=(decimal(25, 2),)), LogicalType("ARRAY", children=(timestamp(6),)),
    LogicalType("MAP", children=(INT, row_type(x=LogicalType("BOOLEAN")))), LogicalType("DOUBLE"),
    LogicalType("VARBINARY", length=5), LogicalType("NULL"),
)  # fmt: skip


@pytest.mark.parametrize(
    ("value", "json_form"),
    [
        (
            {
                "__row_kind": 2,
                "f0": Decimal("-12345678901234567890.123456789012345678"),
                "f1": Decimal("999999999999999999"),
                "f2": -1_500_000_001,  # before the epoch, nanos
                "f3": 1_700_000_000_123,
                "f4": [("a", 2), ("b", 1)],
                "f5": ["short", None, "a longer string é"],
                "f6": [Decimal("1.50"), None],
                "f7": [0, -1],
                "f8": [(3, {"__row_kind": 0, "x": True}), (1, None)],
                "f9": float("nan"),
                "f10": b"\x00\xff",
                "f11": None,
            },
            {
                "f0": "-12345678901234567890.123456789012345678",
                "f1": "999999999999999999",
                "f2": "1969-12-31T23:59:58.499999999Z",
                "f3": "2023-11-14T22:13:20.123Z",
                "f4": {"a": 2, "b": 1},
                "f5": ["short", None, "a longer string é"],
                "f6": ["1.50", None],
                "f7": ["1970-01-01T00:00:00", "1969-12-31T23:59:59.999999999"],
                "f8": [[1, None], [3, {"x": True}]],
                "f9": "NaN",
                "f10": "AP8=",
                "f11": None,
            },
        ),
        ({f"f{i}": None for i in range(len(WIDE))}, {f"f{i}": None for i in range(len(WIDE))}),
    ],
)
def test_every_type_round_trips(value: dict[str, Any], json_form: dict[str, Any]) -> None:
    codec = codec_for(row_data(*WIDE))
    data = codec.encode(value)
    decoded = codec.decode(data)
    assert codec.to_json(decoded) == json_form
    assert codec.encode(decoded) == data
    pa.array([codec.to_arrow(decoded)], codec.arrow_type())


def test_null_fields_keep_a_zero_slot_and_no_var_part() -> None:
    codec = codec_for(row_data(decimal(20, 2), timestamp(9), STRING))
    data = codec.encode({"f0": None, "f1": None, "f2": None})
    assert data == unhex("00000020 | 0007000000000000") + bytes(24)


# --- §7.3, §7.4: arrays and maps ---------------------------------------------------------------


def array_data(element: LogicalType) -> SerializerSnapshot:
    return snapshot(
        TYPEUTILS + "ArrayDataSerializer$ArrayDataSerializerSnapshot", element_type=element
    )


def map_data(key: LogicalType, value: LogicalType) -> SerializerSnapshot:
    return snapshot(
        TYPEUTILS + "MapDataSerializer$MapDataSerializerSnapshot", key_type=key, value_type=value
    )


def test_array_of_longs_with_a_null() -> None:
    check(
        array_data(BIGINT),
        "00000018 | 02000000 | 02000000 | 0100000000000000 | 0000000000000000",
        [1, None],
    )


def test_array_of_strings_inline_and_not() -> None:
    check(
        array_data(STRING),
        "00000028 | 02000000 | 00000000 | 6162000000000082 | 0A00000018000000"
        "| 30313233343536373839 000000000000",
        ["ab", "0123456789"],
    )


def test_map_of_strings_to_nullable_ints() -> None:
    check(
        map_data(STRING, INT),
        "0000002C | 18000000 | 02000000 00000000 6100000000000081 6200000000000081"
        "| 02000000 02000000 01000000 00000000",
        {"a": 1, "b": None},
    )


# --- §7.6: the other Table serializers ---------------------------------------------------------


@pytest.mark.parametrize(
    ("codec_snapshot", "hexbytes", "json_form"),
    [
        (
            snapshot(TYPEUTILS + "StringDataSerializer$StringDataSerializerSnapshot"),
            "00000006 68C3A96C6C6F",
            "héllo",
        ),
        (
            snapshot(TYPEUTILS + "DecimalDataSerializer$DecimalSerializerSnapshot", precision=10, scale=2),
            "00000000000004D2",
            "12.34",
        ),
        (
            snapshot(TYPEUTILS + "DecimalDataSerializer$DecimalSerializerSnapshot", precision=20, scale=3),
            "00000002 FA24",
            "-1.500",
        ),
        (
            snapshot(TYPEUTILS + "TimestampDataSerializer$TimestampDataSerializerSnapshot", precision=9),
            "00000000000003E8 00000005",
            "1970-01-01T00:00:01.000000005",
        ),
        (
            snapshot(TYPEUTILS + "TimestampDataSerializer$TimestampDataSerializerSnapshot", precision=3),
            "0000018BCFE56800",
            "2023-11-14T22:13:20",
        ),
        (
            snapshot(
                TYPEUTILS + "RawValueDataSerializer$RawValueDataSerializerSnapshot",
                snapshot("org.apache.flink.api.common.typeutils.base.StringSerializer$StringSerializerSnapshot"),
            ),
            "00000002 0278",
            "Ang=",
        ),
        (
            snapshot(
                TYPEUTILS + "ExternalSerializer$ExternalSerializerSnapshot",
                snapshot("org.apache.flink.api.common.typeutils.base.LongSerializer$LongSerializerSnapshot"),
            ),
            "0000000000000007",
            7,
        ),
    ],
)  # fmt: skip
def test_other_table_serializers(
    codec_snapshot: SerializerSnapshot, hexbytes: str, json_form: Any
) -> None:
    check(codec_snapshot, hexbytes, json_form)


def test_sorted_map_of_rank() -> None:
    long = snapshot(
        "org.apache.flink.api.common.typeutils.base.LongSerializer$LongSerializerSnapshot"
    )
    sorted_map = snapshot(TYPEUTILS + "SortedMapSerializerSnapshot", row_data(BIGINT), long)
    check(
        sorted_map,
        "00000002 | 00000010 0000000000000000 1D00000000000000 | 00 | 0000000000000004"
        "| 00000010 0000000000000000 1C00000000000000 | 00 | 0000000000000003",
        [[{"f0": 28}, 3], [{"f0": 29}, 4]],  # pairs sorted by the key's JSON text
    )
    assert codec_for(sorted_map).describe() == "SORTED_MAP<ROW<f0 BIGINT>, BIGINT>"


def test_binary_row_data_stays_raw_for_want_of_field_types() -> None:
    codec: Codec = codec_for(
        snapshot(TYPEUTILS + "BinaryRowDataSerializer$BinaryRowDataSerializerSnapshot", arity=3)
    )
    assert isinstance(codec, RawCodec) and "only the arity (3)" in codec.reason


def test_unread_sql_types_make_the_row_raw() -> None:
    codec = codec_for(row_data(LogicalType("TIMESTAMP_WITH_TIME_ZONE", precision=3)))
    assert isinstance(codec, RawCodec) and "TIMESTAMP_TZ(3)" in codec.reason


def test_truncated_rows_are_errors() -> None:
    codec = codec_for(row_data(STRING, BIGINT))
    with pytest.raises(Exception, match=r"does not fit|shorter"):
        codec.decode(unhex("00000018 | 0000000000000000 | 6100000000000081"))
    with pytest.raises(Exception, match=r"past the end|runs past"):
        codec_for(row_data(STRING)).decode(unhex("00000010 | 0000000000000000 | 0C00000040000000"))


def test_a_row_laid_out_by_generated_code_writes_back_as_read() -> None:
    """Generated code keeps 16 var-part bytes for a null DECIMAL(20, 2) (toBinaryRow does not);
    an unchanged row writes back as read, a changed one in toBinaryRow's layout."""
    codec = codec_for(row_data(decimal(20, 2), BIGINT))
    data = unhex("00000028 | 0001000000000000 | 0000000018000000 | 0500000000000000") + bytes(16)
    value = codec.decode(data)
    assert codec.to_json(value) == {"f0": None, "f1": 5}
    assert codec.encode(value) == data
    changed = {**value, "f1": 6}
    assert codec.encode(changed) == unhex(
        "00000018 | 0001000000000000 | 0000000000000000 | 0600000000000000"
    )
    assert pickle.loads(pickle.dumps(value)) == value
    assert codec.encode(pickle.loads(pickle.dumps(value))) == data
