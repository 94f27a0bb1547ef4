"""Codecs of the Table runtime serializers SQL operators keep state with.

Mirrors `org.apache.flink.table.runtime.typeutils.{RowDataSerializer, BinaryRowDataSerializer,
ArrayDataSerializer, MapDataSerializer, DecimalDataSerializer, TimestampDataSerializer,
RawValueDataSerializer, ExternalSerializer, SortedMapSerializer}` (flink-state-values.md §7.1,
§7.6). StringDataSerializer is in `scalars.py`; the table runtime's TimeWindow and CountWindow
namespaces in `composites.py`; a window TVF's slice-end namespace is a plain LongSerializer.

The BinaryRowData, BinaryArrayData and BinaryMapData layouts inside are in `binary_row.py` (the
scalars in their slots in `binary_fields.py`). A
top-level row's JSON is positional (`f0`, `f1`, …: its snapshot carries types, not names), a
nested ROW's by field names (docs/values.md).
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Any

from statectl.errors import FormatError
from statectl.formats.logical_types import LogicalType
from statectl.formats.serializer_snapshots import SerializerSnapshot
from statectl.formats.values.binary_fields import (
    Field,
    TimestampField,
    to_unscaled_bytes,
    unscaled,
)
from statectl.formats.values.binary_row import ROW_KIND, ArrayLayout, MapLayout, RowLayout, field_of
from statectl.formats.values.composites import MapCodec, positional
from statectl.formats.values.json_form import base64_json
from statectl.formats.values.model import Codec, Context, Undecodable, register
from statectl.formats.values.scalars import decimal_of

if TYPE_CHECKING:
    import pyarrow as pa

_TYPEUTILS = "org.apache.flink.table.runtime.typeutils."
_LENGTH = struct.Struct(">i")
_LONG = struct.Struct(">q")
_COMPACT_DECIMAL = 18


def _sized(buf: memoryview, pos: int, what: str) -> tuple[int, int]:
    """The big-endian i32 length prefix of a serializer's value: (start, size)."""
    if pos + 4 > len(buf):
        raise FormatError(f"{what} length at offset {pos} past the end")
    (size,) = _LENGTH.unpack_from(buf, pos)
    if size < 0 or pos + 4 + size > len(buf):
        raise FormatError(f"{what} of {size} bytes at offset {pos} does not fit")
    return pos + 4, size


def _write_sized(data: bytes | bytearray, out: bytearray) -> None:
    out += _LENGTH.pack(len(data))
    out += data


def _types(snapshot: SerializerSnapshot, name: str) -> LogicalType:
    logical = snapshot.param(name)
    if not isinstance(logical, LogicalType):
        raise Undecodable(f"snapshot without its {name.replace('_', ' ')}")
    return logical


# --- RowData -------------------------------------------------------------------------------------


class RowValue(dict[str, Any]):
    """A decoded row that remembers the bytes it was read from.

    `RowDataSerializer` writes a `BinaryRowData` as it is, and generated code lays some out
    differently from `toBinaryRow` (a null non-compact DECIMAL or TIMESTAMP keeps its var-part
    space, `CodeGenUtils.binaryWriterWriteNull`); an unchanged row is written back as read."""

    __slots__ = ("binary",)

    def __init__(self, fields: dict[str, Any], binary: bytes) -> None:
        super().__init__(fields)
        self.binary = binary


class RowDataCodec(Codec):
    """`RowDataSerializer`: i32 size, then a BinaryRowData. Values are dicts `f0`, `f1`, … with
    the RowKind under `__row_kind` (an int8 column in Arrow, not shown in JSON)."""

    __slots__ = ("layout", "types")
    type_class = "org.apache.flink.table.data.RowData"

    def __init__(self, types: tuple[LogicalType, ...]) -> None:
        self.types = types
        self.layout = RowLayout(positional(len(types)), [field_of(t) for t in types])

    def read(self, buf: memoryview, pos: int) -> tuple[Any, int]:
        start, size = _sized(buf, pos, "row")
        fields = self.layout.read(buf, start, size)
        return RowValue(fields, bytes(buf[start : start + size])), start + size

    def write(self, value: Any, out: bytearray) -> None:
        data: bytes | bytearray = self.layout.write(value)
        if isinstance(value, RowValue) and data != value.binary and self._unchanged(value):
            data = value.binary
        _write_sized(data, out)

    def _unchanged(self, value: RowValue) -> bool:
        return self.layout.read(memoryview(value.binary), 0, len(value.binary)) == value

    def arrow_type(self) -> pa.DataType:
        import pyarrow as pa

        return pa.struct([*self.layout.arrow_fields(), (ROW_KIND, pa.int8())])

    def to_arrow(self, value: Any) -> Any:
        return {**self.layout.to_arrow(value), ROW_KIND: value.get(ROW_KIND, 0)}

    def from_arrow(self, value: Any) -> Any:
        return self.layout.from_arrow(value)

    def to_json(self, value: Any) -> Any:
        return self.layout.to_json(value)

    def describe(self) -> str:
        return self.layout.describe()

    def tree(self) -> dict[str, Any]:
        return {"type": "ROW", "class": self.type_class, "fields": self.layout.tree()}


@register(_TYPEUTILS + "RowDataSerializer$RowDataSerializerSnapshot")
def _row_data(snapshot: SerializerSnapshot, context: Context) -> Codec:
    types = snapshot.param("types")
    if not isinstance(types, tuple):
        raise Undecodable("RowDataSerializer snapshot without its field types")
    return RowDataCodec(types)


@register(_TYPEUTILS + "BinaryRowDataSerializer$BinaryRowDataSerializerSnapshot")
def _binary_row_data(snapshot: SerializerSnapshot, context: Context) -> Codec:
    # The snapshot keeps the arity alone: without the field types no slot can be interpreted
    # (a long, a double, an inline string and an offset word all look alike).
    arity = snapshot.param("arity", "?")
    raise Undecodable(f"BinaryRowDataSerializer's snapshot holds only the arity ({arity})")


# --- ArrayData, MapData --------------------------------------------------------------------------


class _FieldFormCodec(Codec):
    """A serializer whose values take the Arrow and JSON forms of a binary-row `Field` of the
    same type (`self.field`), which also describes them."""

    __slots__ = ()
    field: Field

    def arrow_type(self) -> pa.DataType:
        return self.field.arrow_type()

    def to_arrow(self, value: Any) -> Any:
        return self.field.to_arrow(value)

    def from_arrow(self, value: Any) -> Any:
        return self.field.from_arrow(value)

    def to_json(self, value: Any) -> Any:
        return self.field.to_json(value)

    def describe(self) -> str:
        return self.field.describe()

    def tree(self) -> dict[str, Any]:
        return self.field.tree()


class _BinaryCodec(_FieldFormCodec):
    """A serializer writing i32 size, then one binary structure described by a `Field`-like
    layout."""

    __slots__ = ("field", "layout")

    def __init__(self, field: Field, layout: ArrayLayout | MapLayout) -> None:
        self.field = field
        self.layout = layout

    def read(self, buf: memoryview, pos: int) -> tuple[Any, int]:
        start, size = _sized(buf, pos, self.field.type.root.lower())
        return self.layout.read(buf, start, size), start + size

    def write(self, value: Any, out: bytearray) -> None:
        _write_sized(self.layout.write(value), out)


@register(_TYPEUTILS + "ArrayDataSerializer$ArrayDataSerializerSnapshot")
def _array_data(snapshot: SerializerSnapshot, context: Context) -> Codec:
    array = LogicalType("ARRAY", children=(_types(snapshot, "element_type"),))
    field = field_of(array)
    return _BinaryCodec(field, field.layout)  # type: ignore[attr-defined]


@register(_TYPEUTILS + "MapDataSerializer$MapDataSerializerSnapshot")
def _map_data(snapshot: SerializerSnapshot, context: Context) -> Codec:
    key, value = _types(snapshot, "key_type"), _types(snapshot, "value_type")
    field = field_of(LogicalType("MAP", children=(key, value)))
    return _BinaryCodec(field, field.layout)  # type: ignore[attr-defined]


# --- DecimalData, TimestampData, RawValueData ----------------------------------------------------


class DecimalDataCodec(Codec):
    """`DecimalDataSerializer(p, s)`: p ≤ 18 the unscaled i64; else i32 length and the unscaled
    value's big-endian two's-complement bytes. Values are `Decimal`s."""

    __slots__ = ("fixed_length", "precision", "scale")
    type_class = "org.apache.flink.table.data.DecimalData"

    def __init__(self, precision: int, scale: int) -> None:
        self.precision = precision
        self.scale = scale
        self.fixed_length = 8 if precision <= _COMPACT_DECIMAL else None

    def read(self, buf: memoryview, pos: int) -> tuple[Any, int]:
        if self.fixed_length:
            return decimal_of(_LONG.unpack_from(buf, pos)[0], self.scale), pos + 8
        start, size = _sized(buf, pos, "decimal")
        value = int.from_bytes(buf[start : start + size], "big", signed=True)
        return decimal_of(value, self.scale), start + size

    def write(self, value: Any, out: bytearray) -> None:
        unscaled_value = unscaled(value, self.scale)
        if self.fixed_length:
            out += _LONG.pack(unscaled_value)
        else:
            _write_sized(to_unscaled_bytes(unscaled_value), out)

    def arrow_type(self) -> pa.DataType:
        import pyarrow as pa

        return pa.decimal128(self.precision, self.scale)

    def to_json(self, value: Any) -> Any:
        return format(value, "f")

    def describe(self) -> str:
        return f"DECIMAL({self.precision}, {self.scale})"


@register(_TYPEUTILS + "DecimalDataSerializer$DecimalSerializerSnapshot")
def _decimal_data(snapshot: SerializerSnapshot, context: Context) -> Codec:
    return DecimalDataCodec(int(snapshot.param("precision")), int(snapshot.param("scale")))


class TimestampDataCodec(_FieldFormCodec):
    """`TimestampDataSerializer(p)`: i64 epoch millis, and for p > 3 an i32 nanoOfMillisecond.
    The snapshot does not say TIMESTAMP or TIMESTAMP_LTZ: shown as TIMESTAMP (no zone), as Flink
    shows a bare `TimestampData`."""

    __slots__ = ("field", "fixed_length")
    type_class = "org.apache.flink.table.data.TimestampData"
    field: TimestampField

    def __init__(self, precision: int) -> None:
        logical = LogicalType("TIMESTAMP_WITHOUT_TIME_ZONE", precision=precision)
        self.field = TimestampField(logical, zone=False)
        self.fixed_length = 8 if self.field.compact else 12

    def read(self, buf: memoryview, pos: int) -> tuple[Any, int]:
        millis, pos = _LONG.unpack_from(buf, pos)[0], pos + 8
        if self.field.compact:
            return millis, pos
        (nano_of_milli,) = _LENGTH.unpack_from(buf, pos)
        return millis * 1_000_000 + nano_of_milli, pos + 4

    def write(self, value: Any, out: bytearray) -> None:
        if self.field.compact:
            out += _LONG.pack(value)
            return
        millis, nano_of_milli = divmod(value, 1_000_000)
        out += _LONG.pack(millis) + _LENGTH.pack(nano_of_milli)


@register(_TYPEUTILS + "TimestampDataSerializer$TimestampDataSerializerSnapshot")
def _timestamp_data(snapshot: SerializerSnapshot, context: Context) -> Codec:
    return TimestampDataCodec(int(snapshot.param("precision")))


class RawValueDataCodec(Codec):
    """`RawValueDataSerializer`: i32 length and the value as its inner serializer wrote it; kept
    as those bytes (JSON: base64)."""

    __slots__ = ("inner",)
    type_class = "org.apache.flink.table.data.RawValueData"

    def __init__(self, inner: str) -> None:
        self.inner = inner

    def read(self, buf: memoryview, pos: int) -> tuple[Any, int]:
        start, size = _sized(buf, pos, "raw value")
        return bytes(buf[start : start + size]), start + size

    def write(self, value: Any, out: bytearray) -> None:
        _write_sized(bytes(value), out)

    def arrow_type(self) -> pa.DataType:
        import pyarrow as pa

        return pa.binary()

    def to_json(self, value: Any) -> Any:
        return base64_json(value)

    def describe(self) -> str:
        return f"RAW({self.inner})"


@register(_TYPEUTILS + "RawValueDataSerializer$RawValueDataSerializerSnapshot")
def _raw_value_data(snapshot: SerializerSnapshot, context: Context) -> Codec:
    inner = snapshot.nested[0].label if snapshot.nested else "?"
    return RawValueDataCodec(inner)


# --- ExternalSerializer, SortedMapSerializer -----------------------------------------------------


@register(_TYPEUTILS + "ExternalSerializer$ExternalSerializerSnapshot")
def _external(snapshot: SerializerSnapshot, context: Context) -> Codec:
    # It converts to the internal structure and writes what the internal serializer writes; the
    # external object's JSON (Long, String, BigDecimal, Instant…) is the internal one's.
    if len(snapshot.nested) != 1:
        raise FormatError(f"ExternalSerializer with {len(snapshot.nested)} nested serializers")
    return context.codec(snapshot.nested[0])


class SortedMapCodec(MapCodec):
    """`SortedMapSerializer` (rank's `sorted-map`): the layout of `MapSerializer`, entries in
    the comparator's order."""

    __slots__ = ()

    def describe(self) -> str:
        return f"SORTED_MAP<{self.key.describe()}, {self.value.describe()}>"

    def tree(self) -> dict[str, Any]:
        return {**super().tree(), "type": "SORTED_MAP"}


@register(_TYPEUTILS + "SortedMapSerializerSnapshot")
def _sorted_map(snapshot: SerializerSnapshot, context: Context) -> Codec:
    if len(snapshot.nested) != 2:
        raise FormatError(f"SortedMapSerializer with {len(snapshot.nested)} nested serializers")
    return SortedMapCodec(context.codec(snapshot.nested[0]), context.codec(snapshot.nested[1]))
