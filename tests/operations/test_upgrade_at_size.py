"""`upgrade` of a state larger than Spark's memory: a Flink 1.20.3 savepoint of the values job
over 128 MiB (`bench.synthetic_upgrade`: the fixture's keyed entries, every byte as Flink
wrote it, cloned onto 48,000 keys), upgraded for Flink 2.x by tasks on an embedded Spark whose
JVM heap and Python workers' memory are smaller than it (`SMALL_SPARK`).

Flink 2.3 restores the output and reads every key of every state through its serializers (no
dump: one of a state this size would dwarf the test). Exactness is checked byte for byte: the
output's keyed files are the fixture's own upgrade (proven value by value against what Flink
1.20.3 wrote, in test_upgrade_e2e) cloned onto the same keys, so every key holds exactly what
its origin key holds after the upgrade, and every entry is there.
"""

from __future__ import annotations

import filecmp
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

import statectl
from bench import synthetic_upgrade
from statectl.formats.handles import KeyGroupsHandle, RelativeFileHandle
from statectl.savepoint.reader import open_savepoint
from tests.operations.test_value_edits_at_size import run_on_small_spark

pytestmark = [pytest.mark.spark, pytest.mark.flink]

KEYS = 48_000  # 3,000 clones of each of the fixture's 16 keys: 139 MB
MAX_PARALLELISM = 128  # the fixture's
STATES = 57  # of `values`, timers included: every one is cloned
DROPPED = "kryo-custom"  # a user class Kryo wrote field by field: unreadable without the job's jar


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Iterator[synthetic_upgrade.Built]:
    params = synthetic_upgrade.Params(KEYS)
    built = synthetic_upgrade.ensure(params, tmp_path_factory.mktemp("upgrade-at-size"))
    assert built.bytes > 128 << 20
    assert len(built.entries) == STATES
    yield built
    shutil.rmtree(built.path, ignore_errors=True)


def upgrade_on_small_spark(source: Path, out: Path) -> None:
    """`statectl.upgrade` in a child process, its tasks on a Spark of the small sizes."""
    run_on_small_spark(
        f"""
        report = statectl.upgrade({str(source)!r}, {str(out)!r}, drop_unconvertible=True,
                                  head_start=False)
        assert [s.state for s in report.dropped] == [{DROPPED!r}], report.dropped
        assert dict(report.written.tasks_run).keys() == {{"spark"}}, report.written.tasks_run
        """
    )


def keyed_files(path: Path) -> list[tuple[int, tuple[int, ...], Path]]:
    """(first key group, offsets, file) of each subtask of the `values` operator."""
    op = open_savepoint(str(path)).find_operator(synthetic_upgrade.OPERATOR)
    assert op.max_parallelism == MAX_PARALLELISM
    found = []
    for subtask in op.subtasks or ():
        handle = subtask.managed_keyed_state
        assert isinstance(handle, KeyGroupsHandle)
        assert isinstance(handle.delegate, RelativeFileHandle)
        found.append((handle.start_key_group, handle.offsets, path / handle.delegate.relative_path))
    return found


def assert_same_keyed_state(actual: Path, expected: Path) -> None:
    """The `values` operator's keyed files are the same bytes, subtask by subtask."""
    for (first, offsets, file), (first_expected, offsets_expected, file_expected) in zip(
        keyed_files(actual), keyed_files(expected), strict=True
    ):
        assert (first, offsets) == (first_expected, offsets_expected)
        assert filecmp.cmp(file, file_expected, shallow=False), f"{file} differs"


def test_an_upgrade_larger_than_spark_s_memory_restores_in_flink_2_exactly(
    source: synthetic_upgrade.Built, tmp_path: Path
) -> None:
    from tests.flink import harness

    upgraded = tmp_path / "upgraded"
    upgrade_on_small_spark(source.path, upgraded)

    small = tmp_path / "small"
    statectl.upgrade(str(synthetic_upgrade.FIXTURE), str(small), drop_unconvertible=True)
    expected = synthetic_upgrade.build(source.params, tmp_path / "expected", fixture=small)
    assert expected.entries == {s: n for s, n in source.entries.items() if s != DROPPED}
    assert_same_keyed_state(upgraded, expected.path)

    request = {"savepoint": str(upgraded), "out": str(tmp_path / "restored"), "dump": False}
    restored = harness.restore_values("2.3.0", [request])[0]
    assert restored["error"] is None
    assert (restored["unreachable"], restored["misplaced"]) == ([], [])
    timers = synthetic_upgrade.TIMERS
    pairs = sum(n for state, n in expected.holders.items() if not state.startswith(timers))
    assert restored["checked"] == pairs
