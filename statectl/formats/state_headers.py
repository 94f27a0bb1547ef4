"""Serializer-proxy headers of state files, parsed for diagnostics (never needed for copying).

Mirrors `KeyedBackendSerializationProxy`, `OperatorBackendSerializationProxy` and
`StateMetaInfoSnapshotReadersWriters` (flink-savepoint-format.md §3.1, §3.2, §4.2): a version,
a compression flag, the key serializer snapshot (keyed), and per state its name, backend state
type, options and serializer snapshots (`serializer_snapshots`). Headers are copied as bytes, so a
header that cannot be read to the end yields what was read plus `complete=False`; only a header
broken before its state list, or with serializer snapshots nested too deep to read past
(`NestedTooDeep`), raises `FormatError`. Readers of entries need every state
(`require_state_list`).
"""

from __future__ import annotations

from dataclasses import dataclass

from statectl.errors import FormatError, UnsupportedError
from statectl.formats.java_io import DataReader, DataWriter, excerpt
from statectl.formats.serializer_snapshots import (
    PROXY_VERSION,
    NestedTooDeep,
    Probe,
    SerializerSnapshot,
    at_end,
    probe,
    read_serializer_snapshot,
)
from statectl.formats.snappy_framed import STREAM_IDENTIFIER

KEYED_VERSIONS = range(1, 7)  # KeyedBackendSerializationProxy reads 1..6, writes 6
OPERATOR_VERSIONS = range(1, 7)  # OperatorBackendSerializationProxy reads 1..6, writes 5 or 6
KEYED_COMPRESSION_SINCE = 4
OPERATOR_COMPRESSION_SINCE = 6
KEYED_KEY_SNAPSHOT_SINCE = 6  # older headers hold a Java-serialized key serializer
OPERATOR_META_INFO_SINCE = 5  # older headers use a meta-info layout from before Flink 1.8
OPERATOR_BROADCAST_SINCE = 3

BACKEND_STATE_TYPES = ("KEY_VALUE", "OPERATOR", "BROADCAST", "PRIORITY_QUEUE", "KEY_VALUE_V2")
SERIALIZER_KEYS = frozenset(
    {"KEY_SERIALIZER", "NAMESPACE_SERIALIZER", "VALUE_SERIALIZER", "USER_KEY_SERIALIZER"}
)
OPTION_KEYS = frozenset({"KEYED_STATE_TYPE", "OPERATOR_STATE_DISTRIBUTION_MODE"})
TIMER_STATE_PREFIX = "_timer_state/"
_MAX_ENTRIES = 64  # options or serializers per state: Flink writes at most a handful


@dataclass(frozen=True, slots=True)
class StateMetaInfo:
    """One registered state: `StateMetaInfoSnapshot`."""

    name: str
    backend_state_type: str  # KEY_VALUE, OPERATOR, BROADCAST, PRIORITY_QUEUE, KEY_VALUE_V2
    options: dict[str, str]
    serializers: dict[str, SerializerSnapshot]

    @property
    def kind(self) -> str:
        """VALUE, LIST, MAP, REDUCING, AGGREGATING, TIMERS, BROADCAST, … as `inspect` shows it."""
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

    @property
    def value_serializer(self) -> SerializerSnapshot | None:
        return self.serializers.get("VALUE_SERIALIZER")

    @property
    def namespace_serializer(self) -> SerializerSnapshot | None:
        return self.serializers.get("NAMESPACE_SERIALIZER")

    @property
    def key_serializer(self) -> SerializerSnapshot | None:
        """Broadcast state only: the map's key serializer."""
        return self.serializers.get("KEY_SERIALIZER")

    @property
    def complete(self) -> bool:
        return all(s.complete for s in self.serializers.values())


@dataclass(frozen=True, slots=True)
class KeyedStateHeader:
    version: int
    compressed: bool
    key_serializer_snapshot: SerializerSnapshot | None
    states: tuple[StateMetaInfo, ...]  # kvStateId = index
    complete: bool = True
    problem: str | None = None  # why the header was not read to the end

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
    problem: str | None = None

    @property
    def states(self) -> tuple[StateMetaInfo, ...]:
        return self.list_states + self.broadcast_states


def read_in_part(header: KeyedStateHeader | OperatorStateHeader) -> str:
    """What was read of a header not read in full, and why the rest was not: a state that
    could not be read (`problem`), or a serializer snapshot whose payload statectl does not
    know, skipped up to what follows it."""
    count = len(header.states)
    states = f"{count} state{'' if count == 1 else 's'} read"
    if header.problem is not None:
        return f"{states}, then stopped: {header.problem}"
    snapshots: list[tuple[str, SerializerSnapshot | None]] = [
        (f"{key.lower().replace('_', ' ')} snapshot of state {excerpt(state.name)}", snapshot)
        for state in header.states
        for key, snapshot in state.serializers.items()
    ]
    if isinstance(header, KeyedStateHeader):
        snapshots.insert(0, ("key serializer snapshot", header.key_serializer_snapshot))
    for role, snapshot in snapshots:
        skipped = _first_unparsed(snapshot)
        if skipped is not None:
            return (
                f"{states}; the {role} holds {skipped.class_name}, a layout statectl does "
                "not know: its payload was skipped"
            )
    return states


def _first_unparsed(snapshot: SerializerSnapshot | None) -> SerializerSnapshot | None:
    """The snapshot, or the first one nested in it, whose payload was skipped."""
    if snapshot is None or not snapshot.parsed:
        return snapshot
    return next((found for n in snapshot.nested if (found := _first_unparsed(n))), None)


def state_list_problem(header: KeyedStateHeader | OperatorStateHeader, what: str) -> str | None:
    """Why `header`'s state list was not read to its end, or cannot be trusted, or None."""
    if header.problem is not None:
        return (
            f"{what} header read in part ({header.problem}): the states after that cannot be read"
        )
    damaged = next((s for s in _snapshots(header) if s.damaged), None)
    if damaged is not None:  # the scan past it may have swallowed states: ids would shift
        name = damaged.class_name.rsplit(".", 1)[-1].rsplit("$", 1)[-1]
        return f"{what} header: {name} does not match its layout; its states cannot be told apart"
    return None


def _snapshots(header: KeyedStateHeader | OperatorStateHeader) -> list[SerializerSnapshot]:
    roots = [s for state in header.states for s in state.serializers.values()]
    if isinstance(header, KeyedStateHeader) and header.key_serializer_snapshot is not None:
        roots.insert(0, header.key_serializer_snapshot)
    return [s for root in roots for s in root.snapshots()]


def require_state_list(header: KeyedStateHeader | OperatorStateHeader, what: str) -> None:
    """Raise unless `header`'s state list was read to its end, past snapshots that all match
    their layouts. Entries name their state by its index in that list and elements by its name:
    a reader given only the states before a break (or after a scan that skipped some) would drop
    or misname rows, so it refuses the file instead."""
    problem = state_list_problem(header, what)
    if problem is not None:
        raise FormatError(problem)


# --- keyed headers -------------------------------------------------------------------------


def parse_keyed_header(data: bytes | memoryview) -> KeyedStateHeader:
    """Parse exactly the header bytes of a keyed-state file (or a native snapshot's meta file)."""
    r = DataReader(data)
    version = _version(r, KEYED_VERSIONS, "keyed state")
    compressed = r.read_bool() if version >= KEYED_COMPRESSION_SINCE else False
    if version < KEYED_KEY_SNAPSHOT_SINCE:
        too_old = f"keyed state header version {version} predates Flink 1.8; states not read"
        return KeyedStateHeader(version, compressed, None, (), False, too_old)
    try:
        key_snapshot = read_serializer_snapshot(r, _next_is_state_list(at_end))
    except FormatError as exc:
        raise FormatError(f"keyed state header: key serializer: {exc.message}") from None
    count = _state_count(r)
    states, problem = _read_states(r, count, at_end)
    complete = problem is None and key_snapshot.complete and all(s.complete for s in states)
    return KeyedStateHeader(version, compressed, key_snapshot, states, complete, problem)


def keyed_header_compressed(header: bytes | bytearray | memoryview) -> bool:
    """The compression flag alone (version ≥ 4: the bool after the version)."""
    return _compressed(header, KEYED_VERSIONS, KEYED_COMPRESSION_SINCE, "keyed state")


def set_keyed_header_compression(header: bytes, compressed: bool) -> bytes:
    """The header with its compression flag set; the only byte that changes is offset 4."""
    return _set_flag(header, compressed, KEYED_VERSIONS, KEYED_COMPRESSION_SINCE, "keyed state")


def write_keyed_header(header: KeyedStateHeader) -> bytes:
    """The header's bytes as `KeyedBackendSerializationProxy.write` writes them (version 6):
    what a rewrite of a state's name, snapshot or presence needs. Snapshots are written from
    the bytes they were read from (`SerializerSnapshot.raw`), so an unchanged header comes out
    byte for byte as it went in."""
    if header.version < KEYED_KEY_SNAPSHOT_SINCE or not header.complete:
        raise FormatError(
            "cannot rewrite a keyed state header that was not read in full "
            f"({read_in_part(header)})"
        )
    out = DataWriter()
    out.write_i32(header.version)
    out.write_bool(header.compressed)
    _write_snapshot(out, header.key_serializer_snapshot)
    out.write_i16(len(header.states))
    for state in header.states:
        out.write_bytes(write_state_meta(state))
    return out.getvalue()


def write_state_meta(state: StateMetaInfo) -> bytes:
    """`StateMetaInfoSnapshotReadersWriters`' current writer: name, backend state type,
    options, then each serializer snapshot under its key."""
    out = DataWriter()
    out.write_utf(state.name)
    out.write_i32(BACKEND_STATE_TYPES.index(state.backend_state_type))
    out.write_i32(len(state.options))
    for key, value in state.options.items():
        out.write_utf(key)
        out.write_utf(value)
    out.write_i32(len(state.serializers))
    for key, snapshot in state.serializers.items():
        out.write_utf(key)
        _write_snapshot(out, snapshot)
    return out.getvalue()


def _write_snapshot(out: DataWriter, snapshot: SerializerSnapshot | None) -> None:
    if snapshot is None or not snapshot.raw:
        raise FormatError("a serializer snapshot without its bytes cannot be written")
    out.write_i32(PROXY_VERSION)
    out.write_bytes(snapshot.raw)


# --- operator headers ----------------------------------------------------------------------


def parse_operator_header(data: bytes | memoryview) -> OperatorStateHeader:
    """Parse the header bytes of an operator-state file.

    A trailing Snappy stream identifier (compressed files start their data stream right after
    the header) is tolerated.
    """
    r = DataReader(data)
    version = _version(r, OPERATOR_VERSIONS, "operator state")
    compressed = r.read_bool() if version >= OPERATOR_COMPRESSION_SINCE else False
    if version < OPERATOR_META_INFO_SINCE:
        too_old = f"operator state header version {version} predates Flink 1.8; states not read"
        return OperatorStateHeader(version, compressed, (), (), False, too_old)
    end = _operator_end
    has_broadcast = version >= OPERATOR_BROADCAST_SINCE
    list_count = _state_count(r)
    list_states, problem = _read_states(
        r, list_count, _next_is_state_list(end) if has_broadcast else end
    )
    broadcast: tuple[StateMetaInfo, ...] = ()
    if problem is None and has_broadcast:
        broadcast, problem = _read_states(r, _state_count(r), end)
    complete = problem is None and all(s.complete for s in list_states + broadcast)
    return OperatorStateHeader(version, compressed, list_states, broadcast, complete, problem)


def write_operator_header(header: OperatorStateHeader) -> bytes:
    """The header's bytes as `OperatorBackendSerializationProxy.write` writes them: what a
    rewrite of a state's name or presence needs; unchanged, byte for byte what was read."""
    if header.version < OPERATOR_META_INFO_SINCE or not header.complete:
        raise FormatError(
            "cannot rewrite an operator state header that was not read in full "
            f"({read_in_part(header)})"
        )
    out = DataWriter()
    out.write_i32(header.version)
    if header.version >= OPERATOR_COMPRESSION_SINCE:
        out.write_bool(header.compressed)
    for states in (header.list_states, header.broadcast_states):
        out.write_i16(len(states))
        for state in states:
            out.write_bytes(write_state_meta(state))
    return out.getvalue()


def operator_header_compressed(header: bytes | bytearray | memoryview) -> bool:
    """The compression flag alone (version ≥ 6: the bool after the version)."""
    return _compressed(header, OPERATOR_VERSIONS, OPERATOR_COMPRESSION_SINCE, "operator state")


def set_operator_header_compression(header: bytes, compressed: bool) -> bytes:
    """The header with its compression flag set; the only byte that changes is offset 4."""
    return _set_flag(
        header, compressed, OPERATOR_VERSIONS, OPERATOR_COMPRESSION_SINCE, "operator state"
    )


def _operator_end(r: DataReader) -> bool:
    return r.at_end() or (
        r.remaining() == len(STREAM_IDENTIFIER) and r.fork().read_rest() == STREAM_IDENTIFIER
    )


# --- shared --------------------------------------------------------------------------------


def _version(r: DataReader, versions: range, what: str) -> int:
    version = r.read_i32()
    if version not in versions:
        raise FormatError(f"unsupported {what} header version {version}")
    return version


def _compressed(
    header: bytes | bytearray | memoryview, versions: range, since: int, what: str
) -> bool:
    r = DataReader(header)
    return _version(r, versions, what) >= since and r.read_bool()


def _set_flag(header: bytes, on: bool, versions: range, since: int, what: str) -> bytes:
    r = DataReader(header)
    version = _version(r, versions, what)
    if version < since:
        if on:
            raise UnsupportedError(f"{what} header version {version} has no compression flag")
        return header
    r.read_bool()  # present, or FormatError for a header cut short
    return header[:4] + (b"\x01" if on else b"\x00") + header[5:]


def _state_count(r: DataReader) -> int:
    count = r.read_i16()
    if count < 0:
        raise FormatError(f"negative number of states ({count}) at offset {r.pos - 2}")
    return count


def _read_states(
    r: DataReader, count: int, after_last: Probe
) -> tuple[tuple[StateMetaInfo, ...], str | None]:
    """Up to `count` states; on a state that cannot be read, those before it and the reason."""
    states: list[StateMetaInfo] = []
    for index in range(count):
        start = r.pos
        try:
            states.append(_read_state(r, _next_is_state if index < count - 1 else after_last))
        except NestedTooDeep:
            raise  # no state after it can be found: the header is refused, not read in part
        except FormatError as exc:
            return tuple(states), f"state #{index} at offset {start}: {exc.message}"
    return tuple(states), None


def _read_state(r: DataReader, after_state: Probe) -> StateMetaInfo:
    name = r.read_utf()
    ordinal = r.read_i32()
    if not 0 <= ordinal < len(BACKEND_STATE_TYPES):
        raise FormatError(f"state {excerpt(name)}: unknown backend state type {ordinal}")
    options = {}
    for _ in range(_small_count(r, "options")):
        key = r.read_utf()
        options[key] = r.read_utf()
    serializers = {}
    count = _small_count(r, "serializers")
    for n in range(count):
        key = r.read_utf()
        after = _next_is_serializer_key if n < count - 1 else after_state
        try:
            serializers[key] = read_serializer_snapshot(r, after)
        except NestedTooDeep as exc:
            raise NestedTooDeep(f"state {excerpt(name)}: {key}: {exc.message}") from None
    return StateMetaInfo(name, BACKEND_STATE_TYPES[ordinal], options, serializers)


def _small_count(r: DataReader, what: str) -> int:
    count = r.read_i32()
    if not 0 <= count <= _MAX_ENTRIES:
        raise FormatError(f"implausible number of {what} ({count}) at offset {r.pos - 4}")
    return count


# --- what may follow a serializer snapshot (probes for resynchronising) ---------------------


@probe
def _next_is_serializer_key(r: DataReader) -> bool:
    return r.read_utf() in SERIALIZER_KEYS and r.read_i32() == PROXY_VERSION


@probe
def _next_is_state(r: DataReader) -> bool:
    """A state meta info: name, type ordinal, options, then a first serializer key."""
    r.read_utf()
    if not 0 <= r.read_i32() < len(BACKEND_STATE_TYPES):
        return False
    options = r.read_i32()
    if not 0 <= options <= _MAX_ENTRIES:
        return False
    if options:
        return r.read_utf() in OPTION_KEYS
    serializers = r.read_i32()
    return 0 < serializers <= _MAX_ENTRIES and _next_is_serializer_key(r)


def _next_is_state_list(end: Probe) -> Probe:
    """An i16 state count, then the first state (or, for no states, `end`)."""

    @probe
    def check(r: DataReader) -> bool:
        count = r.read_i16()
        if count == 0:
            return end(r)
        return count > 0 and _next_is_state(r)

    return check
