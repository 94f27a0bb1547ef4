"""`verify --deep` fails what Flink would not restore: a value or serializer snapshot of a type
statectl decodes completely that does not decode is corruption, one finding naming the file,
the state (and the key group for a value); a type statectl cannot decode is a note with the
count of its unchecked values. `export` keeps reading both, the values raw with their reason.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from statectl.formats.handles import IncrementalKeyedHandle, RelativeFileHandle
from statectl.savepoint import entries
from statectl.savepoint.reader import open_savepoint
from tests.conftest import fixture_savepoint, run_cli
from tests.reliability.corpus import keyed_handle, load, patch, subtask


def _copy(fixture: str, tmp: Path) -> Path:
    return Path(shutil.copytree(fixture_savepoint(fixture), tmp / "sp"))


def _flip(path: Path, position: int, mask: int = 0x01) -> None:
    patch(path, position, bytes((path.read_bytes()[position] ^ mask,)))


def _keyed_file(sp: Path, uid: str, index: int) -> Path:
    handle = keyed_handle(load(sp), uid, index)
    assert isinstance(handle.delegate, RelativeFileHandle)
    return sp / handle.delegate.relative_path


def _one_finding(sp: Path) -> str:
    code, out, err = run_cli("verify", "--deep", str(sp))
    assert code == 1, (out, err)
    (line,) = out.splitlines()
    return line


def _exported_raw(sp: Path, tmp: Path, state: str) -> str:
    """`export` still reads the savepoint: the state's line of its report (raw rows counted)."""
    code, out, err = run_cli("export", str(sp), "-o", str(tmp / "rows.parquet"))
    assert (code, err) == (0, "")
    return next(line for line in out.splitlines() if line.startswith(state + ":"))


def test_a_class_name_one_character_off_is_a_finding(tmp_path: Path) -> None:
    sp = _copy("hashmap_canonical_files", tmp_path)
    path = _keyed_file(sp, "keyed-str", 0)
    name_at = path.read_bytes().index(b"StringSerializer$StringSerializerSnapshot", 200)
    _flip(path, name_at + 7)  # StringSerializer → StringSdrializer: mp's map key serializer
    assert _one_finding(sp) == (
        f"{path}: operator keyed-str, subtask 0: state 'mp': map key serializer: no decoder for "
        "StringSdrializer: one character off StringSerializer (damaged)"
    )
    assert "(33 left raw: user_key: no decoder for StringSdrializer" in _exported_raw(
        sp, tmp_path, "keyed-str/mp"
    )


@pytest.mark.parametrize("field", [4, 12], ids=["composite-magic", "nested-magic"])
def test_an_unreadable_snapshot_is_a_finding(tmp_path: Path, field: int) -> None:
    """A flipped byte in mp's MapSerializerSnapshot after its class name and version: the
    layout statectl (and Flink) reads does not match, so where the snapshot ends, and where the
    states after it begin, cannot be told: verify's finding is the readers' error."""
    sp = _copy("hashmap_canonical_files", tmp_path)
    path = _keyed_file(sp, "keyed-str", 0)
    name = b"org.apache.flink.api.common.typeutils.base.MapSerializerSnapshot"
    _flip(path, path.read_bytes().index(name) + len(name) + field + 3)
    problem = (
        "keyed state header: MapSerializerSnapshot does not match its layout; its states cannot "
        "be told apart"
    )
    assert _one_finding(sp) == f"{path}: operator keyed-str, subtask 0: {problem}"
    code, _, err = run_cli("export", str(sp), "-o", str(tmp_path / "rows.parquet"))
    assert (code, err) == (1, f"statectl: error: {path}: {problem}\n")


def test_a_damaged_list_element_is_a_finding(tmp_path: Path) -> None:
    """LIST<STRING> with TTL: the ',' after a list's first element flipped to '-'."""
    sp = _copy("values/2.3.0-hashmap-canonical", tmp_path)
    savepoint = open_savepoint(str(sp))
    file = entries.keyed_files(savepoint, savepoint.find_operator("values"))[0]
    entry = next(e for e in file.entries() if e.state.name == "ttl-list")
    path = Path(file.stream.description)
    delimiter = path.read_bytes().index(entry.value) + 11  # after an 8-byte time and "\x03v5"
    assert path.read_bytes()[delimiter] == ord(",")
    _flip(path, delimiter)
    assert _one_finding(sp) == (
        f"{path}: operator values, subtask 0: key group {entry.key_group}: 1 values of state "
        "'ttl-list' do not decode (list element not followed by ',' at offset 11)"
    )
    assert "1 left raw" in _exported_raw(sp, tmp_path, "values/ttl-list")


def test_a_damaged_snapshot_in_a_native_meta_file_is_a_finding(tmp_path: Path) -> None:
    sp = _copy("rocksdb_native_full", tmp_path)
    handle = subtask(load(sp), "keyed-str", 0).managed_keyed_state
    assert isinstance(handle, IncrementalKeyedHandle)
    assert isinstance(handle.meta, RelativeFileHandle)
    meta = sp / handle.meta.relative_path
    _flip(meta, meta.read_bytes().index(b"LongSerializer$") + 7)  # cnt's value serializer
    assert _one_finding(sp) == (
        f"{meta}: operator keyed-str, subtask 0: state 'cnt': value serializer: no decoder for "
        "LongSerhalizer: one character off LongSerializer (damaged)"
    )


def test_values_of_a_type_statectl_cannot_decode_are_a_note(tmp_path: Path) -> None:
    """Kryo's FieldSerializer of a user class, without the job's classes: not checked."""
    code, out, err = run_cli(
        "verify", "--deep", str(fixture_savepoint("values/2.3.0-hashmap-canonical"))
    )
    assert code == 0, out
    assert (
        "statectl: note: operator values, state 'kryo-custom': 16 values not checked (Kryo "
        "FieldSerializer of statectl.values.Model$Opaque: its fields are not in the savepoint)"
    ) in err.splitlines()


def test_a_damaged_operator_list_element_is_a_finding(tmp_path: Path) -> None:
    """A POJO list element (operator state) whose flags byte is flipped: before, verify checked
    only elements of scalar types and passed it."""
    sp = _copy("values/2.3.0-hashmap-canonical", tmp_path)
    handle = subtask(load(sp), "opstate", 0).managed_operator_state
    assert handle is not None and isinstance(handle.delegate, RelativeFileHandle)
    path = sp / handle.delegate.relative_path
    _flip(path, handle.states[0].offsets[0])
    assert _one_finding(sp) == (
        f"{path}: operator opstate, subtask 0: operator state 'op-list', element 1: 1 values do "
        "not decode (POJO flags 0x03 at offset 0 are none of 1, 2, 4, 8)"
    )
