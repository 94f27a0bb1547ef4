"""Key types: Java values ⇄ Flink's serialized bytes, Java `hashCode`, key groups, composite keys.

Mirrors Flink's base serializers (`StringSerializer` via `StringValue.writeString`,
`LongSerializer`, `IntSerializer`, …), `KeyGroupRangeAssignment`, `MathUtils.murmurHash` and
`CompositeKeySerializationUtils` / `SerializedCompositeKeyBuilder`
(flink-savepoint-format.md §4.6, §6.1–§6.3, §7). Key types are looked up by the key
serializer's snapshot from the keyed-state header: the basic types by class name, Flink SQL's
`RowData` keys (`BinaryRowData.hashCode()` over the binary row), and `Tuple` / `Row` keys whose
fields are basic types (their hashCode combines the fields' as `Tuple.hashCode` /
`RowUtils.deepHashCodeRow` do). Anything else (POJOs, Kryo, …) hashes with user code and is
deliberately not covered.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from statectl.errors import FormatError, UnsupportedError
from statectl.formats.serializer_snapshots import ROW_LEGACY_MODE, SerializerSnapshot

Buffer = bytes | bytearray | memoryview

_M32 = 0xFFFFFFFF
UPPER_BOUND_MAX_PARALLELISM = 1 << 15
TIMER_TIMESTAMP_FLIP = 1 << 63  # TimerSerializer writes MathUtils.flipSignBit(timestamp)


# --- Java hashCode -------------------------------------------------------------------------


def _s32(value: int) -> int:
    value &= _M32
    return value - (1 << 32) if value & 0x80000000 else value


def java_string_hash(text: str) -> int:
    """`String.hashCode()`: 31-polynomial over UTF-16 code units, as a signed int."""
    units = text.encode("utf-16-be", "surrogatepass")
    h = 0
    for (unit,) in struct.iter_unpack(">H", units):
        h = (31 * h + unit) & _M32
    return _s32(h)


def java_long_hash(value: int) -> int:
    """`Long.hashCode(v)` = `(int) (v ^ (v >>> 32))`."""
    value &= 0xFFFFFFFFFFFFFFFF
    return _s32(value ^ (value >> 32))


def java_double_bits(value: float) -> int:
    """`Double.doubleToLongBits`: raw bits, every NaN collapsed to the canonical one."""
    if math.isnan(value):
        return 0x7FF8000000000000
    bits: int = struct.unpack(">Q", struct.pack(">d", value))[0]
    return bits


def java_float_bits(value: float) -> int:
    """`Float.floatToIntBits`: raw bits, every NaN collapsed to the canonical one."""
    if math.isnan(value):
        return 0x7FC00000
    bits: int = struct.unpack(">I", struct.pack(">f", value))[0]
    return bits


# --- key groups (§6.1–§6.3) ----------------------------------------------------------------


def _rotl32(value: int, bits: int) -> int:
    return ((value << bits) | (value >> (32 - bits))) & _M32


def murmur_hash(code: int) -> int:
    """`MathUtils.murmurHash(int)`: one murmur3 round plus finaliser, made non-negative."""
    c = (code * 0xCC9E2D51) & _M32
    c = (_rotl32(c, 15) * 0x1B873593) & _M32
    c = (_rotl32(c, 13) * 5 + 0xE6546B64) & _M32
    c ^= 4
    c ^= c >> 16
    c = (c * 0x85EBCA6B) & _M32
    c ^= c >> 13
    c = (c * 0xC2B2AE35) & _M32
    c = _s32(c ^ (c >> 16))
    if c >= 0:
        return c
    return 0 if c == -(1 << 31) else -c


def assign_to_key_group(hash_code: int, max_parallelism: int) -> int:
    """`KeyGroupRangeAssignment.computeKeyGroupForKeyHash`."""
    if not 0 < max_parallelism <= UPPER_BOUND_MAX_PARALLELISM:
        raise ValueError(f"max parallelism {max_parallelism} is outside 1..32768")
    return murmur_hash(hash_code) % max_parallelism


def key_group_prefix_bytes(max_parallelism: int) -> int:
    """`computeRequiredBytesInKeyGroupPrefix`: 2 bytes once there are more than 128 groups."""
    return 2 if max_parallelism > 128 else 1


def key_group_prefix(key_group: int, prefix_bytes: int) -> bytes:
    """The big-endian key-group prefix of a composite key."""
    return key_group.to_bytes(prefix_bytes, "big")


def with_key_group(
    full_key: Buffer, old_prefix_bytes: int, key_group: int, prefix_bytes: int
) -> bytes:
    """`full_key` (flag cleared) with its key-group prefix replaced (width may change)."""
    return key_group_prefix(key_group, prefix_bytes) + bytes(full_key[old_prefix_bytes:])


# --- key types -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class KeyType:
    """How one key serializer writes values, and how Java hashes them."""

    name: str  # the Java type: String, Long, …
    serializer: str  # the serializer class, e.g. org.apache.flink…base.LongSerializer
    fixed_length: int | None  # bytes per value, None when variable (TypeSerializer.getLength)
    _read: Callable[[memoryview, int], tuple[Any, int]]
    _write: Callable[[Any], bytes]
    _hash: Callable[[Any], int]
    fields: tuple[KeyType, ...] = ()  # Tuple / Row keys: the type of each field

    def read(self, buf: Buffer, pos: int = 0) -> tuple[Any, int]:
        """(value, end position) of the value serialized at `pos`."""
        view = memoryview(buf)
        try:
            return self._read(view, pos)
        except (IndexError, struct.error, UnicodeError, ValueError) as exc:
            raise FormatError(f"cannot read a {self.name} key at offset {pos}: {exc}") from None

    def write(self, value: Any) -> bytes:
        try:
            return self._write(value)
        except (struct.error, OverflowError) as exc:
            raise ValueError(f"{value!r} is not a valid {self.name}: {exc}") from None

    def hash_code(self, value: Any) -> int:
        """Java's `hashCode()` of the value, as a signed 32-bit int."""
        if value is None:
            raise UnsupportedError(f"a null {self.name} key has no hash code")
        return self._hash(value)

    def key_group(self, value: Any, max_parallelism: int) -> int:
        return assign_to_key_group(self.hash_code(value), max_parallelism)

    def __reduce__(self) -> tuple[Any, tuple[str, tuple[KeyType, ...]]]:
        # Pickled by name and fields (Spark ships plans to workers): the codecs are local
        # functions.
        return _rebuild_key_type, (self.serializer, self.fields)


def _fixed(fmt: str) -> tuple[Callable[[memoryview, int], tuple[Any, int]], Callable[[Any], bytes]]:
    codec = struct.Struct(fmt)

    def read(buf: memoryview, pos: int) -> tuple[Any, int]:
        return codec.unpack_from(buf, pos)[0], pos + codec.size

    return read, codec.pack


# String: StringValue.writeString — varint(len + 1) then one varint per UTF-16 code unit, 7 bits
# per byte, least significant first, high bit = more; length 0 means null.


def _read_varint(buf: memoryview, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7
        if shift > 35:
            raise ValueError("varint longer than 5 bytes")


def write_varint(value: int) -> bytes:
    """An unsigned varint, 7 bits per byte, least significant first (also Kryo's
    `Output.writeVarInt` of a value already made unsigned)."""
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def read_java_string(buf: Buffer, pos: int = 0) -> tuple[str | None, int]:
    """A `StringValue`-encoded string (or None) and the position after it."""
    return KEY_TYPES[_BASE + "StringSerializer"].read(buf, pos)


def _read_string(view: memoryview, pos: int) -> tuple[str | None, int]:
    length, pos = _read_varint(view, pos)
    if length == 0:
        return None, pos
    return read_utf16_varints(view, pos, length - 1)


def read_string_value(view: memoryview, pos: int) -> tuple[str, int]:
    """`StringValue.write`: like `writeString`, but its length is not shifted by one for null."""
    count, pos = _read_varint(view, pos)
    return read_utf16_varints(view, pos, count)


def read_utf16_varints(view: memoryview, pos: int, count: int) -> tuple[str, int]:
    """`count` UTF-16 units, each a varint (one byte when ASCII)."""
    if count > len(view) - pos:  # each UTF-16 unit takes at least one byte
        raise ValueError(f"string of {count} characters runs past the end ({len(view) - pos} left)")
    ascii_run = bytes(view[pos : pos + count])
    if len(ascii_run) == count and ascii_run.isascii():  # every unit one byte: the common case
        return ascii_run.decode("ascii"), pos + count
    units = []
    for _ in range(count):
        unit, pos = _read_varint(view, pos)
        if unit > 0xFFFF:
            raise ValueError(f"character code {unit} does not fit a UTF-16 unit")
        units.append(unit)
    return struct.pack(f">{count}H", *units).decode("utf-16-be", "surrogatepass"), pos


def write_java_string(text: str | None) -> bytes:
    """`StringValue.writeString`."""
    if text is None:
        return b"\x00"
    return _write_utf16_varints(text, shift=1)


def write_string_value(text: str) -> bytes:
    """`StringValue.write`."""
    return _write_utf16_varints(text, shift=0)


def _write_utf16_varints(text: str, shift: int) -> bytes:
    if text.isascii():
        return write_varint(len(text) + shift) + text.encode("ascii")
    units = text.encode("utf-16-be", "surrogatepass")
    out = bytearray(write_varint(len(units) // 2 + shift))
    for (unit,) in struct.iter_unpack(">H", units):
        out += write_varint(unit)
    return bytes(out)


def _read_bool(buf: memoryview, pos: int) -> tuple[bool, int]:
    return buf[pos] != 0, pos + 1


def _read_char(buf: memoryview, pos: int) -> tuple[str, int]:
    return chr(struct.unpack_from(">H", buf, pos)[0]), pos + 2


def _write_char(value: str) -> bytes:
    units = value.encode("utf-16-be", "surrogatepass")
    if len(units) != 2:
        raise ValueError(f"{value!r} is not a single UTF-16 code unit")
    return units


def _read_double(buf: memoryview, pos: int) -> tuple[float, int]:
    return struct.unpack_from(">d", buf, pos)[0], pos + 8


def _read_float(buf: memoryview, pos: int) -> tuple[float, int]:
    return struct.unpack_from(">f", buf, pos)[0], pos + 4


_BASE = "org.apache.flink.api.common.typeutils.base."


def _key_types() -> dict[str, KeyType]:
    long_read, long_write = _fixed(">q")
    int_read, int_write = _fixed(">i")
    short_read, short_write = _fixed(">h")
    byte_read, byte_write = _fixed(">b")
    types = [
        KeyType("String", _BASE + "StringSerializer", None, _read_string, write_java_string,
                java_string_hash),
        KeyType("Long", _BASE + "LongSerializer", 8, long_read, long_write, java_long_hash),
        KeyType("Integer", _BASE + "IntSerializer", 4, int_read, int_write, _s32),
        KeyType("Short", _BASE + "ShortSerializer", 2, short_read, short_write, int),
        KeyType("Byte", _BASE + "ByteSerializer", 1, byte_read, byte_write, int),
        KeyType("Boolean", _BASE + "BooleanSerializer", 1, _read_bool,
                lambda v: b"\x01" if v else b"\x00", lambda v: 1231 if v else 1237),
        KeyType("Character", _BASE + "CharSerializer", 2, _read_char, _write_char,
                lambda v: struct.unpack(">H", _write_char(v))[0]),
        # DataOutputStream.writeDouble/writeFloat use doubleToLongBits/floatToIntBits: NaN is
        # always written canonically, and hashCode uses the same bits.
        KeyType("Double", _BASE + "DoubleSerializer", 8, _read_double,
                lambda v: java_double_bits(v).to_bytes(8, "big"),
                lambda v: java_long_hash(java_double_bits(v))),
        KeyType("Float", _BASE + "FloatSerializer", 4, _read_float,
                lambda v: java_float_bits(v).to_bytes(4, "big"),
                lambda v: _s32(java_float_bits(v))),
    ]  # fmt: skip
    return {t.serializer: t for t in types}


KEY_TYPES: dict[str, KeyType] = _key_types()


def key_type_for_serializer(class_name: str | None) -> KeyType | None:
    """Key type of a serializer or snapshot class (`…LongSerializer$LongSerializerSnapshot`)."""
    if not class_name:
        return None
    return KEY_TYPES.get(class_name.split("$", 1)[0])


# --- RowData, Tuple and Row keys ---------------------------------------------------------------

_TABLE_TYPEUTILS = "org.apache.flink.table.runtime.typeutils."
_JAVA_RUNTIME = "org.apache.flink.api.java.typeutils.runtime."
ROW_DATA_SERIALIZER = _TABLE_TYPEUTILS + "RowDataSerializer"
# Both write a BinaryRowData as i32 size then its bytes (BinaryRowDataSerializer.serialize).
_ROW_DATA_SERIALIZERS = frozenset(
    {ROW_DATA_SERIALIZER, _TABLE_TYPEUTILS + "BinaryRowDataSerializer"}
)
TUPLE_SERIALIZER = _JAVA_RUNTIME + "TupleSerializer"
ROW_SERIALIZER = _JAVA_RUNTIME + "RowSerializer"
_TUPLE_SNAPSHOT = _JAVA_RUNTIME + "TupleSerializerSnapshot"
_ROW_SNAPSHOT = ROW_SERIALIZER + "$RowSerializerSnapshot"
MURMUR_SEED = 42  # MurmurHashUtil.DEFAULT_SEED
_WORDS = struct.Struct("<I")  # MemorySegment.getInt: native order, little-endian in practice
ROW_KIND_BITS = 2  # RowSerializer (non-legacy): the RowKind's two bits lead the null mask


def murmur_mix(h1: int, word: int) -> int:
    """One round of `MurmurHashUtil.mixK1` then `mixH1` (unsigned 32-bit in, out)."""
    k1 = (_rotl32((word * 0xCC9E2D51) & _M32, 15) * 0x1B873593) & _M32
    return (_rotl32(h1 ^ k1, 13) * 5 + 0xE6546B64) & _M32


def murmur_fmix(h1: int, length: int) -> int:
    """`MurmurHashUtil.fmix(h1, length)`, as a signed int."""
    h1 ^= length
    h1 ^= h1 >> 16
    h1 = (h1 * 0x85EBCA6B) & _M32
    h1 ^= h1 >> 13
    h1 = (h1 * 0xC2B2AE35) & _M32
    return _s32(h1 ^ (h1 >> 16))


def hash_bytes_by_words(data: Buffer) -> int:
    """`MurmurHashUtil.hashBytesByWords(segment, 0, len, 42)`, i.e. `BinaryRowData.hashCode()`
    (BinarySegmentUtils.hashByWords): murmur3 over 4-byte words, seed 42."""
    if len(data) % 4:
        raise UnsupportedError(f"a binary row of {len(data)} bytes is not whole 4-byte words")
    h1 = MURMUR_SEED
    for (word,) in _WORDS.iter_unpack(data):
        h1 = murmur_mix(h1, word)
    return murmur_fmix(h1, len(data))


def _read_row_data(view: memoryview, pos: int) -> tuple[bytes, int]:
    (size,) = struct.unpack_from(">i", view, pos)
    end = pos + 4 + size
    if size < 0 or end > len(view):
        raise ValueError(f"binary row of {size} bytes runs past the end ({len(view) - pos} left)")
    return bytes(view[pos + 4 : end]), end


def _row_data_key_type() -> KeyType:
    """Flink SQL's keys: `BinaryRowData` (the key selectors copy every key into one), valued
    here as the row's bytes; its hashCode depends on nothing else (BinarySection)."""
    return KeyType(
        "RowData", ROW_DATA_SERIALIZER, None, _read_row_data,
        lambda row: struct.pack(">i", len(row)) + bytes(row), hash_bytes_by_words,
    )  # fmt: skip


ROW_DATA_KEY_TYPE = _row_data_key_type()


def _field_hash(field: KeyType, value: Any) -> int:
    return 0 if value is None else field.hash_code(value)


def tuple_key_type(fields: tuple[KeyType, ...]) -> KeyType:
    """`TupleSerializer`: the fields one after another; `TupleN.hashCode()` is
    31·h + hashCode(field) over the fields (0 for a null String)."""

    def read(view: memoryview, pos: int) -> tuple[tuple[Any, ...], int]:
        values = []
        for field in fields:
            value, pos = field._read(view, pos)
            values.append(value)
        return tuple(values), pos

    def write(value: tuple[Any, ...]) -> bytes:
        return b"".join(f.write(v) for f, v in zip(fields, value, strict=True))

    def hash_code(value: tuple[Any, ...]) -> int:
        h = 0
        for field, item in zip(fields, value, strict=True):
            h = (31 * h + _field_hash(field, item)) & _M32
        return _s32(h)

    lengths = [f.fixed_length for f in fields]
    fixed = None if None in lengths else sum(x for x in lengths if x is not None)
    name = f"Tuple{len(fields)}<{', '.join(f.name for f in fields)}>"
    return KeyType(name, TUPLE_SERIALIZER, fixed, read, write, hash_code, fields)


def row_key_type(fields: tuple[KeyType, ...]) -> KeyType:
    """`RowSerializer` (position based, not legacy mode): a bit mask, most significant bit
    first, of the RowKind's two bits then one null flag per field (MaskUtils.writeMask), then
    the non-null fields. Valued as (RowKind byte, fields); hashed as
    `RowUtils.deepHashCodeRow` (Flink 1.15–2.3): 31·kind + the fields' deepHashCodeArray, i.e.
    h = 1, then 31·h + (0 | 31 + hashCode(field)) per field (a nested Row: its own hash)."""
    mask_bytes = (ROW_KIND_BITS + len(fields) + 7) // 8

    def read(view: memoryview, pos: int) -> tuple[tuple[int, tuple[Any, ...]], int]:
        if len(view) < pos + mask_bytes:
            raise ValueError("row ends inside its null mask")
        mask = int.from_bytes(view[pos : pos + mask_bytes], "big")
        pos += mask_bytes
        top = 8 * mask_bytes - 1
        kind = (mask >> top) & 1 | ((mask >> (top - 1)) & 1) << 1
        values: list[Any] = []
        for i, field in enumerate(fields):
            value = None
            if not (mask >> (top - ROW_KIND_BITS - i)) & 1:
                value, pos = field._read(view, pos)
            values.append(value)
        return (kind, tuple(values)), pos

    def write(value: tuple[int, tuple[Any, ...]]) -> bytes:
        kind, items = value
        bits = [kind & 1, kind >> 1 & 1, *(item is None for item in items)]
        mask = sum(1 << (8 * mask_bytes - 1 - i) for i, bit in enumerate(bits) if bit)
        body = b"".join(f.write(v) for f, v in zip(fields, items, strict=True) if v is not None)
        return mask.to_bytes(mask_bytes, "big") + body

    def hash_code(value: tuple[int, tuple[Any, ...]]) -> int:
        kind, items = value
        h = 1  # RowUtils.deepHashCodeArray over the fields
        for field, item in zip(fields, items, strict=True):
            nested = item is None or field.serializer == ROW_SERIALIZER
            # a scalar field is hashed as Arrays.deepHashCode(new Object[] {o}) = 31 + hashCode
            h = (31 * h + _field_hash(field, item) + (0 if nested else 31)) & _M32
        return _s32(31 * kind + h)

    # Variable length even with fixed-length fields: a null field takes no bytes.
    name = f"Row<{', '.join(f.name for f in fields)}>"
    return KeyType(name, ROW_SERIALIZER, None, read, write, hash_code, fields)


def key_type_for_snapshot(snapshot: SerializerSnapshot | None) -> KeyType | None:
    """Key type of a key serializer snapshot (keyed-state header), or None when statectl
    cannot hash its keys as Java does."""
    if snapshot is None:
        return None
    if snapshot.class_name.split("$", 1)[0] in _ROW_DATA_SERIALIZERS:
        return ROW_DATA_KEY_TYPE
    if snapshot.class_name in (_TUPLE_SNAPSHOT, _ROW_SNAPSHOT):
        found = [key_type_for_snapshot(n) for n in snapshot.nested]
        fields = tuple(f for f in found if f is not None and f is not ROW_DATA_KEY_TYPE)
        if not snapshot.parsed or not fields or len(fields) != len(found):
            return None
        if snapshot.type_name == ROW_LEGACY_MODE:  # no RowKind bits before the null mask
            return None
        tuple_key = snapshot.class_name == _TUPLE_SNAPSHOT
        return tuple_key_type(fields) if tuple_key else row_key_type(fields)
    return key_type_for_serializer(snapshot.class_name)


def _rebuild_key_type(serializer: str, fields: tuple[KeyType, ...]) -> KeyType | None:
    if serializer == TUPLE_SERIALIZER:
        return tuple_key_type(fields)
    if serializer == ROW_SERIALIZER:
        return row_key_type(fields)
    if serializer == ROW_DATA_SERIALIZER:
        return ROW_DATA_KEY_TYPE
    return key_type_for_serializer(serializer)


# Serialized namespace lengths of common namespace serializers (TypeSerializer.getLength() says
# 0 for VoidNamespaceSerializer, yet it writes one zero byte).
NAMESPACE_LENGTHS: dict[str, int] = {
    "org.apache.flink.runtime.state.VoidNamespaceSerializer": 1,
    "org.apache.flink.queryablestate.client.VoidNamespaceSerializer": 1,
    "org.apache.flink.streaming.api.windowing.windows.TimeWindow$Serializer": 16,
    "org.apache.flink.streaming.api.windowing.windows.GlobalWindow$Serializer": 1,
}


def namespace_length_for_serializer(class_name: str | None) -> int | None:
    """Bytes per namespace of a namespace serializer (or snapshot) class; None: variable/unknown."""
    if not class_name:
        return None
    for serializer, length in NAMESPACE_LENGTHS.items():
        if class_name == serializer or class_name.startswith(serializer + "$"):
            return length
    key_type = key_type_for_serializer(class_name)
    return key_type.fixed_length if key_type else None


# --- composite keys (§4.6) ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CompositeKey:
    """The parts of one state entry's key (flag cleared)."""

    key_group: int
    timestamp: int | None  # timers only
    key: Any
    key_bytes: bytes  # ser(key), without prefix or length suffix
    namespace_bytes: bytes  # ser(namespace), without length suffix
    user_key_bytes: bytes  # MAP state only


class PartReader(Protocol):
    """Reads one part of a composite key: a value codec, or a `KeyType`."""

    @property
    def fixed_length(self) -> int | None: ...

    def read(self, buf: memoryview, pos: int) -> tuple[Any, int]: ...


_VALUE_KINDS = frozenset({"VALUE", "LIST", "REDUCING", "AGGREGATING", "FOLDING"})
# Keyed state kinds whose entries have composite keys (key group, key, namespace, …).
COMPOSITE_KEY_KINDS = _VALUE_KINDS | {"MAP", "TIMERS"}


def split_composite_key(
    data: Buffer,
    max_parallelism: int,
    key_type: PartReader,
    namespace: int | PartReader | None,
    kind: str,
) -> CompositeKey:
    """Split a state entry's key into key group, timestamp, key, namespace and user key.

    `namespace` is the namespace serializer's fixed length, or a reader for its values, or None
    when it is variable-sized and unknown; `kind` is VALUE/LIST/REDUCING/AGGREGATING, MAP or
    TIMERS.
    """
    view = memoryview(data)
    prefix = key_group_prefix_bytes(max_parallelism)
    if len(view) < prefix:
        raise FormatError(
            f"composite key of {len(view)} bytes is shorter than its key-group prefix"
        )
    key_group = int.from_bytes(view[:prefix], "big")
    if key_group >= max_parallelism:
        raise FormatError(
            f"key group {key_group} in a key is not below max parallelism {max_parallelism}"
        )
    if kind == "TIMERS":
        return _split_timer(view, prefix, key_group, key_type)
    if kind not in _VALUE_KINDS and kind != "MAP":
        raise UnsupportedError(f"cannot split the keys of {kind} state")
    key, key_end = key_type.read(view, prefix)
    ns_fixed = (
        namespace if isinstance(namespace, int) or namespace is None else namespace.fixed_length
    )
    # Both serializers variable-sized ⇒ each part is followed by its length (writeVariableIntBytes).
    ambiguous = key_type.fixed_length is None and ns_fixed is None
    ns_start = key_end + _suffix_length(view, key_end, key_end - prefix) if ambiguous else key_end
    rest = view[ns_start:]
    ns_len, ns_end = _namespace_end(rest, namespace, ns_fixed, kind, ambiguous)
    if kind != "MAP" and ns_end != len(rest):
        raise FormatError(f"{len(rest) - ns_end} unexpected bytes after the namespace of a key")
    return CompositeKey(
        key_group,
        None,
        key,
        bytes(view[prefix:key_end]),
        bytes(rest[:ns_len]),
        bytes(rest[ns_end:]) if kind == "MAP" else b"",
    )


def build_composite_key(
    key_group: int,
    max_parallelism: int,
    key: bytes,
    namespace: bytes,
    *,
    ambiguous: bool,
    user_key: bytes = b"",
    timestamp: int | None = None,
) -> bytes:
    """A state entry's key as `split_composite_key` reads it: the key-group prefix, then a
    timer's flipped timestamp, the key and the namespace (each followed by its length when both
    serializers are variable-sized: `ambiguous`), then a map entry's user key."""
    prefix = key_group_prefix(key_group, key_group_prefix_bytes(max_parallelism))
    if timestamp is not None:  # TimerSerializer: no length suffixes
        flipped = (timestamp & 0xFFFFFFFFFFFFFFFF) ^ TIMER_TIMESTAMP_FLIP
        return prefix + flipped.to_bytes(8, "big") + key + namespace
    if not ambiguous:
        return prefix + key + namespace + user_key
    return (
        prefix
        + key
        + _length_suffix(len(key))
        + namespace
        + _length_suffix(len(namespace))
        + user_key
    )


def _length_suffix(length: int) -> bytes:
    """`CompositeKeySerializationUtils.writeVariableIntBytes`: little-endian, at least a byte."""
    return length.to_bytes(_variable_int_bytes(length), "little")


def _namespace_end(
    rest: memoryview,
    namespace: int | PartReader | None,
    fixed: int | None,
    kind: str,
    ambiguous: bool,
) -> tuple[int, int]:
    """(namespace length, end including any length suffix) within `rest`."""
    if fixed is not None:
        if len(rest) < fixed:
            raise FormatError(f"key ends inside its {fixed}-byte namespace")
        return fixed, fixed
    if namespace is not None and not isinstance(namespace, int):
        _, length = namespace.read(rest, 0)
        return length, length + (_suffix_length(rest, length, length) if ambiguous else 0)
    return _variable_namespace(rest, kind, ambiguous)


def _split_timer(
    view: memoryview, prefix: int, key_group: int, key_type: PartReader
) -> CompositeKey:
    # TimerSerializer: i64 flipped timestamp, key, namespace — no length suffixes.
    if len(view) < prefix + 8:
        raise FormatError("timer key ends inside its timestamp")
    timestamp = int.from_bytes(view[prefix : prefix + 8], "big") ^ TIMER_TIMESTAMP_FLIP
    if timestamp >= TIMER_TIMESTAMP_FLIP:  # back to a signed long
        timestamp -= 1 << 64
    key, key_end = key_type.read(view, prefix + 8)
    return CompositeKey(
        key_group, timestamp, key, bytes(view[prefix + 8 : key_end]), bytes(view[key_end:]), b""
    )


def _variable_int_bytes(value: int) -> int:
    """How many bytes `writeVariableIntBytes(value)` writes (at least one)."""
    return max(1, (value.bit_length() + 7) // 8)


def _suffix_length(view: memoryview, pos: int, length: int) -> int:
    count = _variable_int_bytes(length)
    stored = view[pos : pos + count]
    if len(stored) != count or int.from_bytes(stored, "little") != length:
        raise FormatError(f"length suffix at offset {pos} does not match the key's {length} bytes")
    return count


def _variable_namespace(rest: memoryview, kind: str, ambiguous: bool) -> tuple[int, int]:
    """(namespace length, end incl. suffix) when the namespace serializer is variable-sized."""
    if not ambiguous:  # fixed-length key, variable namespace: no suffix, namespace runs to the end
        if kind == "MAP":
            raise UnsupportedError("cannot split a variable-length namespace from a map user key")
        return len(rest), len(rest)
    # The namespace is followed by its length; find every split that is self-consistent.
    candidates = [
        (n, n + _variable_int_bytes(n))
        for n in range(len(rest))
        if n + _variable_int_bytes(n) <= len(rest)
        and int.from_bytes(rest[n : n + _variable_int_bytes(n)], "little") == n
        and (kind == "MAP" or n + _variable_int_bytes(n) == len(rest))
    ]
    if len(candidates) != 1:
        raise UnsupportedError(
            f"cannot tell the namespace from the user key ({len(candidates)} possible splits)"
        )
    return candidates[0]
