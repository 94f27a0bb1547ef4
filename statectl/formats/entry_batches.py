"""A keyed state's rows to its entries a batch at a time, with numpy: what
`StateCodec.encode_*`, `KeyType.key_group` and `java_types.build_composite_key` give row by
row, for the states whose parts have batch writers (`values.batch_encode`).

`entry_encoder(codec, key_type, max_parallelism)` gives an `EntryEncoder` when the state's key,
namespace, map user key and value (or list element) are written in batches and its key type is
the one its key codec writes (String, Long, Integer, Short, Byte keys); None for anything else.
`EntryEncoder.encode` takes a batch of the state's table (`StateCodec.arrow_schema`) and gives
every row's key group (`key_hashing`), composite key (flink-savepoint-format.md §4.6: the
key-group prefix, a timer's flipped timestamp, the key and the namespace, each followed by its
length when both are variable-sized, a map entry's user key) and stored value (a keyed LIST's
elements joined by `,`, a MAP value's null flag, TTL's last-access time before each user value).

A batch holding a row the entries would not be written from (a null key, value or
timestamp, an empty list, a null where the serializer writes none, a column of another type) is
not encoded here: `encode` gives None, and the caller encodes that batch row by row, which
gives the row's error.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from statectl.formats.arrays import Int64s
from statectl.formats.java_types import (
    TIMER_TIMESTAMP_FLIP,
    KeyType,
    key_group_prefix_bytes,
)
from statectl.formats.key_hashing import key_groups
from statectl.formats.state_values import (
    LIST_DELIMITER,
    MAP_NOT_NULL_VALUE,
    MAP_NULL_VALUE,
    StateCodec,
)
from statectl.formats.values import scalars
from statectl.formats.values.batch import bool_bits_array, fixed_width_array
from statectl.formats.values.batch_encode import (
    BINARY,
    BatchWriter,
    constant_rows,
    data_of,
    fixed_rows,
    join,
    lengths_of,
    little_endian_lengths,
    numbers,
    offsets_of,
    valid_rows,
    writer_for,
)

if TYPE_CHECKING:
    from statectl.formats.values.model import Codec

_BASE = "org.apache.flink.api.common.typeutils.base."
# The key codecs whose bytes are the key type's: (codec, key serializer).
_KEY_CODECS = {
    (id(scalars.STRING), _BASE + "StringSerializer"),
    (id(scalars.LONG), _BASE + "LongSerializer"),
    (id(scalars.INT), _BASE + "IntSerializer"),
    (id(scalars.SHORT), _BASE + "ShortSerializer"),
    (id(scalars.BYTE), _BASE + "ByteSerializer"),
}
_KINDS = ("VALUE", "LIST", "MAP", "REDUCING", "AGGREGATING", "TIMERS")
_NOT_NULL = bytes((MAP_NOT_NULL_VALUE,))
_NULL = bytes((MAP_NULL_VALUE,))


@dataclass(frozen=True)
class EncodedEntries:
    """A batch's entries in row order: key groups, composite keys and stored values (rows of
    `large_binary` arrays)."""

    key_groups: Int64s
    keys: pa.Array
    values: pa.Array


def entry_encoder(
    codec: StateCodec, key_type: KeyType, max_parallelism: int
) -> EntryEncoder | None:
    """The batch encoder of a keyed state's rows, or None when they are encoded row by row."""
    if not codec.keyed or codec.kind not in _KINDS or codec.key is None:
        return None
    if (id(codec.key), key_type.serializer) not in _KEY_CODECS:
        return None
    key, namespace = writer_for(codec.key), writer_for(codec.namespace)
    if key is None or namespace is None:
        return None
    user_key = value = None
    if codec.kind == "MAP":
        user_key = writer_for(codec.user_key)
        if user_key is None:
            return None
    if codec.kind != "TIMERS":
        value = writer_for(codec.user_value_codec())
        if value is None:
            return None
    return EntryEncoder(codec, key_type, max_parallelism, key, namespace, user_key, value)


def _variable(codec: Codec | None) -> bool:
    return codec is not None and codec.fixed_length is None


class EntryEncoder:
    """A keyed state's batches to entries (see the module's docstring)."""

    def __init__(
        self,
        codec: StateCodec,
        key_type: KeyType,
        max_parallelism: int,
        key: BatchWriter,
        namespace: BatchWriter,
        user_key: BatchWriter | None,
        value: BatchWriter | None,
    ) -> None:
        self.codec, self.key_type, self.max_parallelism = codec, key_type, max_parallelism
        self.key, self.namespace, self.user_key, self.value = key, namespace, user_key, value
        self.schema = codec.arrow_schema()
        self.prefix_bytes = key_group_prefix_bytes(max_parallelism)
        self.ambiguous = _variable(codec.key) and _variable(codec.namespace)

    def encode(
        self, batch: pa.RecordBatch | pa.Table, key_groups: Int64s | None = None
    ) -> EncodedEntries | None:
        """Every row's entry, or None when a row is not encoded here (see the module's
        docstring); `key_groups`: the rows' key groups where they are known."""
        columns: dict[str, pa.Array] = {}
        for field in self.schema:
            if field.name not in batch.column_names:
                return None
            column = batch.column(field.name)
            if column.type != field.type:
                return None
            if isinstance(column, pa.ChunkedArray):
                column = column.combine_chunks()
            columns[field.name] = column
        return self._encode(columns, key_groups)

    def _encode(
        self, columns: dict[str, pa.Array], known_groups: Int64s | None
    ) -> EncodedEntries | None:
        key_column = columns["key"]
        if not len(key_column):
            empty = pa.array([], BINARY)
            return EncodedEntries(np.zeros(0, np.int64), empty, empty)
        if key_column.null_count:
            return None
        keys, bad = self.key.write(key_column)
        namespaces, ns_bad = self.namespace.write(columns["namespace"])
        if bad.any() or ns_bad.any():
            return None
        if known_groups is not None:
            groups = known_groups
        else:
            offsets = offsets_of(keys)
            groups = key_groups(
                self.key_type,
                data_of(keys).data,
                offsets[:-1],
                offsets[1:],
                0,
                self.max_parallelism,
            )
        prefix = fixed_rows(groups.astype(f">u{self.prefix_bytes}"))
        if self.codec.kind == "TIMERS":
            timestamps = columns["timestamp"]
            if timestamps.null_count:
                return None
            flipped = numbers(timestamps, "<u8") ^ np.uint64(TIMER_TIMESTAMP_FLIP)
            composite = join(prefix, fixed_rows(flipped.astype(">u8")), keys, namespaces)
            return EncodedEntries(groups, composite, constant_rows(b"", len(groups)))
        parts = [prefix, keys]
        if self.ambiguous:
            parts.append(little_endian_lengths(lengths_of(keys)))
        parts.append(namespaces)
        if self.ambiguous:
            parts.append(little_endian_lengths(lengths_of(namespaces)))
        if self.codec.kind == "MAP":
            user_keys = columns["user_key"]
            if user_keys.null_count or self.user_key is None:
                return None
            written, bad = self.user_key.write(user_keys)
            if bad.any():
                return None
            parts.append(written)
        values = self._values(columns)
        if values is None:
            return None
        return EncodedEntries(groups, join(*parts), values)

    def _values(self, columns: dict[str, pa.Array]) -> pa.Array | None:
        assert self.value is not None
        values = columns["value"]
        timestamps = columns.get("ttl_timestamp")
        if self.codec.kind == "LIST":
            return _list_values(self.value, values, timestamps)
        if self.codec.kind == "MAP":
            return _map_values(self.value, values, timestamps)
        if values.null_count:
            return None
        written, bad = self.value.write(values)
        if bad.any():
            return None
        if timestamps is None:
            return written
        if timestamps.null_count:
            return None
        return join(_timestamps(timestamps), written)


def _timestamps(timestamps: pa.Array) -> pa.Array:
    """TTL's last-access times (epoch ms, no null), as `TtlSerializer` writes them: i64."""
    return fixed_rows(numbers(timestamps, "<i8").astype(">i8"))


def _list_values(
    element: BatchWriter, values: pa.Array, timestamps: pa.Array | None
) -> pa.Array | None:
    """A keyed LIST's values (`StateCodec._encode_list`): the elements, each with its TTL
    time, joined by `,`. No null list, nor an empty one."""
    if values.null_count:
        return None
    offsets = offsets_of_list(values)
    counts = np.diff(offsets)
    if (counts == 0).any():
        return None
    elements = values.values[int(offsets[0]) : int(offsets[-1])]
    written, bad = element.write(elements)
    if bad.any():
        return None
    if timestamps is not None:
        if timestamps.null_count:
            return None
        times = offsets_of_list(timestamps)
        if not np.array_equal(np.diff(times), counts):
            return None
        flat = timestamps.values[int(times[0]) : int(times[-1])]
        if flat.null_count:
            return None
        written = join(_timestamps(flat), written)
    bounds = fixed_width_array(pa.int64(), offsets - offsets[0])
    lists = pa.LargeListArray.from_arrays(bounds, written, type=pa.large_list(BINARY))
    joined: pa.Array = pc.binary_join(lists, pa.scalar(bytes((LIST_DELIMITER,)), BINARY))
    return joined


def offsets_of_list(values: pa.Array) -> Int64s:
    """The n + 1 offsets of a list array (into its `values`)."""
    raw = np.frombuffer(values.buffers()[1], np.int32)
    return raw[values.offset : values.offset + len(values) + 1].astype(np.int64)


def _map_values(
    writer: BatchWriter, values: pa.Array, timestamps: pa.Array | None
) -> pa.Array | None:
    """A keyed MAP's values (`StateCodec._encode_map_value`, RocksDB's form): 0 then the value
    (with TTL: its time, then the value), or 1 alone for a null value (with TTL: a null value
    without a time)."""
    null = ~valid_rows(values)
    written, bad = writer.write(values)
    if timestamps is None:
        alone = null
    else:
        no_time = ~valid_rows(timestamps)
        if (no_time & ~null).any():  # a value without its time
            return None
        alone = null & no_time
        written = join(_timestamps(timestamps), written)
    if (bad & ~alone).any():
        return None
    present = join(_NOT_NULL, written)
    if not alone.any():
        return present
    chosen: pa.Array = pc.if_else(bool_bits_array(alone), pa.scalar(_NULL, BINARY), present)
    return chosen
