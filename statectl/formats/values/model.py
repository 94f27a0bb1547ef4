"""The value type model: one codec per serializer, found by its snapshot's class name.

A `Codec` reads and writes the bytes one Flink serializer writes, and says what its values are:
an Arrow type, a JSON form, a one-line description and a type tree. Codecs compose through
nested snapshots: a `ListSerializerSnapshot`'s codec holds its element's codec, a POJO's the
codec of every field. Each serializer family registers its factories in its own module
(`register`), keyed by the snapshot class names it reads (flink-state-values.md §1.6).

Decoded values are plain Python: int, float, bool, str, bytes, `Decimal`, lists, dicts (POJO,
Tuple and Row fields by name), lists of `(key, value)` pairs (maps); dates and times as integers
in the unit of their Arrow type. A value no codec reads stays `Raw`: its bytes and the reason.

Two kinds of raw: a type statectl cannot decode (a custom serializer, Kryo classes it does not
have: `Undecodable`), and bytes (or a snapshot) that contradict a type it knows completely: a
value of Flink's own serializers that does not parse, a snapshot of a class statectl reads whose
payload does not, a class name one character off one of those (`corrupt`, `CorruptSnapshot`).
Readers keep both raw; `verify --deep` reports the second kind as corruption.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from statectl.errors import FormatError
from statectl.formats.serializer_snapshots import SerializerSnapshot

if TYPE_CHECKING:
    import pyarrow as pa

    from statectl.formats.class_files import ClassFinder

MAX_DEPTH = 48  # nested serializers; Flink's own types rarely nest beyond ten


class Undecodable(FormatError):
    """A serializer (or one nested in it) whose bytes statectl cannot read."""


class CorruptSnapshot(Undecodable):
    """A serializer snapshot (or one nested in it) that contradicts what statectl knows of its
    class: Flink would not restore it either."""


@dataclass(frozen=True, slots=True)
class Raw:
    """An entry's bytes that stay undecoded, with the serializer's type and the reason."""

    data: bytes
    type_class: str
    reason: str
    # The bytes, or their serializer's snapshot, contradict a type statectl fully knows.
    corrupt: bool = field(default=False, compare=False)


@dataclass(frozen=True, slots=True)
class TtlValue:
    """`TtlValue`: the user value and its last-access time (epoch ms)."""

    timestamp: int
    value: Any


class ValueForms:
    """What a type's values are besides their bytes: an Arrow type, a value's Arrow and JSON
    forms, a one-line description and a type tree. Every `Codec` says so, and so do the parts
    of one that are no codec of their own (an Avro schema's types, a row's fields)."""

    __slots__ = ()

    def arrow_type(self) -> pa.DataType:
        raise NotImplementedError

    def to_arrow(self, value: Any) -> Any:
        """The value as pyarrow takes it for `arrow_type()` (most are already); never given
        None: a null is null in every form."""
        return value

    def from_arrow(self, value: Any) -> Any:
        """The decoded value back from what `to_arrow` gave, as Arrow gives it back in its
        storage form (`arrow_in.arrow_values`: dates, times and timestamps as the integers of
        their unit, extension types as their storage); never given None. Encoding the result
        gives the bytes the value was read from; `Undecodable` where the Arrow form does not
        hold what the bytes need."""
        return value

    def to_json(self, value: Any) -> Any:
        """The value as JSON holds it, by the rules of docs/values.md; never given None."""
        return value

    def describe(self) -> str:
        """One readable line: `BIGINT`, `POJO com.acme.Order{id BIGINT, …}`."""
        raise NotImplementedError

    def tree(self) -> dict[str, Any]:
        """The type as a JSON tree (`inspect --json`)."""
        return {"type": self.describe()}


class Codec(ValueForms):
    """Reads and writes one serializer's values, and says what they are."""

    __slots__ = ()
    # Bytes per value when every value takes the same (TypeSerializer.getLength), else None.
    fixed_length: int | None = None
    # The Java class (or serializer) the codec stands for, shown for raw values.
    type_class: str = ""

    def read(self, buf: memoryview, pos: int) -> tuple[Any, int]:
        """The value serialized at `pos` and the position after it."""
        raise NotImplementedError

    def write(self, value: Any, out: bytearray) -> None:
        """Append `value` as the serializer writes it."""
        raise NotImplementedError

    def decode(self, data: bytes | bytearray | memoryview) -> Any:
        """One value that fills `data` exactly."""
        view = memoryview(data)
        value, end = self.read(view, 0)
        if end != len(view):
            raise FormatError(f"{len(view) - end} unexpected bytes after a {self.describe()} value")
        return value

    def encode(self, value: Any) -> bytes:
        out = bytearray()
        self.write(value, out)
        return bytes(out)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.describe()}>"


class RawCodec(Codec):
    """A serializer statectl does not read: its values stay bytes, with the reason."""

    __slots__ = ("corrupt", "reason", "type_class")

    def __init__(self, type_class: str, reason: str, corrupt: bool = False) -> None:
        self.type_class = type_class
        self.reason = reason
        self.corrupt = corrupt  # the snapshot is damaged, not merely a type statectl lacks

    def read(self, buf: memoryview, pos: int) -> tuple[Any, int]:
        raise self.error()

    def error(self) -> Undecodable:
        return CorruptSnapshot(self.reason) if self.corrupt else Undecodable(self.reason)

    def write(self, value: Any, out: bytearray) -> None:
        if not isinstance(value, Raw):
            raise Undecodable(self.reason)
        out += value.data

    def arrow_type(self) -> pa.DataType:
        import pyarrow as pa

        return pa.binary()

    def to_arrow(self, value: Any) -> Any:
        return value.data if isinstance(value, Raw) else value

    def from_arrow(self, value: Any) -> Any:
        """The raw bytes of the binary column, kept raw."""
        return value if isinstance(value, Raw) else Raw(bytes(value), self.type_class, self.reason)

    def to_json(self, value: Any) -> Any:
        return None

    def describe(self) -> str:
        return f"RAW({short_class(self.type_class)})"

    def tree(self) -> dict[str, Any]:
        return {"type": "RAW", "class": self.type_class, "reason": self.reason}


def short_class(name: str) -> str:
    """`com.acme.Order` from `com.acme.Order`, `…Serializer$Snapshot` to `Serializer`."""
    return name.rsplit(".", 1)[-1].split("$", 1)[0] if "$" in name.rsplit(".", 1)[-1] else name


# --- registry ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Context:
    """What a codec factory may need beyond the snapshot: who wrote the savepoint, how deep,
    and the job's classes when given (Kryo's FieldSerializer of the user's classes)."""

    flink_major: int | None = None  # 1 or 2 (Kryo 2 or 5), from the `_metadata` version
    depth: int = 0
    classpath: ClassFinder | None = None  # the job's jars/class directories, no JVM

    def codec(self, snapshot: SerializerSnapshot | None) -> Codec:
        """The codec of a nested snapshot; `Undecodable` when it cannot be read."""
        codec = codec_for(snapshot, Context(self.flink_major, self.depth + 1, self.classpath))
        if isinstance(codec, RawCodec):
            raise codec.error()
        return codec


Factory = Callable[[SerializerSnapshot, Context], Codec]
_REGISTRY: dict[str, Factory] = {}


def register(*class_names: str) -> Callable[[Factory], Factory]:
    """Register a codec factory for snapshots of these classes."""

    def add(factory: Factory) -> Factory:
        for name in class_names:
            _REGISTRY[name] = factory
        return factory

    return add


def registered(class_name: str) -> bool:
    return class_name in _REGISTRY


def one_off(class_name: str) -> str | None:
    """The registered class name `class_name` differs from in exactly one character (a flipped
    byte of a name statectl reads), or None."""
    same_length = (known for known in _REGISTRY if len(known) == len(class_name))
    for known in same_length:
        if sum(a != b for a, b in zip(known, class_name, strict=True)) == 1:
            return known
    return None


def codec_for(snapshot: SerializerSnapshot | None, context: Context | None = None) -> Codec:
    """The codec of a serializer snapshot; a `RawCodec` saying why when there is none."""
    context = context or Context()
    if snapshot is None:
        return RawCodec("unknown", "no serializer snapshot")
    name = snapshot.type_name or snapshot.class_name
    if context.depth > MAX_DEPTH:
        return RawCodec(name, f"serializers nested more than {MAX_DEPTH} deep")
    short = short_class(snapshot.class_name)
    factory = _REGISTRY.get(snapshot.class_name)
    if not snapshot.parsed:  # a payload statectl reads (its class is registered) is corrupt
        return RawCodec(name, f"snapshot of {short} not understood", factory is not None)
    if factory is None:
        known = one_off(snapshot.class_name)
        if known is not None:
            reason = f"no decoder for {short}: one character off {short_class(known)} (damaged)"
            return RawCodec(name, reason, corrupt=True)
        return RawCodec(name, f"no decoder for {short}")
    try:
        return factory(snapshot, context)
    except Undecodable as exc:
        return RawCodec(name, exc.message, isinstance(exc, CorruptSnapshot))
    except FormatError as exc:
        return RawCodec(name, f"malformed snapshot of {short}: {exc}", corrupt=True)
