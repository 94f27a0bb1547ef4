"""Operator-state files: where the header ends and where each list element or broadcast map lies.

Mirrors `DefaultOperatorStateBackendSnapshotStrategy`, `PartitionableListState.write`,
`HeapBroadcastState.write` and `OperatorStateRestoreOperation` (flink-savepoint-format.md
§3.3–§3.5). Element ends are not stored: an element ends at the next larger offset of any state
in the handle, or at the end of the file. With compression (header v6 flag), everything after the
header is one Snappy-framed stream: its identifier sits between the header and the first offset,
and each element starts a new chunk (Flink ≥ 1.19 flushes in `getPos()`; compressed state of
Flink 1.18.0/1.18.1, whose elements share offsets, is refused).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from statectl.errors import FormatError, UnsupportedError
from statectl.formats import snappy_framed
from statectl.formats.handles import DistributionMode, OperatorStateOffsets
from statectl.formats.java_io import excerpt
from statectl.formats.state_headers import operator_header_compressed

Buffer = bytes | bytearray | memoryview
Span = tuple[int, int]

_I32 = struct.Struct(">i")


SpanT = TypeVar("SpanT")


@dataclass(frozen=True, slots=True)
class StateElements(Generic[SpanT]):
    """One state of a handle and where each of its elements is: here the byte range
    [start, end) in the file; the rescale plan uses it with its own element spans."""

    name: str
    mode: DistributionMode
    spans: tuple[SpanT, ...]


@dataclass(frozen=True, slots=True)
class OperatorFileLayout:
    header_length: int  # without the Snappy stream identifier of a compressed file
    compressed: bool
    states: tuple[StateElements[Span], ...]

    @property
    def elements(self) -> dict[str, tuple[Span, ...]]:
        """Per state name: the spans of its elements (list state) or its map (broadcast)."""
        return {s.name: s.spans for s in self.states}


def element_spans(
    states: Sequence[OperatorStateOffsets], file_size: int
) -> tuple[StateElements[Span], ...]:
    """Each element's span: from its offset to the next larger offset in the handle, or EOF.

    Elements sharing an offset (zero-length elements) share the span; restore reads one element
    from an offset, so copying the span for each of them is still correct.
    """
    all_offsets = sorted({o for s in states for o in s.offsets})
    for state in states:
        for offset in state.offsets:
            if not 0 < offset <= file_size:
                raise FormatError(
                    f"operator state {excerpt(state.name)}: offset {offset} is outside the file "
                    f"({file_size} bytes)"
                )
    ends = dict(zip(all_offsets, [*all_offsets[1:], file_size][: len(all_offsets)], strict=True))
    return tuple(
        StateElements(s.name, s.mode, tuple((o, ends[o]) for o in s.offsets)) for s in states
    )


def is_compressed(header_start: Buffer) -> bool:
    """Header version ≥ 6 carries a compression flag right after the version."""
    return operator_header_compressed(header_start)


def file_layout(
    states: Sequence[OperatorStateOffsets], file_size: int, file_start: Buffer
) -> OperatorFileLayout:
    """Layout of one operator-state file from its handle; `file_start` holds its first bytes
    (at least up to the first offset, so that a compressed file's stream identifier is seen)."""
    compressed = is_compressed(file_start)
    if compressed:
        _refuse_shared_offsets(states)
    spans = element_spans(states, file_size)
    offsets = [o for s in states for o in s.offsets]
    data_start = min(offsets) if offsets else file_size
    header_length = data_start
    if compressed and offsets and len(file_start) < data_start:
        raise ValueError(f"file_start must reach the first offset ({data_start})")
    if compressed:
        identifier_at = data_start - len(snappy_framed.STREAM_IDENTIFIER)
        if bytes(file_start[identifier_at:data_start]) == snappy_framed.STREAM_IDENTIFIER:
            header_length = identifier_at
        elif offsets:  # only a file whose states are all empty may lack it (nothing flushed)
            raise FormatError(
                f"compressed operator state has no Snappy stream identifier before offset "
                f"{data_start}"
            )
    return OperatorFileLayout(header_length, compressed, spans)


def _refuse_shared_offsets(states: Sequence[OperatorStateOffsets]) -> None:
    """Compressed elements never share an offset (each starts a chunk), except in Flink 1.18.0 and
    1.18.1: their `getPos()` did not flush, so every element of a chunk got the chunk's offset
    (FLINK-34063, fixed in 1.19). Those offsets do not locate the elements; Flink cannot restore
    such state correctly either."""
    for state in states:
        if len(set(state.offsets)) != len(state.offsets):
            name = excerpt(state.name)
            raise UnsupportedError(
                f"compressed operator state {name}: {len(state.offsets)} elements at "
                f"only {len(set(state.offsets))} offsets, so elements cannot be told apart "
                f"(written by Flink 1.18.0/1.18.1 with snapshot compression, FLINK-34063); take "
                f"the savepoint without execution.checkpointing.snapshot-compression"
            )


def element_bytes(raw: Buffer, compressed: bool) -> bytes:
    """An element's serialized bytes from its span (decompressing its chunks if needed)."""
    return snappy_framed.decompress_chunks(raw) if compressed else bytes(raw)


# --- broadcast state -----------------------------------------------------------------------


class ValueReader(Protocol):
    """Anything that reads one serialized value: a value codec, a `java_types.KeyType`."""

    def read(self, buf: memoryview, pos: int) -> tuple[Any, int]: ...


@dataclass(frozen=True, slots=True)
class FixedLength:
    """A serializer writing exactly `length` bytes per value (TypeSerializer.getLength() ≥ 0)."""

    length: int

    def read(self, buf: Buffer, pos: int = 0) -> tuple[bytes, int]:
        end = pos + self.length
        if end > len(buf):
            raise FormatError(f"value of {self.length} bytes at offset {pos} runs past the end")
        return bytes(buf[pos:end]), end


def broadcast_entry_count(element: Buffer) -> int:
    """The i32 entry count at the start of a broadcast state's map.

    Map keys are distinct, so at most one entry takes no bytes: a count above the bytes after
    it, plus one, is corrupt (and must not drive a loop).
    """
    if len(element) < 4:
        raise FormatError(f"broadcast state of {len(element)} bytes has no entry count")
    count: int = _I32.unpack_from(element, 0)[0]
    if count < 0:
        raise FormatError(f"negative broadcast state entry count {count}")
    if count > len(element) - 4 + 1:
        raise FormatError(
            f"broadcast state entry count {count} exceeds the {len(element) - 4} bytes of its map"
        )
    return count


def split_broadcast_entries(
    element: Buffer, key_reader: ValueReader, value_reader: ValueReader
) -> list[tuple[bytes, bytes]]:
    """The (key bytes, value bytes) of each map entry; the map must end where the element ends."""
    view = memoryview(element)
    count = broadcast_entry_count(view)
    entries = []
    pos = 4
    for _ in range(count):
        try:
            _, key_end = key_reader.read(view, pos)
            _, value_end = value_reader.read(view, key_end)
        except (IndexError, struct.error, ValueError, UnicodeError, OverflowError) as exc:
            raise FormatError(f"broadcast state entry at offset {pos} is corrupt: {exc}") from None
        if value_end > len(view):
            raise FormatError(f"broadcast state entry at offset {pos} runs past the map's end")
        entries.append((bytes(view[pos:key_end]), bytes(view[key_end:value_end])))
        pos = value_end
    if pos != len(view):
        raise FormatError(f"{len(view) - pos} unexpected bytes after {count} broadcast entries")
    return entries


def build_broadcast_element(entries: Iterable[tuple[bytes, bytes]]) -> bytes:
    """A broadcast state's map: i32 count, then each serialized key and value."""
    items = list(entries)
    return b"".join([_I32.pack(len(items)), *(key + value for key, value in items)])
