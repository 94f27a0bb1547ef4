"""Kryo values: what Flink's `KryoSerializer` (GenericTypeInfo) writes, `kryo.writeClassAndObject`.

Mirrors Flink's `runtime.kryo.KryoSerializer` (serialize, getKryoInstance, the registrations of
`buildKryoRegistrations`), `KryoUtils.applyRegistrations` and `FlinkChillPackageRegistrar`, and,
in Kryo 2.24.0 (Flink 1.x) and Kryo 5.6.2 (Flink 2.x): `Kryo.writeClassAndObject` and
`writeReferenceOrNull`, `util.DefaultClassResolver`, `util.MapReferenceResolver`, `io.Output`
(varints, strings, fixed widths), `serializers.DefaultSerializers`, `DefaultArraySerializers`,
`CollectionSerializer` and `MapSerializer`; in 1.x also chill's `ArraysAsListSerializer`,
`SqlDateSerializer`, `SqlTimeSerializer`, `TimestampSerializer`, `UUIDSerializer` and
`URISerializer` (flink-state-values.md §9).

A value is one class tag (0 null, 1 a class name or a name id, k ≥ 2 registration k - 2), a
reference marker for every class but the primitive wrappers (and, in Kryo 5, enums): 1 a new
object, r ≥ 2 the (r - 2)-th object of this value again; then the serializer's bytes. Which Kryo
wrote it comes from `Context.flink_major`: 1 is Kryo 2, 2 Kryo 5, and unknown is read as Kryo 5
(the Kryo of current Flink; the snapshot itself is the same in both).

JDK types with a known serializer decode, nested to any depth: String, the boxed primitives,
BigInteger, BigDecimal, `java.util.Date`, `java.sql.Date/Time/Timestamp`, UUID, URI, a few JDK
enums, primitive, String and object arrays, the `java.util` lists, sets and maps of
`CollectionSerializer`/`MapSerializer` (TreeSet/TreeMap without a comparator),
`Arrays$ArrayList` and the `Collections` empty and singleton ones. A class of the user's own
(`FieldSerializer`) and a user enum decode only with the job's classes (`Context.classpath`,
read by `kryo_fields` from the class files): the object's value is then a dict of field name →
value (primitive fields as Python scalars, the others as Kryo objects). A field of a generic type
hands its type arguments to the serializer of its value (`TypeArgs`): `CollectionSerializer` and
`MapSerializer` write the elements, keys and values of a final type argument by its serializer,
untagged (2.24 `setGenerics`; 5.6 `Generics.nextGenericClass/nextGenericTypes`, which also
hand them on to nested collections). Anything else (a user
class without the class path, a registered serializer) is `Undecodable`: its bytes cannot be
split without the class.

Decoded values are `KryoObject(java_class, value)` trees (None for null), so that writing gives
back the very bytes: the class picks the serializer, and an object read again through a
back-reference is the same Python object, written again as a back-reference. Bytes Kryo never
writes (a longer varint than needed, a string in the other form, a registered class by name…)
are a `FormatError`, so decode then encode is exact. The Arrow type is Arrow's JSON extension
type (`arrow.json`, stored as a Parquet JSON string): the value's JSON text (docs/values.md),
since a Kryo value has no static type.
"""

from __future__ import annotations

import json
import math
import re
import struct
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from statectl.errors import FormatError
from statectl.formats.serializer_snapshots import SerializerSnapshot
from statectl.formats.values.json_form import (
    MILLIS_PER_DAY,
    base64_json,
    days_json,
    epoch_seconds_json,
    float_json,
    map_json,
    sorted_json,
    time_of_day_json,
)
from statectl.formats.values.kryo_fields import KryoClasses, TypeArgument
from statectl.formats.values.model import Codec, Context, Raw, Undecodable, register
from statectl.formats.values.scalars import (
    MAX_DECIMAL_SCALE,
    check_text_digits,
    decimal_of,
    unscaled_of,
)

if TYPE_CHECKING:
    import pyarrow as pa

KRYO_SNAPSHOT = "org.apache.flink.api.java.typeutils.runtime.kryo.KryoSerializerSnapshot"

MAX_DEPTH = 64  # objects nested in one value
MAX_SHARED_NODES = 1 << 22  # objects a value may add through back-references (and null runs)
_NULL, _NOT_NULL, _NAME_TAG = 0, 1, 1  # class tag 1: a class name (Kryo's NAME = -1, plus 2)

# Kryo's own registrations (ids 0-8, Kryo 2 also 9 = void): a wrapper shares its primitive's id.
_KRYO_IDS = (
    "java.lang.Integer",
    "java.lang.String",
    "java.lang.Float",
    "java.lang.Boolean",
    "java.lang.Byte",
    "java.lang.Character",
    "java.lang.Short",
    "java.lang.Long",
    "java.lang.Double",
)
_SCALA_IDS = range(10, 73)  # chill's Scala registrations, with flink-scala on the class path
_CHILL_FIRST_ID = 73
_CHILL_IDS = (  # FlinkChillPackageRegistrar, ids 73-84
    "java.util.Arrays$ArrayList",
    "java.util.BitSet",
    "java.util.PriorityQueue",
    "java.util.regex.Pattern",
    "java.sql.Date",
    "java.sql.Time",
    "java.sql.Timestamp",
    "java.net.URI",
    "java.net.InetSocketAddress",
    "java.util.UUID",
    "java.util.Locale",
    "java.text.SimpleDateFormat",
)
_FIRST_USER_ID = 85

_INT = "java.lang.Integer"
_STRING = "java.lang.String"

TypeArgs = tuple[TypeArgument, ...]  # what a serializer gets from the field above it


@dataclass(frozen=True, slots=True)
class KryoObject:
    """One object of a Kryo value: its Java class and its content (a str, int, float, bool,
    Decimal, bytes, a list of `KryoObject | None`, a list of (key, value) pairs…)."""

    java_class: str
    value: Any


# --- dialects and registrations ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Dialect:
    """What differs between Kryo 2.24 (Flink 1.x) and Kryo 5.6 (Flink 2.x)."""

    kryo: int  # 2 or 5
    endian: str  # fixed widths: big-endian in Kryo 2, little-endian in Kryo 5
    ascii_limit: int  # the longest string `writeString` writes as ASCII (Kryo 2: < 64; 5: ≤ 32)

    @property
    def kryo5(self) -> bool:
        return self.kryo == 5


KRYO2 = Dialect(2, ">", 63)
KRYO5 = Dialect(5, "<", 32)


@dataclass(frozen=True, slots=True)
class Registry:
    """Class ids of one `KryoSerializer`: Kryo's, the chill registrar's and the snapshot's."""

    by_id: dict[int, str]
    ids: dict[str, int]
    custom: dict[str, str]  # class → its registered serializer: values of it stay raw
    classes: KryoClasses | None = None  # the user's classes, from the job's class path


def build_registry(
    registrations: tuple[tuple[str, str | None], ...],
    dialect: Dialect,
    classes: KryoClasses | None = None,
) -> Registry:
    """`KryoUtils.applyRegistrations` from id 85: a class Kryo already knows keeps its id unless
    it comes with its own serializer; every other takes the next id."""
    by_id = dict(enumerate(_KRYO_IDS))
    if not dialect.kryo5:
        by_id[9] = "void"
    by_id.update({_CHILL_FIRST_ID + i: name for i, name in enumerate(_CHILL_IDS)})
    ids = {name: i for i, name in by_id.items()}
    custom: dict[str, str] = {}
    next_id = _FIRST_USER_ID
    for name, serializer in registrations:
        if serializer is None and name in ids:
            continue
        if serializer is not None:
            custom[name] = (
                "a registered serializer instance" if serializer == "instance" else serializer
            )
        by_id[next_id] = name
        ids[name] = next_id
        next_id += 1
    return Registry(by_id, ids, custom, classes)


# --- families: how each class reads, writes and shows itself -------------------------------------

_WRAPPERS = {
    _INT: "int",
    "java.lang.Long": "long",
    "java.lang.Short": "short",
    "java.lang.Byte": "byte",
    "java.lang.Character": "char",
    "java.lang.Boolean": "boolean",
    "java.lang.Float": "float",
    "java.lang.Double": "double",
}
_FAMILIES = {
    **_WRAPPERS,
    _STRING: "string",
    "java.net.URI": "string",
    "java.math.BigInteger": "biginteger",
    "java.math.BigDecimal": "bigdecimal",
    "java.util.Date": "date",
    "java.sql.Date": "sqldate",
    "java.sql.Time": "sqltime",
    "java.sql.Timestamp": "timestamp",
    "java.util.UUID": "uuid",
    "java.util.ArrayList": "list",
    "java.util.LinkedList": "list",
    "java.util.Vector": "list",
    "java.util.ArrayDeque": "list",
    "java.util.concurrent.CopyOnWriteArrayList": "list",
    "java.util.HashSet": "set",
    "java.util.LinkedHashSet": "set",
    "java.util.TreeSet": "treeset",
    "java.util.HashMap": "map",
    "java.util.LinkedHashMap": "map",
    "java.util.Hashtable": "map",
    "java.util.concurrent.ConcurrentHashMap": "map",
    "java.util.TreeMap": "treemap",
    "java.util.Arrays$ArrayList": "aslist",
    "java.util.Collections$EmptyList": "emptylist",
    "java.util.Collections$EmptySet": "emptyset",
    "java.util.Collections$EmptyMap": "emptymap",
    "java.util.Collections$SingletonList": "singletonlist",
    "java.util.Collections$SingletonSet": "singletonset",
    "java.util.Collections$SingletonMap": "singletonmap",
}
_PRIMITIVE_ARRAYS = {
    "[B": "bytes",
    "[I": "ints",
    "[J": "longs",
    "[S": "shorts",
    "[C": "chars",
    "[Z": "booleans",
    "[F": "floats",
    "[D": "doubles",
}
# JDK enums (EnumSerializer: ordinal + 1); a user enum's constants are not in Kryo's snapshot.
ENUMS = {
    "java.util.concurrent.TimeUnit": (
        "NANOSECONDS",
        "MICROSECONDS",
        "MILLISECONDS",
        "SECONDS",
        "MINUTES",
        "HOURS",
        "DAYS",
    ),
    "java.math.RoundingMode": (
        "UP",
        "DOWN",
        "CEILING",
        "FLOOR",
        "HALF_UP",
        "HALF_DOWN",
        "HALF_EVEN",
        "UNNECESSARY",
    ),
    "java.time.DayOfWeek": (
        "MONDAY",
        "TUESDAY",
        "WEDNESDAY",
        "THURSDAY",
        "FRIDAY",
        "SATURDAY",
        "SUNDAY",
    ),
}
# Array components whose finality is known: a final one is written without a class tag.
_FINAL_COMPONENTS = {*_WRAPPERS, _STRING, "java.util.UUID", "java.net.URI", *ENUMS}
_OPEN_COMPONENTS = {
    "java.lang.Object",
    "java.lang.Number",
    "java.lang.Comparable",
    "java.lang.CharSequence",
    "java.io.Serializable",
    "java.util.Collection",
    "java.util.List",
    "java.util.Set",
    "java.util.Map",
    "java.math.BigInteger",
    "java.math.BigDecimal",
    "java.util.Date",
    "java.sql.Date",
    "java.sql.Time",
    "java.sql.Timestamp",
} | {
    name
    for name, family in _FAMILIES.items()
    if family in ("list", "set", "map", "treeset", "treemap")
}


def family(java_class: str, registry: Registry) -> str:
    """The serializer family of a class; `Undecodable` for a class whose layout is unknown."""
    if java_class in registry.custom:
        raise Undecodable(f"Kryo serializer {registry.custom[java_class]} of {java_class}")
    found = _FAMILIES.get(java_class) or _PRIMITIVE_ARRAYS.get(java_class)
    if found:
        return found
    if java_class in ENUMS:
        return "enum"
    if java_class == "[Ljava.lang.String;":
        return "strings"
    if java_class.startswith("["):
        component = component_of(java_class)
        if component.startswith("[") or component in _FINAL_COMPONENTS | _OPEN_COMPONENTS:
            return "objects"
        if registry.classes is not None and registry.classes.is_final(component) is not None:
            return "objects"
        raise Undecodable(f"Kryo array of {component}: whether the class is final is not known")
    if java_class.startswith(("java.", "javax.", "scala.")):
        raise Undecodable(f"Kryo value of {java_class}: statectl does not read its serializer")
    if registry.classes is None:
        raise Undecodable(
            f"Kryo FieldSerializer of {java_class}: its fields are not in the savepoint"
        )
    if registry.classes.enum_constants(java_class) is not None:
        return "enum"
    registry.classes.layout(java_class)  # Undecodable, saying why, unless FieldSerializer
    return "fields"


def jdk_final(java_class: str) -> bool | None:
    """`Kryo.isFinal` of a JDK class statectl knows; None for any other."""
    if java_class in _FINAL_COMPONENTS:
        return True
    if java_class in _OPEN_COMPONENTS:
        return False
    return None


def _component_final(component: str, registry: Registry) -> bool:
    """Whether an object array's elements are written without a class tag (`Kryo.isFinal`
    of the component; a nested array by its own rule as before)."""
    if component.startswith("[") or component in _FINAL_COMPONENTS:
        return True
    if component in _OPEN_COMPONENTS or registry.classes is None:
        return False
    return registry.classes.is_final(component) is True


def enum_constants(java_class: str, registry: Registry) -> tuple[str, ...]:
    """A JDK enum's constants, or a user enum's from the class path."""
    known = ENUMS.get(java_class)
    if known is None and registry.classes is not None:
        known = registry.classes.enum_constants(java_class)
    if known is None:
        raise Undecodable(f"Kryo enum {java_class}: its constants are not known")
    return known


def component_of(array_class: str) -> str:
    """`java.lang.Object` of `[Ljava.lang.Object;`, `[I` of `[[I`."""
    inner = array_class[1:]
    return inner[1:-1] if inner.startswith("L") and inner.endswith(";") else inner


def uses_references(java_class: str, dialect: Dialect, registry: Registry | None = None) -> bool:
    """`MapReferenceResolver.useReferences`: not for wrappers (and, in Kryo 5, not for enums)."""
    if java_class in _WRAPPERS:
        return False
    if not dialect.kryo5:
        return True
    if java_class in ENUMS:
        return False
    classes = registry.classes if registry is not None else None
    return classes is None or classes.enum_constants(java_class) is None


# --- reading -------------------------------------------------------------------------------------


class Reader:
    """One value's bytes: the position, and the class names and objects seen so far."""

    __slots__ = ("buf", "depth", "dialect", "limit", "names", "nodes", "pos", "refs", "registry")

    def __init__(self, buf: memoryview, pos: int, dialect: Dialect, registry: Registry) -> None:
        self.buf = buf
        self.pos = pos
        self.dialect = dialect
        self.registry = registry
        self.names: list[str] = []
        self.refs: list[tuple[KryoObject | None, int]] = []  # (object, objects in it); None: open
        self.nodes = 0
        self.limit = len(buf) + MAX_SHARED_NODES
        self.depth = 0

    # primitives of `io.Input`

    def fail(self, what: str, at: int | None = None) -> FormatError:
        return FormatError(f"Kryo {what} at offset {self.pos if at is None else at}")

    def take(self, count: int) -> memoryview:
        end = self.pos + count
        if count < 0 or end > len(self.buf):
            raise self.fail(f"{count} bytes do not fit")
        data = self.buf[self.pos : end]
        self.pos = end
        return data

    def byte(self) -> int:
        if self.pos >= len(self.buf):
            raise self.fail("value cut short")
        value = self.buf[self.pos]
        self.pos += 1
        return value

    def fixed(self, fmt: str) -> Any:
        layout = _layout(self.dialect.endian + fmt)
        return layout.unpack(self.take(layout.size))[0]

    def varint(self) -> int:
        """`readVarInt(true)`: an unsigned 32-bit value in its shortest form."""
        return self._var(5, 32)

    def varlong(self) -> int:
        """`readVarLong(true)`: an unsigned 64-bit value (the 9th byte has 8 bits)."""
        return self._var(9, 64)

    def _var(self, most: int, bits: int) -> int:
        start = self.pos
        if start < len(self.buf) and not self.buf[start] & 0x80:  # one byte: most of them
            self.pos = start + 1
            return self.buf[start]
        value, shift = 0, 0
        for index in range(most):
            b = self.byte()
            full = index == 8  # a varlong's 9th byte carries 8 bits
            value |= (b if full else b & 0x7F) << shift
            shift += 7
            if full or not b & 0x80:
                if (index and not b) or value >> bits:
                    raise self.fail("varint not in its shortest form", start)
                return value
        raise self.fail("varint too long", start)

    def int32(self) -> int:
        return _signed(self.varint(), 32)

    def zigzag_int(self) -> int:
        value = self.varint()
        return (value >> 1) ^ -(value & 1)

    def zigzag_long(self) -> int:
        value = self.varlong()
        return (value >> 1) ^ -(value & 1)

    def flag_and_varint(self) -> tuple[bool, int]:
        """`readVarIntFlag`: bit 8 a flag, bit 7 more bytes, 6 bits of the value, then varint."""
        start = self.pos
        first = self.byte()
        value = first & 0x3F
        if first & 0x40:
            shift = 6
            for index in range(4):
                b = self.byte()
                value |= (b & 0x7F) << shift
                shift += 7
                if not b & 0x80 or index == 3:
                    if not b or value >> 32 or (index == 3 and b & 0x80):
                        raise self.fail("length not in its shortest form", start)
                    break
        return bool(first & 0x80), value

    def boolean(self) -> bool:
        value = self.byte()
        if value > 1:
            raise self.fail(f"boolean {value}", self.pos - 1)
        return value == 1

    def count(self, what: str, plus_one: bool, each: int = 1) -> int:
        """A length (+ 1 when 0 means null) that fits the bytes left, `each` bytes an element."""
        start = self.pos
        value = self.varint()
        if plus_one:
            if value == _NULL:
                raise self.fail(f"null {what} inside a value", start)
            value -= 1
        if value >> 31 or value * each > len(self.buf) - self.pos:
            raise self.fail(f"{what} of {value} elements does not fit", start)
        return value

    def string(self, ascii_limit: int | None = None) -> str:
        """`Input.readString`: ASCII with bit 8 on the last byte, or a flagged length + 1 and
        chars of 1-3 bytes (UTF-16 units, so a pair is two). Only the form Kryo writes passes."""
        limit = self.dialect.ascii_limit if ascii_limit is None else ascii_limit
        start = self.pos
        if start < len(self.buf) and not self.buf[start] & 0x80:
            text = self._ascii()
            if not 2 <= len(text) <= limit:
                raise self.fail("string in the ASCII form Kryo does not use for it", start)
            return text
        _flag, length = self.flag_and_varint()
        if length == _NULL:
            raise self.fail("null string inside a value", start)
        text = self._chars(length - 1)
        if 2 <= len(text) <= limit and text.isascii():
            raise self.fail("ASCII string in the long form", start)
        return _from_units(text)

    def _ascii(self) -> str:
        start = self.pos
        last = _HIGH_BIT.search(self.buf, start)  # the last char: bit 8 set
        if last is None:
            raise self.fail("ASCII string cut short", start)
        end = last.start()
        data = bytearray(self.buf[start : end + 1])
        data[-1] &= 0x7F
        self.pos = end + 1
        return data.decode("ascii")

    def _chars(self, count: int) -> str:
        if count > len(self.buf) - self.pos:
            raise self.fail(f"string of {count} chars does not fit")
        head = bytes(self.buf[self.pos : self.pos + count])
        if head.isascii():
            self.pos += count
            return head.decode("ascii")
        return "".join(chr(self._char()) for _ in range(count))

    def _char(self) -> int:
        start = self.pos
        b = self.byte()
        kind = b >> 4
        if kind < 8:
            return b
        if kind in (12, 13):
            code = (b & 0x1F) << 6 | self._continuation()
            if code < 0x80:
                raise self.fail("overlong char", start)
            return code
        if kind == 14:
            code = (b & 0x0F) << 12 | self._continuation() << 6 | self._continuation()
            if code < 0x800:
                raise self.fail("overlong char", start)
            return code
        raise self.fail(f"char byte {b:#04x}", start)

    def _continuation(self) -> int:
        b = self.byte()
        if b >> 6 != 2:
            raise self.fail(f"char continuation byte {b:#04x}", self.pos - 1)
        return b & 0x3F

    # classes and objects of `Kryo`

    def class_and_object(self, type_args: TypeArgs = ()) -> KryoObject | None:
        """`readClassAndObject`: a class tag, then (unless null) the object."""
        java_class = self.read_class()
        return None if java_class is None else self.read_object(java_class, False, type_args)

    def read_class(self) -> str | None:
        """`DefaultClassResolver.readClass`: null, a registered id, or a name (first time)."""
        start = self.pos
        tag = self.varint()
        if tag == _NULL:
            return None
        if tag == _NAME_TAG:
            return self._read_name(start)
        class_id = tag - 2
        name = self.registry.by_id.get(class_id)
        if name is not None:
            return name
        if class_id in _SCALA_IDS:
            raise Undecodable(f"Kryo class id {class_id}: a Scala class of chill's registrations")
        raise self.fail(f"class id {class_id} is not registered", start)

    def _read_name(self, start: int) -> str:
        name_id = self.varint()
        if name_id < len(self.names):
            return self.names[name_id]
        if name_id != len(self.names):
            raise self.fail(f"class name id {name_id} out of order", start)
        name = self.string(None if not self.dialect.kryo5 else 1 << 31)
        if name in self.registry.ids:
            raise self.fail(f"registered class {name} written by name", start)
        self.names.append(name)
        return name

    def read_object(
        self, java_class: str, may_be_null: bool, type_args: TypeArgs = ()
    ) -> KryoObject | None:
        """`readObject(OrNull)`: the reference marker (or null flag), then the object, its
        serializer given the type arguments of the field or collection it is in."""
        start = self.pos
        if not uses_references(java_class, self.dialect, self.registry):
            if may_be_null:
                marker = self.varint()
                if marker == _NULL:
                    return None
                if marker != _NOT_NULL:
                    raise self.fail(f"null flag {marker}", start)
            return self._new(java_class, type_args)[0]
        marker = self.varint()
        if marker == _NOT_NULL:
            slot = len(self.refs)
            self.refs.append((None, 0))
            obj, size = self._new(java_class, type_args)
            self.refs[slot] = (obj, size)
            return obj
        if marker == _NULL:
            if may_be_null:
                return None
            raise self.fail("null reference marker", start)
        return self._back_reference(marker - 2, java_class, start)

    def _back_reference(self, index: int, java_class: str, start: int) -> KryoObject:
        if index >= len(self.refs):
            raise self.fail(f"reference to object {index}, only {len(self.refs)} read", start)
        obj, size = self.refs[index]
        if obj is None:
            raise Undecodable("Kryo value refers to an object that contains it (a cycle)")
        if obj.java_class != java_class:
            raise self.fail(f"reference to a {obj.java_class} as a {java_class}", start)
        self.add_nodes(size)
        return obj

    def add_nodes(self, count: int) -> None:
        self.nodes += count
        if self.nodes > self.limit:
            raise self.fail("value expands to too many objects through back-references")

    def _new(self, java_class: str, type_args: TypeArgs) -> tuple[KryoObject, int]:
        kind = family(java_class, self.registry)
        if self.depth >= MAX_DEPTH:
            raise self.fail(f"value nested more than {MAX_DEPTH} deep")
        self.depth += 1
        before = self.nodes
        self.add_nodes(1)
        generic = _GENERIC_READERS.get(kind) if takes_type_args(kind, self.dialect) else None
        if generic is not None:
            value = generic(self, java_class, type_args)
        else:
            value = _READERS[kind](self, java_class)
        self.depth -= 1
        return KryoObject(java_class, value), self.nodes - before


_HIGH_BIT = re.compile(rb"[\x80-\xff]")


def _signed(value: int, bits: int) -> int:
    return value - (1 << bits) if value >> (bits - 1) else value


def _from_units(text: str) -> str:
    """Java chars (UTF-16 units) as a Python string: surrogate pairs joined."""
    if not any(0xD800 <= ord(c) <= 0xDFFF for c in text):
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


def _to_units(text: str) -> list[int]:
    data = text.encode("utf-16-le", "surrogatepass")
    return [data[i] | data[i + 1] << 8 for i in range(0, len(data), 2)]


# family readers


def _read_float(r: Reader, fmt: str) -> float:
    """A float or double; only Java's one NaN (`floatToIntBits`) can be written back."""
    start = r.pos
    value: float = r.fixed(fmt)
    if math.isnan(value) and r.buf[start : r.pos] != _layout(r.dialect.endian + fmt).pack(value):
        raise r.fail("NaN with other bits than Java's floatToIntBits", start)
    return value


@lru_cache(maxsize=32)
def _layout(fmt: str) -> struct.Struct:
    return struct.Struct(fmt)


def _read_string_object(r: Reader, _cls: str) -> str:
    return r.string()


def _read_big_integer(r: Reader, _cls: str = "") -> int:
    start = r.pos
    length = r.count("BigInteger", True)
    check_text_digits(length, start)
    data = bytes(r.take(length))
    value = int.from_bytes(data, "big", signed=True)
    if not data or _big_bytes(value) != data:
        raise r.fail("BigInteger not in its shortest bytes", start)
    return value


def _big_bytes(value: int) -> bytes:
    return value.to_bytes(value.bit_length() // 8 + 1, "big", signed=True)


def _read_big_decimal(r: Reader, _cls: str) -> Decimal:
    unscaled = _read_big_integer(r)
    scale = r.zigzag_int()
    if abs(scale) > MAX_DECIMAL_SCALE:  # its plain string (the JSON form) would be that long
        raise Undecodable(f"Kryo BigDecimal with scale {scale}")
    return decimal_of(unscaled, scale)


def _read_millis(r: Reader, _cls: str) -> int:
    return _signed(r.varlong(), 64)


def _read_timestamp(r: Reader, _cls: str) -> tuple[int, int]:
    """(epoch seconds, nanos) as `java.sql.Timestamp` holds them. Chill writes `getTime()`
    (millis of the nanos included), Kryo 5 the whole seconds in millis; then the nanos."""
    start = r.pos
    millis = _signed(r.varlong(), 64)
    nanos = _signed(r.varint(), 32)
    seconds = millis // 1000
    expected = seconds * 1000 if r.dialect.kryo5 else seconds * 1000 + nanos // 1_000_000
    if not 0 <= nanos < 1_000_000_000 or millis != expected:
        raise r.fail(f"Timestamp of {millis} ms and {nanos} ns", start)
    return seconds, nanos


def _read_uuid(r: Reader, _cls: str) -> tuple[int, int]:
    if r.dialect.kryo5:
        return r.fixed("q"), r.fixed("q")
    return r.zigzag_long(), r.zigzag_long()


def _read_enum(r: Reader, java_class: str) -> str:
    start = r.pos
    ordinal = r.varint() - 1
    constants = enum_constants(java_class, r.registry)
    if not 0 <= ordinal < len(constants):
        raise r.fail(f"ordinal {ordinal} of {java_class}", start)
    return constants[ordinal]


def _no_comparator(r: Reader, java_class: str) -> None:
    """TreeSet/TreeMap write their comparator first; only the natural order (null) is read."""
    if r.class_and_object() is not None:
        raise Undecodable(f"Kryo {java_class} with a comparator")


def takes_type_args(kind: str, dialect: Dialect) -> bool:
    """Whether the serializer of a family uses the type arguments it is handed: Kryo's
    `CollectionSerializer` and `MapSerializer` (and in Kryo 5 `ArraysAsListSerializer`, one of
    them; chill's of Kryo 2 is not)."""
    return kind in _GENERIC_READERS and (dialect.kryo5 or kind != "aslist")


def _known_element(type_args: TypeArgs) -> TypeArgument | None:
    """A collection's element type when final (2.24 `CollectionSerializer.setGenerics`, 5.6
    `nextGenericClass`): its elements are then written by its serializer, untagged."""
    return type_args[0] if type_args and type_args[0].value_class else None


def _element_args(type_args: TypeArgs) -> TypeArgs:
    """What a collection hands its elements: its last argument's arguments (Kryo 5 pushes that
    `GenericType`; Kryo 2's arguments have none)."""
    return type_args[-1].args if type_args else ()


def _map_args(type_args: TypeArgs) -> tuple[TypeArgument | None, TypeArgument | None]:
    if not type_args:
        return None, None
    if len(type_args) != 2:
        raise Undecodable(f"a Kryo map given {len(type_args)} type arguments")
    return type_args[0], type_args[1]


def _read_collection(r: Reader, java_class: str, type_args: TypeArgs = ()) -> list[Any]:
    sorted_ = java_class == "java.util.TreeSet"
    known, nested = _known_element(type_args), _element_args(type_args)
    if not r.dialect.kryo5:
        if sorted_:
            _no_comparator(r, java_class)
        length = r.count("collection", False)
        if known is not None:
            return [r.read_object(known.java_class, True, nested) for _ in range(length)]
        return [r.class_and_object(nested) for _ in range(length)]
    start = r.pos
    flag, length = r.flag_and_varint()
    if length == _NULL or length >> 31:
        raise r.fail(f"collection length {length - 1}", start)
    length -= 1
    if sorted_:
        _no_comparator(r, java_class)
    if length == 0:
        if flag:
            raise r.fail("empty collection flagged", start)
        return []
    if length > len(r.buf) - r.pos and (known is not None or not flag):
        raise r.fail(f"collection of {length} elements does not fit", start)
    if known is not None:  # the flag says whether an element is null
        items = [r.read_object(known.java_class, flag, nested) for _ in range(length)]
        if flag and None not in items:
            raise r.fail("collection flagged as holding null without one", start)
        return items
    return _read_elements(r, length, flag, start, nested)


def _read_elements(
    r: Reader, length: int, same_type: bool, start: int, nested: TypeArgs
) -> list[KryoObject | None]:
    """Kryo 5 `CollectionSerializer` of elements of no known final class: elements of one
    class share one class tag (and a has-null flag); mixed ones each have their own."""
    if not same_type:
        items = [r.class_and_object(nested) for _ in range(length)]
        if len({item.java_class for item in items if item is not None}) < 2:
            raise r.fail("collection of one class written as mixed", start)
        return items
    element_class = r.read_class()
    if element_class is None:
        r.add_nodes(length)
        return [None] * length
    has_null = r.boolean()
    if length > len(r.buf) - r.pos:  # every element takes a byte at least
        raise r.fail(f"collection of {length} elements does not fit", start)
    items = [r.read_object(element_class, has_null, nested) for _ in range(length)]
    if has_null and None not in items:
        raise r.fail("collection flagged as holding null without one", start)
    return items


def _read_map(r: Reader, java_class: str, type_args: TypeArgs = ()) -> list[tuple[Any, Any]]:
    """`MapSerializer`: each key, then its value, by the serializer of a final type argument
    (with a reference marker or null flag), else tagged; each given its argument's arguments."""
    sorted_ = java_class == "java.util.TreeMap"
    if sorted_ and not r.dialect.kryo5:
        _no_comparator(r, java_class)
    length = r.count("map", r.dialect.kryo5, 2)
    if sorted_ and r.dialect.kryo5:
        _no_comparator(r, java_class)
    key, value = _map_args(type_args)
    return [(_read_map_part(r, key), _read_map_part(r, value)) for _ in range(length)]


def _read_map_part(r: Reader, arg: TypeArgument | None) -> KryoObject | None:
    if arg is None:
        return r.class_and_object()
    if arg.value_class is None:
        return r.class_and_object(arg.args)
    return r.read_object(arg.value_class, True, arg.args)


def _read_as_list(r: Reader, java_class: str, type_args: TypeArgs = ()) -> Any:
    """`Arrays.asList`: chill (1.x) writes the length, the component class, then each element;
    Kryo 5 reads and writes it as any collection."""
    if r.dialect.kryo5:
        return _read_collection(r, java_class, type_args)
    length = r.count("Arrays.asList", False)
    component = r.read_class()
    if component is None:
        raise r.fail("Arrays.asList without a component class")
    return component, [r.class_and_object() for _ in range(length)]


def _read_primitive_array(r: Reader, java_class: str) -> Any:
    kind = _PRIMITIVE_ARRAYS[java_class]
    width = {"shorts": 2, "chars": 2, "floats": 4, "doubles": 8}.get(kind, 1)
    length = r.count("array", True, width)
    if kind == "bytes":
        return bytes(r.take(length))
    if kind == "ints":
        return [r.zigzag_int() for _ in range(length)]
    if kind == "longs":
        return [r.zigzag_long() for _ in range(length)]
    if kind == "booleans":
        return [r.boolean() for _ in range(length)]
    if kind in ("floats", "doubles"):
        fmt = "f" if kind == "floats" else "d"
        return [_read_float(r, fmt) for _ in range(length)]
    values = [r.fixed("h" if kind == "shorts" else "H") for _ in range(length)]
    return values if kind == "shorts" else _from_units("".join(map(chr, values)))


def _read_object_array(r: Reader, java_class: str) -> list[KryoObject | None]:
    """`ObjectArraySerializer` (and `StringArraySerializer`): length + 1, then a final
    component's elements by its serializer (null flag or reference marker), others tagged."""
    length = r.count("array", True)
    component = _STRING if java_class == "[Ljava.lang.String;" else component_of(java_class)
    if _component_final(component, r.registry):
        return [r.read_object(component, True) for _ in range(length)]
    return [r.class_and_object() for _ in range(length)]


def _read_nothing(r: Reader, _cls: str) -> list[Any]:
    return []


def _read_singleton(r: Reader, _cls: str) -> list[Any]:
    return [r.class_and_object()]


def _read_singleton_map(r: Reader, _cls: str) -> list[Any]:
    return [(r.class_and_object(), r.class_and_object())]


def _read_fields(r: Reader, java_class: str) -> dict[str, Any]:
    """`FieldSerializer.read`: each field of the class path's layout, in Kryo's order: a
    primitive directly, a final type by its serializer (reference marker or null flag), any
    other as a class tag and an object (`kryo_fields`)."""
    assert r.registry.classes is not None  # `family` said "fields"
    values: dict[str, Any] = {}
    for field in r.registry.classes.layout(java_class):
        if field.primitive:
            values[field.name] = _READERS[field.type_name](r, field.type_name)
        elif field.value_class is None:
            values[field.name] = r.class_and_object(field.type_args)
        else:
            values[field.name] = r.read_object(field.value_class, True, field.type_args)
    return values


_READERS: dict[str, Callable[[Reader, str], Any]] = {
    "int": lambda r, _c: r.zigzag_int(),
    "long": lambda r, _c: r.zigzag_long(),
    "short": lambda r, _c: r.fixed("h"),
    "byte": lambda r, _c: _signed(r.byte(), 8),
    "char": lambda r, _c: chr(r.fixed("H")),
    "boolean": lambda r, _c: r.boolean(),
    "float": lambda r, _c: _read_float(r, "f"),
    "double": lambda r, _c: _read_float(r, "d"),
    "string": _read_string_object,
    "biginteger": _read_big_integer,
    "bigdecimal": _read_big_decimal,
    "date": _read_millis,
    "sqldate": _read_millis,
    "sqltime": _read_millis,
    "timestamp": _read_timestamp,
    "uuid": _read_uuid,
    "enum": _read_enum,
    "list": _read_collection,
    "set": _read_collection,
    "treeset": _read_collection,
    "map": _read_map,
    "treemap": _read_map,
    "aslist": _read_as_list,
    "emptylist": _read_nothing,
    "emptyset": _read_nothing,
    "emptymap": _read_nothing,
    "singletonlist": _read_singleton,
    "singletonset": _read_singleton,
    "singletonmap": _read_singleton_map,
    **{kind: _read_primitive_array for kind in _PRIMITIVE_ARRAYS.values()},
    "strings": _read_object_array,
    "objects": _read_object_array,
    "fields": _read_fields,
}
_GENERIC_READERS: dict[str, Callable[[Reader, str, TypeArgs], Any]] = {
    "list": _read_collection,
    "set": _read_collection,
    "treeset": _read_collection,
    "aslist": _read_as_list,
    "map": _read_map,
    "treemap": _read_map,
}


# --- writing -------------------------------------------------------------------------------------


class Writer:
    """Appends one value as Kryo writes it: class names and objects are written once, then
    referred to (objects by identity, as `MapReferenceResolver` does)."""

    __slots__ = ("dialect", "keep", "names", "out", "registry", "written")

    def __init__(self, out: bytearray, dialect: Dialect, registry: Registry) -> None:
        self.out = out
        self.dialect = dialect
        self.registry = registry
        self.names: dict[str, int] = {}
        self.written: dict[int, int] = {}
        self.keep: list[KryoObject] = []  # holds every written object, so ids stay unique

    def varint(self, value: int) -> None:
        value &= 0xFFFFFFFF
        self._var(value)

    def varlong(self, value: int) -> None:
        value &= 0xFFFFFFFFFFFFFFFF
        for _ in range(8):
            if value < 0x80:
                self.out.append(value)
                return
            self.out.append(value & 0x7F | 0x80)
            value >>= 7
        self.out.append(value)

    def _var(self, value: int) -> None:
        while value >= 0x80:
            self.out.append(value & 0x7F | 0x80)
            value >>= 7
        self.out.append(value)

    def zigzag_int(self, value: int) -> None:
        self.varint((value << 1) ^ (value >> 31))

    def zigzag_long(self, value: int) -> None:
        self.varlong((value << 1) ^ (value >> 63))

    def fixed(self, fmt: str, value: Any) -> None:
        self.out += _layout(self.dialect.endian + fmt).pack(value)

    def flag_and_varint(self, flag: bool, value: int) -> None:
        first = value & 0x3F | (0x80 if flag else 0)
        if value >> 6:
            self.out.append(first | 0x40)
            self._var(value >> 6)
        else:
            self.out.append(first)

    def string(self, text: str, ascii_limit: int | None = None) -> None:
        limit = self.dialect.ascii_limit if ascii_limit is None else ascii_limit
        if text.isascii():  # a char a byte, in either form
            data = bytearray(text.encode("ascii"))
            if 2 <= len(data) <= limit:
                data[-1] |= 0x80
            else:
                self.flag_and_varint(True, len(data) + 1)
            self.out += data
            return
        units = _to_units(text)
        self.flag_and_varint(True, len(units) + 1)
        for unit in units:
            if unit < 0x80:
                self.out.append(unit)
            elif unit < 0x800:
                self.out += bytes((0xC0 | unit >> 6, 0x80 | unit & 0x3F))
            else:
                self.out += bytes((0xE0 | unit >> 12, 0x80 | unit >> 6 & 0x3F, 0x80 | unit & 0x3F))

    def class_and_object(self, obj: Any, type_args: TypeArgs = ()) -> None:
        if obj is None:
            self.out.append(_NULL)
            return
        if not isinstance(obj, KryoObject):
            raise Undecodable(f"not a Kryo object: {type(obj).__name__}")
        self.write_class(obj.java_class)
        self.write_object(obj, obj.java_class, False, type_args)

    def write_class(self, java_class: str) -> None:
        class_id = self.registry.ids.get(java_class)
        if class_id is not None:
            self.varint(class_id + 2)
            return
        self.out.append(_NAME_TAG)
        name_id = self.names.get(java_class)
        if name_id is not None:
            self.varint(name_id)
            return
        self.names[java_class] = len(self.names)
        self.varint(len(self.names) - 1)
        self.string(java_class, 1 << 31 if self.dialect.kryo5 and java_class.isascii() else None)

    def write_object(
        self, obj: Any, java_class: str, may_be_null: bool, type_args: TypeArgs = ()
    ) -> None:
        if obj is None:
            if not may_be_null:
                raise Undecodable(f"Kryo cannot write a null {java_class} here")
            self.out.append(_NULL)
            return
        if not isinstance(obj, KryoObject) or obj.java_class != java_class:
            raise Undecodable(f"a {java_class} expected, not {obj!r}"[:200])
        if uses_references(java_class, self.dialect, self.registry):
            ref = self.written.get(id(obj))
            if ref is not None:
                self.varint(ref + 2)
                return
            self.written[id(obj)] = len(self.written)
            self.keep.append(obj)
            self.out.append(_NOT_NULL)
        elif may_be_null:
            self.out.append(_NOT_NULL)
        kind = family(java_class, self.registry)
        generic = _GENERIC_WRITERS.get(kind) if takes_type_args(kind, self.dialect) else None
        if generic is not None:
            generic(self, java_class, obj.value, type_args)
        else:
            _WRITERS[kind](self, java_class, obj.value)


def _write_big_integer(w: Writer, _cls: str, value: int) -> None:
    data = _big_bytes(value)
    w.varint(len(data) + 1)
    w.out += data


def _write_big_decimal(w: Writer, _cls: str, value: Decimal) -> None:
    unscaled, scale = unscaled_of(value)
    _write_big_integer(w, _cls, unscaled)
    w.zigzag_int(scale)


def _write_timestamp(w: Writer, _cls: str, value: tuple[int, int]) -> None:
    seconds, nanos = value
    w.varlong(seconds * 1000 + (0 if w.dialect.kryo5 else nanos // 1_000_000))
    w.varint(nanos)


def _write_uuid(w: Writer, _cls: str, value: tuple[int, int]) -> None:
    for half in value:
        if w.dialect.kryo5:
            w.fixed("q", half)
        else:
            w.zigzag_long(half)


def _write_collection(
    w: Writer, java_class: str, items: list[Any], type_args: TypeArgs = ()
) -> None:
    sorted_ = java_class == "java.util.TreeSet"
    known, nested = _known_element(type_args), _element_args(type_args)
    if not w.dialect.kryo5:
        if sorted_:
            w.out.append(_NULL)
        w.varint(len(items))
        for item in items:
            if known is not None:
                w.write_object(item, known.java_class, True, nested)
            else:
                w.class_and_object(item, nested)
        return
    if known is not None and items:  # the flag says whether an element is null
        has_null = None in items
        w.flag_and_varint(has_null, len(items) + 1)
        if sorted_:
            w.out.append(_NULL)
        for item in items:
            w.write_object(item, known.java_class, has_null, nested)
        return
    classes = {item.java_class for item in items if isinstance(item, KryoObject)}
    same_type = bool(items) and len(classes) < 2
    w.flag_and_varint(same_type, len(items) + 1)
    if sorted_:
        w.out.append(_NULL)
    if not same_type:
        for item in items:
            w.class_and_object(item, nested)
        return
    if not classes:
        w.out.append(_NULL)  # every element is null
        return
    (element_class,) = classes
    w.write_class(element_class)
    has_null = None in items
    w.out.append(1 if has_null else 0)
    for item in items:
        w.write_object(item, element_class, has_null, nested)


def _write_map(
    w: Writer, java_class: str, pairs: list[tuple[Any, Any]], type_args: TypeArgs = ()
) -> None:
    sorted_ = java_class == "java.util.TreeMap"
    if sorted_ and not w.dialect.kryo5:
        w.out.append(_NULL)
    w.varint(len(pairs) + (1 if w.dialect.kryo5 else 0))
    if sorted_ and w.dialect.kryo5:
        w.out.append(_NULL)
    key_arg, value_arg = _map_args(type_args)
    for key, item in pairs:
        _write_map_part(w, key, key_arg)
        _write_map_part(w, item, value_arg)


def _write_map_part(w: Writer, obj: Any, arg: TypeArgument | None) -> None:
    if arg is None:
        w.class_and_object(obj)
    elif arg.value_class is None:
        w.class_and_object(obj, arg.args)
    else:
        w.write_object(obj, arg.value_class, True, arg.args)


def _write_as_list(w: Writer, java_class: str, value: Any, type_args: TypeArgs = ()) -> None:
    if w.dialect.kryo5:
        _write_collection(w, java_class, value, type_args)
        return
    component, items = value
    w.varint(len(items))
    w.write_class(component)
    for item in items:
        w.class_and_object(item)


def _write_primitive_array(w: Writer, java_class: str, value: Any) -> None:
    kind = _PRIMITIVE_ARRAYS[java_class]
    if kind == "chars":
        value = _to_units(value)
    w.varint(len(value) + 1)
    if kind == "bytes":
        w.out += value
        return
    for item in value:
        if kind == "ints":
            w.zigzag_int(_java_int(item, 32))
        elif kind == "longs":
            w.zigzag_long(_java_int(item, 64))
        elif kind == "booleans":
            w.out.append(1 if item else 0)
        else:
            w.fixed({"shorts": "h", "chars": "H", "floats": "f", "doubles": "d"}[kind], item)


def _write_object_array(w: Writer, java_class: str, items: list[Any]) -> None:
    w.varint(len(items) + 1)
    component = _STRING if java_class == "[Ljava.lang.String;" else component_of(java_class)
    final = _component_final(component, w.registry)
    for item in items:
        if final:
            w.write_object(item, component, True)
        else:
            w.class_and_object(item)


def _write_enum(w: Writer, java_class: str, name: str) -> None:
    w.varint(enum_constants(java_class, w.registry).index(name) + 1)


def _write_singletons(w: Writer, _cls: str, items: list[Any]) -> None:
    for item in items:
        if isinstance(item, tuple):
            w.class_and_object(item[0])
            w.class_and_object(item[1])
        else:
            w.class_and_object(item)


def _java_int(value: Any, bits: int) -> int:
    """An int of a Java integral type; anything else cannot be written."""
    if not isinstance(value, int) or not -(1 << (bits - 1)) <= value < 1 << (bits - 1):
        raise ValueError(f"{value!r} is not a {bits}-bit integer")
    return value


def _write_fields(w: Writer, java_class: str, values: Any) -> None:
    """`FieldSerializer.write`: the fields of a dict by the class path's layout."""
    assert w.registry.classes is not None  # `family` said "fields"
    layout = w.registry.classes.layout(java_class)
    if not isinstance(values, dict) or set(values) != {field.name for field in layout}:
        raise Undecodable(f"a {java_class} needs exactly the fields of its class: {values!r}"[:300])
    for field in layout:
        value = values[field.name]
        if field.primitive:
            _WRITERS[field.type_name](w, field.type_name, value)
        elif field.value_class is None:
            w.class_and_object(value, field.type_args)
        else:
            w.write_object(value, field.value_class, True, field.type_args)


_WRITERS: dict[str, Callable[[Writer, str, Any], None]] = {
    "int": lambda w, _c, v: w.zigzag_int(_java_int(v, 32)),
    "long": lambda w, _c, v: w.zigzag_long(_java_int(v, 64)),
    "short": lambda w, _c, v: w.fixed("h", v),
    "byte": lambda w, _c, v: w.out.append(_java_int(v, 8) & 0xFF),
    "char": lambda w, _c, v: w.fixed("H", ord(v)),
    "boolean": lambda w, _c, v: w.out.append(1 if v else 0),
    "float": lambda w, _c, v: w.fixed("f", v),
    "double": lambda w, _c, v: w.fixed("d", v),
    "string": lambda w, _c, v: w.string(v),
    "biginteger": _write_big_integer,
    "bigdecimal": _write_big_decimal,
    "date": lambda w, _c, v: w.varlong(v),
    "sqldate": lambda w, _c, v: w.varlong(v),
    "sqltime": lambda w, _c, v: w.varlong(v),
    "timestamp": _write_timestamp,
    "uuid": _write_uuid,
    "enum": _write_enum,
    "list": _write_collection,
    "set": _write_collection,
    "treeset": _write_collection,
    "map": _write_map,
    "treemap": _write_map,
    "aslist": _write_as_list,
    "emptylist": _write_singletons,
    "emptyset": _write_singletons,
    "emptymap": _write_singletons,
    "singletonlist": _write_singletons,
    "singletonset": _write_singletons,
    "singletonmap": _write_singletons,
    **{kind: _write_primitive_array for kind in _PRIMITIVE_ARRAYS.values()},
    "strings": _write_object_array,
    "objects": _write_object_array,
    "fields": _write_fields,
}
_GENERIC_WRITERS: dict[str, Callable[[Writer, str, Any, TypeArgs], None]] = {
    "list": _write_collection,
    "set": _write_collection,
    "treeset": _write_collection,
    "aslist": _write_as_list,
    "map": _write_map,
    "treemap": _write_map,
}


# --- JSON ----------------------------------------------------------------------------------------


def to_json(obj: KryoObject | None) -> Any:
    """The JSON form of a decoded Kryo object (docs/values.md)."""
    if obj is None:
        return None
    if isinstance(obj.value, dict):  # a user class's fields (FieldSerializer)
        return {name: _field_json(value) for name, value in obj.value.items()}
    return _JSON.get(_json_family(obj.java_class), _plain)(obj)


def _field_json(value: Any) -> Any:
    """A field's JSON: a Kryo object's, or a primitive field's (floats as `float_json`)."""
    if value is None or isinstance(value, KryoObject):
        return to_json(value)
    return float_json(value) if isinstance(value, float) else value


def _json_family(java_class: str) -> str:
    if java_class in _FAMILIES:
        return _FAMILIES[java_class]
    if java_class in _PRIMITIVE_ARRAYS:
        return _PRIMITIVE_ARRAYS[java_class]
    return "enum" if java_class in ENUMS else "objects" if java_class.startswith("[") else ""


def _plain(obj: KryoObject) -> Any:
    return obj.value


def _items(obj: KryoObject) -> list[Any]:
    value = obj.value
    if obj.java_class == "java.util.Arrays$ArrayList" and isinstance(value, tuple):
        value = value[1]
    return [to_json(item) for item in value]


def _pairs(obj: KryoObject) -> Any:
    return map_json([(to_json(key), to_json(item)) for key, item in obj.value])


def _float(obj: KryoObject) -> Any:
    return float_json(obj.value)


def _uuid(obj: KryoObject) -> str:
    high, low = obj.value
    return str(uuid.UUID(int=(high & 0xFFFFFFFFFFFFFFFF) << 64 | (low & 0xFFFFFFFFFFFFFFFF)))


def _instant(seconds: int, nanos: int) -> str:
    return epoch_seconds_json(seconds, nanos, True)


_JSON: dict[str, Callable[[KryoObject], Any]] = {
    "float": _float,
    "double": _float,
    "floats": lambda o: [float_json(v) for v in o.value],
    "doubles": lambda o: [float_json(v) for v in o.value],
    "chars": lambda o: list(o.value),
    "bytes": lambda o: base64_json(o.value),
    "biginteger": lambda o: str(o.value),
    "bigdecimal": lambda o: format(o.value, "f"),
    "date": lambda o: _instant(o.value // 1000, o.value % 1000 * 1_000_000),
    "sqldate": lambda o: days_json(o.value // MILLIS_PER_DAY),
    "sqltime": lambda o: time_of_day_json(o.value % MILLIS_PER_DAY * 1_000_000),
    "timestamp": lambda o: _instant(*o.value),
    "uuid": _uuid,
    "list": _items,
    "aslist": _items,
    "emptylist": _items,
    "singletonlist": _items,
    "strings": _items,
    "objects": _items,
    "set": lambda o: sorted_json(_items(o)),
    "treeset": lambda o: sorted_json(_items(o)),
    "emptyset": lambda o: sorted_json(_items(o)),
    "singletonset": lambda o: sorted_json(_items(o)),
    "map": _pairs,
    "treemap": _pairs,
    "emptymap": lambda o: {},
    "singletonmap": _pairs,
}


# --- the codec -----------------------------------------------------------------------------------


class KryoCodec(Codec):
    """`KryoSerializer`: one `writeClassAndObject` value of Kryo 2 (1.x) or Kryo 5 (2.x)."""

    __slots__ = ("dialect", "registry", "type_class")

    def __init__(self, type_class: str, dialect: Dialect, registry: Registry) -> None:
        self.type_class = type_class
        self.dialect = dialect
        self.registry = registry

    def read(self, buf: memoryview, pos: int) -> tuple[Any, int]:
        reader = Reader(buf, pos, self.dialect, self.registry)
        value = reader.class_and_object()
        return value, reader.pos

    def write(self, value: Any, out: bytearray) -> None:
        if isinstance(value, Raw):
            out += value.data
            return
        staged = bytearray()  # nothing reaches `out` when a part cannot be written
        try:
            Writer(staged, self.dialect, self.registry).class_and_object(value)
        except (ValueError, TypeError, KeyError, struct.error, OverflowError) as exc:
            raise Undecodable(f"Kryo value cannot be written: {exc}") from exc
        out += staged

    def arrow_type(self) -> pa.DataType:
        import pyarrow as pa

        return pa.json_()

    def to_arrow(self, value: Any) -> Any:
        return json.dumps(to_json(value), ensure_ascii=False, separators=(",", ":"))

    def from_arrow(self, value: Any) -> Any:
        """Not from the JSON text: it does not say the Java class of each object (Integer or
        Long, HashMap or TreeMap), which picks the bytes."""
        raise Undecodable("Kryo values are written back from their bytes, not from their JSON")

    def to_json(self, value: Any) -> Any:
        return to_json(value)

    def describe(self) -> str:
        return f"KRYO({self.type_class})"

    def tree(self) -> dict[str, Any]:
        return {"type": "KRYO", "class": self.type_class, "kryo": self.dialect.kryo}


@register(KRYO_SNAPSHOT)
def _kryo(snapshot: SerializerSnapshot, context: Context) -> Codec:
    dialect = KRYO2 if context.flink_major == 1 else KRYO5
    overridden = [
        name
        for name in snapshot.param("default_serializers", ())
        if name.startswith(("java.", "javax."))
    ]
    if overridden:
        raise Undecodable(f"Kryo default serializer registered for {overridden[0]}")
    classes = None
    if context.classpath is not None:
        classes = KryoClasses(context.classpath, dialect.kryo, jdk_final)
    registry = build_registry(tuple(snapshot.param("registrations", ())), dialect, classes)
    return KryoCodec(snapshot.type_name or "java.lang.Object", dialect, registry)
