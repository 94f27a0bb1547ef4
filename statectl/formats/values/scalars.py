"""Flink's base serializers: primitives, String, BigInteger/BigDecimal, dates and times, primitive
and String arrays, Flink's `*Value` types, Void and NullValue.

Mirrors `org.apache.flink.api.common.typeutils.base.*Serializer`, `base.array.*ArraySerializer`
and `StringValue.writeString` (flink-state-values.md §2, §4.6; flink-savepoint-format.md §7).
Every layout here is identical in Flink 1.15–2.3.
"""

from __future__ import annotations

import math
import struct
import sys
from collections.abc import Callable
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from statectl.errors import FormatError
from statectl.formats.java_types import _read_string as _read_java_string
from statectl.formats.java_types import read_string_value, write_java_string, write_string_value
from statectl.formats.serializer_snapshots import SerializerSnapshot
from statectl.formats.values.json_form import (
    MILLIS_PER_DAY,
    NANOS_PER_SECOND,
    base64_json,
    days_from_civil,
    days_json,
    epoch_nanos_json,
    float_json,
    time_of_day_json,
)
from statectl.formats.values.model import Codec, Context, Undecodable, register

if TYPE_CHECKING:
    import pyarrow as pa

_BASE = "org.apache.flink.api.common.typeutils.base."
_ARRAY = _BASE + "array."
_I64_MIN = -(1 << 63)
_I32_MIN = -(1 << 31)
_NANOS_PER_MILLI = 1_000_000
_INT64_RANGE = range(_I64_MIN, 1 << 63)


def _snapshots(prefix: str, *names: str) -> list[str]:
    return [f"{prefix}{n}Serializer${n}SerializerSnapshot" for n in names]


def _arrow(name: str, *args: Any) -> Callable[[], pa.DataType]:
    def build() -> pa.DataType:
        import pyarrow as pa

        factory = getattr(pa, name)
        return factory(*args) if callable(factory) else factory

    return build


class Scalar(Codec):
    """A fixed-width or self-delimiting scalar, described by its functions."""

    __slots__ = (
        "_arrow_type",
        "_from_arrow",
        "_json",
        "_name",
        "_read",
        "_to_arrow",
        "_write",
        "fixed_length",
    )

    def __reduce__(self) -> str | tuple[Any, ...]:
        """The module's scalars pickle by name, so that a Spark task's codecs hold the very
        objects other code compares by identity; others by their parts."""
        name = _MODULE_SCALARS.get(id(self))
        if name is not None:
            return name  # pickle: the global of that name in this module
        parts = tuple(getattr(self, slot) for slot in Scalar.__slots__)
        return _scalar_from_slots, parts

    def __init__(
        self,
        name: str,
        read: Callable[[memoryview, int], tuple[Any, int]],
        write: Callable[[Any, bytearray], None],
        arrow_type: Callable[[], pa.DataType],
        *,
        fixed_length: int | None = None,
        json: Callable[[Any], Any] | None = None,
        to_arrow: Callable[[Any], Any] | None = None,
        from_arrow: Callable[[Any], Any] | None = None,
    ) -> None:
        self._name = name
        self._from_arrow = from_arrow
        self._read = read
        self._write = write
        self._arrow_type = arrow_type
        self.fixed_length = fixed_length
        self._json = json
        self._to_arrow = to_arrow

    def read(self, buf: memoryview, pos: int) -> tuple[Any, int]:
        return self._read(buf, pos)

    def write(self, value: Any, out: bytearray) -> None:
        self._write(value, out)

    def arrow_type(self) -> pa.DataType:
        return self._arrow_type()

    def to_arrow(self, value: Any) -> Any:
        return value if self._to_arrow is None or value is None else self._to_arrow(value)

    def from_arrow(self, value: Any) -> Any:
        return value if self._from_arrow is None or value is None else self._from_arrow(value)

    def to_json(self, value: Any) -> Any:
        return value if self._json is None or value is None else self._json(value)

    def describe(self) -> str:
        return self._name

    @property
    def type_class(self) -> str:  # type: ignore[override]
        return self._name


Reader = Callable[[memoryview, int], tuple[Any, int]]
Writer = Callable[[Any, bytearray], None]


def _struct(fmt: str) -> tuple[Reader, Writer, int]:
    layout = struct.Struct(fmt)

    def read(buf: memoryview, pos: int) -> tuple[Any, int]:
        return layout.unpack_from(buf, pos)[0], pos + layout.size

    def write(value: Any, out: bytearray) -> None:
        out += layout.pack(value)

    return read, write, layout.size


def _fixed(name: str, fmt: str, arrow: str, json: Callable[[Any], Any] | None = None) -> Scalar:
    read, write, size = _struct(fmt)
    return Scalar(name, read, write, _arrow(arrow), fixed_length=size, json=json)


def _read_bool(buf: memoryview, pos: int) -> tuple[bool, int]:
    return buf[pos] != 0, pos + 1


def _write_bool(value: Any, out: bytearray) -> None:
    out.append(1 if value else 0)


def _read_char(buf: memoryview, pos: int) -> tuple[str, int]:
    return chr(struct.unpack_from(">H", buf, pos)[0]), pos + 2


def _write_char(value: Any, out: bytearray) -> None:
    units = str(value).encode("utf-16-be", "surrogatepass")
    if len(units) != 2:
        raise ValueError(f"{value!r} is not one UTF-16 code unit")
    out += units


def _read_string(buf: memoryview, pos: int) -> tuple[str | None, int]:
    if pos >= len(buf):
        raise FormatError(f"string starts past the end (offset {pos})")
    return _read_java_string(buf, pos)


def _write_string(value: Any, out: bytearray) -> None:
    out += write_java_string(value)


def string_to_arrow(value: str) -> str:
    """Arrow strings are UTF-8: a Java string's lone surrogates become U+FFFD there."""
    if value.isascii():
        return value
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return value.encode("utf-8", "replace").decode("utf-8").replace("?", "\ufffd")
    return value


STRING = Scalar("STRING", _read_string, _write_string, _arrow("string"), to_arrow=string_to_arrow)
# StringValue (a `Value` type) writes its length unshifted: it has no null of its own.
STRING_VALUE = Scalar(
    "STRING",
    read_string_value,
    lambda value, out: out.extend(write_string_value(value)),
    _arrow("string"),
    to_arrow=string_to_arrow,
)
LONG = _fixed("BIGINT", ">q", "int64")
INT = _fixed("INT", ">i", "int32")
SHORT = _fixed("SMALLINT", ">h", "int16")
BYTE = _fixed("TINYINT", ">b", "int8")
FLOAT = _fixed("FLOAT", ">f", "float32", float_json)
DOUBLE = _fixed("DOUBLE", ">d", "float64", float_json)
BOOLEAN = Scalar("BOOLEAN", _read_bool, _write_bool, _arrow("bool_"), fixed_length=1)
CHAR = Scalar("CHAR", _read_char, _write_char, _arrow("string"), fixed_length=2)


def _read_void(buf: memoryview, pos: int) -> tuple[None, int]:
    if pos >= len(buf):
        raise FormatError("a Void value ends early")
    return None, pos + 1


def _write_void(value: Any, out: bytearray) -> None:
    out.append(0)


VOID = Scalar("VOID", _read_void, _write_void, _arrow("null"), fixed_length=1)
NULL_VALUE = Scalar(
    "NULL", lambda buf, pos: (None, pos), lambda v, out: None, _arrow("null"), fixed_length=0
)


# --- BigInteger, BigDecimal (BigIntSerializer, BigDecSerializer) ------------------------------


class JavaBigInteger(int):
    """A BigInteger of 0, 1 or 10 that Flink wrote in bytes, not as the ZERO/ONE/TEN constant
    (only the constant objects get the short codes): kept so it is written back the same way."""


_BIG_CONSTANTS = {1: 0, 2: 1, 3: 10}  # code → value; code 0 is null
# A decimal's plain string (its JSON and Arrow form) holds |scale| digits: 2^31 in 9 bytes.
MAX_DECIMAL_SCALE = 1 << 20


def check_text_digits(length: int, at: int) -> None:
    """Refuse a BigInteger of `length` bytes whose decimal text (its JSON and Arrow form)
    Python will not write: past `sys.get_int_max_str_digits()` digits (4300 by default) the
    conversion takes quadratic time, and it raises."""
    limit = sys.get_int_max_str_digits()
    if limit and length * 8 * math.log10(2) > limit:
        raise FormatError(
            f"BigInteger of {length} bytes at offset {at}: more than the {limit} digits "
            "Python writes as text"
        )


def read_big_integer(buf: memoryview, pos: int) -> tuple[int | None, int]:
    (code,) = struct.unpack_from(">i", buf, pos)
    pos += 4
    if code == 0:
        return None, pos
    if code in _BIG_CONSTANTS:
        return _BIG_CONSTANTS[code], pos
    length = code - 4
    if length < 1 or pos + length > len(buf):
        raise FormatError(f"BigInteger of {length} bytes at offset {pos - 4} does not fit")
    check_text_digits(length, pos - 4)
    value = int.from_bytes(buf[pos : pos + length], "big", signed=True)
    if value in (0, 1, 10):
        value = JavaBigInteger(value)
    return value, pos + length


def write_big_integer(value: int | None, out: bytearray) -> None:
    if value is None:
        out += b"\x00\x00\x00\x00"
        return
    if value in (0, 1, 10) and not isinstance(value, JavaBigInteger):
        out += struct.pack(">i", {0: 1, 1: 2, 10: 3}[int(value)])
        return
    data = int(value).to_bytes(max(1, (int(value).bit_length() + 8) // 8), "big", signed=True)
    out += struct.pack(">i", len(data) + 4) + data


def _read_big_decimal(buf: memoryview, pos: int) -> tuple[Decimal | None, int]:
    unscaled, pos = read_big_integer(buf, pos)
    if unscaled is None:
        return None, pos
    (scale,) = struct.unpack_from(">i", buf, pos)
    if abs(scale) > MAX_DECIMAL_SCALE:
        raise FormatError(f"BigDecimal with scale {scale} at offset {pos}")
    return decimal_of(unscaled, scale), pos + 4


def decimal_of(unscaled: int, scale: int) -> Decimal:
    """An exact Decimal (no context rounding) of an unscaled value and a scale."""
    digits = tuple(int(d) for d in str(abs(unscaled)))
    return Decimal((1 if unscaled < 0 else 0, digits, -scale))


def unscaled_of(value: Decimal) -> tuple[int, int]:
    """(unscaled, scale) of a Decimal, as BigDecimal holds it."""
    sign, digits, exponent = value.as_tuple()
    if not isinstance(exponent, int):
        raise ValueError(f"{value} is not a finite decimal")
    unscaled = int("".join(map(str, digits)) or "0")
    return (-unscaled if sign else unscaled), -exponent


def _write_big_decimal(value: Any, out: bytearray) -> None:
    if value is None:
        out += b"\x00\x00\x00\x00"
        return
    unscaled, scale = unscaled_of(Decimal(value))
    write_big_integer(unscaled, out)
    out += struct.pack(">i", scale)


BIG_INTEGER = Scalar(
    "BIG_INTEGER",
    read_big_integer,
    write_big_integer,
    _arrow("string"),
    json=str,
    to_arrow=str,
    from_arrow=int,
)
BIG_DECIMAL = Scalar(
    "BIG_DECIMAL",
    _read_big_decimal,
    _write_big_decimal,
    _arrow("string"),
    json=lambda d: format(d, "f"),
    to_arrow=lambda d: format(d, "f"),
    from_arrow=Decimal,  # a negative scale is lost in plain notation: 5E+3 comes back as 5000
)


# --- dates and times ---------------------------------------------------------------------------


def _in_int64(nanos: int, what: str) -> int:
    if nanos not in _INT64_RANGE:
        raise Undecodable(f"{what} out of the range of a nanosecond timestamp")
    return nanos


def _read_millis(buf: memoryview, pos: int) -> tuple[int | None, int]:
    (millis,) = struct.unpack_from(">q", buf, pos)
    return (None if millis == _I64_MIN else millis), pos + 8


def _write_millis(value: Any, out: bytearray) -> None:
    out += struct.pack(">q", _I64_MIN if value is None else value)


def _read_sql_timestamp(buf: memoryview, pos: int) -> tuple[int | None, int]:
    millis, nanos = struct.unpack_from(">qi", buf, pos)
    if millis == _I64_MIN:
        return None, pos + 12
    return (millis // 1000) * NANOS_PER_SECOND + nanos, pos + 12


def _write_sql_timestamp(value: Any, out: bytearray) -> None:
    if value is None:
        out += struct.pack(">qi", _I64_MIN, 0)
        return
    seconds, nanos = divmod(value, NANOS_PER_SECOND)
    out += struct.pack(">qi", seconds * 1000 + nanos // _NANOS_PER_MILLI, nanos)


def _read_instant(buf: memoryview, pos: int) -> tuple[int | None, int]:
    seconds, nanos = struct.unpack_from(">qi", buf, pos)
    if seconds == _I64_MIN and nanos == _I32_MIN:
        return None, pos + 12
    return seconds * NANOS_PER_SECOND + nanos, pos + 12


def _write_instant(value: Any, out: bytearray) -> None:
    if value is None:
        out += struct.pack(">qi", _I64_MIN, _I32_MIN)
        return
    seconds, nanos = divmod(value, NANOS_PER_SECOND)
    out += struct.pack(">qi", seconds, nanos)


_LOCAL_DATE = struct.Struct(">iBB")
_LOCAL_TIME = struct.Struct(">BBBi")
_DATE_NULL = b"\x80\x00\x00\x00\x80\x00"
_TIME_NULL = b"\x80\x80\x00\x80\x00\x00\x00"


def _read_local_date(buf: memoryview, pos: int) -> tuple[int | None, int]:
    year, month, day = _LOCAL_DATE.unpack_from(buf, pos)
    if year == _I32_MIN:
        return None, pos + 6
    return days_from_civil(year, month, day), pos + 6


def _write_local_date(value: Any, out: bytearray) -> None:
    if value is None:
        out += _DATE_NULL
        return
    from statectl.formats.values.json_form import civil_from_days

    out += _LOCAL_DATE.pack(*civil_from_days(value))


def _read_local_time(buf: memoryview, pos: int) -> tuple[int | None, int]:
    hour, minute, second, nano = _LOCAL_TIME.unpack_from(buf, pos)
    if hour == 0x80:
        return None, pos + 7
    return ((hour * 60 + minute) * 60 + second) * NANOS_PER_SECOND + nano, pos + 7


def _write_local_time(value: Any, out: bytearray) -> None:
    if value is None:
        out += _TIME_NULL
        return
    seconds, nano = divmod(value, NANOS_PER_SECOND)
    minutes, second = divmod(seconds, 60)
    hour, minute = divmod(minutes, 60)
    out += _LOCAL_TIME.pack(hour, minute, second, nano)


def _read_local_date_time(buf: memoryview, pos: int) -> tuple[int | None, int]:
    days, pos = _read_local_date(buf, pos)
    nanos, pos = _read_local_time(buf, pos)
    if days is None or nanos is None:
        return None, pos
    return days * 86_400 * NANOS_PER_SECOND + nanos, pos


def _write_local_date_time(value: Any, out: bytearray) -> None:
    if value is None:
        out += _DATE_NULL + _TIME_NULL
        return
    days, nanos = divmod(value, 86_400 * NANOS_PER_SECOND)
    _write_local_date(days, out)
    _write_local_time(nanos, out)


def _ns_checked(what: str) -> Callable[[int], int]:
    return lambda nanos: _in_int64(nanos, what)


JAVA_DATE = Scalar(
    "JAVA_DATE", _read_millis, _write_millis, _arrow("timestamp", "ms", "UTC"), fixed_length=8,
    json=lambda ms: epoch_nanos_json(ms * _NANOS_PER_MILLI, zone=True),
)  # fmt: skip
SQL_DATE = Scalar(
    "SQL_DATE", _read_millis, _write_millis, _arrow("date64"), fixed_length=8,
    json=lambda ms: days_json(ms // MILLIS_PER_DAY),
)  # fmt: skip
SQL_TIME = Scalar(
    "SQL_TIME", _read_millis, _write_millis, _arrow("time32", "ms"), fixed_length=8,
    json=lambda ms: time_of_day_json((ms % MILLIS_PER_DAY) * _NANOS_PER_MILLI),
    to_arrow=lambda ms: ms % MILLIS_PER_DAY,
)  # fmt: skip
SQL_TIMESTAMP = Scalar(
    "SQL_TIMESTAMP", _read_sql_timestamp, _write_sql_timestamp, _arrow("timestamp", "ns", "UTC"),
    fixed_length=12, json=lambda ns: epoch_nanos_json(ns, zone=True),
    to_arrow=_ns_checked("java.sql.Timestamp"),
)  # fmt: skip
INSTANT = Scalar(
    "INSTANT", _read_instant, _write_instant, _arrow("timestamp", "ns", "UTC"), fixed_length=12,
    json=lambda ns: epoch_nanos_json(ns, zone=True), to_arrow=_ns_checked("Instant"),
)  # fmt: skip
LOCAL_DATE = Scalar(
    "LOCAL_DATE", _read_local_date, _write_local_date, _arrow("date32"), fixed_length=6,
    json=days_json,
)  # fmt: skip
LOCAL_TIME = Scalar(
    "LOCAL_TIME", _read_local_time, _write_local_time, _arrow("time64", "ns"), fixed_length=7,
    json=time_of_day_json,
)  # fmt: skip
LOCAL_DATE_TIME = Scalar(
    "LOCAL_DATE_TIME", _read_local_date_time, _write_local_date_time, _arrow("timestamp", "ns"),
    fixed_length=13, json=lambda ns: epoch_nanos_json(ns, zone=False),
    to_arrow=_ns_checked("LocalDateTime"),
)  # fmt: skip


# --- primitive and String arrays (base.array.*ArraySerializer) --------------------------------


def _count(buf: memoryview, pos: int, width: int) -> tuple[int, int]:
    (count,) = struct.unpack_from(">i", buf, pos)
    pos += 4
    if count < 0 or count * width > len(buf) - pos:
        raise FormatError(f"array of {count} elements at offset {pos - 4} does not fit")
    return count, pos


def _numbers(code: str, width: int) -> tuple[Reader, Writer]:
    def read(buf: memoryview, pos: int) -> tuple[Any, int]:
        count, pos = _count(buf, pos, width)
        return list(struct.unpack_from(f">{count}{code}", buf, pos)), pos + count * width

    def write(value: Any, out: bytearray) -> None:
        out += struct.pack(f">i{len(value)}{code}", len(value), *value)

    return read, write


def _read_bytes(buf: memoryview, pos: int) -> tuple[bytes, int]:
    count, pos = _count(buf, pos, 1)
    return bytes(buf[pos : pos + count]), pos + count


def _write_bytes(value: Any, out: bytearray) -> None:
    out += struct.pack(">i", len(value)) + bytes(value)


def _read_chars(buf: memoryview, pos: int) -> tuple[list[str], int]:
    count, pos = _count(buf, pos, 2)
    units = struct.unpack_from(f">{count}H", buf, pos)
    return [chr(u) for u in units], pos + 2 * count


def _write_chars(value: Any, out: bytearray) -> None:
    out += struct.pack(">i", len(value))
    for char in value:
        _write_char(char, out)


def _read_booleans(buf: memoryview, pos: int) -> tuple[list[bool], int]:
    count, pos = _count(buf, pos, 1)
    return [b != 0 for b in buf[pos : pos + count]], pos + count


def _write_booleans(value: Any, out: bytearray) -> None:
    out += struct.pack(">i", len(value)) + bytes(1 if v else 0 for v in value)


def _read_strings(buf: memoryview, pos: int) -> tuple[list[str | None], int]:
    count, pos = _count(buf, pos, 1)
    items = []
    for _ in range(count):
        item, pos = _read_string(buf, pos)
        items.append(item)
    return items, pos


def _write_strings(value: Any, out: bytearray) -> None:
    out += struct.pack(">i", len(value))
    for item in value:
        _write_string(item, out)


def _list_of(element: str) -> Callable[[], pa.DataType]:
    def build() -> pa.DataType:
        import pyarrow as pa

        return pa.list_(getattr(pa, element)())

    return build


def _float_list_json(values: list[float]) -> list[Any]:
    return [float_json(v) for v in values]


def _strings_to_arrow(values: list[str | None]) -> list[str | None]:
    return [None if v is None else string_to_arrow(v) for v in values]


BYTES = Scalar("BYTES", _read_bytes, _write_bytes, _arrow("binary"), json=base64_json)
PRIMITIVE_ARRAYS = {
    "BooleanPrimitiveArray": Scalar(
        "ARRAY<BOOLEAN>", _read_booleans, _write_booleans, _list_of("bool_")
    ),
    "BytePrimitiveArray": BYTES,
    "CharPrimitiveArray": Scalar("ARRAY<CHAR>", _read_chars, _write_chars, _list_of("string")),
    "ShortPrimitiveArray": Scalar("ARRAY<SMALLINT>", *_numbers("h", 2), _list_of("int16")),
    "IntPrimitiveArray": Scalar("ARRAY<INT>", *_numbers("i", 4), _list_of("int32")),
    "LongPrimitiveArray": Scalar("ARRAY<BIGINT>", *_numbers("q", 8), _list_of("int64")),
    "FloatPrimitiveArray": Scalar(
        "ARRAY<FLOAT>", *_numbers("f", 4), _list_of("float32"), json=_float_list_json
    ),
    "DoublePrimitiveArray": Scalar(
        "ARRAY<DOUBLE>", *_numbers("d", 8), _list_of("float64"), json=_float_list_json
    ),
    "StringArray": Scalar(
        "ARRAY<STRING>",
        _read_strings,
        _write_strings,
        _list_of("string"),
        to_arrow=_strings_to_arrow,
    ),
}

SCALARS: dict[str, Codec] = {
    "String": STRING,
    "Long": LONG,
    "Int": INT,
    "Short": SHORT,
    "Byte": BYTE,
    "Float": FLOAT,
    "Double": DOUBLE,
    "Boolean": BOOLEAN,
    "Char": CHAR,
    "Void": VOID,
    "BigInt": BIG_INTEGER,
    "BigDec": BIG_DECIMAL,
    "Date": JAVA_DATE,
    "SqlDate": SQL_DATE,
    "SqlTime": SQL_TIME,
    "SqlTimestamp": SQL_TIMESTAMP,
    "Instant": INSTANT,
    "LocalDate": LOCAL_DATE,
    "LocalTime": LOCAL_TIME,
    "LocalDateTime": LOCAL_DATE_TIME,
    # Flink's Value types write what their primitive serializers write (StringValue aside).
    "StringValue": STRING_VALUE,
    "LongValue": LONG,
    "IntValue": INT,
    "ShortValue": SHORT,
    "ByteValue": BYTE,
    "FloatValue": FLOAT,
    "DoubleValue": DOUBLE,
    "BooleanValue": BOOLEAN,
    "CharValue": CHAR,
    "NullValue": NULL_VALUE,
}


def _constant(codec: Codec) -> Callable[[SerializerSnapshot, Context], Codec]:
    return lambda snapshot, context: codec


for _name, _codec in SCALARS.items():
    register(*_snapshots(_BASE, _name))(_constant(_codec))
for _name, _codec in PRIMITIVE_ARRAYS.items():
    register(*_snapshots(_ARRAY, _name))(_constant(_codec))

# SQL's StringData serializer writes an i32 length and UTF-8 (not StringValue's chars).


def _read_string_data(buf: memoryview, pos: int) -> tuple[str, int]:
    (length,) = struct.unpack_from(">i", buf, pos)
    pos += 4
    if length < 0 or pos + length > len(buf):
        raise FormatError(f"string of {length} bytes at offset {pos - 4} does not fit")
    return bytes(buf[pos : pos + length]).decode("utf-8", "surrogateescape"), pos + length


def _write_string_data(value: Any, out: bytearray) -> None:
    data = str(value).encode("utf-8", "surrogateescape")
    out += struct.pack(">i", len(data)) + data


STRING_DATA = Scalar("STRING", _read_string_data, _write_string_data, _arrow("string"))
register(
    "org.apache.flink.table.runtime.typeutils.StringDataSerializer$StringDataSerializerSnapshot"
)(_constant(STRING_DATA))


def _scalar_from_slots(*parts: Any) -> Scalar:
    scalar = Scalar.__new__(Scalar)
    for slot, part in zip(Scalar.__slots__, parts, strict=True):
        setattr(scalar, slot, part)
    return scalar


# id → name of each scalar this module defines, for `Scalar.__reduce__`
_MODULE_SCALARS = {id(v): k for k, v in list(globals().items()) if isinstance(v, Scalar)}
