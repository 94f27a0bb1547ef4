"""Retained checkpoints copied away from where Flink wrote them, read and rescaled from the copy.

Four checkpoints, each job folder (`chk-N`, `shared`, `taskowned`) copied to a folder of its
own: RocksDB incremental and the hashmap backend with file merging on (FLIP-306: state in
segments of physical files under `shared/` and `taskowned/`, code 15), written for this test
with their original location deleted before anything reads them; the committed RocksDB
incremental fixture (code 2 handles into `shared/`); and `heap_snapshots()["checkpoint"]`.
`inspect --deep`, `verify --deep`, `export` and `rescale -p 3` (its tasks on Spark) read each
copy, printing where it was moved from once, and `flink-state` reads it on Spark. The rescaled
outputs name no file outside themselves: with the copies deleted too, Flink restores each with
exactly the state the job wrote (one RestoreCheck JVM).
"""

from __future__ import annotations

import dataclasses
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

import statectl.spark
from statectl.formats.handles import SegmentFileHandle
from statectl.formats.metadata import read_metadata
from statectl.savepoint.moved import absolute_paths
from tests.conftest import FIXTURES, run_cli
from tests.flink import harness
from tests.flink.harness import RestoreRequest

pytestmark = [pytest.mark.flink, pytest.mark.spark]

WRITTEN = {
    "rocksdb-file-merging": {"backend": "rocksdb", "incremental": True, "file_merging": True},
    "hashmap-file-merging": {"file_merging": True},
}
KINDS = [*WRITTEN, "rocksdb", "hashmap"]
BACKEND = {kind: "rocksdb" if kind.startswith("rocksdb") else "hashmap" for kind in KINDS}
COMMANDS = ["inspect --deep", "verify --deep", "export", "rescale"]
# The folders of the original job folder its absolute handles name, per kind.
NAMED_FOLDERS = {
    "rocksdb-file-merging": {"shared", "taskowned"},
    "hashmap-file-merging": {"taskowned"},  # a full snapshot: all of it task-owned
    "rocksdb": {"shared"},
    "hashmap": set(),
}


def _fixtures(root: Path) -> dict[str, Path]:
    """Each kind's fixture folder (`checkpoint/` and manifest.json); the written kinds' original
    locations (under `root/originals`) deleted."""
    specs = [
        harness.fixture_spec(
            root / kind, mode="checkpoint", checkpoint_base=str(root / "originals" / kind), **params
        )
        for kind, params in WRITTEN.items()
    ]
    harness.write_fixtures(specs)
    shutil.rmtree(root / "originals")
    return {
        **{kind: root / kind for kind in WRITTEN},
        "rocksdb": FIXTURES / "rocksdb_retained_checkpoint",
        "hashmap": harness.heap_snapshots()["checkpoint"],
    }


def _argv(command: str, chk: Path, out: Path) -> list[str]:
    if command == "export":
        return ["export", str(chk), "-o", str(out / "state.parquet")]
    if command == "rescale":
        # every task on Spark: its workers read the copy through the handles they are sent
        return ["rescale", str(chk), "-o", str(out / "p3"), "-p", "3", "--no-head-start", "--json"]
    return [*command.split(), str(chk)]


@pytest.fixture(scope="module")
def outcome(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("moved-checkpoints")
    fixtures = _fixtures(root / "written")
    manifests = {kind: harness.load_manifest(fixtures[kind]) for kind in KINDS}
    copies, runs, rows = {}, {}, {}
    statectl.spark.register(spark)
    for kind in KINDS:
        job = root / "copies" / kind / "job-copy"
        shutil.copytree(fixtures[kind] / "checkpoint", job)
        (job / "taskowned").mkdir(exist_ok=True)  # empty in git: as Flink's layout has it
        copies[kind] = job / Path(manifests[kind]["path"]).name
        out = root / "out" / kind
        out.mkdir(parents=True)
        runs[kind] = {c: run_cli(*_argv(c, copies[kind], out)) for c in COMMANDS}
        frame = spark.read.format("flink-state").option("operator", "keyed-str")
        rows[kind] = frame.option("state", "cnt").load(str(copies[kind])).count()
    sources = {kind: read_metadata((copies[kind] / "_metadata").read_bytes()) for kind in KINDS}
    metadata = {kind: (root / "out" / kind / "p3" / "_metadata").read_bytes() for kind in KINDS}
    originals = {kind: manifests[kind]["checkpoint"]["original_dir"] for kind in KINDS}
    shutil.rmtree(root / "copies")  # the outputs must need neither the copies nor originals
    requests = [
        RestoreRequest(root / "out" / kind / "p3", 3, backend=BACKEND[kind]) for kind in KINDS
    ]
    return {
        "copies": copies,
        "sources": sources,
        "manifests": manifests,
        "originals": originals,
        "runs": runs,
        "rows": rows,
        "exports": {kind: root / "out" / kind / "state.parquet" for kind in KINDS},
        "metadata": metadata,
        "restored": dict(zip(KINDS, harness.restore_check(requests), strict=True)),
    }


def test_the_checkpoints_name_their_files_by_absolute_path(outcome: dict[str, Any]) -> None:
    """File merging: segments (code 15) of physical files in `taskowned/` and (RocksDB)
    `shared/`; the committed RocksDB checkpoint: code 2 into `shared/`; the hashmap checkpoint:
    none (relative handles into `chk-N`, which a copy reads as it is)."""
    for kind in KINDS:
        original = outcome["manifests"][kind]["checkpoint"]["original_uri"]
        paths = list(absolute_paths(outcome["sources"][kind]))
        assert all(path.startswith(original + "/") for path in paths), kind
        folders = {path[len(original) + 1 :].split("/")[0] for path in paths}
        assert folders == NAMED_FOLDERS[kind], kind
    for kind in WRITTEN:
        assert not Path(outcome["originals"][kind]).exists()
        assert _segments(outcome["sources"][kind]), kind


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("kind", KINDS)
def test_every_command_reads_the_copy_and_says_so_once(
    outcome: dict[str, Any], kind: str, command: str
) -> None:
    code, _, stderr = outcome["runs"][kind][command]
    moved = bool(NAMED_FOLDERS[kind])
    original = outcome["manifests"][kind]["checkpoint"]["original_uri"]
    copy = outcome["copies"][kind].parent
    note = f"statectl: note: checkpoint moved: reading {original} from {copy}\n"
    lines = [line for line in stderr.splitlines(keepends=True) if "statectl: note:" in line]
    assert (code, lines) == (0, [note] if moved else []), stderr


@pytest.mark.parametrize("kind", KINDS)
def test_verify_and_export_and_spark_count_every_entry(outcome: dict[str, Any], kind: str) -> None:
    manifest = outcome["manifests"][kind]
    written = {
        (op["uid"], state): count
        for op in manifest["operators"]
        for state, count in op["entry_counts"].items()
    }
    _, stdout, _ = outcome["runs"][kind]["verify --deep"]
    assert stdout.endswith(f"key groups hold data, {sum(written.values())} entries walked)\n")
    exported = pq.read_table(outcome["exports"][kind], columns=["operator", "state", "scope"])
    keyed = Counter(
        (row["operator"], row["state"]) for row in exported.to_pylist() if row["scope"] == "keyed"
    )
    assert dict(keyed) == written
    assert outcome["rows"][kind] == written["keyed-str", "cnt"]


@pytest.mark.parametrize("kind", KINDS)
def test_the_rescaled_output_names_no_file_outside_itself(
    outcome: dict[str, Any], kind: str
) -> None:
    data = outcome["metadata"][kind]
    assert list(absolute_paths(read_metadata(data))) == []
    for folder in (outcome["originals"][kind], str(outcome["copies"][kind].parent)):
        assert folder.encode() not in data


@pytest.mark.parametrize("kind", KINDS)
def test_flink_restores_the_rescaled_copy_exactly(outcome: dict[str, Any], kind: str) -> None:
    result = outcome["restored"][kind]
    assert result["ok"], result["error"]
    manifest = outcome["manifests"][kind]
    assert harness.compare(manifest["state"], result["state"], manifest["operators"]) == []


def _segments(value: object) -> list[SegmentFileHandle]:
    """Every file-merging segment handle in `value`, however deeply nested."""
    if isinstance(value, SegmentFileHandle):
        return [value]
    if isinstance(value, tuple):
        return [segment for item in value for segment in _segments(item)]
    if dataclasses.is_dataclass(value):
        return [s for name in value.__dataclass_fields__ for s in _segments(getattr(value, name))]
    return []
