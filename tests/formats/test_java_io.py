import pytest

from statectl.errors import FormatError
from statectl.formats.java_io import (
    DataReader,
    DataWriter,
    decode_modified_utf8,
    encode_modified_utf8,
)


@pytest.mark.parametrize(
    ("text", "encoded"),
    [
        ("abc", b"abc"),
        ("\x00", b"\xc0\x80"),
        ("é", b"\xc3\xa9"),
        ("€", b"\xe2\x82\xac"),
        # U+1F600 as a surrogate pair, 3 bytes each (CESU-8), never 4-byte UTF-8
        ("😀", b"\xed\xa0\xbd\xed\xb8\x80"),
    ],
)
def test_modified_utf8_matches_java(text: str, encoded: bytes) -> None:
    assert encode_modified_utf8(text) == encoded
    assert decode_modified_utf8(encoded) == text


def test_primitives_round_trip_big_endian() -> None:
    w = DataWriter()
    w.write_i32(-2)
    w.write_i64(1 << 40)
    w.write_i16(-1)
    w.write_u8(255)
    w.write_bool(True)
    w.write_utf("k\x0029")
    data = w.getvalue()
    assert data[:4] == b"\xff\xff\xff\xfe"
    r = DataReader(data)
    assert (r.read_i32(), r.read_i64(), r.read_i16(), r.read_u8(), r.read_bool()) == (
        -2,
        1 << 40,
        -1,
        255,
        True,
    )
    assert r.read_utf() == "k\x0029"
    assert r.at_end()


def test_truncated_read_names_the_offset() -> None:
    r = DataReader(b"\x00\x01\x02")
    r.read_u8()
    with pytest.raises(FormatError, match="needs 4 bytes at offset 1, only 2 left"):
        r.read_i32()


def test_invalid_utf_is_a_format_error() -> None:
    with pytest.raises(FormatError, match="offset 0"):
        DataReader(b"\x00\x02\xff\xff").read_utf()
