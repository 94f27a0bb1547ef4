"""`statectl export`: every state entry of a savepoint as one row of Parquet.

Rows come from `entries` (CANONICAL keyed state, RocksDB native rows, operator list and
broadcast state), with the raw bytes of each part (§4.6: key, namespace, map user key; the
stored value) and JSON columns decoding them through the value codecs (`state_values`, by the
rules of docs/values.md). A part that does not decode has a null JSON column; the row's
`raw_reason` says why and `value_type` names the value's type.

One file: written in-process with pyarrow's ParquetWriter, a row group per batch (memory stays
bounded), to a temporary sibling renamed into place at the end. A folder (OUT ends with `/`, or
`--spark`): one part file per task, written in-process or by a Spark job, into a staging folder
moved into place at the end. An existing output is refused unless `overwrite`, and even then
unless it is what export writes: a Parquet file of this schema, or a folder holding only
`part-NNNNN.parquet` files of it (`writer.OutputKind`).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from statectl.errors import StatectlError
from statectl.execution.engine import Engine, LocalEngine, start_named
from statectl.formats.handles import DistributionMode
from statectl.formats.java_types import key_group_prefix_bytes
from statectl.formats.state_headers import StateMetaInfo
from statectl.formats.state_values import Decoded, StateCodec
from statectl.formats.values import Raw
from statectl.formats.values import batch as batch_values
from statectl.operations import parquet_files
from statectl.progress import ProgressCallback, Steps, begun
from statectl.savepoint import entries, tables, writer
from statectl.savepoint.entries import KeyedFile, KeyedSource, OperatorFile
from statectl.savepoint.model import Savepoint
from statectl.savepoint.storage import Location, locate

SCHEMA = pa.schema(
    [
        pa.field("operator", pa.string(), nullable=False),  # uid, or the hex id without one
        pa.field("operator_id", pa.string(), nullable=False),
        pa.field("scope", pa.string(), nullable=False),  # keyed | operator
        pa.field("state", pa.string(), nullable=False),
        pa.field("kind", pa.string(), nullable=False),  # VALUE, LIST, MAP, …, UNION, BROADCAST
        pa.field("subtask", pa.int32(), nullable=False),
        pa.field("key_group", pa.int32()),
        pa.field("key", pa.binary()),
        pa.field("namespace", pa.binary()),
        pa.field("user_key", pa.binary()),
        pa.field("timestamp", pa.int64()),
        pa.field("value", pa.binary()),
        pa.field("key_json", pa.string()),
        pa.field("namespace_json", pa.string()),
        pa.field("user_key_json", pa.string()),
        pa.field("value_json", pa.string()),
        pa.field("ttl_timestamp_json", pa.string()),
        pa.field("value_type", pa.string()),
        pa.field("raw_reason", pa.string()),  # why a part stayed undecoded; null when none did
    ]
)
BATCH_ROWS = 65536
BATCH_BYTES = 64 << 20
CHUNK_BYTES = 128 << 20  # key-group blocks per part file in folder output
TEMP_MARK = ".statectl-tmp-"


class Row(NamedTuple):
    """One exported entry: `SCHEMA`'s columns, in its order."""

    operator: str
    operator_id: str
    scope: str
    state: str
    kind: str
    subtask: int
    key_group: int | None
    key: bytes | None
    namespace: bytes | None
    user_key: bytes | None
    timestamp: int | None
    value: bytes
    key_json: str | None
    namespace_json: str | None
    user_key_json: str | None
    value_json: str | None
    ttl_timestamp_json: str | None
    value_type: str | None
    raw_reason: str | None


@dataclass(frozen=True)
class ExportReport:
    output: str
    rows: int
    files: int
    engine: str
    states: dict[str, int] = field(default_factory=dict)  # "operator/state" -> rows
    raw: dict[str, RawCount] = field(default_factory=dict)  # "operator/state" -> raw rows


@dataclass(frozen=True)
class RawCount:
    """How many rows of a state kept an undecoded part, and the first one's reason."""

    rows: int
    first_reason: str


# --- what to export --------------------------------------------------------------------------


@dataclass(frozen=True)
class ExportTask:
    """A range of key groups of a keyed file, or an operator-state file; `state` filters."""

    keyed: KeyedSource | None = None
    key_groups: tuple[int, int] | None = None
    operator: OperatorFile | None = None
    state: str | None = None
    part: str = ""  # file name inside the output folder (folder output only)
    # Broadcast states of `operator` read from an earlier subtask's copy: every subtask holds
    # the same map, and its entries are exported once (as Flink's `readBroadcastState` reads
    # them), with the subtask of the copy read.
    copies: tuple[str, ...] = ()


def plan_export(
    sp: Savepoint, operator: str | None = None, state: str | None = None, chunk: bool = False
) -> list[ExportTask]:
    """Tasks in savepoint order; `chunk` splits large keyed files (for folder output)."""
    ops = [sp.find_operator(operator)] if operator else list(sp.operators)
    tasks: list[ExportTask] = []
    known: set[str] = set()
    for op in ops:
        for keyed in entries.keyed_files(sp, op):
            known.update(s.name for s in keyed.header().states)
            ranges: list[tuple[int, int] | None] = [None]
            if chunk:
                ranges = list(keyed.chunks(CHUNK_BYTES))
            tasks += [ExportTask(keyed, r, state=state) for r in ranges]
        broadcast_read: set[str] = set()
        for file in entries.operator_files(sp, op):
            names = {s.name for s in file.handle.states}
            known.update(names)
            copies = tuple(sorted(names & broadcast_read))
            broadcast_read.update(
                s.name for s in file.handle.states if s.mode == DistributionMode.BROADCAST
            )
            only_copies = (
                state in copies if state is not None else bool(names) and names <= set(copies)
            )
            if not only_copies:
                tasks.append(ExportTask(operator=file, state=state, copies=copies))
    if state is not None and state not in known:
        listed = ", ".join(sorted(known)) or "none"
        raise StatectlError(f"unknown state {state!r}; known states: {listed}", sp.directory.url)
    return [replace(t, part=f"part-{n:05d}.parquet") for n, t in enumerate(tasks)]


# --- rows ------------------------------------------------------------------------------------


def task_rows(task: ExportTask) -> Iterator[Row]:
    if task.keyed is not None:
        yield from _keyed_rows(task.keyed, task.key_groups, task.state)
    if task.operator is not None:
        yield from _operator_rows(task.operator, task.state, task.copies)


def task_tables(task: ExportTask) -> Iterator[Row | pa.Table]:
    """`task_rows`, keyed entries of canonical files as tables of many rows (same rows)."""
    if task.keyed is not None:
        yield from _keyed_tables(task.keyed, task.key_groups, task.state)
    if task.operator is not None:
        yield from _operator_rows(task.operator, task.state, task.copies)


def json_text(value: Any) -> str:
    """JSON text of a value's JSON form (UTF-8; a Java string's lone surrogates as \\ud8xx)."""
    text = json.dumps(value, ensure_ascii=False)
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(value)
    return text


class _Part(NamedTuple):
    json: str | None
    reason: str | None


def _part(codec: StateCodec, part: str, decoded: Any) -> _Part:
    if isinstance(decoded, Raw):
        return _Part(None, f"{part}: {decoded.reason}")
    return _Part(json_text(codec.json(part, decoded)), None)


def _first(*reasons: str | None) -> str | None:
    return next((r for r in reasons if r is not None), None)


def _ttl_json(decoded: Decoded) -> str | None:
    return None if decoded.ttl_timestamp is None else json.dumps(decoded.ttl_timestamp)


def _keyed_rows(
    file: KeyedSource, key_groups: tuple[int, int] | None, state: str | None
) -> Iterator[Row]:
    header = file.header()
    codecs = entries.codecs_for(header, file.flink_major)
    for entry in file.entries(key_groups, header):
        if state is None or entry.state.name == state:
            yield _keyed_row(file, codecs[entry.state.name], entry)


def _keyed_row(file: KeyedSource, codec: StateCodec, entry: entries.KeyedEntry) -> Row:
    name = entry.state.name
    try:
        parts = entries.split_key(entry, file.max_parallelism, codec)
    except StatectlError as exc:
        where = f"{file.description} (key group {entry.key_group}, state {name})"
        raise exc.with_source(where) from None
    key = _part(codec, "key", codec.decode_key(parts.key))
    namespace = (
        _Part(None, "namespace: not separable from the key")
        if parts.namespace is None
        else _part(codec, "namespace", codec.decode_namespace(parts.namespace))
    )
    user_key = (
        _Part(None, None)
        if parts.user_key is None
        else _part(codec, "user_key", codec.decode_user_key(parts.user_key))
    )
    timers = entry.state.kind == "TIMERS"
    decoded = Decoded(None) if timers else codec.decode_value(entry.value)
    value = _Part(None, None) if timers else _part(codec, "value", decoded.value)
    return Row(
        file.operator,
        file.operator_id,
        "keyed",
        name,
        entry.state.kind,
        file.subtask,
        entry.key_group,
        parts.key,
        parts.namespace,
        parts.user_key,
        parts.timestamp,
        entry.value,
        key_json=key.json,
        namespace_json=namespace.json,
        user_key_json=user_key.json,
        value_json=value.json,
        ttl_timestamp_json=_ttl_json(decoded),
        value_type=None if timers else codec.value_type,
        raw_reason=_first(key.reason, namespace.reason, user_key.reason, value.reason),
    )


def _keyed_tables(
    file: KeyedSource, key_groups: tuple[int, int] | None, state: str | None
) -> Iterator[Row | pa.Table]:
    """`_keyed_rows` as tables of many entries: a canonical file's entries a batch of blocks at
    a time, those whose parts decode in batches (`tables.decode_fast`) without a Python step per
    entry, the others (and native instances) row by row; rows in the same order."""
    if not isinstance(file, entries.KeyedFile):
        yield from _keyed_rows(file, key_groups, state)
        return
    header = file.header()
    codecs = entries.codecs_for(header, file.flink_major)
    # Timers export per entry: their rows carry the timestamp, which `_fast_table` leaves out.
    readers = {
        name: None if codec.kind == "TIMERS" else tables.readers_for(codec)
        for name, codec in codecs.items()
    }
    prefix = key_group_prefix_bytes(file.max_parallelism)
    for batch in tables.entry_batches(file, key_groups, header):
        pieces: list[pa.Table] = []
        order: list[np.ndarray[Any, Any]] = []
        for state_id, meta in enumerate(header.states):
            rows = np.flatnonzero(batch.state_ids == state_id)
            if (state is not None and meta.name != state) or not len(rows):
                continue
            codec, state_readers = codecs[meta.name], readers[meta.name]
            if state_readers is None:
                pieces.append(_slow_table(file, codec, batch, rows, meta))
            else:
                fast = tables.decode_fast(state_readers, batch, rows, prefix)
                table = _fast_table(file, meta, codec, state_readers, batch, rows, fast)
                left = fast.left
                if len(left):
                    slow = _slow_table(file, codec, batch, rows[left], meta)
                    table = tables.patched(table, left, slow)
                pieces.append(table)
            order.append(rows)
        if pieces:
            yield _ordered(pieces, np.concatenate(order))


def _slow_table(
    file: KeyedFile,
    codec: StateCodec,
    batch: tables.EntryBatch,
    rows: np.ndarray[Any, Any],
    meta: StateMetaInfo,
) -> pa.Table:
    keyed = [_keyed_row(file, codec, batch.entry(i, meta)) for i in rows.tolist()]
    return pa.Table.from_batches([_batch(keyed)])


def _ordered(pieces: list[pa.Table], order: np.ndarray[Any, Any]) -> pa.Table:
    """The pieces' rows by their entry order (`order`: each row's entry, piece after piece)."""
    table = pa.concat_tables(pieces) if len(pieces) > 1 else pieces[0]
    return tables.in_entry_order(table, order)


def _fast_table(
    file: KeyedFile,
    meta: StateMetaInfo,
    codec: StateCodec,
    readers: tables.StateReaders,
    batch: tables.EntryBatch,
    rows: np.ndarray[Any, Any],
    fast: tables.FastParts,
) -> pa.Table:
    """The export rows of the entries `decode_fast` read, column by column (those it did not
    take are replaced by the caller)."""
    assert readers.value is not None, "timers are exported entry by entry"
    chosen = rows
    count = len(chosen)
    buf = batch.buffer
    key_ends, value_ends = batch.key_ends[chosen], batch.value_ends[chosen]
    namespace_ends = key_ends if fast.user_key_start is None else fast.user_key_start

    def ranges(starts: np.ndarray[Any, Any], ends: np.ndarray[Any, Any]) -> pa.Array:
        return batch_values.binary_array(pa.binary(), buf, starts, ends - starts, fast.taken)

    def constant(value: Any, arrow: pa.DataType) -> pa.Array:
        if value is None:
            return pa.nulls(count, arrow)
        if arrow == pa.string():
            return batch_values.constant_text(value, count)
        assert arrow == pa.int32(), arrow  # the subtask
        return batch_values.fixed_width_array(arrow, np.full(count, value, np.int32))

    columns = {
        "operator": constant(file.operator, pa.string()),
        "operator_id": constant(file.operator_id, pa.string()),
        "scope": constant("keyed", pa.string()),
        "state": constant(meta.name, pa.string()),
        "kind": constant(meta.kind, pa.string()),
        "subtask": constant(file.subtask, pa.int32()),
        "key_group": batch_values.fixed_width_array(
            pa.int32(), batch.key_groups[chosen].astype(np.int32)
        ),
        "key": ranges(fast.key_start, fast.namespace_start),
        "namespace": ranges(fast.namespace_start, namespace_ends),
        "value": ranges(fast.value_start, value_ends),
        "key_json": readers.key.json(fast.key),
        "namespace_json": readers.namespace.json(fast.namespace),
        "value_json": readers.value.json(fast.value),
        "value_type": constant(codec.value_type, pa.string()),
    }
    if readers.user_key is not None and fast.user_key is not None:
        columns["user_key"] = ranges(namespace_ends, key_ends)
        columns["user_key_json"] = readers.user_key.json(fast.user_key)
    if readers.ttl_timestamp is not None and fast.ttl_timestamp is not None:
        stamps = fast.ttl_timestamp  # a MAP's null value has none: no text, as per entry
        texts = readers.ttl_timestamp.json(stamps)
        columns["ttl_timestamp_json"] = pc.if_else(stamps.is_valid(), texts, None)
    arrays = [columns.get(f.name, pa.nulls(count, f.type)) for f in SCHEMA]
    return pa.Table.from_arrays(arrays, schema=SCHEMA)


def _operator_rows(
    file: OperatorFile, state: str | None, copies: tuple[str, ...] = ()
) -> Iterator[Row]:
    for element in file.elements():
        if (state is not None and element.state != state) or element.state in copies:
            continue
        codec = entries.element_codec(element)
        broadcast = element.kind == "BROADCAST"
        value = (
            _Part(None, "value: broadcast map not split")
            if broadcast
            else _part(codec, "value", codec.decode_value(element.value).value)
        )
        row = Row(
            file.operator,
            file.operator_id,
            "operator",
            element.state,
            element.kind,
            file.subtask,
            key_group=None,
            key=None,
            namespace=None,
            user_key=None,
            timestamp=None,
            value=element.value,
            key_json=None,
            namespace_json=None,
            user_key_json=None,
            value_json=value.json,
            ttl_timestamp_json=None,
            value_type=codec.value_type or None,
            raw_reason=value.reason,
        )
        pairs = entries.broadcast_entries(element) if broadcast else None
        if pairs is None:  # a list element, or a broadcast map we cannot split
            yield row
            continue
        for key_bytes, value_bytes in pairs:
            key = _part(codec, "key", codec.decode_key(key_bytes))
            item = _part(codec, "value", codec.decode_value(value_bytes).value)
            yield row._replace(
                key=key_bytes,
                value=value_bytes,
                key_json=key.json,
                value_json=item.json,
                raw_reason=_first(key.reason, item.reason),
            )


# --- writing ---------------------------------------------------------------------------------


@dataclass
class Tally:
    """Rows per state, and those that kept a part undecoded (with the first reason)."""

    rows: dict[str, int] = field(default_factory=dict)
    raw: dict[str, RawCount] = field(default_factory=dict)

    def count(self, row: Row) -> None:
        label = f"{row.operator}/{row.state}"
        self.rows[label] = self.rows.get(label, 0) + 1
        if row.raw_reason is not None:
            seen = self.raw.get(label)
            first = seen.first_reason if seen else row.raw_reason
            self.raw[label] = RawCount((seen.rows if seen else 0) + 1, first)

    def count_table(self, table: pa.Table) -> None:
        """`count` of every row of a table."""
        labels = pc.binary_join_element_wise(table.column("operator"), table.column("state"), "/")
        for item in pc.value_counts(labels).to_pylist():
            label, rows = item["values"], item["counts"]
            self.rows[label] = self.rows.get(label, 0) + rows
        reasons = table.column("raw_reason")
        if reasons.null_count == len(reasons):
            return
        valid = pc.is_valid(reasons)
        for label, reason in zip(
            labels.filter(valid).to_pylist(), reasons.filter(valid).to_pylist(), strict=True
        ):
            seen = self.raw.get(label)
            first = seen.first_reason if seen else reason
            self.raw[label] = RawCount((seen.rows if seen else 0) + 1, first)

    def add(self, other: Tally) -> None:
        for label, rows in other.rows.items():
            self.rows[label] = self.rows.get(label, 0) + rows
        for label, raw in other.raw.items():
            seen = self.raw.get(label)
            first = seen.first_reason if seen else raw.first_reason
            self.raw[label] = RawCount((seen.rows if seen else 0) + raw.rows, first)


UNPRUNED_COLUMNS = ("key", "namespace", "user_key", "value", "value_json")
"""Raw bytes and the values' JSON: written without min/max statistics (`parquet_files`)."""


def write_rows(rows: Iterator[Row | pa.Table], sink: Any) -> tuple[int, Tally]:
    """Rows (single or as tables) into one Parquet stream, a row group per batch of
    `BATCH_ROWS` rows or `BATCH_BYTES` (whichever comes first); (rows, the tally per state)."""
    total = 0
    tally = Tally()
    with contextlib.ExitStack() as stack:
        parquet: pq.ParquetWriter | None = None

        def write(ready: pa.RecordBatch) -> None:
            nonlocal parquet, total
            if parquet is None:
                opened = parquet_files.writer(sink, SCHEMA, ready, UNPRUNED_COLUMNS)
                parquet = stack.enter_context(opened)
            parquet.write_batch(ready)
            total += ready.num_rows

        batch = _Batch()
        for item in rows:
            if isinstance(item, pa.Table):
                tally.count_table(item)
                full = batch.add_table(item)
            else:
                tally.count(item)
                full = batch.add(item)
            for ready in full:
                write(ready)
        if batch.rows or total == 0:
            write(batch.flush())
    return total, tally


class _Batch:
    """The rows of the row group being gathered, cut where `write_rows` always cut them."""

    def __init__(self) -> None:
        self.tables: list[pa.Table] = []
        self.pending: list[Row] = []
        self.rows = 0
        self.size = 0

    def _full(self) -> bool:
        return self.rows >= BATCH_ROWS or self.size >= BATCH_BYTES

    def add(self, row: Row) -> list[pa.RecordBatch]:
        self.pending.append(row)
        self.rows += 1
        self.size += len(row.value) + len(row.key or b"") + 64
        return [self.flush()] if self._full() else []

    def add_table(self, table: pa.Table) -> list[pa.RecordBatch]:
        self._settle()
        value = pc.binary_length(table.column("value")).to_numpy(zero_copy_only=False)
        key = pc.fill_null(pc.binary_length(table.column("key")), 0).to_numpy(zero_copy_only=False)
        sizes = np.cumsum(value.astype(np.int64) + key + 64)
        ready, start = [], 0
        while start < table.num_rows:
            ends = self.size + sizes[start:] - (sizes[start - 1] if start else 0)
            by_bytes = np.flatnonzero(ends >= BATCH_BYTES)
            take = min(BATCH_ROWS - self.rows, table.num_rows - start)
            if len(by_bytes):
                take = min(take, int(by_bytes[0]) + 1)
            self.tables.append(table.slice(start, take))
            self.rows += take
            self.size = int(ends[take - 1])
            start += take
            if self._full():
                ready.append(self.flush())
        return ready

    def _settle(self) -> None:
        if self.pending:
            self.tables.append(pa.Table.from_batches([_batch(self.pending)]))
            self.pending = []

    def flush(self) -> pa.RecordBatch:
        self._settle()
        table = pa.concat_tables(self.tables).combine_chunks() if self.tables else None
        self.tables, self.rows, self.size = [], 0, 0
        if table is None or table.num_rows == 0:
            return _batch([])
        return table.to_batches()[0]


def _batch(rows: list[Row]) -> pa.RecordBatch:
    columns = list(zip(*rows, strict=True)) if rows else [() for _ in SCHEMA]
    return pa.RecordBatch.from_arrays(
        [pa.array(c, type=f.type) for c, f in zip(columns, SCHEMA, strict=True)], schema=SCHEMA
    )


@dataclass(frozen=True)
class _PartResult:
    part: str
    rows: int
    tally: Tally


def write_part(
    task: ExportTask, folder_url: str, storage_options: dict[str, Any] | None
) -> list[_PartResult]:
    """One task's rows as one part file of the output folder (none when it has no rows)."""
    rows = task_tables(task)
    first = next(rows, None)
    if first is None:
        return []
    target = locate(folder_url, storage_options).child(task.part)
    with target.fs.open(target.path, "wb") as sink:
        count, tally = write_rows(_chain(first, rows), sink)
    return [_PartResult(task.part, count, tally)]


def _chain(first: Row | pa.Table, rest: Iterator[Row | pa.Table]) -> Iterator[Row | pa.Table]:
    yield first
    yield from rest


# --- the command -----------------------------------------------------------------------------


def export(
    sp: Savepoint,
    output: str,
    *,
    operator: str | None = None,
    state: str | None = None,
    folder: bool = False,
    engine: Engine | None = None,
    overwrite: bool = False,
    storage_options: dict[str, Any] | None = None,
    progress: ProgressCallback | None = None,
) -> ExportReport:
    """Export into one Parquet file, or into a folder of part files (`folder`, or a trailing /).
    `progress`: the tasks done (files and their state bytes), each phase named."""
    folder = folder or output.endswith("/")
    writer.ensure_not_inside(sp.directory, output, storage_options)
    tasks = plan_export(sp, operator, state, chunk=folder)
    if folder:
        engine = engine or LocalEngine()
        return _export_folder(tasks, output, engine, overwrite, storage_options, progress)
    return _export_file(tasks, output, overwrite, storage_options, progress)


def task_bytes(task: ExportTask) -> int:
    """The state bytes a task reads: its share of the progress."""
    return read_bytes(task.keyed, task.key_groups, task.operator)


def read_bytes(
    keyed: KeyedSource | None, key_groups: tuple[int, int] | None, operator: OperatorFile | None
) -> int:
    """The bytes of a keyed source's key groups (all: None), or of an operator-state file."""
    if operator is not None:
        return operator.stream.size
    return 0 if keyed is None else entries.source_bytes(keyed, key_groups)


def exporting(task: ExportTask) -> str:
    """The phase of the progress while `task` runs."""
    source = task.keyed or task.operator
    operator = f"operator {source.operator}" if source is not None else "operator"
    return f"exporting state {task.state} ({operator})" if task.state else f"exporting {operator}"


def _counted_tables(
    tasks: list[ExportTask], progress: ProgressCallback | None
) -> Iterator[Row | pa.Table]:
    """Every task's rows, in order, each task's phase named and its bytes counted."""
    sizes = [task_bytes(task) for task in tasks]
    steps = Steps(progress, exporting(tasks[0]) if tasks else "exporting", len(tasks), sum(sizes))
    for task, size in zip(tasks, sizes, strict=True):
        steps.name(exporting(task))
        yield from task_tables(task)
        steps.step(size)


def _export_file(
    tasks: list[ExportTask],
    output: str,
    overwrite: bool,
    storage_options: dict[str, Any] | None,
    progress: ProgressCallback | None = None,
) -> ExportReport:
    target = locate(output, storage_options)
    writer.check_destination(target, overwrite, PARQUET_FILE)
    temp = target.parent.child(f".{target.name}{TEMP_MARK}{uuid.uuid4().hex[:12]}")
    try:
        with temp.fs.open(temp.path, "wb") as sink:
            rows, tally = write_rows(_counted_tables(tasks, progress), sink)
        _replace(temp, target)
    except OSError as exc:
        _remove(temp)
        raise writer.unwritable(exc, target) from None
    except BaseException:
        _remove(temp)
        raise
    return ExportReport(target.url, rows, 1, "local", tally.rows, tally.raw)


def _export_folder(
    tasks: list[ExportTask],
    output: str,
    engine: Engine,
    overwrite: bool,
    storage_options: dict[str, Any] | None,
    progress: ProgressCallback | None = None,
) -> ExportReport:
    staged = writer.stage(output.rstrip("/"), overwrite, storage_options, PARQUET_FOLDER)
    with writer.discarded_on_failure(staged, name_os_errors=True):
        url = staged.staging_url

        def run(task: ExportTask) -> list[_PartResult]:
            return write_part(task, url, storage_options)

        start_named(engine, progress)
        if progress is not None:
            progress(begun(f"exporting {len(tasks)} parts"))
        results = engine.run(tasks, run, _task_work, progress)
        parts = [part for result in results for part in result]
        if not parts:  # an empty export still has a schema
            with staged.staging.fs.open(staged.staging.child("part-00000.parquet").path, "wb") as f:
                write_rows(iter(()), f)
        writer.publish_folder(staged)
    tally = Tally()
    for part in parts:
        tally.add(part.tally)
    rows = sum(p.rows for p in parts)
    files = max(len(parts), 1)
    return ExportReport(staged.destination.url, rows, files, engine.name, tally.rows, tally.raw)


def _task_work(task: ExportTask) -> tuple[int, int]:
    return 1, task_bytes(task)


def _replace(source: Location, target: Location) -> None:
    """Move a finished file over the target: the old file stays until the new one replaces it
    (a rename locally, a copy over the same key on object stores)."""
    if source.is_local:
        os.replace(source.path, target.path)
    else:
        source.fs.mv(source.path, target.path)


# --- what --overwrite may replace --------------------------------------------------------------

_PART = re.compile(r"part-\d{5}\.parquet")


def _file_refusal(target: Location) -> str | None:
    if writer.is_folder(target):
        return "is a folder, not a Parquet file written by statectl export"
    if not _has_export_schema(target):
        return "is not a Parquet file written by statectl export"
    return None


def _folder_refusal(target: Location) -> str | None:
    not_ours = "is not a folder of Parquet part files written by statectl export"
    if not writer.is_folder(target):
        return not_ours
    paths = sorted(target.fs.ls(target.path, detail=False))
    names = [p.rstrip("/").rsplit("/", 1)[-1] for p in paths]
    if not all(_PART.fullmatch(name) for name in names):
        return not_ours
    if paths and not _has_export_schema(target.child(names[0])):
        return not_ours
    return None


def _has_export_schema(file: Location) -> bool:
    """A Parquet file whose columns are export's (its footer only is read)."""
    try:
        with file.fs.open(file.path, "rb") as source:
            schema = pq.read_schema(source)
    except (OSError, pa.ArrowException, ValueError):
        return False
    return bool(schema.names == SCHEMA.names)


PARQUET_FILE = writer.OutputKind(_file_refusal, "output exists; pass --overwrite to replace it")
PARQUET_FOLDER = writer.OutputKind(_folder_refusal, "output exists; pass --overwrite to replace it")


def _remove(location: Location) -> None:
    try:
        if location.exists():
            location.fs.rm(location.path, recursive=True)
    except OSError:
        pass
