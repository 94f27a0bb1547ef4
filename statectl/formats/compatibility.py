"""What Flink does when a new version of a job restores a state: its rules, without a JVM.

At restore Flink asks the state's serializer snapshot (in the savepoint) whether the new
serializer can read what the old one wrote: `TypeSerializerSnapshot.resolveSchemaCompatibility`
answers compatible as is, compatible after migration (the state is read with the old serializer
and written with the new one), compatible with a reconfigured serializer (Flink adapts the new
one; nothing changes in the bytes) or incompatible (`StateMigrationException`: the restore
fails). `TypeChecker.check` walks the old snapshot tree against the new job's `DeclaredType` and the
class path, applying each serializer family's own rule (cited below), and says:

- `as-is`: compatible as is, or with a reconfigured serializer;
- `migrates`: compatible after migration, nothing lost (a field added; a field removed, whose
  values the new class has no place for: the reason names it);
- `loses`: Flink restores, but values are lost: a POJO (or Avro record) field gone while
  another appeared, most likely a rename: the old field's values are dropped and the new one
  is null for every key, without a word from Flink;
- `refused`: incompatible, or a snapshot Flink cannot even read against the new class;
- `unknown`: the new type could not be determined (a class not on the class path, a type
  variable, a custom serializer).

Where a part of the type comes from code (a Tuple's, a Row's, a basic type's, the SQL
planner's) and the new job's type was not given (`DeclaredType` None), it is assumed unchanged
(`Verdict.assumed`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from statectl.errors import FormatError
from statectl.formats.class_files import ClassFile, ClassFinder
from statectl.formats.job_types import (
    CLASS,
    LIST,
    MAP,
    ROW,
    SCALAR,
    SET,
    TUPLE,
    UNKNOWN,
    DeclaredType,
    avro_schema,
    is_avro_specific,
    pojo_shape,
)
from statectl.formats.serializer_snapshots import MISSING_FIELD, SerializerSnapshot
from statectl.formats.values.model import codec_for
from statectl.formats.values.scalars import Scalar

AS_IS, MIGRATES, UNKNOWN_VERDICT, LOSES, REFUSED = (
    "as-is",
    "migrates",
    "unknown",
    "loses",
    "refused",
)
# By severity: the verdict of a type is the worst of its parts'.
VERDICTS = (AS_IS, MIGRATES, UNKNOWN_VERDICT, LOSES, REFUSED)
PASSING = frozenset({AS_IS, MIGRATES})

_FLINK = "org.apache.flink."
_BASE = _FLINK + "api.common.typeutils.base."
_RUNTIME = "org.apache.flink.api.java.typeutils.runtime."
POJO_SNAPSHOT = _RUNTIME + "PojoSerializerSnapshot"
KRYO_SNAPSHOT = _RUNTIME + "kryo.KryoSerializerSnapshot"
AVRO_SNAPSHOT = "org.apache.flink.formats.avro.typeutils.AvroSerializerSnapshot"
ENUM_SNAPSHOT = _BASE + "EnumSerializer$EnumSerializerSnapshot"
TUPLE_SNAPSHOT = _RUNTIME + "TupleSerializerSnapshot"
ROW_SNAPSHOT = _RUNTIME + "RowSerializer$RowSerializerSnapshot"
# Serializers that write exactly what the last serializer they wrap writes.
_WRAPPERS = {
    _RUNTIME + "NullableSerializer$NullableSerializerSnapshot": -1,
    "org.apache.flink.runtime.state.ttl.TtlStateFactory$TtlSerializerSnapshot": 1,
    "org.apache.flink.runtime.state.v2.ttl.TtlStateFactory$TtlSerializerSnapshot": 1,
    "org.apache.flink.runtime.state.ttl.TtlAwareSerializerSnapshot": -1,
    "org.apache.flink.api.common.typeutils.SingleThreadAccessCheckingTypeSerializer"
    "$SingleThreadAccessCheckingTypeSerializerSnapshot": -1,
}
# CompositeTypeSerializerSnapshot subclasses over their nested serializers: the kind of
# DeclaredType each stands for (None: only checked with the type assumed unchanged).
_COMPOSITES: dict[str, str | None] = {
    _BASE + "ListSerializerSnapshot": LIST,
    "org.apache.flink.runtime.state.ArrayListSerializerSnapshot": LIST,
    _BASE + "SetSerializerSnapshot": SET,
    _BASE + "MapSerializerSnapshot": MAP,
    _BASE + "GenericArraySerializerSnapshot": None,
    _RUNTIME + "JavaEitherSerializerSnapshot": None,
}
_AVRO_PROMOTIONS = {
    ("int", "long"), ("int", "float"), ("int", "double"), ("long", "float"),
    ("long", "double"), ("float", "double"), ("string", "bytes"), ("bytes", "string"),
}  # fmt: skip


@dataclass(frozen=True)
class Verdict:
    """A verdict, the reasons of the parts that gave it, and whether a part of the type came
    from code and was assumed unchanged."""

    verdict: str
    reasons: tuple[str, ...] = ()
    assumed: bool = False

    @property
    def reason(self) -> str:
        return "; ".join(self.reasons)


def worst(verdicts: Iterable[Verdict]) -> Verdict:
    """The most severe verdict, with the reasons of every part that has it."""
    parts = list(verdicts)
    if not parts:
        return Verdict(AS_IS)
    top = max(parts, key=lambda v: VERDICTS.index(v.verdict)).verdict
    reasons = dict.fromkeys(r for v in parts if v.verdict == top for r in v.reasons)
    return Verdict(top, tuple(reasons), any(v.assumed for v in parts))


def short(java_class: str) -> str:
    """`Model$Order` from `com.acme.Model$Order`."""
    return java_class.rsplit(".", 1)[-1]


class TypeChecker:
    """Old serializer snapshots against the new job's types; the job's classes from
    `classes` (jars or class folders, read without a JVM), typed as Flink `flink_major`'s
    TypeExtractor types them (the Flink that wrote the savepoint: from 1.x to 2.x is
    `upgrade`'s question)."""

    def __init__(self, classes: ClassFinder, flink_major: int = 2) -> None:
        self.classes = classes
        self.flink_major = flink_major

    def check(
        self, old: SerializerSnapshot | None, new: DeclaredType | None, where: str = ""
    ) -> Verdict:
        """What Flink does restoring values of `old` with the new type `new` (None: as the
        old snapshot says, its classes read from the class path). `where` prefixes reasons."""
        if old is None:
            return Verdict(UNKNOWN_VERDICT, (f"{where}no serializer snapshot",))
        if new is not None and new.kind == UNKNOWN:
            return Verdict(UNKNOWN_VERDICT, (f"{where}new type unknown: {new.name}",))
        name = old.class_name
        if not old.parsed:
            return self._other(old, new, where)
        if name in _WRAPPERS:
            return self.check(old.nested[_WRAPPERS[name]] if old.nested else None, new, where)
        rule = {
            POJO_SNAPSHOT: self._pojo, KRYO_SNAPSHOT: self._kryo, AVRO_SNAPSHOT: self._avro,
            ENUM_SNAPSHOT: self._enum, TUPLE_SNAPSHOT: self._tuple, ROW_SNAPSHOT: self._row,
        }.get(name)  # fmt: skip
        if rule is not None:
            return rule(old, new, where)
        if name in _COMPOSITES:
            return self._composite(old, new, where, _COMPOSITES[name])
        codec = codec_for(old)
        if isinstance(codec, Scalar):
            return _scalar(codec.describe(), new, where)
        return self._other(old, new, where)

    def _other(self, old: SerializerSnapshot, new: DeclaredType | None, where: str) -> Verdict:
        """A serializer statectl has no rule for (or whose snapshot it does not read). Flink's
        own (the SQL planner's RowData, CEP's, windows') serve types declared in code: assumed
        unchanged, as the classes they nest are checked. A custom serializer's snapshot has a
        rule of its own, which statectl cannot know."""
        if new is not None:
            return Verdict(UNKNOWN_VERDICT, (f"{where}{old.label} → {new.describe()}: no rule",))
        if not old.class_name.startswith(_FLINK):
            reason = f"{where}custom serializer {short(old.class_name)}: its own rule decides"
            return Verdict(UNKNOWN_VERDICT, (reason,))
        nested = old.nested if old.parsed else ()
        return _assumed(worst(self.check(s, None, where) for s in nested))

    # --- classes: the class path decides ---

    def _find(self, java_class: str) -> ClassFile | None:
        try:
            return self.classes.find(java_class)
        except FormatError:
            return None

    def _pojo(self, old: SerializerSnapshot, new: DeclaredType | None, where: str) -> Verdict:
        """`PojoSerializerSnapshot.resolveSchemaCompatibility`: incompatible when the new
        serializer is no PojoSerializer (the class is no longer a POJO) or of another class, or
        when a field both have is incompatible; compatible after migration when a field was
        added or removed (fields are matched by name: `PojoFieldUtils`, a renamed field is
        one removed and one added) or a field's serializer migrates."""
        java_class = old.type_name or "?"
        mismatch = _other_class(java_class, "POJO", new, where)
        if mismatch:
            return mismatch
        cls = self._find(java_class)
        if cls is None:
            return _not_found(java_class, where)
        shape = pojo_shape(self.classes, cls, self.flink_major)
        label = short(java_class)
        if shape.not_pojo:
            reason = f"{where}{label} is no longer a POJO ({shape.not_pojo}): Flink would use Kryo"
            return Verdict(REFUSED, (reason,))
        fields = {
            n: s for n, s in zip(old.field_names, old.nested, strict=False)
            if not n.startswith(MISSING_FIELD)
        }  # fmt: skip
        parts = [
            self.check(fields[n], shape.fields[n], f"{where}{label}.{n}: ")
            for n in fields
            if n in shape.fields
        ]
        removed = [n for n in fields if n not in shape.fields]
        added = [n for n in shape.fields if n not in fields]
        parts.append(
            _field_changes(
                f"{where}{label}", removed, added, "empty (as the constructor leaves it)"
            )
        )
        for subclass, snapshot in (*old.param("registered", ()), *old.param("nonregistered", ())):
            parts.append(self.check(snapshot, DeclaredType(CLASS, subclass), where))
        return worst(parts)

    def _kryo(self, old: SerializerSnapshot, new: DeclaredType | None, where: str) -> Verdict:
        """`KryoSerializerSnapshot.resolveSchemaCompatibility`: incompatible unless the new
        snapshot is a Kryo one of the same class, or when a registration or default serializer
        is gone (the job's configuration, not in its classes: assumed unchanged). Flink does
        not compare the class's fields: a changed field layout shows only when values are
        read."""
        java_class = old.type_name or "java.lang.Object"
        mismatch = _other_class(java_class, "Kryo", new, where)
        if mismatch:
            return mismatch
        cls = self._find(java_class)
        if cls is None:
            if java_class.startswith(("java.", "javax.")):
                return Verdict(AS_IS)
            return _not_found(java_class, where)
        serializer = self._serializer_of(cls)
        if serializer != "Kryo":
            label = short(java_class)
            reason = f"{where}{label} is now a {serializer}: Flink's Kryo snapshot wants Kryo"
            return Verdict(REFUSED, (reason,))
        return Verdict(AS_IS)

    def _serializer_of(self, cls: ClassFile) -> str:
        """The serializer family Flink's TypeExtractor gives a class."""
        if cls.is_enum:
            return "enum"
        if is_avro_specific(self.classes, cls):
            return "Avro record"
        return "Kryo" if pojo_shape(self.classes, cls, self.flink_major).not_pojo else "POJO"

    def _enum(self, old: SerializerSnapshot, new: DeclaredType | None, where: str) -> Verdict:
        """`EnumSerializer.EnumSerializerSnapshot`: reading the snapshot fails when one of its
        constants is gone (`Enum.valueOf`); the same constants in the same order are compatible
        as is, added or reordered ones with a reconfigured serializer that keeps the old
        indexes (nothing changes in the bytes)."""
        java_class = old.type_name or "?"
        mismatch = _other_class(java_class, "enum", new, where)
        if mismatch:
            return mismatch
        cls = self._find(java_class)
        if cls is None:
            return _not_found(java_class, where)
        label = short(java_class)
        if not cls.is_enum:
            return Verdict(REFUSED, (f"{where}{label} is no longer an enum",))
        before, after = tuple(old.param("constants", ())), cls.enum_constants()
        removed = [c for c in before if c not in after]
        if removed:
            return Verdict(REFUSED, (f"{where}{label}: constant {_names(removed)} removed",))
        if before != after:
            return Verdict(AS_IS, (f"{where}{label}: constants added or reordered (reconfigured)",))
        return Verdict(AS_IS)

    def _avro(self, old: SerializerSnapshot, new: DeclaredType | None, where: str) -> Verdict:
        """`AvroSerializerSnapshot.resolveSchemaCompatibility`: Avro's own
        `SchemaCompatibility.checkReaderWriterCompatibility` (the new schema reads, the old one
        wrote): compatible as is when the schemas are equal, after migration when Avro can
        resolve them, else incompatible."""
        java_class = old.type_name or "?"
        mismatch = _other_class(java_class, "Avro record", new, where)
        if mismatch:
            return mismatch
        cls = self._find(java_class)
        if cls is None:
            return _not_found(java_class, where)
        label = short(java_class)
        if not is_avro_specific(self.classes, cls):
            return Verdict(REFUSED, (f"{where}{label} is no longer an Avro specific record",))
        schema = avro_schema(cls)
        if schema is None:
            return Verdict(UNKNOWN_VERDICT, (f"{where}{label}: no schema found in its class",))
        return avro_change(
            json.loads(old.param("schema") or "null"), json.loads(schema), f"{where}{label}"
        )

    # --- types declared in code: the given type, or assumed unchanged ---

    def _tuple(self, old: SerializerSnapshot, new: DeclaredType | None, where: str) -> Verdict:
        """`TupleSerializerSnapshot` (a CompositeTypeSerializerSnapshot): incompatible when
        the tuple class or the number of fields differs, else as its fields are."""
        return self._fields(old, new, where, TUPLE, f"TUPLE{len(old.nested)}")

    def _row(self, old: SerializerSnapshot, new: DeclaredType | None, where: str) -> Verdict:
        """`RowSerializer.RowSerializerSnapshot` (a CompositeTypeSerializerSnapshot): its
        nested serializers are the fields'; a different number of them is incompatible
        (CompositeTypeSerializerSnapshot.resolveSchemaCompatibility), field names are not in
        the snapshot."""
        return self._fields(old, new, where, ROW, "ROW")

    def _fields(
        self, old: SerializerSnapshot, new: DeclaredType | None, where: str, kind: str, label: str
    ) -> Verdict:
        count = len(old.nested)
        if new is None:
            names = [f"f{i}" for i in range(count)]
            parts = [
                self.check(s, None, f"{where}{label}.{n}: ")
                for n, s in zip(names, old.nested, strict=True)
            ]
            return _assumed(worst(parts))
        if new.kind != kind:
            return Verdict(REFUSED, (f"{where}{label} → {new.describe()}",))
        if len(new.args) != count:
            reason = f"{where}{label} of {count} fields → {len(new.args)} fields"
            return Verdict(REFUSED, (reason,))
        return worst(
            self.check(s, t, f"{where}{label}.{n}: ")
            for n, s, t in zip(new.field_names, old.nested, new.args, strict=True)
        )

    def _composite(
        self, old: SerializerSnapshot, new: DeclaredType | None, where: str, kind: str | None
    ) -> Verdict:
        """List, Set, Map, arrays, Either (CompositeTypeSerializerSnapshot subclasses):
        as their nested serializers are."""
        label = old.label.upper()
        if new is None:
            return _assumed(worst(self.check(s, None, where) for s in old.nested))
        if kind is None or new.kind != kind or len(new.args) != len(old.nested):
            return Verdict(REFUSED, (f"{where}{label} → {new.describe()}",))
        return worst(self.check(s, t, where) for s, t in zip(old.nested, new.args, strict=True))


# --- the parts of the rules ----------------------------------------------------------------------


def _scalar(name: str, new: DeclaredType | None, where: str) -> Verdict:
    """Flink's basic serializers (`SimpleTypeSerializerSnapshot`): compatible as is with the
    same serializer class, else incompatible."""
    if new is None:
        return Verdict(AS_IS, assumed=True)
    if new.kind == SCALAR and new.name == name:
        return Verdict(AS_IS)
    return Verdict(REFUSED, (f"{where}{name} → {new.describe()}",))


def _other_class(
    java_class: str, family: str, new: DeclaredType | None, where: str
) -> Verdict | None:
    """Refused when the new type is not the same class (every class-based snapshot compares
    its class first)."""
    if new is None or (new.kind == CLASS and new.name == java_class):
        return None
    return Verdict(REFUSED, (f"{where}{family} {short(java_class)} → {new.describe()}",))


def _not_found(java_class: str, where: str) -> Verdict:
    return Verdict(UNKNOWN_VERDICT, (f"{where}class {java_class} is not on the class path",))


def _assumed(verdict: Verdict) -> Verdict:
    return Verdict(verdict.verdict, verdict.reasons, True)


def _names(names: list[str]) -> str:
    return ", ".join(names)


def _field_changes(what: str, removed: list[str], added: list[str], filled: str) -> Verdict:
    """Fields matched by name: one gone while another appeared is most likely a rename, and
    the old field's values are dropped (`loses`); one only gone or only added migrates.
    `filled`: what an added field holds after the restore."""
    if removed and added:
        reason = (
            f"{what}: field {_names(removed)} gone and {_names(added)} new (renamed?): the "
            f"values of {_names(removed)} are dropped, {_names(added)} is {filled}"
        )
        return Verdict(LOSES, (reason,))
    if removed:
        return Verdict(MIGRATES, (f"{what}: field {_names(removed)} removed, its values dropped",))
    if added:
        return Verdict(MIGRATES, (f"{what}: field {_names(added)} added, {filled}",))
    return Verdict(AS_IS)


# --- Avro: the new schema reading what the old one wrote (Avro's SchemaCompatibility) ---------


def avro_change(writer: Any, reader: Any, where: str) -> Verdict:
    """Whether Avro resolves `writer` (the old schema) with `reader` (the new): equal is as
    is; records by field name (or a reader field's alias), a reader field missing from the
    writer needs a default, numeric promotions and string ⇄ bytes migrate; a change statectl
    does not resolve (unions, named references) is unknown."""
    if writer == reader:
        return Verdict(AS_IS)
    w_type, r_type = _avro_kind(writer), _avro_kind(reader)
    if w_type == r_type == "record":
        return _avro_record(writer, reader, where)
    if isinstance(writer, str) and isinstance(reader, str):
        if (w_type, r_type) in _AVRO_PROMOTIONS:
            return Verdict(MIGRATES, (f"{where}: {w_type} → {r_type} (Avro promotes it)",))
        if {w_type, r_type} <= _AVRO_PRIMITIVES:
            return Verdict(REFUSED, (f"{where}: {w_type} → {r_type}",))
    if isinstance(writer, dict) and isinstance(reader, dict) and w_type == r_type == "array":
        return avro_change(writer.get("items"), reader.get("items"), f"{where}[]")
    if isinstance(writer, dict) and isinstance(reader, dict) and w_type == r_type == "map":
        return avro_change(writer.get("values"), reader.get("values"), f"{where}{{}}")
    return Verdict(
        UNKNOWN_VERDICT, (f"{where}: Avro type {w_type} → {r_type} not resolved by statectl",)
    )


_AVRO_PRIMITIVES = frozenset(
    {"null", "boolean", "int", "long", "float", "double", "bytes", "string"}
)


def _avro_kind(schema: Any) -> str:
    if isinstance(schema, dict):
        kind = schema.get("type")
        return kind if isinstance(kind, str) and "logicalType" not in schema else json.dumps(schema)
    if isinstance(schema, list):
        return "union"
    return str(schema)


def _avro_record(writer: dict[str, Any], reader: dict[str, Any], where: str) -> Verdict:
    old_fields = {f["name"]: f for f in writer.get("fields", ())}
    parts: list[Verdict] = []
    matched: list[str] = []
    added: list[str] = []
    for field in reader.get("fields", ()):
        names = [field["name"], *field.get("aliases", ())]
        source = next((n for n in names if n in old_fields), None)
        if source is None:
            if "default" not in field:
                reason = f"{where}.{field['name']}: new field without a default"
                return Verdict(REFUSED, (reason,))
            added.append(field["name"])
            continue
        matched.append(source)
        parts.append(
            avro_change(old_fields[source]["type"], field["type"], f"{where}.{field['name']}")
        )
        if source != field["name"]:
            parts.append(
                Verdict(MIGRATES, (f"{where}: field {source} renamed {field['name']} (alias)",))
            )
    removed = [n for n in old_fields if n not in matched]
    parts.append(_field_changes(where, removed, added, "its default"))
    return worst(parts)
