"""`statectl upgrade`, proven by real Flink: the values job's savepoints written by Flink 1.20.3
and 1.15.4 (Kryo collections, a POJO with List, Map and Set fields in keyed, list and broadcast
state; hashmap canonical and RocksDB native), which Flink 2.3.0 refuses or restores wrong as
they are (tests/flink/test_upgrade_truth.py), upgraded by statectl and restored by the same job
built against Flink 2.3.0: every value equals what 1.x wrote (its dumper's truth), and every key
is where the job looks for it. The user class Kryo wrote field by field cannot be converted
without the job's classes: dropped here (`--drop-unconvertible`), so the job starts it empty.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import statectl
from tests.flink import harness
from tests.operations.test_state_edits_e2e import _ok, assert_equal, truth

pytestmark = pytest.mark.flink

SOURCES = [
    (version, kind)
    for version in ("1.20.3", "1.15.4")
    for kind in ("hashmap-canonical", "rocksdb-native")
]
UNCONVERTIBLE = "kryo-custom"


@pytest.fixture(scope="module")
def restored(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], Any]:
    root = tmp_path_factory.mktemp("upgrade")
    requests = []
    for version, kind in SOURCES:
        out = root / f"{version}-{kind}"
        source = harness.VALUES_FIXTURES / f"{version}-{kind}" / "savepoint"
        report = statectl.upgrade(str(source), str(out), drop_unconvertible=True)
        assert [s.state for s in report.dropped] == [UNCONVERTIBLE]
        requests.append({"savepoint": str(out), "out": str(root / f"restored-{version}-{kind}")})
    results = harness.restore_values("2.3.0", requests)
    return dict(zip(SOURCES, results, strict=True))


@pytest.mark.parametrize(("version", "kind"), SOURCES)
def test_flink_2_restores_what_1x_wrote(
    restored: dict[tuple[str, str], Any], version: str, kind: str
) -> None:
    lines = _ok(restored[version, kind])
    expected = [line for line in truth(version, kind) if line["state"] != UNCONVERTIBLE]
    assert_equal(lines, expected)


@pytest.mark.parametrize(("version", "kind"), SOURCES)
def test_the_upgraded_savepoint_checks_clean(tmp_path: Path, version: str, kind: str) -> None:
    source = harness.VALUES_FIXTURES / f"{version}-{kind}" / "savepoint"
    out = tmp_path / "out"
    statectl.upgrade(str(source), str(out), drop_unconvertible=True)
    upgraded = statectl.open(str(out))
    assert upgraded.metadata_version == 6
    assert upgraded.check_upgrade().ok
    assert upgraded.verify(deep=True).ok
