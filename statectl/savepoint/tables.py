"""A state as a typed table: Arrow record batches with the columns of docs/values.md.

Keyed VALUE, LIST, REDUCING and AGGREGATING state: `key`, `namespace`, `value`; MAP: `key`,
`namespace`, `user_key`, `value`; timers: `key`, `namespace`, `timestamp`; TTL adds
`ttl_timestamp`; operator list and union state: `subtask`, `value`; broadcast: `key`, `value`.
Columns are typed by the state's codecs (`formats.state_values`); a part that does not decode
is null in its typed column (a serializer statectl does not read at all gives a binary column of
the raw bytes). Batches are built from a bounded number of entries, so memory stays flat.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from statectl.errors import StatectlError
from statectl.formats.state_values import DECODE_ERRORS, StateCodec, operator_codec
from statectl.formats.values import Codec, Raw, RawCodec, Undecodable
from statectl.savepoint import entries
from statectl.savepoint.entries import KeyedSource, OperatorFile

if TYPE_CHECKING:
    import pyarrow as pa

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
    """One keyed state's rows from one subtask's keyed state (a key-group range of it)."""
    columns = _Columns(codec, codec.arrow_schema(), raw or RawTally())
    user_value = codec.user_value_codec()
    header = file.header()
    for entry in file.entries(key_groups, header):
        if entry.state.name != state:
            continue
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
        if len(columns) >= batch_rows:
            yield columns.batch()
    if len(columns):
        yield columns.batch()


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


def operator_state_codec(file: OperatorFile, state: str) -> StateCodec:
    """An operator state's codec, from the serializers in its file's header."""
    mode = next(s.mode for s in file.handle.states if s.name == state)
    meta = file.state_metas().get(state)
    return operator_codec(meta, entries.OPERATOR_KINDS[mode], file.flink_major)
