"""Java class files (JVM specification §4), read without a JVM: what Kryo's FieldSerializer needs.

`parse_class` reads one class file into dataclasses: the constant pool (every tag of §4.4,
strings in modified UTF-8), the access flags, this and the super class, the interfaces, the
fields and methods (name, descriptor, flags, the `Signature` attribute of a generic type and the
types of their runtime-visible annotations). A `ClassFinder` finds a class by its binary name
(`a.b.C$D`, as `Class.getName()` gives it): `savepoint.classpath.ClassPath` over the job's jars
and directories, as a class loader does. A class file that is cut short or is not one is a
`FormatError` naming the file it came from.

Descriptors and signatures (§4.3) are read as far as field types go: `field_type_name` gives the
class name of a field descriptor (`I` → `int`, `[Ljava/lang/String;` → `[Ljava.lang.String;`)
and `parse_field_signature` a generic type's tree.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any, Protocol

from statectl.errors import FormatError
from statectl.formats.java_io import DataReader, decode_modified_utf8

MAGIC = 0xCAFEBABE
# A class file's u2 counts allow gigabytes of constants; javac's largest stay below 1 MiB.
MAX_CLASS_BYTES = 1 << 24

# Constant pool tags (§4.4)
UTF8, INTEGER, FLOAT, LONG, DOUBLE = 1, 3, 4, 5, 6
CLASS, STRING, FIELDREF, METHODREF, INTERFACE_METHODREF, NAME_AND_TYPE = 7, 8, 9, 10, 11, 12
METHOD_HANDLE, METHOD_TYPE, DYNAMIC, INVOKE_DYNAMIC, MODULE, PACKAGE = 15, 16, 17, 18, 19, 20

# Access flags (§4.1, §4.5)
ACC_PUBLIC = 0x0001
ACC_PRIVATE = 0x0002
ACC_PROTECTED = 0x0004
ACC_STATIC = 0x0008
ACC_FINAL = 0x0010
ACC_SUPER = 0x0020
ACC_VOLATILE = 0x0040
ACC_TRANSIENT = 0x0080
ACC_INTERFACE = 0x0200
ACC_ABSTRACT = 0x0400
ACC_SYNTHETIC = 0x1000
ACC_ANNOTATION = 0x2000
ACC_ENUM = 0x4000
ACC_MODULE = 0x8000

_PRIMITIVES = {
    "B": "byte",
    "C": "char",
    "D": "double",
    "F": "float",
    "I": "int",
    "J": "long",
    "S": "short",
    "Z": "boolean",
}
_TWO_INDEXES = (FIELDREF, METHODREF, INTERFACE_METHODREF, NAME_AND_TYPE, DYNAMIC, INVOKE_DYNAMIC)
_FLOAT = struct.Struct(">f")
_DOUBLE = struct.Struct(">d")


@dataclass(frozen=True, slots=True)
class Constant:
    """One constant pool entry: its tag and its content, as the class file holds it: a str
    (Utf8), an int or float (Integer, Float, Long, Double), one index (Class, String,
    MethodType, Module, Package) or a tuple of two (the refs, NameAndType, MethodHandle's kind
    and reference, Dynamic's bootstrap method and NameAndType)."""

    tag: int
    value: Any


@dataclass(frozen=True, slots=True)
class ConstantPool:
    """Entries by index (1-based; index 0 and the slot after a Long or Double are None)."""

    entries: tuple[Constant | None, ...]

    def get(self, index: int, *tags: int) -> Constant:
        entry = self.entries[index] if 0 < index < len(self.entries) else None
        if entry is None or (tags and entry.tag not in tags):
            want = "/".join(map(str, tags)) or "any"
            raise FormatError(f"constant pool index {index} is not an entry of tag {want}")
        return entry

    def utf8(self, index: int) -> str:
        value: str = self.get(index, UTF8).value
        return value

    def class_name(self, index: int) -> str:
        """A Class entry's name in internal form (`a/b/C$D`, or an array descriptor)."""
        return self.utf8(self.get(index, CLASS).value)


@dataclass(frozen=True, slots=True)
class Member:
    """A field or method: flags, name, descriptor, generic signature, annotation types."""

    access_flags: int
    name: str
    descriptor: str
    signature: str | None  # the `Signature` attribute, when the type is generic
    annotations: tuple[str, ...]  # descriptors of the RuntimeVisibleAnnotations' types

    @property
    def is_static(self) -> bool:
        return bool(self.access_flags & ACC_STATIC)

    @property
    def is_final(self) -> bool:
        return bool(self.access_flags & ACC_FINAL)

    @property
    def is_transient(self) -> bool:
        return bool(self.access_flags & ACC_TRANSIENT)

    @property
    def is_synthetic(self) -> bool:
        return bool(self.access_flags & ACC_SYNTHETIC)

    @property
    def is_enum_constant(self) -> bool:
        return bool(self.access_flags & ACC_ENUM)

    @property
    def type_name(self) -> str:
        """A field's type as `Class.getName()` gives it."""
        return field_type_name(self.descriptor)


@dataclass(frozen=True, slots=True)
class ClassFile:
    """One parsed class file; names in binary form (`a.b.C$D`)."""

    source: str  # the file (or jar entry) it was read from
    minor_version: int
    major_version: int
    constant_pool: ConstantPool
    access_flags: int
    name: str
    super_name: str | None  # None for java.lang.Object (and module-info)
    interfaces: tuple[str, ...]
    fields: tuple[Member, ...]
    methods: tuple[Member, ...]
    signature: str | None
    annotations: tuple[str, ...]

    @property
    def is_final(self) -> bool:
        return bool(self.access_flags & ACC_FINAL)

    @property
    def is_interface(self) -> bool:
        return bool(self.access_flags & ACC_INTERFACE)

    @property
    def is_abstract(self) -> bool:
        return bool(self.access_flags & ACC_ABSTRACT)

    @property
    def is_enum(self) -> bool:
        return bool(self.access_flags & ACC_ENUM)

    def enum_constants(self) -> tuple[str, ...]:
        """An enum's constants in declaration order (their ordinals): javac writes the
        `ACC_ENUM` fields in that order."""
        return tuple(f.name for f in self.fields if f.is_enum_constant and f.is_static)


# --- parsing -------------------------------------------------------------------------------------


def parse_class(data: bytes | bytearray | memoryview, source: str = "<class file>") -> ClassFile:
    """One class file; `FormatError` naming `source` when it is cut short or not one."""
    try:
        return _parse(DataReader(data), source)
    except FormatError as exc:
        raise FormatError(exc.message, source) from None
    except (IndexError, ValueError, struct.error) as exc:  # defensive: no crash on bad bytes
        raise FormatError(f"malformed class file: {exc}", source) from None


def _parse(r: DataReader, source: str) -> ClassFile:
    if r.remaining() < 4 or r.read_u16() << 16 | r.read_u16() != MAGIC:
        raise FormatError("not a class file (bad magic)")
    minor, major = r.read_u16(), r.read_u16()
    pool = _constant_pool(r)
    access = r.read_u16()
    name = _binary(pool.class_name(r.read_u16()))
    super_index = r.read_u16()
    super_name = _binary(pool.class_name(super_index)) if super_index else None
    count = r.check_count(r.read_u16(), "interface", r.pos, 2)
    interfaces = tuple(_binary(pool.class_name(r.read_u16())) for _ in range(count))
    fields = _members(r, pool)
    methods = _members(r, pool)
    signature, annotations = _attributes(r, pool)
    if not r.at_end():
        raise FormatError(f"{r.remaining()} bytes after the class file's end at offset {r.pos}")
    return ClassFile(
        source,
        minor,
        major,
        pool,
        access,
        name,
        super_name,
        interfaces,
        fields,
        methods,
        signature,
        annotations,
    )


def _constant_pool(r: DataReader) -> ConstantPool:
    count = r.read_u16()
    entries: list[Constant | None] = [None]
    while len(entries) < count:
        at = r.pos
        tag = r.read_u8()
        value: Any
        if tag == UTF8:
            length = r.read_u16()
            value = _utf8(r.read_bytes(length), at)
        elif tag == INTEGER:
            value = r.read_i32()
        elif tag == FLOAT:
            value = _FLOAT.unpack(r.read_bytes(4))[0]
        elif tag in (LONG, DOUBLE):
            raw = r.read_bytes(8)
            value = (
                int.from_bytes(raw, "big", signed=True) if tag == LONG else _DOUBLE.unpack(raw)[0]
            )
        elif tag in (CLASS, STRING, METHOD_TYPE, MODULE, PACKAGE):
            value = r.read_u16()
        elif tag in _TWO_INDEXES:
            value = (r.read_u16(), r.read_u16())
        elif tag == METHOD_HANDLE:
            value = (r.read_u8(), r.read_u16())
        else:
            raise FormatError(f"constant pool tag {tag} at offset {at}")
        entries.append(Constant(tag, value))
        if tag in (LONG, DOUBLE):  # takes two slots (§4.4.5)
            if len(entries) >= count:
                raise FormatError(f"8-byte constant in the last slot at offset {at}")
            entries.append(None)
    return ConstantPool(tuple(entries))


def _utf8(data: bytes, at: int) -> str:
    """Modified UTF-8; a string constant may hold unpaired surrogates, kept as they are."""
    try:
        return decode_modified_utf8(data)
    except FormatError:
        pass
    try:
        cesu = data.replace(b"\xc0\x80", b"\x00").decode("utf-8", "surrogatepass")
        return cesu.encode("utf-16-be", "surrogatepass").decode("utf-16-be", "surrogatepass")
    except UnicodeError as exc:
        raise FormatError(f"invalid modified UTF-8 string at offset {at}: {exc}") from None


def _members(r: DataReader, pool: ConstantPool) -> tuple[Member, ...]:
    count = r.check_count(r.read_u16(), "member", r.pos, 8)
    members = []
    for _ in range(count):
        access = r.read_u16()
        name = pool.utf8(r.read_u16())
        descriptor = pool.utf8(r.read_u16())
        signature, annotations = _attributes(r, pool)
        members.append(Member(access, name, descriptor, signature, annotations))
    return tuple(members)


def _attributes(r: DataReader, pool: ConstantPool) -> tuple[str | None, tuple[str, ...]]:
    """The attributes of a class or member: its `Signature` and its annotations' types."""
    count = r.check_count(r.read_u16(), "attribute", r.pos, 6)
    signature: str | None = None
    annotations: list[str] = []
    for _ in range(count):
        name = pool.utf8(r.read_u16())
        length = r.read_i32() & 0xFFFFFFFF
        at = r.pos
        body = DataReader(r.read_bytes(length))
        if name == "Signature":
            signature = pool.utf8(body.read_u16())
        elif name == "RuntimeVisibleAnnotations":
            for _ in range(body.check_count(body.read_u16(), "annotation", body.pos, 4)):
                annotations.append(_annotation(body, pool))
        else:
            continue
        if not body.at_end():
            raise FormatError(f"attribute {name} at offset {at} longer than its content")
    return signature, tuple(annotations)


def _annotation(r: DataReader, pool: ConstantPool, depth: int = 0) -> str:
    """One annotation (§4.7.16): its type descriptor; the element values are skipped."""
    if depth > 64:
        raise FormatError("annotations nested more than 64 deep")
    type_name = pool.utf8(r.read_u16())
    for _ in range(r.check_count(r.read_u16(), "element-value pair", r.pos, 3)):
        r.read_u16()
        _element_value(r, pool, depth)
    return type_name


def _element_value(r: DataReader, pool: ConstantPool, depth: int) -> None:
    at = r.pos
    tag = chr(r.read_u8())
    if tag in "BCDFIJSZsc":
        r.read_u16()
    elif tag == "e":
        r.read_u16()
        r.read_u16()
    elif tag == "@":
        _annotation(r, pool, depth + 1)
    elif tag == "[":
        for _ in range(r.check_count(r.read_u16(), "array element", r.pos, 3)):
            _element_value(r, pool, depth + 1)
    else:
        raise FormatError(f"element value tag {tag!r} at offset {at}")


def _binary(internal: str) -> str:
    return internal.replace("/", ".")


# --- descriptors and signatures (§4.3, §4.7.9.1) -------------------------------------------------


def field_type_name(descriptor: str) -> str:
    """The class name (`Class.getName()`) of a field descriptor."""
    if descriptor in _PRIMITIVES:
        return _PRIMITIVES[descriptor]
    if descriptor.startswith("L") and descriptor.endswith(";") and len(descriptor) > 2:
        return _binary(descriptor[1:-1])
    if descriptor.startswith("["):
        inner = descriptor.lstrip("[")
        if inner in _PRIMITIVES or (inner.startswith("L") and inner.endswith(";")):
            return _binary(descriptor)
    raise FormatError(f"field descriptor {descriptor!r}")


@dataclass(frozen=True, slots=True)
class TypeSignature:
    """A generic type: `kind` is "base" (a primitive), "class" (`name` the erasure's binary
    name, `args` its type arguments, innermost class's), "var" (a type variable `name`),
    "array" (`args` the component) or "wildcard" (`name` "*", "+" or "-", `args` the bound)."""

    kind: str
    name: str
    args: tuple[TypeSignature, ...] = ()


def parse_field_signature(signature: str) -> TypeSignature:
    """A `Signature` attribute of a field (a reference type signature)."""
    parser = _Signature(signature)
    result = parser.type()
    if parser.pos != len(signature):
        raise FormatError(f"field signature {signature!r}")
    return result


class _Signature:
    __slots__ = ("pos", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def fail(self) -> FormatError:
        return FormatError(f"field signature {self.text!r} at {self.pos}")

    def peek(self) -> str:
        if self.pos >= len(self.text):
            raise self.fail()
        return self.text[self.pos]

    def type(self, depth: int = 0) -> TypeSignature:
        if depth > 64:
            raise self.fail()
        c = self.peek()
        if c in _PRIMITIVES:
            self.pos += 1
            return TypeSignature("base", _PRIMITIVES[c])
        if c == "[":
            self.pos += 1
            return TypeSignature("array", "", (self.type(depth + 1),))
        if c == "T":
            end = self.text.find(";", self.pos)
            if end < 0:
                raise self.fail()
            name = self.text[self.pos + 1 : end]
            self.pos = end + 1
            return TypeSignature("var", name)
        if c == "L":
            return self._class(depth)
        raise self.fail()

    def _class(self, depth: int) -> TypeSignature:
        self.pos += 1
        name = ""
        args: tuple[TypeSignature, ...] = ()
        while True:
            start = self.pos
            while self.peek() not in "<.;":
                self.pos += 1
            part = self.text[start : self.pos]
            name = part if not name else f"{name}${part}"
            args = ()
            if self.peek() == "<":
                self.pos += 1
                items = []
                while self.peek() != ">":
                    items.append(self._argument(depth))
                self.pos += 1
                args = tuple(items)
            if self.peek() == ";":
                self.pos += 1
                return TypeSignature("class", _binary(name), args)
            self.pos += 1  # "." : an inner class of a parameterized outer

    def _argument(self, depth: int) -> TypeSignature:
        c = self.peek()
        if c == "*":
            self.pos += 1
            return TypeSignature("wildcard", "*")
        if c in "+-":
            self.pos += 1
            return TypeSignature("wildcard", c, (self.type(depth + 1),))
        return self.type(depth + 1)


# --- the class path ------------------------------------------------------------------------------


class ClassFinder(Protocol):
    """Where classes come from by binary name (`a.b.C$D`): the job's jars and class folders
    (`savepoint.classpath.ClassPath`, which reads them) or anything else that finds them."""

    def find(self, name: str) -> ClassFile | None: ...
