"""`AvroSerializer`: an Avro datum written through Flink's own encoder, read by the writer
schema the snapshot holds (generic, specific and reflect records alike).

Mirrors `org.apache.flink.formats.avro.typeutils.AvroSerializer` and `AvroSerializerSnapshot`
(v1: utf schema; v2: utf runtime class, utf `Schema.toString(false)`), whose datum writer
writes to `org.apache.flink.formats.avro.utils.DataOutputEncoder` (read back by
`DataInputDecoder`), not to Avro's `BinaryEncoder` (flink-state-values.md §8). No header, no
length prefix; the datum walk is Avro's (`GenericDatumWriter`), the primitives are Java's:

| Avro | bytes |
|---|---|
| null | nothing |
| boolean | one byte, 0 or 1 |
| int, enum index, union index | i32 big-endian |
| long | i64 big-endian |
| float, double | IEEE-754 big-endian |
| bytes, string | i32 length, then the bytes (string: UTF-8) |
| fixed | its `size` bytes |
| record | the fields in schema order |
| array, map | if not empty: the count in unsigned LEB128 (`writeVarLongCount`) and the items |
| | (a map's: string key, value); then always one `00` (`writeArrayEnd`, `writeMapEnd`) |

The schema is parsed and its names resolved by fastavro's `parse_schema`; the walk over the
bytes is ours (fastavro reads only Avro's own binary encoding).

Values: null → None; boolean, int, long, float, double, string, bytes (and fixed) as Python's;
enum → the symbol; record → a dict by field name; array → a list; map → a list of (key, value)
pairs in the written order; a union with one non-null branch (`["null", T]`, `[T]`) → the
branch's value or None; a union of several non-null branches → `Branch(index, value)` (or None
for its null branch), since the value alone does not say which branch wrote it (`int` or
`long`, `bytes` or a fixed). Logical types: decimal (on bytes or fixed) → `Decimal` at its
scale; date → days; time-millis/-micros → the time of day in its unit; (local-)timestamp-
millis/-micros/-nanos → the epoch count in its unit; uuid → its string. A logical type Java's
Avro would ignore (on the wrong type, a decimal whose precision does not fit) is ignored.

JSON (docs/values.md): records as objects by field name, enums by symbol, unions as the
branch's value, maps as objects, bytes and fixed in base64, decimals as strings with all their
scale's digits, dates and times ISO-8601 (timestamps with `Z`, local timestamps without).

Arrow: record → struct of its fields; array → list; map → map<string, …>; enum → string;
fixed → fixed_size_binary; decimal → decimal128 (decimal256 past 38 digits); date → date32;
time → time32(ms)/time64(us); timestamps → timestamp(unit, UTC) or timestamp(unit);
`["null", T]` → T (nullable). A union of several non-null branches → a struct with one field
per non-null branch (named `int`, `string`, `array`, `map` or the full name of a named type),
exactly one set: unlike a dense union it keeps the type of every branch, survives Parquet and
Spark, and reads as the JSON form does.

Exactness: decode then encode gives back the very bytes. Whatever Flink's writer never
produces is refused rather than read leniently: a boolean byte other than 0/1, a count not in
its shortest form, an array or map in more than one block, a decimal on bytes not in
`BigInteger.toByteArray()` form, invalid UTF-8.

Hostile input: a schema nested more than `MAX_SCHEMA_DEPTH` types deep, expanding to more than
`MAX_SCHEMA_TYPES` types (named types reused many times), naming itself (a recursive schema:
it has no Arrow type) or declaring a fixed of more than `MAX_FIXED_SIZE` bytes leaves the state
raw; so does a length, count or index that does not fit the bytes, and more than
`MAX_EMPTY_ITEMS` items that take no bytes (nulls, empty records) in one value.
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from statectl.errors import FormatError
from statectl.formats.serializer_snapshots import SerializerSnapshot
from statectl.formats.values.json_form import (
    base64_json,
    days_json,
    epoch_nanos_json,
    float_json,
    map_json,
    time_of_day_json,
)
from statectl.formats.values.model import Codec, Context, Undecodable, ValueForms, register
from statectl.formats.values.scalars import MAX_DECIMAL_SCALE, decimal_of, unscaled_of

if TYPE_CHECKING:
    import pyarrow as pa

SNAPSHOT = "org.apache.flink.formats.avro.typeutils.AvroSerializerSnapshot"
GENERIC_RECORD = "org.apache.avro.generic.GenericRecord"

MAX_SCHEMA_DEPTH = 64  # nested Avro types, named types expanded
MAX_SCHEMA_TYPES = 20_000  # types in the schema with every named type expanded where used
MAX_JSON_DEPTH = 4 * MAX_SCHEMA_DEPTH  # a record level is three JSON levels
MAX_EMPTY_ITEMS = 1 << 20  # array or map items that take no bytes, in one value
# A fixed holds a hash, a UUID, a decimal (≤ 32 bytes); its Arrow type gives every null row all
# of its bytes, so a declared size of 2 GiB would ask for that much per null before any read.
MAX_FIXED_SIZE = 1 << 12

_I32 = struct.Struct(">i")
_DECIMAL128_DIGITS, _DECIMAL256_DIGITS = 38, 76
_NANOS = {"ms": 1_000_000, "us": 1_000, "ns": 1}
_DAY = {"ms": 86_400_000, "us": 86_400_000_000}
_FORMATS = {"int": ">i", "long": ">q", "float": ">f", "double": ">d"}


@dataclass(frozen=True, slots=True)
class Branch:
    """A value of a union of several non-null types: the branch that wrote it, and its value."""

    index: int
    value: Any


class _Budget:
    """What one value may still hold of items that take no bytes (a count alone cannot tell)."""

    __slots__ = ("empty_items",)

    def __init__(self) -> None:
        self.empty_items = MAX_EMPTY_ITEMS


def _need(buf: memoryview, pos: int, size: int, what: str) -> None:
    if pos + size > len(buf):
        raise FormatError(f"Avro {what} at offset {pos} runs past the end ({len(buf)} bytes)")


# --- the types of a schema -----------------------------------------------------------------------


class AvroType(ValueForms):
    """One Avro type: reads and writes its values, and says what they are."""

    __slots__ = ("height", "min_size", "size", "union_name")
    size: int
    height: int

    def __init__(self, union_name: str, min_size: int, children: tuple[AvroType, ...] = ()) -> None:
        self.union_name = union_name  # how a union tells its branches apart
        self.min_size = min_size  # the fewest bytes a value takes
        self.size = 1 + sum(c.size for c in children)  # types, named ones expanded
        self.height = 1 + max((c.height for c in children), default=0)

    def read(self, buf: memoryview, pos: int, budget: _Budget) -> tuple[Any, int]:
        raise NotImplementedError

    def write(self, value: Any, out: bytearray) -> None:
        raise NotImplementedError


class NullType(AvroType):
    __slots__ = ()

    def __init__(self) -> None:
        super().__init__("null", 0)

    def read(self, buf: memoryview, pos: int, budget: _Budget) -> tuple[Any, int]:
        return None, pos

    def write(self, value: Any, out: bytearray) -> None:
        if value is not None:
            raise ValueError(f"an Avro null holds no value, not {value!r}")

    def arrow_type(self) -> pa.DataType:
        import pyarrow as pa

        return pa.null()

    def describe(self) -> str:
        return "NULL"


class BooleanType(AvroType):
    __slots__ = ()

    def __init__(self) -> None:
        super().__init__("boolean", 1)

    def read(self, buf: memoryview, pos: int, budget: _Budget) -> tuple[Any, int]:
        _need(buf, pos, 1, "boolean")
        if buf[pos] > 1:  # DataOutput.writeBoolean writes 0 or 1 only
            raise FormatError(f"Avro boolean byte {buf[pos]:#04x} at offset {pos}")
        return buf[pos] == 1, pos + 1

    def write(self, value: Any, out: bytearray) -> None:
        out.append(1 if value else 0)

    def arrow_type(self) -> pa.DataType:
        import pyarrow as pa

        return pa.bool_()

    def describe(self) -> str:
        return "BOOLEAN"


class NumberType(AvroType):
    """int, long, float, double: fixed-width big-endian (`DataOutput.writeInt/Long/…`)."""

    __slots__ = ("_arrow", "_json", "label", "layout")

    def __init__(
        self,
        union_name: str,
        label: str,
        arrow: Callable[[], pa.DataType],
        json: Callable[[Any], Any] | None = None,
    ) -> None:
        self.layout = struct.Struct(_FORMATS[union_name])
        super().__init__(union_name, self.layout.size)
        self.label = label
        self._arrow = arrow
        self._json = json

    def read(self, buf: memoryview, pos: int, budget: _Budget) -> tuple[Any, int]:
        _need(buf, pos, self.layout.size, self.union_name)
        return self.layout.unpack_from(buf, pos)[0], pos + self.layout.size

    def write(self, value: Any, out: bytearray) -> None:
        out += self.layout.pack(value)

    def arrow_type(self) -> pa.DataType:
        return self._arrow()

    def to_json(self, value: Any) -> Any:
        return value if self._json is None else self._json(value)

    def describe(self) -> str:
        return self.label


class TimeOfDayType(NumberType):
    """time-millis (int), time-micros (long): Java's `LocalTime` needs a time within a day."""

    __slots__ = ("unit",)

    def __init__(self, base: str, unit: str, label: str, arrow: Callable[[], pa.DataType]) -> None:
        super().__init__(base, label, arrow, lambda t: time_of_day_json(t * _NANOS[unit]))
        self.unit = unit

    def read(self, buf: memoryview, pos: int, budget: _Budget) -> tuple[Any, int]:
        value, end = super().read(buf, pos, budget)
        if not 0 <= value < _DAY[self.unit]:
            raise FormatError(f"Avro {self.label} {value} at offset {pos} is not a time of day")
        return value, end


def _length(buf: memoryview, pos: int, what: str) -> tuple[int, int]:
    """An i32 length that fits the bytes left."""
    _need(buf, pos, 4, what)
    (length,) = _I32.unpack_from(buf, pos)
    if not 0 <= length <= len(buf) - pos - 4:
        raise FormatError(f"Avro {what} of {length} bytes at offset {pos} does not fit")
    return length, pos + 4


class BytesType(AvroType):
    __slots__ = ()

    def __init__(self) -> None:
        super().__init__("bytes", 4)

    def read(self, buf: memoryview, pos: int, budget: _Budget) -> tuple[Any, int]:
        length, pos = _length(buf, pos, "bytes")
        return bytes(buf[pos : pos + length]), pos + length

    def write(self, value: Any, out: bytearray) -> None:
        out += _I32.pack(len(value))
        out += value

    def arrow_type(self) -> pa.DataType:
        import pyarrow as pa

        return pa.binary()

    def to_json(self, value: Any) -> Any:
        return base64_json(value)

    def describe(self) -> str:
        return "BYTES"


class StringType(AvroType):
    """string (and uuid on string): i32 length, UTF-8 (`Utf8.getBytesFor`)."""

    __slots__ = ("label",)

    def __init__(self, label: str = "STRING") -> None:
        super().__init__("string", 4)
        self.label = label

    def read(self, buf: memoryview, pos: int, budget: _Budget) -> tuple[Any, int]:
        return read_string(buf, pos)

    def write(self, value: Any, out: bytearray) -> None:
        write_string(value, out)

    def arrow_type(self) -> pa.DataType:
        import pyarrow as pa

        return pa.string()

    def describe(self) -> str:
        return self.label


def read_string(buf: memoryview, pos: int) -> tuple[str, int]:
    length, start = _length(buf, pos, "string")
    try:
        return str(buf[start : start + length], "utf-8"), start + length
    except UnicodeDecodeError as exc:  # Java would read U+FFFD: not written back the same
        raise FormatError(f"Avro string at offset {pos} is not UTF-8: {exc.reason}") from None


def write_string(value: str, out: bytearray) -> None:
    encoded = value.encode("utf-8")
    out += _I32.pack(len(encoded))
    out += encoded


class FixedType(AvroType):
    __slots__ = ("name", "width")

    def __init__(self, name: str, width: int) -> None:
        super().__init__(name, width)
        self.name = name
        self.width = width

    def read(self, buf: memoryview, pos: int, budget: _Budget) -> tuple[Any, int]:
        _need(buf, pos, self.width, f"fixed {self.name}")
        return bytes(buf[pos : pos + self.width]), pos + self.width

    def write(self, value: Any, out: bytearray) -> None:
        if len(value) != self.width:
            raise ValueError(f"{len(value)} bytes for fixed {self.name} of {self.width}")
        out += value

    def arrow_type(self) -> pa.DataType:
        import pyarrow as pa

        return pa.binary(self.width)

    def to_json(self, value: Any) -> Any:
        return base64_json(value)

    def describe(self) -> str:
        return f"FIXED({self.width}) {self.name}"


class DecimalType(AvroType):
    """decimal on bytes (`BigInteger.toByteArray()`: shortest two's complement) or on fixed
    (two's complement, sign-extended to the size), as `Conversions.DecimalConversion` writes."""

    __slots__ = ("precision", "scale", "storage")

    def __init__(self, storage: BytesType | FixedType, precision: int, scale: int) -> None:
        super().__init__(storage.union_name, storage.min_size)
        self.storage = storage
        self.precision = precision
        self.scale = scale

    def read(self, buf: memoryview, pos: int, budget: _Budget) -> tuple[Any, int]:
        data, end = self.storage.read(buf, pos, budget)
        unscaled = int.from_bytes(data, "big", signed=True)
        if isinstance(self.storage, BytesType) and data != _shortest(unscaled):
            raise FormatError(f"Avro decimal at offset {pos} is not in its shortest form")
        if len(str(abs(unscaled))) > self.precision:
            raise FormatError(f"Avro decimal {unscaled} at offset {pos} exceeds {self.describe()}")
        return decimal_of(unscaled, self.scale), end

    def write(self, value: Any, out: bytearray) -> None:
        unscaled, scale = unscaled_of(Decimal(value))
        if scale != self.scale:  # DecimalConversion refuses to round
            raise ValueError(f"{value} does not have the scale of {self.describe()}")
        if isinstance(self.storage, FixedType):
            self.storage.write(unscaled.to_bytes(self.storage.width, "big", signed=True), out)
        else:
            self.storage.write(_shortest(unscaled), out)

    def arrow_type(self) -> pa.DataType:
        import pyarrow as pa

        if self.precision <= _DECIMAL128_DIGITS:
            return pa.decimal128(self.precision, self.scale)
        if self.precision <= _DECIMAL256_DIGITS:
            return pa.decimal256(self.precision, self.scale)
        return pa.string()

    def to_arrow(self, value: Any) -> Any:
        return value if self.precision <= _DECIMAL256_DIGITS else format(value, "f")

    def from_arrow(self, value: Any) -> Any:
        return Decimal(value)

    def to_json(self, value: Any) -> Any:
        return format(value, "f")

    def describe(self) -> str:
        return f"DECIMAL({self.precision}, {self.scale})"


def _shortest(unscaled: int) -> bytes:
    """`BigInteger.toByteArray()`: the shortest two's complement, at least one byte."""
    magnitude = ~unscaled if unscaled < 0 else unscaled
    return unscaled.to_bytes(magnitude.bit_length() // 8 + 1, "big", signed=True)


class EnumType(AvroType):
    __slots__ = ("index", "name", "symbols")

    def __init__(self, name: str, symbols: list[str]) -> None:
        super().__init__(name, 4)
        self.name = name
        self.symbols = symbols
        self.index = {symbol: i for i, symbol in enumerate(symbols)}

    def read(self, buf: memoryview, pos: int, budget: _Budget) -> tuple[Any, int]:
        _need(buf, pos, 4, f"enum {self.name}")
        (index,) = _I32.unpack_from(buf, pos)
        if not 0 <= index < len(self.symbols):
            raise FormatError(f"enum {self.name} has no symbol {index} (offset {pos})")
        return self.symbols[index], pos + 4

    def write(self, value: Any, out: bytearray) -> None:
        out += _I32.pack(self.index[value])

    def arrow_type(self) -> pa.DataType:
        import pyarrow as pa

        return pa.string()

    def describe(self) -> str:
        return f"ENUM {self.name}"

    def tree(self) -> dict[str, Any]:
        return {"type": "ENUM", "name": self.name, "symbols": list(self.symbols)}


class RecordType(AvroType):
    __slots__ = ("fields", "name")

    def __init__(self, name: str, fields: list[tuple[str, AvroType]]) -> None:
        types = tuple(t for _, t in fields)
        super().__init__(name, 0, types)
        self.min_size = sum(t.min_size for t in types)
        self.name = name
        self.fields = fields

    def read(self, buf: memoryview, pos: int, budget: _Budget) -> tuple[Any, int]:
        value: dict[str, Any] = {}
        for name, field_type in self.fields:
            value[name], pos = field_type.read(buf, pos, budget)
        return value, pos

    def write(self, value: Any, out: bytearray) -> None:
        for name, field_type in self.fields:
            field_type.write(value.get(name), out)

    def arrow_type(self) -> pa.DataType:
        import pyarrow as pa

        return pa.struct([(name, t.arrow_type()) for name, t in self.fields])

    def to_arrow(self, value: Any) -> Any:
        return {n: None if (v := value.get(n)) is None else t.to_arrow(v) for n, t in self.fields}

    def from_arrow(self, value: Any) -> Any:
        return {n: None if (v := value.get(n)) is None else t.from_arrow(v) for n, t in self.fields}

    def to_json(self, value: Any) -> Any:
        return {n: None if (v := value.get(n)) is None else t.to_json(v) for n, t in self.fields}

    def describe(self) -> str:
        inner = ", ".join(f"{name} {t.describe()}" for name, t in self.fields)
        return f"{self.name}{{{inner}}}"

    def tree(self) -> dict[str, Any]:
        fields = [{"name": name, **t.tree()} for name, t in self.fields]
        return {"type": "RECORD", "name": self.name, "fields": fields}


def _read_count(buf: memoryview, pos: int) -> tuple[int, int]:
    """`DataInputDecoder.readVarLongCount`: unsigned LEB128, in its shortest form."""
    start, count, shift = pos, 0, 0
    while True:
        _need(buf, pos, 1, "item count")
        byte = buf[pos]
        pos += 1
        count |= (byte & 0x7F) << shift
        if not byte & 0x80:
            break
        shift += 7
        if shift > 56:  # nine bytes hold every count writeVarLongCount writes
            raise FormatError(f"Avro item count at offset {start} runs on past nine bytes")
    if byte == 0 and pos - start > 1:
        raise FormatError(f"Avro item count at offset {start} is not in its shortest form")
    return count, pos


def _write_count(count: int, out: bytearray) -> None:
    while count > 0x7F:
        out.append(count & 0x7F | 0x80)
        count >>= 7
    out.append(count)


class CollectionType(AvroType):
    """array and map: `setItemCount` (nothing when empty), the items, `writeArrayEnd`'s `00`."""

    __slots__ = ()

    def read(self, buf: memoryview, pos: int, budget: _Budget) -> tuple[Any, int]:
        count, pos = _read_count(buf, pos)
        if count == 0:
            return [], pos
        self._check_fits(count, buf, pos, budget)
        items = []
        for _ in range(count):
            item, pos = self.read_item(buf, pos, budget)
            items.append(item)
        end, after = _read_count(buf, pos)
        if end:  # DataOutputEncoder writes one block; a second one would not come back the same
            raise FormatError(f"Avro {self.union_name} at offset {pos} has a second block")
        return items, after

    def _check_fits(self, count: int, buf: memoryview, pos: int, budget: _Budget) -> None:
        item_size = self.item_min_size()
        if item_size and count > (len(buf) - pos) // item_size:
            raise FormatError(
                f"Avro {self.union_name} of {count} items at offset {pos} does not fit"
            )
        if not item_size:
            budget.empty_items -= count
            if budget.empty_items < 0:
                raise FormatError(f"more than {MAX_EMPTY_ITEMS} Avro items that take no bytes")

    def write(self, value: Any, out: bytearray) -> None:
        if value:
            _write_count(len(value), out)
            for item in value:
                self.write_item(item, out)
        out.append(0)

    def item_min_size(self) -> int:
        raise NotImplementedError

    def read_item(self, buf: memoryview, pos: int, budget: _Budget) -> tuple[Any, int]:
        raise NotImplementedError

    def write_item(self, item: Any, out: bytearray) -> None:
        raise NotImplementedError


class ArrayType(CollectionType):
    __slots__ = ("items",)

    def __init__(self, items: AvroType) -> None:
        super().__init__("array", 1, (items,))
        self.items = items

    def item_min_size(self) -> int:
        return self.items.min_size

    def read_item(self, buf: memoryview, pos: int, budget: _Budget) -> tuple[Any, int]:
        return self.items.read(buf, pos, budget)

    def write_item(self, item: Any, out: bytearray) -> None:
        self.items.write(item, out)

    def arrow_type(self) -> pa.DataType:
        import pyarrow as pa

        return pa.list_(self.items.arrow_type())

    def to_arrow(self, value: Any) -> Any:
        return [None if v is None else self.items.to_arrow(v) for v in value]

    def from_arrow(self, value: Any) -> Any:
        return [None if v is None else self.items.from_arrow(v) for v in value]

    def to_json(self, value: Any) -> Any:
        return [None if v is None else self.items.to_json(v) for v in value]

    def describe(self) -> str:
        return f"LIST<{self.items.describe()}>"

    def tree(self) -> dict[str, Any]:
        return {"type": "LIST", "element": self.items.tree()}


class MapType(CollectionType):
    """Values are (key, value) pairs in the written order (keys may repeat in the bytes)."""

    __slots__ = ("values",)

    def __init__(self, values: AvroType) -> None:
        super().__init__("map", 1, (values,))
        self.values = values

    def item_min_size(self) -> int:
        return 4 + self.values.min_size

    def read_item(self, buf: memoryview, pos: int, budget: _Budget) -> tuple[Any, int]:
        key, pos = read_string(buf, pos)
        value, pos = self.values.read(buf, pos, budget)
        return (key, value), pos

    def write_item(self, item: Any, out: bytearray) -> None:
        key, value = item
        write_string(key, out)
        self.values.write(value, out)

    def arrow_type(self) -> pa.DataType:
        import pyarrow as pa

        return pa.map_(pa.string(), self.values.arrow_type())

    def to_arrow(self, value: Any) -> Any:
        return [(k, None if v is None else self.values.to_arrow(v)) for k, v in value]

    def from_arrow(self, value: Any) -> Any:
        return [(k, None if v is None else self.values.from_arrow(v)) for k, v in value]

    def to_json(self, value: Any) -> Any:
        return map_json([(k, None if v is None else self.values.to_json(v)) for k, v in value])

    def describe(self) -> str:
        return f"MAP<STRING, {self.values.describe()}>"

    def tree(self) -> dict[str, Any]:
        return {"type": "MAP", "key": {"type": "STRING"}, "value": self.values.tree()}


class UnionType(AvroType):
    """i32 branch index, then the branch. With at most one non-null branch the value is that
    branch's (or None); with more, a `Branch` (or None for the null branch)."""

    __slots__ = ("branches", "null_index", "plain")

    def __init__(self, branches: list[AvroType]) -> None:
        super().__init__("union", 4, tuple(branches))
        self.branches = branches
        nulls = [i for i, b in enumerate(branches) if isinstance(b, NullType)]
        self.null_index = nulls[0] if nulls else None
        self.plain = len(branches) - len(nulls) <= 1

    def read(self, buf: memoryview, pos: int, budget: _Budget) -> tuple[Any, int]:
        _need(buf, pos, 4, "union index")
        (index,) = _I32.unpack_from(buf, pos)
        if not 0 <= index < len(self.branches):
            raise FormatError(f"Avro union has no branch {index} (offset {pos})")
        value, end = self.branches[index].read(buf, pos + 4, budget)
        if self.plain or index == self.null_index:
            return value, end
        return Branch(index, value), end

    def write(self, value: Any, out: bytearray) -> None:
        index = self._index_of(value)
        out += _I32.pack(index)
        self.branches[index].write(value.value if isinstance(value, Branch) else value, out)

    def _index_of(self, value: Any) -> int:
        if value is None:
            if self.null_index is None:
                raise ValueError(f"null for {self.describe()}, which has no null branch")
            return self.null_index
        if isinstance(value, Branch):
            return value.index
        if not self.plain:
            raise ValueError(f"a value of {self.describe()} must say its Branch")
        return next(i for i in range(len(self.branches)) if i != self.null_index)

    def _value_branches(self) -> list[AvroType]:
        return [b for i, b in enumerate(self.branches) if i != self.null_index]

    def arrow_type(self) -> pa.DataType:
        import pyarrow as pa

        if self.plain:
            inner = self._value_branches()
            return inner[0].arrow_type() if inner else pa.null()
        return pa.struct([(b.union_name, b.arrow_type()) for b in self._value_branches()])

    def to_arrow(self, value: Any) -> Any:
        if self.plain:
            return self._value_branches()[0].to_arrow(value)
        branch = self.branches[value.index]
        return {branch.union_name: branch.to_arrow(value.value)}

    def from_arrow(self, value: Any) -> Any:
        """A plain union's one branch; else the `Branch` whose field is set."""
        if self.plain:
            return self._value_branches()[0].from_arrow(value)
        for index, branch in enumerate(self.branches):
            if index != self.null_index and value.get(branch.union_name) is not None:
                return Branch(index, branch.from_arrow(value[branch.union_name]))
        raise FormatError(f"a value of {self.describe()} with no branch set")

    def to_json(self, value: Any) -> Any:
        if self.plain:
            return self._value_branches()[0].to_json(value)
        return self.branches[value.index].to_json(value.value)

    def describe(self) -> str:
        if self.plain and self._value_branches():
            return self._value_branches()[0].describe()
        return "UNION<" + ", ".join(b.describe() for b in self.branches) + ">"

    def tree(self) -> dict[str, Any]:
        return {"type": "UNION", "branches": [b.tree() for b in self.branches]}


# --- from the schema's JSON to the types ---------------------------------------------------------


def _pa(name: str, *args: Any) -> Callable[[], pa.DataType]:
    def build() -> pa.DataType:
        import pyarrow as pa

        return getattr(pa, name)(*args)

    return build


def _primitive(name: str) -> AvroType:
    if name == "null":
        return NullType()
    if name == "boolean":
        return BooleanType()
    if name == "bytes":
        return BytesType()
    if name == "string":
        return StringType()
    number = _NUMBERS.get(name)
    if number is None:
        raise Undecodable(f"unknown Avro type {name!r}")
    return NumberType(name, *number)


_NUMBERS: dict[str, tuple[str, Callable[[], pa.DataType], Callable[[Any], Any] | None]] = {
    "int": ("INT", _pa("int32"), None),
    "long": ("BIGINT", _pa("int64"), None),
    "float": ("FLOAT", _pa("float32"), float_json),
    "double": ("DOUBLE", _pa("float64"), float_json),
}


def _timestamp(
    unit: str, zone: bool
) -> tuple[str, Callable[[], pa.DataType], Callable[[Any], Any]]:
    digits = {"ms": 3, "us": 6, "ns": 9}[unit]
    label = f"TIMESTAMP_LTZ({digits})" if zone else f"TIMESTAMP({digits})"
    arrow = _pa("timestamp", unit, "UTC") if zone else _pa("timestamp", unit)
    return label, arrow, lambda t: epoch_nanos_json(t * _NANOS[unit], zone)


# (logicalType, base type) → the label, Arrow type and JSON form of the number
_TEMPORAL = {
    ("date", "int"): ("DATE", _pa("date32"), days_json),
    ("timestamp-millis", "long"): _timestamp("ms", zone=True),
    ("timestamp-micros", "long"): _timestamp("us", zone=True),
    ("timestamp-nanos", "long"): _timestamp("ns", zone=True),
    ("local-timestamp-millis", "long"): _timestamp("ms", zone=False),
    ("local-timestamp-micros", "long"): _timestamp("us", zone=False),
    ("local-timestamp-nanos", "long"): _timestamp("ns", zone=False),
}


def _logical(schema: dict[str, Any], base: str) -> AvroType | None:
    """The logical type `schema` annotates `base` with; None where Java's Avro ignores it."""
    logical = str(schema.get("logicalType"))
    if (logical, base) in _TEMPORAL:
        return NumberType(base, *_TEMPORAL[logical, base])
    if (logical, base) == ("time-millis", "int"):
        return TimeOfDayType(base, "ms", "TIME(3)", _pa("time32", "ms"))
    if (logical, base) == ("time-micros", "long"):
        return TimeOfDayType(base, "us", "TIME(6)", _pa("time64", "us"))
    if (logical, base) == ("uuid", "string"):
        return StringType("UUID")
    if (logical, base) == ("decimal", "bytes"):
        return _decimal(schema, BytesType(), None)
    return None


def _decimal(
    schema: dict[str, Any], storage: BytesType | FixedType, size: int | None
) -> DecimalType | None:
    """`LogicalTypes.Decimal.validate`: 0 < precision (fitting a fixed), 0 ≤ scale ≤ precision."""
    precision, scale = schema.get("precision"), schema.get("scale", 0)
    if not (isinstance(precision, int) and isinstance(scale, int)):
        return None
    if scale > MAX_DECIMAL_SCALE:  # its values' plain strings would hold that many digits
        raise Undecodable(f"Avro decimal of scale {scale} (statectl reads {MAX_DECIMAL_SCALE})")
    # Java's bound, computed without the 2^(8 size) it stands for
    fits = size is None or (size > 0 and math.floor(math.log10(2) * (8 * size - 1)) >= precision)
    if precision > 0 and 0 <= scale <= precision and fits:
        return DecimalType(storage, precision, scale)
    return None


class SchemaBuilder:
    """Types from fastavro's parsed schema; a named type is built once and shared where used."""

    def __init__(self) -> None:
        self.named: dict[str, AvroType] = {}
        self.building: set[str] = set()

    def build(self, schema: Any) -> AvroType:
        built = self._build(schema)
        if built.height > MAX_SCHEMA_DEPTH:
            raise Undecodable(f"Avro schema nested more than {MAX_SCHEMA_DEPTH} types deep")
        if built.size > MAX_SCHEMA_TYPES:
            raise Undecodable(f"Avro schema of more than {MAX_SCHEMA_TYPES} types")
        return built

    def _build(self, schema: Any) -> AvroType:
        if isinstance(schema, str):
            return self._by_name(schema)
        if isinstance(schema, list):
            return self._union(schema)
        if not isinstance(schema, dict):
            raise Undecodable(f"Avro schema element {type(schema).__name__} is not a type")
        kind = schema.get("type")
        if not isinstance(kind, str):  # {"type": {...}}: the inner type, as Java's parser reads it
            return self.build(kind)
        if kind in ("record", "error"):
            return self._record(schema)
        if kind == "enum":
            return self._define(schema["name"], EnumType(schema["name"], list(schema["symbols"])))
        if kind == "fixed":
            return self._fixed(schema)
        if kind == "array":
            return ArrayType(self.build(schema["items"]))
        if kind == "map":
            return MapType(self.build(schema["values"]))
        return _logical(schema, kind) or self._by_name(kind)

    def _by_name(self, name: str) -> AvroType:
        if name in self.building:
            raise Undecodable(f"recursive Avro schema: {name} holds itself (no Arrow type)")
        named = self.named.get(name)
        return named if named is not None else _primitive(name)

    def _define(self, name: str, built: AvroType) -> AvroType:
        self.named[name] = built
        return built

    def _record(self, schema: dict[str, Any]) -> AvroType:
        name = schema["name"]
        self.building.add(name)
        fields = [(f["name"], self.build(f["type"])) for f in schema["fields"]]
        self.building.discard(name)
        if len({n for n, _ in fields}) != len(fields):
            raise Undecodable(f"Avro record {name} names a field twice")
        return self._define(name, RecordType(name, fields))

    def _fixed(self, schema: dict[str, Any]) -> AvroType:
        size = int(schema["size"])
        if not 0 <= size <= MAX_FIXED_SIZE:
            raise Undecodable(
                f"Avro fixed {schema['name']} of {size} bytes (statectl reads 0 to "
                f"{MAX_FIXED_SIZE})"
            )
        fixed = FixedType(schema["name"], size)
        decimal = (
            _decimal(schema, fixed, fixed.width) if schema.get("logicalType") == "decimal" else None
        )
        return self._define(schema["name"], decimal or fixed)

    def _union(self, schema: list[Any]) -> AvroType:
        branches = [self.build(branch) for branch in schema]
        names = [b.union_name for b in branches]
        if len(set(names)) != len(names) or "union" in names:
            raise Undecodable(f"Avro union {names} repeats a type or holds a union")
        return UnionType(branches)


def _json_depth(value: Any) -> int:
    """How deep JSON nests (walked without recursion)."""
    deepest, pending = 0, [(value, 1)]
    while pending:
        node, depth = pending.pop()
        deepest = max(deepest, depth)
        if deepest > MAX_JSON_DEPTH:
            break
        children = (
            node.values() if isinstance(node, dict) else node if isinstance(node, list) else ()
        )
        pending += [(child, depth + 1) for child in children]
    return deepest


def parse_writer_schema(text: str) -> AvroType:
    """The types of a writer schema (`Schema.toString(false)`); `Undecodable` when unusable."""
    import fastavro

    too_deep = Undecodable(f"Avro schema nested more than {MAX_JSON_DEPTH} JSON levels deep")
    try:
        document = json.loads(text)
    except RecursionError:
        raise too_deep from None
    except ValueError as exc:
        raise Undecodable(f"Avro schema is not JSON: {exc}") from None
    if _json_depth(document) > MAX_JSON_DEPTH:  # before fastavro's recursive parser sees it
        raise too_deep
    try:
        parsed = fastavro.parse_schema(document)
    except Exception as exc:  # a third-party parser on hostile text: any failure means unusable
        raise Undecodable(f"Avro schema not understood: {exc}") from None
    try:
        return SchemaBuilder().build(parsed)
    except (KeyError, TypeError, ValueError) as exc:
        raise Undecodable(f"Avro schema not understood: {exc!r}") from None


# --- the codec -----------------------------------------------------------------------------------


class AvroCodec(Codec):
    __slots__ = ("root", "type_class")

    def __init__(self, type_class: str, root: AvroType) -> None:
        self.type_class = type_class
        self.root = root

    def read(self, buf: memoryview, pos: int) -> tuple[Any, int]:
        return self.root.read(buf, pos, _Budget())

    def write(self, value: Any, out: bytearray) -> None:
        self.root.write(value, out)

    def arrow_type(self) -> pa.DataType:
        return self.root.arrow_type()

    def to_arrow(self, value: Any) -> Any:
        return self.root.to_arrow(value)

    def from_arrow(self, value: Any) -> Any:
        return self.root.from_arrow(value)

    def to_json(self, value: Any) -> Any:
        return self.root.to_json(value)

    def describe(self) -> str:
        return f"AVRO {self.root.describe()}"

    def tree(self) -> dict[str, Any]:
        return {"type": "AVRO", "class": self.type_class, "schema": self.root.tree()}


@register(SNAPSHOT)
def _avro(snapshot: SerializerSnapshot, context: Context) -> Codec:
    schema = snapshot.param("schema")
    if not isinstance(schema, str):
        raise Undecodable("Avro snapshot without a schema")
    root = parse_writer_schema(schema)
    # v1 snapshots name no class: Flink then looks for the schema's own name
    default = root.name if isinstance(root, RecordType) else GENERIC_RECORD
    return AvroCodec(snapshot.type_name or default, root)
