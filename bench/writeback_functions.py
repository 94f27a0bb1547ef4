"""The `transform --python` functions `bench.writeback` times (`bench.writeback_functions:NAME`):
small on purpose, so the command's own work is what is measured."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc


def identity(batch: pa.RecordBatch) -> pa.RecordBatch:
    return batch


def plus_one(batch: pa.RecordBatch) -> pa.RecordBatch:
    """`value + 1` of a BIGINT VALUE state."""
    index = batch.schema.get_field_index("value")
    return batch.set_column(index, "value", pc.add(batch.column(index), 1))


def delete_half(batch: pa.RecordBatch) -> pa.RecordBatch:
    """The keys whose last digit is 0–4 kept: half of the benchmark's keys, in every key group."""
    last = pc.utf8_slice_codeunits(batch.column("key"), -1)
    return batch.filter(pc.less(last, "5"))
