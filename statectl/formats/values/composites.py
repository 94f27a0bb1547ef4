"""Serializers that wrap others: List, Map, Set, arrays of objects, Nullable, Either, Enum,
Tuple0–25, Row, TTL, window namespaces, and the thin wrappers Flink puts around serializers.

Mirrors `base.{ListSerializer, MapSerializer, SetSerializer, GenericArraySerializer,
EnumSerializer}`, `runtime.{NullableSerializer, EitherSerializer, TupleSerializer, Tuple0Serializer,
RowSerializer}`, `TtlStateFactory.TtlSerializer`, the window serializers and Scala's
Option/case-class/Either serializers (flink-state-values.md §4, §5, §7.9).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from statectl.errors import FormatError
from statectl.formats.serializer_snapshots import ROW_LEGACY_MODE, SerializerSnapshot
from statectl.formats.values.json_form import map_json, sorted_json
from statectl.formats.values.model import Codec, Context, Factory, TtlValue, register
from statectl.formats.values.scalars import LONG, VOID

if TYPE_CHECKING:
    import pyarrow as pa

_BASE = "org.apache.flink.api.common.typeutils.base."
_RUNTIME = "org.apache.flink.api.java.typeutils.runtime."
_I32 = struct.Struct(">i")


def read_count(buf: memoryview, pos: int, what: str) -> tuple[int, int]:
    """An i32 element count that fits the bytes left (each element takes at least one)."""
    (count,) = _I32.unpack_from(buf, pos)
    if count < 0 or count > len(buf) - pos - 4:
        raise FormatError(f"{what} of {count} elements at offset {pos} does not fit")
    return count, pos + 4


def _nested(snapshot: SerializerSnapshot, context: Context, count: int) -> list[Codec]:
    if len(snapshot.nested) != count:
        raise FormatError(f"{count} nested serializers expected, {len(snapshot.nested)} found")
    return [context.codec(n) for n in snapshot.nested]


# --- collections ---------------------------------------------------------------------------------


class ListCodec(Codec):
    """`ListSerializer` (and `ArrayListSerializer`): i32 size, then the elements."""

    __slots__ = ("element",)
    KIND = "LIST"  # in `describe` and `tree`; lower case in errors

    def __init__(self, element: Codec) -> None:
        self.element = element

    def read(self, buf: memoryview, pos: int) -> tuple[Any, int]:
        count, pos = read_count(buf, pos, "list")
        read = self.element.read
        items = []
        for _ in range(count):
            item, pos = read(buf, pos)
            items.append(item)
        return items, pos

    def write(self, value: Any, out: bytearray) -> None:
        out += _I32.pack(len(value))
        for item in value:
            self.element.write(item, out)

    def arrow_type(self) -> pa.DataType:
        import pyarrow as pa

        return pa.list_(self.element.arrow_type())

    def to_arrow(self, value: Any) -> Any:
        convert = self.element.to_arrow
        return [None if v is None else convert(v) for v in value]

    def from_arrow(self, value: Any) -> Any:
        convert = self.element.from_arrow
        return [None if v is None else convert(v) for v in value]

    def to_json(self, value: Any) -> Any:
        convert = self.element.to_json
        return [None if v is None else convert(v) for v in value]

    def describe(self) -> str:
        return f"{self.KIND}<{self.element.describe()}>"

    def tree(self) -> dict[str, Any]:
        return {"type": self.KIND, "element": self.element.tree()}


class _FlaggedListCodec(ListCodec):
    """i32 size, then per element a one-byte flag (`NULL_FLAG` for null) and the element."""

    __slots__ = ()
    NULL_FLAG: int

    def read(self, buf: memoryview, pos: int) -> tuple[Any, int]:
        count, pos = read_count(buf, pos, self.KIND.lower())
        read = self.element.read
        null_when_set = bool(self.NULL_FLAG)
        items: list[Any] = []
        for _ in range(count):
            if bool(buf[pos]) == null_when_set:
                items.append(None)
                pos += 1
                continue
            item, pos = read(buf, pos + 1)
            items.append(item)
        return items, pos

    def write(self, value: Any, out: bytearray) -> None:
        out += _I32.pack(len(value))
        null_flag, present_flag = self.NULL_FLAG, 1 - self.NULL_FLAG
        for item in value:
            out.append(null_flag if item is None else present_flag)
            if item is not None:
                self.element.write(item, out)


class SetCodec(_FlaggedListCodec):
    """`SetSerializer` (2.x): i32 size, then per element a null flag (1 = null) and the element."""

    __slots__ = ()
    KIND = "SET"
    NULL_FLAG = 1

    def to_json(self, value: Any) -> Any:
        return sorted_json(super().to_json(value))


class ObjectArrayCodec(_FlaggedListCodec):
    """`GenericArraySerializer` (`Long[]`, `T[]`): i32 length, per element 1 = present."""

    __slots__ = ()
    KIND = "ARRAY"
    NULL_FLAG = 0


class MapCodec(Codec):
    """`MapSerializer`: i32 size, then per entry the key, a null flag (1 = null), the value.
    Values are lists of (key, value) pairs, in the order Flink wrote them."""

    __slots__ = ("key", "value")

    def __init__(self, key: Codec, value: Codec) -> None:
        self.key = key
        self.value = value

    def read(self, buf: memoryview, pos: int) -> tuple[Any, int]:
        count, pos = read_count(buf, pos, "map")
        read_key, read_value = self.key.read, self.value.read
        pairs = []
        for _ in range(count):
            key, pos = read_key(buf, pos)
            if buf[pos]:
                pairs.append((key, None))
                pos += 1
                continue
            value, pos = read_value(buf, pos + 1)
            pairs.append((key, value))
        return pairs, pos

    def write(self, value: Any, out: bytearray) -> None:
        out += _I32.pack(len(value))
        for key, item in value:
            self.key.write(key, out)
            out.append(1 if item is None else 0)
            if item is not None:
                self.value.write(item, out)

    def arrow_type(self) -> pa.DataType:
        import pyarrow as pa

        return pa.map_(self.key.arrow_type(), self.value.arrow_type())

    def to_arrow(self, value: Any) -> Any:
        key, item = self.key.to_arrow, self.value.to_arrow
        return [(key(k), None if v is None else item(v)) for k, v in value]

    def from_arrow(self, value: Any) -> Any:
        key, item = self.key.from_arrow, self.value.from_arrow
        return [(key(k), None if v is None else item(v)) for k, v in value]

    def to_json(self, value: Any) -> Any:
        key, item = self.key.to_json, self.value.to_json
        return map_json([(key(k), None if v is None else item(v)) for k, v in value])

    def describe(self) -> str:
        return f"MAP<{self.key.describe()}, {self.value.describe()}>"

    def tree(self) -> dict[str, Any]:
        return {"type": "MAP", "key": self.key.tree(), "value": self.value.tree()}


@register(
    _BASE + "ListSerializerSnapshot", "org.apache.flink.runtime.state.ArrayListSerializerSnapshot"
)
def _list(snapshot: SerializerSnapshot, context: Context) -> Codec:
    return ListCodec(*_nested(snapshot, context, 1))


@register(_BASE + "SetSerializerSnapshot")
def _set(snapshot: SerializerSnapshot, context: Context) -> Codec:
    return SetCodec(*_nested(snapshot, context, 1))


@register(_BASE + "GenericArraySerializerSnapshot")
def _array(snapshot: SerializerSnapshot, context: Context) -> Codec:
    return ObjectArrayCodec(*_nested(snapshot, context, 1))


@register(_BASE + "MapSerializerSnapshot")
def _map(snapshot: SerializerSnapshot, context: Context) -> Codec:
    return MapCodec(*_nested(snapshot, context, 2))


# --- Nullable, Either, Enum ------------------------------------------------------------------


class NullableCodec(Codec):
    """`NullableSerializer`: a null flag (1 = null), then padding or the value."""

    __slots__ = ("inner", "padding")

    def __init__(self, inner: Codec, padding: int) -> None:
        self.inner = inner
        self.padding = padding

    def read(self, buf: memoryview, pos: int) -> tuple[Any, int]:
        if buf[pos]:
            return None, pos + 1 + self.padding
        return self.inner.read(buf, pos + 1)

    def write(self, value: Any, out: bytearray) -> None:
        if value is None:
            out += bytes(1 + self.padding)
            out[-1 - self.padding] = 1
            return
        out.append(0)
        self.inner.write(value, out)

    def arrow_type(self) -> pa.DataType:
        return self.inner.arrow_type()

    def to_arrow(self, value: Any) -> Any:
        return None if value is None else self.inner.to_arrow(value)

    def from_arrow(self, value: Any) -> Any:
        return None if value is None else self.inner.from_arrow(value)

    def to_json(self, value: Any) -> Any:
        return None if value is None else self.inner.to_json(value)

    def describe(self) -> str:
        return self.inner.describe()

    def tree(self) -> dict[str, Any]:
        return self.inner.tree()


@register(_RUNTIME + "NullableSerializer$NullableSerializerSnapshot")
def _nullable(snapshot: SerializerSnapshot, context: Context) -> Codec:
    (inner,) = _nested(snapshot, context, 1)
    return NullableCodec(inner, int(snapshot.param("padding", 0)))


class Either:
    """An `Either` value: left or right."""

    __slots__ = ("is_left", "value")

    def __init__(self, is_left: bool, value: Any) -> None:
        self.is_left = is_left
        self.value = value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Either) and (self.is_left, self.value) == (
            other.is_left,
            other.value,
        )

    def __hash__(self) -> int:
        return hash((self.is_left, repr(self.value)))

    def __repr__(self) -> str:
        return f"{'Left' if self.is_left else 'Right'}({self.value!r})"


class EitherCodec(Codec):
    """`EitherSerializer`: 1 = Left, then the value of that side."""

    __slots__ = ("left", "right")

    def __init__(self, left: Codec, right: Codec) -> None:
        self.left = left
        self.right = right

    def read(self, buf: memoryview, pos: int) -> tuple[Any, int]:
        is_left = buf[pos] != 0
        value, pos = (self.left if is_left else self.right).read(buf, pos + 1)
        return Either(is_left, value), pos

    def write(self, value: Any, out: bytearray) -> None:
        out.append(1 if value.is_left else 0)
        (self.left if value.is_left else self.right).write(value.value, out)

    def arrow_type(self) -> pa.DataType:
        import pyarrow as pa

        return pa.struct([("left", self.left.arrow_type()), ("right", self.right.arrow_type())])

    def to_arrow(self, value: Any) -> Any:
        side = self.left if value.is_left else self.right
        converted = side.to_arrow(value.value)
        if value.is_left:
            return {"left": converted, "right": None}
        return {"left": None, "right": converted}

    def from_arrow(self, value: Any) -> Any:
        """The side that is set (Flink's `Either` holds no null on either side)."""
        if value.get("left") is not None:
            return Either(True, self.left.from_arrow(value["left"]))
        if value.get("right") is not None:
            return Either(False, self.right.from_arrow(value["right"]))
        raise FormatError("an EITHER value with neither side set")

    def to_json(self, value: Any) -> Any:
        side = self.left if value.is_left else self.right
        return {"left" if value.is_left else "right": side.to_json(value.value)}

    def describe(self) -> str:
        return f"EITHER<{self.left.describe()}, {self.right.describe()}>"

    def tree(self) -> dict[str, Any]:
        return {"type": "EITHER", "left": self.left.tree(), "right": self.right.tree()}


@register(
    _RUNTIME + "JavaEitherSerializerSnapshot",
    "org.apache.flink.api.scala.typeutils.ScalaEitherSerializerSnapshot",
)
def _either(snapshot: SerializerSnapshot, context: Context) -> Codec:
    return EitherCodec(*_nested(snapshot, context, 2))


class EnumCodec(Codec):
    """`EnumSerializer`: an i32 index into the snapshot's constants (not the Java ordinal)."""

    __slots__ = ("constants", "type_class")
    fixed_length = 4

    def __init__(self, type_class: str, constants: tuple[str, ...]) -> None:
        self.type_class = type_class
        self.constants = constants

    def read(self, buf: memoryview, pos: int) -> tuple[Any, int]:
        (index,) = _I32.unpack_from(buf, pos)
        if not 0 <= index < len(self.constants):
            raise FormatError(f"enum index {index} beyond the {len(self.constants)} constants")
        return self.constants[index], pos + 4

    def write(self, value: Any, out: bytearray) -> None:
        try:
            out += _I32.pack(self.constants.index(value))
        except ValueError:
            raise FormatError(f"{value!r} is not a constant of {self.type_class}") from None

    def arrow_type(self) -> pa.DataType:
        import pyarrow as pa

        return pa.string()

    def describe(self) -> str:
        shown = ", ".join(self.constants[:8]) + (", …" if len(self.constants) > 8 else "")
        return f"ENUM({shown})"

    def tree(self) -> dict[str, Any]:
        return {"type": "ENUM", "class": self.type_class, "constants": list(self.constants)}


@register(_BASE + "EnumSerializer$EnumSerializerSnapshot")
def _enum(snapshot: SerializerSnapshot, context: Context) -> Codec:
    return EnumCodec(snapshot.type_name or "enum", tuple(snapshot.param("constants", ())))


# --- Tuple, Row, case classes --------------------------------------------------------------------


class FieldsCodec(Codec):
    """A value of named fields, each with its own serializer, as a dict of name → value: the
    field-wise forms `StructCodec` and `pojo.PojoCodec` share."""

    __slots__ = ("codecs", "names")

    names: list[str]
    codecs: list[Codec]

    def _arrow_fields(self) -> list[tuple[str, pa.DataType]]:
        return [(n, c.arrow_type()) for n, c in zip(self.names, self.codecs, strict=True)]

    def _field_forms(self, value: Any, form: Callable[[Codec, Any], Any]) -> dict[str, Any]:
        """Each field's value as `form(codec, value)` gives it; a null stays None."""
        return {
            n: None if (v := value.get(n)) is None else form(c, v)
            for n, c in zip(self.names, self.codecs, strict=True)
        }

    def _fields_to_arrow(self, value: Any) -> dict[str, Any]:
        return self._field_forms(value, lambda codec, v: codec.to_arrow(v))

    def _fields_from_arrow(self, value: Any) -> dict[str, Any]:
        return self._field_forms(value, lambda codec, v: codec.from_arrow(v))

    def _fields_to_json(self, value: Any) -> dict[str, Any]:
        return self._field_forms(value, lambda codec, v: codec.to_json(v))

    def _described_fields(self) -> str:
        """`name TYPE, …`, inside a `describe`'s braces."""
        return ", ".join(
            f"{n} {c.describe()}" for n, c in zip(self.names, self.codecs, strict=True)
        )

    def _field_trees(self) -> list[dict[str, Any]]:
        return [{"name": n, **c.tree()} for n, c in zip(self.names, self.codecs, strict=True)]


class StructCodec(FieldsCodec):
    """Fields back to back, each with its serializer (`TupleSerializer`, Scala case classes)."""

    __slots__ = ("label", "type_class")

    def __init__(self, label: str, type_class: str, names: list[str], codecs: list[Codec]) -> None:
        self.label = label
        self.type_class = type_class
        self.names = names
        self.codecs = codecs

    def read(self, buf: memoryview, pos: int) -> tuple[Any, int]:
        value = {}
        for name, codec in zip(self.names, self.codecs, strict=True):
            value[name], pos = codec.read(buf, pos)
        return value, pos

    def write(self, value: Any, out: bytearray) -> None:
        for name, codec in zip(self.names, self.codecs, strict=True):
            codec.write(value[name], out)

    def arrow_type(self) -> pa.DataType:
        import pyarrow as pa

        if not self.codecs:  # Parquet has no empty struct
            return pa.null()
        return pa.struct(self._arrow_fields())

    def to_arrow(self, value: Any) -> Any:
        if not self.codecs:
            return None
        return self._fields_to_arrow(value)

    def from_arrow(self, value: Any) -> Any:
        return self._fields_from_arrow(value)

    def to_json(self, value: Any) -> Any:
        return self._fields_to_json(value)

    def describe(self) -> str:
        return f"{self.label}{{{self._described_fields()}}}"

    def tree(self) -> dict[str, Any]:
        return {
            "type": self.label.split(" ", 1)[0],
            "class": self.type_class,
            "fields": self._field_trees(),
        }


class Tuple0Codec(StructCodec):
    """`Tuple0Serializer`: the one byte 42."""

    __slots__ = ()
    fixed_length = 1

    def __init__(self) -> None:
        super().__init__("TUPLE0", "org.apache.flink.api.java.tuple.Tuple0", [], [])

    def read(self, buf: memoryview, pos: int) -> tuple[Any, int]:
        if buf[pos] != 42:
            raise FormatError(f"Tuple0 byte {buf[pos]} at offset {pos} is not 42")
        return {}, pos + 1

    def write(self, value: Any, out: bytearray) -> None:
        out.append(42)


def positional(count: int) -> list[str]:
    return [f"f{i}" for i in range(count)]


@register(_RUNTIME + "TupleSerializerSnapshot")
def _tuple(snapshot: SerializerSnapshot, context: Context) -> Codec:
    codecs = [context.codec(n) for n in snapshot.nested]
    type_class = snapshot.type_name or f"org.apache.flink.api.java.tuple.Tuple{len(codecs)}"
    return StructCodec(f"TUPLE{len(codecs)}", type_class, positional(len(codecs)), codecs)


@register(_RUNTIME + "Tuple0SerializerSnapshot")
def _tuple0(snapshot: SerializerSnapshot, context: Context) -> Codec:
    return Tuple0Codec()


@register(
    "org.apache.flink.api.scala.typeutils.ScalaCaseClassSerializerSnapshot",
    "org.apache.flink.api.scala.typeutils.Tuple2CaseClassSerializerSnapshot",
)
def _case_class(snapshot: SerializerSnapshot, context: Context) -> Codec:
    codecs = [context.codec(n) for n in snapshot.nested]
    names = [f"_{i + 1}" for i in range(len(codecs))]  # Scala's own accessor names
    return StructCodec("CASE_CLASS", snapshot.type_name or "scala.Product", names, codecs)


ROW_KIND = "__row_kind"
ROW_KINDS = ("+I", "-U", "+U", "-D")


class RowCodec(StructCodec):
    """`RowSerializer`: a mask of RowKind bits (unless legacy) and one null bit per field, MSB
    first, then each non-null field. Values carry the kind under `__row_kind` (0 = +I)."""

    __slots__ = ("kind_bits",)

    def __init__(self, names: list[str], codecs: list[Codec], with_kind: bool) -> None:
        super().__init__("ROW", "org.apache.flink.types.Row", names, codecs)
        self.kind_bits = 2 if with_kind else 0

    def read(self, buf: memoryview, pos: int) -> tuple[Any, int]:
        bits = self.kind_bits + len(self.codecs)
        mask_bytes = (bits + 7) // 8
        mask = int.from_bytes(buf[pos : pos + mask_bytes], "big")
        if pos + mask_bytes > len(buf):
            raise FormatError("row ends inside its null mask")
        pos += mask_bytes
        top = mask_bytes * 8 - 1
        value: dict[str, Any] = {}
        if self.kind_bits:
            value[ROW_KIND] = ((mask >> top) & 1) | (((mask >> (top - 1)) & 1) << 1)
        for i, (name, codec) in enumerate(zip(self.names, self.codecs, strict=True)):
            if (mask >> (top - self.kind_bits - i)) & 1:
                value[name] = None
            else:
                value[name], pos = codec.read(buf, pos)
        return value, pos

    def write(self, value: Any, out: bytearray) -> None:
        bits = self.kind_bits + len(self.codecs)
        mask_bytes = (bits + 7) // 8
        top = mask_bytes * 8 - 1
        mask = 0
        if self.kind_bits:
            kind = int(value.get(ROW_KIND, 0))
            mask |= ((kind & 1) << top) | (((kind >> 1) & 1) << (top - 1))
        for i, name in enumerate(self.names):
            if value.get(name) is None:
                mask |= 1 << (top - self.kind_bits - i)
        out += mask.to_bytes(mask_bytes, "big")
        for name, codec in zip(self.names, self.codecs, strict=True):
            if value.get(name) is not None:
                codec.write(value[name], out)

    def arrow_type(self) -> pa.DataType:
        import pyarrow as pa

        fields = [(n, c.arrow_type()) for n, c in zip(self.names, self.codecs, strict=True)]
        if self.kind_bits:
            fields.append((ROW_KIND, pa.int8()))
        return pa.struct(fields)

    def to_arrow(self, value: Any) -> Any:
        converted = super().to_arrow(value) or {}
        if self.kind_bits:
            converted[ROW_KIND] = value.get(ROW_KIND, 0)
        return converted

    def from_arrow(self, value: Any) -> Any:
        converted = super().from_arrow(value)
        if self.kind_bits:
            converted[ROW_KIND] = value.get(ROW_KIND) or 0
        return converted


@register(_RUNTIME + "RowSerializer$RowSerializerSnapshot")
def _row(snapshot: SerializerSnapshot, context: Context) -> Codec:
    codecs = [context.codec(n) for n in snapshot.nested]
    return RowCodec(positional(len(codecs)), codecs, snapshot.type_name != ROW_LEGACY_MODE)


class OptionCodec(NullableCodec):
    """Scala's `OptionSerializer`: 1 then the value for Some, 0 for None."""

    __slots__ = ()

    def __init__(self, inner: Codec) -> None:
        super().__init__(inner, 0)

    def read(self, buf: memoryview, pos: int) -> tuple[Any, int]:
        if not buf[pos]:
            return None, pos + 1
        return self.inner.read(buf, pos + 1)

    def write(self, value: Any, out: bytearray) -> None:
        out.append(0 if value is None else 1)
        if value is not None:
            self.inner.write(value, out)


@register("org.apache.flink.api.scala.typeutils.ScalaOptionSerializerSnapshot")
def _option(snapshot: SerializerSnapshot, context: Context) -> Codec:
    return OptionCodec(*_nested(snapshot, context, 1))


# --- TTL and wrappers ----------------------------------------------------------------------------


class TtlCodec(Codec):
    """`TtlSerializer`: the last-access time (i64 ms), then the user value; `TtlValue`s."""

    __slots__ = ("fixed_length", "user")

    def __init__(self, user: Codec) -> None:
        self.user = user
        self.fixed_length = None if user.fixed_length is None else 8 + user.fixed_length

    def read(self, buf: memoryview, pos: int) -> tuple[Any, int]:
        timestamp, pos = LONG.read(buf, pos)
        value, pos = self.user.read(buf, pos)
        return TtlValue(timestamp, value), pos

    def write(self, value: Any, out: bytearray) -> None:
        LONG.write(value.timestamp, out)
        self.user.write(value.value, out)

    def arrow_type(self) -> pa.DataType:
        import pyarrow as pa

        return pa.struct(
            [("ttl_timestamp", pa.timestamp("ms", "UTC")), ("value", self.user.arrow_type())]
        )

    def to_arrow(self, value: Any) -> Any:
        inner = None if value.value is None else self.user.to_arrow(value.value)
        return {"ttl_timestamp": value.timestamp, "value": inner}

    def from_arrow(self, value: Any) -> Any:
        inner = value.get("value")
        user = None if inner is None else self.user.from_arrow(inner)
        return TtlValue(value["ttl_timestamp"], user)

    def to_json(self, value: Any) -> Any:
        return None if value.value is None else self.user.to_json(value.value)

    def describe(self) -> str:
        return f"{self.user.describe()}, TTL"

    def tree(self) -> dict[str, Any]:
        return {**self.user.tree(), "ttl": True}


_TTL_SNAPSHOTS = (
    "org.apache.flink.runtime.state.ttl.TtlStateFactory$TtlSerializerSnapshot",
    "org.apache.flink.runtime.state.v2.ttl.TtlStateFactory$TtlSerializerSnapshot",
)


@register(*_TTL_SNAPSHOTS)
def _ttl(snapshot: SerializerSnapshot, context: Context) -> Codec:
    _timestamp, user = _nested(snapshot, context, 2)
    return TtlCodec(user)


def _delegate(snapshot: SerializerSnapshot, context: Context) -> Codec:
    """Wrappers that write exactly what the one serializer they wrap writes."""
    return context.codec(snapshot.nested[-1] if snapshot.nested else None)


register(
    "org.apache.flink.api.common.typeutils.SingleThreadAccessCheckingTypeSerializer"
    "$SingleThreadAccessCheckingTypeSerializerSnapshot",
    "org.apache.flink.runtime.state.ttl.TtlAwareSerializerSnapshot",
)(_delegate)


# --- namespaces ------------------------------------------------------------------------------


class WindowCodec(StructCodec):
    """`TimeWindow.Serializer` (i64 start, i64 end) and `CountWindow.Serializer` (i64 id)."""

    __slots__ = ("fixed_length",)

    def __init__(self, type_class: str, names: list[str]) -> None:
        super().__init__("WINDOW", type_class, names, [LONG] * len(names))
        self.fixed_length = 8 * len(names)

    def describe(self) -> str:
        return f"{self.type_class.rsplit('.', 1)[-1].upper()}"


_WINDOW_PACKAGES = (
    "org.apache.flink.streaming.api.windowing.windows",
    "org.apache.flink.table.runtime.operators.window",
)


def _window(type_class: str, names: list[str]) -> Factory:
    return lambda snapshot, context: WindowCodec(type_class, names)


def _void(snapshot: SerializerSnapshot, context: Context) -> Codec:
    return VOID


for _package in _WINDOW_PACKAGES:
    register(f"{_package}.TimeWindow$Serializer$TimeWindowSerializerSnapshot")(
        _window(f"{_package}.TimeWindow", ["start", "end"])
    )
    register(f"{_package}.CountWindow$Serializer$CountWindowSerializerSnapshot")(
        _window(f"{_package}.CountWindow", ["id"])
    )
    register(f"{_package}.GlobalWindow$Serializer$GlobalWindowSerializerSnapshot")(_void)
register(
    "org.apache.flink.runtime.state.VoidNamespaceSerializer$VoidNamespaceSerializerSnapshot",
    "org.apache.flink.queryablestate.client.VoidNamespaceSerializer"
    "$VoidNamespaceSerializerSnapshot",
)(_void)
