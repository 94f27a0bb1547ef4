"""Snappy framing, as xerial's `SnappyFramedOutputStream` writes it for Flink.

Mirrors `SnappyStreamCompressionDecorator` (flink-savepoint-format.md §3.5, §4.5): a stream
identifier `FF 06 00 00 "sNaPpY"`, then chunks of u8 type, u24 little-endian length, a masked
CRC-32C and the payload. Flink opens a stream per key-group block and per operator-state region.
"""

from __future__ import annotations

import cramjam

from statectl.errors import FormatError

STREAM_IDENTIFIER = b"\xff\x06\x00\x00sNaPpY"


def decompress_stream(data: bytes | memoryview) -> bytes:
    """A whole framed stream, starting with the stream identifier."""
    if bytes(data[: len(STREAM_IDENTIFIER)]) != STREAM_IDENTIFIER:
        raise FormatError("compressed block does not start with the Snappy stream identifier")
    return _decompress(data)


def decompress_chunks(data: bytes | memoryview) -> bytes:
    """Chunks cut from the middle of a stream (an operator-state element starts at a chunk)."""
    return _decompress(STREAM_IDENTIFIER + bytes(data))


def compress_stream(data: bytes | memoryview) -> bytes:
    """A new framed stream holding `data`."""
    return bytes(cramjam.snappy.compress(bytes(data)))


def _decompress(data: bytes | memoryview) -> bytes:
    try:
        return bytes(cramjam.snappy.decompress(bytes(data)))
    except Exception as exc:  # cramjam raises its own DecompressionError and ValueErrors
        raise FormatError(f"corrupt Snappy-compressed data: {exc}") from None
