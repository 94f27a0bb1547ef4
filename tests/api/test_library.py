"""The public API: `statectl.open(...)` reads every state of the real-Flink values fixtures
equal to what Flink's own serializers read (the state dumper's truth), and `import statectl`
stays light."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import statectl
from tests.operations.test_values_truth import (
    FIXTURES,
    MAY_STAY_RAW,
    VALUES,
    compare,
    lines_of_typed_tables,
    state_kinds,
)


def open_fixture(fixture: str) -> statectl.Savepoint:
    return statectl.open(str(VALUES / fixture / "savepoint"))


@pytest.mark.parametrize("fixture", FIXTURES)
def test_every_state_reads_as_flink_wrote_it(fixture: str) -> None:
    sp = open_fixture(fixture)
    tables = {
        (op.id, state.name): (state.to_arrow(), MAY_STAY_RAW.get(state.name))
        for op in sp.operators
        for state in op.states
    }
    lines = lines_of_typed_tables(tables, state_kinds(fixture))
    compare(fixture, lines, unordered_lists=True, broadcast_once=True)


def test_savepoint_operators_and_states() -> None:
    sp = open_fixture("2.3.0-hashmap-canonical")
    assert sp.metadata_version == 6 and sp.checkpoint_id == 1
    assert {op.uid for op in sp.operators} == {"src", "values", "window", "opstate"}
    op = sp.operator("values")
    assert op.parallelism == 2 and op.max_parallelism == 128 and len(op.id) == 32
    state = op.state("ttl-map")
    assert (state.scope, state.kind, state.type) == ("keyed", "MAP", "MAP<STRING, BIGINT>, TTL")
    assert state.schema.names == ["key", "namespace", "user_key", "value", "ttl_timestamp"]
    assert state.type_tree is not None and state.type_tree["ttl"] is True
    assert sp.operator("opstate").state("op-union").schema.names == ["subtask", "value"]
    frame = op.state("long").to_pandas()
    assert len(frame) == 16 and list(frame.columns) == ["key", "namespace", "value"]
    reader = op.state("pojo").read()
    assert sum(batch.num_rows for batch in reader) == 16


def test_errors_are_statectl_errors() -> None:
    sp = open_fixture("2.3.0-hashmap-canonical")
    with pytest.raises(statectl.StatectlError, match="unknown operator 'nope'"):
        sp.operator("nope")
    with pytest.raises(statectl.StatectlError, match="unknown state 'nope'; known states: "):
        sp.operator("values").state("nope")
    with pytest.raises(statectl.StatectlError, match="not a savepoint"):
        statectl.open(str(Path(__file__).parent))


def test_operations_return_the_reports_the_cli_renders(tmp_path: Path) -> None:
    sp = open_fixture("2.3.0-hashmap-canonical")
    assert statectl.verify(sp, deep=True).ok
    report = statectl.export(sp, str(tmp_path / "x"), state="pojo", typed=True)
    assert report.rows == 16
    assert statectl.diff(sp, str(VALUES / "2.3.0-hashmap-canonical" / "savepoint")).identical
    migrated = statectl.migrate(sp, str(tmp_path / "m"), drops=["window"])
    assert "window" not in {op.uid for op in statectl.open(migrated.destination).operators}
    assert [(s.uid, s.kind) for s in sp.positions().sources] == [("src", None)]  # a custom source
    assert [o.uid for o in statectl.plan(sp, "values", [1, 2]).operators] == ["values"]


def test_import_statectl_loads_nothing_heavy() -> None:
    code = (
        "import sys, statectl; "
        "print(sorted(m for m in ('pyspark', 'rocksdict', 'typer', 'rich', 'pyarrow') "
        "if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-X", "importtime", "-c", code], capture_output=True, text=True, check=True)  # fmt: skip
    assert done.stdout.strip() == "[]"
    imported = {line.split("|")[-1].strip() for line in done.stderr.splitlines() if "|" in line}
    assert not {m for m in imported if m.split(".")[0] in ("pyspark", "rocksdict", "typer", "rich")}


@pytest.mark.parametrize("fixture", ["2.3.0-hashmap-canonical", "2.3.0-rocksdb-native"])
def test_batch_decoded_reads_never_import_pandas(tmp_path: Path, fixture: str) -> None:
    """Arrays are built from buffers: pyarrow converting numpy or Python values imports pandas
    to check for its types, 0.3 CPU-seconds and 50 MiB of a read or a typed export that never
    uses it. RocksDB's rows are joined into arrays, not converted. (Per-entry decoding builds
    arrays from Python lists and still does.)"""
    savepoint = VALUES / fixture / "savepoint"
    states = ["string", "tuple2", "ttl-value", "ttl-map", "reducing"]
    code = (
        "import sys, statectl; "
        f"op = statectl.open({str(savepoint)!r}).operator('values'); "
        f"rows = sum(len(op.state(name).to_arrow()) for name in {states!r}); "
        f"statectl.export(op.savepoint, {str(tmp_path / 'typed')!r}, state='ttl-map', typed=True); "
        "print(rows, 'pandas' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == [str(16 * len(states)), "False"], done.stderr
