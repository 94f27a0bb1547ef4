"""`verify --deep` counts the rows of a RocksDB instance outside its handle's key-group range."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

from statectl.formats.handles import IncrementalKeyedHandle
from statectl.formats.metadata import read_metadata, write_metadata
from tests.conftest import fixture_savepoint, run_cli


def _narrowed(tmp_path: Path, second: tuple[int, int] = (32, 96)) -> Path:
    """rocksdb_native_full with subtask 0 of keyed-str claiming key groups 0–31 (its instance
    holds 0–63) and subtask 1 claiming `second` (start, count), by default 32–127: the layout a
    rescale in Flink leaves."""
    copy = tmp_path / "narrowed"
    shutil.copytree(fixture_savepoint("rocksdb_native_full"), copy)
    metadata = read_metadata((copy / "_metadata").read_bytes())
    operators = []
    for op in metadata.operators:
        if op.uid == "keyed-str":
            subtasks = []
            for subtask in op.subtasks or ():
                handle = subtask.managed_keyed_state
                assert isinstance(handle, IncrementalKeyedHandle)
                start, count = (0, 32) if subtask.index == 0 else second
                handle = dataclasses.replace(handle, start_key_group=start, num_key_groups=count)
                subtasks.append(dataclasses.replace(subtask, managed_keyed_state=handle))
            op = dataclasses.replace(op, subtasks=tuple(subtasks))
        operators.append(op)
    metadata = dataclasses.replace(metadata, operators=tuple(operators))
    (copy / "_metadata").write_bytes(write_metadata(metadata))
    return copy


def test_rows_outside_an_instances_key_groups_are_counted(tmp_path: Path) -> None:
    """33: the rows of the instance's CFs with a first byte in 32–63, counted by a full scan."""
    code, out, err = run_cli("verify", "--deep", str(_narrowed(tmp_path)), "--json")
    assert (code, err) == (0, ""), out
    notes = json.loads(out)["notes"]
    assert notes == [
        "keyed-str: RocksDB instance a65bcde3-1c94-4d97-90aa-e500e72043e1: "
        "33 rows outside its key groups 0–31 (left by a rescale in Flink, which skips them on "
        "restore)"
    ]


def test_flinks_own_savepoint_has_no_rows_outside() -> None:
    code, out, _ = run_cli(
        "verify", "--deep", str(fixture_savepoint("rocksdb_native_full")), "--json"
    )
    assert code == 0
    assert json.loads(out)["notes"] == []
