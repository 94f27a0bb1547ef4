"""Key types, Java hashCode, key groups and composite keys (spec §4.6, §6, §7)."""

from __future__ import annotations

import math
import random
import struct
import subprocess
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from statectl.errors import FormatError, UnsupportedError
from statectl.formats import java_types as jt

ORACLES = Path(__file__).parent / "oracles"
BASE = "org.apache.flink.api.common.typeutils.base."
STRING = jt.key_type_for_serializer(BASE + "StringSerializer$StringSerializerSnapshot")
LONG = jt.key_type_for_serializer(BASE + "LongSerializer$LongSerializerSnapshot")


def _d(bits: int) -> float:
    return struct.unpack(">d", bits.to_bytes(8, "big"))[0]


def _f(bits: int) -> float:
    return struct.unpack(">f", bits.to_bytes(4, "big"))[0]


# Written by tests/formats/oracles/KeyValues.java with Flink 2.3.0's serializers and
# KeyGroupRangeAssignment: (type, value, serialized hex, hashCode, key group at max
# parallelism 128, 300, 32768).
FLINK_VECTORS = [
    ("String", "", "01", 0, 94, 154, 31198),
    ("String", "k29", "046b3239", 104434, 0, 92, 26368),
    ("String", "k17", "046b3137", 104401, 64, 92, 3520),
    ("String", "k19", "046b3139", 104403, 64, 76, 3648),
    ("String", "k26", "046b3236", 104431, 64, 212, 7104),
    ("String", "k0", "036b30", 3365, 97, 277, 5729),
    ("String", "é", "02e901", 233, 30, 198, 10270),
    ("String", "€", "02ac41", 8364, 70, 86, 24262),
    ("String", "a\x00b", "04610062", 93315, 72, 292, 10056),
    ("String", "😀x", "04bdb00380bc0378", 54959989, 60, 8, 30652),
    ("String", "x" * 200, "c901" + "78" * 200, 359357440, 67, 179, 25795),
    ("String", "hello world", "0c68656c6c6f20776f726c64", 1794106052, 92, 68, 28508),
    ("String", "ÿĀ߿ࠀ\uffff", "06ff018002ff0f8010ffff03", 245220541, 112, 144, 28144),
    ("String", "\ud800", "0280b003", 55296, 56, 12, 568),
    ("Long", 0, "0000000000000000", 0, 94, 154, 31198),
    ("Long", 1, "0000000000000001", 1, 86, 78, 16342),
    ("Long", -1, "ffffffffffffffff", 0, 94, 154, 31198),
    ("Long", 10, "000000000000000a", 10, 67, 179, 12867),
    ("Long", 13, "000000000000000d", 13, 1, 141, 7041),
    ("Long", 9223372036854775807, "7fffffffffffffff", -2147483648, 108, 132, 10348),
    ("Long", -9223372036854775808, "8000000000000000", -2147483648, 108, 132, 10348),
    ("Long", 4102444800000, "000003bb2cc3d800", 751033275, 37, 81, 23973),
    ("Long", -123456789012, "ffffffe34166e5ec", -1097262577, 59, 19, 443),
    ("Integer", 0, "00000000", 0, 94, 154, 31198),
    ("Integer", 1, "00000001", 1, 86, 78, 16342),
    ("Integer", -1, "ffffffff", -1, 80, 148, 15184),
    ("Integer", 42, "0000002a", 42, 29, 265, 28189),
    ("Integer", 2147483647, "7fffffff", 2147483647, 62, 134, 19646),
    ("Integer", -2147483648, "80000000", -2147483648, 108, 132, 10348),
    ("Short", 0, "0000", 0, 94, 154, 31198),
    ("Short", -1, "ffff", -1, 80, 148, 15184),
    ("Short", 300, "012c", 300, 48, 188, 28080),
    ("Short", -32768, "8000", -32768, 93, 145, 28125),
    ("Byte", 0, "00", 0, 94, 154, 31198),
    ("Byte", -1, "ff", -1, 80, 148, 15184),
    ("Byte", 127, "7f", 127, 27, 95, 26779),
    ("Byte", -128, "80", -128, 75, 271, 4811),
    ("Boolean", True, "01", 1231, 77, 165, 11725),
    ("Boolean", False, "00", 1237, 3, 191, 32003),
    ("Character", "a", "0061", 97, 81, 1, 19409),
    ("Character", "é", "00e9", 233, 30, 198, 10270),
    ("Character", "\uffff", "ffff", 65535, 18, 222, 25234),
    ("Character", "\ud83d", "d83d", 55357, 92, 288, 5212),
    ("Double", _d(0x0000000000000000), "0000000000000000", 0, 94, 154, 31198),
    ("Double", _d(0x8000000000000000), "8000000000000000", -2147483648, 108, 132, 10348),
    ("Double", _d(0x3FF8000000000000), "3ff8000000000000", 1073217536, 65, 77, 833),
    ("Double", _d(0x7FF8000000000000), "7ff8000000000000", 2146959360, 41, 289, 12713),
    ("Double", _d(0x7FF0000000000000), "7ff0000000000000", 2146435072, 122, 70, 8442),
    ("Double", _d(0xD4C492E2CA475BED), "d4c492e2ca475bed", 511953167, 102, 130, 20326),
    ("Double", _d(0x7FF0000000000001), "7ff8000000000000", 2146959360, 41, 289, 12713),
    ("Float", _f(0x00000000), "00000000", 0, 94, 154, 31198),
    ("Float", _f(0x80000000), "80000000", -2147483648, 108, 132, 10348),
    ("Float", _f(0x3FC00000), "3fc00000", 1069547520, 70, 266, 11206),
    ("Float", _f(0x7FC00000), "7fc00000", 2143289344, 83, 251, 19795),
    ("Float", _f(0xFF800000), "ff800000", -8388608, 39, 263, 12711),
    ("Float", _f(0x7F7FC99E), "7f7fc99e", 2139081118, 124, 80, 16764),
    ("Float", _f(0x7F800001), "7fc00000", 2143289344, 83, 251, 19795),
]


@pytest.mark.parametrize(
    ("name", "value", "hex_", "hash_", "kg128", "kg300", "kg32768"), FLINK_VECTORS
)
def test_flink_vectors(
    name: str, value: object, hex_: str, hash_: int, kg128: int, kg300: int, kg32768: int
) -> None:
    key_type = jt.KEY_TYPES[
        BASE + {"Integer": "Int", "Character": "Char"}.get(name, name) + "Serializer"
    ]
    assert key_type.name == name
    data = bytes.fromhex(hex_)
    assert key_type.write(value) == data
    assert key_type.hash_code(value) == hash_
    assert [key_type.key_group(value, p) for p in (128, 300, 32768)] == [kg128, kg300, kg32768]
    read, end = key_type.read(b"\xaa" + data + b"\xbb", 1)
    assert end == len(data) + 1
    assert read == value or (math.isnan(read) and math.isnan(value))  # type: ignore[arg-type]


def test_spec_check_values() -> None:
    assert jt.assign_to_key_group(jt.java_string_hash("k29"), 128) == 0
    assert jt.assign_to_key_group(jt.java_string_hash("k17"), 128) == 64
    assert jt.assign_to_key_group(jt.java_long_hash(13), 128) == 1
    assert jt.assign_to_key_group(jt.java_long_hash(10), 128) == 67
    assert STRING is not None and STRING.key_group("k26", 128) == 64


def test_murmur_hash_edge_cases() -> None:
    assert jt.murmur_hash(0) == 0x2362F9DE  # murmur3_32 finaliser of one zero int, seed 0
    assert all(jt.murmur_hash(c) >= 0 for c in (-(2**31), -1, 2**31 - 1, 12345))
    with pytest.raises(ValueError, match="max parallelism"):
        jt.assign_to_key_group(1, 0)


def test_key_group_prefix() -> None:
    assert jt.key_group_prefix_bytes(128) == 1
    assert jt.key_group_prefix_bytes(129) == 2
    assert jt.key_group_prefix_bytes(32768) == 2
    assert jt.key_group_prefix(151, 2) == b"\x00\x97"
    assert jt.with_key_group(bytes.fromhex("05046b323900"), 1, 300, 2) == bytes.fromhex(
        "012c046b323900"
    )
    assert jt.with_key_group(bytes.fromhex("012c046b323900"), 2, 5, 1) == bytes.fromhex(
        "05046b323900"
    )


def test_string_encoding() -> None:
    assert jt.write_java_string("é") == b"\x02\xe9\x01"  # StringValue, not UTF-8
    assert jt.write_java_string(None) == b"\x00"
    assert jt.read_java_string(b"\x00") == (None, 1)
    assert jt.read_java_string(b"\x03\xe9\x01x") == ("éx", 4)
    assert jt.read_java_string(jt.write_java_string("\U0001f600")) == ("\U0001f600", 7)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "String key at offset 0"),
        (b"\x04k2", "String key"),
        (b"\x80\x80\x80\x80\x80\x80\x01", "varint longer than 5 bytes"),
        (b"\x02\xff\xff\x7f", "does not fit a UTF-16 unit"),
    ],
)
def test_bad_strings_raise_format_errors(data: bytes, message: str) -> None:
    with pytest.raises(FormatError, match=message):
        jt.read_java_string(data)


def test_fixed_width_reads_past_the_end_raise_format_errors() -> None:
    assert LONG is not None
    with pytest.raises(FormatError, match="cannot read a Long key at offset 2"):
        LONG.read(b"\x00" * 9, 2)


def test_null_keys_and_bad_values() -> None:
    assert STRING is not None and LONG is not None
    with pytest.raises(UnsupportedError, match="null String key"):
        STRING.hash_code(None)
    with pytest.raises(ValueError, match="not a valid Long"):
        LONG.write(2**63)


def test_registry_lookup() -> None:
    assert jt.key_type_for_serializer(None) is None
    assert jt.key_type_for_serializer("com.example.MySerializer$Snapshot") is None
    assert jt.key_type_for_serializer(BASE + "IntSerializer").fixed_length == 4  # type: ignore[union-attr]
    assert STRING is not None and STRING.fixed_length is None
    assert (
        jt.namespace_length_for_serializer(
            "org.apache.flink.runtime.state.VoidNamespaceSerializer$VoidNamespaceSerializerSnapshot"
        )
        == 1
    )
    assert (
        jt.namespace_length_for_serializer(
            "org.apache.flink.streaming.api.windowing.windows.TimeWindow$Serializer$TimeWindowSerializerSnapshot"
        )
        == 16
    )
    assert jt.namespace_length_for_serializer(BASE + "LongSerializer$LongSerializerSnapshot") == 8
    assert (
        jt.namespace_length_for_serializer(BASE + "StringSerializer$StringSerializerSnapshot")
        is None
    )


@given(st.text())
def test_strings_round_trip(text: str) -> None:
    data = jt.write_java_string(text)
    assert jt.read_java_string(data) == (text, len(data))
    assert jt.java_string_hash(text) == STRING.hash_code(text)  # type: ignore[union-attr]


# --- composite keys (spec §4.6) ------------------------------------------------------------


def test_split_value_state_key() -> None:
    assert STRING is not None
    key = jt.split_composite_key(bytes.fromhex("00046b323900"), 128, STRING, 1, "VALUE")
    assert key == jt.CompositeKey(0, None, "k29", bytes.fromhex("046b3239"), b"\x00", b"")


def test_split_map_state_key() -> None:
    assert STRING is not None
    key = jt.split_composite_key(bytes.fromhex("00046b323900036d30"), 128, STRING, 1, "MAP")
    assert key == jt.CompositeKey(
        0, None, "k29", bytes.fromhex("046b3239"), b"\x00", bytes.fromhex("036d30")
    )


def test_split_timer_key() -> None:
    assert STRING is not None
    key = jt.split_composite_key(
        bytes.fromhex("00800003bb2cc3d800046b323900"), 128, STRING, 1, "TIMERS"
    )
    assert key == jt.CompositeKey(0, 4102444800000, "k29", bytes.fromhex("046b3239"), b"\x00", b"")
    negative = jt.split_composite_key(
        bytes.fromhex("007fffffffffffffff046b323900"), 128, STRING, 1, "TIMERS"
    )
    assert negative.timestamp == -1


def test_split_two_byte_prefix_and_long_key() -> None:
    assert LONG is not None
    data = bytes.fromhex("0097") + (13).to_bytes(8, "big") + b"\x00"
    key = jt.split_composite_key(data, 300, LONG, 1, "LIST")
    assert (key.key_group, key.key, key.namespace_bytes) == (151, 13, b"\x00")


def test_split_ambiguous_key_with_length_suffixes() -> None:
    # String key and String namespace: both variable-sized, so each is followed by its
    # length as little-endian base-256 digits (writeVariableIntBytes)
    assert STRING is not None
    key_part, ns_part = jt.write_java_string("ab"), jt.write_java_string("x" * 299)
    assert len(ns_part) == 301  # varint(300) is 2 bytes
    data = b"\x05" + key_part + b"\x03" + ns_part + b"\x2d\x01"
    key = jt.split_composite_key(data, 128, STRING, None, "VALUE")
    assert (key.key_group, key.key, key.key_bytes, key.namespace_bytes) == (
        5,
        "ab",
        key_part,
        ns_part,
    )
    # With a map's user key after it, the namespace's end is found by reading it ...
    mapped = jt.split_composite_key(data + b"\x02u", 128, STRING, STRING, "MAP")
    assert (mapped.namespace_bytes, mapped.user_key_bytes) == (ns_part, b"\x02u")
    # ... or, without a reader, from its length suffix when only one split is consistent
    short = b"\x05" + key_part + b"\x03" + b"\x02w" + b"\x02" + b"\x02u"
    mapped = jt.split_composite_key(short, 128, STRING, None, "MAP")
    assert (mapped.namespace_bytes, mapped.user_key_bytes) == (b"\x02w", b"\x02u")
    with pytest.raises(UnsupportedError, match="2 possible splits"):
        jt.split_composite_key(data + b"\x02u", 128, STRING, None, "MAP")


def test_fixed_key_with_variable_namespace_has_no_suffix() -> None:
    assert LONG is not None
    data = b"\x01" + (7).to_bytes(8, "big") + jt.write_java_string("window")
    key = jt.split_composite_key(data, 128, LONG, None, "VALUE")
    assert key.namespace_bytes == jt.write_java_string("window")
    with pytest.raises(UnsupportedError, match="variable-length namespace from a map user key"):
        jt.split_composite_key(data, 128, LONG, None, "MAP")


@pytest.mark.parametrize(
    ("data", "max_parallelism", "namespace_length", "kind", "message"),
    [
        (b"", 128, 1, "VALUE", "shorter than its key-group prefix"),
        (b"\x00", 300, 1, "VALUE", "shorter than its key-group prefix"),
        (b"\x90\x02ab\x00", 128, 1, "VALUE", "key group 144 .* not below max parallelism 128"),
        (
            bytes.fromhex("00046b32390000"),
            128,
            1,
            "VALUE",
            "1 unexpected bytes after the namespace",
        ),
        (bytes.fromhex("00046b3239"), 128, 1, "VALUE", "ends inside its 1-byte namespace"),
        (bytes.fromhex("00046b323903"), 128, None, "VALUE", "length suffix at offset 5"),
        (bytes.fromhex("0080000003bb2c"), 128, 1, "TIMERS", "ends inside its timestamp"),
        (bytes.fromhex("00046b"), 128, 1, "VALUE", "cannot read a String key"),
    ],
)
def test_bad_composite_keys(
    data: bytes, max_parallelism: int, namespace_length: int | None, kind: str, message: str
) -> None:
    assert STRING is not None
    with pytest.raises(FormatError, match=message):
        jt.split_composite_key(data, max_parallelism, STRING, namespace_length, kind)


def test_unsupported_state_kind() -> None:
    assert STRING is not None
    with pytest.raises(UnsupportedError, match="PRIORITY_QUEUE"):
        jt.split_composite_key(bytes.fromhex("00046b323900"), 128, STRING, 1, "PRIORITY_QUEUE")


# --- against Flink itself --------------------------------------------------------------------


def _oracle_line(name: str, value: object) -> str:
    if name in ("String", "Character"):
        return f"{name} {str(value).encode('utf-16-be', 'surrogatepass').hex()}"
    if name == "Double":
        return f"{name} {jt.java_double_bits(value):x}"  # type: ignore[arg-type]
    return f"{name} {str(value).lower() if name == 'Boolean' else value}"


@pytest.mark.flink
def test_random_keys_match_flink(flink_dist: Path) -> None:
    rng = random.Random(11)
    alphabet = "ab€é\u0000\ud83d\ude00\uffff" + "".join(map(chr, range(32, 127)))
    cases: list[tuple[str, object]] = []
    for _ in range(400):
        cases.append(("String", "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))))
        cases.append(("Long", rng.randint(-(2**63), 2**63 - 1)))
        cases.append(("Integer", rng.randint(-(2**31), 2**31 - 1)))
        cases.append(("Double", struct.unpack(">d", rng.getrandbits(64).to_bytes(8, "big"))[0]))
    out = subprocess.run(
        ["java", "-cp", str(flink_dist), str(ORACLES / "KeyValues.java")],
        input="\n".join(_oracle_line(n, v) for n, v in cases) + "\n",
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    for i, (name, value) in enumerate(cases):
        hex_, hash_, kg128, kg300, kg32768 = out[5 * i : 5 * i + 5]
        key_type = jt.KEY_TYPES[BASE + {"Integer": "Int"}.get(name, name) + "Serializer"]
        assert key_type.write(value).hex() == hex_, (name, value)
        assert key_type.hash_code(value) == int(hash_), (name, value)
        assert [key_type.key_group(value, p) for p in (128, 300, 32768)] == [
            int(kg128),
            int(kg300),
            int(kg32768),
        ]
