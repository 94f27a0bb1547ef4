"""A replaced state's rows gathered with bounded memory (`spilled_rows`, `State.replace` with
batches): rows past the run size go to sorted runs on local disk, merged by key group; the
written savepoint is the same, byte for byte, as from one table held in memory."""

from __future__ import annotations

import gc
import random
from pathlib import Path

import pyarrow as pa
import pytest

import statectl
from statectl.errors import FormatError
from statectl.savepoint import spilled_rows
from statectl.savepoint.spilled_rows import RowSpill
from tests.conftest import FIXTURES, checksums

SOURCE = FIXTURES / "values" / "2.3.0-hashmap-canonical" / "savepoint"


def records(count: int, seed: int = 7) -> list[tuple[int, bytes, bytes]]:
    rng = random.Random(seed)
    keys = rng.sample(range(1 << 30), count)
    return [(k % 128, k.to_bytes(4, "big"), rng.randbytes(rng.randrange(0, 40))) for k in keys]


def gathered(rows: list[tuple[int, bytes, bytes]], run_bytes: int) -> RowSpill:
    spill = RowSpill(run_bytes)
    for record in rows:
        spill.add(*record)
    return spill


@pytest.mark.parametrize("run_bytes", [1 << 30, 4096], ids=["in-memory", "spilled"])
def test_rows_come_back_by_key_group_sorted(
    run_bytes: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STATECTL_LOCAL_DIR", str(tmp_path))
    rows = records(5000)
    spill = gathered(rows, run_bytes)
    result = spill.finish(str)
    expected: dict[int, list[tuple[bytes, bytes]]] = {}
    for key_group, key, value in sorted(rows):
        expected.setdefault(key_group, []).append((key, value))
    assert {kg: list(result[kg]) for kg in result} == expected
    assert result.count == 5000 and list(result) == sorted(expected)
    spilled = list(tmp_path.iterdir())
    assert len(spilled) == (run_bytes < 1 << 30)  # a folder only once a run went to disk
    del spill, result
    gc.collect()
    assert list(tmp_path.iterdir()) == []  # removed with the rows read from it


@pytest.mark.parametrize("run_bytes", [1 << 30, 4096], ids=["in-memory", "spilled"])
def test_a_key_given_twice_is_refused(
    run_bytes: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STATECTL_LOCAL_DIR", str(tmp_path))
    rows = records(3000)
    rows.append((rows[10][0], rows[10][1], b"other value"))  # in another run than the first
    with pytest.raises(FormatError, match=f"^{rows[10][1].hex()} appears more than once$"):
        gathered(rows, run_bytes).finish(bytes.hex)
    gc.collect()
    assert list(tmp_path.iterdir()) == []


def _edit(table: pa.Table) -> pa.Table:
    """Every value halved, one key left out, one added."""
    rows = table.to_pylist()
    edited = [{**row, "value": row["value"] // 2} for row in rows[1:]]
    edited.append({**rows[0], "key": "added-by-statectl", "value": 7})
    return pa.Table.from_pylist(edited, schema=table.schema)


def test_a_replace_from_batches_writes_what_a_table_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Batches from a `RecordBatchReader`, spilled in runs of 1 KiB, against the same rows as
    one table: the written savepoints' files are byte-identical, and read back as the edit."""
    monkeypatch.setattr(spilled_rows, "RUN_BYTES", 1024)
    table = _edit(statectl.open(str(SOURCE)).operator("values").state("long").to_arrow())
    assert table.num_rows > 10  # a run holds about 8 of its rows: two runs or more

    from_table = statectl.open(str(SOURCE))
    from_table.operator("values").state("long").replace(table)
    from_table.write(str(tmp_path / "from-table"))

    from_batches = statectl.open(str(SOURCE))
    reader = pa.RecordBatchReader.from_batches(table.schema, table.to_batches(max_chunksize=3))
    from_batches.operator("values").state("long").replace(reader)
    report = from_batches.write(str(tmp_path / "from-batches"))

    assert checksums(tmp_path / "from-table") == checksums(tmp_path / "from-batches")
    assert [r.rows for r in report.states] == [table.num_rows]
    written = statectl.open(str(tmp_path / "from-batches")).operator("values").state("long")
    assert sorted(written.to_arrow().to_pylist(), key=str) == sorted(table.to_pylist(), key=str)


def test_a_row_that_does_not_fit_is_named_across_batches() -> None:
    state = statectl.open(str(SOURCE)).operator("values").state("long")
    table = state.to_arrow()
    rows = table.to_pylist()
    rows[5]["key"] = None
    batches = pa.Table.from_pylist(rows, schema=table.schema).to_batches(max_chunksize=2)
    with pytest.raises(statectl.StatectlError, match="row 5: key is null"):
        state.replace(iter(batches))
    assert not state.operator.savepoint._edits
