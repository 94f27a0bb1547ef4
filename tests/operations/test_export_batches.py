"""The batch paths of the exports equal the per-entry paths on every canonical fixture: the JSON
export's rows (`_keyed_tables` against `_keyed_rows`) and the typed tables (one pass over a file,
`keyed_state_batches`, against a pass per state, `keyed_batches`)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from statectl.operations import export
from statectl.savepoint import entries, tables
from statectl.savepoint.reader import open_savepoint
from tests.conftest import FIXTURES

CANONICAL = sorted(
    p.parent
    for p in [
        *FIXTURES.glob("*/savepoint/_metadata"),
        *FIXTURES.glob("values/*/savepoint/_metadata"),
    ]
    if "native" not in p.parts[-3] and "checkpoint" not in p.parts[-3]
)


def keyed_files(savepoint: Path) -> list[entries.KeyedFile]:
    sp = open_savepoint(str(savepoint))
    found = [f for op in sp.operators for f in entries.keyed_files(sp, op)]
    return [f for f in found if isinstance(f, entries.KeyedFile)]


@pytest.mark.parametrize("savepoint", CANONICAL, ids=lambda p: p.parent.name)
def test_json_rows_equal(savepoint: Path) -> None:
    for file in keyed_files(savepoint):
        expected = [row._asdict() for row in export._keyed_rows(file, None, None)]
        got = []
        for item in export._keyed_tables(file, None, None):
            got += item.to_pylist() if isinstance(item, pa.Table) else [item._asdict()]
        assert got == expected


@pytest.mark.parametrize("savepoint", CANONICAL, ids=lambda p: p.parent.name)
def test_typed_tables_equal(savepoint: Path) -> None:
    for file in keyed_files(savepoint):
        codecs = entries.codecs_for(file.header(), file.flink_major)
        raws: dict[str, tables.RawTally] = {}
        one_pass: dict[str, list[pa.Table]] = {name: [] for name in codecs}
        for name, batch in tables.keyed_state_batches(file, codecs, None, raws):
            one_pass[name].append(batch)
        for name, codec in codecs.items():
            raw = tables.RawTally()
            per_state = list(tables.keyed_batches(file, name, codec, None, raw))
            schema = codec.arrow_schema()
            want = pa.Table.from_batches(per_state, schema)
            got = pa.Table.from_batches([b for t in one_pass[name] for b in t.to_batches()], schema)
            assert _values(got) == _values(want), name
            assert raws.get(name, tables.RawTally()).rows == raw.rows
            assert raws.get(name, tables.RawTally()).first_reason == raw.first_reason


def _values(table: pa.Table) -> list[dict[str, Any]]:
    """Rows with NaN made comparable (Arrow's `equals` holds NaN unequal to itself)."""
    return [_nan_free(row) for row in table.to_pylist()]


def _nan_free(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    if isinstance(value, dict):
        return {k: _nan_free(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_nan_free(v) for v in value]
    return value


def test_the_fixtures_take_the_batch_path() -> None:
    """Some states of the values fixtures are read in batches (else the tests above prove
    nothing about them)."""
    (values,) = [p for p in CANONICAL if p.parent.name == "2.3.0-hashmap-canonical"]
    codecs = [
        codec
        for file in keyed_files(values)
        for codec in entries.codecs_for(file.header(), file.flink_major).values()
    ]
    assert sum(tables.readers_for(codec) is not None for codec in codecs) >= 10
