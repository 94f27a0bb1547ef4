"""A reader for Java object serialization streams (`ObjectOutputStream`), enough for Flink's
`CheckpointProperties` tail of `_metadata` (flink-savepoint-format.md §2.8).

The tail is copied verbatim when writing; it is parsed only to prove it is complete (a cut
anywhere in it must be an error, not a silently shorter savepoint) and to show what it says
(checkpoint or savepoint, CANONICAL or NATIVE). Grammar: Java Object Serialization
Specification, chapter 6. Objects become `JavaObject(class_name, fields)`, enums their constant
name, strings `str`; custom `writeObject` data and externalizable blocks are skipped.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from statectl.errors import FormatError
from statectl.formats.java_io import DataReader, decode_modified_utf8, excerpt

STREAM_MAGIC = 0xACED
STREAM_VERSION = 5

TC_NULL, TC_REFERENCE, TC_CLASSDESC, TC_OBJECT, TC_STRING, TC_ARRAY = range(0x70, 0x76)
TC_CLASS, TC_BLOCKDATA, TC_ENDBLOCKDATA, TC_RESET, TC_BLOCKDATALONG = range(0x76, 0x7B)
TC_LONGSTRING, TC_PROXYCLASSDESC, TC_ENUM = 0x7C, 0x7D, 0x7E

SC_WRITE_METHOD, SC_SERIALIZABLE, SC_EXTERNALIZABLE, SC_BLOCK_DATA = 0x01, 0x02, 0x04, 0x08

_PRIMITIVES = {
    "B": DataReader.read_u8,
    "C": DataReader.read_u16,
    "D": lambda r: r.read_bytes(8),
    "F": lambda r: r.read_bytes(4),
    "I": DataReader.read_i32,
    "J": DataReader.read_i64,
    "S": DataReader.read_i16,
    "Z": DataReader.read_bool,
}

_ELEMENT_SIZES = {"B": 1, "C": 2, "D": 8, "F": 4, "I": 4, "J": 8, "S": 2, "Z": 1, "L": 1, "[": 1}
_UTF_MIN = 2  # the u16 length of writeUTF
_FIELD_MIN = 3  # type code, then the name's u16 length


@dataclass(frozen=True, slots=True)
class ClassDesc:
    name: str
    flags: int
    fields: tuple[tuple[str, str], ...]  # (type code, field name)
    superclass: ClassDesc | None


@dataclass(slots=True)
class JavaObject:
    class_name: str
    fields: dict[str, Any] = field(default_factory=dict)
    # What a custom `writeObject` wrote after the fields (block data as bytes, then objects):
    # an `ArrayList` keeps its elements here.
    annotations: list[Any] = field(default_factory=list)


def read_object_stream(data: bytes) -> list[Any]:
    """Every top-level object of a complete stream; `FormatError` if it is cut or malformed."""
    reader = DataReader(data)
    if reader.read_u16() != STREAM_MAGIC or reader.read_u16() != STREAM_VERSION:
        raise FormatError("not a Java serialization stream (bad magic)")
    parser = _Parser(reader)
    objects = []
    try:
        while not reader.at_end():
            objects.append(parser.content())
    except RecursionError:
        raise FormatError("Java serialization: objects nested too deeply") from None
    return objects


def read_object(reader: DataReader) -> Any:
    """One object that its own `ObjectOutputStream` wrote at the reader's position (magic, then
    the object: `InstantiationUtil.serializeObject`); the reader moves past it."""
    if reader.read_u16() != STREAM_MAGIC or reader.read_u16() != STREAM_VERSION:
        raise FormatError(f"not a Java serialization stream at offset {reader.pos - 4}")
    try:
        return _Parser(reader).content()
    except RecursionError:
        raise FormatError("Java serialization: objects nested too deeply") from None


class _Parser:
    def __init__(self, reader: DataReader) -> None:
        self.reader = reader
        self.handles: list[Any] = []

    def _new_handle(self, value: Any) -> int:
        self.handles.append(value)
        return len(self.handles) - 1

    def content(self) -> Any:
        tag = self.reader.read_u8()
        match tag:
            case 0x70:
                return None
            case 0x71:
                index = self.reader.read_i32() - 0x7E0000
                if not 0 <= index < len(self.handles):
                    raise FormatError(f"Java serialization: bad back reference {index}")
                return self.handles[index]
            case 0x72 | 0x7D:
                return self._class_desc_body(tag)
            case 0x73:
                return self._object()
            case 0x74 | 0x7C:
                return self._string(tag)
            case 0x75:
                return self._array()
            case 0x76:
                desc = self.class_desc()
                self._new_handle(desc)
                return desc
            case 0x77 | 0x7A:
                size = self.reader.read_u8() if tag == TC_BLOCKDATA else self.reader.read_i32()
                return self.reader.read_bytes(size)
            case 0x7E:
                return self._enum()
            case 0x79:
                self.handles.clear()
                return None
        raise FormatError(
            f"Java serialization: unexpected tag 0x{tag:02x} at byte {self.reader.pos - 1}"
        )

    def class_desc(self) -> ClassDesc | None:
        value = self.content()
        if value is not None and not isinstance(value, ClassDesc):
            raise FormatError("Java serialization: expected a class descriptor")
        return value

    def _class_desc_body(self, tag: int) -> ClassDesc:
        r = self.reader
        if tag == TC_PROXYCLASSDESC:
            count = r.check_count(r.read_i32(), "proxy interface", r.pos - 4, _UTF_MIN)
            interfaces = [r.read_utf() for _ in range(count)]
            desc = ClassDesc(f"Proxy{interfaces}", SC_SERIALIZABLE, (), None)
            self._new_handle(desc)
            self._annotations()
            return ClassDesc(desc.name, desc.flags, (), self.class_desc())
        name = r.read_utf()
        r.read_i64()  # serialVersionUID
        slot = self._new_handle(None)  # the handle is taken before the fields are read
        flags = r.read_u8()
        count = r.check_count(r.read_i16(), "field", r.pos - 2, _FIELD_MIN)
        fields = tuple(self._field() for _ in range(count))
        self._annotations()
        desc = ClassDesc(name, flags, fields, self.class_desc())
        self.handles[slot] = desc
        return desc

    def _field(self) -> tuple[str, str]:
        code, name = chr(self.reader.read_u8()), self.reader.read_utf()
        if code in "L[":
            self.content()  # the field's class name, a string or a back reference
        elif code not in _PRIMITIVES:
            raise FormatError(f"Java serialization: unknown field type {code!r}")
        return code, name

    def _annotations(self) -> list[Any]:
        contents = []
        while self.reader.fork().read_u8() != TC_ENDBLOCKDATA:
            contents.append(self.content())
        self.reader.read_u8()
        return contents

    def _object(self) -> JavaObject:
        desc = self.class_desc()
        if desc is None:
            raise FormatError("Java serialization: object without a class")
        obj = JavaObject(desc.name)
        self._new_handle(obj)
        for cls in reversed(_hierarchy(desc)):
            if cls.flags & SC_EXTERNALIZABLE:
                self._annotations()  # only the block-data protocol is readable without the class
                continue
            for code, name in cls.fields:
                obj.fields[name] = self._value(code)
            if cls.flags & SC_WRITE_METHOD:
                obj.annotations += self._annotations()
        return obj

    def _value(self, code: str) -> Any:
        if code in "L[":
            return self.content()
        return _PRIMITIVES[code](self.reader)

    def _string(self, tag: int) -> str:
        r = self.reader
        size = r.read_u16() if tag == TC_STRING else r.read_i64()
        text = decode_modified_utf8(r.read_bytes(size))
        self._new_handle(text)
        return text

    def _array(self) -> list[Any]:
        desc = self.class_desc()
        values: list[Any] = []
        self._new_handle(values)
        name = desc.name if desc is not None else ""
        element = name[1] if len(name) > 1 else "L"
        if element not in _PRIMITIVES and element not in "L[":
            raise FormatError(f"Java serialization: unknown array type {excerpt(name)}")
        r = self.reader
        count = r.check_count(r.read_i32(), "array element", r.pos - 4, _ELEMENT_SIZES[element])
        values.extend(self._value(element) for _ in range(count))
        return values

    def _enum(self) -> str:
        self.class_desc()
        slot = self._new_handle(None)
        constant = self.content()
        if not isinstance(constant, str):
            raise FormatError("Java serialization: enum constant is not a string")
        self.handles[slot] = constant
        return constant


def _hierarchy(desc: ClassDesc) -> list[ClassDesc]:
    """The class and its superclasses, subclass first."""
    chain = []
    current: ClassDesc | None = desc
    while current is not None:
        chain.append(current)
        current = current.superclass
    return chain
