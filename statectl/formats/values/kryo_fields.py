"""What Kryo's FieldSerializer writes for a class of the user's own, from its class files.

Kryo writes such an object's fields without names or types, so their layout comes from the
job's classes (a `ClassFinder`, no JVM). The rules, the same in Kryo 2.24 (Flink 1.x) and Kryo 5.6
(Flink 2.x) unless said:

- Which fields: those declared by the class and each superclass up to `Object`, minus static,
  transient (`serializeTransient` is false) and synthetic ones (`ignoreSyntheticFields` is
  true), sorted by name with `String.compareTo`, a stable sort over the class's fields first
  (2.24 `FieldSerializer.rebuildCachedFields`/`buildValidFields`/`compare`; 5.6
  `CachedFields.rebuild`/`addField`/`compare`, `FieldSerializerConfig`).
- How each is written: a primitive field directly (`int`/`long` as zigzag varints, since
  `varIntsEnabled`/`varEncoding` is on; the others in fixed width: 2.24 `UnsafeCacheFields`,
  `ObjectField.ObjectIntField`…; 5.6 `ReflectField.IntReflectField`…); any other field by
  `ObjectField.write` (2.24) / `ReflectField.write` (5.6): when `kryo.isFinal(fieldType)` (an
  array is final when its element class is) with that class's serializer and
  `writeObjectOrNull` (a reference marker, or a null flag for the boxed primitives), else
  `writeClass` of the value's class, then `writeObject` (a reference marker, then the object).
  A String field is an object field: with references on, `useReferences(String)` is true, so
  neither Kryo picks its String-only field (`UnsafeStringField` / `StringUnsafeField`).
- Which serializer a class gets: FieldSerializer unless Kryo has a default for it
  (`Kryo.addDefaultSerializer`: collections, maps, `KryoSerializable`, enums…) or the class
  names one (`@DefaultSerializer`).
- A field of a parameterized type hands its type arguments (`TypeArgument`) to the serializer
  of its value: `CollectionSerializer` and `MapSerializer` then write an element, key or value
  whose type argument is a final class by that class's serializer, without a class tag (and
  Kryo 5 its collections with a has-null flag for a same-type flag). Kryo 2.24 passes the first
  level only, each argument as a class (a parameterized one by its raw class, a wildcard as
  `Object`: `FieldSerializerGenericsUtil.computeFieldGenerics`, `ObjectField.generics`,
  `setGenerics`), to the field value's serializer alone. Kryo 5.6 passes the whole tree
  (`Generics.GenericType`, a wildcard by its bound: `GenericsUtil.resolveType`) on the generics
  stack: a collection's elements get its last argument's arguments, a map's keys and values
  their own (`DefaultGenerics.nextGenericTypes`, `MapSerializer.write`).

Refused (`Undecodable`, with the reason): a class or superclass the class path lacks (a JDK
superclass such as `AbstractList`: its fields are not in the job's jar), a class implementing a
JDK collection or map interface or `KryoSerializable`, Kryo annotations (`@DefaultSerializer`,
`@Bind`, `@Optional`, `@NotNull`…), two fields of one name, a field whose type is or has as an
argument a type variable or an array of a parameterized type, a field type or type argument
whose finality is not known (a JDK class statectl does not list), and in Kryo 2 a
`scala.Serializable` class with synthetic fields (chill's `KryoBase` keeps them).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from statectl.errors import FormatError
from statectl.formats.class_files import (
    ClassFile,
    ClassFinder,
    Member,
    TypeSignature,
    parse_field_signature,
)
from statectl.formats.values.model import Undecodable

PRIMITIVES = frozenset(("int", "long", "short", "byte", "char", "boolean", "float", "double"))

# Interfaces that give a class another Kryo default serializer than FieldSerializer.
_SERIALIZER_INTERFACES = frozenset(
    {
        f"java.util.{name}"
        for name in (
            "Collection",
            "List",
            "Set",
            "Queue",
            "Deque",
            "SortedSet",
            "NavigableSet",
            "SequencedCollection",
            "SequencedSet",
            "Map",
            "SortedMap",
            "NavigableMap",
            "SequencedMap",
        )
    }
    | {
        f"java.util.concurrent.{name}"
        for name in (
            "BlockingQueue",
            "BlockingDeque",
            "TransferQueue",
            "ConcurrentMap",
            "ConcurrentNavigableMap",
        )
    }
    | {"com.esotericsoftware.kryo.KryoSerializable"}
)
_KRYO_ANNOTATIONS = "Lcom/esotericsoftware/kryo/"
_SCALA_SERIALIZABLE = "scala.Serializable"
_OBJECT = "java.lang.Object"
_DESCRIPTORS = {
    "byte": "B", "char": "C", "double": "D", "float": "F", "int": "I", "long": "J", "short": "S",
    "boolean": "Z",
}  # fmt: skip
_ENUM = "java.lang.Enum"
# Superclasses between a class and Object: javac's own sources stay below 20; a class path
# with a chain of thousands is built to make the walk (a class file read each) take forever.
MAX_SUPERCLASSES = 1_000


@dataclass(frozen=True, slots=True)
class TypeArgument:
    """A type argument Kryo hands a serializer: its class (`Class.getName()`), the class again
    when Kryo takes it as final (`value_class`, written by its serializer without a class tag),
    and its own type arguments (Kryo 5; none in Kryo 2, which passes one level)."""

    java_class: str
    value_class: str | None
    args: tuple[TypeArgument, ...] = ()


@dataclass(frozen=True, slots=True)
class KryoField:
    """One field FieldSerializer writes: its name and declared type (`Class.getName()`), and
    how: `primitive` directly; else `value_class` (the declared type, when final) by its
    serializer with a reference marker or null flag, or (None) a class tag, then the object,
    whose serializer gets the field's `type_args` (none for a type that is not parameterized)."""

    name: str
    type_name: str
    primitive: bool
    value_class: str | None
    type_args: tuple[TypeArgument, ...] = ()


class KryoClasses:
    """The user classes one Kryo serializer may meet, from a class path: which are written by
    FieldSerializer and their fields, which are enums and their constants, which are final."""

    __slots__ = ("_layouts", "classpath", "jdk_final", "kryo")

    def __init__(
        self, classpath: ClassFinder, kryo: int, jdk_final: Callable[[str], bool | None]
    ) -> None:
        self.classpath = classpath
        self.kryo = kryo  # 2 or 5
        self.jdk_final = jdk_final  # Kryo.isFinal of a JDK class statectl knows, else None
        self._layouts: dict[str, tuple[KryoField, ...] | Undecodable] = {}

    def find(self, java_class: str) -> ClassFile | None:
        try:
            return self.classpath.find(java_class)
        except FormatError as exc:
            raise Undecodable(f"class {java_class} unreadable: {exc}") from None

    def enum_constants(self, java_class: str) -> tuple[str, ...] | None:
        """The constants of an enum of the class path (ordinal order), None for another class."""
        found = self.find(java_class)
        if found is None or not found.is_enum or found.super_name != _ENUM:
            return None
        return found.enum_constants()

    def is_final(self, java_class: str) -> bool | None:
        """`Kryo.isFinal`: an array by its element class; None when the class is unknown."""
        element = java_class.lstrip("[")
        if element != java_class:
            if len(element) == 1:
                return True  # a primitive element class
            if not element.startswith("L") or not element.endswith(";"):
                return None
            element = element[1:-1]
        if element in PRIMITIVES:
            return True
        known = self.jdk_final(element)
        if known is not None:
            return known
        found = self.find(element)
        return None if found is None else found.is_final

    def layout(self, java_class: str) -> tuple[KryoField, ...]:
        """The fields FieldSerializer writes for `java_class`, in order; `Undecodable` when
        Kryo would not use FieldSerializer or statectl cannot tell how it writes them."""
        cached = self._layouts.get(java_class)
        if cached is None:
            try:
                cached = self._layout(java_class)
            except Undecodable as exc:
                cached = exc
            self._layouts[java_class] = cached
        if isinstance(cached, Undecodable):
            raise Undecodable(cached.message)
        return cached

    def _layout(self, java_class: str) -> tuple[KryoField, ...]:
        where = f"Kryo FieldSerializer of {java_class}"
        classes = self._hierarchy(java_class, where)
        interfaces = self._interfaces(classes)
        special = sorted(interfaces & _SERIALIZER_INTERFACES)
        if special:
            raise Undecodable(
                f"{where}: it implements {special[0]}, which Kryo serializes otherwise"
            )
        for cls in classes:
            kryo_annotations = [a for a in cls.annotations if a.startswith(_KRYO_ANNOTATIONS)]
            if kryo_annotations:
                raise Undecodable(f"{where}: {cls.name} has Kryo annotation {kryo_annotations[0]}")
        scala = _SCALA_SERIALIZABLE in interfaces
        members = []
        for cls in classes:
            for field in cls.fields:
                if field.is_static or field.is_transient:
                    continue
                if field.is_synthetic:
                    if scala and self.kryo == 2:
                        raise Undecodable(
                            f"{where}: synthetic field {field.name} of a Scala class (chill "
                            "writes them with its Kryo, Flink 1.x's Java-only Kryo does not)"
                        )
                    continue
                if any(a.startswith(_KRYO_ANNOTATIONS) for a in field.annotations):
                    raise Undecodable(f"{where}: field {field.name} has a Kryo annotation")
                members.append((cls, field))
        names = [field.name for _, field in members]
        if len(set(names)) != len(names):
            twice = sorted({n for n in names if names.count(n) > 1})[0]
            raise Undecodable(f"{where}: two fields named {twice} (a superclass's is hidden)")
        members.sort(key=lambda m: _java_order(m[1].name))
        return tuple(self._field(where, field) for _, field in members)

    def _field(self, where: str, field: Member) -> KryoField:
        try:
            type_name = field.type_name
        except FormatError as exc:
            raise Undecodable(f"{where}: field {field.name}: {exc.message}") from None
        if type_name in PRIMITIVES:
            return KryoField(field.name, type_name, True, None)
        type_args: tuple[TypeArgument, ...] = ()
        if field.signature is not None:
            try:
                signature = parse_field_signature(field.signature)
            except FormatError as exc:
                raise Undecodable(f"{where}: field {field.name}: {exc.message}") from None
            try:
                type_args = self._field_arguments(signature)
            except Undecodable as exc:
                raise Undecodable(
                    f"{where}: field {field.name} of generic type {field.signature}: {exc.message}"
                ) from None
        final = self.is_final(type_name)
        if final is None:
            raise Undecodable(
                f"{where}: field {field.name} of {type_name}: whether the class is final "
                "is not known (not on the class path)"
            )
        return KryoField(field.name, type_name, False, type_name if final else None, type_args)

    def _field_arguments(self, signature: TypeSignature) -> tuple[TypeArgument, ...]:
        """The type arguments a field of this generic type hands its value's serializer."""
        if signature.kind == "array":
            component = signature.args[0]
            if component.kind == "var" or component.args:
                raise Undecodable("an array of a type variable or parameterized type")
            return ()
        if signature.kind == "var":
            raise Undecodable("a type variable")
        nested = self.kryo == 5  # Kryo 2 passes the first level only
        return tuple(self._argument(arg, nested) for arg in signature.args)

    def _argument(self, arg: TypeSignature, nested: bool) -> TypeArgument:
        """One type argument as Kryo resolves it: a wildcard as `Object` (Kryo 2) or by its
        bound (Kryo 5, without the bound's own arguments), a parameterized type by its raw
        class, an array of a plain class as that array class."""
        args: tuple[TypeArgument, ...] = ()
        if arg.kind == "wildcard":
            bound = arg.args[0] if arg.args and nested else None
            name = _OBJECT if bound is None else self._class_name(bound)
        else:
            name = self._class_name(arg)
            if nested and arg.kind == "class":
                args = tuple(self._argument(a, nested) for a in arg.args)
        final = self.is_final(name)
        if final is None:
            raise Undecodable(f"whether {name} is final is not known (not on the class path)")
        return TypeArgument(name, name if final else None, args)

    def _class_name(self, signature: TypeSignature) -> str:
        """`Class.getName()` of a class or plain array type (its erasure)."""
        if signature.kind == "class":
            return signature.name
        if signature.kind == "array":
            component = signature.args[0]
            if component.kind == "base":
                return "[" + _DESCRIPTORS[component.name]
            if component.kind == "array" or (component.kind == "class" and not component.args):
                inner = self._class_name(component)
                return "[" + (inner if inner.startswith("[") else f"L{inner};")
        raise Undecodable("a type variable or an array of a parameterized type")

    def _hierarchy(self, java_class: str, where: str) -> list[ClassFile]:
        classes: list[ClassFile] = []
        seen: set[str] = set()
        name: str | None = java_class
        while name is not None and name != _OBJECT:
            if name in seen:
                raise Undecodable(f"{where}: its superclasses form a cycle")
            if len(classes) > MAX_SUPERCLASSES:
                raise Undecodable(f"{where}: more than {MAX_SUPERCLASSES} superclasses")
            found = self.find(name)
            if found is None:
                what = "it is" if name == java_class else f"its superclass {name} is"
                raise Undecodable(f"{where}: {what} not on the class path")
            if found.is_interface or found.is_enum or found.super_name == _ENUM:
                raise Undecodable(f"{where}: {found.name} is not a plain class")
            seen.add(name)
            classes.append(found)
            name = found.super_name
        return classes

    def _interfaces(self, classes: list[ClassFile]) -> set[str]:
        """Every interface the classes implement, through the interfaces the class path has."""
        seen: set[str] = set()
        todo = [name for cls in classes for name in cls.interfaces]
        while todo:
            name = todo.pop()
            if name in seen:
                continue
            seen.add(name)
            found = self.find(name)
            if found is not None:
                todo.extend(found.interfaces)
        return seen


def _java_order(name: str) -> bytes:
    """`String.compareTo` order: by UTF-16 code units."""
    return name.encode("utf-16-be", "surrogatepass")
