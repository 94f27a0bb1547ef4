"""Parquet writing shared by the exports: zstd, with dictionaries only where values repeat.

Arrow dictionary-encodes every column by default. A column of mostly distinct values (keys, ids,
names, JSON text) then builds a dictionary until it outgrows its page limit and falls back to
plain pages: measured on 10 M POJO values, that doubled the CPU time of writing them and made the
file larger than zstd over plain pages. So the first rows a writer gets choose: a column whose
sample holds few distinct values (a city, an enum, a state's name) keeps its dictionary, the
others are written plain.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

COMPRESSION = "zstd"
SAMPLE_ROWS = 1 << 14
REPEATING = 0.1  # at most this many distinct values per value sampled: a dictionary pays


def writer(
    sink: Any,
    schema: pa.Schema,
    first: pa.Table | pa.RecordBatch,
    no_statistics: tuple[str, ...] = (),
) -> pq.ParquetWriter:
    """A Parquet writer of `schema` into `sink`, its dictionaries chosen by `first`'s rows;
    min/max statistics for every column but `no_statistics` (long texts and raw bytes, which
    no reader prunes by and whose comparisons cost a tenth of the writing)."""
    chosen = dictionary_columns(first.slice(0, SAMPLE_ROWS))
    statistics: bool | list[str] = True
    if no_statistics:
        statistics = [
            path
            for field in schema
            if field.name not in no_statistics
            for path in _leaf_paths(field.name, field.type)
        ]
    return pq.ParquetWriter(
        sink,
        schema,
        compression=COMPRESSION,
        use_dictionary=chosen,
        write_statistics=statistics,
    )


def dictionary_columns(sample: pa.Table | pa.RecordBatch) -> list[str]:
    """The Parquet paths of the leaf columns whose sampled values repeat enough."""
    if sample.num_rows == 0:  # an empty state's part: nothing to choose by
        return []
    chosen: list[str] = []
    for name, column in zip(sample.schema.names, sample.columns, strict=True):
        array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
        chosen += [path for path, leaf in _leaves(name, array) if _repeats(leaf)]
    return chosen


def _leaves(path: str, array: pa.Array) -> list[tuple[str, pa.Array]]:
    """(Parquet column path, values) of every leaf under `array` (Arrow's naming of nested
    columns: `a.b` in a struct, `a.list.element`, `a.key_value.key` and `.value`)."""
    if isinstance(array, pa.ExtensionArray):  # JSON text, UUIDs: stored as their storage
        array = array.storage
    kind = array.type
    if pa.types.is_struct(kind):
        return [
            leaf
            for i in range(kind.num_fields)
            for leaf in _leaves(f"{path}.{kind.field(i).name}", array.field(i))
        ]
    if pa.types.is_map(kind):
        return [
            *_leaves(f"{path}.key_value.key", array.keys),
            *_leaves(f"{path}.key_value.value", array.items),
        ]
    if pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind):
        return _leaves(f"{path}.list.element", array.flatten())
    return [(path, array)]


def _leaf_paths(path: str, kind: pa.DataType) -> list[str]:
    """The Parquet column paths under a field of type `kind` (named as `_leaves` names them)."""
    if isinstance(kind, pa.BaseExtensionType):
        kind = kind.storage_type
    if pa.types.is_struct(kind):
        return [p for f in kind for p in _leaf_paths(f"{path}.{f.name}", f.type)]
    if pa.types.is_map(kind):
        return [
            *_leaf_paths(f"{path}.key_value.key", kind.key_type),
            *_leaf_paths(f"{path}.key_value.value", kind.item_type),
        ]
    if pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind):
        return _leaf_paths(f"{path}.list.element", kind.value_type)
    return [path]


def _repeats(values: pa.Array) -> bool:
    if pa.types.is_null(values.type) or pa.types.is_boolean(values.type):
        return False
    present = len(values) - values.null_count
    if present == 0:
        return True
    try:
        distinct = pc.count_distinct(values).as_py()
    except pa.ArrowNotImplementedError:  # a type Arrow cannot count: written plain
        return False
    return bool(distinct <= REPEATING * present)
