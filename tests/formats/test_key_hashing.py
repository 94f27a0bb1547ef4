"""Vectorised key groups equal the scalar ones (and Flink's) for every key type."""

from __future__ import annotations

import dataclasses
import math
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from statectl.errors import FormatError, UnsupportedError
from statectl.formats import java_types as jt
from statectl.formats import key_hashing
from tests.formats.test_java_types import BASE, FLINK_VECTORS

MAX_PARALLELISMS = (128, 256, 300, 4096, 32768)


def _key_type(name: str) -> jt.KeyType:
    return jt.KEY_TYPES[
        BASE + {"Integer": "Int", "Character": "Char"}.get(name, name) + "Serializer"
    ]


def _bits_double(bits: int) -> float:
    return float(struct.unpack(">d", bits.to_bytes(8, "big"))[0])


def _bits_float(bits: int) -> float:
    return float(struct.unpack(">f", bits.to_bytes(4, "big"))[0])


# Strings: ASCII (the vectorised path), any code point incl. lone surrogates, long ones (two
# varint bytes of length), empty.
_TEXT = st.one_of(
    st.text(alphabet=st.characters(max_codepoint=0x7F), max_size=40),
    st.text(max_size=12),
    st.text(alphabet=st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), max_size=3),
    st.text(alphabet=st.characters(max_codepoint=0x7F), min_size=120, max_size=400),
)
VALUES = {
    "String": _TEXT,
    "Long": st.integers(-(1 << 63), (1 << 63) - 1),
    "Integer": st.integers(-(1 << 31), (1 << 31) - 1),
    "Short": st.integers(-(1 << 15), (1 << 15) - 1),
    "Byte": st.integers(-128, 127),
    "Boolean": st.booleans(),
    "Character": st.integers(0, 0xFFFF).map(chr),
    "Double": st.integers(0, (1 << 64) - 1).map(_bits_double),
    "Float": st.integers(0, (1 << 32) - 1).map(_bits_float),
}


def _composite(key_type: jt.KeyType, value: object, prefix: bytes, suffix: bytes) -> bytes:
    return prefix + key_type.write(value) + suffix


@pytest.mark.parametrize("name", sorted(VALUES))
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_vectorised_equals_scalar(name: str, data: st.DataObject) -> None:
    key_type = _key_type(name)
    values = data.draw(st.lists(VALUES[name], min_size=1, max_size=40))
    offset = data.draw(st.integers(0, 10))
    suffixes = data.draw(
        st.lists(st.binary(max_size=4), min_size=len(values), max_size=len(values))
    )
    keys = [
        _composite(key_type, v, bytes(range(offset)), s)
        for v, s in zip(values, suffixes, strict=True)
    ]
    for max_parallelism in MAX_PARALLELISMS:
        got = key_hashing.key_groups_of(key_type, keys, offset, max_parallelism).tolist()
        expected = [key_type.key_group(v, max_parallelism) for v in values]
        assert got == expected


@pytest.mark.parametrize(
    ("name", "value", "hex_", "hash_", "kg128", "kg300", "kg32768"), FLINK_VECTORS
)
def test_flink_vectors(
    name: str, value: object, hex_: str, hash_: int, kg128: int, kg300: int, kg32768: int
) -> None:
    key_type = _key_type(name)
    keys = [b"\x07\x01" + bytes.fromhex(hex_) + b"\x00"]
    codes = key_hashing.hash_codes(key_type, keys[0], [0], [len(keys[0])], [2])
    assert codes.view(np.int32).tolist() == [hash_]
    got = [key_hashing.key_groups_of(key_type, keys, 2, m)[0] for m in (128, 300, 32768)]
    assert got == [kg128, kg300, kg32768]


def test_murmur_of_every_edge_code() -> None:
    codes = [0, 1, -1, 42, (1 << 31) - 1, -(1 << 31), 104434, -1097262577]
    got = key_hashing.murmur_hash(np.array(codes, np.int64).astype(np.uint32)).tolist()
    assert got == [jt.murmur_hash(c) for c in codes]


def test_keys_in_one_buffer_at_their_own_offsets() -> None:
    """A timer key's user key starts after its timestamp: offsets differ per key."""
    long_type = _key_type("Long")
    value_key = b"\x01\x02" + long_type.write(-7) + b"\x00"
    timer_key = b"\x00\x05" + bytes(8) + long_type.write(13) + b"\x00"
    data = value_key + timer_key
    starts, ends = [0, len(value_key)], [len(value_key), len(data)]
    got = key_hashing.key_groups(long_type, data, starts, ends, [2, 10], 4096).tolist()
    assert got == [long_type.key_group(-7, 4096), long_type.key_group(13, 4096)]


def test_a_key_type_without_a_kernel_takes_the_per_key_fallback() -> None:
    """Any KeyType works: its own read and hash_code, once per key."""
    long_type = _key_type("Long")
    reversed_long = dataclasses.replace(
        long_type,
        serializer="com.example.ReversedLongSerializer",
        _read=lambda buf, pos: (int.from_bytes(buf[pos : pos + 8], "little", signed=True), pos + 8),
    )
    keys = [b"\x00" + v.to_bytes(8, "little", signed=True) for v in (5, -9, 1 << 40)]
    got = key_hashing.key_groups_of(reversed_long, keys, 1, 256).tolist()
    assert got == [long_type.key_group(v, 256) for v in (5, -9, 1 << 40)]


def test_nan_bits_hash_as_java_canonical_nan() -> None:
    double, single = _key_type("Double"), _key_type("Float")
    odd_double = b"\x00" + (0x7FF0000000000001).to_bytes(8, "big")
    odd_float = b"\x00" + (0xFF800001).to_bytes(4, "big")
    assert key_hashing.key_groups_of(double, [odd_double], 1, 128).tolist() == [
        double.key_group(math.nan, 128)
    ]
    assert key_hashing.key_groups_of(single, [odd_float], 1, 128).tolist() == [
        single.key_group(math.nan, 128)
    ]


def test_a_truncated_key_raises_the_scalar_error() -> None:
    with pytest.raises(FormatError, match=r"^cannot read a Long key at offset 1: "):
        key_hashing.key_groups_of(_key_type("Long"), [b"\x00\x01\x02"], 1, 128)
    with pytest.raises(FormatError, match=r"^cannot read a String key at offset 1: "):
        key_hashing.key_groups_of(_key_type("String"), [b"\x00\x05ab"], 1, 128)


def test_a_null_string_key_has_no_hash_code() -> None:
    with pytest.raises(UnsupportedError, match=r"^a null String key has no hash code$"):
        key_hashing.key_groups_of(_key_type("String"), [b"\x00\x00"], 1, 128)


def test_max_parallelism_outside_flinks_bounds() -> None:
    with pytest.raises(ValueError, match=r"^max parallelism 0 is outside 1\.\.32768$"):
        key_hashing.key_groups_of(_key_type("Long"), [bytes(8)], 0, 0)


def test_an_empty_batch() -> None:
    assert key_hashing.key_groups_of(_key_type("String"), [], 0, 128).tolist() == []


@settings(max_examples=80, deadline=None)
@given(
    values=st.lists(
        st.text(
            alphabet=st.sampled_from("a\x00é€\U0001f600\ud800\udfff\uffff\x7f\x80߿"), max_size=12
        ),
        min_size=1,
        max_size=30,
    ),
    suffix=st.binary(max_size=3),
)
def test_strings_beyond_ascii_are_hashed_without_the_per_key_fallback(
    values: list[str], suffix: bytes
) -> None:
    """Their units (one to three varint bytes each, surrogates included) are read in numpy."""
    key_type = _key_type("String")
    keys = [b"\x05" + key_type.write(v) + suffix for v in values]

    def refused(*args: object) -> int:
        raise AssertionError("a String key took the per-key fallback")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(key_hashing, "_scalar_code", refused)
        got = key_hashing.key_groups_of(key_type, keys, 1, 32768).tolist()
    assert got == [key_type.key_group(v, 32768) for v in values]
