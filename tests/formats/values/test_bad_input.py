"""Hostile snapshots and values never stop a read: the entry stays raw, with the reason."""

from __future__ import annotations

import time

from hypothesis import given, settings
from hypothesis import strategies as st

from statectl.formats.serializer_snapshots import SerializerSnapshot
from statectl.formats.state_values import decode_with
from statectl.formats.values import Raw, RawCodec, codec_for
from tests.formats.values.test_codecs import (
    BASE,
    INT,
    LIST_OF_STRING,
    LONG,
    PERSON,
    STRING,
    composite,
)

POJO_SNAPSHOT = "org.apache.flink.api.java.typeutils.runtime.PojoSerializerSnapshot"


def test_a_pojo_declaring_a_million_fields_is_read_in_bounded_time() -> None:
    fields = 1_000_000
    snapshot = SerializerSnapshot(
        POJO_SNAPSHOT,
        2,
        (STRING,) * fields,
        "ex.Huge",
        tuple(f"f{i}" for i in range(fields)),
        params=(("registered", ()), ("nonregistered", ())),
    )
    started = time.monotonic()
    value = decode_with(codec_for(snapshot), b"\x00" + b"\x01" * 16)
    assert isinstance(value, Raw) and value.type_class == "ex.Huge"
    assert time.monotonic() - started < 30


def test_a_snapshot_nested_absurdly_deep_stays_raw() -> None:
    deep = STRING
    for _ in range(5000):
        deep = composite(BASE + "ListSerializerSnapshot", deep)
    codec = codec_for(deep)
    assert isinstance(codec, RawCodec)
    assert "nested more than" in codec.reason
    assert decode_with(codec, b"\x00").reason == codec.reason


def test_a_length_beyond_the_bytes_stays_raw() -> None:
    string_of_a_billion_chars = b"\xff\xff\xff\xff\x03abc"
    value = decode_with(codec_for(STRING), string_of_a_billion_chars)
    assert isinstance(value, Raw) and "past the end" in value.reason
    list_of_a_billion = (10**9).to_bytes(4, "big") + b"\x04abc"
    value = decode_with(codec_for(LIST_OF_STRING), list_of_a_billion)
    assert isinstance(value, Raw)


def test_an_unknown_serializer_class_stays_raw_and_names_it() -> None:
    codec = codec_for(SerializerSnapshot("com.acme.OrderSerializer$Snapshot", 1))
    assert isinstance(codec, RawCodec)
    assert "OrderSerializer" in codec.reason
    assert decode_with(codec, b"\x01\x02").data == b"\x01\x02"


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64))
def test_random_bytes_never_escape_as_an_exception(data: bytes) -> None:
    for snapshot in (STRING, LONG, INT, LIST_OF_STRING, PERSON):
        decode_with(codec_for(snapshot), data)  # a value, None or Raw: never an exception


def test_a_decimal_scale_of_billions_stays_raw_before_its_plain_string_is_built() -> None:
    """A decimal's JSON and Arrow form is its plain string, |scale| digits long: a 9-byte
    BigDecimal of scale 2^31 - 1 made every export ask for 2 GB per value."""
    import struct

    from statectl.formats.values import scalars
    from statectl.formats.values.scalars import MAX_DECIMAL_SCALE
    from tests.formats.test_bombs import bounded
    from tests.formats.values.test_avro import avro_codec

    def big_decimal(scale: int) -> bytes:
        return struct.pack(">i", 5) + b"\x07" + struct.pack(">i", scale)

    def exported(codec: object, data: bytes) -> object:
        value = decode_with(codec, data)  # type: ignore[arg-type]
        return value if isinstance(value, Raw) else codec.to_json(value)  # type: ignore[attr-defined]

    assert bounded(lambda: exported(scalars.BIG_DECIMAL, big_decimal((1 << 31) - 1))) == "no error"
    for scale in ((1 << 31) - 1, -(1 << 31), MAX_DECIMAL_SCALE + 1):
        raw = exported(scalars.BIG_DECIMAL, big_decimal(scale))
        assert isinstance(raw, Raw) and raw.reason == f"BigDecimal with scale {scale} at offset 5"
    at_limit = exported(scalars.BIG_DECIMAL, big_decimal(MAX_DECIMAL_SCALE))
    assert isinstance(at_limit, str) and len(at_limit) == MAX_DECIMAL_SCALE + 2  # "0.000…7"
    big = (1 << 31) - 1
    avro = avro_codec(f'{{"type":"bytes","logicalType":"decimal","precision":{big},"scale":{big}}}')
    assert isinstance(avro, RawCodec)
    assert avro.reason == f"Avro decimal of scale {big} (statectl reads {MAX_DECIMAL_SCALE})"


def test_a_big_integer_longer_than_python_writes_as_text_stays_raw() -> None:
    """Python refuses to write an int of more than 4300 digits (the conversion is quadratic):
    a 3000-byte BigInteger decoded, then failed its JSON, an internal error of `export`."""
    import math
    import struct
    import sys

    from statectl.formats.values import scalars

    widest = int(sys.get_int_max_str_digits() / (8 * math.log10(2)))
    for length, readable in ((widest, True), (widest + 1, False), (3000, False)):
        data = struct.pack(">i", length + 4) + b"\x7f" * length
        for codec, tail in ((scalars.BIG_INTEGER, b""), (scalars.BIG_DECIMAL, b"\x00" * 4)):
            value = decode_with(codec, data + tail)
            assert isinstance(value, Raw) != readable, (length, codec)
            if readable:
                assert len(codec.to_json(value)) >= widest * 2
            else:
                assert value.reason.startswith(f"BigInteger of {length} bytes at offset 0: more")


def test_a_kryo_big_integer_longer_than_python_writes_as_text_stays_raw() -> None:
    from statectl.formats.values.kryo import KryoObject
    from tests.formats.values.test_kryo import kryo

    codec = kryo("java.lang.Object", 2)
    for digits, readable in ((4000, True), (5000, False)):
        data = codec.encode(KryoObject("java.math.BigInteger", 10**digits))
        value = decode_with(codec, data)
        assert isinstance(value, Raw) != readable, digits
        if readable:
            assert codec.to_json(value) == "1" + "0" * digits
        else:
            assert "more than the 4300 digits Python writes as text" in value.reason
