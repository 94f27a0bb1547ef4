"""`memory://` savepoints: fsspec's in-memory filesystem lives in one process, which Spark's
workers are not, so rescale, convert, diff --spark and export --spark do that work in-process.
Their output must equal, byte for byte, what the Spark job writes from a local copy (outputs
that real Flink restores in tests/rescale/test_rescale_e2e.py, test_native_e2e.py and
test_rekey_e2e.py).
"""

from __future__ import annotations

import io
import uuid
from pathlib import Path

import fsspec
import pyarrow.parquet as pq
import pytest

from tests.conftest import files_under, fixture_savepoint
from tests.conftest import run_cli as cli

pytestmark = pytest.mark.spark

MEMORY = fsspec.filesystem("memory")


def upload(local: Path) -> str:
    """A copy of a local savepoint folder in memory://; returns its URL."""
    root = f"memory://statectl-tests/{uuid.uuid4().hex}/{local.name}"
    for path in local.rglob("*"):
        if path.is_file():
            MEMORY.pipe(f"{root}/{path.relative_to(local).as_posix()}", path.read_bytes())
    return root


@pytest.mark.parametrize(
    ("fixture", "args"),
    [
        ("hashmap_canonical_files", ("rescale", "-p", "3")),
        ("hashmap_compressed", ("rescale", "-p", "1")),
        ("hashmap_canonical_files", ("rescale", "--max-parallelism", "256", "-p", "3")),
        ("rocksdb_native_full", ("rescale", "-p", "3", "--format", "canonical")),
        ("rocksdb_native_incremental", ("convert",)),
    ],
)
def test_memory_output_equals_the_spark_jobs_output(
    spark: object, tmp_path: Path, fixture: str, args: tuple[str, ...]
) -> None:
    source = fixture_savepoint(fixture)
    command, *options = args
    code, _, err = cli(command, str(source), "-o", str(tmp_path / "local"), *options)
    assert code == 0, err
    in_memory = upload(source)
    output = f"{in_memory}-out"
    code, _, err = cli(command, in_memory, "-o", output, *options, "--json")
    assert code == 0, err
    written = files_under(output)
    assert "_metadata" in written
    assert written == files_under(tmp_path / "local")
    assert files_under(in_memory) == files_under(source)  # the input untouched


def test_diff_and_export_with_spark_run_in_process(spark: object, tmp_path: Path) -> None:
    source = fixture_savepoint("hashmap_canonical_files")
    in_memory = upload(source)
    rescaled = f"{in_memory}-p3"
    assert cli("rescale", in_memory, "-o", rescaled, "-p", "3", "--json")[0] == 0
    code, out, err = cli("diff", in_memory, rescaled, "--spark")
    assert (code, err) == (0, ""), out
    assert out.strip().endswith("identical (13 states compared)")
    code, _, err = cli("export", str(source), "-o", str(tmp_path / "local.parquet"))
    assert code == 0, err
    code, _, err = cli("export", in_memory, "-o", f"{in_memory}-export/", "--spark")
    assert code == 0, err
    parts = [
        pq.read_table(io.BytesIO(data)) for data in files_under(f"{in_memory}-export").values()
    ]
    local = pq.read_table(tmp_path / "local.parquet")
    key = ["operator", "state", "key", "namespace", "user_key", "value"]

    def rows(tables: list) -> list[tuple]:
        return sorted(
            tuple(map(str, r.values())) for t in tables for r in t.select(key).to_pylist()
        )

    assert local.num_rows > 0
    assert rows(parts) == rows([local])  # the local export's rows are checked in test_export
