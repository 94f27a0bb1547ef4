"""SQL structures: BinaryRowData, BinaryArrayData, BinaryMapData, nested ROW and RAW, by their
LogicalTypes.

Mirrors `org.apache.flink.table.data.binary.{BinaryRowData, BinaryArrayData, BinaryMapData,
NestedRowData, BinaryRawValueData}` for reading and `org.apache.flink.table.data.writer.
{BinaryRowWriter, BinaryArrayWriter}` as `RowDataSerializer.toBinaryRow`,
`ArrayDataSerializer.toBinaryArray` and `MapDataSerializer.toBinaryMap` drive them, for writing
(flink-state-values.md §7.2–7.5): fields in order, a null field's slot zero with no var-part
space, var chunks padded to 8 bytes. ARRAY, MAP, MULTISET, ROW and RAW are always a var chunk
(word = offset << 32 | size, the offset relative to the enclosing row or array); the scalars are
in `binary_fields.py`. A row is a dict (its RowKind under `__row_kind`), a map a list of
(key, value) pairs, RAW its serializer's bytes.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from statectl.errors import FormatError
from statectl.formats.logical_types import LogicalType
from statectl.formats.values.binary_fields import (
    WORD,
    Field,
    FixedField,
    append_chunk,
    pack_word,
    round_up_8,
    scalar_field,
)
from statectl.formats.values.json_form import base64_json, map_json
from statectl.formats.values.model import Undecodable

if TYPE_CHECKING:
    import pyarrow as pa

ROW_KIND = "__row_kind"  # as RowCodec: 0 +I, 1 -U, 2 +U, 3 -D
_I32 = struct.Struct("<i")


# --- var-part structures -------------------------------------------------------------------------


class ChunkField(Field):
    """A type always kept in a var chunk (word = offset << 32 | size): ARRAY, MAP, ROW, RAW."""

    __slots__ = ()

    def read(self, buf: memoryview, base: int, at: int) -> Any:
        word = WORD.unpack_from(buf, at)[0]
        start, size = base + (word >> 32), word & 0xFFFFFFFF
        if start + size > len(buf):
            raise FormatError(f"{self.describe()} of {size} bytes at {start} runs past the end")
        return self.read_chunk(buf, start, size)

    def write(self, value: Any, out: bytearray, at: int) -> None:
        data = self.write_chunk(value)
        pack_word(out, at, append_chunk(out, data), len(data))

    def read_chunk(self, buf: memoryview, start: int, size: int) -> Any:
        raise NotImplementedError

    def write_chunk(self, value: Any) -> bytes | bytearray:
        raise NotImplementedError


class RawField(ChunkField):
    """RAW: the value as its own serializer wrote it (`BinaryRawValueData`), kept as bytes."""

    __slots__ = ()

    def read_chunk(self, buf: memoryview, start: int, size: int) -> Any:
        return bytes(buf[start : start + size])

    def write_chunk(self, value: Any) -> bytes | bytearray:
        return bytes(value)

    def arrow_type(self) -> pa.DataType:
        import pyarrow as pa

        return pa.binary()

    def to_json(self, value: Any) -> Any:
        return base64_json(value)


class RowLayout:
    """BinaryRowData: a header word (RowKind in byte 0, null bit i + 8 for field i, LSB first),
    an 8-byte slot per field, then the var part in field order."""

    __slots__ = ("fields", "fixed_size", "header", "names")

    def __init__(self, names: list[str], fields: list[Field]) -> None:
        self.names = names
        self.fields = fields
        self.header = (len(fields) + 63 + 8) // 64 * 8
        self.fixed_size = self.header + 8 * len(fields)

    def read(self, buf: memoryview, start: int, size: int) -> dict[str, Any]:
        if size < self.fixed_size or start + size > len(buf):
            raise FormatError(
                f"row of {size} bytes at offset {start} is shorter than its fixed part "
                f"({self.fixed_size} bytes for {len(self.fields)} fields)"
            )
        bits = int.from_bytes(buf[start : start + self.header], "little")
        row: dict[str, Any] = {ROW_KIND: bits & 0xFF}
        at = start + self.header
        for i, (name, field) in enumerate(zip(self.names, self.fields, strict=True)):
            row[name] = None if (bits >> (i + 8)) & 1 else field.read(buf, start, at + 8 * i)
        return row

    def write(self, value: Any) -> bytearray:
        out = bytearray(self.fixed_size)
        bits = int(value.get(ROW_KIND, 0))
        for i, (name, field) in enumerate(zip(self.names, self.fields, strict=True)):
            item = value.get(name)
            if item is None:
                bits |= 1 << (i + 8)
            else:
                field.write(item, out, self.header + 8 * i)
        out[: self.header] = bits.to_bytes(self.header, "little")
        return out

    def arrow_fields(self) -> list[tuple[str, pa.DataType]]:
        return [(n, f.arrow_type()) for n, f in zip(self.names, self.fields, strict=True)]

    def to_arrow(self, value: Any) -> dict[str, Any]:
        return {
            n: None if (v := value.get(n)) is None else f.to_arrow(v)
            for n, f in zip(self.names, self.fields, strict=True)
        }

    def from_arrow(self, value: Any) -> dict[str, Any]:
        """A row as `read` gives it: its RowKind (+I unless the Arrow struct says) and fields."""
        row: dict[str, Any] = {ROW_KIND: value.get(ROW_KIND) or 0}
        for name, field in zip(self.names, self.fields, strict=True):
            item = value.get(name)
            row[name] = None if item is None else field.from_arrow(item)
        return row

    def to_json(self, value: Any) -> dict[str, Any]:
        return {
            n: None if (v := value.get(n)) is None else f.to_json(v)
            for n, f in zip(self.names, self.fields, strict=True)
        }

    def describe(self) -> str:
        inner = ", ".join(
            f"{n} {f.describe()}" for n, f in zip(self.names, self.fields, strict=True)
        )
        return f"ROW<{inner}>"

    def tree(self) -> list[dict[str, Any]]:
        return [{"name": n, **f.tree()} for n, f in zip(self.names, self.fields, strict=True)]


class RowField(ChunkField):
    """A nested ROW or structured type: a complete BinaryRowData of its own (`NestedRowData`),
    its fields by name."""

    __slots__ = ("layout",)

    def __init__(self, logical: LogicalType) -> None:
        super().__init__(logical)
        fields = [field_of(child) for child in logical.children]
        self.layout = RowLayout(list(logical.field_names), fields)

    def read_chunk(self, buf: memoryview, start: int, size: int) -> Any:
        return self.layout.read(buf, start, size)

    def write_chunk(self, value: Any) -> bytes | bytearray:
        return self.layout.write(value)

    def arrow_type(self) -> pa.DataType:
        import pyarrow as pa

        fields = self.layout.arrow_fields()
        return pa.struct(fields) if fields else pa.null()  # Parquet has no empty struct

    def to_arrow(self, value: Any) -> Any:
        return self.layout.to_arrow(value) if self.layout.fields else None

    def from_arrow(self, value: Any) -> Any:
        return self.layout.from_arrow(value)

    def to_json(self, value: Any) -> Any:
        return self.layout.to_json(value)

    def tree(self) -> dict[str, Any]:
        return {"type": self.type.root, "fields": self.layout.tree()}


class ArrayLayout:
    """BinaryArrayData: LE32 count, null bits in 4-byte words, the elements packed at their own
    width, then the var part; the whole padded to 8 bytes."""

    __slots__ = ("_bulk", "element")

    def __init__(self, element: Field) -> None:
        self.element = element
        # Plain numbers unpack in one call: their slot value is the decoded value.
        self._bulk = f"<{{}}{element.code}" if isinstance(element, FixedField) else None

    def read(self, buf: memoryview, start: int, size: int) -> list[Any]:
        if size < _I32.size or start + size > len(buf):
            raise FormatError(f"array of {size} bytes at offset {start} is too short")
        count = _I32.unpack_from(buf, start)[0]
        header = 4 + (count + 31) // 32 * 4
        width = self.element.width
        if count < 0 or header + count * width > size:
            raise FormatError(f"array of {count} elements does not fit its {size} bytes")
        nulls = int.from_bytes(buf[start + 4 : start + header], "little")
        at = start + header
        if self._bulk is None:  # a null element's zero slot points nowhere: not read
            read = self.element.read
            return [
                None if (nulls >> i) & 1 else read(buf, start, at + i * width) for i in range(count)
            ]
        items = list(struct.unpack_from(self._bulk.format(count), buf, at))
        while nulls:
            low = nulls & -nulls
            items[low.bit_length() - 1] = None
            nulls ^= low
        return items

    def write(self, values: list[Any]) -> bytearray:
        count = len(values)
        header = 4 + (count + 31) // 32 * 4
        width = self.element.width
        out = bytearray(round_up_8(header + count * width))
        _I32.pack_into(out, 0, count)
        nulls = 0
        for i, item in enumerate(values):
            if item is None:
                nulls |= 1 << i
            else:
                self.element.write(item, out, header + i * width)
        out[4:header] = nulls.to_bytes(header - 4, "little")
        return out


class ArrayField(ChunkField):
    """ARRAY: a BinaryArrayData chunk; values are lists."""

    __slots__ = ("layout",)

    def __init__(self, logical: LogicalType) -> None:
        super().__init__(logical)
        self.layout = ArrayLayout(field_of(logical.children[0]))

    def read_chunk(self, buf: memoryview, start: int, size: int) -> Any:
        return self.layout.read(buf, start, size)

    def write_chunk(self, value: Any) -> bytes | bytearray:
        return self.layout.write(value)

    def arrow_type(self) -> pa.DataType:
        import pyarrow as pa

        return pa.list_(self.layout.element.arrow_type())

    def to_arrow(self, value: Any) -> Any:
        convert = self.layout.element.to_arrow
        return [None if v is None else convert(v) for v in value]

    def from_arrow(self, value: Any) -> Any:
        convert = self.layout.element.from_arrow
        return [None if v is None else convert(v) for v in value]

    def to_json(self, value: Any) -> Any:
        convert = self.layout.element.to_json
        return [None if v is None else convert(v) for v in value]

    def tree(self) -> dict[str, Any]:
        return {"type": "ARRAY", "element": self.layout.element.tree()}


_MULTISET_COUNT = LogicalType("INTEGER", nullable=False)


class MapLayout:
    """BinaryMapData: LE32 size of the key array, the key array, the value array."""

    __slots__ = ("keys", "values")

    def __init__(self, key: Field, value: Field) -> None:
        self.keys = ArrayLayout(key)
        self.values = ArrayLayout(value)

    def read(self, buf: memoryview, start: int, size: int) -> list[tuple[Any, Any]]:
        if size < _I32.size or start + size > len(buf):
            raise FormatError(f"map of {size} bytes at offset {start} is too short")
        key_size = _I32.unpack_from(buf, start)[0]
        if not 0 <= key_size <= size - 4:
            raise FormatError(f"map key array of {key_size} bytes does not fit {size}")
        keys = self.keys.read(buf, start + 4, key_size)
        values = self.values.read(buf, start + 4 + key_size, size - 4 - key_size)
        if len(keys) != len(values):
            raise FormatError(f"map of {len(keys)} keys and {len(values)} values")
        return list(zip(keys, values, strict=True))

    def write(self, pairs: list[tuple[Any, Any]]) -> bytearray:
        keys = self.keys.write([k for k, _ in pairs])
        values = self.values.write([v for _, v in pairs])
        return bytearray(_I32.pack(len(keys))) + keys + values


class MapField(ChunkField):
    """MAP, and MULTISET as MAP<element, INT NOT NULL> (the count): lists of pairs."""

    __slots__ = ("layout",)

    def __init__(self, logical: LogicalType) -> None:
        super().__init__(logical)
        if logical.root == "MULTISET":
            key, value = logical.children[0], _MULTISET_COUNT
        else:
            key, value = logical.children
        self.layout = MapLayout(field_of(key), field_of(value))

    def read_chunk(self, buf: memoryview, start: int, size: int) -> Any:
        return self.layout.read(buf, start, size)

    def write_chunk(self, value: Any) -> bytes | bytearray:
        return self.layout.write(value)

    def arrow_type(self) -> pa.DataType:
        import pyarrow as pa

        key, value = self.layout.keys.element, self.layout.values.element
        return pa.map_(key.arrow_type(), value.arrow_type())

    def to_arrow(self, value: Any) -> Any:
        key, item = self.layout.keys.element.to_arrow, self.layout.values.element.to_arrow
        return [(key(k), None if v is None else item(v)) for k, v in value]

    def from_arrow(self, value: Any) -> Any:
        key, item = self.layout.keys.element.from_arrow, self.layout.values.element.from_arrow
        return [(None if k is None else key(k), None if v is None else item(v)) for k, v in value]

    def to_json(self, value: Any) -> Any:
        key, item = self.layout.keys.element.to_json, self.layout.values.element.to_json
        return map_json(
            [(None if k is None else key(k), None if v is None else item(v)) for k, v in value]
        )

    def tree(self) -> dict[str, Any]:
        key, value = self.layout.keys.element, self.layout.values.element
        return {"type": self.type.root, "key": key.tree(), "value": value.tree()}


# --- LogicalType → Field -------------------------------------------------------------------------

_CHUNKS: dict[str, Callable[[LogicalType], Field]] = {
    "ARRAY": ArrayField,
    "MAP": MapField,
    "MULTISET": MapField,
    "ROW": RowField,
    "STRUCTURED_TYPE": RowField,
    "RAW": RawField,
}


def field_of(logical: LogicalType) -> Field:
    """How a value of this SQL type is laid out; `Undecodable` for types statectl does not
    read (TIMESTAMP WITH TIME ZONE, SYMBOL, VARIANT, BITMAP, …)."""
    field = scalar_field(logical)
    if field is not None:
        return field
    if logical.root in _CHUNKS:
        return _CHUNKS[logical.root](logical)
    raise Undecodable(f"SQL type {logical.describe()} is not read")
