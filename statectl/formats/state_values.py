"""Decoding the values of state entries with the serializers their state header names.

Mirrors the byte layouts of Flink's base serializers (`LongSerializer`, `StringSerializer`, …,
via `java_types.KEY_TYPES`), the keyed LIST value (`ListDelimitedSerializer`: elements joined by
one `,` byte), the keyed MAP value (a null flag, then the user value) and broadcast/operator list
elements (flink-savepoint-format.md §3.3, §4.6). Only base scalar types and LIST/MAP state of
them are decoded; anything else (POJOs, Kryo, TTL wrappers, …) decodes to `UNKNOWN`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from statectl.errors import FormatError
from statectl.formats.java_types import KeyType, key_type_for_serializer
from statectl.formats.serializer_snapshots import SerializerSnapshot
from statectl.formats.state_headers import StateMetaInfo

Buffer = bytes | bytearray | memoryview

LIST_DELIMITER = 0x2C  # ListDelimitedSerializer / RocksDB's StringAppendOperator delimiter
MAP_NULL_VALUE = 0x01  # RocksDBMapState: a null flag byte, no value bytes follow

_BASE = "org.apache.flink.api.common.typeutils.base."
LIST_SNAPSHOT = _BASE + "ListSerializerSnapshot"
MAP_SNAPSHOT = _BASE + "MapSerializerSnapshot"
TIMER_SNAPSHOT = "org.apache.flink.streaming.api.operators.TimerSerializerSnapshot"


class _Unknown:
    """Marker for a value whose serializer statectl does not decode."""

    def __repr__(self) -> str:
        return "UNKNOWN"


UNKNOWN: Any = _Unknown()


def scalar_type(snapshot: SerializerSnapshot | None) -> KeyType | None:
    """The base type (String, Long, Integer, …) a serializer snapshot writes, if it is one."""
    return key_type_for_serializer(snapshot.class_name) if snapshot else None


def read_exactly(value_type: KeyType, data: Buffer) -> Any:
    """One value that must fill `data` exactly."""
    value, end = value_type.read(data, 0)
    if end != len(data):
        raise FormatError(f"{len(data) - end} unexpected bytes after a {value_type.name} value")
    return value


def _nested(snapshot: SerializerSnapshot | None, class_name: str, count: int) -> tuple[Any, ...]:
    """The scalar types nested in a List/Map/Timer snapshot, or Nones."""
    if snapshot is None or snapshot.class_name != class_name or len(snapshot.nested) != count:
        return (None,) * count
    return tuple(scalar_type(n) for n in snapshot.nested)


@dataclass(frozen=True, slots=True)
class StateCodec:
    """How to decode one state's keys, map user keys and values (None: not decodable)."""

    kind: str  # VALUE, LIST, MAP, REDUCING, AGGREGATING, TIMERS (keyed); LIST, UNION, BROADCAST
    key: KeyType | None = None  # the key (keyed state) or the map key (broadcast state)
    user_key: KeyType | None = None  # MAP state
    value: KeyType | None = None  # the value, the list element or the map value
    keyed: bool = True

    def decode_key(self, data: Buffer) -> Any:
        return _decode(self.key, data)

    def decode_user_key(self, data: Buffer) -> Any:
        return _decode(self.user_key, data)

    def decode_value(self, data: Buffer) -> Any:
        """A keyed entry's value, a list element or a broadcast map value, as stored."""
        if self.value is None or self.kind == "TIMERS":  # timers have no value
            return UNKNOWN
        try:
            if self.kind == "LIST" and self.keyed:  # delimited elements
                return split_list(self.value, data)
            if self.kind == "MAP":
                return map_value(self.value, data)
            return read_exactly(self.value, data)
        except FormatError:
            return UNKNOWN


def _decode(value_type: KeyType | None, data: Buffer) -> Any:
    if value_type is None:
        return UNKNOWN
    try:
        return read_exactly(value_type, data)
    except FormatError:
        return UNKNOWN


def split_list(element_type: KeyType, data: Buffer) -> list[Any]:
    """A keyed LIST value: elements each followed by `,` except the last."""
    view = memoryview(data)
    elements: list[Any] = []
    pos = 0
    while pos < len(view):
        element, pos = element_type.read(view, pos)
        elements.append(element)
        if pos < len(view):
            if view[pos] != LIST_DELIMITER:
                raise FormatError(f"list element not followed by ',' at offset {pos}")
            pos += 1
            if pos == len(view):
                raise FormatError("list value ends with a delimiter")
    return elements


def map_value(value_type: KeyType, data: Buffer) -> Any:
    """A keyed MAP entry's value: flag 0 then the value, or flag 1 (null)."""
    if not data:
        raise FormatError("map value without its null flag")
    if data[0] == MAP_NULL_VALUE:
        if len(data) != 1:
            raise FormatError("null map value followed by bytes")
        return None
    return read_exactly(value_type, memoryview(data)[1:])


def keyed_codec(meta: StateMetaInfo, key_snapshot: SerializerSnapshot | None) -> StateCodec:
    """The codec of a keyed state from its meta info and the header's key serializer."""
    key = scalar_type(key_snapshot)
    kind = meta.kind
    serializer = meta.value_serializer
    if kind == "LIST":
        (element,) = _nested(serializer, LIST_SNAPSHOT, 1)
        return StateCodec(kind, key, None, element)
    if kind == "MAP":
        user_key, value = _nested(serializer, MAP_SNAPSHOT, 2)
        return StateCodec(kind, key, user_key, value)
    if kind == "TIMERS":
        timer_key, _ = _nested(serializer, TIMER_SNAPSHOT, 2)
        return StateCodec(kind, key or timer_key)
    return StateCodec(kind, key, None, scalar_type(serializer))


def operator_codec(meta: StateMetaInfo | None, kind: str) -> StateCodec:
    """Operator list elements (LIST/UNION) or broadcast map entries (BROADCAST)."""
    if meta is None:
        return StateCodec(kind, keyed=False)
    key = scalar_type(meta.key_serializer) if kind == "BROADCAST" else None
    return StateCodec(kind, key, None, scalar_type(meta.value_serializer), keyed=False)


def jsonable(value: Any) -> Any:
    """A decoded value as JSON can hold it: NaN and infinities as strings (JSON has none)."""
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return "NaN" if value != value else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, list):
        return [jsonable(v) for v in value]
    if isinstance(value, bytes | bytearray | memoryview):
        return f"hex:{bytes(value).hex()}"
    return value
