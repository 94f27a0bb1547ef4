"""Retained checkpoints taken with file merging on (FLIP-306), written by real Flink 2.3.

RocksDB (incremental): SST, MANIFEST and meta files live as segments of shared physical files,
and operators without operator state get empty segments. verify --deep walks it; convert,
rescale and migrate copy each segment out, and Flink restores every output with exactly the
state the job wrote. The hashmap backend's checkpoints are in its own format (not canonical
blocks): verify --deep reads it from its segments; rescale and convert write it as canonical
blocks, and migrate, which only copies state files, renames its operators: Flink restores all of
them.
"""

from __future__ import annotations

from typing import Any

import pytest

from statectl.formats.handles import (
    EmptySegmentFileHandle,
    IncrementalKeyedHandle,
    SegmentFileHandle,
)
from statectl.formats.metadata import read_metadata
from tests.conftest import run_cli as cli
from tests.flink import harness
from tests.flink.harness import RestoreRequest

pytestmark = [pytest.mark.flink, pytest.mark.spark]

RENAME = {"keyed-str": "ks"}
RESTORES = [
    "convert-hashmap",
    "convert-rocksdb",
    "p3",
    "migrate",
    "migrate-hashmap",
    "migrate-hashmap-p3",
    "hashmap-p3",
    "hashmap-convert",
]


@pytest.fixture(scope="module")
def outcome(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("file-merging")
    specs = {
        "rocksdb": harness.fixture_spec(
            root / "rocksdb", backend="rocksdb", incremental=True, mode="checkpoint",
            file_merging=True,
        ),
        "hashmap": harness.fixture_spec(root / "hashmap", mode="checkpoint", file_merging=True),
    }  # fmt: skip
    harness.write_fixtures(list(specs.values()))
    checkpoints = {kind: harness.checkpoint_in_place(root / kind) for kind in specs}
    rocksdb, hashmap, out = str(checkpoints["rocksdb"]), str(checkpoints["hashmap"]), root / "out"
    runs = {
        "convert": cli("convert", rocksdb, "-o", str(out / "convert"), "--json"),
        "p3": cli("rescale", rocksdb, "-o", str(out / "p3"), "-p", "3", "--json"),
        "migrate": cli(
            "migrate", rocksdb, "-o", str(out / "migrate"), "--rename-uid", "keyed-str=ks", "--json"
        ),
        # migrate copies state files without parsing them: the hashmap format is no obstacle
        "migrate-hashmap": cli(
            "migrate", hashmap, "-o", str(out / "migrate-hashmap"), "--rename-uid", "keyed-str=ks"
        ),
        "hashmap-p3": cli("rescale", hashmap, "-o", str(out / "hashmap-p3"), "-p", "3", "--json"),
        "hashmap-convert": cli("convert", hashmap, "-o", str(out / "hashmap-convert"), "--json"),
    }
    requests = [
        RestoreRequest(out / "convert", 2, backend="hashmap"),
        RestoreRequest(out / "convert", 2, backend="rocksdb"),
        RestoreRequest(out / "p3", 3, backend="rocksdb"),
        RestoreRequest(out / "migrate", 2, backend="rocksdb", rename=RENAME),
        RestoreRequest(out / "migrate-hashmap", 2, backend="hashmap", rename=RENAME),
        RestoreRequest(out / "migrate-hashmap", 3, backend="hashmap", rename=RENAME),
        RestoreRequest(out / "hashmap-p3", 3, backend="hashmap"),
        RestoreRequest(out / "hashmap-convert", 2, backend="rocksdb"),
    ]
    restored = harness.restore_check(requests)
    return {
        "checkpoints": checkpoints,
        "manifests": {kind: harness.load_manifest(root / kind) for kind in specs},
        "runs": runs,
        "restored": dict(zip(RESTORES, restored, strict=True)),
    }


def test_the_rocksdb_checkpoint_really_is_in_segments(outcome: dict[str, Any]) -> None:
    md = read_metadata((outcome["checkpoints"]["rocksdb"] / "_metadata").read_bytes())
    native_files, empty_operator_segments = [], 0
    for op in md.operators:
        for subtask in op.subtasks or ():
            keyed = subtask.managed_keyed_state
            if isinstance(keyed, IncrementalKeyedHandle):
                native_files += [f.handle for f in (*keyed.shared, *keyed.private)]
            operator = subtask.managed_operator_state
            empty_operator_segments += operator is not None and isinstance(operator.delegate, EmptySegmentFileHandle)  # fmt: skip
    assert native_files and all(isinstance(h, SegmentFileHandle) for h in native_files)
    assert empty_operator_segments > 0


def test_verify_deep_walks_every_entry(outcome: dict[str, Any]) -> None:
    code, out, err = cli("verify", "--deep", "--json", str(outcome["checkpoints"]["rocksdb"]))
    assert (code, err) == (0, "")
    manifest = outcome["manifests"]["rocksdb"]
    written = sum(sum(op["entry_counts"].values()) for op in manifest["operators"])
    assert f'"entries": {written}' in out


@pytest.mark.parametrize("run", RESTORES)
def test_flink_restores_exactly_the_checkpointed_state(outcome: dict[str, Any], run: str) -> None:
    for name, (code, _, err) in outcome["runs"].items():
        assert code == 0, (name, err)
    result = outcome["restored"][run]
    assert result["ok"], result["error"]
    # convert-hashmap: the RocksDB checkpoint restored on hashmap
    source = "hashmap" if run.startswith(("migrate-hashmap", "hashmap-")) else "rocksdb"
    manifest = outcome["manifests"][source]
    state, operators = manifest["state"], manifest["operators"]
    if run.startswith("migrate"):
        operators = [{**op, "uid": RENAME.get(op["uid"], op["uid"])} for op in operators]
        state = {"operators": {RENAME.get(u, u): d for u, d in state["operators"].items()}}
    assert harness.compare(state, result["state"], operators) == []


def test_hashmap_checkpoints_in_segments_are_read(outcome: dict[str, Any]) -> None:
    """The hashmap backend's own format, its files segments of shared physical files: verify
    --deep walks every entry (tests/savepoint/test_heap_snapshot.py checks the values)."""
    code, out, err = cli("verify", "--deep", "--json", str(outcome["checkpoints"]["hashmap"]))
    assert (code, err) == (0, ""), out
    manifest = outcome["manifests"]["hashmap"]
    written = sum(sum(op["entry_counts"].values()) for op in manifest["operators"])
    assert f'"entries": {written}' in out
