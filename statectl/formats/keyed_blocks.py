"""Canonical keyed-state files: key-group offsets and key-group blocks.

Mirrors Flink's `FullSnapshotAsyncWriter` / `FullSnapshotRestoreOperation` and
`KeyGroupRangeOffsets` (flink-savepoint-format.md §4.3–§4.5). A block is `u16 stateId`, then
entries `i32 keyLen, key, i32 valueLen, value`; bit 7 of a key's first byte marks the last entry
of a state's run, which is followed by the next `u16 stateId` or the end mark `0xFFFF`. With
compression, each block is its own Snappy-framed stream.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from statectl.errors import FormatError
from statectl.formats import snappy_framed

END_OF_KEY_GROUP_MARK = 0xFFFF
FIRST_BIT_IN_BYTE_MASK = 0x80

_U16 = struct.Struct(">H")
_I32 = struct.Struct(">i")

Buffer = bytes | bytearray | memoryview


@dataclass(frozen=True, slots=True)
class BlockSpan:
    """Bytes [start, end) of the file hold `key_group`'s block."""

    key_group: int
    start: int
    end: int

    @property
    def length(self) -> int:
        return self.end - self.start


@dataclass(frozen=True, slots=True)
class Entry:
    state_id: int
    key: bytes  # the "last of its run" flag cleared
    value: bytes


# --- offsets -----------------------------------------------------------------------------


def header_length(offsets: Sequence[int], file_size: int) -> int:
    """The serializer-proxy header ends where the first block begins (§4.3). An offset must
    lie inside the file by the rule of `block_spans` (a block at the end of the file is empty)."""
    used = [o for o in offsets if o]
    for offset in used:
        if not 0 < offset < file_size:
            raise FormatError(f"key-group offset {offset} is outside the file ({file_size} bytes)")
    return min(used) if used else file_size


class Layout(enum.Enum):
    """The two layouts of a code-12 keyed-state file's key groups (§4.4, §4.8)."""

    CANONICAL = "canonical"  # key-group blocks: savepoints, RocksDB's full checkpoints
    HEAP = "heap"  # the hashmap backend's own snapshot format: its checkpoints, NATIVE savepoints


def first_block_layout(
    head: Buffer, block_size: int, key_group: int, compressed: bool, num_states: int
) -> Layout | None:
    """Which layout a file's first key group is in, from its bytes: `head` is the block's start
    (the whole block, or a prefix of it: the block is `block_size` bytes); None where the bytes
    fit both layouts, or neither.

    A heap key group starts with its id (`i32 keyGroup`, never compressed), then per state
    `u16 stateId, i32 count` (each state in its own Snappy stream when compressed). A canonical
    block starts with `u16 stateId` and a key length, or is one Snappy stream (first byte 0xFF,
    where a key group's id, below 2^15, starts with 0x00). So a compressed block, or one whose
    first four bytes are not its key group's id, is told at once. An uncompressed block that
    starts with its own id (key group 0 and state 0: four zero bytes) is walked as canonical
    entries to its end mark, and its first state id and count read as the heap writes them.
    """
    if len(head) < 4 or _I32.unpack_from(head)[0] != key_group:
        return Layout.CANONICAL
    if compressed:
        return Layout.HEAP
    heap_fits = len(head) >= 10 and _U16.unpack_from(head, 4)[0] < num_states
    heap_fits = heap_fits and _I32.unpack_from(head, 6)[0] >= 0
    canonical_fits = _walks_as_canonical(memoryview(head), block_size, num_states)
    if heap_fits == canonical_fits:
        return None
    return Layout.HEAP if heap_fits else Layout.CANONICAL


def _walks_as_canonical(head: memoryview, block_size: int, num_states: int) -> bool:
    """Whether `head`, the start of a `block_size`-byte block, reads as canonical entries (§4.4)
    as far as it goes: to the end mark exactly at the block's end, or, for a prefix, to its end
    without a length, state id or mark out of place."""
    size, seen, pos = len(head), set[int](), 0
    while True:
        if pos + 2 > size:
            return size < block_size
        state_id = _U16.unpack_from(head, pos)[0]
        if pos > 0 and state_id == END_OF_KEY_GROUP_MARK:
            return pos + 2 == block_size
        if state_id >= num_states or state_id in seen:
            return False
        seen.add(state_id)
        pos += 2
        while True:  # the state's run, to the entry whose key carries the last-of-run bit
            if pos + 4 > size:
                return size < block_size
            key_start = pos + 4
            key_end = key_start + _I32.unpack_from(head, pos)[0]
            if key_end <= key_start or key_end + 4 > block_size:
                return False
            if key_end + 4 > size:
                return size < block_size
            value_end = key_end + 4 + _I32.unpack_from(head, key_end)[0]
            if value_end < key_end + 4 or value_end > block_size:
                return False
            pos = value_end
            if head[key_start] & FIRST_BIT_IN_BYTE_MASK:
                break


def block_spans(start_key_group: int, offsets: Sequence[int], file_size: int) -> list[BlockSpan]:
    """Non-empty key groups and their byte ranges; a block ends where the next one starts.

    The one offset rule of every reader and of `verify` (§4.3, `KeyGroupRangeOffsets`): 0 is
    an empty key group; any other offset lies inside the file and above the previous one.
    Flink's writers set an offset only for a key group they write a block for, so two equal
    offsets would be an empty block (Flink's reader would read the next block twice).
    """
    present = [(start_key_group + i, o) for i, o in enumerate(offsets) if o]
    for key_group, offset in present:
        if not 0 < offset < file_size:
            raise FormatError(
                f"key group {key_group}: offset {offset} is outside the file ({file_size} bytes)"
            )
    spans = []
    for n, (key_group, start) in enumerate(present):
        end = present[n + 1][1] if n + 1 < len(present) else file_size
        if start >= end:
            raise FormatError(
                f"key group {key_group}: offset {start} is not below the offset {end} of "
                f"key group {present[n + 1][0]}"
            )
        spans.append(BlockSpan(key_group, start, end))
    return spans


# --- reading blocks ----------------------------------------------------------------------


def raw_block(block: Buffer, compressed: bool) -> memoryview:
    """The uncompressed block bytes (decompressing a per-key-group Snappy stream)."""
    return memoryview(snappy_framed.decompress_stream(block) if compressed else block)


def iter_entries(block: Buffer, compressed: bool, num_states: int | None = None) -> Iterator[Entry]:
    """Every entry of one key-group block, in file order."""
    data = raw_block(block, compressed)
    for state_id, key_start, key_end, value_end in _walk(data, num_states):
        key = bytes(data[key_start:key_end])
        if key[0] & FIRST_BIT_IN_BYTE_MASK:
            key = bytes((key[0] & ~FIRST_BIT_IN_BYTE_MASK,)) + key[1:]
        yield Entry(state_id, key, bytes(data[key_end + 4 : value_end]))


def _walk(data: memoryview, num_states: int | None) -> Iterator[tuple[int, int, int, int]]:
    """(state id, key start, key end, value end) per entry; the value starts at key end + 4."""
    size = len(data)
    seen: set[int] = set()
    state_id = _state_id(data, 0, num_states, seen)
    pos = 2
    while True:
        key_start, key_end, value_end = _entry(data, pos)
        yield state_id, key_start, key_end, value_end
        pos = value_end
        if data[key_start] & FIRST_BIT_IN_BYTE_MASK:
            if _U16.unpack_from(data, _need(data, pos, 2, "state id"))[0] == END_OF_KEY_GROUP_MARK:
                _check_end(pos + 2, size)
                return
            state_id = _state_id(data, pos, num_states, seen)
            pos += 2


def count_entries(block: Buffer, compressed: bool, num_states: int | None = None) -> dict[int, int]:
    """Entries per state id in one block, walking lengths only."""
    data = raw_block(block, compressed)
    # The hot path of `inspect --deep`: one inlined loop, helpers only on the error paths.
    size = len(data)
    counts: dict[int, int] = {}
    unpack_i32 = _I32.unpack_from
    state_id = _state_id(data, 0, num_states, set())
    pos, count = 2, 0
    while True:
        if pos + 4 > size:
            _entry(data, pos)  # raises with the precise reason
        key_start = pos + 4
        key_end = key_start + unpack_i32(data, pos)[0]
        if key_end <= key_start or key_end + 4 > size:
            _entry(data, pos)
        value_end = key_end + 4 + unpack_i32(data, key_end)[0]
        if value_end < key_end + 4 or value_end > size:
            _entry(data, pos)
        count += 1
        pos = value_end
        if data[key_start] & FIRST_BIT_IN_BYTE_MASK:
            counts[state_id] = count
            count = 0
            if _U16.unpack_from(data, _need(data, pos, 2, "state id"))[0] == END_OF_KEY_GROUP_MARK:
                _check_end(pos + 2, size)
                return counts
            state_id = _state_id(data, pos, num_states, set(counts))
            pos += 2


@dataclass(frozen=True, slots=True)
class EntryPositions:
    """Where a block's entries lie, one list item per entry in file order: the key is
    [key_start, key_end), the value [key_end + 4, value_end); `runs` is (state id, entries)
    per state run."""

    key_starts: list[int]
    key_ends: list[int]
    value_ends: list[int]
    runs: list[tuple[int, int]]


def entry_positions(data: Buffer, num_states: int | None = None, base: int = 0) -> EntryPositions:
    """The positions (plus `base`) of every entry of one uncompressed block, validated as
    `iter_entries` does; lengths only are read, no bytes are copied (the re-hash hot path)."""
    view = memoryview(data)
    size = len(view)
    unpack_i32 = _I32.unpack_from
    key_starts: list[int] = []
    key_ends: list[int] = []
    value_ends: list[int] = []
    runs: list[tuple[int, int]] = []
    add_start, add_key_end, add_value_end = key_starts.append, key_ends.append, value_ends.append
    seen: set[int] = set()
    state_id = _state_id(view, 0, num_states, seen)
    pos, count = 2, 0
    while True:
        if pos + 4 > size:
            _entry(view, pos)  # raises with the precise reason
        key_start = pos + 4
        key_end = key_start + unpack_i32(view, pos)[0]
        if key_end <= key_start or key_end + 4 > size:
            _entry(view, pos)
        value_end = key_end + 4 + unpack_i32(view, key_end)[0]
        if value_end < key_end + 4 or value_end > size:
            _entry(view, pos)
        add_start(key_start + base)
        add_key_end(key_end + base)
        add_value_end(value_end + base)
        count += 1
        pos = value_end
        if view[key_start] & FIRST_BIT_IN_BYTE_MASK:
            runs.append((state_id, count))
            count = 0
            if _U16.unpack_from(view, _need(view, pos, 2, "state id"))[0] == END_OF_KEY_GROUP_MARK:
                _check_end(pos + 2, size)
                return EntryPositions(key_starts, key_ends, value_ends, runs)
            state_id = _state_id(view, pos, num_states, seen)
            pos += 2


def _entry(data: memoryview, pos: int) -> tuple[int, int, int]:
    """Key start, key end and value end of the entry at `pos`, validated."""
    key_start, key_end = _length_prefixed(data, pos, "key")
    if key_end == key_start:
        raise FormatError(f"empty key at offset {pos} of a key-group block")
    _, value_end = _length_prefixed(data, key_end, "value")
    return key_start, key_end, value_end


def _length_prefixed(data: memoryview, pos: int, what: str) -> tuple[int, int]:
    length = _I32.unpack_from(data, _need(data, pos, 4, f"{what} length"))[0]
    start, end = pos + 4, pos + 4 + length
    if length < 0 or end > len(data):
        raise FormatError(
            f"{what} length {length} at offset {pos} runs past the end of the key-group block "
            f"({len(data)} bytes)"
        )
    return start, end


def _need(data: memoryview, pos: int, count: int, what: str) -> int:
    if pos + count > len(data):
        raise FormatError(f"key-group block ends at offset {len(data)} inside a {what}")
    return pos


def _state_id(data: memoryview, pos: int, num_states: int | None, seen: set[int]) -> int:
    state_id: int = _U16.unpack_from(data, _need(data, pos, 2, "state id"))[0]
    if state_id == END_OF_KEY_GROUP_MARK:
        raise FormatError(
            f"key-group block has an end mark at offset {pos} where a state run starts"
        )
    check_state_id(state_id, num_states, seen, f"at offset {pos} of a key-group block")
    return state_id


def check_state_id(state_id: int, num_states: int | None, seen: set[int], where: str) -> None:
    """A state run's id names a state of the header (when its count is known), once a key
    group: in either layout, a block's states are written one run each."""
    if num_states is not None and state_id >= num_states:
        raise FormatError(
            f"unknown state id {state_id} {where} (the header lists {num_states} states)"
        )
    if state_id in seen:
        raise FormatError(f"state id {state_id} appears twice {where}")
    seen.add(state_id)


def _check_end(end: int, size: int) -> None:
    if end != size:
        raise FormatError(
            f"{size - end} unexpected bytes after the end mark of a key-group block "
            f"(end mark ends at offset {end})"
        )


# --- writing blocks ----------------------------------------------------------------------


def build_block(
    runs: Iterable[tuple[int, Sequence[tuple[bytes, bytes]]]], compress: bool = False
) -> bytes:
    """A block from (state id, [(key, value)]) runs, flags and end mark recomputed.

    Keys come without the flag (as `iter_entries` returns them); empty runs are skipped.
    Raises ValueError for inputs no block can hold (no entries, a repeated state id, …).
    """
    block = bytearray()
    seen: set[int] = set()
    for state_id, entries in runs:
        if not entries:
            continue
        if state_id in seen:
            raise ValueError(f"state id {state_id} is repeated in one block")
        seen.add(state_id)
        append_run_start(block, state_id)
        last = len(entries) - 1
        for n, (key, value) in enumerate(entries):
            append_entry(block, key, value, n == last)
    if not block:
        raise ValueError("a key-group block needs at least one entry")
    append_end_mark(block)
    data = bytes(block)
    return snappy_framed.compress_stream(data) if compress else data


def append_run_start(block: bytearray, state_id: int) -> None:
    """A state's run begins: its u16 id. With `append_entry` and `append_end_mark`, a block
    written in pieces, by `build_block`'s rules."""
    if not 0 <= state_id < END_OF_KEY_GROUP_MARK:
        raise ValueError(f"state id {state_id} is out of range")
    block += _U16.pack(state_id)


def append_entry(block: bytearray, key: bytes, value: bytes, last_of_run: bool) -> None:
    """One entry of a run; the run's last carries the flag in its key's first byte."""
    if not key or key[0] & FIRST_BIT_IN_BYTE_MASK:
        raise ValueError("a key must be non-empty and start below 0x80 (the flag bit)")
    block += _I32.pack(len(key))
    if last_of_run:
        block.append(key[0] | FIRST_BIT_IN_BYTE_MASK)
        block += memoryview(key)[1:]
    else:
        block += key
    block += _I32.pack(len(value))
    block += value


def append_end_mark(block: bytearray) -> None:
    """The key group's block ends."""
    block += _U16.pack(END_OF_KEY_GROUP_MARK)


def run_bytes(state_id: int, entries: Sequence[tuple[bytes, bytes]]) -> bytes:
    """One state's run (its u16 id, then its entries, the last flagged), for `join_runs`."""
    block = build_block([(state_id, entries)])
    return block[:-2]  # without the end mark


def copied_run(state_id: int, entries: Buffer) -> bytes:
    """A run whose entries (flags included) are copied from another block, under `state_id`."""
    if not 0 <= state_id < END_OF_KEY_GROUP_MARK:
        raise ValueError(f"state id {state_id} is out of range")
    return _U16.pack(state_id) + bytes(entries)


def join_runs(runs: Sequence[bytes]) -> bytes:
    """A block of runs (`run_bytes`, `copied_run`), each of another state id, and its end
    mark; uncompressed."""
    if not runs:
        raise ValueError("a key-group block needs at least one entry")
    return b"".join((*runs, _U16.pack(END_OF_KEY_GROUP_MARK)))


def remap_state_ids(block: Buffer, mapping: dict[int, int], compressed: bool) -> bytes:
    """The same block with its state ids renumbered (for headers that list states differently)."""
    if all(old == new for old, new in mapping.items()):
        return bytes(block)
    view = raw_block(block, compressed)
    data = bytearray(view)
    starts_run = True
    for state_id, key_start, _, _ in _walk(view, None):
        if starts_run:  # the u16 state id sits just before this entry's i32 key length
            if state_id not in mapping:
                raise FormatError(f"state id {state_id} has no counterpart in the new header")
            _U16.pack_into(data, key_start - 6, mapping[state_id])
        starts_run = bool(data[key_start] & FIRST_BIT_IN_BYTE_MASK)
    return snappy_framed.compress_stream(data) if compressed else bytes(data)
