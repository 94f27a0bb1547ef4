"""The value codecs on the byte examples of flink-state-values.md (measured from Flink's own
serializers, 1.15–2.3): each decodes to the documented value, gives the documented JSON, and
re-encodes to the very same bytes."""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any

import pytest

from statectl.formats.serializer_snapshots import SerializerSnapshot
from statectl.formats.values import Raw, RawCodec, codec_for
from statectl.formats.values.composites import Either
from statectl.formats.values.model import TtlValue

BASE = "org.apache.flink.api.common.typeutils.base."
RUNTIME = "org.apache.flink.api.java.typeutils.runtime."
TTL = "org.apache.flink.runtime.state.ttl.TtlStateFactory$TtlSerializerSnapshot"


def simple(name: str) -> SerializerSnapshot:
    return SerializerSnapshot(f"{BASE}{name}Serializer${name}SerializerSnapshot", 3)


def array(name: str) -> SerializerSnapshot:
    return SerializerSnapshot(f"{BASE}array.{name}Serializer${name}SerializerSnapshot", 3)


def composite(name: str, *nested: SerializerSnapshot, **params: Any) -> SerializerSnapshot:
    type_name = params.pop("type_name", None)
    return SerializerSnapshot(name, 3, nested, type_name, params=tuple(params.items()))


def pojo(cls: str, fields: dict[str, SerializerSnapshot], **subclasses: Any) -> SerializerSnapshot:
    return SerializerSnapshot(
        RUNTIME + "PojoSerializerSnapshot",
        2,
        tuple(fields.values()),
        cls,
        tuple(fields),
        params=(
            ("registered", subclasses.get("registered", ())),
            ("nonregistered", subclasses.get("nonregistered", ())),
        ),
    )


STRING, LONG, INT = simple("String"), simple("Long"), simple("Int")
LIST_OF_STRING = composite(BASE + "ListSerializerSnapshot", STRING)
ADDRESS = pojo("ex.Address", {"city": STRING, "zip": INT})
PERSON_FIELDS = {"addr": ADDRESS, "age": INT, "count": LONG, "name": STRING}
PERSON = pojo("ex.Person", {**PERSON_FIELDS, "tags": LIST_OF_STRING})


def check(snapshot: SerializerSnapshot, hexbytes: str, value: Any, json_form: Any) -> None:
    codec = codec_for(snapshot)
    assert not isinstance(codec, RawCodec), codec
    data = bytes.fromhex(hexbytes.replace(" ", "").replace("|", ""))
    decoded = codec.decode(data)
    assert decoded == value
    assert (None if decoded is None else codec.to_json(decoded)) == json_form
    assert codec.encode(decoded) == data


@pytest.mark.parametrize(
    ("name", "hexbytes", "value", "json_form"),
    [
        ("Boolean", "01", True, True),
        ("Byte", "FE", -2, -2),
        ("Short", "012C", 300, 300),
        ("Char", "00E9", "é", "é"),
        ("Float", "3FC00000", 1.5, 1.5),
        ("BigInt", "00000006 FED4", -300, "-300"),
        ("BigDec", "00000006 3039 00000003", Decimal("12.345"), "12.345"),
        ("BigDec", "00000001 00000000", Decimal("0"), "0"),
        (
            "SqlTimestamp",
            "00000000000003E8 0000007B",
            1_000_000_123,
            "1970-01-01T00:00:01.000000123Z",
        ),
        ("Instant", "0000000000000001 00000005", 1_000_000_005, "1970-01-01T00:00:01.000000005Z"),
        ("LocalDate", "000007E8 02 03", 19756, "2024-02-03"),
        ("LocalTime", "01 02 03 00000004", 3_723_000_000_004, "01:02:03.000000004"),
        ("LocalDate", "80000000 8000", None, None),
        ("Void", "00", None, None),
    ],
)
def test_scalars(name: str, hexbytes: str, value: Any, json_form: Any) -> None:
    check(simple(name), hexbytes, value, json_form)


def test_float_json_names_nan_and_infinities() -> None:
    codec = codec_for(simple("Double"))
    assert codec.to_json(math.inf) == "Infinity" and codec.to_json(-math.inf) == "-Infinity"
    assert codec.to_json(codec.decode(bytes.fromhex("7FF8000000000000"))) == "NaN"


def test_arrays() -> None:
    check(
        array("LongPrimitiveArray"), "00000002" + "00" * 7 + "01" + "00" * 7 + "02", [1, 2], [1, 2]
    )
    check(array("CharPrimitiveArray"), "00000002 0061 00E9", ["a", "é"], ["a", "é"])
    check(array("StringArray"), "00000003 0261 00 0262", ["a", None, "b"], ["a", None, "b"])
    check(array("BytePrimitiveArray"), "00000002 01FF", b"\x01\xff", "Af8=")
    generic = composite(BASE + "GenericArraySerializerSnapshot", LONG, type_name="java.lang.Long")
    check(generic, "00000002 01 0000000000000001 00", [1, None], [1, None])


def test_collections() -> None:
    check(LIST_OF_STRING, "00000003 0261 00 036263", ["a", None, "bc"], ["a", None, "bc"])
    mp = composite(BASE + "MapSerializerSnapshot", STRING, LONG)
    check(
        mp,
        "00000002 026B 00 0000000000000001 026E 01",
        [("k", 1), ("n", None)],
        {"k": 1, "n": None},
    )
    by_long = composite(BASE + "MapSerializerSnapshot", LONG, STRING)
    data = "00000002 0000000000000002 00 0262 0000000000000001 00 0261"
    check(by_long, data, [(2, "b"), (1, "a")], [[1, "a"], [2, "b"]])
    st = composite(BASE + "SetSerializerSnapshot", STRING)
    # A set's JSON is sorted by each element's JSON text: "a" < "b" < null.
    check(st, "00000003 00 0262 01 00 0261", ["b", None, "a"], ["a", "b", None])


def test_tuple_row_either_nullable_enum() -> None:
    tuple2 = composite(RUNTIME + "TupleSerializerSnapshot", STRING, LONG, type_name="Tuple2")
    check(tuple2, "0261 0000000000000001", {"f0": "a", "f1": 1}, {"f0": "a", "f1": 1})
    row = composite(RUNTIME + "RowSerializer$RowSerializerSnapshot", LONG, STRING)
    check(
        row, "00 0000000000000003 0278", {"__row_kind": 0, "f0": 3, "f1": "x"}, {"f0": 3, "f1": "x"}
    )
    check(row, "10 0000000000000004", {"__row_kind": 0, "f0": 4, "f1": None}, {"f0": 4, "f1": None})
    check(
        row, "40 0000000000000005 0279", {"__row_kind": 2, "f0": 5, "f1": "y"}, {"f0": 5, "f1": "y"}
    )
    either = composite(RUNTIME + "JavaEitherSerializerSnapshot", STRING, LONG)
    check(either, "01 026C", Either(True, "l"), {"left": "l"})
    check(either, "00 0000000000000007", Either(False, 7), {"right": 7})
    padded = composite(RUNTIME + "NullableSerializer$NullableSerializerSnapshot", LONG, padding=8)
    check(padded, "01" + "00" * 8, None, None)
    check(padded, "00 0000000000000005", 5, 5)
    color = SerializerSnapshot(
        BASE + "EnumSerializer$EnumSerializerSnapshot", 3, type_name="ex.Color",
        params=(("constants", ("RED", "GREEN", "BLUE")),),
    )  # fmt: skip
    check(color, "00000002", "BLUE", "BLUE")


def test_pojo_layouts() -> None:
    check(PERSON, "01", None, None)
    nothing = {"addr": None, "age": 1, "count": None, "name": None, "tags": None}
    check(PERSON, "02 01 00 00000001 01 01 01", nothing, nothing)
    full = "02 00 02 00 0258 00 00000009 00 00000007 00 0000000000000005 00 036162 00 00000001 0274"
    value = {"addr": {"city": "X", "zip": 9}, "age": 7, "count": 5, "name": "ab", "tags": ["t"]}
    check(PERSON, full, value, value)


def test_pojo_subclasses() -> None:
    employee = pojo(
        "ex.Employee",
        {
            "addr": ADDRESS,
            "age": INT,
            "company": STRING,
            "count": LONG,
            "name": STRING,
            "tags": LIST_OF_STRING,
        },
    )
    registered = pojo(
        "ex.Person",
        {**PERSON_FIELDS, "tags": LIST_OF_STRING},
        registered=(("ex.Employee", employee),),
    )
    fields = "02 01 00 00000002 00 0263 01 00 0265 01"
    value = {"addr": None, "age": 2, "company": "c", "count": None, "name": "e", "tags": None}
    tagged = {**value, "__class": "ex.Employee"}
    check(registered, "08 00" + fields, tagged, value)
    named = pojo(
        "ex.Person",
        {**PERSON_FIELDS, "tags": LIST_OF_STRING},
        nonregistered=(("ex.Employee", employee),),
    )
    check(named, "04 000B" + b"ex.Employee".hex() + fields, tagged, value)
    unknown = codec_for(PERSON).decode  # the subclass is in neither map: it stays raw
    with pytest.raises(Exception, match=r"ex\.Employee"):
        unknown(bytes.fromhex("04000B" + b"ex.Employee".hex() + fields.replace(" ", "")))


def test_ttl_wraps_the_user_value() -> None:
    ttl = composite(TTL, LONG, STRING)
    check(ttl, "0000018BCFE56800 036162", TtlValue(1700000000000, "ab"), "ab")
    assert codec_for(ttl).describe() == "STRING, TTL"


def test_unknown_serializers_stay_raw_with_a_reason() -> None:
    custom = SerializerSnapshot("com.acme.MySerializerSnapshot", 1)
    codec = codec_for(custom)
    assert isinstance(codec, RawCodec) and "no decoder" in codec.reason
    inside = codec_for(composite(BASE + "ListSerializerSnapshot", custom))
    assert isinstance(inside, RawCodec) and "MySerializerSnapshot" in inside.reason
    deep = STRING
    for _ in range(100):
        deep = composite(BASE + "ListSerializerSnapshot", deep)
    assert "nested more than" in codec_for(deep).reason  # type: ignore[attr-defined]
    assert isinstance(Raw(b"", "x", "y"), Raw)


def test_descriptions() -> None:
    assert codec_for(PERSON).describe() == (
        "POJO ex.Person{addr POJO ex.Address{city STRING, zip INT}, age INT, count BIGINT, "
        "name STRING, tags LIST<STRING>}"
    )


def test_nulls_into_fields_a_primitive_serializer_writes_are_found_at_any_depth() -> None:
    """What `transform` checks against the job's classes: a null Flink cannot restore into an
    `int` field (IntSerializer writes `int` and `Integer` alike), wherever the POJO is."""
    from statectl.formats.values import scalars
    from statectl.formats.values.composites import ListCodec, MapCodec, NullableCodec, TtlCodec
    from statectl.formats.values.pojo import PojoCodec, has_primitive_fields, null_fields

    inner = PojoCodec("p.Inner", ["n", "label"], [scalars.INT, scalars.STRING], [], {})
    dog = PojoCodec("p.Dog", ["legs"], [scalars.INT], [], {})
    animal = PojoCodec("p.Animal", ["name"], [scalars.STRING], [], {"p.Dog": dog})
    outer = PojoCodec(
        "p.Outer",
        ["count", "inner", "items", "by_key", "pet"],
        [scalars.LONG, inner, ListCodec(inner), MapCodec(scalars.STRING, NullableCodec(inner, 0)),
         animal],
        [],
        {},
    )  # fmt: skip
    value = {
        "count": None,
        "inner": {"n": None, "label": None},  # a String field takes a null: not reported
        "items": [{"n": 1, "label": "a"}, {"n": None, "label": "b"}],
        "by_key": [("x", {"n": None, "label": None}), ("y", None)],
        "pet": {"name": "rex", "legs": None, "__class": "p.Dog"},
    }
    found = sorted(
        (pojo.type_class, name) for pojo, name in null_fields(TtlCodec(outer), TtlValue(1, value))
    )
    assert found == [("p.Dog", "legs"), *[("p.Inner", "n")] * 3, ("p.Outer", "count")]
    assert has_primitive_fields(ListCodec(animal))  # through a subclass
    assert not has_primitive_fields(ListCodec(PojoCodec("p.S", ["s"], [scalars.STRING], [], {})))
