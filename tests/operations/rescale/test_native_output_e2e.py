"""NATIVE output (one RocksDB instance per new keyed subtask), restored by real Flink 2.3.

One JVM for the module: every output is restored with the RocksDB backend (ForSt for the ForSt
source) and each restored job takes a NATIVE savepoint, which statectl then reads and verifies.
`harness.compare` enumerates every key of every subtask: no key missing, duplicated, misplaced
or unreachable.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from statectl.formats.handles import HandleCode, IncrementalKeyedHandle, RelativeFileHandle
from statectl.formats.java_types import key_group_prefix_bytes
from statectl.formats.metadata import snapshot_kind
from statectl.operations.rescale.job import rescale
from statectl.operations.rescale.plan import plan_rescale
from statectl.savepoint import native
from statectl.savepoint.reader import open_savepoint
from tests.conftest import fixture_savepoint, load_manifest, run_cli
from tests.flink import harness
from tests.flink.harness import RestoreRequest

pytestmark = [pytest.mark.flink, pytest.mark.spark]

KEYED_UIDS = ["keyed-str", "keyed-long"]


@dataclass(frozen=True)
class Case:
    name: str
    source: str
    parallelism: int
    max_parallelism: int | None = None
    backend: str = "rocksdb"
    convert: bool = False  # `statectl convert --format native` (parallelism kept)


CASES = [
    Case("p3", "rocksdb_native_full", 3),
    Case("p1", "rocksdb_native_full", 1),
    Case("p4", "rocksdb_native_full", 4),
    Case("checkpoint-p3", "rocksdb_retained_checkpoint", 3),
    Case("hashmap-convert", "hashmap_canonical_files", 2, convert=True),
    Case("maxp256", "rocksdb_native_full", 3, 256),
    Case("maxp4096", "rocksdb_native_full", 2, 4096),
    Case("forst-p3", "forst_native", 3, backend="forst"),
]
CASE_IDS = [c.name for c in CASES]


@pytest.fixture(scope="module")
def outcome(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("native-out")
    paths = {}
    for case in CASES:
        source, path = fixture_savepoint(case.source), root / case.name
        if case.convert:
            code, _, err = run_cli("convert", str(source), "-o", str(path), "--format", "native")
            assert code == 0, err
        else:  # the input's format (native) by default
            plan = plan_rescale(open_savepoint(str(source)), case.parallelism, None, case.max_parallelism)  # fmt: skip
            rescale(plan, str(path))
        paths[case.name] = path
    requests = [
        RestoreRequest(
            paths[c.name], c.parallelism, max_parallelism=c.max_parallelism, backend=c.backend,
            savepoint_dir=root / f"{c.name}-resaved", savepoint_format="NATIVE",
        )
        for c in CASES
    ]  # fmt: skip
    results = harness.restore_check(requests)
    return {"paths": paths, "restored": dict(zip(CASE_IDS, results, strict=True))}


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_flink_restores_exactly_the_written_state(outcome: dict[str, Any], case: Case) -> None:
    result = outcome["restored"][case.name]
    assert result["ok"], result["error"]
    assert result["backend"] == case.backend
    manifest = load_manifest(case.source)
    assert harness.compare(manifest["state"], result["state"], manifest["operators"]) == []
    for uid in KEYED_UIDS:
        subtasks = result["state"]["operators"][uid]["subtasks"]
        assert len(subtasks) == case.parallelism
        for sub in subtasks.values():
            assert sub["misplaced"] == [] and sub["unreachable"] == []


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_flinks_savepoint_of_the_restored_job_verifies(outcome: dict[str, Any], case: Case) -> None:
    result = outcome["restored"][case.name]
    assert result["ok"], result["error"]
    code, out, err = run_cli("verify", "--deep", result["savepoint"])
    assert code == 0, out + err
    assert kind_of(result["savepoint"]) == "NATIVE"


def kind_of(path: str | Path) -> str | None:
    kind = snapshot_kind(open_savepoint(str(path)).metadata.properties)
    return None if kind is None else kind.format


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_output_is_a_self_contained_native_savepoint(outcome: dict[str, Any], case: Case) -> None:
    """Described as Flink describes a NATIVE savepoint: code 11, every file private and
    relative, the checkpointed size their sum; each instance holds only its key groups."""
    path = outcome["paths"][case.name]
    sp = open_savepoint(str(path))
    source = open_savepoint(str(fixture_savepoint(case.source)))
    for uid in KEYED_UIDS:
        op = sp.find_operator(uid)
        assert (op.parallelism, op.max_parallelism) == (
            case.parallelism,
            case.max_parallelism or 128,
        )
        for subtask in sp.subtasks(op):
            handle = subtask.managed_keyed_state
            assert isinstance(handle, IncrementalKeyedHandle)
            assert handle.code == HandleCode.INCREMENTAL_KEY_GROUPS_V2 and handle.shared == ()
            assert handle.checkpoint_id == source.metadata.checkpoint_id
            assert isinstance(handle.meta, RelativeFileHandle)
            files = [handle.meta] + [f.handle for f in handle.private]
            sizes = [os.path.getsize(path / f.relative_path) for f in files]  # type: ignore[union-attr]
            assert sizes == [f.size for f in files]  # type: ignore[union-attr]
            assert handle.checkpointed_size == sum(sizes)
            kinds = sorted(native.file_kind(f.local_path) for f in handle.private)
            assert kinds == ["CURRENT", "MANIFEST", "OPTIONS"] + ["SST"] * (len(kinds) - 3)
            _assert_rows_inside(sp, handle, uid, op.max_parallelism)
    if case.source != "rocksdb_retained_checkpoint":
        assert kind_of(path) == "NATIVE"
    code, out, err = run_cli("verify", "--deep", str(path), "--json")
    assert (code, err) == (0, ""), out
    report = json.loads(out)
    assert (report["findings"], report["notes"]) == ([], [])  # no row outside its key groups
    assert report["checked"]["entries"] == sum(
        sum(op["entry_counts"].values())
        for op in load_manifest(case.source)["operators"]
        if op["uid"] in KEYED_UIDS
    )


def _assert_rows_inside(sp: Any, handle: IncrementalKeyedHandle, uid: str, max_p: int) -> None:
    """Every row of every column family, unclipped, lies in the handle's key-group range."""
    assert handle.key_groups is not None
    first, last = handle.key_groups
    prefix = key_group_prefix_bytes(max_p)
    instance = native.native_instance(sp, handle, uid)
    _, header = native.meta_header(instance)
    with native.opened(instance) as db:
        families = db.column_families()
        assert families == [s.name for s in header.states]
        rows = 0
        for name in families:
            for key in db.db.get_column_family(name).keys(from_key=b""):
                assert first <= int.from_bytes(key[:prefix], "big") <= last
                rows += 1
        assert rows > 0


def test_meta_file_is_flinks_header_byte_for_byte(outcome: dict[str, Any]) -> None:
    """The meta file Flink wrote for the source instances is the one of every new instance."""
    source = open_savepoint(str(fixture_savepoint("rocksdb_native_full")))
    output = open_savepoint(str(outcome["paths"]["p3"]))
    for uid in KEYED_UIDS:
        metas = set()
        for sp in (source, output):
            for subtask in sp.subtasks(sp.find_operator(uid)):
                handle = subtask.managed_keyed_state
                assert isinstance(handle, IncrementalKeyedHandle) and handle.meta is not None
                metas.add(sp.stream(handle.meta).read())
        assert len(metas) == 1, uid
