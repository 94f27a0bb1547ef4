"""How one state's entries decode: its key, namespace, map user key and value codecs.

Keyed state (flink-savepoint-format.md §4.6, flink-state-values.md §6): VALUE, REDUCING and
AGGREGATING values are one value of `VALUE_SERIALIZER`; LIST values are elements of the
`ListSerializerSnapshot`'s element serializer joined by one `,` byte; MAP values are a null flag
then the user value (`MapSerializerSnapshot`: user key, user value); timers have no value (their
key serializer and namespace are the `TimerSerializerSnapshot`'s). TTL wraps the value, each LIST
element and each MAP value (§5.1): their last-access times are read apart from the user value.
Operator list elements are one value each; broadcast state is `i32 n, n × (key, value)`.

Every part decodes to a value or, when statectl cannot read it, to `Raw` with the reason: a
value that does not decode never stops a read. `Raw.corrupt` tells bytes that contradict a type
statectl knows completely from a type it cannot decode (`formats.values.model`).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from statectl.errors import FormatError
from statectl.formats import source_state
from statectl.formats.serializer_snapshots import SerializerSnapshot
from statectl.formats.state_headers import StateMetaInfo
from statectl.formats.values import (
    Codec,
    Context,
    CorruptSnapshot,
    Raw,
    RawCodec,
    TtlCodec,
    TtlValue,
    Undecodable,
    codec_for,
)
from statectl.formats.values.arrow_in import arrow_values, value_from_arrow, values_from_arrow
from statectl.formats.values.source_splits import source_codec

if TYPE_CHECKING:
    import pyarrow as pa

    from statectl.formats.class_files import ClassFinder

Buffer = bytes | bytearray | memoryview

LIST_DELIMITER = 0x2C  # ListDelimitedSerializer / RocksDB's StringAppendOperator delimiter
MAP_NULL_VALUE = 0x01  # RocksDBMapState: a null flag byte, no value bytes follow
MAP_NOT_NULL_VALUE = 0x00

_BASE = "org.apache.flink.api.common.typeutils.base."
LIST_SNAPSHOT = _BASE + "ListSerializerSnapshot"
MAP_SNAPSHOT = _BASE + "MapSerializerSnapshot"
TIMER_SNAPSHOT = "org.apache.flink.streaming.api.operators.TimerSerializerSnapshot"
# What goes wrong inside a codec on bytes it cannot read (they index and unpack freely).
DECODE_ERRORS = (
    FormatError,
    IndexError,
    struct.error,
    ValueError,
    UnicodeError,
    OverflowError,
    RecursionError,
)


@dataclass(frozen=True, slots=True)
class Decoded:
    """A stored value decoded: the user value (or `Raw`) and, with TTL, its last-access time
    (one per element for a LIST)."""

    value: Any
    ttl_timestamp: int | list[int] | None = None

    @property
    def raw(self) -> bool:
        return isinstance(self.value, Raw)


def decode_with(codec: Codec | None, data: Buffer) -> Any:
    """One value filling `data`, or `Raw` saying why not."""
    if codec is None:
        return Raw(bytes(data), "unknown", "no serializer")
    if isinstance(codec, RawCodec):
        return Raw(bytes(data), codec.type_class, codec.reason, codec.corrupt)
    try:
        return codec.decode(data)
    except DECODE_ERRORS as exc:
        return Raw(bytes(data), codec.type_class or codec.describe(), _reason(exc), _corrupt(exc))


def _corrupt(exc: BaseException) -> bool:
    """Whether a decoder's error means corrupt bytes (or snapshot) rather than a type statectl
    cannot decode (`Undecodable`: a custom serializer, a Kryo class it does not have)."""
    return isinstance(exc, CorruptSnapshot) or not isinstance(exc, Undecodable)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, FormatError):
        return exc.message
    if isinstance(exc, RecursionError):
        return "value nested too deeply"
    return f"bytes do not match the serializer ({type(exc).__name__}: {exc})"


# What goes wrong inside a codec on a value it cannot write (they pack and index freely).
ENCODE_ERRORS = (
    FormatError,
    IndexError,
    KeyError,
    TypeError,
    AttributeError,
    struct.error,
    ValueError,
    UnicodeError,
    OverflowError,
    RecursionError,
)


def encode_with(codec: Codec | None, value: Any, what: str = "value") -> bytes:
    """The bytes of one value, the inverse of `decode_with`: a `Raw` part is its own bytes
    unchanged; a value no codec writes is a `FormatError` naming `what`."""
    if isinstance(value, Raw):
        return value.data
    if codec is None or isinstance(codec, RawCodec):
        reason = "no serializer" if codec is None else codec.reason
        raise FormatError(f"{what} cannot be written ({reason}): only its raw bytes can")
    try:
        return codec.encode(value)
    except ENCODE_ERRORS as exc:
        detail = exc.message if isinstance(exc, FormatError) else f"{type(exc).__name__}: {exc}"
        raise FormatError(f"{what} {_short(value)} is not a {codec.describe()} ({detail})") from exc


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def to_json(codec: Codec | None, value: Any) -> Any:
    """The JSON form of a decoded part (None for `Raw`)."""
    if value is None or isinstance(value, Raw) or codec is None:
        return None
    return codec.to_json(value)


@dataclass(frozen=True)
class StateCodec:
    """How to decode one state's keys, namespaces, map user keys and values."""

    kind: str  # VALUE, LIST, MAP, REDUCING, AGGREGATING, TIMERS (keyed); LIST, UNION, BROADCAST
    keyed: bool
    key: Codec | None = None  # the key (keyed state), or the map key (broadcast state)
    namespace: Codec | None = None
    user_key: Codec | None = None  # MAP state
    value: Codec | None = None  # the value, the list element or the map value (TTL unwrapped)
    ttl: bool = False

    @property
    def value_type(self) -> str:
        """The value's Java type (or serializer), as `export` names it."""
        if self.value is None:
            return ""
        return self.value.type_class or self.value.describe()

    def describe(self) -> str:
        """The state's type on one line, e.g. `MAP<STRING, BIGINT>, TTL`."""
        if self.kind == "TIMERS":
            return "TIMERS"
        user_value = self.user_value_codec()
        value = user_value.describe() if user_value else "?"
        if self.kind in ("LIST", "UNION"):  # keyed or operator (split or union): a list
            value = f"LIST<{value}>"
        if self.kind in ("MAP", "BROADCAST"):
            key = self.user_key if self.kind == "MAP" else self.key
            value = f"MAP<{key.describe() if key else '?'}, {value}>"
        return value + (", TTL" if self.ttl else "")

    def tree(self) -> dict[str, Any]:
        tree: dict[str, Any] = {"kind": self.kind, "ttl": self.ttl}
        for part in ("key", "namespace", "user_key", "value"):
            codec = getattr(self, part)
            if codec is not None:
                tree[part] = codec.tree()
        return tree

    # --- decoding ---

    def decode_key(self, data: Buffer) -> Any:
        return decode_with(self.key, data)

    def decode_namespace(self, data: Buffer) -> Any:
        return decode_with(self.namespace, data)

    def decode_user_key(self, data: Buffer) -> Any:
        return decode_with(self.user_key, data)

    def decode_value(self, data: Buffer) -> Decoded:
        """A keyed entry's stored value, an operator list element or a broadcast value."""
        codec = self.value
        if self.kind == "TIMERS":
            return Decoded(None)
        if codec is None or isinstance(codec, RawCodec):
            return Decoded(decode_with(codec, data))
        try:
            if self.kind == "LIST" and self.keyed:
                return self._unwrap_list(split_list(codec, data))
            if self.kind == "MAP" and self.keyed:
                return self._unwrap(map_value(codec, data))
            return self._unwrap(codec.decode(data))
        except DECODE_ERRORS as exc:
            return Decoded(Raw(bytes(data), self.value_type, _reason(exc), _corrupt(exc)))

    # --- encoding: the inverses of the decoders (write-back of edited values) ---

    def encode_key(self, value: Any) -> bytes:
        return encode_with(self.key, value, "key")

    def encode_namespace(self, value: Any) -> bytes:
        """A namespace's bytes; None is VoidNamespace (one 0 byte, `VoidNamespaceSerializer`)
        for states without a namespace of their own."""
        return encode_with(self.namespace, value, "namespace")

    def encode_user_key(self, value: Any) -> bytes:
        return encode_with(self.user_key, value, "map user key")

    def encode_value(
        self,
        value: Any,
        ttl_timestamp: int | list[int] | None = None,
        *,
        heap_null_map_value: bool = False,
    ) -> bytes:
        """A keyed entry's stored value, an operator list element or a broadcast value: the
        inverse of `decode_value` (`Decoded.value` and `Decoded.ttl_timestamp` give the bytes
        back). A keyed MAP's null value is RocksDB's form, the flag byte 1 alone, unless
        `heap_null_map_value`: the heap backend's, the flag then the value serializer's own
        null (`map_value`); both read back as None."""
        if self.kind == "TIMERS":
            return b""  # a timer is all key
        if isinstance(value, Raw):
            return value.data
        codec = self.value
        if codec is None or isinstance(codec, RawCodec):
            return encode_with(codec, value, f"{self.kind} value")
        if self.kind == "LIST" and self.keyed:
            return self._encode_list(codec, value, ttl_timestamp)
        if self.kind == "MAP" and self.keyed:
            return self._encode_map_value(codec, value, ttl_timestamp, heap_null_map_value)
        return encode_with(codec, self._wrap(value, ttl_timestamp), f"{self.kind} value")

    def _encode_list(self, element: Codec, values: Any, ttl_timestamp: Any) -> bytes:
        if not isinstance(values, list):
            raise FormatError(f"a LIST value is a list of elements, not {_short(values)}")
        if self.ttl:
            if not isinstance(ttl_timestamp, list) or len(ttl_timestamp) != len(values):
                raise FormatError(
                    f"a LIST state with TTL needs one ttl_timestamp per element: {len(values)} "
                    f"elements, ttl_timestamp {_short(ttl_timestamp)}"
                )
            values = [TtlValue(t, v) for t, v in zip(ttl_timestamp, values, strict=True)]
        try:
            return join_list(element, values)
        except ENCODE_ERRORS as exc:  # which element: encode them one by one to say
            for value in values:
                encode_with(element, value, "LIST element")
            raise FormatError(f"LIST value cannot be written: {exc}") from exc

    def _encode_map_value(
        self, codec: Codec, value: Any, ttl_timestamp: Any, heap_null: bool
    ) -> bytes:
        if value is None and (not self.ttl or ttl_timestamp is None):
            if not heap_null:
                return bytes((MAP_NULL_VALUE,))
            return bytes((MAP_NULL_VALUE,)) + encode_with(codec, None, "null MAP value")
        wrapped = self._wrap(value, ttl_timestamp)
        return bytes((MAP_NOT_NULL_VALUE,)) + encode_with(codec, wrapped, "MAP value")

    def _wrap(self, value: Any, ttl_timestamp: Any) -> Any:
        """The user value as the value serializer takes it: in a `TtlValue` with TTL."""
        if not self.ttl:
            return value
        if not isinstance(ttl_timestamp, int) or isinstance(ttl_timestamp, bool):
            raise FormatError(
                f"a {self.kind} state with TTL needs the value's ttl_timestamp (epoch ms), "
                f"not {_short(ttl_timestamp)}"
            )
        return TtlValue(ttl_timestamp, value)

    def _unwrap(self, value: Any) -> Decoded:
        if isinstance(value, TtlValue):
            return Decoded(value.value, value.timestamp)
        return Decoded(value)

    def _unwrap_list(self, elements: list[Any]) -> Decoded:
        if not self.ttl:
            return Decoded(elements)
        return Decoded([e.value for e in elements], [e.timestamp for e in elements])

    def json(self, part: str, value: Any) -> Any:
        """The JSON form of a decoded `part` (key, namespace, user_key, value)."""
        codec: Codec | None = getattr(self, part)
        if part == "value" and isinstance(codec, TtlCodec):
            codec = codec.user
        if part == "value" and self.kind == "LIST" and self.keyed and isinstance(value, list):
            return None if codec is None else [to_json(codec, v) for v in value]
        return to_json(codec, value)

    # --- the state's table ---

    def user_value_codec(self) -> Codec | None:
        codec = self.value
        return codec.user if isinstance(codec, TtlCodec) else codec

    def arrow_schema(self) -> pa.Schema:
        """The columns of this state's table (docs/values.md)."""
        import pyarrow as pa

        def arrow(codec: Codec | None) -> pa.DataType:
            return pa.binary() if codec is None else codec.arrow_type()

        fields: list[pa.Field] = []
        if not self.keyed:
            if self.kind == "BROADCAST":
                fields += [pa.field("key", arrow(self.key)), pa.field("value", arrow(self.value))]
            else:
                fields += [pa.field("subtask", pa.int32(), nullable=False)]
                fields += [pa.field("value", arrow(self.user_value_codec()))]
            return pa.schema(fields)
        fields += [pa.field("key", arrow(self.key)), pa.field("namespace", arrow(self.namespace))]
        if self.kind == "TIMERS":
            return pa.schema([*fields, pa.field("timestamp", pa.int64())])
        if self.kind == "MAP":
            fields.append(pa.field("user_key", arrow(self.user_key)))
        value = arrow(self.user_value_codec())
        fields.append(pa.field("value", pa.list_(value) if self._value_is_list() else value))
        if self.ttl:
            ttl = pa.timestamp("ms", "UTC")
            fields.append(pa.field("ttl_timestamp", pa.list_(ttl) if self.kind == "LIST" else ttl))
        return pa.schema(fields)

    def _value_is_list(self) -> bool:
        """Whether a keyed LIST's `value` column holds lists of elements; a list statectl cannot
        split stays one binary value there, the stored bytes."""
        element = self.user_value_codec()
        return (
            self.kind == "LIST"
            and self.keyed
            and element is not None
            and not isinstance(element, RawCodec)
        )

    def column_from_arrow(self, name: str, column: pa.Array | pa.ChunkedArray) -> list[Any]:
        """A column of this state's table (`arrow_schema`) back to what the decoders give and
        the encoders take: `key`, `namespace`, `user_key` and `value` as the codecs' values (a
        keyed LIST's as lists of elements), `ttl_timestamp` as epoch ms (lists of them for a
        LIST), `timestamp` and `subtask` as ints. A null stays None: a part that did not
        decode is null in a typed column and cannot come back from it."""
        if name in ("key", "namespace", "user_key"):
            return values_from_arrow(getattr(self, name), column)
        if name != "value":
            return arrow_values(column)
        element = self.user_value_codec()
        if not self._value_is_list():
            return values_from_arrow(element, column)
        return [
            None if values is None else [value_from_arrow(element, v) for v in values]
            for values in arrow_values(column)
        ]


def split_list(element: Codec, data: Buffer) -> list[Any]:
    """A keyed LIST value: elements each followed by `,` except the last (no escaping: read
    each element, then expect the delimiter or the end)."""
    view = memoryview(data)
    read = element.read
    elements: list[Any] = []
    pos = 0
    while pos < len(view):
        value, pos = read(view, pos)
        elements.append(value)
        if pos < len(view):
            if view[pos] != LIST_DELIMITER:
                raise FormatError(f"list element not followed by ',' at offset {pos}")
            pos += 1
            if pos == len(view):
                raise FormatError("list value ends with a delimiter")
    return elements


def join_list(element: Codec, values: list[Any]) -> bytes:
    out = bytearray()
    for i, value in enumerate(values):
        if i:
            out.append(LIST_DELIMITER)
        element.write(value, out)
    return bytes(out)


def map_value(codec: Codec, data: Buffer) -> Any:
    """A keyed MAP entry's value: flag 0 then the value, or flag 1 (null). After flag 1 RocksDB
    writes nothing; the heap backend's savepoint writes the value serializer's own null
    (`HeapKeyValueStateIterator.MapStateIterator`), one flag byte for a POJO."""
    if not data:
        raise FormatError("map value without its null flag")
    if data[0] == MAP_NULL_VALUE:
        if len(data) > 1 and decode_with(codec, memoryview(data)[1:]) is not None:
            raise FormatError("null map value followed by bytes that are not its serializer's null")
        return None
    return codec.decode(memoryview(data)[1:])


# --- building a state's codec ------------------------------------------------------------------


def _nested(snapshot: SerializerSnapshot | None, class_name: str, count: int) -> tuple[Any, ...]:
    if snapshot is None or snapshot.class_name != class_name or len(snapshot.nested) != count:
        return (None,) * count
    return snapshot.nested


def _codec(snapshot: SerializerSnapshot | None, context: Context) -> Codec:
    """The codec of a serializer Flink always writes for the state: none is a damaged header
    (a serializer key or the List/Map/Timer snapshot around it flipped)."""
    if snapshot is None:
        return RawCodec("unknown", "no serializer snapshot", corrupt=True)
    return codec_for(snapshot, context)


def keyed_codec(
    meta: StateMetaInfo,
    key_snapshot: SerializerSnapshot | None,
    flink_major: int | None = None,
    classpath: ClassFinder | None = None,
) -> StateCodec:
    """The codec of a keyed state from its meta info and the header's key serializer
    (`classpath`: the job's classes, for values Kryo wrote field by field)."""
    context = Context(flink_major, classpath=classpath)
    kind = meta.kind
    serializer = meta.value_serializer
    key = _codec(key_snapshot, context)
    namespace = _codec(meta.namespace_serializer, context)
    if kind == "TIMERS":
        timer_key, timer_namespace = _nested(serializer, TIMER_SNAPSHOT, 2)
        key = _codec(key_snapshot or timer_key, context)
        return StateCodec(kind, True, key, _codec(timer_namespace, context))
    if kind == "LIST":
        (element,) = _nested(serializer, LIST_SNAPSHOT, 1)
        value = _codec(element, context)
        return StateCodec(kind, True, key, namespace, None, value, isinstance(value, TtlCodec))
    if kind == "MAP":
        user_key, user_value = _nested(serializer, MAP_SNAPSHOT, 2)
        value = _codec(user_value, context)
        ttl = isinstance(value, TtlCodec)
        return StateCodec(kind, True, key, namespace, _codec(user_key, context), value, ttl)
    value = _codec(serializer, context)
    return StateCodec(kind, True, key, namespace, None, value, isinstance(value, TtlCodec))


def operator_codec(
    meta: StateMetaInfo | None,
    kind: str,
    flink_major: int | None = None,
    classpath: ClassFinder | None = None,
) -> StateCodec:
    """Operator list elements (LIST/UNION) or broadcast map entries (BROADCAST)."""
    if meta is None:
        return StateCodec(kind, keyed=False)
    context = Context(flink_major, classpath=classpath)
    key = _codec(meta.key_serializer, context) if kind == "BROADCAST" else None
    value = _source_codec(meta) or _codec(meta.value_serializer, context)
    return StateCodec(kind, False, key, None, None, value)


def _source_codec(meta: StateMetaInfo) -> Codec | None:
    """A source's splits (or the legacy Kafka consumer's offsets) are read as positions when
    the state's name and serializer are the ones Flink gives them."""
    serializer = meta.value_serializer
    expected = _SOURCE_STATE_SERIALIZERS.get(meta.name)
    if serializer is None or expected is None or expected not in serializer.class_name:
        return None
    return source_codec(meta.name)


_SOURCE_STATE_SERIALIZERS = {
    source_state.READER_STATE: "BytePrimitiveArraySerializer",
    source_state.LEGACY_KAFKA_STATE: "TupleSerializer",
}


def flink_major(metadata_version: int) -> int:
    """Which Flink wrote a savepoint, from its `_metadata` version: V3/V4 are 1.x, V5+ 2.x."""
    return 1 if metadata_version <= 4 else 2


def jsonable(value: Any) -> Any:
    """Bytes and floats of a raw part as JSON can hold them (diff examples of raw values)."""
    if isinstance(value, Raw):
        return f"hex:{value.data.hex()}"
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return "NaN" if value != value else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, list):
        return [jsonable(v) for v in value]
    if isinstance(value, bytes | bytearray | memoryview):
        return f"hex:{bytes(value).hex()}"
    return value
