"""Snappy framing (spec §3.5, §4.5) on hand-built chunks."""

from __future__ import annotations

import contextlib
import os
import struct

import cramjam
import pytest
from hypothesis import given
from hypothesis import strategies as st

from statectl.errors import FormatError
from statectl.formats import snappy_framed as sf

IDENTIFIER = bytes.fromhex("ff060000734e61507059")


def crc32c_reference(data: bytes) -> int:
    """Bitwise CRC-32C (Castagnoli, reflected polynomial 0x82F63B78): slow but obviously right."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def chunk(kind: int, payload: bytes, crc: int | None = None) -> bytes:
    body = payload if crc is None else struct.pack("<I", crc) + payload
    return bytes([kind]) + len(body).to_bytes(3, "little") + body


def data_chunk(data: bytes, compressed: bool = False) -> bytes:
    crc = sf.mask_crc(crc32c_reference(data))
    if compressed:
        return chunk(0x00, bytes(cramjam.snappy.compress_raw(data)), crc)
    return chunk(0x01, data, crc)


def test_constants() -> None:
    assert sf.STREAM_IDENTIFIER == IDENTIFIER
    assert sf.BLOCK_SIZE == 65536
    assert sf.MIN_COMPRESSION_RATIO == 0.85


def test_crc32c_check_value_and_masking() -> None:
    assert crc32c_reference(b"123456789") == 0xE3069283
    # mask = rotate right 15 + 0xa282ead8 (framing_format.txt)
    assert sf.mask_crc(0xE3069283) == ((0xE3069283 >> 15 | 0xE3069283 << 17) + 0xA282EAD8) % 2**32
    for data in (b"", b"123456789", os.urandom(1000), b"a" * 65536):
        assert sf.masked_crc32c(data) == sf.mask_crc(crc32c_reference(data))


def test_uncompressed_chunk_as_flink_writes_one_long_element() -> None:
    # Flink 2.3 compressed operator state: `01 0C 00 00 <crc>` + one 8-byte long (spec §3.5)
    element = (42).to_bytes(8, "big")
    stream = IDENTIFIER + data_chunk(element)
    assert stream[10:14] == bytes.fromhex("010c0000")
    assert sf.decompress_stream(stream, verify=True) == element
    assert sf.decompress_chunks(stream[10:], verify=True) == element


def test_compressed_uncompressed_skippable_and_padding_chunks() -> None:
    text = b"flink state " * 100
    stream = (
        IDENTIFIER
        + data_chunk(text, compressed=True)
        + chunk(0x80, b"skip me")
        + data_chunk(b"raw")
        + chunk(0xFE, b"\x00" * 5)
    )
    assert sf.decompress_stream(stream, verify=True) == text + b"raw"
    kinds = [c.type for c in sf.iter_chunks(stream)]
    assert kinds == [0xFF, 0x00, 0x80, 0x01, 0xFE]


def test_repeated_identifier_inside_a_chunk_range_is_accepted() -> None:
    # an element range spanning two states' regions can contain a stream identifier
    assert sf.decompress_chunks(data_chunk(b"a") + IDENTIFIER + data_chunk(b"b")) == b"ab"


def test_empty_input() -> None:
    assert sf.decompress_stream(IDENTIFIER) == b""
    assert sf.decompress_chunks(b"") == b""


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "stream identifier"),
        (b"\xff\x06\x00\x00sNaPpX", "stream identifier"),
        (IDENTIFIER + b"\x01\x0c", "chunk header truncated"),
        (IDENTIFIER + b"\x01\x0c\x00\x00abcd", "needs 12 bytes"),
        (IDENTIFIER + chunk(0x02, b"reserved"), "reserved unskippable"),
        (IDENTIFIER + chunk(0x01, b"ab"), "too short for its checksum"),
        (IDENTIFIER + chunk(0x00, b"\x00\x00\x00\x00\xff\xff\xff\xff\x0f"), "corrupt Snappy chunk"),
        (IDENTIFIER + chunk(0xFF, b"sNaPpX"), "corrupt Snappy stream identifier"),
    ],
)
def test_bad_streams_raise_format_errors(data: bytes, message: str) -> None:
    with pytest.raises(FormatError, match=message):
        sf.decompress_stream(data)


def test_checksums_are_ignored_unless_verifying() -> None:
    stream = IDENTIFIER + chunk(0x01, b"payload", crc=0x12345678)
    assert sf.decompress_stream(stream) == b"payload"
    with pytest.raises(FormatError, match="checksum mismatch"):
        sf.decompress_stream(stream, verify=True)


def test_compress_small_input_is_stored_uncompressed() -> None:
    # 3 bytes compress to 5: above xerial's 0.85 ratio, so stored raw, crc over the raw bytes
    crc = struct.pack("<I", sf.mask_crc(crc32c_reference(b"abc")))
    assert sf.compress_stream(b"abc") == IDENTIFIER + b"\x01\x07\x00\x00" + crc + b"abc"
    assert sf.compress_stream(b"") == IDENTIFIER


def test_compress_uses_64k_blocks_and_the_ratio_rule() -> None:
    compressible = b"0123456789abcdef" * 9000  # 144000 bytes: blocks of 65536, 65536, 12928
    chunks = list(sf.iter_chunks(sf.compress_stream(compressible)))
    assert [c.type for c in chunks] == [0xFF, 0x00, 0x00, 0x00]
    sizes = [
        len(bytes(cramjam.snappy.decompress_raw(sf.compress_stream(compressible)[c.start : c.end])))
        for c in chunks[1:]
    ]
    assert sizes == [65536, 65536, 12928]
    random_bytes = os.urandom(70000)
    chunks = list(sf.iter_chunks(sf.compress_stream(random_bytes)))
    assert [(c.type, c.end - c.start) for c in chunks[1:]] == [(0x01, 65536), (0x01, 4464)]


@given(st.binary(max_size=3000) | st.binary(max_size=50).map(lambda b: b * 3000))
def test_compress_round_trips_with_valid_checksums(data: bytes) -> None:
    stream = sf.compress_stream(data)
    assert sf.decompress_stream(stream, verify=True) == data
    # and cramjam's own framing decoder (which checks CRCs) agrees
    assert bytes(cramjam.snappy.decompress(stream)) == data


@given(st.binary(max_size=200))
def test_random_bytes_raise_only_format_errors(data: bytes) -> None:
    with contextlib.suppress(FormatError):
        sf.decompress_chunks(data)
    with contextlib.suppress(FormatError):
        sf.decompress_stream(IDENTIFIER + data, verify=True)


def test_verifying_rejects_chunks_above_64k() -> None:
    big = b"x" * 70000
    with pytest.raises(FormatError, match="more than 64 KiB"):
        sf.decompress_stream(IDENTIFIER + chunk(0x01, big, crc=0), verify=True)
    assert sf.decompress_stream(IDENTIFIER + chunk(0x01, big, crc=0)) == big
