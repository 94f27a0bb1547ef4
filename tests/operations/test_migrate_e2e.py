"""`statectl migrate` outputs restored by real Flink 2.3 into jobs with renamed uids and without
the dropped operators, with exactly the state Flink wrote; the originals fail the same restores.

One module-scoped batch: every migration runs in-process (no Spark), each output is moved to
another folder (it must not depend on where it was written), then one RestoreCheck JVM restores
every output and original.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from statectl.cli.main import main
from statectl.formats.handles import IncrementalKeyedHandle
from statectl.savepoint.model import operator_id_for_uid
from statectl.savepoint.reader import open_savepoint
from tests.conftest import FIXTURES, load_manifest
from tests.flink import harness
from tests.flink.harness import RestoreRequest

pytestmark = [pytest.mark.flink]

# A non-ASCII uid (Cyrillic and a surrogate pair in Java): Flink must derive the same id.
RENAME = {"keyed-str": "ks", "opstate": "ops-ключ-𝄞"}
DROP = ["keyed-long", "bcast"]


@dataclass(frozen=True)
class Case:
    """Migrate `fixture` with `rename` and `drop`; Flink restores the output at `parallelism`."""

    fixture: str
    rename: dict[str, str] = field(default_factory=dict)
    drop: list[str] = field(default_factory=list)
    parallelism: int = 2
    backend: str | None = None  # None: the harness's choice (rocksdb for native handles)

    @property
    def id(self) -> str:
        what = [f"rename-{len(self.rename)}"] * bool(self.rename) + ["drop"] * bool(self.drop)
        return f"{self.fixture}-{'-'.join(what)}-p{self.parallelism}"

    def request(self, path: Path) -> RestoreRequest:
        return RestoreRequest(
            path, self.parallelism, backend=self.backend, rename=self.rename, drop=self.drop
        )


CASES = [
    Case("hashmap_canonical_files", rename=RENAME),
    Case("rocksdb_canonical", rename=RENAME),
    Case("hashmap_canonical_files", drop=DROP),
    Case("rocksdb_canonical", drop=DROP),
    Case("hashmap_canonical_inline", rename=RENAME, drop=["keyed-long"]),
    Case("rocksdb_native_full", rename=RENAME, drop=["bcast"]),
    Case("rocksdb_native_full", rename=RENAME, drop=["bcast"], parallelism=3),  # Flink rescales
    Case("rocksdb_native_incremental", rename={"keyed-long": "kl"}, drop=["keyed-str"]),
    Case("rocksdb_retained_checkpoint", rename=RENAME, drop=["bcast"]),
    Case("rocksdb_retained_checkpoint", rename={"keyed-long": "kl"}, parallelism=3),
    Case("forst_native", rename=RENAME, drop=["bcast"], parallelism=3, backend="forst"),
]
CASE_IDS = [c.id for c in CASES]
# The same restores of the originals must fail: the migration is what makes them work.
ORIGINALS = CASES[:4]


def source_of(fixture: str) -> Path:
    """The fixture's snapshot; a retained checkpoint where its absolute paths point."""
    return harness.checkpoint_in_place(FIXTURES / fixture)


def migrate_argv(case: Case, out: Path) -> list[str]:
    argv = ["migrate", str(source_of(case.fixture)), "-o", str(out), "--json"]
    for old, new in case.rename.items():
        argv += ["--rename-uid", f"{old}={new}"]
    for uid in case.drop:
        argv += ["--drop", uid]
    return argv


def expected(case: Case) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The manifest's state and operators as the migrated job sees them: new uids, no drops."""
    manifest = load_manifest(case.fixture)
    operators = [
        {**op, "uid": case.rename.get(op["uid"], op["uid"])}
        for op in manifest["operators"]
        if op["uid"] not in case.drop
    ]
    state = {
        "operators": {
            case.rename.get(uid, uid): dump
            for uid, dump in manifest["state"]["operators"].items()
            if uid not in case.drop
        }
    }
    return state, operators


@pytest.fixture(scope="module")
def outcome(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("migrated")
    outputs: dict[str, Path] = {}
    for case in CASES:
        written, moved = root / "written" / case.id, root / "moved" / case.id
        with pytest.raises(SystemExit) as done:
            main(migrate_argv(case, written))
        assert done.value.code in (0, None)
        moved.parent.mkdir(exist_ok=True)
        shutil.move(written, moved)  # relocatable: nothing points back at `written`
        outputs[case.id] = moved
    requests = [case.request(outputs[case.id]) for case in CASES]
    requests += [case.request(source_of(case.fixture)) for case in ORIGINALS]
    results = harness.restore_check(requests)
    return {
        "outputs": outputs,
        "restored": dict(zip(CASE_IDS, results, strict=False)),
        "originals": dict(zip((c.id for c in ORIGINALS), results[len(CASES) :], strict=True)),
    }


@pytest.mark.parametrize("case_id", CASE_IDS)
def test_flink_restores_the_migrated_savepoint_with_exactly_the_written_state(
    outcome: dict[str, Any], case_id: str
) -> None:
    case = next(c for c in CASES if c.id == case_id)
    result = outcome["restored"][case_id]
    assert result["ok"], result["error"]
    state, operators = expected(case)
    assert harness.compare(state, result["state"], operators) == []
    restored = result["state"]["operators"]
    assert set(restored) == {op["uid"] for op in operators if op["states"]}
    for op in operators:
        if op["states"]:
            assert len(restored[op["uid"]]["subtasks"]) == case.parallelism, op["uid"]
    stateful = {op["uid"] for op in operators if op["states"]}
    assert result["restored_flags"] == dict.fromkeys(stateful, True)  # ran under the new uids
    if load_manifest(case.fixture)["format"] == "NATIVE" or "checkpoint" in case.fixture:
        assert result["backend"] == (case.backend or "rocksdb")  # native state, natively


@pytest.mark.parametrize("case_id", [c.id for c in ORIGINALS])
def test_flink_refuses_the_same_restore_of_the_original(
    outcome: dict[str, Any], case_id: str
) -> None:
    """Without the migration Flink finds state it cannot map to the new job."""
    case = next(c for c in ORIGINALS if c.id == case_id)
    result = outcome["originals"][case_id]
    assert not result["ok"]
    chain = " ".join(result["error_chain"])
    assert "Failed to rollback to checkpoint/savepoint" in chain, chain
    unmapped = [operator_id_for_uid(uid).hex() for uid in (*case.rename, *case.drop)]
    assert any(
        f"Cannot map checkpoint/savepoint state for operator {id_} to the new program" in chain
        for id_ in unmapped
    ), chain


@pytest.mark.parametrize("case_id", CASE_IDS)
def test_the_output_holds_the_new_ids_and_only_its_own_files(
    outcome: dict[str, Any], case_id: str
) -> None:
    case = next(c for c in CASES if c.id == case_id)
    path = outcome["outputs"][case_id]
    sp = open_savepoint(str(path))
    manifest = load_manifest(case.fixture)
    ids = {op.uid: op.operator_id for op in sp.operators}
    assert ids == {
        case.rename.get(op["uid"], op["uid"]): operator_id_for_uid(
            case.rename.get(op["uid"], op["uid"])
        )
        for op in manifest["operators"]
        if op["uid"] not in case.drop
    }
    native = 0
    for op in sp.operators:
        for subtask in op.subtasks or ():
            native += isinstance(subtask.managed_keyed_state, IncrementalKeyedHandle)
    assert bool(native) == (
        manifest["format"] == "NATIVE" or manifest["mode"] == "checkpoint"
    )  # native RocksDB instances stay native
