"""Row encoding throughput: rows per second per core of `RowEncoder.batch` (a value edit's
write path: a state's Arrow rows back to packed entries by key group).

Usage: python -m bench.encode [--rows 1000000] [--batch 65536] [--per-row]

Times, on one core in this process, `RowEncoder.batch` over batches of `--batch` rows for
(STRING key, BIGINT value) and (STRING key, LIST<STRING> value) VALUE/LIST states (keys
"user-<n>", VoidNamespace, max parallelism 128), CPU seconds. `--per-row` times the per-row
reference path instead of the vectorised one.
"""

from __future__ import annotations

import argparse
import time

import pyarrow as pa

from statectl.formats.java_types import KEY_TYPES
from statectl.formats.state_values import StateCodec
from statectl.formats.values import scalars
from statectl.savepoint.table_rows import RowEncoder

STRING_KEY = KEY_TYPES["org.apache.flink.api.common.typeutils.base.StringSerializer"]
CASES = {
    "STRING key, BIGINT value": StateCodec(
        "VALUE", True, scalars.STRING, scalars.VOID, None, scalars.LONG
    ),
    "STRING key, LIST<STRING> value": StateCodec(
        "LIST", True, scalars.STRING, scalars.VOID, None, scalars.STRING
    ),
}


def table(codec: StateCodec, rows: int) -> pa.Table:
    keys = pa.array([f"user-{n}" for n in range(rows)])
    if codec.kind == "LIST":
        values = pa.array([[f"event-{n}", f"page-{n % 97}", "x"] for n in range(rows)])
    else:
        values = pa.array(range(0, rows * 7, 7), pa.int64())
    namespace = pa.nulls(rows)
    return pa.Table.from_arrays([keys, namespace, values], schema=codec.arrow_schema())


def time_case(codec: StateCodec, rows: int, batch: int, per_row: bool) -> float:
    """Rows per CPU second."""
    data = table(codec, rows)
    encoder = RowEncoder(codec, STRING_KEY, 128)
    if per_row:
        encoder._fast = None
    batches = data.to_batches(max_chunksize=batch)
    start = time.process_time()
    count, first = 0, 0
    for item in batches:
        count += encoder.batch(item, first).count
        first += item.num_rows
    elapsed = time.process_time() - start
    assert count == rows
    return rows / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=65536)
    parser.add_argument("--per-row", action="store_true")
    args = parser.parse_args()
    path = "per-row" if args.per_row else "fast"
    for name, codec in CASES.items():
        rate = time_case(codec, args.rows, args.batch, args.per_row)
        print(f"{name:34} {path:8} {args.rows:>9} rows  {rate:>12,.0f} rows/s")


if __name__ == "__main__":
    main()
