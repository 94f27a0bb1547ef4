"""Value edits of a state larger than Spark's memory: `transform --sql` and the Spark writer
each run on an embedded Spark whose JVM heap (`spark.driver.memory`) and Python workers' aggregation memory
(`spark.python.worker.memory`) are smaller than the state, and write it back whole.

The savepoint is `bench.synthetic`'s (the `keyed-str` operator of a real Flink 2.3 fixture,
its `_metadata` and serializer header, key-group blocks multiplied by statectl's writer);
every output is restored by real Flink (all of its state deserialized by the hashmap backend,
not dumped: the dump of a state this size would dwarf the test), and read back by statectl,
split by split against the input, entry by entry: the edited state holds exactly the edit,
every other state exactly what it held. `upgrade` at size (the engine path `migrate --ttl`
takes too): test_upgrade_at_size.py.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import statectl
from bench import synthetic
from tests.conftest import REPO

pytestmark = [pytest.mark.spark, pytest.mark.flink]

STATE_BYTES = 136 << 20
SMALL_SPARK = {
    # The JVM's heap, below the state's size. Spark sizes its memory for execution and
    # caching from what it believes the heap is (less 300 MiB it reserves, and refuses a heap
    # under 450 MiB): it is told the truth, reserving nothing, so it spills what does not fit.
    "spark.driver.memory": "128m",
    "spark.testing.memory": str(128 << 20),
    "spark.testing.reservedMemory": "0",
    "spark.python.worker.memory": "16m",
    "spark.ui.enabled": "false",
}
OPERATOR = "keyed-str"


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Iterator[synthetic.Built]:
    params = synthetic.Params(STATE_BYTES, parallelism=3, max_parallelism=256, list_elements=4)
    built = synthetic.ensure(params, tmp_path_factory.mktemp("at-size"))
    assert built.bytes > 128 << 20
    yield built
    shutil.rmtree(built.path, ignore_errors=True)


def tables_by_split(path: Path, state: str) -> Iterator[pa.Table]:
    """A state's rows, one subtask's key-group range at a time, sorted for comparison."""
    target = statectl.open(str(path)).operator(OPERATOR).state(state)
    for split in target.splits(split_bytes=1 << 62):
        table = pa.Table.from_batches(list(statectl.api.read_split(split)), target.schema)
        keys = [c for c in ("key", "namespace", "user_key", "timestamp") if c in table.column_names]
        yield table.sort_by([(k, "ascending") for k in keys])


def assert_states(
    source: Path, outputs: Sequence[Path], edited: str, expect: Callable[[pa.Table], pa.Table]
) -> None:
    """Every state of the operator in each of `outputs` as in `source`, but `edited`, which is
    `expect` of it (the source is read once for all outputs)."""
    for state in ("cnt", "mp", "lst", "_timer_state/processing_user-timers"):
        splits = [tables_by_split(path, state) for path in (source, *outputs)]
        for before, *afters in zip(*splits, strict=True):
            wanted = expect(before) if state == edited else before
            for after in afters:
                assert after.num_rows == wanted.num_rows, state
                assert after.equals(wanted), state


def plus_one(table: pa.Table) -> pa.Table:
    return table.set_column(2, "value", pc.add(table.column("value"), 1))


def run_on_small_spark(body: str) -> None:
    """`body` (Python, indented as a test's f-string is) in a child process whose `spark` is a
    local[2] SparkSession of the small sizes above, with `statectl` and `statectl.spark`
    imported; it must exit 0."""
    setup = f"""
        from pyspark.sql import SparkSession
        import statectl, statectl.spark
        builder = SparkSession.builder.master("local[2]")
        for key, value in {SMALL_SPARK!r}.items():
            builder = builder.config(key, value)
        spark = builder.getOrCreate()
        """
    script = textwrap.dedent(setup) + textwrap.dedent(body)
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=900, cwd=REPO,
        env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]


def test_a_transform_and_a_spark_writer_write_back_a_state_larger_than_spark_s_memory(
    source: synthetic.Built, tmp_path: Path
) -> None:
    """One child process, one Spark JVM of the small sizes above, for both writes."""
    from tests.flink import harness

    edited, written = tmp_path / "transformed", tmp_path / "written"
    run_on_small_spark(
        f"""
        source = {str(source.path)!r}
        statectl.transform(source, {str(edited)!r}, {OPERATOR!r}, "cnt",
                           sql="SELECT key, namespace, value + 1 AS value FROM state")

        statectl.spark.register(spark)
        frame = (spark.read.format("flink-state")
                 .options(path=source, operator={OPERATOR!r}, state="cnt").load())
        (frame.selectExpr("key", "namespace", "value + 1 AS value")
            .write.format("flink-state").mode("overwrite")
            .options(source=source, operator={OPERATOR!r}, state="cnt")
            .save({str(written)!r}))
        """
    )

    restored = harness.restore_check(
        [harness.RestoreRequest(path, 3, dump=False) for path in (edited, written)]
    )
    assert [r["error"] for r in restored] == [None, None]
    assert all(r["ok"] for r in restored)
    assert_states(source.path, [edited, written], "cnt", plus_one)
