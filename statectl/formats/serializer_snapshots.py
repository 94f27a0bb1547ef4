"""Serializer snapshots inside state headers, parsed for diagnostics.

Mirrors `TypeSerializerSnapshotSerializationUtil`, `TypeSerializerSnapshot.writeVersionedSnapshot`,
`CompositeTypeSerializerSnapshot`, `NestedSerializersSnapshotDelegate`,
`LinkedOptionalMapSerializer` and the payloads of the snapshots Flink jobs commonly use
(flink-savepoint-format.md §3.2): simple base types (empty payload), composites (List, Map,
Timer, TTL, Tuple, Nullable, …), POJO, Kryo, Avro, enums and generic-type snapshots.

A payload has no length prefix, so an unknown one cannot be skipped by reading. Each read is given
a probe recognising what must follow it; when the payload is unknown the reader scans forward to
the first position where that probe matches and marks the snapshot `parsed=False`. Headers are
always copied as bytes, so a snapshot parsed only in part costs nothing but detail.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from statectl.errors import FormatError
from statectl.formats.java_io import DataReader, DataWriter, excerpt
from statectl.formats.java_serialization import read_object
from statectl.formats.logical_types import logical_type

PROXY_VERSION = 2  # TypeSerializerSnapshotSerializationProxy.VERSION
COMPOSITE_MAGIC = 911108  # CompositeTypeSerializerSnapshot.MAGIC_NUMBER
COMPOSITE_SNAPSHOT_VERSION = 3  # CompositeTypeSerializerSnapshot.VERSION
NESTED_MAGIC = 1333245  # NestedSerializersSnapshotDelegate.MAGIC_NUMBER
NESTED_VERSION = 1
OPTIONAL_MAP_HEADER = 0x4F2C69A3D70  # LinkedOptionalMapSerializer.HEADER
_MAX_NESTED = 4096
# Snapshots within snapshots (List of Map of POJO …): Flink's own types nest a few deep, and
# the value codecs read 48 (`values.model.MAX_DEPTH`); deeper input is built to exhaust the
# stack of a recursive reader.
MAX_SNAPSHOT_DEPTH = 64
_MAX_VERSION = 1 << 16
_UTF_MIN = 2  # a writeUTF string: its u16 length
_VERSIONED_MIN = 6  # a versioned snapshot: utf class name, i32 version
_OPTIONAL_ENTRY_MIN = 4  # utf name, then two bool presence flags
_JAVA_STREAM_MIN = 5  # a Java serialization stream: magic, version, one tag

_JAVA_CLASS = re.compile(r"[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)*")

Probe = Callable[[DataReader], bool]
_depth: ContextVar[int] = ContextVar("snapshot_depth", default=0)


class NestedTooDeep(FormatError):
    """Snapshots nested past `MAX_SNAPSHOT_DEPTH`: the whole snapshot is refused (no reader
    falls back to scanning past it, which would try every depth again)."""


@dataclass(frozen=True, slots=True)
class SerializerSnapshot:
    """One serializer snapshot: its class, version and what it wraps."""

    class_name: str
    version: int
    nested: tuple[SerializerSnapshot, ...] = ()
    type_name: str | None = None  # the class serialized: POJO, Kryo, Avro, tuple, enum, …
    field_names: tuple[str, ...] = ()  # POJO: the name of each `nested` entry
    parsed: bool = True  # False: the payload was skipped by scanning for what follows it
    # What the payload says beyond its nested snapshots, for the value codecs: enum constants,
    # POJO subclasses, Kryo registrations, the Avro schema, SQL types, precisions, padding.
    params: tuple[tuple[str, Any], ...] = field(default=(), compare=False)
    raw: bytes = field(default=b"", compare=False, repr=False)  # the versioned snapshot's bytes

    def param(self, name: str, default: Any = None) -> Any:
        return next((value for key, value in self.params if key == name), default)

    @property
    def complete(self) -> bool:
        return self.parsed and all(n.complete for n in self.nested)

    @property
    def label(self) -> str:
        """`String`, `List`, `Map`, `Pojo`, … from the snapshot class name."""
        simple = self.class_name.rsplit(".", 1)[-1].rsplit("$", 1)[-1]
        for suffix in ("SerializerSnapshot", "SerializerConfigSnapshot", "Snapshot"):
            if simple.endswith(suffix) and len(simple) > len(suffix):
                return simple[: -len(suffix)]
        return simple

    def describe(self) -> str:
        """A type-like summary, e.g. `Map<String, Long>` or `Pojo(demo.Event)<id: Long>`."""
        text = self.label + (f"({self.type_name})" if self.type_name else "")
        if self.nested:
            inner = [s.describe() for s in self.nested]
            if self.field_names:
                inner = [f"{n}: {t}" for n, t in zip(self.field_names, inner, strict=True)]
            text += "<" + ", ".join(inner) + ">"
        return text if self.parsed else text + "?"

    @property
    def damaged(self) -> bool:
        """Skipped by scanning (`parsed=False`) though its class's layout is one this module
        reads: its bytes do not match that layout, and the scan may have run past its end."""
        return not self.parsed and known_layout(self.class_name)

    def snapshots(self) -> list[SerializerSnapshot]:
        """This snapshot and every nested one, depth first."""
        return [self, *(s for n in self.nested for s in n.snapshots())]

    def class_names(self) -> list[str]:
        """This snapshot's class name and those of every nested snapshot, depth first."""
        return [self.class_name, *(name for n in self.nested for name in n.class_names())]


def known_layout(class_name: str) -> bool:
    """Whether this module reads the payload of snapshots of `class_name`."""
    return class_name in _PAYLOADS or class_name in COMPOSITES or class_name in EMPTY_PAYLOAD


# --- entry points --------------------------------------------------------------------------


def read_serializer_snapshot(r: DataReader, after: Probe) -> SerializerSnapshot:
    """`writeSerializerSnapshot`: i32 proxy version 2, then a versioned snapshot."""
    start = r.pos
    proxy_version = r.read_i32()
    if proxy_version != PROXY_VERSION:
        raise FormatError(
            f"unknown serializer snapshot proxy version {proxy_version} at offset {start}"
        )
    return read_versioned_snapshot(r, after)


def read_versioned_snapshot(r: DataReader, after: Probe) -> SerializerSnapshot:
    """`writeVersionedSnapshot`: utf class name, i32 version, class-specific payload;
    `NestedTooDeep` past `MAX_SNAPSHOT_DEPTH` nested snapshots."""
    depth = _depth.get()
    if depth >= MAX_SNAPSHOT_DEPTH:
        raise NestedTooDeep(f"serializer snapshots nested more than {MAX_SNAPSHOT_DEPTH} deep")
    token = _depth.set(depth + 1)
    try:
        return _read_versioned_snapshot(r, after)
    finally:
        _depth.reset(token)


def _read_versioned_snapshot(r: DataReader, after: Probe) -> SerializerSnapshot:
    origin = r.pos
    class_name = r.read_utf()
    version = r.read_i32()
    start = r.pos
    if class_name in EMPTY_PAYLOAD:  # nothing to skip; whoever reads on checks what follows
        return SerializerSnapshot(class_name, version, raw=r.slice(origin, r.pos))
    try:
        snapshot = _PAYLOADS.get(class_name, _generic_payload)(r, class_name, version, after)
        if after(r):
            return dataclasses.replace(snapshot, raw=r.slice(origin, r.pos))
    except NestedTooDeep:
        raise
    except FormatError:
        pass
    r.pos = start
    snapshot = _unknown_payload(r, class_name, version, after)
    return dataclasses.replace(snapshot, raw=r.slice(origin, r.pos))


def composite(
    class_name: str,
    outer_version: int,
    outer_payload: bytes,
    nested: Sequence[SerializerSnapshot],
    version: int = COMPOSITE_SNAPSHOT_VERSION,
) -> SerializerSnapshot:
    """`CompositeTypeSerializerSnapshot.writeSnapshot` (versioned): magic, outer version, outer
    payload, then `NestedSerializersSnapshotDelegate` (magic, version 1, count, snapshots)."""
    out = DataWriter()
    out.write_utf(class_name)
    out.write_i32(version)
    out.write_i32(COMPOSITE_MAGIC)
    out.write_i32(outer_version)
    out.write_bytes(outer_payload)
    out.write_i32(NESTED_MAGIC)
    out.write_i32(NESTED_VERSION)
    out.write_i32(len(nested))
    for snapshot in nested:
        if not snapshot.raw:
            raise FormatError(f"the snapshot of {snapshot.label} has no bytes to nest")
        out.write_bytes(snapshot.raw)
    return read_versioned_snapshot(DataReader(out.getvalue()), at_end)


def probe(check: Callable[[DataReader], bool]) -> Probe:
    """A look-ahead that never moves the reader; running out of bytes means 'no'."""

    def look(r: DataReader) -> bool:
        try:
            return check(r.fork())
        except FormatError:
            return False

    return look


def at_end(r: DataReader) -> bool:
    return r.at_end()


def looks_like_class_name(name: str) -> bool:
    return "." in name and _JAVA_CLASS.fullmatch(name) is not None


@probe
def next_is_versioned_snapshot(r: DataReader) -> bool:
    """A class name followed by a plausible version: the start of a nested snapshot."""
    return looks_like_class_name(r.read_utf()) and 0 <= r.read_i32() < _MAX_VERSION


# --- payload readers -----------------------------------------------------------------------

Payload = Callable[[DataReader, str, int, Probe], SerializerSnapshot]


def _generic_payload(
    r: DataReader, class_name: str, version: int, after: Probe
) -> SerializerSnapshot:
    """A composite (recognised by its magic) or, failing that, an empty payload."""
    if r.remaining() >= 4 and r.fork().read_i32() == COMPOSITE_MAGIC:
        return _composite(r, class_name, version, after, _OUTER_PAYLOADS.get(class_name))
    if class_name in COMPOSITES:
        raise FormatError(f"{class_name} without its composite magic at offset {r.pos}")
    return SerializerSnapshot(class_name, version)


def _unknown_payload(
    r: DataReader, class_name: str, version: int, after: Probe
) -> SerializerSnapshot:
    """Skip a payload we cannot read, to the first place `after` matches; keep nested snapshots
    if the payload ends with some (a composite with an outer payload we do not know)."""
    start = r.pos
    resync(r, after, class_name)
    end = r.pos
    nested = _nested_ending_at(r, start, end)
    r.pos = end
    return SerializerSnapshot(class_name, version, nested, parsed=False)


def resync(r: DataReader, after: Probe, what: str) -> None:
    """Move to the first position from here where `after` recognises what follows."""
    for pos in range(r.pos, r.size + 1):
        r.pos = pos
        if after(r):
            return
    raise FormatError(f"cannot find the end of serializer snapshot {excerpt(what)}")


def _nested_ending_at(r: DataReader, start: int, end: int) -> tuple[SerializerSnapshot, ...]:
    """Nested snapshots in [start, end) that parse and end exactly at `end`, else none."""

    def at_payload_end(reader: DataReader) -> bool:
        return reader.pos == end

    for pos in range(start, end - 11):
        r.pos = pos
        if not _at_nested(r):
            continue
        try:
            nested = _nested(r, at_payload_end)
        except NestedTooDeep:
            raise
        except FormatError:
            continue
        if r.pos == end:
            return nested
    return ()


def _composite(
    r: DataReader, class_name: str, version: int, after: Probe, outer: OuterPayload | None
) -> SerializerSnapshot:
    """`CompositeTypeSerializerSnapshot`: magic, outer version, outer payload, nested snapshots.

    Without a reader for the outer payload, assume it is empty (most are); if it is not, the
    nested magic is not where expected and the caller falls back to `_unknown_payload`.
    """
    r.read_i32()  # COMPOSITE_MAGIC, checked by the caller
    outer_version = r.read_i32()
    type_name, params = outer(r, outer_version) if outer else (None, ())
    params = (*params, ("outer_version", outer_version))
    return SerializerSnapshot(class_name, version, _nested(r, after), type_name, params=params)


def _at_nested(r: DataReader) -> bool:
    return r.remaining() >= 8 and r.fork().read_i32() == NESTED_MAGIC


def _nested_count(r: DataReader, entry: str, min_bytes: int) -> int:
    """A count of nested items, each at least `min_bytes` long: plausible, and fits the bytes."""
    at = r.pos
    count = r.read_i32()
    if not 0 <= count <= _MAX_NESTED:
        raise FormatError(f"implausible {entry} count {count} at offset {at}")
    r.check_count(count, entry, at, min_bytes)
    return count


def _nested(r: DataReader, after: Probe) -> tuple[SerializerSnapshot, ...]:
    """`NestedSerializersSnapshotDelegate`: magic, version 1, count, versioned snapshots."""
    if r.read_i32() != NESTED_MAGIC or r.read_i32() != NESTED_VERSION:
        raise FormatError(f"no nested serializer snapshots at offset {r.pos - 8}")
    count = _nested_count(r, "nested serializer", _VERSIONED_MIN)
    # The last nested snapshot is followed by whatever follows the composite itself.
    return tuple(
        read_versioned_snapshot(r, next_is_versioned_snapshot if i < count - 1 else after)
        for i in range(count)
    )


# Outer payloads of composite snapshots (writeOuterSnapshot), given the outer version: a type
# name (or None) and the parameters the value codecs need.
Params = tuple[tuple[str, Any], ...]
OuterPayload = Callable[[DataReader, int], tuple[str | None, Params]]


def _utf_type(r: DataReader, outer_version: int) -> tuple[str | None, Params]:
    return r.read_utf(), ()


def _int_padding(r: DataReader, outer_version: int) -> tuple[str | None, Params]:
    return None, (("padding", r.read_i32()),)  # NullableSerializer: null padding length


def _bool_flag(r: DataReader, outer_version: int) -> tuple[str | None, Params]:
    return None, (("flag", r.read_bool()),)


ROW_LEGACY_MODE = "legacy mode"  # the type name of a RowSerializer snapshot without RowKind
_ROW_KIND_FLAG_SINCE = 4  # RowSerializerSnapshot outer v4 writes supportsRowKind; v3 implies it


def _row_kind_flag(r: DataReader, outer_version: int) -> tuple[str | None, Params]:
    """RowSerializerSnapshot: supportsRowKind; false is the legacy (Flink < 1.11) layout."""
    if outer_version >= _ROW_KIND_FLAG_SINCE:
        supports = r.read_bool()
    else:
        supports = outer_version == _ROW_KIND_FLAG_SINCE - 1
    return (None if supports else ROW_LEGACY_MODE), ()


def _external(r: DataReader, outer_version: int) -> tuple[str | None, Params]:
    """ExternalSerializerSnapshot: the DataType (Java-serialized), isInternalInput."""
    read_object(r)
    return None, (("internal_input", r.read_bool()),)


_BASE = "org.apache.flink.api.common.typeutils.base."
_RUNTIME = "org.apache.flink.api.java.typeutils.runtime."
_TABLE = "org.apache.flink.table.runtime."


def _inner_snapshots(prefix: str, outer_names: str) -> list[str]:
    """`<prefix>XSerializer$XSerializerSnapshot` for each X."""
    return [f"{prefix}{x}Serializer${x}SerializerSnapshot" for x in outer_names.split()]


# SimpleTypeSerializerSnapshot subclasses in Flink 2.3 (flink-dist and flink-table-runtime):
# their payload is empty.
EMPTY_PAYLOAD: frozenset[str] = frozenset(
    [
        *_inner_snapshots(
            _BASE,
            "BigDec BigInt Bitmap Boolean BooleanValue Byte ByteValue Char CharValue Date Double "
            "DoubleValue Float FloatValue Instant Int IntValue LocalDate LocalDateTime LocalTime "
            "Long LongValue NullValue Short ShortValue SqlDate SqlTime SqlTimestamp String "
            "StringValue Variant Void",
        ),
        *_inner_snapshots(
            _BASE + "array.",
            "BooleanPrimitiveArray BytePrimitiveArray CharPrimitiveArray DoublePrimitiveArray "
            "FloatPrimitiveArray IntPrimitiveArray LongPrimitiveArray ShortPrimitiveArray "
            "StringArray",
        ),
        *_inner_snapshots("org.apache.flink.runtime.state.", "VoidNamespace Java"),
        *_inner_snapshots("org.apache.flink.queryablestate.client.", "VoidNamespace"),
        *_inner_snapshots(_TABLE + "typeutils.", "StringData"),
        *_inner_snapshots(_TABLE + "operators.sink.", "SortedLong"),
        *(
            f"{package}.{window}$Serializer${window}SerializerSnapshot"
            for package in (
                "org.apache.flink.streaming.api.windowing.windows",
                _TABLE + "operators.window",
            )
            for window in ("TimeWindow", "GlobalWindow", "CountWindow")
        ),
        _RUNTIME + "Tuple0SerializerSnapshot",
    ]
)


def _table_ints(*names: str) -> Payload:
    """Table snapshots whose payload is a few ints (precision, scale, arity)."""

    def read(r: DataReader, class_name: str, version: int, after: Probe) -> SerializerSnapshot:
        params = tuple((name, r.read_i32()) for name in names)
        return SerializerSnapshot(class_name, version, params=params)

    return read


_OUTER_PAYLOADS: dict[str, OuterPayload] = {
    _RUNTIME + "TupleSerializerSnapshot": _utf_type,
    _BASE + "GenericArraySerializerSnapshot": _utf_type,
    _RUNTIME + "NullableSerializer$NullableSerializerSnapshot": _int_padding,
    _RUNTIME + "RowSerializer$RowSerializerSnapshot": _row_kind_flag,
    "org.apache.flink.streaming.api.functions.sink.legacy.TwoPhaseCommitSinkFunction"
    "$StateSerializerSnapshot": _bool_flag,
    _TABLE + "typeutils.LinkedListSerializer$LinkedListSerializerSnapshot": _bool_flag,
    _TABLE + "typeutils.ExternalSerializer$ExternalSerializerSnapshot": _external,
    "org.apache.flink.api.scala.typeutils.ScalaCaseClassSerializerSnapshot": _utf_type,
    # Composites with an empty outer payload need no entry: that is the default.
}

# CompositeTypeSerializerSnapshot subclasses in Flink 2.3 (flink-dist, flink-table-runtime).
COMPOSITES: frozenset[str] = frozenset(
    [
        *_OUTER_PAYLOADS,
        _BASE + "ListSerializerSnapshot",
        _BASE + "MapSerializerSnapshot",
        _BASE + "SetSerializerSnapshot",
        "org.apache.flink.streaming.api.operators.TimerSerializerSnapshot",
        "org.apache.flink.runtime.state.ttl.TtlStateFactory$TtlSerializerSnapshot",
        "org.apache.flink.runtime.state.v2.ttl.TtlStateFactory$TtlSerializerSnapshot",
        "org.apache.flink.runtime.state.ArrayListSerializerSnapshot",
        _RUNTIME + "JavaEitherSerializerSnapshot",
        "org.apache.flink.api.common.typeutils.SingleThreadAccessCheckingTypeSerializer"
        "$SingleThreadAccessCheckingTypeSerializerSnapshot",
        "org.apache.flink.streaming.runtime.streamrecord.StreamElementSerializer"
        "$StreamElementSerializerSnapshot",
        "org.apache.flink.streaming.api.datastream.CoGroupedStreams$UnionSerializerSnapshot",
        "org.apache.flink.streaming.api.operators.co.IntervalJoinOperator"
        "$BufferEntrySerializerSnapshot",
        _TABLE + "typeutils.RawValueDataSerializer$RawValueDataSerializerSnapshot",
        _TABLE + "typeutils.WindowKeySerializer$WindowKeySerializerSnapshot",
    ]
)


MISSING_FIELD = "missing-field-at-"  # PojoSerializerSnapshotData: a field no longer found


def _pojo(r: DataReader, class_name: str, version: int, after: Probe) -> SerializerSnapshot:
    """`PojoSerializerSnapshotData`: class, then the field map (name, declaring class, field
    serializer), then the registered and the non-registered subclass maps (name, serializer).
    `nested` holds the fields' snapshots; a field whose snapshot is absent (its class could not
    be loaded when Flink wrote it) makes the snapshot incomplete."""
    type_name = r.read_utf()
    names: list[str] = []
    nested: list[SerializerSnapshot] = []
    declaring: list[str | None] = []
    complete = True
    for name, key, value in _optional_map(r):
        if value is None:
            complete = False
            continue
        names.append(name)
        nested.append(read_versioned_snapshot(DataReader(value), at_end))
        declaring.append(DataReader(key).read_utf() if key else None)
    subclasses = tuple(
        tuple(
            (name, read_versioned_snapshot(DataReader(value), at_end) if value else None)
            for name, _key, value in _optional_map(r)
        )
        for _ in range(2)
    )
    params = (
        ("declaring", tuple(declaring)),
        ("registered", subclasses[0]),
        ("nonregistered", subclasses[1]),
        ("fields_complete", complete),
    )
    return SerializerSnapshot(
        class_name, version, tuple(nested), type_name, tuple(names), params=params
    )


KRYO_CLASS, KRYO_INSTANCE = 1, 2  # KryoRegistration.SerializerDefinitionType CLASS, INSTANCE


def _kryo(r: DataReader, class_name: str, version: int, after: Probe) -> SerializerSnapshot:
    """`KryoSerializerSnapshotData`: class, registrations (in id order: each class's name and
    how it is serialized), default serializers and default serializer classes."""
    type_name = r.read_utf()
    registrations = tuple(
        (name, _kryo_registration(value)) for name, _key, value in _optional_map(r)
    )
    defaults = tuple(name for name, _key, _value in _optional_map(r))
    default_classes = tuple(name for name, _key, _value in _optional_map(r))
    params = (
        ("registrations", registrations),
        ("default_serializers", defaults + default_classes),
    )
    return SerializerSnapshot(class_name, version, type_name=type_name, params=params)


def _kryo_registration(frame: bytes | None) -> str | None:
    """A registration's serializer: a class name (CLASS), "instance" (INSTANCE), or None (Kryo's
    default for the class, or a frame Flink could not write)."""
    if frame is None:
        return None
    r = DataReader(frame)
    r.read_utf()  # the registered class
    kind = r.read_i32()
    if kind == KRYO_CLASS:
        return r.read_utf()
    return "instance" if kind == KRYO_INSTANCE else None


def _optional_map(r: DataReader) -> list[tuple[str, bytes | None, bytes | None]]:
    """`LinkedOptionalMapSerializer`: header, count, (name, framed key?, framed value?)*."""
    if r.read_i64() != OPTIONAL_MAP_HEADER:
        raise FormatError(f"no optional-map header at offset {r.pos - 8}")
    count = _nested_count(r, "optional-map entry", _OPTIONAL_ENTRY_MIN)
    return [(r.read_utf(), _frame(r), _frame(r)) for _ in range(count)]


def _frame(r: DataReader) -> bytes | None:
    return r.read_bytes(r.read_i32()) if r.read_bool() else None


def _avro(r: DataReader, class_name: str, version: int, after: Probe) -> SerializerSnapshot:
    """`AvroSerializerSnapshot`: v1 the schema; v2 the runtime class, then the schema."""
    if version <= 1:
        return SerializerSnapshot(class_name, version, params=(("schema", r.read_utf()),))
    type_name = r.read_utf()
    schema = r.read_utf()  # later versions may differ: the caller's probe checks the end
    return SerializerSnapshot(
        class_name, version, type_name=type_name, params=(("schema", schema),)
    )


def _enum(r: DataReader, class_name: str, version: int, after: Probe) -> SerializerSnapshot:
    """`EnumSerializerSnapshot`: enum class, number of constants, constant names."""
    type_name = r.read_utf()
    at = r.pos
    count = r.read_i32()
    if not 0 <= count <= 1 << 16:
        raise FormatError(f"implausible number of enum constants ({count})")
    r.check_count(count, "enum constant", at, _UTF_MIN)
    constants = tuple(r.read_utf() for _ in range(count))
    return SerializerSnapshot(
        class_name, version, type_name=type_name, params=(("constants", constants),)
    )


def _generic_type(r: DataReader, class_name: str, version: int, after: Probe) -> SerializerSnapshot:
    """`GenericTypeSerializerSnapshot` (Value, CopyableValue, Writable…): the type class."""
    return SerializerSnapshot(class_name, version, type_name=r.read_utf())


def _ttl_aware(r: DataReader, class_name: str, version: int, after: Probe) -> SerializerSnapshot:
    """`TtlAwareSerializerSnapshot`: TTL flag, then the wrapped versioned snapshot."""
    enabled = r.read_bool()
    inner = read_versioned_snapshot(r, after)
    return SerializerSnapshot(class_name, version, (inner,), params=(("ttl", enabled),))


def _row_data(r: DataReader, class_name: str, version: int, after: Probe) -> SerializerSnapshot:
    """`RowDataSerializerSnapshot`: arity, each field's LogicalType (Java serialization, one
    stream each), then the field serializers' snapshots (NestedSerializersSnapshotDelegate)."""
    count = _nested_count(r, "row field", _JAVA_STREAM_MIN)
    types = tuple(logical_type(read_object(r)) for _ in range(count))
    return SerializerSnapshot(class_name, version, _nested(r, after), params=(("types", types),))


def _array_data(r: DataReader, class_name: str, version: int, after: Probe) -> SerializerSnapshot:
    """`ArrayDataSerializerSnapshot`: the element's LogicalType, then its serializer (both
    Java-serialized; the layout follows from the type alone)."""
    element = logical_type(read_object(r))
    read_object(r)
    return SerializerSnapshot(class_name, version, params=(("element_type", element),))


def _map_data(r: DataReader, class_name: str, version: int, after: Probe) -> SerializerSnapshot:
    """`MapDataSerializerSnapshot`: key and value LogicalTypes, then their serializers."""
    key, value = logical_type(read_object(r)), logical_type(read_object(r))
    read_object(r)
    read_object(r)
    return SerializerSnapshot(
        class_name, version, params=(("key_type", key), ("value_type", value))
    )


def _sorted_map(r: DataReader, class_name: str, version: int, after: Probe) -> SerializerSnapshot:
    """`SortedMapSerializerSnapshot`: the comparator (Java-serialized), then key and value."""
    read_object(r)
    return SerializerSnapshot(class_name, version, _nested(r, after))


_PAYLOADS: dict[str, Payload] = {
    _TABLE + "typeutils.DecimalDataSerializer$DecimalSerializerSnapshot": _table_ints(
        "precision", "scale"
    ),
    _TABLE + "typeutils.TimestampDataSerializer$TimestampDataSerializerSnapshot": _table_ints(
        "precision"
    ),
    _TABLE + "typeutils.BinaryRowDataSerializer$BinaryRowDataSerializerSnapshot": _table_ints(
        "arity"
    ),
    _TABLE + "typeutils.RowDataSerializer$RowDataSerializerSnapshot": _row_data,
    _TABLE + "typeutils.ArrayDataSerializer$ArrayDataSerializerSnapshot": _array_data,
    _TABLE + "typeutils.MapDataSerializer$MapDataSerializerSnapshot": _map_data,
    _TABLE + "typeutils.SortedMapSerializerSnapshot": _sorted_map,
    _RUNTIME + "PojoSerializerSnapshot": _pojo,
    _RUNTIME + "kryo.KryoSerializerSnapshot": _kryo,
    "org.apache.flink.formats.avro.typeutils.AvroSerializerSnapshot": _avro,
    _BASE + "EnumSerializer$EnumSerializerSnapshot": _enum,
    _RUNTIME + "ValueSerializer$ValueSerializerSnapshot": _generic_type,
    _RUNTIME + "CopyableValueSerializer$CopyableValueSerializerSnapshot": _generic_type,
    _RUNTIME + "WritableSerializer$WritableSerializerSnapshot": _generic_type,
    "org.apache.flink.runtime.state.ttl.TtlAwareSerializerSnapshot": _ttl_aware,
}
