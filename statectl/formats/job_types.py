"""The types a new version of a job declares, read without a JVM: what `check` compares a
savepoint's serializer snapshots with (and what a migration to them would write).

Two sources, one model (`DeclaredType`):

- **Types declared in code** (a Row's `RowTypeInfo`, a Tuple's type arguments, basic types) are
  given in the syntax `inspect` prints: `ROW{id STRING, qty INT}`, `TUPLE2{f0 STRING, f1
  BIGINT}`, `LIST<BIGINT>`, `MAP<STRING, POJO com.acme.Order>` (`parse_type`).
- **Classes** are read from the job's class files (`formats.class_files`): a POJO's fields by
  Flink's `TypeExtractor.analyzePojo` rules (`pojo_shape`), an enum's constants, the schema an
  Avro specific record's generated class holds (`avro_schema`); a field's declared type becomes
  a `DeclaredType` as `TypeExtractor` would type it (`declared_type`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from statectl.errors import FormatError
from statectl.formats.class_files import (
    ACC_PUBLIC,
    STRING,
    ClassFile,
    ClassFinder,
    TypeSignature,
    parse_field_signature,
)
from statectl.formats.upgrade import COLLECTION_KINDS
from statectl.formats.values import scalars

SCALAR, CLASS, TUPLE, ROW, LIST, SET, MAP, UNKNOWN = (
    "scalar", "class", "tuple", "row", "list", "set", "map", "unknown"
)  # fmt: skip


@dataclass(frozen=True)
class DeclaredType:
    """A type as the new job declares it. `kind`: `scalar` (`name` as `inspect` prints it:
    INT, BIGINT, STRING, …), `class` (`name` a Java class, whose serializer the class path
    decides: POJO, enum, Avro, Kryo), `tuple` / `row` (`args` the fields, `field_names` as
    written), `list` (`args` the element), `map` (`args` key and value), `unknown` (`name`
    says why)."""

    kind: str
    name: str = ""
    args: tuple[DeclaredType, ...] = ()
    field_names: tuple[str, ...] = ()

    def describe(self) -> str:
        """The type in `inspect`'s syntax."""
        if self.kind in (SCALAR, UNKNOWN):
            return self.name
        if self.kind == CLASS:
            return self.name
        if self.kind in (TUPLE, ROW):
            inner = ", ".join(
                f"{n} {t.describe()}" for n, t in zip(self.field_names, self.args, strict=True)
            )
            return f"{self.name}{{{inner}}}"
        return f"{self.kind.upper()}<{', '.join(t.describe() for t in self.args)}>"


# --- scalars: Java classes and the names inspect prints ------------------------------------------

_BOXED = {
    "int": "java.lang.Integer", "long": "java.lang.Long", "short": "java.lang.Short",
    "byte": "java.lang.Byte", "float": "java.lang.Float", "double": "java.lang.Double",
    "boolean": "java.lang.Boolean", "char": "java.lang.Character",
}  # fmt: skip
# BasicTypeInfo / SqlTimeTypeInfo / LocalTimeTypeInfo classes → the serializer's codec
_SCALAR_CLASSES = {
    "java.lang.String": scalars.STRING, "java.lang.Integer": scalars.INT,
    "java.lang.Long": scalars.LONG, "java.lang.Short": scalars.SHORT,
    "java.lang.Byte": scalars.BYTE, "java.lang.Float": scalars.FLOAT,
    "java.lang.Double": scalars.DOUBLE, "java.lang.Boolean": scalars.BOOLEAN,
    "java.lang.Character": scalars.CHAR, "java.lang.Void": scalars.VOID,
    "java.math.BigInteger": scalars.BIG_INTEGER, "java.math.BigDecimal": scalars.BIG_DECIMAL,
    "java.util.Date": scalars.JAVA_DATE, "java.sql.Date": scalars.SQL_DATE,
    "java.sql.Time": scalars.SQL_TIME, "java.sql.Timestamp": scalars.SQL_TIMESTAMP,
    "java.time.Instant": scalars.INSTANT, "java.time.LocalDate": scalars.LOCAL_DATE,
    "java.time.LocalTime": scalars.LOCAL_TIME, "java.time.LocalDateTime": scalars.LOCAL_DATE_TIME,
}  # fmt: skip
# PrimitiveArrayTypeInfo / BasicArrayTypeInfo(String[]) by component
_ARRAY_COMPONENTS = {
    "boolean": "BooleanPrimitiveArray", "byte": "BytePrimitiveArray",
    "char": "CharPrimitiveArray", "short": "ShortPrimitiveArray", "int": "IntPrimitiveArray",
    "long": "LongPrimitiveArray", "float": "FloatPrimitiveArray",
    "double": "DoublePrimitiveArray", "java.lang.String": "StringArray",
}  # fmt: skip
SCALAR_NAMES = frozenset(
    codec.describe() for codec in (*_SCALAR_CLASSES.values(), *scalars.PRIMITIVE_ARRAYS.values())
)
# A parameterized field of these classes: Flink 2.x's List, Set and Map serializers (1.x: Kryo)
_COLLECTIONS = {name: kind.lower() for name, kind in COLLECTION_KINDS.items()}
_TUPLE_CLASS = re.compile(r"org\.apache\.flink\.api\.java\.tuple\.Tuple(\d+)")


def scalar(name: str) -> DeclaredType:
    return DeclaredType(SCALAR, name)


def scalar_class(name: str) -> str | None:
    """The Java class of a basic type named as `inspect` prints it (`BIGINT`:
    `java.lang.Long`); None for the others."""
    return next((c for c, codec in _SCALAR_CLASSES.items() if codec.describe() == name), None)


def declared_type(signature: TypeSignature, flink_major: int = 2) -> DeclaredType:
    """A field's declared type as Flink's TypeExtractor types it: basic types, primitive
    arrays, Tuples and (Flink 2.x; 1.x gives them Kryo) parameterized List, Set and Map as
    such, any other class by name (the class path decides its serializer); type variables and
    wildcards unknown."""
    if signature.kind == "base":
        return scalar(_SCALAR_CLASSES[_BOXED[signature.name]].describe())
    if signature.kind == "array":
        (component,) = signature.args
        key = component.name if component.kind in ("base", "class") else ""
        if key in _ARRAY_COMPONENTS:
            return scalar(scalars.PRIMITIVE_ARRAYS[_ARRAY_COMPONENTS[key]].describe())
        return DeclaredType(UNKNOWN, "an object array")
    if signature.kind != "class":
        return DeclaredType(UNKNOWN, f"a type variable or wildcard ({signature.name})")
    name, args = signature.name, signature.args
    if name in _SCALAR_CLASSES:
        return scalar(_SCALAR_CLASSES[name].describe())
    nested = tuple(declared_type(a, flink_major) for a in args)
    collection = _COLLECTIONS.get(name) if flink_major >= 2 else None
    if collection is not None and len(args) == (2 if collection == MAP else 1):
        return DeclaredType(collection, args=nested)
    tuple_class = _TUPLE_CLASS.fullmatch(name)
    if tuple_class and len(args) == int(tuple_class.group(1)):
        names = tuple(f"f{i}" for i in range(len(args)))
        return DeclaredType(TUPLE, f"TUPLE{len(args)}", nested, names)
    return DeclaredType(CLASS, name)


def field_type(field_descriptor: str, signature: str | None, flink_major: int = 2) -> DeclaredType:
    """The declared type of a field from its descriptor and generic signature."""
    try:
        return declared_type(parse_field_signature(signature or field_descriptor), flink_major)
    except FormatError as exc:
        return DeclaredType(UNKNOWN, f"field type not understood: {exc}")


# --- the --type syntax ---------------------------------------------------------------------------

# ARRAY<INT> is one name: the primitive arrays' (their serializers are scalars)
_TOKEN = re.compile(r"\s*(ARRAY<[A-Z]+>|[A-Za-z_$][\w$.]*|[{}<>(),]|\S)")


class _TypeParser:
    """`inspect`'s type syntax, e.g. `ROW{id STRING, qty INT}` or `MAP<STRING, BIGINT>`."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = [m.group(1) for m in _TOKEN.finditer(text)]
        self.pos = 0

    def fail(self, what: str) -> FormatError:
        return FormatError(f"type {self.text!r}: {what}")

    def peek(self) -> str | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self, expected: str | None = None) -> str:
        token = self.peek()
        if token is None or (expected is not None and token != expected):
            found = f"{token!r}" if token else "the end"
            raise self.fail(f"expected {expected or 'a type'}, found {found}")
        self.pos += 1
        return token

    def type(self, depth: int = 0) -> DeclaredType:
        if depth > 32:
            raise self.fail("nested too deep")
        name = self.take()
        if name in SCALAR_NAMES:
            return scalar(name)
        if name in ("POJO", "KRYO", "AVRO", "ENUM"):  # a class, read from the class path
            wrapped = self.peek() == "("
            if wrapped:
                self.take("(")
            java_class = self.take()
            if wrapped:
                self.take(")")
            if self.peek() == "{":  # the fields inspect lists: the class has its own
                self._skip_braces()
            return DeclaredType(CLASS, java_class)
        if name == "ROW" or re.fullmatch(r"TUPLE\d+", name):
            names, types = self._fields(depth)
            kind = ROW if name == "ROW" else TUPLE
            if kind == TUPLE and int(name[5:]) != len(types):
                raise self.fail(f"{name} with {len(types)} fields")
            return DeclaredType(kind, name, types, names)
        if name in ("LIST", "MAP"):
            self.take("<")
            args = [self.type(depth + 1)]
            while self.peek() == ",":
                self.take(",")
                args.append(self.type(depth + 1))
            self.take(">")
            if len(args) != (1 if name == "LIST" else 2):
                raise self.fail(f"{name} with {len(args)} type arguments")
            return DeclaredType(name.lower(), args=tuple(args))
        raise self.fail(f"unknown type {name!r}")

    def _fields(self, depth: int) -> tuple[tuple[str, ...], tuple[DeclaredType, ...]]:
        self.take("{")
        names: list[str] = []
        types: list[DeclaredType] = []
        while self.peek() != "}":
            if names:
                self.take(",")
            names.append(self.take())
            types.append(self.type(depth + 1))
        self.take("}")
        return tuple(names), tuple(types)

    def _skip_braces(self) -> None:
        depth = 0
        while True:
            token = self.take()
            depth += {"{": 1, "}": -1}.get(token, 0)
            if depth == 0:
                return


def parse_type(text: str) -> DeclaredType:
    """A type in `inspect`'s syntax (a trailing `, TTL` is ignored: TTL is the descriptor's,
    not the type's); `FormatError` when it is not one."""
    parser = _TypeParser(re.sub(r",\s*TTL\s*$", "", text.strip()))
    result = parser.type()
    if parser.peek() is not None:
        raise parser.fail("unexpected text")
    return result


# --- classes: POJOs, enums, Avro records -----------------------------------------------------

_AVRO_BASE = "org.apache.avro.specific.SpecificRecordBase"
_MAX_SUPERCLASSES = 32


@dataclass(frozen=True)
class PojoShape:
    """A class as Flink's `TypeExtractor.analyzePojo` sees it: its fields (name → declared
    type, the class's and its superclasses'), or why it is no POJO (then Flink gives it
    `GenericTypeInfo`: Kryo)."""

    java_class: str
    fields: dict[str, DeclaredType]
    not_pojo: str | None = None


def hierarchy(classes: ClassFinder, java_class: str) -> list[ClassFile]:
    """The class and its superclasses as far as the class path holds them (`FormatError`
    propagates: an unreadable class file)."""
    found: list[ClassFile] = []
    name: str | None = java_class
    while name and name != "java.lang.Object" and len(found) < _MAX_SUPERCLASSES:
        cls = classes.find(name)
        if cls is None:
            break
        found.append(cls)
        name = cls.super_name
    return found


def pojo_shape(classes: ClassFinder, cls: ClassFile, flink_major: int = 2) -> PojoShape:
    """`TypeExtractor.analyzePojo`: a public, concrete class with a public no-argument
    constructor whose instance fields (not static, not transient, the superclasses' too) are
    each public or have a getter and a setter. (Whether a nested class is static is not in its
    class file's flags; javac-compiled inner classes fail the constructor rule anyway.)"""
    problem = _not_pojo_class(cls)
    if problem:
        return PojoShape(cls.name, {}, problem)
    fields: dict[str, DeclaredType] = {}
    for owner in hierarchy(classes, cls.name):
        methods = {(m.name.lower(), m.descriptor) for m in owner.methods if not m.is_static}
        for field in owner.fields:
            if field.is_static or field.is_transient or field.is_synthetic:
                continue
            if field.name in fields:
                return PojoShape(cls.name, {}, f"field {field.name} is declared twice")
            if not (
                field.access_flags & ACC_PUBLIC
                or _has_accessors(field.name, field.descriptor, methods)
            ):
                reason = f"field {field.name} is neither public nor has a getter and a setter"
                return PojoShape(cls.name, {}, reason)
            fields[field.name] = field_type(field.descriptor, field.signature, flink_major)
    if not fields:
        return PojoShape(cls.name, {}, "it has no fields")
    return PojoShape(cls.name, dict(sorted(fields.items())))


def _not_pojo_class(cls: ClassFile) -> str | None:
    if not cls.access_flags & ACC_PUBLIC:
        return "it is not public"
    if cls.is_interface or cls.is_abstract:
        return "it is abstract"
    if not any(
        m.name == "<init>" and m.descriptor == "()V" and m.access_flags & ACC_PUBLIC
        for m in cls.methods
    ):
        return "it has no public constructor without arguments"
    return None


def _has_accessors(name: str, descriptor: str, methods: set[tuple[str, str]]) -> bool:
    """`TypeExtractor.isValidPojoField`: a getter (`getX`, `isX` or `x`, no arguments,
    returning the field's type) and a setter (`setX` or Scala's `x_$eq`, one argument of
    it, returning void); names compared in lower case."""
    low = name.lower()
    getter = any((g, f"(){descriptor}") in methods for g in (f"get{low}", f"is{low}", low))
    setter = any((s, f"({descriptor})V") in methods for s in (f"set{low}", f"{low}_$eq"))
    return getter and setter


def is_avro_specific(classes: ClassFinder, cls: ClassFile) -> bool:
    """Whether Flink gives the class `AvroTypeInfo`: it extends `SpecificRecordBase`."""
    return any(c.super_name == _AVRO_BASE for c in hierarchy(classes, cls.name))


def avro_schema(cls: ClassFile) -> str | None:
    """The schema an Avro-generated class holds (`SCHEMA$`, parsed in its static initializer
    from string constants, split by the compiler when long): the constants from the first
    that starts a record schema, joined until they parse as JSON."""
    texts = [
        cls.constant_pool.utf8(entry.value)
        for entry in cls.constant_pool.entries
        if entry is not None and entry.tag == STRING
    ]
    for start, text in enumerate(texts):
        if not text.lstrip().startswith('{"type":"record"'):
            continue
        joined = ""
        for part in texts[start:]:
            joined += part
            try:
                json.loads(joined)
            except ValueError:
                continue
            return joined
    return None
