"""A new max parallelism, end to end: real Flink 2.3 restores every re-hashed savepoint.

Each output is restored by a job that sets the new max parallelism; every key of the String-
and Long-keyed operators (VALUE, LIST, MAP, timers) must come back exactly once with its values
and timers, readable through its key (RestoreCheck reads each key back with `setCurrentKey`
and lists keys in a key group their subtask does not own). One RestoreCheck JVM for the batch.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from statectl.cli.main import main
from statectl.formats import keyed_blocks, state_headers
from statectl.formats.handles import KeyGroupsHandle
from statectl.formats.java_types import KEY_TYPES, key_group_prefix_bytes
from statectl.operations.rescale.job import rescale
from statectl.operations.rescale.plan import plan_rescale
from statectl.savepoint.reader import open_savepoint
from tests.conftest import fixture_savepoint, load_manifest
from tests.flink import harness
from tests.flink.harness import RestoreRequest

pytestmark = [pytest.mark.flink, pytest.mark.spark]

KEYED_UIDS = ("keyed-str", "keyed-long")


@dataclass(frozen=True)
class Case:
    fixture: str
    parallelism: int
    max_parallelism: int
    backend: str = "hashmap"

    @property
    def id(self) -> str:
        old = load_manifest(self.fixture)["max_parallelism"]
        return f"{self.fixture}-max{old}→{self.max_parallelism}-p{self.parallelism}-{self.backend}"


CASES = [
    Case("hashmap_canonical_files", 3, 256),
    Case("hashmap_canonical_files", 2, 4096),
    Case("hashmap_maxp300", 4, 128),
    Case("rocksdb_canonical", 3, 256, "rocksdb"),
    Case("rocksdb_canonical", 2, 4096, "rocksdb"),
    Case("hashmap_compressed", 1, 4096),
    Case("rocksdb_native_full", 3, 256, "rocksdb"),
    Case("hashmap_maxp300", 2, 32768, "rocksdb"),
]


@pytest.fixture(scope="module")
def outcome(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("rekeyed")
    outputs = {}
    for case in CASES:
        outputs[case.id] = root / case.id.replace("→", "-to-")  # Flink wants ASCII paths
        plan = plan_rescale(
            open_savepoint(str(fixture_savepoint(case.fixture))),
            case.parallelism,
            max_parallelism=case.max_parallelism,
            keyed_format="canonical",  # native output: test_native_output_e2e.py
        )
        rescale(plan, str(outputs[case.id]))
    first = CASES[0]
    requests = [
        RestoreRequest(outputs[c.id], c.parallelism, c.max_parallelism, backend=c.backend)
        for c in CASES
    ]
    # The same output under the old max parallelism: Flink refuses it, so the change is real.
    requests.append(RestoreRequest(outputs[first.id], first.parallelism, 128))
    results = harness.restore_check(requests)
    return {
        "outputs": outputs,
        "restored": dict(zip((c.id for c in CASES), results, strict=False)),
        "old_max": results[-1],
    }


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_flink_restores_every_key_under_the_new_max_parallelism(
    outcome: dict[str, Any], case: Case
) -> None:
    result = outcome["restored"][case.id]
    assert result["ok"], result["error"]
    manifest = load_manifest(case.fixture)
    assert harness.compare(manifest["state"], result["state"], manifest["operators"]) == []
    for uid in KEYED_UIDS:
        restored = result["state"]["operators"][uid]
        assert restored["max_parallelism"] == case.max_parallelism
        assert len(restored["subtasks"]) == case.parallelism
        written = harness.keyed_union(manifest["state"], uid)
        assert sum(len(keys) for keys in written.values()) > 0
        assert harness.keyed_union(result["state"], uid) == written


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_every_key_sits_in_the_key_group_flink_computes(
    outcome: dict[str, Any], case: Case
) -> None:
    """Each entry's prefix is its key's key group under the new max parallelism, with the
    prefix width the new max parallelism needs, and the new key-group ranges are Flink's."""
    sp = open_savepoint(str(outcome["outputs"][case.id]))
    prefix = key_group_prefix_bytes(case.max_parallelism)
    checked = 0
    for op in sp.operators:
        assert op.max_parallelism == case.max_parallelism
        for subtask in sp.subtasks(op):
            handle = subtask.managed_keyed_state
            if not isinstance(handle, KeyGroupsHandle):
                continue
            stream = sp.stream(handle.delegate)
            header_bytes = stream.read(0, keyed_blocks.header_length(handle.offsets, stream.size))
            header = state_headers.parse_keyed_header(header_bytes)
            key_type = KEY_TYPES[header.key_serializer.split("$")[0]]
            spans = keyed_blocks.block_spans(handle.start_key_group, handle.offsets, stream.size)
            for span in spans:
                block = stream.read(span.start, span.end)
                for entry in keyed_blocks.iter_entries(block, header.compressed):
                    timer = header.states[entry.state_id].kind == "TIMERS"
                    key, _ = key_type.read(entry.key, prefix + (8 if timer else 0))
                    assert int.from_bytes(entry.key[:prefix], "big") == span.key_group
                    assert key_type.key_group(key, case.max_parallelism) == span.key_group
                    checked += 1
    manifest = load_manifest(case.fixture)
    assert checked == sum(
        sum(op["entry_counts"].values()) for op in manifest["operators"] if op["uid"] in KEYED_UIDS
    )


def test_flink_refuses_the_output_under_the_old_max_parallelism(outcome: dict[str, Any]) -> None:
    result = outcome["old_max"]
    assert not result["ok"]
    assert "Max parallelism mismatch" in result["error"]
    assert "with max parallelism 256 to new program with max parallelism 128" in result["error"]


def test_back_to_the_old_max_parallelism_gives_the_same_state(
    outcome: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """128 → 256 → 128: `diff` finds every entry of the original, nothing else."""
    there = outcome["outputs"][CASES[0].id]
    back = tmp_path / "back"
    rescale(plan_rescale(open_savepoint(str(there)), 2, max_parallelism=128), str(back))
    with pytest.raises(SystemExit) as exit_info:
        main(["diff", "--no-spark", str(fixture_savepoint(CASES[0].fixture)), str(back)])
    assert exit_info.value.code == 0, capsys.readouterr().out
