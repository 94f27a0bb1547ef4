"""Serializer-proxy headers of state files, parsed for diagnostics (never needed for copying).

Mirrors `KeyedBackendSerializationProxy`, `OperatorBackendSerializationProxy`,
`StateMetaInfoSnapshotReadersWriters` and `TypeSerializerSnapshotSerializationUtil`
(flink-savepoint-format.md §3.1, §3.2, §4.2). Serializer snapshots carry class-specific
payloads without a length; simple and composite snapshots are parsed, and after any other
payload the parser resynchronises on the next structure it recognises. Headers themselves are
always copied as bytes, so a partly parsed header only costs detail in `inspect`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from statectl.errors import FormatError
from statectl.formats.java_io import DataReader

SNAPSHOT_PROXY_VERSION = 2
COMPOSITE_MAGIC = 911108
NESTED_MAGIC = 1333245
BACKEND_STATE_TYPES = ("KEY_VALUE", "OPERATOR", "BROADCAST", "PRIORITY_QUEUE", "KEY_VALUE_V2")
SERIALIZER_KEYS = frozenset(
    {"KEY_SERIALIZER", "NAMESPACE_SERIALIZER", "VALUE_SERIALIZER", "USER_KEY_SERIALIZER"}
)
OPTION_KEYS = frozenset({"KEYED_STATE_TYPE", "OPERATOR_STATE_DISTRIBUTION_MODE"})
TIMER_STATE_PREFIX = "_timer_state/"


@dataclass(frozen=True, slots=True)
class SerializerSnapshot:
    class_name: str
    version: int
    nested: tuple[SerializerSnapshot, ...] = ()
    parsed: bool = True  # False: an unknown payload was skipped by resynchronising


@dataclass(frozen=True, slots=True)
class StateMetaInfo:
    name: str
    backend_state_type: str
    options: dict[str, str]
    serializers: dict[str, SerializerSnapshot]

    @property
    def kind(self) -> str:
        """VALUE, LIST, MAP, REDUCING, AGGREGATING, TIMERS, … as `inspect` shows it."""
        if self.backend_state_type == "PRIORITY_QUEUE":
            return "TIMERS" if self.name.startswith(TIMER_STATE_PREFIX) else "PRIORITY_QUEUE"
        if "KEYED_STATE_TYPE" in self.options:
            return self.options["KEYED_STATE_TYPE"]
        if self.backend_state_type == "BROADCAST":
            return "BROADCAST"
        return "LIST" if self.backend_state_type == "OPERATOR" else self.backend_state_type

    @property
    def distribution_mode(self) -> str | None:
        return self.options.get("OPERATOR_STATE_DISTRIBUTION_MODE")


@dataclass(frozen=True, slots=True)
class KeyedStateHeader:
    version: int
    compressed: bool
    key_serializer_snapshot: SerializerSnapshot | None
    states: tuple[StateMetaInfo, ...]
    complete: bool = True

    @property
    def key_serializer(self) -> str | None:
        snapshot = self.key_serializer_snapshot
        return snapshot.class_name if snapshot else None

    def state_names(self) -> list[str]:
        return [s.name for s in self.states]


@dataclass(frozen=True, slots=True)
class OperatorStateHeader:
    version: int
    compressed: bool
    list_states: tuple[StateMetaInfo, ...]
    broadcast_states: tuple[StateMetaInfo, ...]
    complete: bool = True


# --- public entry points -----------------------------------------------------------------


def parse_keyed_header(data: bytes | memoryview) -> KeyedStateHeader:
    """Parse the header bytes of a keyed-state file (or a native snapshot's meta file)."""
    r = DataReader(data)
    version = r.read_i32()
    if not 1 <= version <= 6:
        raise FormatError(f"unsupported keyed state header version {version}")
    compressed = r.read_bool() if version >= 4 else False
    key_snapshot = _read_snapshot(r, _next_is_state_count) if version >= 6 else None
    states, complete = _read_states(r, r.read_i16())
    return KeyedStateHeader(version, compressed, key_snapshot, states, complete)


def parse_operator_header(data: bytes | memoryview) -> OperatorStateHeader:
    """Parse the header bytes of an operator-state file."""
    r = DataReader(data)
    version = r.read_i32()
    if not 1 <= version <= 6:
        raise FormatError(f"unsupported operator state header version {version}")
    compressed = r.read_bool() if version >= 6 else False
    list_states, complete = _read_states(r, r.read_i16())
    broadcast: tuple[StateMetaInfo, ...] = ()
    if version >= 3 and complete and not r.at_end():
        broadcast, complete = _read_states(r, r.read_i16())
    return OperatorStateHeader(version, compressed, list_states, broadcast, complete)


def set_operator_header_compression(header: bytes, compressed: bool) -> bytes:
    """The header with its compression flag (the bool after the version, v6+) set."""
    if len(header) < 5 or DataReader(header).read_i32() < 6:
        return header
    return header[:4] + (b"\x01" if compressed else b"\x00") + header[5:]


def set_keyed_header_compression(header: bytes, compressed: bool) -> bytes:
    """The header with its compression flag (the bool after the version, v4+) set."""
    if len(header) < 5 or DataReader(header).read_i32() < 4:
        return header
    return header[:4] + (b"\x01" if compressed else b"\x00") + header[5:]


# --- state meta info ---------------------------------------------------------------------


def _read_states(r: DataReader, count: int) -> tuple[tuple[StateMetaInfo, ...], bool]:
    if count < 0:
        raise FormatError(f"negative number of states ({count}) in a state header")
    states = []
    complete = True
    for _ in range(count):
        state = _read_state(r)
        states.append(state)
        complete = complete and all(s.parsed for s in state.serializers.values())
    return tuple(states), complete


def _read_state(r: DataReader) -> StateMetaInfo:
    name = r.read_utf()
    type_ordinal = r.read_i32()
    if not 0 <= type_ordinal < len(BACKEND_STATE_TYPES):
        raise FormatError(f"state {name!r}: unknown backend state type {type_ordinal}")
    options = {}
    for _ in range(_small_count(r, "options")):
        key = r.read_utf()
        options[key] = r.read_utf()
    serializers = {}
    count = _small_count(r, "serializers")
    for n in range(count):
        key = r.read_utf()
        last = n == count - 1
        serializers[key] = _read_snapshot(
            r, _next_is_state_or_end if last else _next_is_serializer_key
        )
    return StateMetaInfo(name, BACKEND_STATE_TYPES[type_ordinal], options, serializers)


def _small_count(r: DataReader, what: str) -> int:
    count = r.read_i32()
    if not 0 <= count <= 64:
        raise FormatError(f"implausible number of {what} ({count}) at offset {r.pos - 4}")
    return count


# --- serializer snapshots ----------------------------------------------------------------

Resync = Callable[[DataReader], bool]


def _read_snapshot(r: DataReader, after: Resync) -> SerializerSnapshot:
    """A proxy-wrapped snapshot: i32 proxy version, then a versioned snapshot."""
    proxy_version = r.read_i32()
    if proxy_version != SNAPSHOT_PROXY_VERSION:
        raise FormatError(f"unknown serializer snapshot proxy version {proxy_version}")
    return _read_versioned(r, after)


def _read_versioned(r: DataReader, after: Resync) -> SerializerSnapshot:
    class_name = r.read_utf()
    version = r.read_i32()
    start = r.pos
    if r.remaining() >= 4 and DataReader(r.read_bytes(4)).read_i32() == COMPOSITE_MAGIC:
        nested = _read_composite_payload(r)
        if nested is not None:
            return SerializerSnapshot(class_name, version, nested)
    r.pos = start
    if after(r):  # an empty payload: simple snapshots (String, Long, VoidNamespace, …)
        return SerializerSnapshot(class_name, version)
    _resync(r, after)
    return SerializerSnapshot(class_name, version, parsed=False)


def _read_composite_payload(r: DataReader) -> tuple[SerializerSnapshot, ...] | None:
    """`CompositeTypeSerializerSnapshot`: outer version, outer payload, nested snapshots."""
    r.read_i32()  # outer snapshot version
    start = r.pos
    while r.remaining() >= 8:  # the outer payload is class specific: find the nested magic
        if DataReader(r.read_bytes(8)).read_i32() == NESTED_MAGIC:
            r.pos -= 4
            r.read_i32()  # nested snapshots delegate version
            count = _small_count(r, "nested serializers")
            return tuple(_read_versioned(r, _next_is_nested(count, i)) for i in range(count))
        r.pos -= 7
    r.pos = start
    return None


def _next_is_nested(count: int, index: int) -> Resync:
    # Between nested snapshots the next class name follows; after the last, the outer reader
    # continues, so accept anything (the caller resynchronises if needed).
    return _next_is_class_name if index < count - 1 else (lambda r: True)


def _resync(r: DataReader, after: Resync) -> None:
    for pos in range(r.pos, r.size + 1):
        r.pos = pos
        if after(r):
            return
    raise FormatError("cannot find the end of a serializer snapshot")


def _probe(check: Callable[[DataReader], bool]) -> Resync:
    """A look-ahead that never moves the reader and treats running out of bytes as 'no'."""

    def probe(r: DataReader) -> bool:
        try:
            return check(r.fork())
        except FormatError:
            return False

    return probe


@_probe
def _next_is_serializer_key(r: DataReader) -> bool:
    return r.read_utf() in SERIALIZER_KEYS and r.read_i32() == SNAPSHOT_PROXY_VERSION


@_probe
def _next_is_class_name(r: DataReader) -> bool:
    name = r.read_utf()
    return "." in name and " " not in name and r.read_i32() >= 0


@_probe
def _next_is_state_count(r: DataReader) -> bool:
    count = r.read_i16()
    return (count == 0 and r.at_end()) or (count > 0 and _looks_like_state(r))


@_probe
def _next_is_state_or_end(r: DataReader) -> bool:
    if r.at_end():
        return True
    if _looks_like_state(r.fork()):
        return True
    # the broadcast-state count of an operator header: i16, then states or the end
    count = r.read_i16()
    return (count == 0 and r.at_end()) or (count > 0 and _looks_like_state(r))


def _looks_like_state(r: DataReader) -> bool:
    try:
        r.read_utf()
        if not 0 <= r.read_i32() < len(BACKEND_STATE_TYPES):
            return False
        options = r.read_i32()
        if not 0 <= options <= 64:
            return False
        if options:
            return r.read_utf() in OPTION_KEYS
        serializers = r.read_i32()
        return 0 < serializers <= 8 and r.read_utf() in SERIALIZER_KEYS
    except FormatError:
        return False
