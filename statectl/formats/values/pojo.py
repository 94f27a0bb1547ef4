"""`PojoSerializer`: a flags byte, then every field with a null flag, or a subclass's value.

Mirrors `PojoSerializer.serialize/deserialize` and `PojoSerializerSnapshot(Data)`
(flink-state-values.md §3): flags 1 = null, 2 = the POJO's own fields follow (each a null flag,
then the field serializer's bytes, in the snapshot's field order), 4 = a subclass named in UTF,
then its own serializer's bytes, 8 = a registered subclass by its tag (the index in the
snapshot's registered-subclass map). A subclass value is the subclass's fields with its class
under `__class`; a subclass the snapshot does not list cannot be read (its fields are unknown).
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Any

from statectl.errors import FormatError
from statectl.formats.java_io import encode_modified_utf8
from statectl.formats.serializer_snapshots import MISSING_FIELD, SerializerSnapshot
from statectl.formats.values.model import Codec, Context, Undecodable, register

if TYPE_CHECKING:
    import pyarrow as pa

IS_NULL, NO_SUBCLASS, IS_SUBCLASS, IS_TAGGED_SUBCLASS = 1, 2, 4, 8
CLASS = "__class"
_U16 = struct.Struct(">H")


class PojoCodec(Codec):
    __slots__ = ("codecs", "names", "registered", "subclasses", "type_class")

    def __init__(
        self,
        type_class: str,
        names: list[str],
        codecs: list[Codec],
        registered: list[str],
        subclasses: dict[str, Codec | None],
    ) -> None:
        self.type_class = type_class
        self.names = names
        self.codecs = codecs
        self.registered = registered  # tag → class name
        self.subclasses = subclasses  # class name → its codec (None: not readable)

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

        fields = [(n, c.arrow_type()) for n, c in zip(self.names, self.codecs, strict=True)]
        readable = {n: c for n, c in self.subclasses.items() if c is not None}
        if readable:  # a subclass value: its class, and all its fields in a struct of its own
            fields.append((CLASS, pa.string()))
            fields += [(name, codec.arrow_type()) for name, codec in readable.items()]
        return pa.struct(fields)

    def to_arrow(self, value: Any) -> Any:
        subclass = value.get(CLASS)
        converted = {
            n: None if (v := value.get(n)) is None else c.to_arrow(v)
            for n, c in zip(self.names, self.codecs, strict=True)
        }
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
        return {
            n: None if (v := value.get(n)) is None else c.from_arrow(v)
            for n, c in zip(self.names, self.codecs, strict=True)
        }

    def to_json(self, value: Any) -> Any:
        subclass = value.get(CLASS)
        if subclass is not None:
            codec = self.subclasses[subclass]
            assert codec is not None
            return codec.to_json({k: v for k, v in value.items() if k != CLASS})
        return {
            n: None if (v := value.get(n)) is None else c.to_json(v)
            for n, c in zip(self.names, self.codecs, strict=True)
        }

    def describe(self) -> str:
        inner = ", ".join(
            f"{n} {c.describe()}" for n, c in zip(self.names, self.codecs, strict=True)
        )
        return f"POJO {self.type_class}{{{inner}}}"

    def tree(self) -> dict[str, Any]:
        tree: dict[str, Any] = {
            "type": "POJO",
            "class": self.type_class,
            "fields": [
                {"name": n, **c.tree()} for n, c in zip(self.names, self.codecs, strict=True)
            ],
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
    return PojoCodec(type_class, list(snapshot.field_names), codecs, registered, subclasses)
