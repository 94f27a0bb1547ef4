"""Flink 1.x serializer snapshots and values rewritten as Flink 2.x writes them for the same type.

Flink 2.x (FLINK-34123, FLIP-398) no longer serializes a POJO field of a parameterized `List`,
`Map` or `Set` type with Kryo: `TypeExtractor.privateGetForClass`, given the field's
`ParameterizedType` whose type arguments are all classes, returns for a raw class assignable to
`Map` a `NullableMapTypeInfo`, else to `List` a `NullableListTypeInfo`, else to `Set` a
`NullableSetTypeInfo` (interfaces and concrete classes alike: `ArrayList<String>` too), each
argument's type information from `TypeExtractor.createTypeInfo(Class)`. Their serializers
(`NullableListTypeInfo/NullableMapTypeInfo/NullableSetTypeInfo.createSerializer`) are

- `List<T>`: `NullableSerializer(ListSerializer(NullableSerializer(T)))`,
- `Map<K, V>`: `NullableSerializer(MapSerializer(NullableSerializer(K), V))`,
- `Set<T>`: `NullableSerializer(SetSerializer(T))`,

every `NullableSerializer.wrap(…, false)`: no padding. Flink 1.x gave those fields
`GenericTypeInfo` (a `KryoSerializerSnapshot` of the raw class), whose snapshot no longer names
the type arguments: they come from `hints`, a mapping (POJO class, field name) → the element
type(s), from the job's classes or inferred from the values (`infer_hints`). A field whose
declared type 2.x still gives to Kryo (a raw `List`, `List<List<String>>`, `List<? extends X>`)
is hinted `None`.

The POJO snapshot is rebuilt as `PojoSerializerSnapshotData.writeSnapshotData` writes it: the
class, then `LinkedOptionalMapSerializer` maps (header, count, per entry the name and two framed
optional parts) of the fields (key: `PojoFieldUtils.writeField`, declaring class and name, copied
as read; value: the field's versioned snapshot) and of the registered and non-registered
subclasses (empty key frame, the subclass's snapshot). Composites (List, Map, TTL, Tuple, …) are
rebuilt around their upgraded nested snapshots with their outer payload copied
(`CompositeTypeSerializerSnapshot.writeSnapshot`); a snapshot in which nothing changes is
returned as it is.

`upgrade_value` turns a value decoded with the 1.x codec into what the 2.x codec writes: a Kryo
collection of a POJO field becomes the plain list, (key, value) pairs or set of the 2.x
List/Map/Set codecs, its Kryo elements the scalar values of the element serializers; Kryo values
that stay Kryo are kept as they are (the 2.x Kryo codec writes them with Kryo 5).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from decimal import Decimal
from typing import Any

from statectl.errors import FormatError
from statectl.formats.java_io import DataReader, DataWriter
from statectl.formats.serializer_snapshots import (
    COMPOSITE_MAGIC,
    NESTED_MAGIC,
    NESTED_VERSION,
    OPTIONAL_MAP_HEADER,
    SerializerSnapshot,
    at_end,
    composite,
    read_versioned_snapshot,
)
from statectl.formats.values.composites import (
    EitherCodec,
    ListCodec,
    MapCodec,
    NullableCodec,
    StructCodec,
    TtlCodec,
)
from statectl.formats.values.kryo import KRYO_SNAPSHOT, KryoCodec, KryoObject
from statectl.formats.values.model import Codec, TtlValue, Undecodable
from statectl.formats.values.pojo import CLASS, PojoCodec
from statectl.formats.values.scalars import (
    BIG_DECIMAL,
    BIG_INTEGER,
    BOOLEAN,
    BYTE,
    CHAR,
    DOUBLE,
    FLOAT,
    INT,
    JAVA_DATE,
    LONG,
    SHORT,
    SQL_DATE,
    SQL_TIME,
    SQL_TIMESTAMP,
    STRING,
    JavaBigInteger,
)

_BASE = "org.apache.flink.api.common.typeutils.base."
_RUNTIME = "org.apache.flink.api.java.typeutils.runtime."
POJO_SNAPSHOT = _RUNTIME + "PojoSerializerSnapshot"
NULLABLE_SNAPSHOT = _RUNTIME + "NullableSerializer$NullableSerializerSnapshot"
LIST_SNAPSHOT = _BASE + "ListSerializerSnapshot"
MAP_SNAPSHOT = _BASE + "MapSerializerSnapshot"
SET_SNAPSHOT = _BASE + "SetSerializerSnapshot"
COMPOSITE_VERSION = 3  # CompositeTypeSerializerSnapshot.VERSION
SIMPLE_VERSION = 3  # SimpleTypeSerializerSnapshot.CURRENT_VERSION
NULLABLE_OUTER_VERSION = 2  # NullableSerializerSnapshot.CURRENT_VERSION
COLLECTION_OUTER_VERSION = 1  # List/Map/SetSerializerSnapshot.CURRENT_VERSION

# An element type: a Java class name (or its simple name for java.lang, java.util, java.math and
# java.sql classes) of a type `TypeExtractor` gives a basic serializer, or the 2.x snapshot of
# the element's serializer (a POJO, an enum, …).
ElementType = str | SerializerSnapshot
# (POJO class, field name) → its element type, or (key type, value type) for a map; None: the
# field stays Kryo in 2.x (its declared type is raw, or has a type argument that is no class).
Hints = Mapping[tuple[str, str], ElementType | tuple[ElementType, ...] | None]

LIST, SET, MAP = "List", "Set", "Map"


def _kinds(kind: str, package: str, names: str) -> dict[str, str]:
    return {f"{package}.{name}": kind for name in names.split()}


# Raw classes a POJO field may be declared with, by what 2.x makes of them (Map first, as in
# `privateGetForClass`). Another class (Collection, Queue, ArrayDeque, a user class) stays Kryo.
COLLECTION_KINDS: dict[str, str] = {
    **_kinds(
        MAP,
        "java.util",
        "Map SortedMap NavigableMap HashMap LinkedHashMap TreeMap Hashtable WeakHashMap "
        "IdentityHashMap EnumMap AbstractMap",
    ),
    **_kinds(
        MAP,
        "java.util.concurrent",
        "ConcurrentMap ConcurrentNavigableMap ConcurrentHashMap ConcurrentSkipListMap",
    ),
    **_kinds(LIST, "java.util", "List ArrayList LinkedList Vector Stack AbstractList"),
    **_kinds(LIST, "java.util", "AbstractSequentialList"),
    **_kinds(LIST, "java.util.concurrent", "CopyOnWriteArrayList"),
    **_kinds(
        SET,
        "java.util",
        "Set SortedSet NavigableSet HashSet LinkedHashSet TreeSet EnumSet AbstractSet",
    ),
    **_kinds(SET, "java.util.concurrent", "CopyOnWriteArraySet ConcurrentSkipListSet"),
}

# Classes `BasicTypeInfo.getInfoFor` and `SqlTimeTypeInfo.getInfoFor` know: their serializer.
_BASIC_SERIALIZERS = {
    "java.lang.String": "String",
    "java.lang.Boolean": "Boolean",
    "java.lang.Byte": "Byte",
    "java.lang.Short": "Short",
    "java.lang.Integer": "Int",
    "java.lang.Long": "Long",
    "java.lang.Float": "Float",
    "java.lang.Double": "Double",
    "java.lang.Character": "Char",
    "java.lang.Void": "Void",
    "java.util.Date": "Date",
    "java.math.BigInteger": "BigInt",
    "java.math.BigDecimal": "BigDec",
    "java.time.Instant": "Instant",
    "java.sql.Date": "SqlDate",
    "java.sql.Time": "SqlTime",
    "java.sql.Timestamp": "SqlTimestamp",
}
_SHORT_NAMES = {
    **{name.rsplit(".", 1)[-1]: name for name in _BASIC_SERIALIZERS if name.startswith("java.l")},
    **{name.rsplit(".", 1)[-1]: name for name in _BASIC_SERIALIZERS if "math" in name},
    "Int": "java.lang.Integer",
    "Date": "java.util.Date",
    "Instant": "java.time.Instant",
    "SqlDate": "java.sql.Date",
    "Time": "java.sql.Time",
    "Timestamp": "java.sql.Timestamp",
}

# Kryo objects of these classes are values of these 2.x scalar codecs...
_KRYO_SCALARS: dict[str, Codec] = {
    "java.lang.String": STRING,
    "java.lang.Boolean": BOOLEAN,
    "java.lang.Byte": BYTE,
    "java.lang.Short": SHORT,
    "java.lang.Integer": INT,
    "java.lang.Long": LONG,
    "java.lang.Float": FLOAT,
    "java.lang.Double": DOUBLE,
    "java.lang.Character": CHAR,
    "java.util.Date": JAVA_DATE,
    "java.sql.Date": SQL_DATE,
    "java.sql.Time": SQL_TIME,
    "java.sql.Timestamp": SQL_TIMESTAMP,
    "java.math.BigInteger": BIG_INTEGER,
    "java.math.BigDecimal": BIG_DECIMAL,
}
# ...taken as they are, but these, which the codec takes in another form.
_KRYO_SCALAR_FORMS: dict[str, Callable[[Any], Any]] = {
    "java.sql.Timestamp": lambda v: v[0] * 1_000_000_000 + v[1],
    # Read by Kryo, a BigInteger is never the ZERO/ONE/TEN constant BigIntSerializer shortens.
    "java.math.BigInteger": lambda v: JavaBigInteger(v) if v in (0, 1, 10) else v,
    "java.math.BigDecimal": Decimal,
}


# --- snapshots -----------------------------------------------------------------------------------


def upgraded_snapshot(snapshot: SerializerSnapshot, hints: Hints) -> SerializerSnapshot:
    """`snapshot` (written by Flink 1.x) as Flink 2.x writes it for the same type: every POJO
    field Kryo serialized as a `List`, `Map` or `Set` becomes 2.x's collection serializer, its
    element types from `hints`. `Undecodable` names the POJO class and field whose element
    types are not known; `FormatError` when a snapshot to change was not understood."""
    if not snapshot.raw:
        raise FormatError(f"the snapshot of {snapshot.label} has no bytes to rewrite")
    if snapshot.class_name == POJO_SNAPSHOT:
        return _upgraded_pojo(snapshot, hints)
    if not snapshot.nested:
        return snapshot
    nested = [upgraded_snapshot(n, hints) for n in snapshot.nested]
    if all(new.raw == old.raw for new, old in zip(nested, snapshot.nested, strict=True)):
        return snapshot
    return rebuilt_composite(snapshot, nested)


def _upgraded_pojo(snapshot: SerializerSnapshot, hints: Hints) -> SerializerSnapshot:
    """`PojoSerializerSnapshotData.writeSnapshotData` with each field's and subclass's snapshot
    upgraded; names and key frames copied as read."""
    if not snapshot.parsed:
        raise FormatError(f"the POJO snapshot of {snapshot.type_name} was not understood")
    r = DataReader(snapshot.raw)
    class_name, version, type_name = r.read_utf(), r.read_i32(), r.read_utf()
    out = DataWriter()
    out.write_utf(class_name)
    out.write_i32(version)
    out.write_utf(type_name)
    fields = read_optional_map(r)
    write_optional_map(
        out,
        [
            (name, key, None if value is None else _upgraded_field(type_name, name, value, hints))
            for name, key, value in fields
        ],
    )
    for _ in range(2):  # registered, then non-registered subclasses
        subclasses = read_optional_map(r)
        write_optional_map(
            out,
            [
                (name, key, None if value is None else _upgraded_frame(value, hints))
                for name, key, value in subclasses
            ],
        )
    if not r.at_end():
        raise FormatError(
            f"{r.remaining()} unexpected bytes after the POJO snapshot of {type_name}"
        )
    if out.getvalue() == snapshot.raw:
        return snapshot
    return read_versioned_snapshot(DataReader(out.getvalue()), at_end)


def _upgraded_frame(frame: bytes, hints: Hints) -> bytes:
    return upgraded_snapshot(read_versioned_snapshot(DataReader(frame), at_end), hints).raw


def _upgraded_field(pojo_class: str, field: str, frame: bytes, hints: Hints) -> bytes:
    nested = read_versioned_snapshot(DataReader(frame), at_end)
    kind = COLLECTION_KINDS.get(nested.type_name or "")
    if nested.class_name != KRYO_SNAPSHOT or kind is None:
        return upgraded_snapshot(nested, hints).raw
    if (pojo_class, field) not in hints:
        arity = "key and value types are" if kind == MAP else "element type is"
        raise Undecodable(
            f"POJO {pojo_class} field {field} ({nested.type_name}, Kryo in Flink 1.x): its {arity} "
            f"not in the savepoint; Flink 2.x serializes it as a {kind}, give them from the job's "
            "classes or its values"
        )
    hint = hints[(pojo_class, field)]
    if hint is None:
        return frame  # declared raw or with a nested type argument: Kryo in 2.x as well
    types = hint if isinstance(hint, tuple) else (hint,)
    if len(types) != (2 if kind == MAP else 1):
        raise FormatError(
            f"POJO {pojo_class} field {field} is a {kind}: {2 if kind == MAP else 1} element "
            f"type(s) expected, {len(types)} given"
        )
    elements = [element_snapshot(t, hints) for t in types]
    return collection_snapshot(kind, elements).raw


def element_snapshot(element: ElementType, hints: Hints | None = None) -> SerializerSnapshot:
    """The 2.x serializer snapshot of an element type: a basic type's, or the snapshot given
    (itself upgraded with `hints`)."""
    if isinstance(element, SerializerSnapshot):
        return upgraded_snapshot(element, hints or {}) if element.raw else element
    java_class = _SHORT_NAMES.get(element, element)
    serializer = _BASIC_SERIALIZERS.get(java_class)
    if serializer is None:
        raise FormatError(
            f"element type {element}: not a basic type; give its serializer snapshot instead"
        )
    package = "org.apache.flink.api.common.typeutils.base."
    out = DataWriter()
    out.write_utf(f"{package}{serializer}Serializer${serializer}SerializerSnapshot")
    out.write_i32(SIMPLE_VERSION)
    return read_versioned_snapshot(DataReader(out.getvalue()), at_end)


def collection_snapshot(kind: str, elements: Sequence[SerializerSnapshot]) -> SerializerSnapshot:
    """The snapshot of `NullableList/Map/SetTypeInfo.createSerializer` around element
    snapshots (one, or key and value)."""
    if kind == LIST:
        inner = composite(LIST_SNAPSHOT, COLLECTION_OUTER_VERSION, b"", [nullable(elements[0])])
    elif kind == SET:
        inner = composite(SET_SNAPSHOT, COLLECTION_OUTER_VERSION, b"", [elements[0]])
    elif kind == MAP:
        key, value = elements
        inner = composite(MAP_SNAPSHOT, COLLECTION_OUTER_VERSION, b"", [nullable(key), value])
    else:
        raise FormatError(f"no collection kind {kind!r}")
    return nullable(inner)


def nullable(inner: SerializerSnapshot) -> SerializerSnapshot:
    """`NullableSerializer.wrap(inner, false)`: the outer payload is the padding length, 0."""
    padding = DataWriter()
    padding.write_i32(0)
    return composite(NULLABLE_SNAPSHOT, NULLABLE_OUTER_VERSION, padding.getvalue(), [inner])


def rebuilt_composite(
    snapshot: SerializerSnapshot, nested: Sequence[SerializerSnapshot]
) -> SerializerSnapshot:
    """A composite snapshot around new nested snapshots, its outer payload copied: the bytes
    between the outer version and the nested snapshots (which end the snapshot)."""
    r = DataReader(snapshot.raw)
    r.read_utf()
    r.read_i32()
    if not snapshot.complete or r.remaining() < 8 or r.read_i32() != COMPOSITE_MAGIC:
        raise FormatError(
            f"a POJO inside {snapshot.describe()} needs upgrading, and statectl cannot rebuild "
            "that snapshot"
        )
    outer_version = r.read_i32()
    nested_start = len(snapshot.raw) - 12 - sum(len(n.raw) for n in snapshot.nested)
    if nested_start < r.pos:
        raise FormatError(f"the nested snapshots of {snapshot.label} do not end its bytes")
    header = DataReader(snapshot.raw[nested_start:])
    if (header.read_i32(), header.read_i32(), header.read_i32()) != (
        NESTED_MAGIC,
        NESTED_VERSION,
        len(snapshot.nested),
    ):
        raise FormatError(f"the nested snapshots of {snapshot.label} are not where expected")
    payload = snapshot.raw[r.pos : nested_start]
    return composite(snapshot.class_name, outer_version, payload, nested, snapshot.version)


Entry = tuple[str, bytes | None, bytes | None]


def read_optional_map(r: DataReader) -> list[Entry]:
    """`LinkedOptionalMapSerializer.readOptionalMap`, the frames kept as bytes."""
    at = r.pos
    if r.read_i64() != OPTIONAL_MAP_HEADER:
        raise FormatError(f"no optional-map header at offset {at}")
    count = r.read_i32()
    r.check_count(count, "optional-map entry", at + 8, 4)
    return [(r.read_utf(), _read_frame(r), _read_frame(r)) for _ in range(count)]


def _read_frame(r: DataReader) -> bytes | None:
    return r.read_bytes(r.read_i32()) if r.read_bool() else None


def write_optional_map(out: DataWriter, entries: Iterable[Entry]) -> None:
    """`LinkedOptionalMapSerializer.writeOptionalMap`: header, count, then per entry the name
    and the key and value, each a presence flag and, when present, an i32-framed payload."""
    entries = list(entries)
    out.write_i64(OPTIONAL_MAP_HEADER)
    out.write_i32(len(entries))
    for name, key, value in entries:
        out.write_utf(name)
        for frame in (key, value):
            out.write_bool(frame is not None)
            if frame is not None:
                out.write_i32(len(frame))
                out.write_bytes(frame)


# --- hints from values ---------------------------------------------------------------------------


ElementClasses = dict[tuple[str, str], list[set[str]]]
"""Per POJO field Kryo serialized as a collection, (POJO class, field): the Java classes of its
elements seen (of a map's keys and values apart)."""
InferredHints = dict[tuple[str, str], ElementType | tuple[ElementType, ...]]


def infer_hints(codec: Codec, values: Iterable[Any]) -> InferredHints:
    """Element types of the POJO fields Kryo serialized as collections, from the values decoded
    with `codec` (the 1.x codec): for each field (and, of a map, for keys and values apart),
    the Java class of every element seen; one class for all of them gives that type. A field
    with no element at all, or with elements of more than one class, is left out (unknown).
    Only a guess: a `List<Number>` holding Integers would be taken for a `List<Integer>`."""
    seen: ElementClasses = {}
    collect_element_classes(codec, values, seen)
    return hints_from(seen)


def collect_element_classes(codec: Codec, values: Iterable[Any], seen: ElementClasses) -> None:
    """Add to `seen` the element classes of `values` (decoded with `codec`): `infer_hints` over
    values read apart (by tasks), merged with `merge_element_classes`."""
    for value in values:
        _collect(codec, value, seen)


def merge_element_classes(into: ElementClasses, more: ElementClasses) -> None:
    """Add to `into` the element classes of `more` (of other values)."""
    for where, classes in more.items():
        mine = into.setdefault(where, [set() for _ in classes])
        for found, added in zip(mine, classes, strict=True):
            found |= added


def hints_from(seen: ElementClasses) -> InferredHints:
    """The element type of each field whose elements seen are all of one class."""
    hints: InferredHints = {}
    for where, classes in seen.items():
        if all(len(found) == 1 for found in classes):
            names: list[ElementType] = [next(iter(found)) for found in classes]
            hints[where] = names[0] if len(names) == 1 else tuple(names)
    return hints


def _collect(codec: Codec, value: Any, seen: ElementClasses) -> None:
    if value is None:
        return
    if isinstance(codec, TtlCodec):
        _collect(codec.user, value.value, seen)
    elif isinstance(codec, NullableCodec):
        _collect(codec.inner, value, seen)
    elif isinstance(codec, ListCodec):
        for item in value:
            _collect(codec.element, item, seen)
    elif isinstance(codec, MapCodec):
        for key, item in value:
            _collect(codec.key, key, seen)
            _collect(codec.value, item, seen)
    elif isinstance(codec, EitherCodec):
        _collect(codec.left if value.is_left else codec.right, value.value, seen)
    elif isinstance(codec, StructCodec):
        for name, field in zip(codec.names, codec.codecs, strict=True):
            _collect(field, value.get(name), seen)
    elif isinstance(codec, PojoCodec):
        _collect_pojo(codec, value, seen)


def _collect_pojo(codec: PojoCodec, value: Any, seen: ElementClasses) -> None:
    subclass = value.get(CLASS)
    if subclass is not None and subclass != codec.type_class:
        sub = codec.subclasses.get(subclass)
        if isinstance(sub, PojoCodec):
            _collect_pojo(sub, value, seen)
        return
    for name, field in zip(codec.names, codec.codecs, strict=True):
        item = value.get(name)
        kind = COLLECTION_KINDS.get(field.type_class) if isinstance(field, KryoCodec) else None
        if kind is None:
            _collect(field, item, seen)
            continue
        classes = seen.setdefault(
            (codec.type_class, name), [set() for _ in range(1 + (kind == MAP))]
        )
        if not isinstance(item, KryoObject):
            continue
        if kind == MAP:
            for key, element in _pairs(item):
                _add_class(classes[0], key)
                _add_class(classes[1], element)
        else:
            for element in _items(item):
                _add_class(classes[0], element)


def _add_class(classes: set[str], element: Any) -> None:
    if isinstance(element, KryoObject):
        classes.add(element.java_class)


# --- values --------------------------------------------------------------------------------------


def upgrade_value(old_codec: Codec, new_codec: Codec, value: Any) -> Any:
    """A value decoded by `old_codec` (1.x) as `new_codec` (of the upgraded snapshot) writes
    it: Kryo collections of POJO fields become plain lists, (key, value) pairs and sets of
    scalar values; everything else is walked through and kept."""
    if value is None:
        return None
    if isinstance(old_codec, KryoCodec):
        return value if isinstance(new_codec, KryoCodec) else from_kryo(new_codec, value)
    if isinstance(new_codec, NullableCodec) and not isinstance(old_codec, NullableCodec):
        return upgrade_value(old_codec, new_codec.inner, value)
    if isinstance(old_codec, TtlCodec) and isinstance(new_codec, TtlCodec):
        return TtlValue(value.timestamp, upgrade_value(old_codec.user, new_codec.user, value.value))
    if isinstance(old_codec, NullableCodec) and isinstance(new_codec, NullableCodec):
        return upgrade_value(old_codec.inner, new_codec.inner, value)
    if isinstance(old_codec, PojoCodec) and isinstance(new_codec, PojoCodec):
        return _upgrade_pojo(old_codec, new_codec, value)
    if isinstance(old_codec, ListCodec) and isinstance(new_codec, ListCodec):
        return [upgrade_value(old_codec.element, new_codec.element, v) for v in value]
    if isinstance(old_codec, MapCodec) and isinstance(new_codec, MapCodec):
        return [
            (
                upgrade_value(old_codec.key, new_codec.key, k),
                upgrade_value(old_codec.value, new_codec.value, v),
            )
            for k, v in value
        ]
    if isinstance(old_codec, StructCodec) and isinstance(new_codec, StructCodec):
        fields = zip(old_codec.names, old_codec.codecs, new_codec.codecs, strict=True)
        return {**value, **{n: upgrade_value(o, c, value.get(n)) for n, o, c in fields}}
    if isinstance(old_codec, EitherCodec) and isinstance(new_codec, EitherCodec):
        old_side = old_codec.left if value.is_left else old_codec.right
        new_side = new_codec.left if value.is_left else new_codec.right
        return type(value)(value.is_left, upgrade_value(old_side, new_side, value.value))
    return value


def _upgrade_pojo(old: PojoCodec, new: PojoCodec, value: Any) -> Any:
    subclass = value.get(CLASS)
    if subclass is not None and subclass != old.type_class:
        old_sub, new_sub = old.subclasses.get(subclass), new.subclasses.get(subclass)
        if old_sub is None or new_sub is None:
            raise Undecodable(f"subclass {subclass} of {old.type_class} is not in the snapshot")
        fields = {k: v for k, v in value.items() if k != CLASS}
        return {**upgrade_value(old_sub, new_sub, fields), CLASS: subclass}
    if old.names != new.names:
        raise FormatError(f"the fields of {old.type_class} differ: {old.names} and {new.names}")
    return {
        name: upgrade_value(o, n, value.get(name))
        for name, o, n in zip(old.names, old.codecs, new.codecs, strict=True)
    }


def from_kryo(codec: Codec, obj: Any) -> Any:
    """A decoded Kryo object as `codec` (a 2.x List/Map/Set, nullable or scalar codec) takes it."""
    if obj is None:
        return None
    if isinstance(codec, KryoCodec):
        return obj
    if not isinstance(obj, KryoObject):
        raise Undecodable(f"not a Kryo object: {type(obj).__name__}")
    if isinstance(codec, NullableCodec):
        return from_kryo(codec.inner, obj)
    if isinstance(codec, MapCodec):
        return [(from_kryo(codec.key, k), from_kryo(codec.value, v)) for k, v in _pairs(obj)]
    if isinstance(codec, ListCodec):  # and SetCodec: a list of the elements
        return [from_kryo(codec.element, item) for item in _items(obj)]
    if _KRYO_SCALARS.get(obj.java_class) is not codec:
        raise Undecodable(
            f"a Kryo {obj.java_class} where Flink 2.x writes {codec.describe()}: the hinted "
            "element type does not match the values"
        )
    form = _KRYO_SCALAR_FORMS.get(obj.java_class)
    return obj.value if form is None else form(obj.value)


def _items(obj: KryoObject) -> list[Any]:
    value = obj.value
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[1], list):
        value = value[1]  # Kryo 2's Arrays$ArrayList: (component class, items)
    if not isinstance(value, list) or any(isinstance(item, tuple) for item in value):
        raise Undecodable(f"a Kryo {obj.java_class} where a list or set was expected")
    return value


def _pairs(obj: KryoObject) -> list[tuple[Any, Any]]:
    value = obj.value
    if not isinstance(value, list) or not all(
        isinstance(pair, tuple) and len(pair) == 2 for pair in value
    ):
        raise Undecodable(f"a Kryo {obj.java_class} where a map was expected")
    return value
