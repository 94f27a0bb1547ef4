"""Rescale real Flink 2.3 savepoints with the Spark job; real Flink restores every output.

One module-scoped batch: every rescale runs on the shared SparkSession, then one RestoreCheck
JVM restores every output (and the originals, for Flink's own operator-state placement).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from statectl.formats.handles import ByteStreamHandle, RelativeFileHandle
from statectl.operations.rescale.job import rescale
from statectl.operations.rescale.plan import plan_rescale
from statectl.savepoint.reader import open_savepoint
from tests.conftest import fixture_savepoint, key_group_blocks, load_manifest
from tests.flink import harness
from tests.flink.harness import RestoreRequest

pytestmark = [pytest.mark.flink, pytest.mark.spark]

FIXTURES = ["hashmap_canonical_files", "rocksdb_canonical", "hashmap_compressed", "hashmap_maxp300"]
PARALLELISMS = [1, 3, 4]
OPERATOR_STATE_UIDS = ["opstate", "bcast"]


@dataclass(frozen=True)
class Case:
    """`fixture` rescaled along `chain` (2→4→2 is chain (4, 2)); output at `path`."""

    fixture: str
    chain: tuple[int, ...]
    path: Path

    @property
    def parallelism(self) -> int:
        return self.chain[-1]

    @property
    def id(self) -> str:
        start = load_manifest(self.fixture)["parallelism"]
        return f"{self.fixture}-{'→'.join(map(str, (start, *self.chain)))}"


def _cases(root: Path) -> list[Case]:
    cases = [Case(f, (p,), root / f"{f}-{p}") for f in FIXTURES for p in PARALLELISMS]
    cases += [Case(f, (4, 2), root / f"{f}-4-2") for f in FIXTURES]  # 4→2 of every kind
    cases += [Case(f, (3, 2), root / f"{f}-3-2") for f in FIXTURES]  # the round trip
    cases.append(Case("hashmap_p4", (2,), root / "hashmap_p4-2"))  # a Flink-written p=4
    return cases


def _restores_into_rocksdb_too(case: Case) -> bool:
    """Canonical output is backend-independent: hashmap outputs also restore into RocksDB."""
    return case.chain == (3,) and load_manifest(case.fixture)["backend"] == "hashmap"


CASE_IDS = [c.id for c in _cases(Path("/"))]
CROSS_IDS = [c.id for c in _cases(Path("/")) if _restores_into_rocksdb_too(c)]


def _rescale_chain(case: Case) -> None:
    source = fixture_savepoint(case.fixture)
    for step, parallelism in enumerate(case.chain):
        last = step == len(case.chain) - 1
        target = case.path if last else case.path.with_name(f"{case.path.name}.step{step}")
        rescale(plan_rescale(open_savepoint(str(source)), parallelism, {}), str(target))
        source = target


@pytest.fixture(scope="module")
def outcome(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("rescaled")
    cases = _cases(root)
    for case in cases:
        _rescale_chain(case)
    # Flink restoring the originals at the new parallelisms: where it puts operator state.
    originals = sorted({(c.fixture, c.parallelism) for c in cases})
    requests = [
        RestoreRequest(c.path, c.parallelism, backend=load_manifest(c.fixture)["backend"])
        for c in cases
    ]
    requests += [
        RestoreRequest(fixture_savepoint(f), p, backend=load_manifest(f)["backend"])
        for f, p in originals
    ]
    cross = [c for c in cases if _restores_into_rocksdb_too(c)]
    requests += [RestoreRequest(c.path, c.parallelism, backend="rocksdb") for c in cross]
    results = harness.restore_check(requests)
    by_case = dict(zip((c.id for c in cases), results, strict=False))
    by_original = dict(zip(originals, results[len(cases) :], strict=False))
    by_cross = dict(zip((c.id for c in cross), results[len(cases) + len(originals) :], strict=True))
    return {"cases": {c.id: c for c in cases}, "restored": by_case, "flink": by_original, "cross": by_cross}  # fmt: skip


def _assert_restores_written_state(result: dict[str, Any], fixture: str) -> None:
    assert result["ok"], result["error"]
    manifest = load_manifest(fixture)
    assert harness.compare(manifest["state"], result["state"], manifest["operators"]) == []


@pytest.mark.parametrize("case_id", CASE_IDS)
def test_flink_restores_exactly_the_written_state(outcome: dict[str, Any], case_id: str) -> None:
    case = outcome["cases"][case_id]
    result = outcome["restored"][case_id]
    _assert_restores_written_state(result, case.fixture)
    restored = result["state"]["operators"]
    for op in load_manifest(case.fixture)["operators"]:
        if op["states"]:
            assert len(restored[op["uid"]]["subtasks"]) == case.parallelism, op["uid"]


@pytest.mark.parametrize("case_id", CROSS_IDS)
def test_canonical_output_restores_into_rocksdb(outcome: dict[str, Any], case_id: str) -> None:
    _assert_restores_written_state(outcome["cross"][case_id], outcome["cases"][case_id].fixture)


@pytest.mark.parametrize("case_id", [c for c in CASE_IDS if c.count("→") == 1])
def test_operator_state_lands_where_flink_puts_it(outcome: dict[str, Any], case_id: str) -> None:
    """Same elements on the same subtask indices as Flink restoring the original itself.

    (Single steps only: after a chain, Flink's placement depends on the intermediate layout.)"""
    case = outcome["cases"][case_id]
    ours = outcome["restored"][case_id]["state"]["operators"]
    flinks = outcome["flink"][(case.fixture, case.parallelism)]
    assert flinks["ok"], flinks["error"]
    for uid in OPERATOR_STATE_UIDS:
        expected = flinks["state"]["operators"][uid]["subtasks"]
        actual = ours[uid]["subtasks"]
        assert set(actual) == set(expected)
        for index in expected:
            for section in ("operator", "broadcast"):
                assert _sorted_lists(actual[index].get(section, {})) == _sorted_lists(
                    expected[index].get(section, {})
                ), f"{uid}[{index}] {section}"


def _sorted_lists(section: dict[str, Any]) -> dict[str, Any]:
    return {k: sorted(v) if isinstance(v, list) else v for k, v in section.items()}


@pytest.mark.parametrize("fixture", FIXTURES)
def test_rescaling_there_and_back_keeps_key_group_blocks_byte_identical(
    outcome: dict[str, Any], fixture: str
) -> None:
    there_and_back = next(
        c for c in outcome["cases"].values() if c.fixture == fixture and c.chain == (3, 2)
    )
    original = open_savepoint(str(fixture_savepoint(fixture)))
    rescaled = open_savepoint(str(there_and_back.path))
    keyed_uids = [o["uid"] for o in load_manifest(fixture)["operators"] if _is_keyed(o)]
    assert keyed_uids
    for uid in keyed_uids:
        blocks = key_group_blocks(original, uid)
        assert len(blocks) > 10  # key groups with state (empty ones have no block)
        assert key_group_blocks(rescaled, uid) == blocks, uid


@pytest.mark.parametrize("case_id", CASE_IDS)
def test_output_is_relocatable_and_keeps_the_metadata_version(
    outcome: dict[str, Any], case_id: str
) -> None:
    case = outcome["cases"][case_id]
    output = open_savepoint(str(case.path))
    assert output.metadata.version == open_savepoint(str(fixture_savepoint(case.fixture))).metadata.version  # fmt: skip
    for op in output.operators:
        for subtask in output.subtasks(op):
            for handle in (subtask.managed_keyed_state, subtask.managed_operator_state):
                if handle is not None:
                    assert isinstance(handle.delegate, RelativeFileHandle | ByteStreamHandle)
    assert not [p for p in case.path.parent.iterdir() if p.name.startswith(".statectl-staging")]


def _is_keyed(manifest_operator: dict[str, Any]) -> bool:
    return any(s["scope"] == "keyed" for s in manifest_operator["states"])
