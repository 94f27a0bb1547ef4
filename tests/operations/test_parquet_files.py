"""The exports' Parquet writer keeps dictionaries only for columns whose values repeat."""

from __future__ import annotations

import io

import pyarrow as pa
import pyarrow.parquet as pq

from statectl.operations import parquet_files


def _encodings(table: pa.Table) -> dict[str, tuple[str, ...]]:
    sink = io.BytesIO()
    with parquet_files.writer(sink, table.schema, table) as writer:
        writer.write_table(table)
    group = pq.ParquetFile(io.BytesIO(sink.getvalue())).metadata.row_group(0)
    columns = (group.column(i) for i in range(group.num_columns))
    return {c.path_in_schema: c.encodings for c in columns}


def test_repeating_leaves_keep_a_dictionary_and_distinct_ones_are_plain() -> None:
    rows = 1000
    table = pa.table(
        {
            "key": pa.array(range(rows), pa.int64()),
            "value": pa.array(
                [{"city": ["Oslo", "Rome"][i % 2], "name": f"user-{i}"} for i in range(rows)]
            ),
            "tags": pa.array([[f"t{i % 3}"] for i in range(rows)]),
            "attrs": pa.array(
                [[(f"k{i}", i % 2)] for i in range(rows)], pa.map_(pa.string(), pa.int8())
            ),
            "flag": pa.array([i % 2 == 0 for i in range(rows)]),
        }
    )
    encodings = _encodings(table)
    dictionary = {path for path, kinds in encodings.items() if "RLE_DICTIONARY" in kinds}
    assert dictionary == {"value.city", "tags.list.element", "attrs.key_value.value"}
    assert parquet_files.dictionary_columns(table) == sorted(dictionary, key=list(encodings).index)


def test_an_all_null_sample_and_an_extension_column_are_written() -> None:
    table = pa.table(
        {
            "reason": pa.nulls(10, pa.string()),
            "doc": pa.ExtensionArray.from_storage(pa.json_(), pa.array(['{"a": 1}'] * 10)),
        }
    )
    assert "RLE_DICTIONARY" in _encodings(table)["doc"]
    assert parquet_files.dictionary_columns(table) == ["reason", "doc"]


def test_statistics_are_left_out_only_where_asked() -> None:
    table = pa.table(
        {
            "key": pa.array([b"\x01", b"\x02"]),
            "value": pa.array([{"q": 1, "tags": ["a"]}, {"q": 2, "tags": ["b"]}]),
            "value_json": pa.array(['{"q": 1}', '{"q": 2}']),
        }
    )
    sink = io.BytesIO()
    with parquet_files.writer(sink, table.schema, table, ("key", "value_json")) as writer:
        writer.write_table(table)
    group = pq.ParquetFile(io.BytesIO(sink.getvalue())).metadata.row_group(0)
    columns = (group.column(i) for i in range(group.num_columns))
    stats = {c.path_in_schema: c.is_stats_set for c in columns}
    assert stats == {
        "key": False,
        "value.q": True,
        "value.tags.list.element": True,
        "value_json": False,
    }
