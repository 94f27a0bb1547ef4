"""A state as a typed table: Arrow record batches with the columns of docs/values.md.

Keyed VALUE, LIST, REDUCING and AGGREGATING state: `key`, `namespace`, `value`; MAP: `key`,
`namespace`, `user_key`, `value`; timers: `key`, `namespace`, `timestamp`; TTL adds
`ttl_timestamp`; operator list and union state: `subtask`, `value`; broadcast: `key`, `value`.
Columns are typed by the state's codecs (`formats.state_values`); a part that does not decode
is null in its typed column (a serializer statectl does not read at all gives a binary column of
the raw bytes). Batches are built from a bounded number of entries, so memory stays flat.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from statectl.errors import FormatError, StatectlError
from statectl.formats import entry_scan, keyed_blocks
from statectl.formats.arrays import Bools, Int64s
from statectl.formats.java_types import TIMER_TIMESTAMP_FLIP, key_group_prefix_bytes
from statectl.formats.state_headers import KeyedStateHeader, StateMetaInfo
from statectl.formats.state_values import (
    DECODE_ERRORS,
    MAP_NOT_NULL_VALUE,
    MAP_NULL_VALUE,
    StateCodec,
    operator_codec,
)
from statectl.formats.values import Codec, Raw, RawCodec, Undecodable, batch
from statectl.savepoint import entries, native_rows
from statectl.savepoint.entries import KeyedSource, OperatorFile
from statectl.savepoint.keyed import block_spans, iter_blocks

if TYPE_CHECKING:
    import pyarrow as pa

    from statectl.formats.class_files import ClassFinder


BATCH_ROWS = 8192


@dataclass
class RawTally:
    """Entries of a state that kept a part undecoded, and the first reason."""

    rows: int = 0
    first_reason: str | None = None

    def add(self, reason: str) -> None:
        self.rows += 1
        self.first_reason = self.first_reason or reason


@dataclass
class _Columns:
    """Column values of the batch being built, converted for Arrow as they come."""

    codec: StateCodec
    schema: pa.Schema
    raw: RawTally = field(default_factory=RawTally)
    data: dict[str, list[Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.data = {name: [] for name in self.schema.names}

    def __len__(self) -> int:
        return len(next(iter(self.data.values()), []))

    def put(self, name: str, codec: Codec | None, value: Any) -> None:
        self.data[name].append(self.arrow_value(name, codec, value))

    def arrow_value(self, name: str, codec: Codec | None, value: Any) -> Any:
        if value is None:
            return None
        if isinstance(value, Raw):
            self.raw.add(f"{name}: {value.reason}")
            return value.data if isinstance(codec, RawCodec) or codec is None else None
        try:
            return codec.to_arrow(value) if codec is not None else value
        except (Undecodable, *DECODE_ERRORS) as exc:
            self.raw.add(f"{name}: {exc}")
            return None

    def batch(self) -> pa.RecordBatch:
        import pyarrow as pa

        arrays = [_array(self.data[f.name], f.type) for f in self.schema]
        self.data = {name: [] for name in self.schema.names}
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)


def _array(values: list[Any], arrow: pa.DataType) -> pa.Array:
    """pyarrow builds no nested extension values (Kryo's JSON) from Python objects: those are
    built in their storage type, then cast."""
    import pyarrow as pa

    storage = _storage_type(arrow)
    array = pa.array(values, type=storage)
    return array if storage == arrow else array.cast(arrow)


def _storage_type(arrow: pa.DataType) -> pa.DataType:
    import pyarrow as pa

    if isinstance(arrow, pa.BaseExtensionType):
        return _storage_type(arrow.storage_type)
    if pa.types.is_struct(arrow):
        return pa.struct([f.with_type(_storage_type(f.type)) for f in arrow])
    if pa.types.is_map(arrow):
        return pa.map_(_storage_type(arrow.key_type), _storage_type(arrow.item_type))
    if pa.types.is_large_list(arrow):
        return pa.large_list(arrow.value_field.with_type(_storage_type(arrow.value_type)))
    if pa.types.is_list(arrow):
        return pa.list_(arrow.value_field.with_type(_storage_type(arrow.value_type)))
    return arrow


def keyed_batches(
    file: KeyedSource,
    state: str,
    codec: StateCodec,
    key_groups: tuple[int, int] | None = None,
    raw: RawTally | None = None,
    batch_rows: int = BATCH_ROWS,
) -> Iterator[pa.RecordBatch]:
    """One keyed state's rows from one subtask's keyed state (a key-group range of it), in
    batches of about `batch_rows` that hold whole key groups: all the rows of a key are in
    one batch (what a function over a key's rows needs)."""
    columns = _Columns(codec, codec.arrow_schema(), raw or RawTally())
    user_value = codec.user_value_codec()
    header = file.header()
    key_group = None
    for entry in file.entries(key_groups, header, states={state}):
        if len(columns) >= batch_rows and entry.key_group != key_group:
            yield columns.batch()
        key_group = entry.key_group
        _put_entry(columns, file, state, codec, user_value, entry)
    if len(columns):
        yield columns.batch()


def _put_entry(
    columns: _Columns,
    file: KeyedSource,
    state: str,
    codec: StateCodec,
    user_value: Codec | None,
    entry: entries.KeyedEntry,
) -> None:
    try:
        parts = entries.split_key(entry, file.max_parallelism, codec)
    except StatectlError as exc:
        where = f"{file.description} (key group {entry.key_group}, state {state})"
        raise exc.with_source(where) from None
    columns.put("key", codec.key, codec.decode_key(parts.key))
    namespace = None if parts.namespace is None else codec.decode_namespace(parts.namespace)
    columns.put("namespace", codec.namespace, namespace)
    if codec.kind == "TIMERS":
        columns.data["timestamp"].append(parts.timestamp)
    else:
        _put_value(columns, codec, user_value, parts.user_key, entry.value)


def _put_value(
    columns: _Columns,
    codec: StateCodec,
    user_value: Codec | None,
    user_key: bytes | None,
    stored: bytes,
) -> None:
    if codec.kind == "MAP":
        decoded_key = None if user_key is None else codec.decode_user_key(user_key)
        columns.put("user_key", codec.user_key, decoded_key)
    decoded = codec.decode_value(stored)
    if codec.kind == "LIST" and isinstance(decoded.value, list):
        elements = [columns.arrow_value("value", user_value, v) for v in decoded.value]
        columns.data["value"].append(elements)
    else:
        columns.put("value", user_value, decoded.value)
    if codec.ttl:
        columns.data["ttl_timestamp"].append(decoded.ttl_timestamp)


def operator_batches(
    file: OperatorFile,
    state: str,
    codec: StateCodec,
    raw: RawTally | None = None,
    batch_rows: int = BATCH_ROWS,
) -> Iterator[pa.RecordBatch]:
    """One operator state's rows from one subtask's operator-state file."""
    columns = _Columns(codec, codec.arrow_schema(), raw or RawTally())
    for element in file.elements():
        if element.state != state:
            continue
        if codec.kind == "BROADCAST":
            for key, value in entries.broadcast_entries(element) or ():
                columns.put("key", codec.key, codec.decode_key(key))
                columns.put("value", codec.value, codec.decode_value(value).value)
        else:
            columns.data["subtask"].append(file.subtask)
            columns.put("value", codec.user_value_codec(), codec.decode_value(element.value).value)
        if len(columns) >= batch_rows:
            yield columns.batch()
    if len(columns):
        yield columns.batch()


def operator_state_codec(
    file: OperatorFile, state: str, classpath: ClassFinder | None = None
) -> StateCodec:
    """An operator state's codec, from the serializers in its file's header (and the job's
    classes, when given)."""
    mode = next(s.mode for s in file.handle.states if s.name == state)
    meta = file.state_metas().get(state)
    return operator_codec(meta, entries.OPERATOR_KINDS[mode], file.flink_major, classpath)


# --- batches of entries: every entry of many blocks at once -----------------------------------

BATCH_BLOCK_BYTES = 8 << 20  # uncompressed block bytes decoded together


@dataclass
class EntryBatch:
    """The entries of consecutive key-group blocks of one file, located in one buffer."""

    buffer: batch.Buffer
    key_groups: Int64s
    key_starts: Int64s  # the composite key (its first byte carries the run-end flag)
    key_ends: Int64s
    value_ends: Int64s
    state_ids: Int64s
    # key group → its block's length and runs, where the entries were located in blocks
    spans: dict[int, entry_scan.BlockRuns] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.key_starts)

    def entry(self, i: int, state: StateMetaInfo) -> entries.KeyedEntry:
        """Entry `i` as `iter_keyed_entries` gives it (flag cleared)."""
        data = self.buffer.data
        key = bytearray(data[self.key_starts[i] : self.key_ends[i]].tobytes())
        key[0] &= ~keyed_blocks.FIRST_BIT_IN_BYTE_MASK
        value = data[self.key_ends[i] + 4 : self.value_ends[i]].tobytes()
        return entries.KeyedEntry(state, int(self.key_groups[i]), bytes(key), value)


def entry_batches(
    file: entries.KeyedFile,
    key_groups: tuple[int, int] | None,
    header: KeyedStateHeader,
    max_bytes: int | None = None,
) -> Iterator[EntryBatch]:
    """Every entry of `file` (in the key-group range), in file order, a batch of blocks at a
    time; the blocks' entries are found by `entry_scan` (its errors name the block)."""
    max_bytes = max_bytes or BATCH_BLOCK_BYTES
    prefix = key_group_prefix_bytes(file.max_parallelism)
    pending: list[tuple[int, memoryview]] = []
    size = 0
    for span, block in iter_blocks(file.stream, block_spans(file.stream, file.handle)):
        if key_groups and not key_groups[0] <= span.key_group <= key_groups[1]:
            continue
        try:
            raw = keyed_blocks.raw_block(block, header.compressed)
        except StatectlError as exc:
            raise exc.with_source(f"{file.description} (key group {span.key_group})") from None
        if pending and size + len(raw) > max_bytes:  # under the limit, but for a block alone
            yield _locate(file, pending, prefix, len(header.states))
            pending, size = [], 0
        pending.append((span.key_group, raw))
        size += len(raw)
    if pending:
        yield _locate(file, pending, prefix, len(header.states))


def native_entry_batches(
    file: entries.NativeKeyedFile,
    key_groups: tuple[int, int] | None,
    states: dict[int, StateMetaInfo],
) -> Iterator[EntryBatch]:
    """The rows of `states` (by state id) in the instance (in the key-group range), state by
    state, a batch of rows at a time, laid out as blocks' entries are."""
    prefix = key_group_prefix_bytes(file.max_parallelism)
    ids = {state.name: state_id for state_id, state in states.items()}
    for state, keys, values in file.row_batches(states.values(), key_groups):
        try:
            groups = native_rows.key_groups(keys, prefix)
        except ValueError as exc:
            raise FormatError(f"state {state.name!r}: {exc}", file.description) from None
        data, key_starts, key_ends, value_ends = native_rows.laid_out(keys, values)
        state_ids = np.full(len(groups), ids[state.name], np.int64)
        yield EntryBatch(batch.Buffer(data), groups, key_starts, key_ends, value_ends, state_ids)


def _locate(
    file: entries.KeyedFile, blocks: list[tuple[int, memoryview]], prefix: int, states: int
) -> EntryBatch:
    buffer = batch.Buffer(*(raw for _, raw in blocks))
    parts: list[tuple[Int64s, ...]] = []
    spans = {}
    base = 0
    for key_group, raw in blocks:
        block = buffer.data[base : base + len(raw)].data  # a view: located in place
        try:
            starts, key_ends, value_ends, runs = entry_scan.locate(
                block, key_group, prefix, states, base
            )
        except StatectlError as exc:
            raise exc.with_source(f"{file.description} (key group {key_group})") from None
        ids = np.repeat([s for s, _ in runs], [n for _, n in runs]).astype(np.int64)
        groups = np.full(len(starts), key_group, np.int64)
        parts.append((groups, starts, key_ends, value_ends, ids))
        spans[key_group] = (len(raw), entry_scan.spans_of(starts, value_ends, runs, base))
        base += len(raw)
    groups, starts, key_ends, value_ends, ids = (
        np.concatenate(c) for c in zip(*parts, strict=True)
    )
    return EntryBatch(buffer, groups, starts, key_ends, value_ends, ids, spans)


@dataclass
class FastParts:
    """A state's entries decoded in batches: the arrays of every row of the selection (a row
    not `taken` holds a null or whatever its bytes gave: it is replaced by its per-entry
    decoding) and the parts' byte ranges."""

    taken: Bools
    key: pa.Array
    namespace: pa.Array
    value: pa.Array  # the user value (a TTL value's without its timestamp)
    key_start: Int64s
    namespace_start: Int64s
    value_start: Int64s  # the stored value's (a MAP value's null flag, a TTL value's timestamp)
    user_key: pa.Array | None = None  # MAP state
    user_key_start: Int64s | None = None
    ttl_timestamp: pa.Array | None = None  # state with TTL
    timestamp: pa.Array | None = None  # TIMERS: the timer's time

    @property
    def left(self) -> Int64s:
        """The rows (indexes into the selection) left to the per-entry path."""
        return np.flatnonzero(~self.taken)


@dataclass(frozen=True)
class StateReaders:
    """The batch readers of a state whose entries decode in batches, or None (`readers_for`)."""

    key: batch.BatchReader
    namespace: batch.BatchReader
    value: batch.BatchReader | None  # the user value (TIMERS: none, the value is empty)
    namespace_length: int  # fixed: where the key (and a MAP's user key) ends or begins
    user_key: batch.BatchReader | None = None  # MAP state
    ttl_timestamp: batch.BatchReader | None = None  # state with TTL: the value's last access


_VALUE_KINDS = ("VALUE", "REDUCING", "AGGREGATING")


def readers_for(codec: StateCodec) -> StateReaders | None:
    """Batch readers for a keyed VALUE, REDUCING, AGGREGATING or MAP state (with or without
    TTL), LIST state (without: each element would carry its own timestamp) or TIMERS whose
    namespace has a fixed length (the key is not followed by its length and a MAP's user key
    begins after it) and whose parts all read in batches."""
    kinds = (*_VALUE_KINDS, "MAP", "LIST", "TIMERS")
    if codec.kind not in kinds or (codec.kind == "LIST" and codec.ttl):
        return None
    if codec.namespace is None or codec.namespace.fixed_length is None:
        return None
    key = batch.reader_for(codec.key)
    namespace = batch.reader_for(codec.namespace)
    value = None if codec.kind == "TIMERS" else _value_reader(codec)
    user_key = batch.reader_for(codec.user_key) if codec.kind == "MAP" else None
    if key is None or namespace is None or (value is None and codec.kind != "TIMERS"):
        return None
    if codec.kind == "MAP" and user_key is None:
        return None
    ttl_timestamp = batch.TtlTimestamp() if codec.ttl else None
    fixed = codec.namespace.fixed_length
    return StateReaders(key, namespace, value, fixed, user_key, ttl_timestamp)


def _value_reader(codec: StateCodec) -> batch.BatchReader | None:
    """The user value's reader: a LIST's reads the whole list (its elements)."""
    if codec.kind == "LIST":
        return batch.list_reader_for(codec.user_value_codec())
    return batch.reader_for(codec.user_value_codec())


def decode_fast(
    readers: StateReaders, entries_batch: EntryBatch, rows: Int64s, prefix: int
) -> FastParts:
    """Decode the entries `rows` of the batch; rows it cannot take are not `taken`."""
    buf = entries_batch.buffer
    key_starts = entries_batch.key_starts[rows]
    key_ends = entries_batch.key_ends[rows]
    group = buf.words(key_starts, prefix, ">u2" if prefix == 2 else "u1").astype(np.int64)
    group &= 0x7FFF if prefix == 2 else 0x7F  # the run-end flag
    live = group == entries_batch.key_groups[rows]
    key_at = key_starts + prefix
    timestamp = None
    if readers.value is None:  # a timer's key: its flipped timestamp, then key and namespace
        import pyarrow as pa

        flipped = buf.words(key_at, 8, ">u8").astype(np.uint64) ^ np.uint64(TIMER_TIMESTAMP_FLIP)
        timestamp = pa.array(flipped.view(np.int64), pa.int64())
        live &= key_at + 8 <= key_ends
        key_at = key_at + 8
    key, ns_at, bad = readers.key.read(buf, key_at, live)
    live &= ~bad
    namespace, ns_end, bad = readers.namespace.read(buf, ns_at, live)
    live &= ~bad & (ns_end == ns_at + readers.namespace_length)
    user_key, key_end = None, ns_end
    if readers.user_key is not None:  # the rest of the composite key
        user_key, key_end, bad = readers.user_key.read(buf, ns_end, live)
        live &= ~bad
    live &= key_end == key_ends
    value_at = key_ends + 4  # after the value's length
    value_ends = entries_batch.value_ends[rows]
    if readers.value is None:  # a timer's value is empty
        taken = live & (value_ends == value_at)
        return FastParts(taken, key, namespace, None, key_at, ns_at, value_at, timestamp=timestamp)
    is_map = readers.user_key is not None
    stored = _stored_values(
        readers.value, readers.ttl_timestamp, is_map, buf, value_at, value_ends, live
    )
    value, ttl_timestamp, taken = stored
    return FastParts(
        taken,
        key,
        namespace,
        value,
        key_at,
        ns_at,
        value_at,
        user_key,
        ns_end if user_key is not None else None,
        ttl_timestamp,
    )


def _stored_values(
    value_reader: batch.BatchReader,
    ttl_reader: batch.BatchReader | None,
    is_map: bool,
    buf: batch.Buffer,
    at: Int64s,
    ends: Int64s,
    live: Bools,
) -> tuple[pa.Array, pa.Array | None, Bools]:
    """The stored values [at, ends) of the live rows (`StateCodec.decode_value`): the user
    values, their TTL timestamps (None without TTL) and the rows taken."""
    if isinstance(value_reader, batch.DelimitedList):  # a LIST's elements fill the value
        lists, bad = value_reader.read_until(buf, at, ends, live)
        return lists, None, live & ~bad
    null = np.zeros(len(at), np.bool_)
    if is_map:
        at, live, null = _map_null_flags(buf, at, ends, live)
    ttl_timestamp = None
    if ttl_reader is not None:  # `TtlSerializer`: the timestamp, then the value
        ttl_timestamp, at, bad = ttl_reader.read(buf, at, live)
        live = live & ~bad
    value, end, bad = value_reader.read(buf, at, live)
    return value, ttl_timestamp, null | (live & ~bad & (end == ends))


def stored_values_taken(codec: StateCodec, stored: Sequence[bytes]) -> Bools:
    """Which of a keyed state's stored values (each what `StateCodec.decode_value` takes)
    decode in batches; the others (all of a state without batch readers) are left to the
    per-entry decoder, which also says why one does not decode (`verify --deep`)."""
    value_reader = _value_reader(codec)
    if value_reader is None or (codec.kind == "LIST" and codec.ttl) or not stored:
        return np.zeros(len(stored), np.bool_)
    ttl_reader = batch.TtlTimestamp() if codec.ttl else None
    buf, at, ends = _packed(stored)
    live = np.ones(len(stored), np.bool_)
    return _stored_values(value_reader, ttl_reader, codec.kind == "MAP", buf, at, ends, live)[2]


def parts_taken(codec: Codec | None, parts: Sequence[bytes]) -> Bools:
    """Which of `parts` (each one value of `codec` filling its bytes) decode in batches."""
    reader = batch.reader_for(codec)
    if reader is None or not parts:
        return np.zeros(len(parts), np.bool_)
    buf, at, ends = _packed(parts)
    live = np.ones(len(parts), np.bool_)
    _, end, bad = reader.read(buf, at, live)
    taken: Bools = live & ~bad & (end == ends)
    return taken


def _packed(values: Sequence[bytes]) -> tuple[batch.Buffer, Int64s, Int64s]:
    """The values one after another in a buffer, with where each starts and ends."""
    lengths = np.fromiter(map(len, values), np.int64, len(values))
    ends = np.cumsum(lengths)
    return batch.Buffer(b"".join(values)), ends - lengths, ends  # one copy, not one per value


def _map_null_flags(
    buf: batch.Buffer, at: Int64s, ends: Int64s, live: Bools
) -> tuple[Int64s, Bools, Bools]:
    """A MAP value's null flag (`state_values.map_value`): the positions after it, the live
    rows with a value after it (flag 0) and those with a null value (flag 1 alone). Bytes after
    flag 1 (the heap backend's serializer null) and other flags are left to the codec."""
    flag = buf.byte(at)
    flagged = live & (at < ends)
    null = flagged & (flag == MAP_NULL_VALUE) & (at + 1 == ends)
    return at + 1, flagged & (flag == MAP_NOT_NULL_VALUE), null


def split_batches(
    file: KeyedSource, state: str, codec: StateCodec, key_groups: tuple[int, int] | None
) -> Iterator[pa.RecordBatch]:
    """The record batches of one state in a key-group range of a subtask's keyed state:
    decoded in batches where the state's parts allow (as export does, a batch of blocks at a
    time), else entry by entry."""
    for rows, _ in grouped_split_batches(file, state, codec, key_groups):
        yield rows


def grouped_split_batches(
    file: KeyedSource,
    state: str,
    codec: StateCodec,
    key_groups: tuple[int, int] | None,
    spans: dict[int, entry_scan.BlockRuns] | None = None,
) -> Iterator[tuple[pa.RecordBatch, Int64s | None]]:
    """`split_batches`, each batch with the key group of each of its rows where the batch
    was decoded at once (None where entry by entry); `spans`, if given, receives each
    canonical block's length and runs as its entries are located."""
    if isinstance(file, (entries.KeyedFile, entries.NativeKeyedFile)) and readers_for(codec):
        for _, table, groups in _state_tables(file, {state: codec}, key_groups, None, spans):
            start = 0
            for rows in table.to_batches():
                yield rows, groups[start : start + rows.num_rows]
                start += rows.num_rows
    else:
        for rows in keyed_batches(file, state, codec, key_groups):
            yield rows, None


def keyed_state_batches(
    file: entries.KeyedFile | entries.NativeKeyedFile,
    codecs: dict[str, StateCodec],
    key_groups: tuple[int, int] | None = None,
    raws: dict[str, RawTally] | None = None,
) -> Iterator[tuple[str, pa.Table]]:
    """The rows of every state in `codecs` from one pass over a canonical file or a RocksDB
    instance (a key-group range of it): (state, batch) in file order per state. Entries whose
    parts decode in batches are taken by `decode_fast`; the others one by one, as
    `keyed_batches` does."""
    for name, table, _ in _state_tables(file, codecs, key_groups, raws):
        yield name, table


def _state_tables(
    file: entries.KeyedFile | entries.NativeKeyedFile,
    codecs: dict[str, StateCodec],
    key_groups: tuple[int, int] | None,
    raws: dict[str, RawTally] | None,
    spans: dict[int, entry_scan.BlockRuns] | None = None,
) -> Iterator[tuple[str, pa.Table, Int64s]]:
    """`keyed_state_batches`, each table with the key group of each of its rows (and each
    block's runs put in `spans`)."""
    header = file.header()
    prefix = key_group_prefix_bytes(file.max_parallelism)
    ids = {i: s for i, s in enumerate(header.states) if s.name in codecs}
    readers = {name: readers_for(codec) for name, codec in codecs.items()}
    raws = raws if raws is not None else {}
    if isinstance(file, entries.NativeKeyedFile):
        found = native_entry_batches(file, key_groups, ids)
    else:
        found = entry_batches(file, key_groups, header)
    for entry_batch in found:
        if spans is not None:
            spans.update(entry_batch.spans)
        for state_id, meta in ids.items():
            rows = np.flatnonzero(entry_batch.state_ids == state_id)
            if not len(rows):
                continue
            codec = codecs[meta.name]
            raw = raws.setdefault(meta.name, RawTally())
            state_readers = readers[meta.name]
            groups = entry_batch.key_groups[rows]
            if state_readers is None:
                yield meta.name, _slow_table(file, codec, entry_batch, rows, meta, raw), groups
                continue
            fast = decode_fast(state_readers, entry_batch, rows, prefix)
            table = _fast_table(codec, fast)
            left = fast.left
            if len(left):
                slow = _slow_table(file, codec, entry_batch, rows[left], meta, raw)
                table = patched(table, left, slow)
            yield meta.name, table, groups


def _fast_table(codec: StateCodec, fast: FastParts) -> pa.Table:
    """The state's table (`StateCodec.arrow_schema`) of the arrays `decode_fast` read."""
    import pyarrow as pa

    columns = {
        "key": fast.key,
        "namespace": fast.namespace,
        "user_key": fast.user_key,
        "value": fast.value,
        "ttl_timestamp": fast.ttl_timestamp,
        "timestamp": fast.timestamp,
    }
    schema = codec.arrow_schema()
    return pa.Table.from_arrays([columns[name] for name in schema.names], schema=schema)


def _slow_table(
    file: KeyedSource,
    codec: StateCodec,
    entry_batch: EntryBatch,
    rows: Int64s,
    meta: StateMetaInfo,
    raw: RawTally,
) -> pa.Table:
    import pyarrow as pa

    columns = _Columns(codec, codec.arrow_schema(), raw)
    user_value = codec.user_value_codec()
    for i in rows.tolist():
        _put_entry(columns, file, meta.name, codec, user_value, entry_batch.entry(i, meta))
    return pa.Table.from_batches([columns.batch()])


def patched(table: pa.Table, rows: Int64s, replacements: pa.Table) -> pa.Table:
    """`table` with its rows `rows` (ascending) replaced by those of `replacements`, in order:
    slices of both when there are few (no copy), else one `take`."""
    import pyarrow as pa

    if len(rows) > _MAX_SLICES:
        index = np.arange(table.num_rows)
        index[rows] = table.num_rows + np.arange(len(rows))
        return pa.concat_tables([table, replacements]).take(pa.array(index))
    pieces, at = [], 0
    for j, row in enumerate(rows.tolist()):
        pieces += [table.slice(at, row - at), replacements.slice(j, 1)]
        at = row + 1
    pieces.append(table.slice(at))
    return pa.concat_tables(pieces)


def in_entry_order(table: pa.Table, order: Int64s) -> pa.Table:
    """The rows of `table` sorted by `order` (each row's entry number, all different). Runs of
    rows already in order are sliced, not copied, when there are few of them."""
    import pyarrow as pa

    if not len(order):
        return table
    by_entry = np.argsort(order, kind="stable")
    breaks = np.flatnonzero(np.diff(by_entry) != 1) + 1
    if not len(breaks) and by_entry[0] == 0:
        return table
    if len(breaks) > _MAX_SLICES:
        return table.take(pa.array(by_entry))
    starts = np.concatenate(([0], breaks))
    ends = np.concatenate((breaks, [len(by_entry)]))
    runs = [(int(by_entry[a]), int(b - a)) for a, b in zip(starts, ends, strict=True)]
    return pa.concat_tables([table.slice(first, length) for first, length in runs])


_MAX_SLICES = 512
