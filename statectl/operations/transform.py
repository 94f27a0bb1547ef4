"""Editing a keyed state as a table: read it, change it (Spark SQL or a Python function over
Arrow batches), and write the result back as the state's entries.

The state's table is the one every read gives (`savepoint.tables`, docs/values.md). The
result must have the same columns in the same types (Spark's narrower or wider encodings are
cast back where nothing is lost); its rows become the state's entries, each in the key group
of its key, so new keys land in the subtask that owns them and keys left out are removed.
The rest of the savepoint is carried over as `migrate` carries it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING

from statectl.errors import FormatError, StatectlError
from statectl.formats.java_types import key_type_for_snapshot
from statectl.formats.metadata import OperatorState
from statectl.formats.state_values import StateCodec
from statectl.operations.state_edits import REPLACE, StateEdit
from statectl.savepoint import entries, tables
from statectl.savepoint.model import Savepoint
from statectl.savepoint.table_rows import (
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
        result = function(batch)
        if result is None:
            continue
        if isinstance(result, pa.RecordBatch):
            result = pa.Table.from_batches([result])
        if not isinstance(result, pa.Table):
            raise StatectlError(
                f"the function returned {type(result).__name__}; expected a pyarrow "
                "RecordBatch, a Table or None"
            )
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
