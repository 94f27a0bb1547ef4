"""`statectl upgrade`, proven by real Flink: the values job's savepoints written by Flink 1.20.3
and 1.15.4 (Kryo collections, a POJO with List, Map and Set fields in keyed, list and broadcast
state; hashmap canonical and RocksDB native), which Flink 2.3.0 refuses or restores wrong as
they are (tests/flink/test_upgrade_truth.py), upgraded by statectl and restored by the same job
built against Flink 2.3.0: every value equals what 1.x wrote (its dumper's truth), and every key
is where the job looks for it. The user class Kryo wrote field by field cannot be read
without the job's classes: dropped (`--drop-unconvertible`, the job starts it empty), or, with
the job's jar (`--classpath`, built from the job's classes for that Flink version), read and
kept: every value then equals what 1.x wrote, that state's too.
"""

from __future__ import annotations

import zipfile
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


def job_jar(version: str, root: Path) -> Path:
    """The values job's classes as built for Flink `version`, as a jar: what a user has."""
    classes = harness.compile_values(version)
    jar = root / f"job-{version}.jar"
    if not jar.exists():
        with zipfile.ZipFile(jar, "w") as archive:
            for path in sorted(classes.rglob("*.class")):
                archive.write(path, path.relative_to(classes).as_posix())
    return jar


@pytest.fixture(scope="module")
def restored(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str, str], Any]:
    root = tmp_path_factory.mktemp("upgrade")
    requests, names = [], []
    for version, kind in SOURCES:
        source = harness.VALUES_FIXTURES / f"{version}-{kind}" / "savepoint"
        dropped = root / f"{version}-{kind}-dropped"
        report = statectl.upgrade(str(source), str(dropped), drop_unconvertible=True)
        assert [s.state for s in report.dropped] == [UNCONVERTIBLE]
        with_classes = root / f"{version}-{kind}-classes"
        jar = job_jar(version, root)
        report = statectl.upgrade(str(source), str(with_classes), classpath=[str(jar)])
        assert not report.dropped
        for name, out in (("dropped", dropped), ("classes", with_classes)):
            requests.append({"savepoint": str(out), "out": str(root / f"restored-{out.name}")})
            names.append((version, kind, name))
    results = harness.restore_values("2.3.0", requests)
    return dict(zip(names, results, strict=True))


@pytest.mark.parametrize(("version", "kind"), SOURCES)
def test_flink_2_restores_what_1x_wrote(
    restored: dict[tuple[str, str, str], Any], version: str, kind: str
) -> None:
    lines = _ok(restored[version, kind, "dropped"])
    expected = [line for line in truth(version, kind) if line["state"] != UNCONVERTIBLE]
    assert_equal(lines, expected)


@pytest.mark.parametrize(("version", "kind"), SOURCES)
def test_with_the_jobs_classes_nothing_is_dropped(
    restored: dict[tuple[str, str, str], Any], version: str, kind: str
) -> None:
    lines = _ok(restored[version, kind, "classes"])
    assert any(line["state"] == UNCONVERTIBLE for line in lines)
    assert_equal(lines, truth(version, kind))


@pytest.mark.parametrize(("version", "kind"), SOURCES)
def test_the_upgraded_savepoint_checks_clean(tmp_path: Path, version: str, kind: str) -> None:
    source = harness.VALUES_FIXTURES / f"{version}-{kind}" / "savepoint"
    out = tmp_path / "out"
    statectl.upgrade(str(source), str(out), drop_unconvertible=True)
    upgraded = statectl.open(str(out))
    assert upgraded.metadata_version == 6
    assert upgraded.check_upgrade().ok
    assert upgraded.verify(deep=True).ok
