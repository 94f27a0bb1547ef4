"""Snappy framing, as xerial's `SnappyFramedOutputStream` writes it for Flink.

Mirrors `SnappyStreamCompressionDecorator` (flink-savepoint-format.md §3.5, §4.5): a stream
identifier `FF 06 00 00 "sNaPpY"`, then chunks of u8 type, u24 little-endian length (checksum plus
payload), a masked CRC-32C of the uncompressed bytes (little-endian) and the payload. Flink writes
blocks of at most 64 KiB and stores a block uncompressed when compression saves less than 15 %.

Flink opens one stream per key-group block, and one per operator-state file whose elements each
start a new chunk, so an element is a chunk sequence without the identifier. Flink reads with
checksum verification off; so does `decompress_*` unless asked to verify.

cramjam does the Snappy work: its framed format is this one, so it writes the chunks (and their
CRC-32C) and, when verifying, decodes the whole stream checking every checksum. The chunks are
still walked here: a stream must be bomb-checked before cramjam decodes it, checksums are ignored
unless verifying, and an element has no identifier. Without verification each compressed chunk's
body is decoded alone (`decompress_raw`).

A compressed chunk's payload starts with the raw Snappy preamble, the uncompressed length as a
varint. It is checked before decompressing: Snappy allocates what it declares, so a few corrupt
bytes claiming 4 GiB would otherwise exhaust memory. The framing format caps a chunk at 64 KiB
(xerial's `SnappyFramedOutputStream.MAX_BLOCK_SIZE`, the block size Flink uses).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

import cramjam

from statectl.errors import FormatError

STREAM_IDENTIFIER = b"\xff\x06\x00\x00sNaPpY"
COMPRESSED = 0x00
UNCOMPRESSED = 0x01
STREAM_IDENTIFIER_TYPE = 0xFF
PADDING = 0xFE
BLOCK_SIZE = 1 << 16  # SnappyStreamCompressionDecorator.COMPRESSION_BLOCK_SIZE
MIN_COMPRESSION_RATIO = 0.85  # … .MIN_COMPRESSION_RATIO: compressed/raw above this ⇒ stored raw
MAX_CHUNK_DATA = 1 << 16  # framing format: a chunk's uncompressed data is at most 65536 bytes
# Snappy's densest element is a 3-byte copy of 64 bytes: no payload expands more than 64/3.
_MAX_EXPANSION_NUMERATOR, _MAX_EXPANSION_DENOMINATOR = 64, 3
_MAX_VARINT_BYTES = 5  # the preamble is a 32-bit length

_HEADER = struct.Struct("<I")  # type in the low byte, length in the upper three
_CRC = struct.Struct("<I")
_CHUNK_HEADER_SIZE = 4
_CRC_SIZE = 4
_DATA_PREFIX = _CHUNK_HEADER_SIZE + _CRC_SIZE  # a data chunk's payload starts this far in
_MASK_DELTA = 0xA282EAD8

Buffer = bytes | bytearray | memoryview
_Data = Buffer | cramjam.Buffer  # a chunk's data: cramjam's output, or a view of the input


@dataclass(frozen=True, slots=True)
class Chunk:
    """One chunk: `type` and the byte range [start, end) of its payload (after the checksum)."""

    type: int
    masked_crc: int | None  # None for chunks without a checksum (identifier, padding, skippable)
    start: int
    end: int


def decompress_stream(data: Buffer, verify: bool = False) -> bytes:
    """A whole framed stream, which must start with the stream identifier."""
    view = memoryview(data)
    if view[: len(STREAM_IDENTIFIER)] != STREAM_IDENTIFIER:
        raise FormatError("compressed data does not start with the Snappy stream identifier")
    return _decompress(view, len(STREAM_IDENTIFIER), verify)


def decompress_chunks(data: Buffer, verify: bool = False) -> bytes:
    """Chunks cut from a stream, with or without identifiers (an operator-state element)."""
    return _decompress(memoryview(data), 0, verify)


def iter_chunks(data: Buffer, pos: int = 0) -> Iterator[Chunk]:
    """The chunks of `data` from `pos`, checking that they tile it exactly."""
    view = memoryview(data)
    for kind, at, end in _walk(view, pos):
        if kind in (COMPRESSED, UNCOMPRESSED):
            yield Chunk(
                kind, _CRC.unpack_from(view, at + _CHUNK_HEADER_SIZE)[0], at + _DATA_PREFIX, end
            )
        else:
            yield Chunk(kind, None, at + _CHUNK_HEADER_SIZE, end)


def _walk(view: memoryview, pos: int) -> Iterator[tuple[int, int, int]]:
    """(type, offset, end) of each chunk from `pos`, checking that they tile `view` exactly."""
    size = len(view)
    while pos < size:
        if pos + _CHUNK_HEADER_SIZE > size:
            raise FormatError(f"Snappy chunk header truncated at offset {pos}")
        header = _HEADER.unpack_from(view, pos)[0]
        kind, length = header & 0xFF, header >> 8
        start = pos + _CHUNK_HEADER_SIZE
        end = start + length
        if end > size:
            raise FormatError(
                f"Snappy chunk at offset {pos} needs {length} bytes, only {size - start} left"
            )
        if kind <= UNCOMPRESSED:
            if length < _CRC_SIZE:
                raise FormatError(
                    f"Snappy data chunk at offset {pos} is too short for its checksum"
                )
        elif kind == STREAM_IDENTIFIER_TYPE:
            # The identifier may repeat (concatenated streams); it must always be the full one.
            if view[pos:end] != STREAM_IDENTIFIER:
                raise FormatError(f"corrupt Snappy stream identifier at offset {pos}")
        elif kind < 0x80:
            raise FormatError(
                f"reserved unskippable Snappy chunk type 0x{kind:02x} at offset {pos}"
            )
        yield kind, pos, end
        pos = end


def _decompress(view: memoryview, pos: int, verify: bool) -> bytes:
    if verify:
        verified = _verified_by_cramjam(view, pos)
        if verified is not None:
            return verified
    # Chunk by chunk, in order: the first problem is the one reported.
    parts: list[_Data] = []
    for kind, at, end in _walk(view, pos):
        part: _Data
        if kind == COMPRESSED:
            part = _decompress_raw(view[at + _DATA_PREFIX : end], at)
        elif kind == UNCOMPRESSED:
            part = view[at + _DATA_PREFIX : end]
        else:
            continue
        if verify:
            _verify(part, at, _CRC.unpack_from(view, at + _CHUNK_HEADER_SIZE)[0])
        parts.append(part)
    return b"".join(parts)


def _verified_by_cramjam(view: memoryview, pos: int) -> bytes | None:
    """The data of a sound stream, decoded by cramjam's framing decoder, which checks every
    chunk's CRC-32C; None if anything is wrong (the chunk-by-chunk decoding then says what)."""
    try:
        for kind, at, end in _walk(view, pos):
            if kind == COMPRESSED:  # before cramjam allocates what a chunk declares
                uncompressed_length(view[at + _DATA_PREFIX : end])
        stream = view if pos else b"".join((STREAM_IDENTIFIER, view))
        return bytes(cramjam.snappy.decompress(stream))
    except (FormatError, cramjam.DecompressionError):
        return None


def _verify(part: _Data, at: int, masked_crc: int) -> None:
    if len(part) > BLOCK_SIZE:
        raise FormatError(f"Snappy chunk at offset {at} holds more than 64 KiB")
    if masked_crc32c(part) != masked_crc:
        raise FormatError(f"Snappy chunk checksum mismatch at offset {at}")


def uncompressed_length(payload: Buffer, chunk_offset: int = 0) -> int:
    """The uncompressed length a compressed chunk's payload declares (its raw Snappy varint
    preamble), refused when it exceeds the framing limit or what the payload could expand to.

    `chunk_offset` (where the chunk starts) is only for messages.
    """
    view = memoryview(payload)
    length = 0
    for index in range(min(len(view), _MAX_VARINT_BYTES)):
        length |= (view[index] & 0x7F) << (7 * index)
        if view[index] < 0x80:
            _check_length(length, len(view) - index - 1, chunk_offset)
            return length
    problem = "ends inside" if len(view) < _MAX_VARINT_BYTES else "has more than 5 bytes in"
    raise FormatError(f"corrupt Snappy chunk at offset {chunk_offset}: {problem} its length")


def _check_length(length: int, body: int, chunk_offset: int) -> None:
    if length > MAX_CHUNK_DATA:
        limit = f"the {MAX_CHUNK_DATA} a chunk may hold"
    elif length * _MAX_EXPANSION_DENOMINATOR > body * _MAX_EXPANSION_NUMERATOR:
        limit = f"its {body} compressed bytes can hold"
    else:
        return
    raise FormatError(
        f"corrupt Snappy chunk at offset {chunk_offset}: declares {length} uncompressed bytes, "
        f"more than {limit}"
    )


def _decompress_raw(payload: memoryview, chunk_offset: int) -> cramjam.Buffer:
    uncompressed_length(payload, chunk_offset)  # before cramjam allocates what it declares
    try:
        return cramjam.snappy.decompress_raw(payload)
    except Exception as exc:  # cramjam raises its own DecompressionError
        raise FormatError(f"corrupt Snappy chunk at offset {chunk_offset}: {exc}") from None


def compress_stream(data: Buffer) -> bytes:
    """A framed stream holding `data`, chunked and with checksums as xerial writes it.

    cramjam frames 64 KiB blocks as xerial does, but stores a block uncompressed only when
    compression saves less than 12.5 %; such blocks saving less than 15 % are rewritten here.
    The compressed bytes are those of cramjam's Snappy encoder: Flink 1.15's snappy-java wrote the
    same, newer ones often pick other copies (readers only need valid Snappy).
    """
    view = memoryview(data)
    framed = memoryview(cramjam.snappy.compress(view))
    if not len(view):  # cramjam writes nothing at all for empty input
        return STREAM_IDENTIFIER
    parts: list[Buffer] = []
    copied, pos = 0, len(STREAM_IDENTIFIER)
    for block_start in range(0, len(view), BLOCK_SIZE):
        if pos + _DATA_PREFIX > len(framed):
            raise RuntimeError("cramjam's Snappy framing wrote fewer chunks than 64 KiB blocks")
        header = _HEADER.unpack_from(framed, pos)[0]
        end = pos + _CHUNK_HEADER_SIZE + (header >> 8)
        block = view[block_start : block_start + BLOCK_SIZE]
        if header & 0xFF == COMPRESSED and end - pos - _DATA_PREFIX > (
            MIN_COMPRESSION_RATIO * len(block)
        ):  # xerial keeps this block uncompressed: same checksum, the raw bytes as payload
            crc = framed[pos + _CHUNK_HEADER_SIZE : pos + _DATA_PREFIX]
            parts += (framed[copied:pos], _chunk_bytes(UNCOMPRESSED, crc, block))
            copied = end
        pos = end
    if pos != len(framed):
        raise RuntimeError("cramjam's Snappy framing wrote more chunks than 64 KiB blocks")
    if not parts:
        return bytes(framed)
    parts.append(framed[copied:])
    return b"".join(parts)


def _chunk_bytes(kind: int, crc: Buffer, payload: Buffer) -> bytes:
    length = _CRC_SIZE + len(payload)
    return b"".join((_HEADER.pack(kind | (length << 8)), crc, payload))


def masked_crc32c(data: _Data) -> int:
    """The framing format's masked CRC-32C of `data` (at most one 64 KiB block)."""
    if len(data) > BLOCK_SIZE:
        raise ValueError("masked_crc32c covers one block of at most 64 KiB")
    framed = memoryview(cramjam.snappy.compress(data))
    if not len(data):  # cramjam writes nothing at all for empty input
        return mask_crc(0)
    masked: int = _CRC.unpack_from(framed, len(STREAM_IDENTIFIER) + _CHUNK_HEADER_SIZE)[0]
    return masked


def mask_crc(crc: int) -> int:
    """The framing format's checksum masking: rotate right by 15, add a constant."""
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + _MASK_DELTA) & 0xFFFFFFFF
