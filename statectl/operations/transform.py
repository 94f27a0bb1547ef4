"""Editing a keyed state as a table: read it, change it (Spark SQL or a Python function over
Arrow batches), and write the result back as the state's entries.

The state's table is the one every read gives (`savepoint.tables`, docs/values.md). The
result must have the same columns in the same types (Spark's narrower or wider encodings are
cast back where nothing is lost); its rows become the state's entries, each in the key group
of its key, so new keys land in the subtask that owns them and keys left out are removed.
The rest of the savepoint is carried over as `migrate` carries it.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import json
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from statectl.errors import FormatError, StatectlError
from statectl.formats.arrays import Int64s
from statectl.formats.entry_scan import BlockRuns, pack_spans
from statectl.formats.java_types import KeyType, key_type_for_snapshot
from statectl.formats.metadata import OperatorState
from statectl.formats.state_values import StateCodec
from statectl.operations.shuffled_edits import NOTES, SPANS, notes_chunk, owners_of_files
from statectl.operations.state_edits import REPLACE, RowFeed, StateEdit
from statectl.savepoint import entries, tables
from statectl.savepoint.entries import KeyedSource
from statectl.savepoint.entry_chunks import RunWriter
from statectl.savepoint.model import Savepoint
from statectl.savepoint.storage import Location
from statectl.savepoint.table_rows import (
    RowEncoder,
    UncheckedNulls,
    conform,
    encode_operator_rows,
    encode_rows,
    pojo_fields_with_nulls,
)

if TYPE_CHECKING:
    from typing import TypeAlias

    import pyarrow as pa

    # A state's new rows: a table, or batches from a reader or any iterable.
    Rows: TypeAlias = pa.Table | pa.RecordBatchReader | Iterable[pa.RecordBatch | pa.Table]

    from statectl.formats.class_files import ClassFinder

SPLIT_BYTES = 128 << 20  # a task's share of a canonical file: about this many bytes of blocks
BatchFunction = Callable[["pa.RecordBatch"], "pa.RecordBatch | pa.Table | None"]


def replacement(
    source: Savepoint,
    operator: str,
    state: str,
    rows: Rows,
    classpath: ClassFinder | None = None,
) -> StateEdit:
    """The edit that makes `rows` the entries of state `state` of `operator` (keyed state's
    entries, an operator list or union state's elements, a broadcast state's map): a table, or
    batches (a reader, any iterable), which keyed state consumes once with bounded memory.
    `classpath`: the job's classes, which say whether a POJO field may hold a null."""
    op = source.find_operator(operator)
    label = entries.operator_label(op)
    files = entries.keyed_files(source, op)
    header = next((f.header() for f in files if state in f.header().state_names()), None)
    if header is None:
        return _operator_replacement(source, op, state, _one_table(rows), classpath)
    codec = entries.codecs_for(header, files[0].flink_major, classpath)[state]
    key_type = key_type_for_snapshot(header.key_serializer_snapshot)
    conformed = (conform(table, codec) for table in _tables(rows))
    try:
        encoded = encode_rows(conformed, codec, key_type, op.max_parallelism)
    except FormatError as exc:
        raise StatectlError(f"state {state!r}: {exc.message}", label) from None
    originals = (b for file in files for b in tables.keyed_batches(file, state, codec))
    warnings = _null_warnings(label, state, encoded.unchecked_nulls, originals, codec)
    return StateEdit(
        operator, state, REPLACE, rows=encoded.by_key_group, rows_count=encoded.count,
        warnings=warnings,
    )  # fmt: skip


# --- edits made by the write's tasks -----------------------------------------------------------


@dataclass(frozen=True)
class KeyedTarget:
    """A keyed state being edited, as the write's tasks need it (picklable: codecs are made
    again in each task from the header): where its rows are (`sources`: a subtask's file and
    a key-group range of it) and how new rows become chunks of entries (`chunks`)."""

    label: str
    state: str
    max_parallelism: int
    sources: tuple[tuple[KeyedSource, tuple[int, int] | None], ...]
    classpath: ClassFinder | None = None

    def __getstate__(self) -> dict[str, object]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    @functools.cached_property
    def codec(self) -> StateCodec:
        file = self.sources[0][0]
        return entries.codecs_for(file.header(), file.flink_major, self.classpath)[self.state]

    @functools.cached_property
    def key_type(self) -> KeyType | None:
        return key_type_for_snapshot(self.sources[0][0].header().key_serializer_snapshot)

    def batches(
        self, source: tuple[KeyedSource, tuple[int, int] | None]
    ) -> Iterator[pa.RecordBatch]:
        """The state's rows in one source, batch by batch."""
        file, key_groups = source
        return tables.split_batches(file, self.state, self.codec, key_groups)

    def grouped_batches(
        self,
        source: tuple[KeyedSource, tuple[int, int] | None],
        spans: dict[int, BlockRuns] | None = None,
    ) -> Iterator[tuple[pa.RecordBatch, Int64s | None]]:
        """`batches`, each with the key group of each of its rows where the read knows them;
        `spans` receives the runs of each block read (`tables.grouped_split_batches`)."""
        file, key_groups = source
        return tables.grouped_split_batches(file, self.state, self.codec, key_groups, spans)

    def chunks(
        self, results: Iterable[pa.Table | KnownGroups], seq_base: int = 0
    ) -> Iterator[Chunk]:
        """New rows (tables in the state's columns, or Spark's forms of them) as chunks of
        entries, one per table and key group, then the notes of nulls not checked. A table
        whose rows' key groups are known (`KnownGroups`) is not hashed again."""
        encoder = self.encoder()
        first_row = 0
        for number, result in enumerate(results):
            table, groups = result if isinstance(result, KnownGroups) else (result, None)
            try:
                encoded = encoder.batch(conform(table, self.codec), first_row, groups)
            except FormatError as exc:
                raise StatectlError(f"state {self.state!r}: {exc.message}", self.label) from None
            first_row += table.num_rows
            for key_group, chunk in encoded.chunks.items():
                yield key_group, seq_base + number, chunk
        if encoder.unchecked_nulls:
            yield notes_chunk(encoder.unchecked_nulls)

    def encoder(self) -> RowEncoder:
        return RowEncoder(self.codec, self.key_type, self.max_parallelism)

    def describe_key(self, composite: bytes) -> str:
        return self.encoder().describe_key(composite)

    def warnings(self, unchecked: Mapping[tuple[str, str], int]) -> tuple[str, ...]:
        originals = (b for source in self.sources for b in self.batches(source))
        return _null_warnings(self.label, self.state, Counter(unchecked), originals, self.codec)


Chunk = tuple[int, int, bytes]  # key group, number within its source, packed entries


class KnownGroups(NamedTuple):
    """New rows whose keys are those of rows read, row for row: their key groups, known."""

    table: pa.Table
    key_groups: Int64s


def keyed_target(
    source: Savepoint, operator: str, state: str, classpath: ClassFinder | None = None
) -> KeyedTarget | None:
    """The keyed state `state` of `operator` as its edit's tasks need it; None when it is
    operator state. A state statectl cannot write is a StatectlError naming it."""
    op = source.find_operator(operator)
    files = [f for f in entries.keyed_files(source, op) if state in f.header().state_names()]
    if not files:
        return None
    label = entries.operator_label(op)
    sources = tuple((f, chunk) for f in files for chunk in f.chunks(SPLIT_BYTES))
    target = KeyedTarget(label, state, op.max_parallelism, sources, classpath)
    try:
        target.encoder()  # what it refuses, it refuses now
    except FormatError as exc:
        raise StatectlError(f"state {state!r}: {exc.message}", label) from None
    return target


@dataclass(frozen=True)
class TaskRuns:
    """What one writing task made: its run file per subtask (by position), and the nulls it
    wrote into POJO fields of classes not read (class, field, rows)."""

    runs: dict[int, str]
    rows: int
    unchecked_nulls: tuple[tuple[str, str, int], ...]


@dataclass(frozen=True)
class RunsWriter:
    """Rows to sorted runs of chunks, one per target subtask, in a task (the Spark writer's):
    picklable, made on the driver by `runs_writer`."""

    target: KeyedTarget
    owner: tuple[int, ...]  # key group → subtask position

    def write(self, batches: Iterable[pa.RecordBatch], folder: Location, name: str) -> TaskRuns:
        """Encode `batches` and write their runs as `folder/name-sNNNNN.run`."""
        import pyarrow as pa

        spool = RunWriter()
        unchecked: Counter[tuple[str, str]] = Counter()
        rows = 0

        def tables() -> Iterator[pa.Table]:
            nonlocal rows
            for batch in batches:
                rows += batch.num_rows
                yield pa.Table.from_batches([batch])

        try:
            for key_group, seq, chunk in self.target.chunks(tables()):
                if key_group == NOTES:
                    unchecked.update({(p, n): c for p, n, c in json.loads(chunk)})
                else:
                    spool.add(self.owner[key_group], key_group, seq, chunk)
            runs = {}
            for subtask in spool.subtasks:
                run = folder.child(f"{name}-s{subtask:05d}.run")
                folder.fs.makedirs(folder.path, exist_ok=True)
                with folder.fs.open(run.path, "wb") as out:
                    spool.write_run(subtask, out)
                runs[subtask] = run.url
        finally:
            spool.close()
        notes = tuple((p, n, c) for (p, n), c in sorted(unchecked.items()))
        return TaskRuns(runs, rows, notes)


def runs_writer(
    source: Savepoint, operator: str, state: str, classpath: ClassFinder | None = None
) -> RunsWriter | None:
    """The writer of runs for keyed state `state` (None: operator state)."""
    target = keyed_target(source, operator, state, classpath)
    if target is None:
        return None
    op = source.find_operator(operator)
    owner = owners_of_files(entries.keyed_files(source, op), op.max_parallelism)
    return RunsWriter(target, tuple(owner))


def runs_edit(source: Savepoint, operator: str, state: str, tasks: Sequence[TaskRuns]) -> StateEdit:
    """The edit that makes the rows the tasks wrote as runs the state's entries."""
    target = keyed_target(source, operator, state)
    assert target is not None
    subtasks = len(entries.keyed_files(source, source.find_operator(operator)))
    runs = [[t.runs[n] for t in tasks if n in t.runs] for n in range(subtasks)]
    unchecked: Counter[tuple[str, str]] = Counter()
    for task in tasks:
        unchecked.update({(p, n): c for p, n, c in task.unchecked_nulls})
    notes = tuple((p, n, c) for (p, n), c in sorted(unchecked.items()))
    feed = RowFeed(target.describe_key, warnings=target.warnings, runs=runs, runs_notes=notes)
    return StateEdit(operator, state, REPLACE, feed=feed)


def function_edit(
    source: Savepoint,
    operator: str,
    state: str,
    function: BatchFunction,
    classpath: ClassFinder | None = None,
) -> StateEdit:
    """The edit that makes `function`'s results over the state's batches its entries, called
    batch by batch in the write's tasks (operator state, small and held whole by Flink too,
    is edited here)."""
    target = keyed_target(source, operator, state, classpath)
    if target is None:
        op = source.find_operator(operator)
        originals = _operator_batches(source, op, state, classpath)
        table = apply_function(function, originals)
        return _operator_replacement(source, op, state, table, classpath)
    feed = RowFeed(
        target.describe_key,
        target.sources,
        functools.partial(_function_chunks, target, function),
        warnings=target.warnings,
        source_bytes=_split_bytes,
    )
    return StateEdit(operator, state, REPLACE, feed=feed)


def sql_edit(
    source: Savepoint,
    operator: str,
    state: str,
    query: str,
    view: str,
    spark: Any,
    classpath: ClassFinder | None = None,
) -> StateEdit | None:
    """The edit that makes `query`'s result over the view `view` (the state's table, read by
    Spark's tasks) the state's entries; Spark's tasks encode the result, which never reaches
    this process. None for operator state (its table is small: query it whole)."""
    from statectl.execution.spark import chunk_frame, frame_of_sources, sql_frame

    target = keyed_target(source, operator, state, classpath)
    if target is None:
        return None
    frame = frame_of_sources(spark, target.sources, target.batches, target.codec.arrow_schema())
    result = sql_frame(spark, frame, view, query)
    chunks = chunk_frame(result, functools.partial(_frame_chunks, target))
    feed = RowFeed(target.describe_key, frame=chunks, warnings=target.warnings)
    return StateEdit(operator, state, REPLACE, feed=feed)


def frame_edit(
    source: Savepoint,
    operator: str,
    state: str,
    frame: Any,
    classpath: ClassFinder | None = None,
) -> StateEdit:
    """The edit that makes a Spark DataFrame's rows (the state's columns) the entries of keyed
    state `state`: the frame's own tasks encode them, Spark's shuffle routes them to the task
    writing their subtask, and no row reaches this process. Its columns are checked here, on
    no rows: one that does not fit the state is a StatectlError naming it."""
    from pyspark.sql.pandas.types import to_arrow_schema

    from statectl.execution.spark import chunk_frame

    target = keyed_target(source, operator, state, classpath)
    if target is None:
        raise StatectlError(
            f"state {state!r} is operator state: replace it with a table "
            "(a DataFrame's rows: `State.replace(frame.toArrow())`)",
            entries.operator_label(source.find_operator(operator)),
        )
    empty = to_arrow_schema(frame.schema, timezone="UTC").empty_table()
    replacement(source, operator, state, empty, classpath)  # refuses what does not fit
    chunks = chunk_frame(frame, functools.partial(_frame_chunks, target))
    feed = RowFeed(target.describe_key, frame=chunks, warnings=target.warnings)
    return StateEdit(operator, state, REPLACE, feed=feed)


def _frame_chunks(
    target: KeyedTarget, batches: Iterator[pa.RecordBatch], partition: int
) -> Iterator[Chunk]:
    import pyarrow as pa

    return target.chunks((pa.Table.from_batches([b]) for b in batches), partition << 32)


def _split_bytes(split: tuple[KeyedSource, tuple[int, int] | None]) -> int:
    file, key_groups = split
    return entries.source_bytes(file, key_groups)


def _function_chunks(
    target: KeyedTarget,
    function: BatchFunction,
    source: tuple[KeyedSource, tuple[int, int] | None],
) -> Iterator[Chunk]:
    spans: dict[int, BlockRuns] = {}
    results = (
        _with_groups(batch, call_function(function, batch), groups)
        for batch, groups in target.grouped_batches(source, spans)
    )
    yield from target.chunks(result for result in results if result is not None)
    # The runs of the blocks read: the task writing each block's subtask carries the other
    # states' runs by them, rather than find the entries of the block again.
    for key_group, (length, runs) in spans.items():
        yield key_group, SPANS, pack_spans(length, runs)


def _with_groups(
    batch: pa.RecordBatch, result: pa.Table | None, groups: Int64s | None
) -> pa.Table | KnownGroups | None:
    """The function's result, with its rows' key groups where its key column is the batch's."""
    if result is None or groups is None or not same_keys(batch, result):
        return result
    return KnownGroups(result, groups)


def same_keys(batch: pa.RecordBatch, result: pa.Table) -> bool:
    """Whether the result's key column is the batch's, row for row: the same Arrow buffers at
    the same offset, as a function that edits only values passes it through. Nested keys
    (a Tuple's, a Row's) are not compared: their children have offsets of their own."""
    import pyarrow as pa

    if result.num_rows != batch.num_rows or "key" not in result.column_names:
        return False
    chunks = result.column("key").chunks
    before = batch.column("key")
    if len(chunks) != 1 or pa.types.is_nested(before.type):
        return False
    after = chunks[0]
    return (
        after.type == before.type
        and after.offset == before.offset
        and _addresses(after) == _addresses(before)
    )


def _addresses(array: pa.Array) -> list[tuple[int, int] | None]:
    return [None if buffer is None else (buffer.address, buffer.size) for buffer in array.buffers()]


def call_function(function: BatchFunction, batch: pa.RecordBatch) -> pa.Table | None:
    """The function's result for one batch, as a table (None: no rows). What the function
    raises is its error: one line with its type, message, file and line."""
    import pyarrow as pa

    try:
        result = function(batch)
    except Exception as exc:  # the user's code: any error is theirs to see
        raise StatectlError(f"the function raised {_where(exc)}") from None
    if result is None or isinstance(result, pa.Table):
        return result
    if isinstance(result, pa.RecordBatch):
        return pa.Table.from_batches([result])
    raise StatectlError(
        f"the function returned {type(result).__name__}; expected a pyarrow RecordBatch, a "
        "Table or None"
    )


def _where(exc: Exception) -> str:
    """`Type: message (file:line)` of the innermost frame of the error's traceback."""
    import traceback

    frames = traceback.extract_tb(exc.__traceback__)
    place = f" ({frames[-1].filename}:{frames[-1].lineno})" if frames else ""
    return f"{type(exc).__name__}: {exc}{place}"


def _operator_batches(
    source: Savepoint, op: OperatorState, state: str, classpath: ClassFinder | None
) -> Iterator[pa.RecordBatch]:
    holders = [f for f in entries.operator_files(source, op) if _holds(f, state)]
    if not holders:
        raise StatectlError(f"operator {entries.operator_label(op)} has no state {state!r}")
    codec = tables.operator_state_codec(holders[0], state, classpath)
    for holder in holders:
        yield from tables.operator_batches(holder, state, codec)


def _tables(rows: Rows) -> Iterator[pa.Table]:
    """`rows` a table at a time (a batch as a table of one batch)."""
    import pyarrow as pa

    if isinstance(rows, pa.Table):
        yield rows
        return
    for part in rows:
        yield pa.Table.from_batches([part]) if isinstance(part, pa.RecordBatch) else part


def _one_table(rows: Rows) -> pa.Table:
    """Operator state (elements per subtask, held in memory by Flink too) as one table."""
    import pyarrow as pa

    parts = list(_tables(rows))
    if len(parts) == 1:
        return parts[0]
    if not parts:
        raise StatectlError("no batches were given: give a table (it may be empty) instead")
    return pa.concat_tables(parts)


def _operator_replacement(
    source: Savepoint,
    op: OperatorState,
    state: str,
    table: pa.Table,
    classpath: ClassFinder | None,
) -> StateEdit:
    label = entries.operator_label(op)
    holders = [f for f in entries.operator_files(source, op) if _holds(f, state)]
    if not holders:
        raise StatectlError(f"operator {label} has no state {state!r}", source.directory.url)
    codec = tables.operator_state_codec(holders[0], state, classpath)
    try:
        rows = encode_operator_rows(conform(table, codec), codec, op.parallelism)
    except FormatError as exc:
        raise StatectlError(f"state {state!r}: {exc.message}", label) from None
    originals = (b for f in holders for b in tables.operator_batches(f, state, codec))
    warnings = _null_warnings(label, state, rows.unchecked_nulls, originals, codec)
    return StateEdit(
        op.operator_id_hex, state, REPLACE, rows_count=rows.count, elements=rows.elements,
        broadcast=rows.broadcast, warnings=warnings,
    )  # fmt: skip


def _null_warnings(
    label: str,
    state: str,
    unchecked: UncheckedNulls,
    originals: Iterable[pa.RecordBatch],
    codec: StateCodec,
) -> tuple[str, ...]:
    """One line per POJO field given nulls that statectl could not check against its class,
    but for the fields where the state holds a null already: Flink wrote it, so the field
    takes one (the state is read again only when there are such nulls)."""
    if unchecked:
        boxed = pojo_fields_with_nulls(originals, codec, set(unchecked))
        unchecked = UncheckedNulls({k: v for k, v in unchecked.items() if k not in boxed})
    return tuple(
        f"{label}: state {state!r}: {rows} row{'s' if rows > 1 else ''} set field {name!r} of "
        f"{pojo} to null; statectl has not read that class: if the job declares the field a "
        "primitive, Flink cannot restore it (give the job's classes with --classpath to check)"
        for (pojo, name), rows in sorted(unchecked.items())
    )


def _holds(file: entries.OperatorFile, state: str) -> bool:
    return any(s.name == state for s in file.handle.states)


def load_function(spec: str) -> BatchFunction:
    """`MODULE:FUNCTION` (a module importable from the current directory or the path)."""
    module_name, sep, name = spec.partition(":")
    if not sep or not module_name or not name:
        raise StatectlError(f"expected MODULE:FUNCTION, got {spec!r}")
    import os
    import sys

    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise StatectlError(f"cannot import {module_name!r}: {exc}") from None
    function = getattr(module, name, None)
    if not callable(function):
        raise StatectlError(f"{module_name!r} has no function {name!r}")
    return function  # type: ignore[no-any-return]


def apply_function(function: BatchFunction, batches: Iterable[pa.RecordBatch]) -> pa.Table:
    """The function's results over every batch, as one table (None from a batch: no rows).
    Results whose columns cannot be merged (a key of another type in one batch) are the
    function's error, naming the batch and the column."""
    import pyarrow as pa

    results: list[tuple[int, pa.Table]] = []  # by the batch's number, from 1
    for number, batch in enumerate(batches, 1):
        result = call_function(function, batch)
        if result is not None:
            results.append((number, result))
    if not results:
        return pa.table({})
    try:
        return pa.concat_tables([r for _, r in results], promote_options="permissive")
    except (pa.ArrowTypeError, pa.ArrowInvalid):
        raise _unmergeable(results) from None


def _unmergeable(results: list[tuple[int, pa.Table]]) -> StatectlError:
    """Which batch's result first has a column whose type the results before it cannot take."""
    import pyarrow as pa

    merged = results[0][1].schema
    for number, result in results[1:]:
        for column in result.schema:
            index = merged.get_field_index(column.name)
            if index < 0:
                continue
            earlier = merged.field(index)
            try:
                pa.unify_schemas(
                    [pa.schema([earlier]), pa.schema([column])], promote_options="permissive"
                )
            except (pa.ArrowTypeError, pa.ArrowInvalid):
                return StatectlError(
                    f"the function's result for batch {number}: column {column.name!r} is "
                    f"{column.type}, where the batches before it gave {earlier.type}"
                )
        merged = pa.unify_schemas([merged, result.schema], promote_options="permissive")
    return StatectlError("the function's results for the batches cannot be merged")
