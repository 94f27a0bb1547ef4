"""`native_writer.InstanceWriter`: one RocksDB instance in Flink's layout, read back by
`native.py` as any of Flink's."""

from __future__ import annotations

from pathlib import Path

import pytest

from statectl.errors import FormatError
from statectl.formats.handles import IncrementalKeyedHandle, RelativeFileHandle
from statectl.savepoint import native, native_writer
from statectl.savepoint.native_writer import InstanceWriter
from statectl.savepoint.storage import locate

FAMILIES = ("cnt", "_timer_state/event_user-timers")


def test_an_instance_reads_back_row_for_row(tmp_path: Path) -> None:
    rows = {0: [(b"\x05k1\x00", b"v1"), (b"\x07k2\x00", b"v2")], 1: [(b"\x06t\x00", b"")]}
    with InstanceWriter(FAMILIES, (5, 9), 1) as writer:
        for family, family_rows in rows.items():
            for key, value in family_rows:
                writer.put(family, key, value)
        handle = writer.finish(b"META", locate(str(tmp_path)), "op-00000-keyed", 7)
    assert (handle.code, handle.checkpoint_id, handle.key_groups) == (11, 7, (5, 9))
    assert handle.meta == RelativeFileHandle("op-00000-keyed-meta", 4)
    assert (tmp_path / "op-00000-keyed-meta").read_bytes() == b"META"
    kinds = [native.file_kind(f.local_path) for f in handle.private]
    assert kinds == ["SST", "SST", "MANIFEST", "CURRENT", "OPTIONS"]
    assert handle.shared == ()
    files = [handle.meta, *(f.handle for f in handle.private)]
    assert handle.checkpointed_size == sum(f.size for f in files)  # type: ignore[union-attr]
    assert _read_back(handle, tmp_path) == {
        FAMILIES[f]: family_rows for f, family_rows in rows.items()
    }


def test_an_empty_instance_has_every_column_family_and_no_sst(tmp_path: Path) -> None:
    with InstanceWriter(FAMILIES, (0, 3), 1) as writer:
        handle = writer.finish(b"M", locate(str(tmp_path)), "empty", 1)
    assert [native.file_kind(f.local_path) for f in handle.private] == [
        "MANIFEST",
        "CURRENT",
        "OPTIONS",
    ]


def test_a_column_family_without_rows_gets_no_sst(tmp_path: Path) -> None:
    with InstanceWriter(FAMILIES, (0, 3), 1) as writer:
        writer.put_rows(1, iter(()))
        writer.put_rows(0, iter([(b"\x01k", b"v")]))
        writer.put_rows(1, iter(()))
        handle = writer.finish(b"M", locate(str(tmp_path)), "one", 1)
    assert [native.file_kind(f.local_path) for f in handle.private].count("SST") == 1


def test_a_key_outside_the_range_is_refused(tmp_path: Path) -> None:
    with InstanceWriter(FAMILIES, (5, 9), 1) as writer, pytest.raises(FormatError) as raised:
        writer.put(0, b"\x0ak\x00", b"v")
    assert raised.value.message == "state 'cnt': key group 10 is outside the subtask's range 5–9"


def test_keys_must_ascend(tmp_path: Path) -> None:
    with InstanceWriter(FAMILIES, (0, 300), 2) as writer:
        writer.put(0, b"\x00\x05b", b"v")
        with pytest.raises(FormatError) as raised:
            writer.put(0, b"\x00\x05a", b"v")
    assert raised.value.message == (
        "state 'cnt': key 000561 comes after 000562 (keys must ascend; duplicated key?)"
    )


def test_the_working_folder_is_removed(tmp_path: Path) -> None:
    with InstanceWriter(FAMILIES, (0, 3), 1) as writer:
        writer.put(0, b"\x01k", b"v")
        folder = Path(writer.folder)
        assert folder.is_dir()
    assert not folder.exists()


def _read_back(handle: IncrementalKeyedHandle, tmp_path: Path) -> dict[str, list[tuple[bytes, bytes]]]:  # fmt: skip
    """Every column family's rows of the instance `handle` describes, its files under
    `tmp_path`."""
    from rocksdict import AccessType, Options, Rdict

    folder = tmp_path / "read"
    folder.mkdir()
    for local in handle.private:
        assert isinstance(local.handle, RelativeFileHandle)
        (folder / local.local_path).symlink_to(tmp_path / local.handle.relative_path)
    assert Rdict.list_cf(str(folder)) == ["default", *FAMILIES]
    db = Rdict(
        str(folder),
        options=Options(raw_mode=True),
        column_families={name: Options(raw_mode=True) for name in FAMILIES},
        access_type=AccessType.read_only(),
    )
    try:
        return {name: list(db.get_column_family(name).items()) for name in FAMILIES}
    finally:
        db.close()


def test_a_large_state_is_written_as_several_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """RocksDB holds an open file's index in memory: a file ends once it holds
    `SST_FILE_BYTES`, so a writer's memory does not grow with the state. Here every look at
    the size (each 8 rows of a run) ends the file: the first run's file ends on its last row,
    and the next run begins a new one."""
    monkeypatch.setattr(native_writer, "SST_FILE_BYTES", 0)
    monkeypatch.setattr(native_writer, "_SIZE_CHECK_ROWS", 8)
    rows = [(b"\x05" + n.to_bytes(4, "big"), n.to_bytes(100, "big")) for n in range(1000)]
    with InstanceWriter(FAMILIES, (5, 9), 1) as writer:
        for start in (0, 8, 300, 301):
            writer.put_rows(0, rows[start : {0: 8, 8: 300, 300: 301, 301: 1000}[start]])
        writer.put_rows(1, rows[:5])
        handle = writer.finish(b"META", locate(str(tmp_path)), "big", 7)
    kinds = [native.file_kind(f.local_path) for f in handle.private]
    assert kinds.count("SST") > 100
    assert _read_back(handle, tmp_path) == {FAMILIES[0]: rows, FAMILIES[1]: rows[:5]}


def test_keys_must_ascend_across_the_files_of_a_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(native_writer, "SST_FILE_BYTES", 0)
    monkeypatch.setattr(native_writer, "_SIZE_CHECK_ROWS", 2)
    rows = [(b"\x05a", b""), (b"\x05c", b""), (b"\x05b", b"")]  # a file ends after the 2nd
    writer = InstanceWriter(FAMILIES, (5, 9), 1)
    with writer, pytest.raises(FormatError, match="keys must ascend"):
        writer.put_rows(0, rows)
