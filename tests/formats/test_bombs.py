"""Declared lengths that the input cannot back: each is refused with a FormatError before
anything is allocated for it (decompression bombs, huge counts in tiny inputs).

Each bomb runs in a forked child whose address space may grow by at most 256 MiB and which may
use 5 s of CPU: a reader that trusted a declared 4 GiB would fail there (or abort, as Snappy's
Rust allocator does) instead of raising the expected FormatError.
"""

from __future__ import annotations

import os
import resource
import signal
import struct
from collections.abc import Callable

import pytest

from statectl.errors import FormatError
from statectl.formats import keyed_blocks as kb
from statectl.formats import operator_state as ops
from statectl.formats import snappy_framed as sf
from statectl.formats.handles import DistributionMode, KeyGroupsHandle, OperatorStateOffsets
from statectl.formats.java_io import DataReader, excerpt
from statectl.formats.java_serialization import read_object_stream
from statectl.formats.java_types import read_java_string
from statectl.formats.metadata import (
    MAGIC,
    CheckpointMetadata,
    OperatorState,
    SubtaskState,
    read_metadata,
    write_metadata,
)

HEADROOM = 256 << 20  # address space a child may add
CPU_SECONDS = 5
WALL_SECONDS = 120  # only against a child that hangs (e.g. a lock held by a parent's thread)


def _address_space() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[0]) * resource.getpagesize()


def bounded(call: Callable[[], object]) -> str:
    """What `call` raises, run in a forked child with bounded address space and time:
    `FormatError: <message>`, another exception's name and text, or how the child died."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        os.close(read_end)
        try:
            _, hard = resource.getrlimit(resource.RLIMIT_AS)
            limit = _address_space() + HEADROOM
            resource.setrlimit(resource.RLIMIT_AS, (min(limit, hard) if hard > 0 else limit, hard))
            resource.setrlimit(resource.RLIMIT_CPU, (CPU_SECONDS, CPU_SECONDS + 1))
            signal.alarm(WALL_SECONDS)
            call()
            result = "no error"
        except FormatError as exc:
            result = f"FormatError: {exc.message}"
        except BaseException as exc:  # reported to the parent, which fails
            result = f"{type(exc).__name__}: {exc}"
        os.write(write_end, result.encode())
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        output = pipe.read().decode()
    _, status = os.waitpid(pid, 0)
    if status != 0:
        return f"child died (wait status {status}) after {output!r}"
    return output


def varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    return bytes(out) + bytes((value,))


def compressed_chunk(payload: bytes) -> bytes:
    """A compressed data chunk (checksum 0: not verified) with this raw Snappy payload."""
    body = b"\x00\x00\x00\x00" + payload
    return b"\x00" + len(body).to_bytes(3, "little") + body


FOUR_GIB = (1 << 32) - 1  # the most a 5-byte preamble can declare
BOMB = compressed_chunk(varint(FOUR_GIB) + b"\x00" * 64)
BOMB_STREAM = sf.STREAM_IDENTIFIER + BOMB


def refused(length: int, offset: int) -> str:
    return (
        f"FormatError: corrupt Snappy chunk at offset {offset}: declares {length} uncompressed "
        f"bytes, more than the 65536 a chunk may hold"
    )


# --- Snappy ----------------------------------------------------------------------------------


@pytest.mark.parametrize("length", [1 << 31, 3 << 30, FOUR_GIB])
def test_framed_stream_declaring_gigabytes(length: int) -> None:
    stream = sf.STREAM_IDENTIFIER + compressed_chunk(varint(length) + b"\x00" * 64)
    assert bounded(lambda: sf.decompress_stream(stream)) == refused(length, 10)


def test_bomb_after_a_good_chunk_names_its_own_offset() -> None:
    good = sf.compress_stream(b"abc" * 100)[len(sf.STREAM_IDENTIFIER) :]
    stream = sf.STREAM_IDENTIFIER + good + BOMB
    assert bounded(lambda: sf.decompress_stream(stream, verify=True)) == refused(
        FOUR_GIB, 10 + len(good)
    )


def test_keyed_block_with_a_bomb_chunk() -> None:
    assert bounded(lambda: list(kb.iter_entries(BOMB_STREAM, True))) == refused(FOUR_GIB, 10)
    assert bounded(lambda: kb.count_entries(BOMB_STREAM, True, 3)) == refused(FOUR_GIB, 10)
    assert bounded(lambda: kb.remap_state_ids(BOMB_STREAM, {0: 1}, True)) == refused(FOUR_GIB, 10)


def test_operator_state_element_with_a_bomb_chunk() -> None:
    assert bounded(lambda: ops.element_bytes(BOMB, True)) == refused(FOUR_GIB, 0)
    assert bounded(lambda: sf.decompress_chunks(BOMB, verify=True)) == refused(FOUR_GIB, 0)


def test_declared_length_above_what_the_payload_can_expand_to() -> None:
    # 65536 bytes need at least 3 * 65536 / 64 = 3072 compressed bytes (64-byte copies).
    assert sf.uncompressed_length(varint(65536) + b"\x00" * 3072) == 65536
    with pytest.raises(FormatError) as info:
        sf.uncompressed_length(varint(65536) + b"\x00" * 3071, 42)
    assert info.value.message == (
        "corrupt Snappy chunk at offset 42: declares 65536 uncompressed bytes, more than its "
        "3071 compressed bytes can hold"
    )


@pytest.mark.parametrize(
    ("preamble", "problem"),
    [(b"", "ends inside"), (b"\xff\xff", "ends inside"), (b"\xff" * 6, "has more than 5 bytes in")],
)
def test_broken_length_preamble(preamble: bytes, problem: str) -> None:
    stream = sf.STREAM_IDENTIFIER + compressed_chunk(preamble)
    with pytest.raises(FormatError) as info:
        sf.decompress_stream(stream)
    assert info.value.message == f"corrupt Snappy chunk at offset 10: {problem} its length"


def test_a_full_64_kib_chunk_still_decompresses() -> None:
    data = bytes(range(256)) * 256  # 65536 bytes: the largest chunk Flink writes
    stream = sf.compress_stream(data)
    (chunk,) = list(sf.iter_chunks(stream))[1:]
    assert sf.uncompressed_length(stream[chunk.start : chunk.end]) == 65536
    assert sf.decompress_stream(stream, verify=True) == data


# --- counts ----------------------------------------------------------------------------------


def test_operator_count_in_a_tiny_metadata() -> None:
    data = struct.pack(">iiqii", MAGIC, 6, 1, 0, (1 << 31) - 1)
    assert bounded(lambda: read_metadata(data)) == (
        "FormatError: operator states count 2147483647 at offset 20 exceeds the file size "
        "(0 bytes left)"
    )


def test_key_group_count_is_bounded_by_eight_bytes_per_offset() -> None:
    handle = KeyGroupsHandle(7, 0, (), None)
    subtask = SubtaskState(0, managed_keyed_state=handle)
    md = CheckpointMetadata(3, 1, (), (OperatorState(b"\x01" * 16, 1, 128, None, (subtask,)),))
    data = bytearray(write_metadata(md))
    # … 1 subtask, index 0, no operator states, keyed code 7, start key group 0, then the count.
    at = 4 + 4 + 8 + 4 + 4 + 16 + 4 + 4 + 1 + 4 + 4 + 4 + 4 + 1 + 4
    assert data[at : at + 4] == b"\x00\x00\x00\x00"
    left = len(data) - at - 4
    data[at : at + 4] = struct.pack(">i", left // 8 + 1)  # fits one byte each, not eight
    with pytest.raises(FormatError) as info:
        read_metadata(bytes(data))
    assert info.value.message == (
        f"key groups count {left // 8 + 1} at offset {at} exceeds the file size ({left} bytes left)"
    )


def test_java_array_length_is_bounded_by_the_stream() -> None:
    long_array = (
        b"\xac\xed\x00\x05"  # magic, version
        + b"\x75\x72\x00\x02[J"  # TC_ARRAY, TC_CLASSDESC "[J"
        + b"\x00" * 8  # serialVersionUID
        + b"\x02\x00\x00\x78\x70"  # serializable, 0 fields, end of annotations, no superclass
        + struct.pack(">i", (1 << 31) - 1)
        + b"\x00" * 15
    )
    assert bounded(lambda: read_object_stream(long_array)) == (
        "FormatError: array element count 2147483647 at offset 23 exceeds the 15 bytes left"
    )


def test_broadcast_entry_count_is_bounded_by_the_map() -> None:
    empty = ops.FixedLength(0)  # entries of no bytes: the count alone would drive the loop
    element = struct.pack(">i", (1 << 31) - 1) + b"\x00\x00"
    assert bounded(lambda: ops.split_broadcast_entries(element, empty, empty)) == (
        "FormatError: broadcast state entry count 2147483647 exceeds the 2 bytes of its map"
    )
    # one entry may be empty (a map holding only the empty key)
    assert ops.split_broadcast_entries(struct.pack(">i", 1), empty, empty) == [(b"", b"")]


def test_java_string_length_is_bounded_by_the_buffer() -> None:
    with pytest.raises(FormatError) as info:
        read_java_string(varint(1 << 34) + b"abc")
    assert info.value.message == (
        f"cannot read a String key at offset 0: string of {(1 << 34) - 1} characters runs past "
        "the end (3 left)"
    )


def test_check_count() -> None:
    reader = DataReader(b"\x00" * 10, 2)
    assert reader.check_count(2, "thing", 0, 4) == 2
    with pytest.raises(FormatError) as info:
        reader.check_count(3, "thing", 0, 4)
    assert info.value.message == "thing count 3 at offset 0 exceeds the 8 bytes left"
    with pytest.raises(FormatError) as info:
        reader.check_count(-1, "thing", 0)
    assert info.value.message == "negative thing count -1 at offset 0"


# --- what messages quote from the input ------------------------------------------------------


def test_names_read_from_the_input_are_quoted_in_part() -> None:
    assert excerpt("short") == "'short'"
    assert excerpt("x" * 70000) == f"{'x' * 60!r}… (70000 characters)"
    long_name = "n" * 70000
    states = [OperatorStateOffsets(long_name, DistributionMode.SPLIT_DISTRIBUTE, (500,))]
    with pytest.raises(FormatError) as info:
        ops.element_spans(states, 100)
    assert info.value.message == (
        f"operator state {'n' * 60!r}… (70000 characters): offset 500 is outside the file "
        "(100 bytes)"
    )
