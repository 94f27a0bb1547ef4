"""Flink 2.3.0 restores the committed 1.x compat savepoints with exactly the state written.

tests/fixtures/compat/1.*-*/ were written by Flink 1.15–1.20 with the compat job
(tests/flink/compat/src), which has the topology, uids, state names and serializers of the 2.x
FixtureJob. Here RestoreCheck on Flink 2.3.0 (the 2.x job) restores every one of them, all in one
JVM, at its own parallelism and backend, and its dump must equal the manifest's `state` (the dump
Flink 1.x took while writing the savepoint). This is what backs `statectl upgrade --check` saying
"ok" for every state of these savepoints
(tests/operations/test_upgrade_check.py::test_no_alarm_on_states_of_plain_types).

1.18.1-hashmap-compressed is left out, as there: Flink 1.18.1 wrote operator-state offsets that
no reader can split (FLINK-34063); statectl refuses it and Flink 1.18.1 cannot restore it either.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.flink import harness
from tests.flink.harness import RestoreRequest

pytestmark = pytest.mark.flink

REFUSED = {"1.18.1-hashmap-compressed"}  # FLINK-34063
FIXTURES = sorted(
    p.name
    for p in harness.COMPAT_FIXTURES.iterdir()
    if p.name.startswith("1.") and p.name not in REFUSED
)
STATEFUL = ["bcast", "keyed-long", "keyed-str", "opstate"]


def fixture_dir(name: str) -> Path:
    return harness.COMPAT_FIXTURES / name


@pytest.fixture(scope="module")
def restored() -> dict[str, dict[str, Any]]:
    """Every fixture restored by Flink 2.3.0's RestoreCheck in one JVM (one `restore_check`)."""
    requests = []
    for name in FIXTURES:
        m = harness.load_manifest(fixture_dir(name))
        requests.append(
            RestoreRequest(
                harness.snapshot_path(fixture_dir(name)),
                m["parallelism"],
                max_parallelism=m["max_parallelism"],
                backend=m["backend"],
            )
        )
    results = harness.restore_check(requests, version=harness.FLINK_VERSION)
    return dict(zip(FIXTURES, results, strict=True))


def test_every_1x_compat_fixture_is_covered() -> None:
    versions = {name.split("-", 1)[0] for name in FIXTURES}
    assert versions == {v for v in harness.COMPAT_VERSIONS if v.startswith("1.")}
    assert len(FIXTURES) == len(versions) * len(harness.COMPAT_KINDS) - len(REFUSED)


@pytest.mark.parametrize("name", FIXTURES)
def test_flink_2_restores_exactly_the_written_state(
    restored: dict[str, dict[str, Any]], name: str
) -> None:
    m = harness.load_manifest(fixture_dir(name))
    assert m["flink_version"].startswith("1.")
    result = restored[name]
    assert result["ok"], result["error"]
    assert result["restored_flags"] == dict.fromkeys(STATEFUL, True)
    assert harness.compare(m["state"], result["state"], m["operators"]) == []
    ops = result["state"]["operators"]
    for uid in STATEFUL:
        assert ops[uid]["parallelism"] == m["parallelism"], uid
        assert sorted(ops[uid]["subtasks"], key=int) == [str(i) for i in range(m["parallelism"])]
    # not vacuous: the compat job's 24 keys per keyed operator, all restored (by compare)
    for uid in ("keyed-str", "keyed-long"):
        assert len(harness.keyed_union(m["state"], uid)["cnt"]) == 24, uid
    expected_backend = "RocksDB" if m["backend"] == "rocksdb" else "Heap"
    assert all(c.startswith(expected_backend) for c in result["backend_classes"]), result
