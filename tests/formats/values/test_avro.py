"""The Avro codec (`AvroSerializer` state) on bytes built from Flink's source, not measured.

No real Flink Avro state is used: flink-avro is not in the Flink wheels, so no job here can
write it, and the serialized test data of Flink's own Avro tests (flink-formats/flink-avro/
src/test/resources: `flink-1.6-avro-type-serialized-data`, `specific-avro-serializer-2.0/
test-data`, `generic-avro-serializer-1.16/serializer-snapshot`, …) are binary files the
source index stores no text of, so they could not be read.

What is covered, how:
- the snapshot: bytes laid out as `AvroSerializerSnapshot.writeSnapshot` writes them (utf
  runtime class, utf `Schema.toString(false)`, inside `writeVersionedSnapshot`: utf snapshot
  class, i32 version 2), and the v1 layout (the schema alone), parsed by statectl's own
  snapshot parser, then given to `codec_for`;
- values: bytes written by `FlinkOut` below, a reference encoder written from
  `DataOutputEncoder` (i32/i64 big-endian, `DataOutput.writeFloat/Double`, i32 length before
  bytes and strings, `writeVarLongCount`, `writeArrayEnd`'s `00`) and driven field by field in
  `GenericDatumWriter`'s order, with decimals' two's complement bytes written out by hand; the
  worked example of flink-state-values.md §8.3 as hex. Every Avro type and logical type, nested
  records, arrays of records, maps, unions with null and with several branches: decode gives
  the exact values and JSON, encode gives the same bytes, the Arrow type takes the values;
- hostile input: every truncation, lengths, counts and indexes past the bytes or the schema,
  counts of items that take no bytes, forms Flink never writes, schemas nested absurdly deep,
  recursive or expanding exponentially, and random bytes: only `FormatError`, in bounded time.
"""

from __future__ import annotations

import struct
import time
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from statectl.errors import FormatError
from statectl.formats.java_io import DataReader, encode_modified_utf8
from statectl.formats.serializer_snapshots import (
    SerializerSnapshot,
    at_end,
    read_versioned_snapshot,
)
from statectl.formats.state_values import decode_with
from statectl.formats.values import Codec, Raw, RawCodec, codec_for
from statectl.formats.values.avro import MAX_EMPTY_ITEMS, MAX_FIXED_SIZE, Branch

SNAPSHOT_CLASS = "org.apache.flink.formats.avro.typeutils.AvroSerializerSnapshot"
GENERIC_RECORD = "org.apache.avro.generic.GenericRecord"


# --- the reference writers, from Flink's source --------------------------------------------------


def write_utf(text: str) -> bytes:
    """`DataOutput.writeUTF`: u16 length, modified UTF-8."""
    encoded = encode_modified_utf8(text)
    return len(encoded).to_bytes(2, "big") + encoded


def snapshot_bytes(runtime_class: str | None, schema: str) -> bytes:
    """`writeVersionedSnapshot` of an `AvroSerializerSnapshot`: v2 (runtime class, schema) or,
    without a class, the v1 layout (the schema alone)."""
    if runtime_class is None:
        return write_utf(SNAPSHOT_CLASS) + (1).to_bytes(4, "big") + write_utf(schema)
    payload = write_utf(runtime_class) + write_utf(schema)
    return write_utf(SNAPSHOT_CLASS) + (2).to_bytes(4, "big") + payload


class FlinkOut:
    """`DataOutputEncoder`, method by method, over a `DataOutput` (big-endian)."""

    def __init__(self) -> None:
        self.out = bytearray()

    def write_null(self) -> FlinkOut:
        return self

    def write_boolean(self, b: bool) -> FlinkOut:
        self.out.append(1 if b else 0)
        return self

    def write_int(self, n: int) -> FlinkOut:
        self.out += n.to_bytes(4, "big", signed=True)
        return self

    def write_long(self, n: int) -> FlinkOut:
        self.out += n.to_bytes(8, "big", signed=True)
        return self

    def write_float(self, f: float) -> FlinkOut:
        self.out += struct.pack(">f", f)  # Float.floatToIntBits, then writeInt
        return self

    def write_double(self, d: float) -> FlinkOut:
        self.out += struct.pack(">d", d)
        return self

    write_enum = write_int
    write_index = write_int

    def write_fixed(self, data: bytes) -> FlinkOut:
        self.out += data
        return self

    def write_bytes(self, data: bytes) -> FlinkOut:
        self.write_int(len(data))
        self.out += data
        return self

    def write_string(self, text: str) -> FlinkOut:
        return self.write_bytes(text.encode("utf-8"))

    def set_item_count(self, count: int) -> FlinkOut:
        if count > 0:  # writeVarLongCount: 7 bits a byte, low group first, high bit = more
            while count & ~0x7F:
                self.out.append((count & 0xFF) | 0x80)
                count >>= 7
            self.out.append(count)
        return self

    def write_array_end(self) -> FlinkOut:
        self.out.append(0)
        return self

    write_map_end = write_array_end

    def raw(self, hexbytes: str) -> FlinkOut:
        self.out += bytes.fromhex(hexbytes)
        return self

    def bytes(self) -> bytes:
        return bytes(self.out)


def avro_codec(schema: str, runtime_class: str | None = GENERIC_RECORD) -> Codec:
    """The codec of a snapshot as Flink writes it, through statectl's snapshot parser."""
    snapshot = read_versioned_snapshot(DataReader(snapshot_bytes(runtime_class, schema)), at_end)
    return codec_for(snapshot)


def roundtrip(codec: Codec, data: bytes) -> Any:
    assert not isinstance(codec, RawCodec), codec
    value = codec.decode(data)
    assert codec.encode(value) == data
    return value


# --- the schema with every type ------------------------------------------------------------------

CUSTOMER = (
    '{"type":"record","name":"Customer","fields":[{"name":"name","type":"string"},'
    '{"name":"email","type":["null","string"]}]}'
)
LINE = (
    '{"type":"record","name":"Line","fields":[{"name":"sku","type":"string"},'
    '{"name":"count","type":"int"},{"name":"unit_price","type":["null",'
    '{"type":"bytes","logicalType":"decimal","precision":10,"scale":2}]}]}'
)
FIELDS = [
    ("id", '"long"'),
    ("flag", '"boolean"'),
    ("qty", '"int"'),
    ("ratio", '"float"'),
    ("score", '"double"'),
    ("nothing", '"null"'),
    ("blob", '"bytes"'),
    ("name", '"string"'),
    ("status", '{"type":"enum","name":"Status","symbols":["NEW","PAID","SHIPPED"]}'),
    ("digest", '{"type":"fixed","name":"Digest","size":4}'),
    ("price", '{"type":"bytes","logicalType":"decimal","precision":10,"scale":2}'),
    (
        "total",
        '{"type":"fixed","name":"Money","size":8,"logicalType":"decimal","precision":18,"scale":4}',
    ),
    ("uid", '{"type":"string","logicalType":"uuid"}'),
    ("day", '{"type":"int","logicalType":"date"}'),
    ("at_ms", '{"type":"int","logicalType":"time-millis"}'),
    ("at_us", '{"type":"long","logicalType":"time-micros"}'),
    ("ts_ms", '{"type":"long","logicalType":"timestamp-millis"}'),
    ("ts_us", '{"type":"long","logicalType":"timestamp-micros"}'),
    ("lts_ms", '{"type":"long","logicalType":"local-timestamp-millis"}'),
    ("lts_us", '{"type":"long","logicalType":"local-timestamp-micros"}'),
    ("customer", CUSTOMER),
    ("lines", '{"type":"array","items":' + LINE + "}"),
    ("tags", '{"type":"map","values":"long"}'),
    ("note", '["null","string"]'),
    ("choice", '["null","int","string","com.acme.Customer"]'),
    ("again", '"Status"'),
    ("none", '{"type":"array","items":"int"}'),
]
ORDER = (
    '{"type":"record","name":"Order","namespace":"com.acme","fields":['
    + ",".join(f'{{"name":"{name}","type":{schema}}}' for name, schema in FIELDS)
    + "]}"
)


def write_order(out: FlinkOut, nulls: bool) -> FlinkOut:
    """`GenericDatumWriter` over ORDER: the fields in order; `nulls` takes the null branches."""
    out.write_long(-7).write_boolean(True).write_int(42).write_float(1.5).write_double(-0.25)
    out.write_null().write_bytes(b"\x00\xff").write_string("Zoë ☃")
    out.write_enum(1).write_fixed(b"\xde\xad\xbe\xef")
    out.write_bytes(bytes.fromhex("FB2E"))  # -12.34: unscaled -1234, shortest two's complement
    out.write_fixed(bytes.fromhex("FFFFFFFFFFFFD8F0"))  # -1.0000: -10000 sign-extended to 8
    out.write_string("123e4567-e89b-12d3-a456-426614174000")
    out.write_int(19723).write_int(1_260_000).write_long(45_296_789_012)
    out.write_long(1_700_075_600_123).write_long(1_700_075_600_123_456)
    out.write_long(1_704_068_460_000).write_long(1_704_068_460_500_000)
    out.write_string("Ann")  # customer
    out.write_index(0) if nulls else out.write_index(1).write_string("ann@example.com")
    out.set_item_count(2)  # lines
    out.write_string("A-1").write_int(3).write_index(1).write_bytes(b"\x05")  # 0.05
    out.write_string("B-2").write_int(-1).write_index(0)
    out.write_array_end()
    out.set_item_count(2).write_string("a").write_long(1).write_string("b").write_long(-2)
    out.write_map_end()
    if nulls:
        out.write_index(0).write_index(0)  # note, choice: null
    else:
        out.write_index(1).write_string("gift")
        out.write_index(3).write_string("Bob").write_index(0)  # choice: a Customer
    out.write_enum(2)
    return out.set_item_count(0).write_array_end()  # none: an empty array is `00` alone


CUSTOMER_VALUE = {"name": "Ann", "email": "ann@example.com"}
LINES_VALUE = [
    {"sku": "A-1", "count": 3, "unit_price": Decimal("0.05")},
    {"sku": "B-2", "count": -1, "unit_price": None},
]
ORDER_VALUE: dict[str, Any] = {
    "id": -7,
    "flag": True,
    "qty": 42,
    "ratio": 1.5,
    "score": -0.25,
    "nothing": None,
    "blob": b"\x00\xff",
    "name": "Zoë ☃",
    "status": "PAID",
    "digest": b"\xde\xad\xbe\xef",
    "price": Decimal("-12.34"),
    "total": Decimal("-1.0000"),
    "uid": "123e4567-e89b-12d3-a456-426614174000",
    "day": 19723,
    "at_ms": 1_260_000,
    "at_us": 45_296_789_012,
    "ts_ms": 1_700_075_600_123,
    "ts_us": 1_700_075_600_123_456,
    "lts_ms": 1_704_068_460_000,
    "lts_us": 1_704_068_460_500_000,
    "customer": CUSTOMER_VALUE,
    "lines": LINES_VALUE,
    "tags": [("a", 1), ("b", -2)],
    "note": "gift",
    "choice": Branch(3, {"name": "Bob", "email": None}),
    "again": "SHIPPED",
    "none": [],
}
ORDER_JSON: dict[str, Any] = {
    "id": -7,
    "flag": True,
    "qty": 42,
    "ratio": 1.5,
    "score": -0.25,
    "nothing": None,
    "blob": "AP8=",
    "name": "Zoë ☃",
    "status": "PAID",
    "digest": "3q2+7w==",
    "price": "-12.34",
    "total": "-1.0000",
    "uid": "123e4567-e89b-12d3-a456-426614174000",
    "day": "2024-01-01",
    "at_ms": "00:21:00",
    "at_us": "12:34:56.789012",
    "ts_ms": "2023-11-15T19:13:20.123Z",
    "ts_us": "2023-11-15T19:13:20.123456Z",
    "lts_ms": "2024-01-01T00:21:00",
    "lts_us": "2024-01-01T00:21:00.5",
    "customer": CUSTOMER_VALUE,
    "lines": [
        {"sku": "A-1", "count": 3, "unit_price": "0.05"},
        {"sku": "B-2", "count": -1, "unit_price": None},
    ],
    "tags": {"a": 1, "b": -2},
    "note": "gift",
    "choice": {"name": "Bob", "email": None},
    "again": "SHIPPED",
    "none": [],
}
NULLS = {"customer": {"name": "Ann", "email": None}, "note": None, "choice": None}


@pytest.fixture(scope="module")
def order() -> Codec:
    return avro_codec(ORDER, "com.acme.Order")


def test_the_snapshot_as_flink_writes_it_is_parsed_with_its_writer_schema() -> None:
    data = snapshot_bytes("com.acme.Order", ORDER)
    snapshot = read_versioned_snapshot(DataReader(data), at_end)
    assert (snapshot.class_name, snapshot.version) == (SNAPSHOT_CLASS, 2)
    assert snapshot.type_name == "com.acme.Order"
    assert snapshot.param("schema") == ORDER
    assert snapshot.raw == data


def test_a_v1_snapshot_names_the_schema_s_record() -> None:
    codec = avro_codec(ORDER, runtime_class=None)
    assert codec.type_class == "com.acme.Order"
    assert codec.tree()["class"] == "com.acme.Order"


def test_every_type_decodes_to_its_value_and_json_and_encodes_to_the_same_bytes(
    order: Codec,
) -> None:
    value = roundtrip(order, write_order(FlinkOut(), nulls=False).bytes())
    assert value == ORDER_VALUE
    assert order.to_json(value) == ORDER_JSON


def test_null_branches_read_as_none(order: Codec) -> None:
    value = roundtrip(order, write_order(FlinkOut(), nulls=True).bytes())
    assert value == {**ORDER_VALUE, **NULLS}
    assert order.to_json(value) == {**ORDER_JSON, **NULLS}


def test_the_values_fill_the_arrow_type(order: Codec) -> None:
    values = [order.decode(write_order(FlinkOut(), nulls=nulls).bytes()) for nulls in (False, True)]
    table = pa.array([order.to_arrow(v) for v in values], type=order.arrow_type())
    row = table.to_pylist()[0]
    assert row["price"] == Decimal("-12.34") and row["total"] == Decimal("-1.0000")
    bob = {"name": "Bob", "email": None}
    assert row["choice"] == {"int": None, "string": None, "com.acme.Customer": bob}
    assert row["tags"] == [("a", 1), ("b", -2)]
    assert table.to_pylist()[1]["choice"] is None
    kinds = {f.name: f.type for f in order.arrow_type()}
    assert kinds["note"] == pa.string() and kinds["status"] == pa.string()
    assert kinds["digest"] == pa.binary(4) and kinds["total"] == pa.decimal128(18, 4)
    assert kinds["day"] == pa.date32() and kinds["at_ms"] == pa.time32("ms")
    assert kinds["at_us"] == pa.time64("us") and kinds["ts_us"] == pa.timestamp("us", "UTC")
    assert kinds["lts_ms"] == pa.timestamp("ms")
    assert kinds["tags"] == pa.map_(pa.string(), pa.int64())


def test_describe_and_tree(order: Codec) -> None:
    text = order.describe()
    assert text.startswith("AVRO com.acme.Order{id BIGINT, flag BOOLEAN, qty INT, ")
    assert "lines LIST<com.acme.Line{sku STRING, count INT, unit_price DECIMAL(10, 2)}>" in text
    assert "choice UNION<NULL, INT, STRING, com.acme.Customer{" in text
    assert "\n" not in text
    tree = order.tree()
    assert tree["type"] == "AVRO" and tree["schema"]["name"] == "com.acme.Order"
    assert tree["schema"]["fields"][8]["symbols"] == ["NEW", "PAID", "SHIPPED"]


def test_the_worked_example_of_the_reference() -> None:
    codec = avro_codec(
        '{"type":"record","name":"R","fields":[{"name":"s","type":"string"},{"name":"i",'
        '"type":"int"},{"name":"u","type":["null","long"]},{"name":"a","type":{"type":'
        '"array","items":"int"}}]}'
    )
    data = bytes.fromhex(
        "00000002 6162 00000007 00000001 0000000000000005 02 00000001 00000002 00".replace(" ", "")
    )
    assert roundtrip(codec, data) == {"s": "ab", "i": 7, "u": 5, "a": [1, 2]}


def test_long_counts_are_leb128_and_floats_keep_nan() -> None:
    codec = avro_codec('{"type":"array","items":"float"}')
    out = FlinkOut().set_item_count(300)
    assert out.bytes() == b"\xac\x02"
    for i in range(299):
        out.write_float(i)
    data = out.write_float(float("nan")).write_array_end().bytes()
    value = roundtrip(codec, data)
    assert len(value) == 300 and codec.to_json(value)[-2:] == [298.0, "NaN"]


def test_unions_of_several_types_keep_their_branch() -> None:
    codec = avro_codec('["int","long",{"type":"fixed","name":"F","size":2},"bytes"]')
    for index, (value, data) in enumerate(
        [(5, "00000005"), (5, "0000000000000005"), (b"ab", "6162"), (b"ab", "000000026162")]
    ):
        encoded = index.to_bytes(4, "big") + bytes.fromhex(data)
        assert roundtrip(codec, encoded) == Branch(index, value)
    assert codec.describe() == "AVRO UNION<INT, BIGINT, FIXED(2) F, BYTES>"


def test_decimals_on_bytes_and_fixed_at_their_scale() -> None:
    codec = avro_codec(
        '{"type":"record","name":"D","fields":[{"name":"b","type":{"type":"bytes",'
        '"logicalType":"decimal","precision":38,"scale":18}},{"name":"f","type":{"type":'
        '"fixed","name":"F","size":3,"logicalType":"decimal","precision":6,"scale":0}}]}'
    )
    # 0.05 at scale 18: unscaled 5·10^16 = 0x B1A2BC2EC50000; 255 → 00 00 FF on 3 bytes
    data = bytes.fromhex("00000008 00B1A2BC2EC50000 0000FF".replace(" ", ""))
    value = roundtrip(codec, data)
    assert codec.to_json(value) == {"b": "0.050000000000000000", "f": "255"}
    assert codec.arrow_type() == pa.struct(
        [("b", pa.decimal128(38, 18)), ("f", pa.decimal128(6, 0))]
    )


def test_a_logical_type_java_ignores_leaves_the_plain_type() -> None:
    codec = avro_codec('{"type":"string","logicalType":"date"}')
    assert codec.describe() == "AVRO STRING"
    codec = avro_codec('{"type":"bytes","logicalType":"decimal"}')  # no precision
    assert roundtrip(codec, bytes.fromhex("0000000105")) == b"\x05"


def test_a_named_type_used_many_times_is_shared() -> None:
    schema = (
        '{"type":"record","name":"P","fields":[{"name":"a","type":{"type":"record","name":"Q",'
        '"fields":[{"name":"x","type":"int"}]}},{"name":"b","type":"Q"},'
        '{"name":"c","type":{"type":"map","values":"Q"}}]}'
    )
    codec = avro_codec(schema)
    data = FlinkOut().write_int(1).write_int(2).set_item_count(1).write_string("k")
    data.write_int(3).write_map_end()
    assert roundtrip(codec, data.bytes()) == {"a": {"x": 1}, "b": {"x": 2}, "c": [("k", {"x": 3})]}


# --- hostile input -------------------------------------------------------------------------------


def test_every_truncation_is_a_format_error(order: Codec) -> None:
    data = write_order(FlinkOut(), nulls=False).bytes()
    for end in range(len(data)):
        with pytest.raises(FormatError):
            order.decode(data[:end])


@pytest.mark.parametrize(
    ("schema", "hexbytes", "reason"),
    [
        ('["null","int"]', "00000002", "no branch 2"),
        ('["null","int"]', "FFFFFFFF", "no branch -1"),
        ('{"type":"enum","name":"E","symbols":["A"]}', "00000001", "no symbol 1"),
        ('"string"', "7FFFFFFF41", "does not fit"),
        ('"bytes"', "FFFFFFFF", "does not fit"),
        ('"string"', "00000002C328", "not UTF-8"),
        ('"boolean"', "02", "boolean byte"),
        ('{"type":"array","items":"int"}', "FFFFFFFFFFFFFFFF7F", "does not fit"),
        ('{"type":"array","items":"int"}', "8080808080808080808001", "nine bytes"),
        ('{"type":"array","items":"int"}', "8100 00000001 00", "shortest form"),
        ('{"type":"array","items":"int"}', "01 00000001 01 00000002 00", "second block"),
        ('{"type":"map","values":"null"}', "05 00000001 61 00", "does not fit"),
        ('{"type":"array","items":"null"}', "FFFFFFFFFFFFFFFF7F", "take no bytes"),
        (
            '{"type":"bytes","logicalType":"decimal","precision":4,"scale":0}',
            "00000002 0005",
            "shortest form",
        ),
        (
            '{"type":"bytes","logicalType":"decimal","precision":4,"scale":0}',
            "00000000",
            "shortest form",
        ),
        (
            '{"type":"bytes","logicalType":"decimal","precision":2,"scale":0}',
            "00000002 03E8",
            "exceeds",
        ),
        ('{"type":"int","logicalType":"time-millis"}', "05265C00", "time of day"),
    ],
)
def test_bytes_flink_never_writes_are_refused(schema: str, hexbytes: str, reason: str) -> None:
    codec = avro_codec(schema)
    with pytest.raises(FormatError, match=reason):
        codec.decode(bytes.fromhex(hexbytes.replace(" ", "")))
    assert isinstance(decode_with(codec, bytes.fromhex(hexbytes.replace(" ", ""))), Raw)


def test_nested_counts_of_empty_items_stop_at_the_budget() -> None:
    codec = avro_codec(
        '{"type":"array","items":{"type":"array","items":{"type":"record","name":"E","fields":[]}}}'
    )
    inner = FlinkOut().set_item_count(MAX_EMPTY_ITEMS // 2).write_array_end().bytes()
    data = FlinkOut().set_item_count(3).raw((inner * 3).hex()).write_array_end().bytes()
    started = time.monotonic()
    with pytest.raises(FormatError, match="take no bytes"):
        codec.decode(data)
    assert time.monotonic() - started < 10


def _nested_arrays(depth: int) -> str:
    return '{"type":"array","items":' * depth + '"int"' + "}" * depth


@pytest.mark.parametrize(
    ("schema", "reason"),
    [
        (_nested_arrays(2000), "JSON levels deep"),
        (_nested_arrays(70), "types deep"),
        ("[" * 30000 + "]" * 30000, "JSON levels deep"),
        ("{not json", "not JSON"),
        (
            '{"type":"record","name":"L","fields":[{"name":"next","type":["null","L"]}]}',
            "recursive",
        ),
        (
            '{"type":"record","name":"R","fields":[{"name":"a","type":"int"},'
            '{"name":"a","type":"int"}]}',
            "field twice",
        ),
        ('["null","int","int"]', "repeats a type"),
        ('{"type":"nonsense"}', "not understood"),
    ],
)
def test_unusable_schemas_leave_the_state_raw(schema: str, reason: str) -> None:
    codec = avro_codec(schema)
    assert isinstance(codec, RawCodec) and reason in codec.reason, codec


def test_a_schema_expanding_exponentially_is_refused_in_bounded_time() -> None:
    # T0 = int; Tn = record of two Tn-1: 2^30 types once expanded, from a few kilobytes
    schema = '"int"'
    for level in range(30):
        name = f"T{level}"
        previous = schema if level == 0 else f'"T{level - 1}"'
        first = schema if level else previous
        schema = (
            f'{{"type":"record","name":"{name}","fields":[{{"name":"a","type":{first}}},'
            f'{{"name":"b","type":{previous}}}]}}'
        )
    started = time.monotonic()
    codec = avro_codec(schema)
    assert isinstance(codec, RawCodec) and "of more than" in codec.reason, codec
    assert time.monotonic() - started < 10


SMALL = '{"type":"array","items":["null","boolean",{"type":"map","values":"int"}]}'


@settings(max_examples=300, deadline=None)
@given(schema=st.sampled_from([ORDER, SMALL]), data=st.binary(max_size=200))
def test_random_bytes_are_a_value_or_a_format_error(schema: str, data: bytes) -> None:
    codec = avro_codec(schema)
    try:
        value = codec.decode(data)
    except FormatError:
        return
    assert codec.encode(value) == data


def test_a_snapshot_built_in_memory_gets_the_codec() -> None:
    """`codec_for` on a snapshot built in memory, as the other codec tests do."""
    snapshot = SerializerSnapshot(
        SNAPSHOT_CLASS, 2, type_name=GENERIC_RECORD, params=(("schema", '"long"'),)
    )
    assert codec_for(snapshot).describe() == "AVRO BIGINT"


@pytest.mark.parametrize("size", [(1 << 31) - 1, MAX_FIXED_SIZE + 1, -1])
def test_a_fixed_declaring_more_than_statectl_reads_leaves_the_state_raw(size: int) -> None:
    """Arrow gives every null row of a fixed_size_binary all its bytes: a snapshot declaring
    2 GiB made `export --typed` ask for 221 GB for 103 null rows, before reading any."""
    from tests.formats.test_bombs import bounded

    codec = avro_codec(f'["null",{{"type":"fixed","name":"F","size":{size}}}]')
    assert isinstance(codec, RawCodec), codec
    assert codec.reason == f"Avro fixed F of {size} bytes (statectl reads 0 to {MAX_FIXED_SIZE})"
    assert bounded(lambda: pa.array([None] * 103, codec.arrow_type())) == "no error"
    decimal = f'{{"type":"fixed","name":"D","size":{size},"logicalType":"decimal","precision":9}}'
    assert isinstance(avro_codec(decimal), RawCodec)
    # the limit itself is read, and a decimal on a fixed keeps Java's bound ⌊log10(2) × 127⌋
    at_limit = avro_codec(f'{{"type":"fixed","name":"F","size":{MAX_FIXED_SIZE}}}')
    data = bytes(range(256)) * (MAX_FIXED_SIZE // 256)
    assert roundtrip(at_limit, data) == data
    assert at_limit.arrow_type() == pa.binary(MAX_FIXED_SIZE)
    sixteen = '{"type":"fixed","name":"D","size":16,"logicalType":"decimal","precision":38}'
    assert avro_codec(sixteen).arrow_type() == pa.decimal128(38, 0)
