"""A native rescale that only changes the parallelism assembles each new RocksDB instance from
the old instances' SST files (`savepoint/native_files.py`): entry by entry what the row path
writes, clean (no key outside, no range tombstone), and the report counts the files.

The source: the Flink 2.3 fixture `rocksdb_native_full` rescaled to 4, `keyed-str`'s instances
replaced by multi-level ones written with rocksdict (small memtables and files, keys written in
no key order: L0 files over the whole range, and L1+ below them), as a long-running job's are.
"""

from __future__ import annotations

import dataclasses
import random
import shutil
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from statectl.errors import FormatError
from statectl.execution.engine import LocalEngine
from statectl.formats import java_types, rocksdb_manifest
from statectl.formats.handles import IncrementalKeyedHandle, LocalFile, RelativeFileHandle
from statectl.formats.key_groups import key_group_range
from statectl.formats.metadata import write_metadata
from statectl.operations.rescale.job import RescaleReport, rescale
from statectl.operations.rescale.plan import RescalePlan, plan_rescale
from statectl.savepoint import native
from statectl.savepoint.native_writer import table_settings
from statectl.savepoint.reader import open_savepoint
from tests.conftest import fixture_savepoint

UID = "keyed-str"
KEYS = 16000
TIMERS = ("_timer_state/processing_user-timers", "_timer_state/event_user-timers")
FAMILIES = ("cnt", "lst", "mp", *TIMERS)


def _key(index: int, max_parallelism: int) -> tuple[int, bytes]:
    key_type = java_types.key_type_for_serializer(
        "org.apache.flink.api.common.typeutils.base.StringSerializer"
    )
    assert key_type is not None
    key = f"key-{index:07d}"
    group = key_type.key_group(key, max_parallelism)
    return group, bytes([group]) + key_type.write(key) + b"\x00"  # VoidNamespace


def _write_instance(folder: Path, keys: list[bytes], seed: int) -> None:
    from rocksdict import Options, Rdict, WriteOptions

    def options() -> Options:
        each = Options(raw_mode=True)
        table_settings(each)
        each.set_write_buffer_size(64 << 10)
        each.set_target_file_size_base(64 << 10)
        each.set_max_bytes_for_level_base(256 << 10)
        each.set_level_zero_file_num_compaction_trigger(8)
        return each

    db_options = options()
    db_options.create_if_missing(True)
    db_options.create_missing_column_families(True)
    db = Rdict(str(folder), options=db_options, column_families={n: options() for n in FAMILIES})
    no_wal = WriteOptions()
    no_wal.disable_wal = True
    rng = random.Random(seed)
    order = list(keys)
    rng.shuffle(order)
    cnt, lst, mp = (db.get_column_family(n) for n in ("cnt", "lst", "mp"))
    for family in (cnt, lst, mp):
        family.set_write_options(no_wal)
    for n, key in enumerate(order + order[:50]):  # the last 50 overwritten: fresh L0 files
        if n == len(order):  # the compactions so far done: levels below L0
            _wait_for_compactions(db)
        cnt[key] = rng.getrandbits(64).to_bytes(8, "big")
        lst[key] = b",".join(rng.randbytes(8) for _ in range(12))
        mp[key + b"\x03u0"] = b"\x00" + rng.randbytes(8)
    db.flush()
    _wait_for_compactions(db)  # rocksdict's close does not wait for them
    db.close()
    # What a checkpoint of it holds (a compaction's inputs may not be deleted yet)
    manifest_name = (folder / "CURRENT").read_text().strip()
    manifest = rocksdb_manifest.read((folder / manifest_name).read_bytes())
    live = {f"{sst.number:06d}.sst" for ssts in manifest.families.values() for sst in ssts}
    options = max(folder.glob("OPTIONS-*"), key=lambda p: int(p.name.rsplit("-", 1)[1]))
    for path in folder.iterdir():
        if path.name not in {*live, manifest_name, "CURRENT", options.name}:
            path.unlink()


def _wait_for_compactions(db: Any) -> None:
    for _ in range(2000):
        busy = db.property_int_value("rocksdb.num-running-compactions") or 0
        for name in FAMILIES:
            family = db.get_column_family(name)
            busy += family.property_int_value("rocksdb.compaction-pending") or 0
        if not busy:
            return
        time.sleep(0.005)


def _multi_level_p4(tmp: Path) -> Path:
    p4 = tmp / "p4"
    rescale(plan_rescale(open_savepoint(str(fixture_savepoint("rocksdb_native_full"))), 4), str(p4))
    sp = open_savepoint(str(p4))
    op = sp.find_operator(UID)
    keys = sorted(_key(i, op.max_parallelism) for i in range(KEYS))
    subtasks = []
    for subtask in op.subtasks or ():
        handle = subtask.managed_keyed_state
        assert isinstance(handle, IncrementalKeyedHandle)
        first, last = key_group_range(op.max_parallelism, op.parallelism, subtask.index)
        db = tmp / f"db-{subtask.index}"
        _write_instance(db, [k for g, k in keys if first <= g <= last], subtask.index)
        files = []
        for path in sorted(db.iterdir()):
            name = str(uuid.uuid4())
            size = path.stat().st_size
            shutil.move(path, p4 / name)
            files.append(LocalFile(path.name, RelativeFileHandle(name, size)))
        for old in handle.private:
            assert isinstance(old.handle, RelativeFileHandle)
            (p4 / old.handle.relative_path).unlink()
        new = dataclasses.replace(handle, private=tuple(files), shared=())
        subtasks.append(dataclasses.replace(subtask, managed_keyed_state=new))
    operators = tuple(
        dataclasses.replace(o, subtasks=tuple(subtasks)) if o is op else o for o in sp.operators
    )
    (p4 / "_metadata").write_bytes(
        write_metadata(dataclasses.replace(sp.metadata, operators=operators))
    )
    return p4


@pytest.fixture(scope="module")
def multi_level(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _multi_level_p4(tmp_path_factory.mktemp("by-files"))


def _instances(url: str) -> list[tuple[native.NativeInstance, tuple[int, int]]]:
    sp = open_savepoint(url)
    op = sp.find_operator(UID)
    out = []
    for subtask in sp.subtasks(op):
        handle = subtask.managed_keyed_state
        assert isinstance(handle, IncrementalKeyedHandle) and handle.key_groups
        out.append((native.native_instance(sp, handle, UID), handle.key_groups))
    return out


def _levels(instance: native.NativeInstance) -> set[int]:
    paths = {f.local_path: f.stream.read(0, f.stream.size) for f in instance.files}
    manifest = rocksdb_manifest.read(paths[paths["CURRENT"].decode().strip()])
    return {sst.level for ssts in manifest.families.values() for sst in ssts}


def _range_deletions(db: native.OpenInstance, family: str) -> int:
    text = db.db.get_column_family(family).property_value("rocksdb.aggregated-table-properties")
    for part in (text or "").split(";"):
        if "range deletions" in part:
            return int(part.split("=")[1])
    return 0


def test_the_source_has_several_levels(multi_level: Path) -> None:
    for instance, _ in _instances(str(multi_level)):
        levels = _levels(instance)
        assert 0 in levels and len(levels) >= 2, levels


@pytest.mark.parametrize("parallelism", [3, 2])
def test_rescaled_by_files_equals_the_row_path(
    multi_level: Path, parallelism: int, tmp_path: Path
) -> None:
    before = {p.name: p.read_bytes() for p in multi_level.iterdir()}
    by_files = rescale(
        plan_rescale(open_savepoint(str(multi_level)), parallelism), str(tmp_path / "f")
    )
    by_rows = rescale(
        _by_rows(plan_rescale(open_savepoint(str(multi_level)), parallelism)), str(tmp_path / "r")
    )
    assert {p.name: p.read_bytes() for p in multi_level.iterdir()} == before  # untouched
    _assert_files_counted(by_files, by_rows, parallelism)
    entries = 0
    for (mine, key_groups), (theirs, _) in zip(
        _instances(str(tmp_path / "f")), _instances(str(tmp_path / "r")), strict=True
    ):
        with native.opened(mine) as ours, native.opened(theirs) as reference:
            for family in FAMILIES:
                rows = list(ours.db.get_column_family(family).items())
                assert rows == list(reference.db.get_column_family(family).items()), family
                assert all(key_groups[0] <= key[0] <= key_groups[1] for key, _ in rows)
                assert _range_deletions(ours, family) == 0
                entries += len(rows)
    assert entries == 3 * KEYS


def _by_rows(plan: RescalePlan) -> RescalePlan:
    """The plan with every native instance written from rows: the reference."""

    def rows(target: Any) -> Any:
        keyed = target.keyed
        if keyed is None or keyed.output is None:
            return target
        output = dataclasses.replace(keyed.output, by_files=False)
        return dataclasses.replace(target, keyed=dataclasses.replace(keyed, output=output))

    operators = tuple(
        op if op.targets is None else dataclasses.replace(op, targets=tuple(map(rows, op.targets)))
        for op in plan.operators
    )
    return dataclasses.replace(plan, operators=operators)


def _assert_files_counted(by_files: RescaleReport, by_rows: RescaleReport, q: int) -> None:
    files = next(op for op in by_files.operators if op.uid == UID).sst_files
    assert (
        files is not None
        and next(op for op in by_rows.operators if op.uid == UID).sst_files is None
    )
    assert files.carried > 0 and files.carried_bytes > 0
    if q == 3:  # boundaries cut the old instances: their straddling files are rewritten
        assert files.rewritten > 0 and files.written > 0
    else:  # 4 → 2: no boundary cuts an old instance, no file is left out
        assert files.left_out == 0
    if q == 2:  # two whole old instances per new one: one's L0 compacted down (Flink 1.x)
        assert files.pushed_down > 0 and files.rewritten > 0


def test_a_damaged_carried_file_fails_as_the_row_path_does(
    multi_level: Path, tmp_path: Path
) -> None:
    """4 → 2 carries every file of the first old instance whole, unread by RocksDB: its block
    checksums are what finds the damage, and the rows path then names the file."""
    damaged = tmp_path / "damaged"
    shutil.copytree(multi_level, damaged)
    handle = next(iter(open_savepoint(str(damaged)).find_operator(UID).subtasks or ()))
    handle_state = handle.managed_keyed_state
    assert isinstance(handle_state, IncrementalKeyedHandle)
    ssts = [f.handle for f in handle_state.private if f.local_path.endswith(".sst")]
    assert all(isinstance(each, RelativeFileHandle) for each in ssts)
    path = max((damaged / each.relative_path for each in ssts), key=lambda p: p.stat().st_size)  # type: ignore[union-attr]
    data = bytearray(path.read_bytes())
    data[8] ^= 0xFF  # the first data block
    path.write_bytes(bytes(data))
    with pytest.raises(FormatError) as info:
        rescale(plan_rescale(open_savepoint(str(damaged)), 2), str(tmp_path / "out"))
    assert info.value.source == str(path)
    assert "block checksum mismatch" in info.value.message, info.value.message
    assert not (tmp_path / "out").exists()


def test_an_l0_compaction_that_meets_damage_ends_and_the_row_path_names_the_file(
    multi_level: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """4 → 2 compacts one old instance's L0 files into the level below before the union. With
    a block of every L0 file damaged, RocksDB's compaction fails and stops its background
    work, L0 files left: the wait for it ends on RocksDB's background error (not at its
    timeout, lowered here from an hour so that a regression fails instead of hanging), and the
    row path then names a damaged file."""
    from statectl.savepoint import native_files

    damaged = tmp_path / "damaged"
    shutil.copytree(multi_level, damaged)
    paths = []
    for subtask in open_savepoint(str(damaged)).find_operator(UID).subtasks or ():
        handle = subtask.managed_keyed_state
        assert isinstance(handle, IncrementalKeyedHandle)
        files = {}
        for file in handle.private:
            assert isinstance(file.handle, RelativeFileHandle)
            files[file.local_path] = damaged / file.handle.relative_path
        manifest = rocksdb_manifest.read(files[files["CURRENT"].read_text().strip()].read_bytes())
        level0 = [sst for ssts in manifest.families.values() for sst in ssts if sst.level == 0]
        paths += [files[f"{sst.number:06d}.sst"] for sst in level0]
    assert paths
    for path in paths:
        data = bytearray(path.read_bytes())
        data[8] ^= 0xFF  # the first data block
        path.write_bytes(bytes(data))
    waits: list[str] = []
    wait_for_l0 = native_files._wait_for_l0

    def recorded(*args: Any) -> None:
        try:
            wait_for_l0(*args)
        except native_files.NotByFiles as exc:
            waits.append(str(exc))
            raise

    monkeypatch.setattr(native_files, "_wait_for_l0", recorded)
    monkeypatch.setattr(native_files, "_PUSH_DOWN_TIMEOUT", 60.0)
    with pytest.raises(FormatError) as info:
        plan = plan_rescale(open_savepoint(str(damaged)), 2)
        rescale(plan, str(tmp_path / "out"), engine=LocalEngine())  # here: the patches hold
    assert info.value.source in {str(path) for path in paths}
    assert "block checksum mismatch" in info.value.message, info.value.message
    assert waits and all(wait == "the L0 compaction failed" for wait in waits), waits
    assert not (tmp_path / "out").exists()
