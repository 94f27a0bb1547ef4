"""`PojoSerializer`: a flags byte, then every field with a null flag, or a subclass's value.

Mirrors `PojoSerializer.serialize/deserialize` and `PojoSerializerSnapshot(Data)`
(flink-state-values.md §3): flags 1 = null, 2 = the POJO's own fields follow (each a null flag,
then the field serializer's bytes, in the snapshot's field order), 4 = a subclass named in UTF,
then its own serializer's bytes, 8 = a registered subclass by its tag (the index in the
snapshot's registered-subclass map). A subclass value is the subclass's fields with its class
under `__class`; a subclass the snapshot does not list cannot be read (its fields are unknown).

A null field is a null flag whatever the field's type, but Flink restores it by reflection:
into a primitive field (`int`, not `Integer`) that fails ("Can not set int field … to null
value"). The snapshot cannot tell them apart (IntSerializer serves both), the job's class
can: with the job's classes (`Context.classpath`) a `PojoCodec` knows each field's declared
type (`declared`), and `null_fields` finds the nulls a value puts into fields a primitive
serializer writes.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from statectl.errors import FormatError
from statectl.formats.class_files import ClassFile, ClassFinder
from statectl.formats.java_io import encode_modified_utf8
from statectl.formats.serializer_snapshots import MISSING_FIELD, SerializerSnapshot
from statectl.formats.values import scalars
from statectl.formats.values.composites import (
    Either,
    EitherCodec,
    FieldsCodec,
    ListCodec,
    MapCodec,
    NullableCodec,
    StructCodec,
    TtlCodec,
)
from statectl.formats.values.kryo_fields import MAX_SUPERCLASSES, PRIMITIVES
from statectl.formats.values.model import Codec, Context, Raw, TtlValue, Undecodable, register

if TYPE_CHECKING:
    import pyarrow as pa

IS_NULL, NO_SUBCLASS, IS_SUBCLASS, IS_TAGGED_SUBCLASS = 1, 2, 4, 8
CLASS = "__class"
_U16 = struct.Struct(">H")
# The serializers of Java's primitive types, which write a primitive field and its box alike.
PRIMITIVE_SERIALIZERS = frozenset(
    map(id, (scalars.LONG, scalars.INT, scalars.SHORT, scalars.BYTE, scalars.FLOAT,
             scalars.DOUBLE, scalars.BOOLEAN, scalars.CHAR))
)  # fmt: skip


class PojoCodec(FieldsCodec):
    __slots__ = ("declared", "registered", "subclasses", "type_class")

    def __init__(
        self,
        type_class: str,
        names: list[str],
        codecs: list[Codec],
        registered: list[str],
        subclasses: dict[str, Codec | None],
        declared: Mapping[str, str] | None = None,
    ) -> None:
        self.type_class = type_class
        self.names = names
        self.codecs = codecs
        self.registered = registered  # tag → class name
        self.subclasses = subclasses  # class name → its codec (None: not readable)
        # Field → its declared Java type, from the job's class (None: the class was not read)
        self.declared = declared

    def primitive(self, name: str) -> str | None:
        """The primitive type the job's class declares field `name` with, if it does."""
        declared = self.declared.get(name) if self.declared is not None else None
        return declared if declared in PRIMITIVES else None

    def checked(self, name: str) -> bool:
        """Whether the job's class was read for field `name`'s declared type."""
        return self.declared is not None and name in self.declared

    # --- bytes ---

    def read(self, buf: memoryview, pos: int) -> tuple[Any, int]:
        flags = buf[pos]
        pos += 1
        if flags == NO_SUBCLASS:
            value: dict[str, Any] = {}
            for name, codec in zip(self.names, self.codecs, strict=True):
                if buf[pos]:
                    value[name] = None
                    pos += 1
                else:
                    value[name], pos = codec.read(buf, pos + 1)
            return value, pos
        if flags == IS_NULL:
            return None, pos
        if flags == IS_TAGGED_SUBCLASS:
            tag = buf[pos]
            if tag >= len(self.registered):
                raise FormatError(f"subclass tag {tag} of {self.type_class} is not registered")
            return self._subclass(self.registered[tag], buf, pos + 1)
        if flags == IS_SUBCLASS:
            (length,) = _U16.unpack_from(buf, pos)
            from statectl.formats.java_io import decode_modified_utf8

            name = decode_modified_utf8(buf[pos + 2 : pos + 2 + length])
            return self._subclass(name, buf, pos + 2 + length)
        raise FormatError(f"POJO flags {flags:#04x} at offset {pos - 1} are none of 1, 2, 4, 8")

    def _subclass(self, name: str, buf: memoryview, pos: int) -> tuple[Any, int]:
        codec = self.subclasses.get(name)
        if codec is None:
            raise Undecodable(
                f"subclass {name} of {self.type_class}: its fields are not in the snapshot"
            )
        value, pos = codec.read(buf, pos)
        if isinstance(value, dict):
            value = {**value, CLASS: name}
        return value, pos

    def write(self, value: Any, out: bytearray) -> None:
        if value is None:
            out.append(IS_NULL)
            return
        subclass = value.get(CLASS)
        if subclass is not None and subclass != self.type_class:
            self._write_subclass(subclass, value, out)
            return
        out.append(NO_SUBCLASS)
        for name, codec in zip(self.names, self.codecs, strict=True):
            field = value.get(name)
            if field is None:
                out.append(1)
            else:
                out.append(0)
                codec.write(field, out)

    def _write_subclass(self, name: str, value: Any, out: bytearray) -> None:
        codec = self.subclasses.get(name)
        if codec is None:
            raise Undecodable(f"subclass {name} of {self.type_class} is not in the snapshot")
        if name in self.registered:
            out += bytes((IS_TAGGED_SUBCLASS, self.registered.index(name)))
        else:
            encoded = encode_modified_utf8(name)
            out.append(IS_SUBCLASS)
            out += _U16.pack(len(encoded)) + encoded
        codec.write({k: v for k, v in value.items() if k != CLASS}, out)

    # --- what the values are ---

    def arrow_type(self) -> pa.DataType:
        import pyarrow as pa

        fields = self._arrow_fields()
        readable = {n: c for n, c in self.subclasses.items() if c is not None}
        if readable:  # a subclass value: its class, and all its fields in a struct of its own
            fields.append((CLASS, pa.string()))
            fields += [(name, codec.arrow_type()) for name, codec in readable.items()]
        return pa.struct(fields)

    def to_arrow(self, value: Any) -> Any:
        subclass = value.get(CLASS)
        converted = self._fields_to_arrow(value)
        if subclass is not None:
            codec = self.subclasses[subclass]
            assert codec is not None
            converted[CLASS] = subclass
            converted[subclass] = codec.to_arrow({k: v for k, v in value.items() if k != CLASS})
        return converted

    def from_arrow(self, value: Any) -> Any:
        """The POJO's own fields, or a subclass's from the struct under its name."""
        subclass = value.get(CLASS)
        if subclass is not None and subclass != self.type_class:
            codec = self.subclasses.get(subclass)
            fields = value.get(subclass)
            if codec is None or fields is None:
                raise Undecodable(f"subclass {subclass} of {self.type_class} has no fields here")
            return {**codec.from_arrow(fields), CLASS: subclass}
        return self._fields_from_arrow(value)

    def to_json(self, value: Any) -> Any:
        subclass = value.get(CLASS)
        if subclass is not None:
            codec = self.subclasses[subclass]
            assert codec is not None
            return codec.to_json({k: v for k, v in value.items() if k != CLASS})
        return self._fields_to_json(value)

    def describe(self) -> str:
        return f"POJO {self.type_class}{{{self._described_fields()}}}"

    def tree(self) -> dict[str, Any]:
        tree: dict[str, Any] = {
            "type": "POJO",
            "class": self.type_class,
            "fields": self._field_trees(),
        }
        if self.subclasses:
            tree["subclasses"] = {
                name: (codec.tree() if codec else None) for name, codec in self.subclasses.items()
            }
        return tree


@register("org.apache.flink.api.java.typeutils.runtime.PojoSerializerSnapshot")
def _pojo(snapshot: SerializerSnapshot, context: Context) -> Codec:
    type_class = snapshot.type_name or "POJO"
    if not snapshot.param("fields_complete", True):
        raise Undecodable(f"a field of {type_class} had no serializer when Flink wrote it")
    missing = [n for n in snapshot.field_names if n.startswith(MISSING_FIELD)]
    if missing:
        raise Undecodable(f"{type_class} lost field {missing[0]} when Flink wrote it")
    codecs = [context.codec(n) for n in snapshot.nested]
    registered = [name for name, _ in snapshot.param("registered", ())]
    subclasses: dict[str, Codec | None] = {}
    for name, nested in (*snapshot.param("registered", ()), *snapshot.param("nonregistered", ())):
        try:
            subclasses[name] = context.codec(nested)
        except Undecodable:
            subclasses[name] = None  # only values of that subclass stay raw
    declared = _declared_fields(context.classpath, snapshot.type_name)
    return PojoCodec(
        type_class, list(snapshot.field_names), codecs, registered, subclasses, declared
    )


def _declared_fields(
    classpath: ClassFinder | None, java_class: str | None
) -> dict[str, str] | None:
    """The instance fields of the class and of the superclasses the class path holds, by name
    (a subclass's first), with their declared types; None when the class is not there."""
    classes = _hierarchy(classpath, java_class) if classpath and java_class else []
    if not classes:
        return None
    declared: dict[str, str] = {}
    for cls in classes:
        for field in cls.fields:
            if field.is_static or field.name in declared:
                continue
            try:
                declared[field.name] = field.type_name
            except FormatError:
                continue  # a descriptor not understood: the field stays unchecked
    return declared


def _hierarchy(classpath: ClassFinder, java_class: str) -> list[ClassFile]:
    """The class and its superclasses, as far as the class path holds and reads them."""
    classes: list[ClassFile] = []
    seen: set[str] = set()
    name: str | None = java_class
    while name is not None and name not in seen and len(classes) <= MAX_SUPERCLASSES:
        seen.add(name)
        try:
            found = classpath.find(name)
        except FormatError:
            return classes  # an unreadable class file: its fields stay unchecked
        if found is None:
            break
        classes.append(found)
        name = found.super_name
    return classes


def has_primitive_fields(codec: Codec | None) -> bool:
    """Whether values of `codec` may hold a POJO field a primitive serializer writes (what
    `null_fields` looks for): most states hold none, and need no walk of their values."""
    pending = [codec]
    while pending:
        current = pending.pop()
        if isinstance(current, PojoCodec):
            if any(id(c) in PRIMITIVE_SERIALIZERS for c in current.codecs):
                return True
            pending += current.codecs
            pending += current.subclasses.values()
        else:
            pending += _nested_codecs(current)
    return False


def _nested_codecs(codec: Codec | None) -> list[Codec]:
    if isinstance(codec, TtlCodec):
        return [codec.user]
    if isinstance(codec, NullableCodec):
        return [codec.inner]
    if isinstance(codec, EitherCodec):
        return [codec.left, codec.right]
    if isinstance(codec, ListCodec):
        return [codec.element]
    if isinstance(codec, MapCodec):
        return [codec.key, codec.value]
    if isinstance(codec, StructCodec):
        return list(codec.codecs)
    return []


def null_fields(codec: Codec, value: Any) -> Iterator[tuple[PojoCodec, str]]:
    """The POJO fields (of `value` and of the values nested in it) that `value` sets to null
    where a primitive serializer writes the field: the job may declare it `int`, not
    `Integer`."""
    pending: list[tuple[Codec | None, Any]] = [(codec, value)]
    while pending:
        current, value = pending.pop()
        if value is None or isinstance(value, Raw):
            continue
        if not isinstance(current, PojoCodec):
            pending += _nested_values(current, value)
            continue
        subclass = value.get(CLASS)
        if subclass is not None and subclass != current.type_class:  # its own serializer's
            own = current.subclasses.get(subclass)
            pending.append((own, {k: v for k, v in value.items() if k != CLASS}))
            continue
        for name, field_codec in zip(current.names, current.codecs, strict=True):
            field = value.get(name)
            if field is None and id(field_codec) in PRIMITIVE_SERIALIZERS:
                yield current, name
            pending.append((field_codec, field))


def _nested_values(codec: Codec | None, value: Any) -> list[tuple[Codec | None, Any]]:
    """The values a container holds, each with its codec (none for a leaf)."""
    if isinstance(codec, TtlCodec):
        return [(codec.user, value.value if isinstance(value, TtlValue) else value)]
    if isinstance(codec, NullableCodec):
        return [(codec.inner, value)]
    if isinstance(codec, EitherCodec) and isinstance(value, Either):
        return [(codec.left if value.is_left else codec.right, value.value)]
    if isinstance(codec, ListCodec) and isinstance(value, list):
        return [(codec.element, v) for v in value]
    if isinstance(codec, MapCodec) and isinstance(value, list):
        return [pair for k, v in value for pair in ((codec.key, k), (codec.value, v))]
    if isinstance(codec, StructCodec) and isinstance(value, dict):
        return [(c, value.get(n)) for n, c in zip(codec.names, codec.codecs, strict=True)]
    return []
