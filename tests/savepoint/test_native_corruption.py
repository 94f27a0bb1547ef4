"""Damaged files of RocksDB native instances fail every reader, never shrink the state.

A flipped byte in a data block of an SST used to end rocksdict's scan early without an error
(`verify --deep` OK with fewer entries walked, `export`/`convert`/`rescale` writing fewer rows).
Flips are XOR 0xFF at deterministic offsets of the largest SST of keyed-str subtask 0: inside the
first data block (which starts at offset 0 of a block-based table), on a row's bytes, and at 25%,
50% and 75% of the file. MANIFEST, CURRENT and OPTIONS damage and hostile local file names in
`_metadata` are covered too.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

from statectl.errors import FormatError
from statectl.formats.handles import IncrementalKeyedHandle, LocalFile
from statectl.savepoint import native
from statectl.savepoint.reader import open_savepoint
from tests.conftest import run_cli
from tests.reliability import corpus

NATIVE_SAVEPOINTS = ["rocksdb_native_full", "rocksdb_native_incremental"]
UID = "keyed-str"


def _handle(sp: Path) -> IncrementalKeyedHandle:
    handle = corpus.subtask(corpus.load(sp), UID, 0).managed_keyed_state
    assert isinstance(handle, IncrementalKeyedHandle)
    return handle


def _files(sp: Path) -> dict[str, Path]:
    """Local name -> the file in the savepoint folder, for keyed-str subtask 0."""
    handle = _handle(sp)
    return {f.local_path: sp / f.handle.relative_path for f in handle.shared + handle.private}  # type: ignore[union-attr]


def _largest_sst(sp: Path) -> tuple[str, Path]:
    ssts = [(name, path) for name, path in _files(sp).items() if name.endswith(".sst")]
    return min(ssts, key=lambda item: (-item[1].stat().st_size, item[0]))


def _flip(path: Path, position: int) -> None:
    data = bytearray(path.read_bytes())
    data[position] ^= 0xFF
    path.write_bytes(bytes(data))


def _row_byte(data: bytes) -> int:
    """A byte of a row: the key text "k29" (a string key; Snappy keeps short literals as is)."""
    return data.index(b"k29") + 1


SST_SPOTS = {
    "data-block": lambda data: 8,
    "row": _row_byte,
    "25%": lambda data: len(data) // 4,
    "50%": lambda data: len(data) // 2,
    "75%": lambda data: len(data) * 3 // 4,
}


def _damaged_sst(tmp: Path, fixture: str, spot: str) -> tuple[Path, str, Path]:
    """A copy of `fixture` with one byte of its largest SST flipped: (savepoint, name, file)."""
    sp = corpus.copy_fixture(fixture, tmp)
    name, path = _largest_sst(sp)
    _flip(path, SST_SPOTS[spot](path.read_bytes()))
    return sp, name, path


def _instance(sp: Path) -> native.NativeInstance:
    opened = open_savepoint(str(sp))
    subtask = next(iter(opened.subtasks(opened.find_operator(UID))))
    handle = subtask.managed_keyed_state
    assert isinstance(handle, IncrementalKeyedHandle)
    return native.native_instance(opened, handle, UID)


def _read_everything(instance: native.NativeInstance) -> None:
    _, header = native.meta_header(instance)
    states = [(s.name, i) for i, s in enumerate(header.states)]
    list(native.read_blocks(instance, states, 0, 127, 1))


# --- the reading layer -------------------------------------------------------------------


@pytest.mark.parametrize("spot", SST_SPOTS)
@pytest.mark.parametrize("fixture", NATIVE_SAVEPOINTS)
def test_a_damaged_sst_fails_counting_and_reading_naming_the_sst(
    fixture: str, spot: str, tmp_path: Path
) -> None:
    sp, name, path = _damaged_sst(tmp_path, fixture, spot)
    instance = _instance(sp)
    expected = (
        f"{instance.description}: file {name} is corrupt (Corruption: block checksum mismatch"
    )
    for read in (lambda: native.count_entries(instance, 1), lambda: _read_everything(instance)):
        with pytest.raises(FormatError) as info:
            read()
        assert info.value.source == str(path)
        assert info.value.message.startswith(expected), info.value.message
        assert "statectl-rocksdb-" not in info.value.message  # no working-folder paths


def test_pristine_instances_still_count_every_entry() -> None:
    from tests.conftest import fixture_savepoint

    instance = _instance(fixture_savepoint("rocksdb_native_full"))
    assert native.count_entries(instance, 1) == {
        "cnt": 17,
        "lst": 17,
        "mp": 33,
        "_timer_state/processing_user-timers": 26,
        "_timer_state/event_user-timers": 12,
    }


@pytest.mark.parametrize(
    ("kind", "position", "problem"),
    [
        ("MANIFEST", 0.5, "is corrupt (Corruption: checksum mismatch The file MANIFEST-"),
        ("CURRENT", 0.0, "is corrupt (Corruption: CURRENT file corrupted)"),
    ],
)
def test_a_damaged_manifest_or_current_names_it(
    kind: str, position: float, problem: str, tmp_path: Path
) -> None:
    sp = corpus.copy_fixture("rocksdb_native_full", tmp_path)
    name, path = next((n, p) for n, p in _files(sp).items() if n.startswith(kind))
    _flip(path, int(path.stat().st_size * position))
    instance = _instance(sp)
    with pytest.raises(FormatError) as info:
        native.count_entries(instance, 1)
    assert info.value.source == str(path)
    assert info.value.message.startswith(f"{instance.description}: file {name} {problem}")


def _options_file(sp: Path) -> tuple[str, Path]:
    return next((n, p) for n, p in _files(sp).items() if n.startswith("OPTIONS"))


def _flip_in_options(
    sp: Path, text: bytes, offset: int, section: bytes = b"[DBOptions]"
) -> tuple[str, Path, int]:
    """Flip (XOR 0x5A) the byte at `offset` of the first `text` after `section`; its line."""
    name, path = _options_file(sp)
    data = bytearray(path.read_bytes())
    position = data.index(text, data.index(section)) + offset
    data[position] ^= 0x5A
    path.write_bytes(bytes(data))
    return name, path, data[:position].count(b"\n") + 1


def test_a_damaged_options_section_is_refused_before_rocksdb_crashes(tmp_path: Path) -> None:
    """RocksDB (through rocksdict) segfaults on this flip: run in a child so the old code fails
    the test instead of killing the session."""
    sp = corpus.copy_fixture("rocksdb_native_full", tmp_path)
    section = b'[TableOptions/BlockBasedTable "_timer_state/event_user-timers"]'
    name, path, line = _flip_in_options(sp, section, 2)
    code = "from statectl.cli.main import main; main()"
    argv = [sys.executable, "-c", code, "verify", "--deep", str(sp)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, (done.returncode, done.stderr)
    damaged = section[:2] + bytes([section[2] ^ 0x5A]) + section[3:]
    expected = (
        f"{path}: operator {UID}, subtask 0: {UID}: RocksDB instance {_handle(sp).backend_id}: "
        f"{name} line {line}: unknown section {damaged.decode()!r}"
    )
    assert expected in done.stdout.splitlines(), done.stdout


def test_a_damaged_list_delimiter_is_refused(tmp_path: Path) -> None:
    """The flip changes the delimiter list state's elements are merged with: every row reads,
    but list values come back different."""
    sp = corpus.copy_fixture("rocksdb_native_full", tmp_path)
    name, path, line = _flip_in_options(sp, b"delimiter=,;", len(b"delimiter="))
    instance = _instance(sp)
    with pytest.raises(FormatError) as info:
        native.count_entries(instance, 1)
    assert info.value.source == str(path)
    assert info.value.message == (
        f"{instance.description}: {name} line {line}: list state's merge operator joins with "
        "'v', Flink's with ','"
    )


def test_a_lost_merge_operator_fails_the_scan(tmp_path: Path) -> None:
    """An unknown merge operator name is ignored by RocksDB: list rows then fail mid-scan."""
    sp = corpus.copy_fixture("rocksdb_native_full", tmp_path)
    _flip_in_options(sp, b"id=StringAppendTESTOperator", len(b"id="), b'[CFOptions "lst"]')
    instance = _instance(sp)
    with pytest.raises(FormatError) as info:
        _read_everything(instance)
    assert info.value.source == instance.description
    assert info.value.message == (
        "RocksDB cannot read the rows (Invalid argument: merge_operator_ must be set.)"
    )


def test_an_sst_the_manifest_does_not_list_is_refused(tmp_path: Path) -> None:
    """Its rows would be dropped silently: the MANIFEST lost the record that adds it."""
    sp = corpus.copy_fixture("rocksdb_native_full", tmp_path)
    md = corpus.load(sp)
    handle = _handle(sp)
    sst = next(f for f in handle.private if f.local_path.endswith(".sst"))
    new = dataclasses.replace(
        handle, private=(*handle.private, LocalFile("000099.sst", sst.handle))
    )
    corpus.save(sp, corpus.with_subtask(md, UID, 0, managed_keyed_state=new))
    instance = _instance(sp)
    manifest = _files(sp)["MANIFEST-000005"]
    with pytest.raises(FormatError) as info:
        native.count_entries(instance, 1)
    assert info.value.source == str(manifest)
    assert info.value.message == (
        f"{instance.description}: the MANIFEST does not list 000099.sst, a file of the handle "
        "(corrupt MANIFEST?)"
    )


# --- local names from `_metadata` ----------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    ["/escape.sst", "../escape.sst", "sub/000018.sst", "..", ".", "", "0000\x0018.sst", "a\\b.sst"],
)
def test_a_local_name_that_is_not_a_plain_file_name_is_refused(name: str, tmp_path: Path) -> None:
    sp = corpus.copy_fixture("rocksdb_native_full", tmp_path)
    handle = _handle(sp)
    renamed = dataclasses.replace(handle.private[0], local_path=name)
    new = dataclasses.replace(handle, private=(renamed, *handle.private[1:]))
    corpus.save(sp, corpus.with_subtask(corpus.load(sp), UID, 0, managed_keyed_state=new))
    with pytest.raises(FormatError) as info:
        _instance(sp)
    assert str(info.value) == (
        f"{UID}: RocksDB instance {handle.backend_id}: file entry {name!r} is not a plain file name"
    )


def test_a_local_name_given_twice_is_refused(tmp_path: Path) -> None:
    sp = corpus.copy_fixture("rocksdb_native_full", tmp_path)
    handle = _handle(sp)
    twin = dataclasses.replace(handle.private[1], local_path=handle.private[0].local_path)
    new = dataclasses.replace(handle, private=(handle.private[0], twin, *handle.private[2:]))
    corpus.save(sp, corpus.with_subtask(corpus.load(sp), UID, 0, managed_keyed_state=new))
    with pytest.raises(FormatError) as info:
        _instance(sp)
    assert str(info.value) == (
        f"{UID}: RocksDB instance {handle.backend_id}: file entry "
        f"{handle.private[0].local_path!r} appears twice"
    )


def test_a_hostile_local_name_fails_the_cli_in_one_line(tmp_path: Path) -> None:
    sp = corpus.copy_fixture("rocksdb_native_full", tmp_path / "input")
    handle = _handle(sp)
    renamed = dataclasses.replace(handle.private[0], local_path="../../escape.sst")
    new = dataclasses.replace(handle, private=(renamed, *handle.private[1:]))
    corpus.save(sp, corpus.with_subtask(corpus.load(sp), UID, 0, managed_keyed_state=new))
    code, stdout, stderr = run_cli("inspect", "--deep", str(sp))
    assert (code, stdout) == (1, "")
    assert stderr == (
        f"statectl: error: subtask 0: RocksDB instance {handle.backend_id}: "
        "file entry '../../escape.sst' is not a plain file name\n"
    )
    assert not (tmp_path / "escape.sst").exists()


# --- every command -------------------------------------------------------------------------


def _assert_one_line(code: int, stdout: str, stderr: str, culprit: Path, name: str) -> None:
    assert (code, stdout) == (1, ""), (code, stdout, stderr)
    assert stderr.count("\n") == 1, stderr
    assert stderr.startswith(f"statectl: error: {culprit}: "), stderr
    assert f"file {name} is corrupt (Corruption: block checksum mismatch" in stderr, stderr


LOCAL_COMMANDS = {
    "inspect --deep": lambda sp, _, out: ["inspect", "--deep", str(sp)],
    "export": lambda sp, _, out: ["export", str(sp), "-o", str(out / "out.parquet")],
    "diff A B": lambda sp, pristine, _: ["diff", "--no-spark", str(sp), str(pristine)],
    "diff B A": lambda sp, pristine, _: ["diff", "--no-spark", str(pristine), str(sp)],
}


@pytest.mark.parametrize("spot", ["data-block", "75%"])
@pytest.mark.parametrize("command", LOCAL_COMMANDS)
def test_local_commands_fail_on_a_damaged_sst(command: str, spot: str, tmp_path: Path) -> None:
    sp, name, path = _damaged_sst(tmp_path / "input", "rocksdb_native_full", spot)
    pristine = corpus.copy_fixture("rocksdb_native_full", tmp_path / "pristine")
    out = tmp_path / "out"
    out.mkdir()
    code, stdout, stderr = run_cli(*LOCAL_COMMANDS[command](sp, pristine, out))
    _assert_one_line(code, stdout, stderr, path, name)
    assert list(out.iterdir()) == []


@pytest.mark.parametrize("spot", ["data-block", "row", "75%"])
def test_verify_deep_reports_a_damaged_sst(spot: str, tmp_path: Path) -> None:
    sp, name, path = _damaged_sst(tmp_path, "rocksdb_native_incremental", spot)
    code, stdout, stderr = run_cli("verify", "--deep", str(sp))
    assert code == 1, (stdout, stderr)
    prefix = f"{path}: operator {UID}, subtask 0: {UID}: RocksDB instance "
    findings = [line for line in stdout.splitlines() if line.startswith(prefix)]
    assert len(findings) == 1, stdout
    assert f": file {name} is corrupt (Corruption: block checksum mismatch" in findings[0]


SPARK_COMMANDS = {
    "convert": lambda sp, out: ["convert", str(sp), "-o", str(out / "result")],
    "rescale -p 3": lambda sp, out: ["rescale", str(sp), "-o", str(out / "result"), "-p", "3"],
}


@pytest.mark.spark
@pytest.mark.parametrize("command", SPARK_COMMANDS)
def test_spark_commands_fail_on_a_damaged_sst(command: str, tmp_path: Path, spark: object) -> None:
    sp, name, path = _damaged_sst(tmp_path / "input", "rocksdb_native_full", "25%")
    out = tmp_path / "out"
    out.mkdir()
    code, stdout, stderr = run_cli(*SPARK_COMMANDS[command](sp, out))
    _assert_one_line(code, stdout, stderr, path, name)
    assert list(out.iterdir()) == []


@pytest.mark.parametrize("renamed", ["_timer_state/event_user-timers", "cnt"])
def test_a_state_renamed_in_the_meta_fails_every_reader(renamed: str, tmp_path: Path) -> None:
    """One flipped byte in the meta renames a state: its column family is then no state of the
    meta (a held-out fuzz run once saw verify --deep say OK and export drop those rows)."""
    sp = corpus.copy_fixture("rocksdb_native_full", tmp_path)
    meta = _handle(sp).meta
    assert meta is not None
    path = sp / meta.relative_path  # type: ignore[union-attr]
    data = path.read_bytes()
    name = renamed.encode()
    assert data.count(name) == 1
    renamed_data = bytearray(data)
    renamed_data[data.index(name) + len(name) - 1] ^= 0x01  # "…timers" becomes "…timerr"
    path.write_bytes(bytes(renamed_data))
    problem = f"column family {renamed!r} is no state of its meta"
    code, out, _ = run_cli("verify", "--deep", str(sp))
    assert code == 1 and problem in out, out
    code, _, err = run_cli("export", str(sp), "-o", str(tmp_path / "x.parquet"))
    assert code != 0 and problem in err and len(err.strip().splitlines()) == 1, err
