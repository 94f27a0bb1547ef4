"""A state carried into a new version of its job's types: the serializer snapshots that version
writes, and each value converted to them (`statectl migrate --classpath`).

Snapshots (`SnapshotEvolver`) are walked as `compatibility.TypeChecker` walks them, old snapshot
against the new `DeclaredType`:

- a **POJO** is written as `PojoSerializerSnapshotData.writeSnapshotData` writes it for the new
  class: the class, then one entry per field of the new class in `PojoTypeInfo`'s order (sorted
  by name), its key `PojoFieldUtils.writeField` (declaring class, field name) and its value the
  field's versioned snapshot (a kept field's evolved, an added field's new), then the subclass
  maps as they were;
- **Tuple, Row, List, Map, TTL, Nullable** (`CompositeTypeSerializerSnapshot`s) are rebuilt
  around their evolved nested snapshots with their outer payload copied;
- a **basic type** changed is the new type's `SimpleTypeSerializerSnapshot`.

Values (`ValueEvolver`) are decoded with the old snapshot's codec and become what the new one
writes: POJO fields by name (a renamed one under its new name, a removed one dropped, an added
one null, or the Java default of a primitive field), Tuple and Row fields by position (an added
Row field null), numbers widened (`WIDENINGS`) or, when asked, narrowed with a range check, a
string parsed as the new number. A value that cannot be converted raises `ConversionError`
naming the field.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from statectl.errors import FormatError
from statectl.formats.class_files import ClassFinder
from statectl.formats.compatibility import (
    POJO_SNAPSHOT,
    ROW_SNAPSHOT,
    TUPLE_SNAPSHOT,
    short,
)
from statectl.formats.java_io import DataReader, DataWriter
from statectl.formats.job_types import (
    CLASS,
    SCALAR,
    DeclaredType,
    hierarchy,
    pojo_shape,
    scalar_class,
)
from statectl.formats.serializer_snapshots import (
    SerializerSnapshot,
    at_end,
    read_versioned_snapshot,
)
from statectl.formats.upgrade import (
    element_snapshot,
    read_optional_map,
    rebuilt_composite,
    write_optional_map,
)
from statectl.formats.values import scalars
from statectl.formats.values.composites import (
    ListCodec,
    MapCodec,
    NullableCodec,
    RowCodec,
    StructCodec,
    TtlCodec,
)
from statectl.formats.values.model import Codec, TtlValue, codec_for
from statectl.formats.values.pojo import CLASS as SUBCLASS_KEY
from statectl.formats.values.pojo import PojoCodec

# Serializers that wrap one nested serializer (its index) and write what it writes.
_WRAPPERS = {
    "org.apache.flink.api.java.typeutils.runtime.NullableSerializer$NullableSerializerSnapshot": -1,
    "org.apache.flink.runtime.state.ttl.TtlStateFactory$TtlSerializerSnapshot": 1,
    "org.apache.flink.runtime.state.v2.ttl.TtlStateFactory$TtlSerializerSnapshot": 1,
}
_COLLECTIONS = frozenset(
    {
        "org.apache.flink.api.common.typeutils.base.ListSerializerSnapshot",
        "org.apache.flink.runtime.state.ArrayListSerializerSnapshot",
        "org.apache.flink.api.common.typeutils.base.MapSerializerSnapshot",
    }
)
_INTEGERS = {scalars.BYTE: 8, scalars.SHORT: 16, scalars.INT: 32, scalars.LONG: 64}
_FLOATS = (scalars.FLOAT, scalars.DOUBLE)
_NUMBERS = (*_INTEGERS, *_FLOATS)
# What Java widens without a cast and Flink's numbers hold exactly: (old, new) codecs.
WIDENINGS = frozenset(
    {(a, b) for a in _INTEGERS for b in _INTEGERS if _INTEGERS[a] < _INTEGERS[b]}
    | {(a, scalars.DOUBLE) for a in (scalars.BYTE, scalars.SHORT, scalars.INT, scalars.FLOAT)}
    | {(a, scalars.FLOAT) for a in (scalars.BYTE, scalars.SHORT)}
)
_PRIMITIVE_DEFAULTS = {"boolean": False, "char": "\x00", "float": 0.0, "double": 0.0}


class ConversionError(FormatError):
    """A value that cannot be converted into the new type; `path` names the field."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"field {path}: {message}" if path else message)
        self.path = path


def scalar_change(old: Codec, new: Codec) -> str | None:
    """Why statectl cannot convert values of basic type `old` to `new` (None: it can)."""
    if old is new or (old in _NUMBERS and new in _NUMBERS):
        return None
    if old is scalars.STRING and new in _NUMBERS:
        return None  # parsed value by value
    if new is scalars.STRING and old in (*_INTEGERS, scalars.BOOLEAN, scalars.CHAR):
        return None
    return f"{old.describe()} → {new.describe()}: statectl has no conversion"


# --- snapshots -----------------------------------------------------------------------------------


@dataclass
class SnapshotEvolver:
    """Old serializer snapshots rewritten as the new job's serializers write them; its classes
    from `classes`; `renames` (old POJO field name → new) apply to every POJO of the state
    that has the old field while its new class has the new one (`renamed` records them)."""

    classes: ClassFinder
    renames: Mapping[str, str] = field(default_factory=dict)
    flink_major: int = 2  # whose TypeExtractor types the new classes' fields
    renamed: set[str] = field(default_factory=set)

    def unused_renames(self) -> list[str]:
        """`OLD=NEW` of the renames no POJO of the state took: a field name mistyped."""
        return [f"{o}={n}" for o, n in self.renames.items() if o not in self.renamed]

    def evolve(self, old: SerializerSnapshot, new: DeclaredType | None) -> SerializerSnapshot:
        """`old` as the new job writes it for type `new` (None: the same type, whose classes
        the class path may have changed); `FormatError` when statectl cannot write it."""
        name = old.class_name
        if new is not None and new.kind == CLASS:  # the class path decides: the same class?
            if old.type_name != new.name:
                raise FormatError(f"{old.label} → class {new.name}: statectl cannot migrate it")
            new = None
        if not old.parsed:
            if new is None:
                return old
            raise FormatError(f"{old.label}: snapshot not understood")
        if name in _WRAPPERS:
            if not old.nested:
                raise FormatError(f"{old.label}: its nested snapshot was not read")
            index = _WRAPPERS[name] % len(old.nested)
            return self._rebuilt(old, {index: new})
        if name in _COLLECTIONS:
            args = new.args if new is not None else (None,) * len(old.nested)
            if len(args) != len(old.nested):
                raise FormatError(f"{old.label} → {new.describe() if new else '?'}")
            return self._rebuilt(old, dict(enumerate(args)))
        if name == POJO_SNAPSHOT:
            return self._pojo(old)
        if name in (TUPLE_SNAPSHOT, ROW_SNAPSHOT):
            return self._fields(old, new)
        if new is None:
            return self._rebuilt(old, {}) if old.nested else old
        if new.kind == SCALAR:
            return _scalar_snapshot(old, new)
        raise FormatError(f"{old.label} → {new.describe()}: statectl cannot migrate it")

    def _rebuilt(
        self, old: SerializerSnapshot, new_types: Mapping[int, DeclaredType | None]
    ) -> SerializerSnapshot:
        """A composite with each nested snapshot evolved (to its type in `new_types`, else
        the same type); the same snapshot when none changed."""
        nested = [self.evolve(n, new_types.get(i)) for i, n in enumerate(old.nested)]
        if all(a.raw == b.raw for a, b in zip(nested, old.nested, strict=True)):
            return old
        return rebuilt_composite(old, nested)

    def _fields(self, old: SerializerSnapshot, new: DeclaredType | None) -> SerializerSnapshot:
        """A Tuple's or Row's fields by position; a Row may gain fields at its end."""
        if new is None:
            return self._rebuilt(old, {})
        count = len(old.nested)
        extra = new.args[count:]
        if len(new.args) < count or (extra and old.class_name != ROW_SNAPSHOT):
            raise FormatError(f"{old.label} of {count} fields → {new.describe()}")
        nested = [self.evolve(n, t) for n, t in zip(old.nested, new.args, strict=False)]
        nested += [_new_snapshot(t) for t in extra]
        if len(nested) == count and all(
            a.raw == b.raw for a, b in zip(nested, old.nested, strict=True)
        ):
            return old
        return rebuilt_composite(old, nested)

    def _pojo(self, old: SerializerSnapshot) -> SerializerSnapshot:
        """`PojoSerializerSnapshotData.writeSnapshotData` for the new class: its fields sorted
        by name (`PojoTypeInfo`), each keyed by `PojoFieldUtils.writeField`."""
        java_class = old.type_name or "?"
        cls = self.classes.find(java_class)
        if cls is None:
            raise FormatError(f"class {java_class} is not on the class path")
        shape = pojo_shape(self.classes, cls, self.flink_major)
        if shape.not_pojo:
            raise FormatError(f"{short(java_class)} is no longer a POJO ({shape.not_pojo})")
        olds = dict(zip(old.field_names, old.nested, strict=False))
        declaring = self._declaring_classes(java_class)
        back = {new: old_name for old_name, new in self.renames.items()}
        entries = []
        for name, declared in shape.fields.items():
            source = back.get(name, name) if back.get(name) in olds else name
            if source != name:
                self.renamed.add(source)
            previous = olds.get(source)
            snapshot = (
                self.evolve(previous, declared) if previous is not None else _new_snapshot(declared)
            )
            key = DataWriter()
            key.write_utf(declaring[name])
            key.write_utf(name)
            entries.append((name, key.getvalue(), snapshot.raw))
        r = DataReader(old.raw)
        class_name, version, type_name = r.read_utf(), r.read_i32(), r.read_utf()
        read_optional_map(r)  # the old fields
        out = DataWriter()
        out.write_utf(class_name)
        out.write_i32(version)
        out.write_utf(type_name)
        write_optional_map(out, entries)
        out.write_bytes(r.read_bytes(r.remaining()))  # the subclass maps, as they were
        if out.getvalue() == old.raw:
            return old
        return read_versioned_snapshot(DataReader(out.getvalue()), at_end)

    def _declaring_classes(self, java_class: str) -> dict[str, str]:
        """Field name → the class (or superclass) that declares it."""
        found: dict[str, str] = {}
        for owner in hierarchy(self.classes, java_class):
            for member in owner.fields:
                found.setdefault(member.name, owner.name)
        return found


def _scalar_snapshot(old: SerializerSnapshot, new: DeclaredType) -> SerializerSnapshot:
    before = codec_for(old)
    if before.describe() == new.name:  # unchanged (primitive arrays included)
        return old
    after = _scalar_codec(new.name)
    problem = scalar_change(before, after)
    if problem:
        raise FormatError(problem)
    return old if before is after else _new_snapshot(new)


def _new_snapshot(declared: DeclaredType) -> SerializerSnapshot:
    """The snapshot of a field the old type did not have: basic types only."""
    java_class = scalar_class(declared.name) if declared.kind == SCALAR else None
    if java_class is None:
        what = declared.describe() if declared.kind != CLASS else f"class {declared.name}"
        raise FormatError(f"a new field of type {what}: statectl writes only basic types")
    return element_snapshot(java_class)


def _scalar_codec(name: str) -> Codec:
    java_class = scalar_class(name)
    if java_class is None:
        raise FormatError(f"type {name}: no basic serializer")
    return codec_for(element_snapshot(java_class))


# --- values --------------------------------------------------------------------------------------


@dataclass
class ValueEvolver:
    """Values decoded with an old codec, as the new codec writes them. `narrow`: numbers may
    narrow (each checked to fit); `nulls_on_error`: a field that cannot be converted becomes
    null where the new field is nullable (`nulls` counts them)."""

    renames: Mapping[str, str] = field(default_factory=dict)
    narrow: bool = False
    nulls_on_error: bool = False
    nulls: int = 0

    def evolve(self, old: Codec, new: Codec, value: Any, path: str = "") -> Any:
        if value is None:
            return None
        if isinstance(old, TtlCodec) and isinstance(new, TtlCodec):
            return TtlValue(value.timestamp, self.evolve(old.user, new.user, value.value, path))
        if isinstance(old, NullableCodec) and isinstance(new, NullableCodec):
            return self.evolve(old.inner, new.inner, value, path)
        if isinstance(old, PojoCodec) and isinstance(new, PojoCodec):
            return self._pojo(old, new, value, path)
        if isinstance(old, MapCodec) and isinstance(new, MapCodec):
            return [
                (self.evolve(old.key, new.key, k, path), self.evolve(old.value, new.value, v, path))
                for k, v in value
            ]
        if isinstance(old, ListCodec) and isinstance(new, ListCodec):
            return [self.evolve(old.element, new.element, v, path) for v in value]
        if isinstance(old, StructCodec) and isinstance(new, StructCodec):
            return self._struct(old, new, value, path)
        if old is new or type(old) is not scalars.Scalar:
            return value
        return convert_scalar(old, new, value, self.narrow, path)

    def _pojo(self, old: PojoCodec, new: PojoCodec, value: Any, path: str) -> Any:
        if value.get(SUBCLASS_KEY) not in (None, old.type_class):
            return value  # a subclass's value: its serializer is unchanged
        back = {n: o for o, n in self.renames.items()}
        olds = dict(zip(old.names, old.codecs, strict=True))
        result: dict[str, Any] = {}
        for name, codec in zip(new.names, new.codecs, strict=True):
            source = back[name] if back.get(name) in olds else name  # as `SnapshotEvolver`
            where = f"{path}.{name}" if path else name
            if source not in olds:
                result[name] = _default(new.primitive(name))
                continue
            try:
                result[name] = self.evolve(olds[source], codec, value.get(source), where)
            except ConversionError:
                if not self.nulls_on_error or new.primitive(name):
                    raise
                result[name] = None
                self.nulls += 1
        return result

    def _struct(self, old: StructCodec, new: StructCodec, value: Any, path: str) -> Any:
        """Tuple and Row fields by position; a Row's added fields null."""
        result = {k: v for k, v in value.items() if k not in old.names}  # a Row's kind
        for i, (name, codec) in enumerate(zip(new.names, new.codecs, strict=True)):
            if i >= len(old.names):
                result[name] = None
                continue
            where = f"{path}.{name}" if path else name
            item = value.get(old.names[i])
            try:
                result[name] = self.evolve(old.codecs[i], codec, item, where)
            except ConversionError:
                if not (self.nulls_on_error and isinstance(new, RowCodec)):
                    raise
                result[name] = None
                self.nulls += 1
        return result


def _default(primitive: str | None) -> Any:
    """What Flink's PojoSerializer leaves in a field it has no value for: the constructor's
    (null), or a primitive's Java default."""
    if primitive is None:
        return None
    return _PRIMITIVE_DEFAULTS.get(primitive, 0)


def convert_scalar(old: Codec, new: Codec, value: Any, narrow: bool, path: str = "") -> Any:
    """One basic value of `old`'s type as `new` holds it; `ConversionError` when it does not
    parse or fit."""
    if old is scalars.STRING and new in _NUMBERS:
        return _fitted(new, _parsed(new, value, path), path)
    if new is scalars.STRING:
        return str(value).lower() if isinstance(value, bool) else str(value)
    if (old, new) in WIDENINGS:
        return float(value) if new in _FLOATS else value
    if not narrow:
        raise ConversionError(
            path, f"{old.describe()} → {new.describe()} narrows: allow it (a range check)"
        )
    if new in _INTEGERS and isinstance(value, float):
        if not value.is_integer():
            raise ConversionError(path, f"{value!r} is not a whole number")
        value = int(value)
    return _fitted(new, value, path)


def _parsed(new: Codec, text: str, path: str) -> int | float:
    try:
        return float(text) if new in _FLOATS else int(text.strip())
    except ValueError:
        raise ConversionError(path, f"{text!r} does not parse as {new.describe()}") from None


def _fitted(new: Codec, value: int | float, path: str) -> int | float:
    if new in _INTEGERS:
        bits = _INTEGERS[new]
        if not -(1 << (bits - 1)) <= value < 1 << (bits - 1):
            raise ConversionError(path, f"{value} does not fit in {new.describe()}")
        return int(value)
    value = float(value)
    if new is scalars.FLOAT and math.isfinite(value) and abs(value) > 3.4028234663852886e38:
        raise ConversionError(path, f"{value} does not fit in FLOAT")
    return value
