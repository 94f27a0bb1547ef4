"""A keyed state's table back to entries: the inverse of `tables.keyed_batches`.

Each row of a table with the state's columns (`StateCodec.arrow_schema`) becomes one stored
entry: its parts encoded by the state's codecs (`StateCodec.encode_*`), its composite key built
as the backends build it (`java_types.build_composite_key`) in the key group Flink assigns the
key (`KeyType.key_group`: Java's `hashCode`, murmur hash, max parallelism). Rows come out
grouped by key group, ready for `keyed_rewrite`, spilled to local disk past a bound
(`spilled_rows`), so a table of any size, or a stream of batches, is encoded in bounded memory.
The states whose parts `formats.entry_batches` covers are encoded a batch (of up to
`SLICE_ROWS` rows) at a time, with numpy; the others, and a batch holding a row that cannot be
stored, row by row: the reference, and the path of every row's error.

A table that does not fit the state is refused before anything is written, in one line naming
the column (or the row) and what was expected.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from typing import TYPE_CHECKING, Any

from statectl.errors import FormatError, StatectlError
from statectl.formats.arrays import Int64s
from statectl.formats.entry_batches import EncodedEntries, entry_encoder
from statectl.formats.java_types import KeyType, build_composite_key, split_composite_key
from statectl.formats.operator_state import build_broadcast_element
from statectl.formats.state_values import StateCodec
from statectl.formats.values import Codec, RawCodec
from statectl.formats.values.batch import fixed_width_array
from statectl.formats.values.batch_encode import group_spans
from statectl.formats.values.pojo import has_primitive_fields, null_fields
from statectl.savepoint.entry_chunks import join_chunks, pack, pack_arrays
from statectl.savepoint.spilled_rows import KeyGroupRows, Record, RowSpill

if TYPE_CHECKING:
    import pyarrow as pa

Row = tuple[bytes, bytes]
IGNORED_COLUMNS = ("subtask",)  # the data source's column: where a row was read, not state
# (POJO class, field) → rows writing a null there that statectl could not check
UncheckedNulls = Counter[tuple[str, str]]


@dataclass(frozen=True)
class EncodedRows:
    """A table's entries by key group (spilled to local disk past a bound), and the nulls
    written into POJO fields whose class statectl has not read (`check_pojo_nulls`)."""

    by_key_group: KeyGroupRows
    unchecked_nulls: UncheckedNulls = dataclass_field(default_factory=Counter)

    @property
    def count(self) -> int:
        return self.by_key_group.count


def conform(table: pa.Table, codec: StateCodec) -> pa.Table:
    """`table` with exactly the state's columns in their types (casting what casts safely:
    Spark's timestamps in microseconds, narrower integers); a missing, unexpected or
    mistyped column is a `FormatError` naming it, the expected type and the type found."""
    import pyarrow as pa

    expected = codec.arrow_schema()
    unexpected = [n for n in table.column_names if n not in expected.names]
    if codec.keyed or codec.kind == "BROADCAST":  # list state's rows say their subtask
        unexpected = [n for n in unexpected if n not in IGNORED_COLUMNS]
    if unexpected:
        names = ", ".join(expected.names)
        raise FormatError(f"unexpected column {unexpected[0]!r} (the state's columns: {names})")
    columns = []
    for field in expected:
        if field.name not in table.column_names:
            raise FormatError(f"column {field.name!r} ({field.type}) is missing")
        column = table.column(field.name)
        if column.type != field.type:
            mistyped = FormatError(
                f"column {field.name!r}: expected {field.type}, found {column.type}"
            )
            if not same_kind(column.type, field.type):
                raise mistyped
            try:
                column = column.cast(field.type, safe=True)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                raise mistyped from None
        columns.append(column)
    return pa.Table.from_arrays(columns, schema=expected)


def same_kind(found: pa.DataType, expected: pa.DataType) -> bool:
    """Whether a column of type `found` holds what a column of `expected` does, in another
    encoding only (integer widths, time units, string and binary sizes, Spark's forms of the
    same nested types, an all-null column): what `conform` casts. A number is not a string,
    nor a string a number, whatever a cast could make of it."""
    import pyarrow as pa

    types = pa.types
    if isinstance(expected, pa.BaseExtensionType):  # Kryo's JSON: its text
        return same_kind(found, expected.storage_type)
    if types.is_null(found) or found == expected:
        return True
    groups = (
        types.is_integer,
        types.is_floating,
        types.is_decimal,
        types.is_timestamp,
        types.is_date,
        types.is_time,
        types.is_duration,
        lambda t: types.is_string(t) or types.is_large_string(t),
        lambda t: types.is_binary(t) or types.is_large_binary(t),
    )
    if any(group(found) and group(expected) for group in groups):
        return True
    if types.is_struct(found) and types.is_struct(expected):
        names = [f.name for f in expected]
        return [f.name for f in found] == names and all(
            same_kind(found.field(n).type, expected.field(n).type) for n in names
        )
    if types.is_map(found) and types.is_map(expected):
        return same_kind(found.key_type, expected.key_type) and same_kind(
            found.item_type, expected.item_type
        )
    lists = (types.is_list, types.is_large_list, types.is_fixed_size_list)
    if any(f(found) for f in lists) and any(f(expected) for f in lists):
        return same_kind(found.value_type, expected.value_type)
    return False


def encode_rows(
    tables: Iterable[pa.Table],
    codec: StateCodec,
    key_type: KeyType | None,
    max_parallelism: int,
    run_bytes: int | None = None,
) -> EncodedRows:
    """Every row of conformed tables (a table, or batch after batch) as (composite key, stored
    value) by key group, gathered with bounded memory (`spilled_rows`)."""
    encoder = RowEncoder(codec, key_type, max_parallelism)
    spill, n = RowSpill(run_bytes), 0
    for table in tables:
        for key_group, key, value in encoder.rows(table, n):
            spill.add(key_group, key, value)
        n += table.num_rows
    rows = spill.finish(encoder.describe_key)
    return EncodedRows(rows, encoder.unchecked_nulls)


@dataclass(frozen=True)
class EncodedBatch:
    """A batch's entries as one chunk per key group (`entry_chunks.pack`)."""

    chunks: dict[int, bytes]
    count: int


class RowEncoder:
    """A keyed state's rows (conformed tables) to entries: each row's composite key in the key
    group Flink assigns its key, and its stored value. Nulls written into POJO fields whose
    class statectl has not read are counted in `unchecked_nulls`."""

    def __init__(self, codec: StateCodec, key_type: KeyType | None, max_parallelism: int) -> None:
        if codec.kind not in ("VALUE", "LIST", "MAP", "REDUCING", "AGGREGATING", "TIMERS"):
            raise FormatError(f"cannot write the entries of {codec.kind} state")
        if key_type is None:
            raise FormatError(
                "statectl cannot compute the key groups of this job's keys (its key serializer "
                "is not one statectl hashes as Java does)"
            )
        self.codec, self.key_type, self.max_parallelism = codec, key_type, max_parallelism
        key_codec, namespace_codec = codec.key, codec.namespace
        ambiguous = (
            key_codec is not None
            and namespace_codec is not None
            and key_codec.fixed_length is None
            and namespace_codec.fixed_length is None
        )
        self._entry = functools.partial(_entry, codec, key_type, max_parallelism, ambiguous)
        self._nulls_to_check = _holds_primitive_fields(codec)
        # Batches encoded at once where the state's parts allow it (none of them a POJO)
        self._fast = (
            None if self._nulls_to_check else entry_encoder(codec, key_type, max_parallelism)
        )
        self.unchecked_nulls: UncheckedNulls = Counter()

    def rows(self, table: pa.Table | pa.RecordBatch, first_row: int = 0) -> Iterator[Record]:
        """(key group, composite key, stored value) of each row; a row that cannot be stored
        is a FormatError naming it (`first_row`: the number of the table's first row)."""
        for first, part in _slices(table, first_row):
            entries = self._fast.encode(part) if self._fast is not None else None
            if entries is None:
                yield from self._rows(part, first)
            else:
                keys, values = entries.keys.to_pylist(), entries.values.to_pylist()
                yield from zip(entries.key_groups.tolist(), keys, values, strict=True)

    def batch(
        self, table: pa.Table | pa.RecordBatch, first_row: int = 0, key_groups: Int64s | None = None
    ) -> EncodedBatch:
        """A batch's entries packed by key group, for the shuffle (`entry_chunks`); with
        `key_groups`, its rows' key groups, known (their keys are not hashed again)."""
        packed: list[EncodedBatch] = []
        for first, part in _slices(table, first_row):
            groups = None
            if key_groups is not None:
                groups = key_groups[first - first_row : first - first_row + part.num_rows]
            entries = self._fast.encode(part, groups) if self._fast is not None else None
            if entries is None:
                packed.append(self._packed_rows(part, first))
            else:
                packed.append(EncodedBatch(_packed(entries), len(entries.key_groups)))
        if len(packed) == 1:
            return packed[0]
        chunks: dict[int, list[bytes]] = {}
        for part_batch in packed:
            for key_group, chunk in part_batch.chunks.items():
                chunks.setdefault(key_group, []).append(chunk)
        joined = {key_group: join_chunks(parts) for key_group, parts in chunks.items()}
        return EncodedBatch(joined, sum(b.count for b in packed))

    def _rows(self, table: pa.Table | pa.RecordBatch, first_row: int) -> Iterator[Record]:
        """`rows` one at a time: the reference, and the path of what `entry_batches` does not
        encode (and of every row's error)."""
        columns = _columns(table, self.codec)
        for n, row in enumerate(zip(*columns.values(), strict=True), first_row):
            values = dict(zip(columns, row, strict=True))
            try:
                if self._nulls_to_check:
                    check_pojo_nulls(row_parts(self.codec, values), self.unchecked_nulls)
                key_group, (key, value) = self._entry(values)
            except (FormatError, ValueError) as exc:
                message = exc.message if isinstance(exc, FormatError) else str(exc)
                raise FormatError(f"row {n}: {message}") from None
            yield key_group, key, value

    def _packed_rows(self, table: pa.Table | pa.RecordBatch, first_row: int) -> EncodedBatch:
        by_key_group: dict[int, list[Row]] = {}
        count = 0
        for key_group, key, value in self._rows(table, first_row):
            by_key_group.setdefault(key_group, []).append((key, value))
            count += 1
        return EncodedBatch({kg: pack(rows) for kg, rows in by_key_group.items()}, count)

    def describe_key(self, composite: bytes) -> str:
        return describe_composite_key(composite, self.codec, self.max_parallelism)


SLICE_ROWS = 1 << 16  # rows encoded at once: a batch's, a table's in slices


def _slices(
    table: pa.Table | pa.RecordBatch, first_row: int
) -> Iterator[tuple[int, pa.Table | pa.RecordBatch]]:
    """The table in slices of at most `SLICE_ROWS` rows, each with the number of its first."""
    if table.num_rows <= SLICE_ROWS:
        yield first_row, table
        return
    for start in range(0, table.num_rows, SLICE_ROWS):
        yield first_row + start, table.slice(start, SLICE_ROWS)


def _packed(entries: EncodedEntries) -> dict[int, bytes]:
    """`entry_chunks.pack` of each key group's entries, all at once, the key groups in the
    order of their first entry."""
    import pyarrow as pa

    if not len(entries.key_groups):
        return {}
    order, spans = group_spans(entries.key_groups)
    index = fixed_width_array(pa.int64(), order)
    keys, values = entries.keys.take(index), entries.values.take(index)
    return {
        key_group: pack_arrays(keys.slice(start, end - start), values.slice(start, end - start))
        for key_group, start, end in spans
    }


def describe_composite_key(composite: bytes, codec: StateCodec, max_parallelism: int) -> str:
    """What a composite key holds, for messages (its bytes where they do not split)."""
    assert codec.key is not None
    namespace = None if isinstance(codec.namespace, RawCodec) else codec.namespace
    try:
        parts = split_composite_key(composite, max_parallelism, codec.key, namespace, codec.kind)
    except StatectlError:
        return f"key {composite.hex()}"
    values = {
        "key": parts.key,
        "namespace": codec.decode_namespace(parts.namespace_bytes) if namespace else None,
        "user_key": codec.decode_user_key(parts.user_key_bytes) if codec.kind == "MAP" else None,
        "timestamp": parts.timestamp,
    }
    return _describe(values)


def check_pojo_nulls(
    parts: Iterable[tuple[Codec | None, object]], unchecked: UncheckedNulls
) -> None:
    """Refuse a null going into a POJO field that the job's class declares primitive: Flink's
    restore fails on it ("Can not set int field … to null value"). Nulls going into fields
    whose class statectl has not read are counted in `unchecked`."""
    for codec, value in parts:
        if codec is None:
            continue
        for pojo, name in null_fields(codec, value):
            primitive = pojo.primitive(name)
            if primitive is not None:
                raise FormatError(
                    f"field {name!r} of {pojo.type_class} is null, but the job's class "
                    f"declares it a primitive {primitive}: Flink cannot restore that"
                )
            if not pojo.checked(name):
                unchecked[pojo.type_class, name] += 1


def pojo_fields_with_nulls(
    batches: Iterable[pa.RecordBatch], codec: StateCodec, fields: set[tuple[str, str]]
) -> set[tuple[str, str]]:
    """Which of these (POJO class, field) hold a null somewhere in the batches (a state's
    table): read until all of them are found."""
    found: set[tuple[str, str]] = set()
    for batch in batches:
        columns = _columns(batch, codec)
        for row in zip(*columns.values(), strict=True):
            for part, value in row_parts(codec, dict(zip(columns, row, strict=True))):
                if part is not None:
                    found.update((p.type_class, n) for p, n in null_fields(part, value))
            if fields <= found:
                return fields
    return found & fields


def _holds_primitive_fields(codec: StateCodec) -> bool:
    """Whether a part of the state may be a POJO with a field a primitive serializer writes."""
    parts = (codec.key, codec.namespace, codec.user_key, codec.user_value_codec())
    return any(map(has_primitive_fields, parts))


def row_parts(
    codec: StateCodec, values: dict[str, object]
) -> Iterator[tuple[Codec | None, object]]:
    """Each part of a row with its codec (a keyed LIST's elements one by one)."""
    yield codec.key, values.get("key")
    yield codec.namespace, values.get("namespace")
    yield codec.user_key, values.get("user_key")
    value, element = values.get("value"), codec.user_value_codec()
    if codec.kind == "LIST" and codec.keyed and isinstance(value, list):
        yield from ((element, v) for v in value)
    else:
        yield element, value


@dataclass(frozen=True)
class OperatorRows:
    """An operator state's table as its elements: list and union state's by subtask, or the
    broadcast map every subtask holds."""

    elements: dict[int, list[bytes]] | None
    broadcast: bytes | None
    count: int
    unchecked_nulls: UncheckedNulls = dataclass_field(default_factory=Counter)


def encode_operator_rows(table: pa.Table, codec: StateCodec, parallelism: int) -> OperatorRows:
    """Every row of a conformed operator-state table: `subtask`, `value` (one element each), or
    a broadcast state's `key`, `value` (one map entry each)."""
    columns = _columns(table, codec)
    unchecked: UncheckedNulls = Counter()
    nulls_to_check = _holds_primitive_fields(codec)
    if codec.kind == "BROADCAST":
        entries: list[tuple[bytes, bytes]] = []
        seen: set[bytes] = set()
        for n, (key, value) in enumerate(zip(columns["key"], columns["value"], strict=True)):
            if key is None:
                raise FormatError(f"row {n}: key is null")
            try:
                if nulls_to_check:
                    check_pojo_nulls(row_parts(codec, {"key": key, "value": value}), unchecked)
                encoded = codec.encode_key(key)
                entry = (encoded, codec.encode_value(value))
            except FormatError as exc:
                raise FormatError(f"row {n}: {exc.message}") from None
            if encoded in seen:
                raise FormatError(f"row {n}: key {key!r} appears more than once")
            seen.add(encoded)
            entries.append(entry)
        return OperatorRows(None, build_broadcast_element(entries), len(entries), unchecked)
    elements: dict[int, list[bytes]] = {}
    for n, (subtask, value) in enumerate(zip(columns["subtask"], columns["value"], strict=True)):
        if subtask is None or not 0 <= subtask < parallelism:
            raise FormatError(
                f"row {n}: subtask {subtask} is not one of the operator's 0–{parallelism - 1}"
            )
        if value is None:
            raise FormatError(f"row {n}: value is null: a list state stores none")
        try:
            if nulls_to_check:
                check_pojo_nulls(row_parts(codec, {"value": value}), unchecked)
            elements.setdefault(subtask, []).append(codec.encode_value(value))
        except FormatError as exc:
            raise FormatError(f"row {n}: {exc.message}") from None
    count = sum(len(e) for e in elements.values())
    return OperatorRows(elements, None, count, unchecked)


def _columns(table: pa.Table | pa.RecordBatch, codec: StateCodec) -> dict[str, list[Any]]:
    """Each column's values as its codec's values (`StateCodec.column_from_arrow`)."""
    return {name: codec.column_from_arrow(name, table.column(name)) for name in table.column_names}


def _entry(
    codec: StateCodec,
    key_type: KeyType,
    max_parallelism: int,
    ambiguous: bool,
    values: dict[str, Any],
) -> tuple[int, Row]:
    if values["key"] is None:
        raise FormatError("key is null")
    key = codec.encode_key(values["key"])
    key_value, end = key_type.read(key)
    if end != len(key):
        raise FormatError("the key's bytes are not one key of the job's key type")
    key_group = key_type.key_group(key_value, max_parallelism)
    namespace = codec.encode_namespace(values["namespace"])
    if codec.kind == "TIMERS":
        if values["timestamp"] is None:
            raise FormatError("timestamp is null")
        composite = build_composite_key(
            key_group,
            max_parallelism,
            key,
            namespace,
            ambiguous=False,
            timestamp=values["timestamp"],
        )
        return key_group, (composite, b"")
    user_key = b""
    if codec.kind == "MAP":
        if values["user_key"] is None:
            raise FormatError("user_key is null")
        user_key = codec.encode_user_key(values["user_key"])
    value = values["value"]
    if value is None and codec.kind != "MAP":
        raise FormatError(f"value is null: a {codec.kind} state stores none (leave the row out)")
    if codec.kind == "LIST" and not value:
        raise FormatError("value is an empty list: Flink stores none (leave the row out)")
    stored = codec.encode_value(value, values.get("ttl_timestamp"))
    composite = build_composite_key(
        key_group, max_parallelism, key, namespace, ambiguous=ambiguous, user_key=user_key
    )
    return key_group, (composite, stored)


def _describe(values: dict[str, Any]) -> str:
    parts = [f"key {values['key']!r}"]
    if values.get("namespace") is not None:
        parts.append(f"namespace {values['namespace']!r}")
    if values.get("user_key") is not None:
        parts.append(f"user_key {values['user_key']!r}")
    if values.get("timestamp") is not None:
        parts.append(f"timestamp {values['timestamp']}")
    return ", ".join(parts)


def rows_of(tables: Iterable[pa.Table]) -> pa.Table:
    """Tables (or a function's batches) as one table."""
    import pyarrow as pa

    return pa.concat_tables(list(tables))


def in_state(where: str, state: str, exc: FormatError) -> StatectlError:
    """A table's problem as one line naming the state."""
    return StatectlError(f"state {state!r}: {exc.message}", where)
