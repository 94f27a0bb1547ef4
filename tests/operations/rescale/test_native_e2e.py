"""RocksDB native savepoints and retained checkpoints, converted and rescaled, restored by Flink.

Two JVMs for the module: one restores `rocksdb_native_full` at parallelism 3 in Flink and takes
a NATIVE savepoint of it (Flink's own rescale: its instances keep SST files with keys of key
groups they no longer own); then, after every conversion and rescale on the shared Spark
session, one RestoreCheck batch restores every output at its parallelism.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from statectl.cli.main import main
from statectl.formats.handles import (
    ByteStreamHandle,
    IncrementalKeyedHandle,
    KeyGroupsHandle,
    RelativeFileHandle,
)
from statectl.formats.metadata import snapshot_kind
from statectl.operations.rescale.job import rescale
from statectl.operations.rescale.plan import plan_rescale
from statectl.savepoint import native
from statectl.savepoint.reader import open_savepoint
from tests.conftest import FIXTURES, fixture_savepoint, key_group_blocks, load_manifest
from tests.flink import harness
from tests.flink.harness import RestoreRequest

pytestmark = [pytest.mark.flink, pytest.mark.spark]

SOURCES = [
    "rocksdb_native_full", "rocksdb_native_incremental", "rocksdb_retained_checkpoint",
    "forst_native",  # ForSt (Flink 2.x) writes RocksDB's layout; it has no CANONICAL savepoints
]  # fmt: skip
FLINK_RESCALED = "flink_rescaled"  # rocksdb_native_full restored at 3 by Flink, saved NATIVE
KEYED_UIDS = ["keyed-str", "keyed-long"]


@dataclass(frozen=True)
class Case:
    source: str
    parallelism: int | None  # None: `statectl convert` (parallelism kept)
    backend: str  # the backend Flink restores the output with
    path: Path

    @property
    def id(self) -> str:
        how = "convert" if self.parallelism is None else f"p{self.parallelism}"
        return f"{self.source}-{how}-{self.backend}"

    @property
    def manifest(self) -> dict[str, Any]:
        return load_manifest(
            "rocksdb_native_full" if self.source == FLINK_RESCALED else self.source
        )

    def output_parallelism(self, source_parallelism: int) -> int:
        return self.parallelism or source_parallelism


def _cases(root: Path) -> list[Case]:
    cases = []
    for source in [*SOURCES, FLINK_RESCALED]:
        for parallelism, backends in ((None, ("hashmap", "rocksdb")), (1, ("hashmap",)), (3, ("rocksdb",))):  # fmt: skip
            if source == FLINK_RESCALED and parallelism == 3:
                parallelism = 2  # already 3: rescale it down to 2 instead
            how = "convert" if parallelism is None else f"p{parallelism}"
            for backend in backends:
                cases.append(Case(source, parallelism, backend, root / f"{source}-{how}"))
    return cases


CASE_IDS = [c.id for c in _cases(Path("/"))]


@pytest.fixture(scope="module")
def outcome(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("native")
    (resaved,) = harness.restore_check(
        [
            RestoreRequest(
                fixture_savepoint("rocksdb_native_full"), 3, backend="rocksdb",
                savepoint_dir=root / "flink", savepoint_format="NATIVE",
            )
        ]
    )  # fmt: skip
    assert resaved["ok"], resaved["error"]
    sources = {
        "rocksdb_native_full": fixture_savepoint("rocksdb_native_full"),
        "rocksdb_native_incremental": fixture_savepoint("rocksdb_native_incremental"),
        "rocksdb_retained_checkpoint": harness.checkpoint_in_place(
            FIXTURES / "rocksdb_retained_checkpoint"
        ),
        "forst_native": fixture_savepoint("forst_native"),
        FLINK_RESCALED: Path(resaved["savepoint"]),
    }
    cases = _cases(root)
    for case in cases:
        if case.path.exists():
            continue  # the same output, restored with another backend
        if case.source == "rocksdb_native_full" and case.parallelism is None:
            with pytest.raises(SystemExit) as done:  # through the CLI once
                main(["convert", str(sources[case.source]), "-o", str(case.path), "--json"])
            assert done.value.code in (0, None)
        else:
            plan = plan_rescale(
                open_savepoint(str(sources[case.source])),
                case.parallelism,
                keyed_format="canonical",
            )
            rescale(plan, str(case.path))
    parallelism = {
        source: open_savepoint(str(path)).find_operator("keyed-str").parallelism
        for source, path in sources.items()
    }
    requests = [
        RestoreRequest(c.path, c.output_parallelism(parallelism[c.source]), backend=c.backend)
        for c in cases
    ]
    # ForSt itself restores no canonical savepoint (Flink 2.3): docs/commands/convert.md says so.
    requests.append(RestoreRequest(root / "forst_native-convert", 2, backend="forst"))
    *results, forst_restore = harness.restore_check(requests)
    return {
        "sources": sources,
        "cases": {c.id: c for c in cases},
        "restored": dict(zip(CASE_IDS, results, strict=True)),
        "parallelism": parallelism,
        "forst_restore": forst_restore,
    }


def _case(outcome: dict[str, Any], case_id: str) -> tuple[Case, dict[str, Any]]:
    return outcome["cases"][case_id], outcome["restored"][case_id]


@pytest.mark.parametrize("case_id", [i for i in CASE_IDS if not i.startswith(FLINK_RESCALED)])
def test_flink_restores_exactly_the_written_state(outcome: dict[str, Any], case_id: str) -> None:
    case, result = _case(outcome, case_id)
    assert result["ok"], result["error"]
    manifest = case.manifest
    assert harness.compare(manifest["state"], result["state"], manifest["operators"]) == []
    expected = case.output_parallelism(outcome["parallelism"][case.source])
    for op in manifest["operators"]:
        if op["states"]:
            assert len(result["state"]["operators"][op["uid"]]["subtasks"]) == expected
    assert result["backend"] == case.backend


@pytest.mark.parametrize("case_id", [i for i in CASE_IDS if i.startswith(FLINK_RESCALED)])
def test_a_savepoint_flink_rescaled_converts_without_duplicated_keys(
    outcome: dict[str, Any], case_id: str
) -> None:
    """Keyed state and timers equal what the job wrote; `keyed_union` fails on a key seen twice.

    (Operator union state is not compared: Flink's own restore at 3 replicated it 3 times.)"""
    case, result = _case(outcome, case_id)
    assert result["ok"], result["error"]
    written = case.manifest["state"]
    for uid in KEYED_UIDS:
        for section in ("keyed", "timers"):
            restored = harness.keyed_union(result["state"], uid, section)
            assert restored == harness.keyed_union(written, uid, section), (uid, section)
        for sub in result["state"]["operators"][uid]["subtasks"].values():
            assert sub["misplaced"] == [] and sub["unreachable"] == []


def test_flinks_rescaled_instances_hold_keys_outside_their_range(outcome: dict[str, Any]) -> None:
    """What makes the case above meaningful: SST files reach beyond each instance's range."""
    sp = open_savepoint(str(outcome["sources"][FLINK_RESCALED]))
    beyond = 0
    for uid in KEYED_UIDS:
        op = sp.find_operator(uid)
        assert op.parallelism == 3
        for subtask in sp.subtasks(op):
            handle = subtask.managed_keyed_state
            assert isinstance(handle, IncrementalKeyedHandle) and handle.key_groups
            first, last = handle.key_groups
            with native.opened(native.native_instance(sp, handle, uid)) as db:
                for sst in db.db.live_files():
                    beyond += sst["start_key"][0] < first or sst["end_key"][0] > last
    assert beyond > 0


@pytest.mark.parametrize("case_id", [i for i in CASE_IDS if i.endswith("hashmap") or "-p3-" in i])
def test_outputs_are_self_contained_canonical_savepoints(
    outcome: dict[str, Any], case_id: str
) -> None:
    case, _ = _case(outcome, case_id)
    sp = open_savepoint(str(case.path))
    for op in sp.operators:
        for subtask in sp.subtasks(op):
            keyed = subtask.managed_keyed_state
            assert keyed is None or (isinstance(keyed, KeyGroupsHandle) and keyed.code == 7)
            for handle in (keyed, subtask.managed_operator_state):
                if handle is not None:
                    assert isinstance(handle.delegate, RelativeFileHandle | ByteStreamHandle)
                    if isinstance(handle.delegate, RelativeFileHandle):
                        assert (case.path / handle.delegate.relative_path).is_file()
    kind = snapshot_kind(sp.metadata.properties)
    assert kind is not None
    if case.source == "rocksdb_retained_checkpoint":
        assert not kind.savepoint  # the checkpoint's own properties are kept
    else:
        assert kind.format == "CANONICAL"


BLOCK_CASES = [
    *[(s, how) for s in ("rocksdb_native_full", "rocksdb_native_incremental", "forst_native") for how in ("convert", "p1", "p3")],
    *[(FLINK_RESCALED, how) for how in ("convert", "p1", "p2")],
]  # fmt: skip


@pytest.mark.parametrize(("source", "how"), BLOCK_CASES)
def test_blocks_equal_flinks_own_canonical_savepoint(
    outcome: dict[str, Any], source: str, how: str
) -> None:
    """Whatever the route, every key group's block is the one Flink's RocksDB backend writes."""
    path = next(c.path for c in outcome["cases"].values() if c.path.name == f"{source}-{how}")
    canonical = open_savepoint(str(fixture_savepoint("rocksdb_canonical")))
    output = open_savepoint(str(path))
    for uid in KEYED_UIDS:
        assert key_group_blocks(output, uid) == key_group_blocks(canonical, uid), uid


def test_forst_restores_no_canonical_savepoint(outcome: dict[str, Any]) -> None:
    """Flink 2.3's limit, not statectl's: converted ForSt state goes to hashmap or RocksDB."""
    result = outcome["forst_restore"]
    assert not result["ok"]
    assert "Not support restoring yet for ForStStateBackend" in result["error"]
