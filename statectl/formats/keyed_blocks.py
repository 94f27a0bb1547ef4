"""Canonical keyed-state files: key-group offsets and key-group blocks.

Mirrors Flink's `FullSnapshotAsyncWriter` / `FullSnapshotRestoreOperation` and
`KeyGroupRangeOffsets` (flink-savepoint-format.md §4.3–§4.5). A block is
`i16 stateId`, then entries `i32 keyLen, key, i32 valueLen, value`; bit 7 of a key's first byte
marks the last entry of a state's run, which is followed by the next `i16 stateId` or the
end mark `0xFFFF`. With compression, each block is its own Snappy-framed stream.
"""

from __future__ import annotations

import struct
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from statectl.errors import FormatError
from statectl.formats import snappy_framed

END_OF_KEY_GROUP_MARK = 0xFFFF
FIRST_BIT_IN_BYTE_MASK = 0x80

_U16 = struct.Struct(">H")
_I32 = struct.Struct(">i")


@dataclass(frozen=True, slots=True)
class BlockSpan:
    """Bytes [start, end) of the file hold `key_group`'s block."""

    key_group: int
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class Entry:
    state_id: int
    key: bytes  # the "last of its run" flag cleared
    value: bytes


def header_length(offsets: Sequence[int], file_size: int) -> int:
    """The serializer-proxy header ends where the first block begins (§3.2 note)."""
    used = [o for o in offsets if o]
    return min(used) if used else file_size


def block_spans(start_key_group: int, offsets: Sequence[int], file_size: int) -> list[BlockSpan]:
    """Non-empty key groups and their byte ranges; blocks end where the next one starts."""
    present = [(start_key_group + i, o) for i, o in enumerate(offsets) if o]
    spans = []
    for n, (key_group, start) in enumerate(present):
        end = present[n + 1][1] if n + 1 < len(present) else file_size
        if not 0 < start < end <= file_size:
            raise FormatError(
                f"key group {key_group}: offset {start} is out of order or outside the file "
                f"({file_size} bytes)"
            )
        spans.append(BlockSpan(key_group, start, end))
    return spans


def _raw_block(block: bytes | memoryview, compressed: bool) -> memoryview:
    return memoryview(snappy_framed.decompress_stream(block) if compressed else block)


def iter_entries(
    block: bytes | memoryview, compressed: bool, num_states: int | None = None
) -> Iterator[Entry]:
    """Every entry of one key-group block, in file order."""
    data = _raw_block(block, compressed)
    for state_id, key_start, key_end, value_end in _walk(data, num_states):
        key = bytearray(data[key_start:key_end])
        key[0] &= ~FIRST_BIT_IN_BYTE_MASK & 0xFF
        yield Entry(state_id, bytes(key), bytes(data[key_end + 4 : value_end]))


def count_entries(
    block: bytes | memoryview, compressed: bool, num_states: int | None = None
) -> Counter[int]:
    """Entries per state id in one block (walks lengths only)."""
    counts: Counter[int] = Counter()
    for state_id, *_ in _walk(_raw_block(block, compressed), num_states):
        counts[state_id] += 1
    return counts


def _walk(data: memoryview, num_states: int | None) -> Iterator[tuple[int, int, int, int]]:
    """(state id, key start, key end, value end) per entry; the value starts at key end + 4."""
    size = len(data)
    pos = 0
    state_id = _read_state_id(data, pos, num_states)
    pos += 2
    while True:
        key_start, key_end = _length_prefixed(data, pos, "key")
        if key_end == key_start:
            raise FormatError(f"empty key at offset {pos} of a key-group block")
        _, value_end = _length_prefixed(data, key_end, "value")
        yield state_id, key_start, key_end, value_end
        pos = value_end
        if data[key_start] & FIRST_BIT_IN_BYTE_MASK:
            if pos + 2 > size:
                raise FormatError(f"key-group block ends at offset {pos} before its end mark")
            if _U16.unpack_from(data, pos)[0] == END_OF_KEY_GROUP_MARK:
                if pos + 2 != size:
                    raise FormatError(
                        f"{size - pos - 2} unexpected bytes after the end mark of a key-group block"
                    )
                return
            state_id = _read_state_id(data, pos, num_states)
            pos += 2


def _read_state_id(data: memoryview, pos: int, num_states: int | None) -> int:
    if pos + 2 > len(data):
        raise FormatError(f"key-group block ends at offset {pos} before a state id")
    state_id = _U16.unpack_from(data, pos)[0]
    if state_id == END_OF_KEY_GROUP_MARK or (num_states is not None and state_id >= num_states):
        raise FormatError(f"unknown state id {state_id} at offset {pos} of a key-group block")
    return state_id


def _length_prefixed(data: memoryview, pos: int, what: str) -> tuple[int, int]:
    if pos + 4 > len(data):
        raise FormatError(f"key-group block ends at offset {pos} inside a {what} length")
    length = _I32.unpack_from(data, pos)[0]
    start, end = pos + 4, pos + 4 + length
    if length < 0 or end > len(data):
        raise FormatError(f"{what} length {length} at offset {pos} runs past the key-group block")
    return start, end


def build_block(
    runs: Iterable[tuple[int, Sequence[tuple[bytes, bytes]]]], compress: bool = False
) -> bytes:
    """A block from (state id, [(key, value)]) runs; flags and end mark recomputed."""
    out = bytearray()
    for state_id, entries in runs:
        if not entries:
            continue
        out += struct.pack(">H", state_id)
        for n, (key, value) in enumerate(entries):
            flagged = bytearray(key)
            if n == len(entries) - 1:
                flagged[0] |= FIRST_BIT_IN_BYTE_MASK
            out += _I32.pack(len(flagged)) + flagged + _I32.pack(len(value)) + value
    if not out:
        raise ValueError("a key-group block needs at least one entry")
    out += _U16.pack(END_OF_KEY_GROUP_MARK)
    return snappy_framed.compress_stream(out) if compress else bytes(out)


def remap_state_ids(block: bytes | memoryview, mapping: dict[int, int], compressed: bool) -> bytes:
    """The same block with its state ids renumbered (headers that list states differently)."""
    data = bytearray(_raw_block(block, compressed))
    starts_run = True
    for state_id, key_start, _, _ in _walk(memoryview(bytes(data)), None):
        if starts_run:  # the i16 state id sits just before this entry's i32 key length
            if state_id not in mapping:
                raise FormatError(f"state id {state_id} has no counterpart in the new header")
            _U16.pack_into(data, key_start - 6, mapping[state_id])
        starts_run = bool(data[key_start] & FIRST_BIT_IN_BYTE_MASK)
    return snappy_framed.compress_stream(data) if compressed else bytes(data)
