"""The hashmap backend's own keyed snapshot format: its checkpoints and NATIVE savepoints.

Mirrors `HeapSnapshotStrategy.asyncSnapshot` (writer) and `HeapRestoreOperation`
(`readStateHandleStateData`, `readKeyGroupStateData`) with the state tables' key-group writers
and readers: `AbstractStateTableSnapshot.writeStateInKeyGroup` → `CopyOnWriteStateMapSnapshot.
writeState` (read by `StateTableByKeyGroupReaders`), and `HeapPriorityQueueStateSnapshot` →
`KeyGroupPartitioner.PartitioningResultImpl.writeStateInKeyGroup` for timers; the values are
what `ListSerializer`, `MapSerializer` and `TimerSerializer` write (flink-savepoint-format.md
§4.8). The file's header is the canonical one (`KeyedBackendSerializationProxy`, §4.2); a
handle (code 12, `KeyGroupsStateHandle`, for checkpoints and NATIVE savepoints alike) has an
offset for every key group of its range, empty ones too. At each offset:

    i32 keyGroupId                                    (never compressed)
    per state of the header, in the writer's hash-map order (every state, empty ones too):
        [its own Snappy framed stream when compressed: `SnappyStreamCompressionDecorator`]
        u16 stateId
        i32 count
        count × entry:
            key/value state:  namespace, key, state value (their serializers' bytes)
            priority queue:   element (timers, `TimerSerializer`: i64 flipped time, key, namespace)

A key group ends where the next one starts. Entries become the canonical format's
(`keyed_blocks.Entry`, §4.6) so that everything downstream reads them unchanged: the composite
key (key-group prefix, key, namespace, with length suffixes when both are variable-sized, then a
MAP's user key; a timer's prefix and element), the value as the canonical format stores it:
VALUE/REDUCING/AGGREGATING the serialized value; LIST the `ListSerializer`'s elements (`i32 n`,
elements) joined by `,`; MAP one entry per user key (`MapSerializer`: `i32 n`, then per entry
the user key, a null flag and the value unless null) holding the flag and the value. Entries
are told apart only by reading each part with its codec: a state whose serializer statectl does
not read is refused (`UnsupportedError`) as soon as one of its entries must be skipped. Empty
lists and maps have no canonical form and yield no entry.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

from statectl.errors import FormatError, UnsupportedError
from statectl.formats import snappy_framed
from statectl.formats.java_types import (
    build_composite_key,
    key_group_prefix,
    key_group_prefix_bytes,
)
from statectl.formats.keyed_blocks import Entry, check_state_id
from statectl.formats.serializer_snapshots import SerializerSnapshot
from statectl.formats.state_headers import KeyedStateHeader
from statectl.formats.state_values import (
    DECODE_ERRORS,
    LIST_DELIMITER,
    MAP_NOT_NULL_VALUE,
    MAP_NULL_VALUE,
    keyed_codec,
)
from statectl.formats.values import Codec, RawCodec, Undecodable

Buffer = bytes | bytearray | memoryview

_U16 = struct.Struct(">H")
_I32 = struct.Struct(">i")
_TIMESTAMP_BYTES = 8
_KEY_VALUE_KINDS = frozenset({"VALUE", "LIST", "MAP", "REDUCING", "AGGREGATING", "FOLDING"})


@dataclass(frozen=True)
class HeapState:
    """How one state's entries read in the heap snapshot: the codecs of its parts."""

    name: str
    kind: str  # VALUE, LIST, MAP, REDUCING, AGGREGATING, TIMERS, PRIORITY_QUEUE, …
    key: Codec | None
    namespace: Codec | None
    user_key: Codec | None = None  # MAP
    value: Codec | None = None  # the value, a LIST's element, a MAP's value, a queue's element

    @property
    def ambiguous(self) -> bool:
        """Whether the composite key carries length suffixes (both parts variable-sized)."""
        return (
            self.key is not None
            and self.namespace is not None
            and self.key.fixed_length is None
            and self.namespace.fixed_length is None
        )


def heap_states(
    header: KeyedStateHeader,
    flink_major: int | None = None,
    key_snapshot: SerializerSnapshot | None = None,
) -> tuple[HeapState, ...]:
    """The states of a header, by state id, with the codecs their entries are read with."""
    key = key_snapshot or header.key_serializer_snapshot
    states = []
    for meta in header.states:
        codec = keyed_codec(meta, key, flink_major)
        states.append(
            HeapState(meta.name, meta.kind, codec.key, codec.namespace, codec.user_key, codec.value)
        )
    return tuple(states)


def read_key_group(
    data: Buffer,
    key_group: int,
    states: Sequence[HeapState],
    compressed: bool,
    max_parallelism: int,
    verify_checksums: bool = False,
) -> list[Entry]:
    """Every entry of one key group's bytes (from its offset to the next key group's), in the
    canonical form; a FormatError (with the offset) for anything truncated, corrupt or left
    over, never fewer entries."""
    view = memoryview(data)
    if len(view) < 4:
        raise FormatError(f"key group {key_group} ends inside its id ({len(view)} bytes)")
    written = _I32.unpack_from(view)[0]
    if written != key_group:
        raise FormatError(f"the data at key group {key_group}'s offset is key group {written}'s")
    body: memoryview
    if compressed:
        body = memoryview(snappy_framed.decompress_stream(view[4:], verify_checksums))
        where = "of the key group's decompressed data"
    else:
        body, where = view[4:], "after the key group's id"
    reader = _KeyGroupReader(body, where, key_group, max_parallelism)
    seen: set[int] = set()
    for _ in states:
        pos = reader.pos
        state_id = reader.u16("state id")
        check_state_id(state_id, len(states), seen, f"at offset {pos} {where}")
        reader.state(state_id, states[state_id])
    if reader.pos != len(body):
        raise FormatError(
            f"{len(body) - reader.pos} unexpected bytes at offset {reader.pos} {where}, after "
            f"all {len(states)} states"
        )
    return reader.entries


class _KeyGroupReader:
    """Reads one key group's states (`HeapRestoreOperation.readKeyGroupStateData`)."""

    def __init__(self, view: memoryview, where: str, key_group: int, max_parallelism: int) -> None:
        self.view = view
        self.where = where
        self.pos = 0
        self.key_group = key_group
        self.max_parallelism = max_parallelism
        self.prefix = key_group_prefix(key_group, key_group_prefix_bytes(max_parallelism))
        self.entries: list[Entry] = []

    def state(self, state_id: int, state: HeapState) -> None:
        count_at = self.pos
        count = self.i32("entry count")
        if count < 0 or count > len(self.view) - self.pos:
            raise FormatError(
                f"state {state.name!r}: entry count {count} at offset {count_at} {self.where} "
                f"does not fit the {len(self.view) - self.pos} bytes left"
            )
        if count == 0:
            return
        if state.kind in ("TIMERS", "PRIORITY_QUEUE"):
            self._queue(state_id, state, count)
        elif state.kind in _KEY_VALUE_KINDS:
            self._key_values(state_id, state, count)
        else:
            raise UnsupportedError(
                f"state {state.name!r} is {state.kind} state, which statectl cannot read in the "
                "hashmap backend's snapshot format"
            )

    def _queue(self, state_id: int, state: HeapState, count: int) -> None:
        view, add = self.view, self.entries.append
        for _ in range(count):
            start = self.pos
            if state.kind == "TIMERS":  # TimerSerializer: timestamp, key, namespace
                self._need(_TIMESTAMP_BYTES, "timer timestamp", state)
                self.pos += _TIMESTAMP_BYTES
                self.pos = self._skip(state.key, state, "key")
                self.pos = self._skip(state.namespace, state, "namespace")
            else:
                self.pos = self._skip(state.value, state, "element")
            add(Entry(state_id, self.prefix + bytes(view[start : self.pos]), b""))

    def _key_values(self, state_id: int, state: HeapState, count: int) -> None:
        view, add, kind = self.view, self.entries.append, state.kind
        ambiguous = state.ambiguous
        for _ in range(count):
            ns_start = self.pos
            ns_end = self._skip(state.namespace, state, "namespace")
            self.pos = ns_end
            key_end = self._skip(state.key, state, "key")
            self.pos = key_end
            key = build_composite_key(
                self.key_group,
                self.max_parallelism,
                bytes(view[ns_end:key_end]),
                bytes(view[ns_start:ns_end]),
                ambiguous=ambiguous,
            )
            if kind == "LIST":
                value = self._list(state)
                if value is not None:
                    add(Entry(state_id, key, value))
            elif kind == "MAP":
                for user_key, map_value in self._map(state):
                    add(Entry(state_id, key + user_key, map_value))
            else:
                value_start = self.pos
                self.pos = self._skip(state.value, state, "value")
                add(Entry(state_id, key, bytes(view[value_start : self.pos])))

    def _list(self, state: HeapState) -> bytes | None:
        """`ListSerializer`: i32 n, n elements; as the canonical `,`-joined elements."""
        count = self._count(state, "list")
        parts: list[memoryview] = []
        for _ in range(count):
            start = self.pos
            self.pos = self._skip(state.value, state, "list element")
            parts.append(self.view[start : self.pos])
        if not parts:
            return None
        return bytes((LIST_DELIMITER,)).join(parts)

    def _map(self, state: HeapState) -> list[tuple[bytes, bytes]]:
        """`MapSerializer`: i32 n, then per entry the user key, a null flag, the value unless
        null; as (user key, canonical value: the flag, then the value)."""
        count = self._count(state, "map")
        view = self.view
        found = []
        for _ in range(count):
            start = self.pos
            self.pos = self._skip(state.user_key, state, "map user key")
            user_key = bytes(view[start : self.pos])
            flag_at = self.pos
            self._need(1, "map value's null flag", state)
            flag = view[flag_at]
            self.pos += 1
            if flag == MAP_NULL_VALUE:
                found.append((user_key, bytes((MAP_NULL_VALUE,))))
            elif flag == MAP_NOT_NULL_VALUE:
                self.pos = self._skip(state.value, state, "map value")
                found.append((user_key, bytes(view[flag_at : self.pos])))
            else:
                raise FormatError(
                    f"state {state.name!r}: map value null flag {flag} at offset {flag_at} "
                    f"{self.where} is neither 0 nor 1"
                )
        return found

    def _count(self, state: HeapState, what: str) -> int:
        at = self.pos
        count = self.i32(f"{what} size")
        if count < 0 or count > len(self.view) - self.pos:
            raise FormatError(
                f"state {state.name!r}: {what} size {count} at offset {at} {self.where} does not "
                f"fit the {len(self.view) - self.pos} bytes left"
            )
        return count

    def _skip(self, codec: Codec | None, state: HeapState, what: str) -> int:
        """The end of the `what` at `self.pos`, read with `codec`."""
        pos, view = self.pos, self.view
        if codec is None or isinstance(codec, RawCodec):
            reason = "no serializer" if codec is None else codec.reason
            raise _unreadable(state, what, reason)
        fixed = codec.fixed_length
        if fixed is not None:
            end = pos + fixed
        else:
            try:
                _, end = codec.read(view, pos)
            except Undecodable as exc:
                raise _unreadable(state, what, exc.message) from None
            except DECODE_ERRORS as exc:
                reason = exc.message if isinstance(exc, FormatError) else type(exc).__name__
                raise FormatError(
                    f"state {state.name!r}: the {what} at offset {pos} {self.where} does not "
                    f"read ({reason}): the data is truncated or corrupt"
                ) from None
        if end > len(view):
            raise FormatError(
                f"state {state.name!r}: the {what} at offset {pos} {self.where} runs past its "
                f"end ({len(view)} bytes)"
            )
        return end

    def _need(self, count: int, what: str, state: HeapState | None = None) -> None:
        if self.pos + count > len(self.view):
            whose = f"state {state.name!r}: " if state else ""
            raise FormatError(
                f"{whose}the data ends at offset {len(self.view)} {self.where}, inside a {what} "
                f"at offset {self.pos}"
            )

    def u16(self, what: str) -> int:
        self._need(2, what)
        value: int = _U16.unpack_from(self.view, self.pos)[0]
        self.pos += 2
        return value

    def i32(self, what: str) -> int:
        self._need(4, what)
        value: int = _I32.unpack_from(self.view, self.pos)[0]
        self.pos += 4
        return value


def _unreadable(state: HeapState, what: str, reason: str) -> UnsupportedError:
    return UnsupportedError(
        f"state {state.name!r}: its {what} serializer is not one statectl reads ({reason}), so "
        "its entries in the hashmap backend's snapshot format cannot be told apart"
    )
