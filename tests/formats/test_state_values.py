"""Decoding state values with the serializers a header names (base types, keyed LIST/MAP)."""

from __future__ import annotations

import math
import struct

import pytest

from statectl.errors import FormatError
from statectl.formats.java_types import write_java_string
from statectl.formats.serializer_snapshots import SerializerSnapshot
from statectl.formats.state_headers import StateMetaInfo
from statectl.formats.state_values import (
    LIST_SNAPSHOT,
    MAP_SNAPSHOT,
    jsonable,
    keyed_codec,
    map_value,
    operator_codec,
    split_list,
)
from statectl.formats.values import Raw, codec_for
from statectl.formats.values.scalars import LONG
from tests.formats.values.test_codecs import PERSON

BASE = "org.apache.flink.api.common.typeutils.base."


def snapshot(name: str, *nested: SerializerSnapshot) -> SerializerSnapshot:
    return SerializerSnapshot(name, 3, nested)


def simple(type_name: str) -> SerializerSnapshot:
    return snapshot(f"{BASE}{type_name}Serializer${type_name}SerializerSnapshot")


def meta(kind: str, value: SerializerSnapshot) -> StateMetaInfo:
    return StateMetaInfo("s", "KEY_VALUE", {"KEYED_STATE_TYPE": kind}, {"VALUE_SERIALIZER": value})


def long_bytes(v: int) -> bytes:
    return v.to_bytes(8, "big", signed=True)


def test_keyed_list_is_comma_delimited() -> None:
    data = b",".join(long_bytes(v) for v in (29, -1, 1 << 40))
    assert split_list(LONG, data) == [29, -1, 1 << 40]
    assert split_list(LONG, b"") == []
    with pytest.raises(FormatError, match="ends with a delimiter"):
        split_list(LONG, long_bytes(1) + b",")
    with pytest.raises(FormatError, match="not followed by ','"):
        split_list(LONG, long_bytes(1) + b";" + long_bytes(2))


def test_keyed_map_value_has_a_null_flag() -> None:
    assert map_value(LONG, b"\x00" + long_bytes(58)) == 58
    assert map_value(LONG, b"\x01") is None
    with pytest.raises(FormatError):
        map_value(LONG, b"\x01\x00")
    # The heap backend's savepoint writes the value serializer's own null after the flag.
    assert map_value(codec_for(PERSON), b"\x01\x01") is None


def test_codecs_from_header_snapshots() -> None:
    key = simple("String")
    lst = keyed_codec(meta("LIST", snapshot(LIST_SNAPSHOT, simple("Long"))), key)
    assert lst.decode_key(write_java_string("k29")) == "k29"
    assert lst.decode_value(long_bytes(1) + b"," + long_bytes(2)).value == [1, 2]
    mp = keyed_codec(meta("MAP", snapshot(MAP_SNAPSHOT, simple("String"), simple("Double"))), key)
    assert mp.decode_user_key(write_java_string("γάμμα")) == "γάμμα"
    assert mp.decode_value(b"\x00" + struct.pack(">d", 2.5)).value == 2.5
    value = keyed_codec(meta("VALUE", simple("Int")), key)
    assert value.decode_value(b"\xff\xff\xff\xfe").value == -2
    cut = value.decode_value(b"\x00\x00\x00").value  # cut short: stays raw, with the reason
    assert isinstance(cut, Raw) and cut.data == b"\x00\x00\x00" and "error" in cut.reason
    unknown = keyed_codec(meta("VALUE", snapshot("x.UnknownSerializerSnapshot")), key)
    raw = unknown.decode_value(b"\x01").value
    assert isinstance(raw, Raw) and raw.reason == "no decoder for x.UnknownSerializerSnapshot"


def test_operator_list_elements_are_single_values() -> None:
    info = StateMetaInfo("split", "OPERATOR", {}, {"VALUE_SERIALIZER": simple("Long")})
    codec = operator_codec(info, "LIST")
    assert codec.decode_value(long_bytes(1000)).value == 1000
    assert isinstance(operator_codec(None, "UNION").decode_value(long_bytes(1)).value, Raw)


def test_jsonable() -> None:
    assert jsonable([1.0, math.nan, math.inf, -math.inf]) == [1.0, "NaN", "Infinity", "-Infinity"]
    assert jsonable(b"\x01\xff") == "hex:01ff"
    assert jsonable("k1") == "k1"
