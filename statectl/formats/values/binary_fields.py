"""How each SQL scalar sits in a BinaryRowData slot or a BinaryArrayData element.

Mirrors the fixed-part reads of `org.apache.flink.table.data.binary.{BinaryRowData,
BinaryArrayData, BinarySegmentUtils}` and the writes of `org.apache.flink.table.data.writer.
AbstractBinaryWriter` (flink-state-values.md §7.2, §7.3). Numbers are little-endian (the JVM's
native order on every platform Flink runs on).

A `Field` says how one LogicalType sits in an 8-byte row slot or a packed array element: numbers,
DATE, TIME and compact DECIMAL/TIMESTAMP in the slot itself; strings and binaries inline when at
most 7 bytes, else an offset-and-length word pointing into the variable part; non-compact DECIMAL
and TIMESTAMP a word and a var chunk. The structures (ARRAY, MAP, ROW, RAW) are in
`binary_row.py`. Values: DECIMAL a `Decimal`, DATE days, TIME millis of day, TIMESTAMP(p ≤ 3)
epoch millis, TIMESTAMP(p > 3) epoch nanos, BINARY bytes.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from decimal import ROUND_HALF_UP, Decimal, localcontext
from typing import TYPE_CHECKING, Any

from statectl.errors import FormatError
from statectl.formats.logical_types import LogicalType
from statectl.formats.values.json_form import (
    base64_json,
    days_json,
    epoch_nanos_json,
    float_json,
    time_of_day_json,
)
from statectl.formats.values.model import Undecodable, ValueForms
from statectl.formats.values.scalars import decimal_of, string_to_arrow

if TYPE_CHECKING:
    import pyarrow as pa

WORD = struct.Struct("<Q")
_INLINE_MAX = 7  # AbstractBinaryWriter.MAX_FIX_PART_DATA_SIZE
_INLINE_MARK = 1 << 63
_COMPACT_DECIMAL = 18  # DecimalData.MAX_COMPACT_PRECISION
_COMPACT_TIMESTAMP = 3  # TimestampData.isCompact: precision ≤ 3
_DECIMAL_RESERVED = 16  # the var-part bytes a non-compact decimal always takes
_NANOS_PER_MILLI = 1_000_000
_MICROS = 6  # the largest precision of a microsecond timestamp
_DECIMAL128_DIGITS = 38
_INT64 = range(-(1 << 63), 1 << 63)


def round_up_8(size: int) -> int:
    return (size + 7) & ~7


def append_chunk(out: bytearray, data: bytes | bytearray | memoryview) -> int:
    """Append a var-part chunk zero-padded to 8 bytes; its offset in `out`."""
    offset = len(out)
    out += data
    out += bytes(round_up_8(len(data)) - len(data))
    return offset


def pack_word(out: bytearray, at: int, offset: int, size: int) -> None:
    WORD.pack_into(out, at, (offset << 32) | size)


def _chunk(buf: memoryview, base: int, word: int) -> memoryview:
    """The var-part bytes an offset-and-size word points at (offsets are relative to `base`)."""
    start, size = base + (word >> 32), word & 0xFFFFFFFF
    if start + size > len(buf):
        raise FormatError(f"{size} bytes at offset {start} run past the end of the value")
    return buf[start : start + size]


class Field(ValueForms):
    """One SQL type as it sits in a row slot (8 bytes) or an array element (`width` bytes)."""

    __slots__ = ("type",)
    width = 8

    def __init__(self, logical: LogicalType) -> None:
        self.type = logical

    def read(self, buf: memoryview, base: int, at: int) -> Any:
        """The value in the slot at `at` of the row or array starting at `base`."""
        raise NotImplementedError

    def write(self, value: Any, out: bytearray, at: int) -> None:
        """Fill the slot at `at` of `out` (a row or array), appending var chunks to `out`."""
        raise NotImplementedError

    def describe(self) -> str:
        return self.type.describe()


# --- scalars in the slot -------------------------------------------------------------------------


class FixedField(Field):
    """A scalar stored in the slot itself (little-endian, only its own bytes of the slot)."""

    __slots__ = ("_arrow", "_json", "_struct", "_to_arrow", "code")

    def __init__(
        self,
        logical: LogicalType,
        code: str,
        arrow: Callable[[], pa.DataType],
        json: Callable[[Any], Any] | None = None,
        to_arrow: Callable[[Any], Any] | None = None,
    ) -> None:
        super().__init__(logical)
        self.code = code
        self._struct = struct.Struct("<" + code)
        self._arrow = arrow
        self._json = json
        self._to_arrow = to_arrow

    @property
    def width(self) -> int:  # type: ignore[override]
        return self._struct.size

    def read(self, buf: memoryview, base: int, at: int) -> Any:
        return self._struct.unpack_from(buf, at)[0]

    def write(self, value: Any, out: bytearray, at: int) -> None:
        self._struct.pack_into(out, at, value)

    def arrow_type(self) -> pa.DataType:
        return self._arrow()

    def to_arrow(self, value: Any) -> Any:
        return value if self._to_arrow is None else self._to_arrow(value)

    def to_json(self, value: Any) -> Any:
        return value if self._json is None else self._json(value)


def _arrow(name: str, *args: Any) -> Callable[[], pa.DataType]:
    def build() -> pa.DataType:
        import pyarrow as pa

        return getattr(pa, name)(*args)

    return build


def _bool_json(value: Any) -> bool:
    return bool(value)


class CompactDecimalField(Field):
    """DECIMAL(p ≤ 18): the unscaled value as a long in the slot."""

    __slots__ = ("precision", "scale")

    def __init__(self, logical: LogicalType) -> None:
        super().__init__(logical)
        self.precision = logical.precision or 10
        self.scale = logical.scale or 0

    def read(self, buf: memoryview, base: int, at: int) -> Any:
        return decimal_of(struct.unpack_from("<q", buf, at)[0], self.scale)

    def write(self, value: Any, out: bytearray, at: int) -> None:
        struct.pack_into("<q", out, at, unscaled(value, self.scale))

    def arrow_type(self) -> pa.DataType:
        import pyarrow as pa

        return pa.decimal128(self.precision, self.scale)

    def to_json(self, value: Any) -> Any:
        return format(value, "f")


def unscaled(value: Any, scale: int) -> int:
    """The unscaled value of `value` at `scale` (HALF_UP, as `DecimalData.fromBigDecimal`)."""
    with localcontext() as context:
        context.prec = 100
        exact = Decimal(value).quantize(Decimal(1).scaleb(-scale), rounding=ROUND_HALF_UP)
        return int(exact.scaleb(scale))


def to_unscaled_bytes(unscaled_value: int) -> bytes:
    """`BigInteger.toByteArray()`: minimal big-endian two's complement."""
    return unscaled_value.to_bytes(unscaled_value.bit_length() // 8 + 1, "big", signed=True)


class DecimalField(CompactDecimalField):
    """DECIMAL(p > 18): word (offset << 32 | numBytes) and a 16-byte var chunk holding the
    unscaled value's big-endian two's-complement bytes."""

    __slots__ = ()

    def read(self, buf: memoryview, base: int, at: int) -> Any:
        data = _chunk(buf, base, WORD.unpack_from(buf, at)[0])
        return decimal_of(int.from_bytes(data, "big", signed=True), self.scale)

    def write(self, value: Any, out: bytearray, at: int) -> None:
        data = to_unscaled_bytes(unscaled(value, self.scale))
        if len(data) > _DECIMAL_RESERVED:
            raise FormatError(f"{value} does not fit DECIMAL({self.precision}, {self.scale})")
        offset = append_chunk(out, data.ljust(_DECIMAL_RESERVED, b"\x00"))
        pack_word(out, at, offset, len(data))

    def arrow_type(self) -> pa.DataType:
        import pyarrow as pa

        if self.precision > _DECIMAL128_DIGITS:
            return pa.decimal256(self.precision, self.scale)
        return pa.decimal128(self.precision, self.scale)


class TimestampField(Field):
    """TIMESTAMP / TIMESTAMP_LTZ. p ≤ 3: epoch millis in the slot (values in millis). Else a word
    (offset << 32 | nanoOfMillisecond) and an 8-byte var chunk of epoch millis (values in
    nanos)."""

    __slots__ = ("compact", "zone")

    def __init__(self, logical: LogicalType, zone: bool) -> None:
        super().__init__(logical)
        self.compact = (logical.precision or 0) <= _COMPACT_TIMESTAMP
        self.zone = zone

    def read(self, buf: memoryview, base: int, at: int) -> Any:
        if self.compact:
            return struct.unpack_from("<q", buf, at)[0]
        word = WORD.unpack_from(buf, at)[0]
        start = base + (word >> 32)
        if start + 8 > len(buf):
            raise FormatError(f"timestamp millis at offset {start} past the end of the value")
        millis = struct.unpack_from("<q", buf, start)[0]
        return millis * _NANOS_PER_MILLI + (word & 0xFFFFFFFF)

    def write(self, value: Any, out: bytearray, at: int) -> None:
        if self.compact:
            struct.pack_into("<q", out, at, value)
            return
        millis, nano_of_milli = divmod(value, _NANOS_PER_MILLI)
        offset = append_chunk(out, struct.pack("<q", millis))
        pack_word(out, at, offset, nano_of_milli)

    def unit(self) -> str:
        precision = self.type.precision or 0
        if precision <= _COMPACT_TIMESTAMP:
            return "ms"
        return "us" if precision <= _MICROS else "ns"

    def arrow_type(self) -> pa.DataType:
        import pyarrow as pa

        return pa.timestamp(self.unit(), "UTC" if self.zone else None)

    def to_arrow(self, value: Any) -> Any:
        if self.compact:
            return value
        converted = value // 1000 if self.unit() == "us" else value
        if converted not in _INT64:
            raise Undecodable(f"{self.describe()} value out of the range of a {self.unit()} time")
        return converted

    def from_arrow(self, value: Any) -> Any:
        return value * 1000 if not self.compact and self.unit() == "us" else value

    def to_json(self, value: Any) -> Any:
        nanos = value * _NANOS_PER_MILLI if self.compact else value
        return epoch_nanos_json(nanos, zone=self.zone)


# --- strings and binaries ----------------------------------------------------------------------


class BytesField(Field):
    """BINARY/VARBINARY: inline when ≤ 7 bytes (slot byte 7 = 0x80 | length), else a var
    chunk."""

    __slots__ = ()

    def read_bytes(self, buf: memoryview, base: int, at: int) -> bytes:
        word = WORD.unpack_from(buf, at)[0]
        if word & _INLINE_MARK:
            return bytes(buf[at : at + ((word >> 56) & 0x7F)])
        return bytes(_chunk(buf, base, word))

    def write_bytes(self, data: bytes, out: bytearray, at: int) -> None:
        if len(data) <= _INLINE_MAX:
            word = ((0x80 | len(data)) << 56) | int.from_bytes(data, "little")
            WORD.pack_into(out, at, word)
            return
        pack_word(out, at, append_chunk(out, data), len(data))

    def read(self, buf: memoryview, base: int, at: int) -> Any:
        return self.read_bytes(buf, base, at)

    def write(self, value: Any, out: bytearray, at: int) -> None:
        self.write_bytes(bytes(value), out, at)

    def arrow_type(self) -> pa.DataType:
        import pyarrow as pa

        return pa.binary()

    def to_json(self, value: Any) -> Any:
        return base64_json(value)


class StringField(BytesField):
    """CHAR/VARCHAR: standard UTF-8 bytes laid out as BINARY (invalid bytes kept as surrogates,
    so they are written back unchanged)."""

    __slots__ = ()

    def read(self, buf: memoryview, base: int, at: int) -> Any:
        return self.read_bytes(buf, base, at).decode("utf-8", "surrogateescape")

    def write(self, value: Any, out: bytearray, at: int) -> None:
        self.write_bytes(str(value).encode("utf-8", "surrogateescape"), out, at)

    def arrow_type(self) -> pa.DataType:
        import pyarrow as pa

        return pa.string()

    def to_arrow(self, value: Any) -> Any:
        return string_to_arrow(value)

    def to_json(self, value: Any) -> Any:
        return value


class NullTypeField(Field):
    """The NULL type: every value is null (its null bit set), the slot stays zero."""

    __slots__ = ()

    def read(self, buf: memoryview, base: int, at: int) -> Any:
        return None

    def write(self, value: Any, out: bytearray, at: int) -> None:
        if value is not None:
            raise FormatError("a NULL-typed field holds a value")

    def arrow_type(self) -> pa.DataType:
        import pyarrow as pa

        return pa.null()


# --- LogicalType → Field -------------------------------------------------------------------------


def _time_json(millis: int) -> str:
    return time_of_day_json(millis * _NANOS_PER_MILLI)


_FIXED: dict[str, tuple[str, Callable[[], pa.DataType], Callable[[Any], Any] | None]] = {
    "BOOLEAN": ("?", _arrow("bool_"), _bool_json),
    "TINYINT": ("b", _arrow("int8"), None),
    "SMALLINT": ("h", _arrow("int16"), None),
    "INTEGER": ("i", _arrow("int32"), None),
    "BIGINT": ("q", _arrow("int64"), None),
    "FLOAT": ("f", _arrow("float32"), float_json),
    "DOUBLE": ("d", _arrow("float64"), float_json),
    "DATE": ("i", _arrow("date32"), days_json),
    "TIME_WITHOUT_TIME_ZONE": ("i", _arrow("time32", "ms"), _time_json),
    "INTERVAL_YEAR_MONTH": ("i", _arrow("int32"), None),
    "INTERVAL_DAY_TIME": ("q", _arrow("int64"), None),
}


def scalar_field(logical: LogicalType) -> Field | None:
    """The field of a scalar SQL type; None for the structures and types not read."""
    root = logical.root
    if root in _FIXED:
        code, arrow, json = _FIXED[root]
        return FixedField(logical, code, arrow, json)
    if root == "DECIMAL":
        compact = (logical.precision or 0) <= _COMPACT_DECIMAL
        return CompactDecimalField(logical) if compact else DecimalField(logical)
    if root in ("TIMESTAMP_WITHOUT_TIME_ZONE", "TIMESTAMP_WITH_LOCAL_TIME_ZONE"):
        return TimestampField(logical, zone=root == "TIMESTAMP_WITH_LOCAL_TIME_ZONE")
    if root in ("CHAR", "VARCHAR"):
        return StringField(logical)
    if root in ("BINARY", "VARBINARY"):
        return BytesField(logical)
    if root == "NULL":
        return NullTypeField(logical)
    return None
