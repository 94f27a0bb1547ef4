"""A new subtask inside one old RocksDB instance gets a copy of it clipped by RocksDB
(`InstanceWriter.adopt`): only the rows of the key groups it takes, even when the old
instance's files hold rows of key groups its handle does not own (as after a rescale in Flink)."""

from __future__ import annotations

import uuid
from pathlib import Path

from statectl.formats.handles import IncrementalKeyedHandle
from statectl.operations.rescale.job import rescale
from statectl.operations.rescale.plan import plan_rescale
from statectl.savepoint import native
from statectl.savepoint.reader import open_savepoint
from tests.conftest import fixture_savepoint
from tests.operations.test_verify_native_range import _narrowed


def _rows_by_key_group(sp_url: str, uid: str, index: int) -> dict[int, int]:
    sp = open_savepoint(sp_url)
    subtask = next(s for s in sp.subtasks(sp.find_operator(uid)) if s.index == index)
    handle = subtask.managed_keyed_state
    assert isinstance(handle, IncrementalKeyedHandle)
    rows: dict[int, int] = {}
    with native.opened(native.native_instance(sp, handle, uid)) as db:
        for name in db.column_families():
            for key in db.db.get_column_family(name).keys(from_key=b""):
                rows[key[0]] = rows.get(key[0], 0) + 1
    return rows


def test_a_clipped_copy_keeps_only_the_owned_key_groups(tmp_path: Path) -> None:
    """The narrowed input's subtask 0 owns 0–31 but its files hold 0–63; at parallelism 4 the
    new subtask 0 (0–31) is a clipped copy of it: exactly the rows of 0–31."""
    source = _narrowed(tmp_path)
    output = f"memory://statectl-tests/{uuid.uuid4().hex}/p4"  # runs in this process
    rescale(plan_rescale(open_savepoint(str(source)), 4), output)
    original = _rows_by_key_group(str(fixture_savepoint("rocksdb_native_full")), "keyed-str", 0)
    clipped = _rows_by_key_group(output, "keyed-str", 0)
    assert clipped == {kg: n for kg, n in original.items() if kg <= 31}
    assert sum(clipped.values()) > 0 and max(original) > 31


def test_the_copy_is_clipped_to_what_the_old_instance_owns(tmp_path: Path) -> None:
    """At parallelism 2 the new subtask 0 (0–63) reads only the old subtask 0, which owns
    0–31 (subtask 1 claims 64–127 here): rows of 32–63 in its files are not the state."""
    source = _narrowed(tmp_path, second=(64, 64))
    output = f"memory://statectl-tests/{uuid.uuid4().hex}/p2"
    rescale(plan_rescale(open_savepoint(str(source)), 2), output)
    original = _rows_by_key_group(str(fixture_savepoint("rocksdb_native_full")), "keyed-str", 0)
    assert _rows_by_key_group(output, "keyed-str", 0) == {
        kg: n for kg, n in original.items() if kg <= 31
    }
