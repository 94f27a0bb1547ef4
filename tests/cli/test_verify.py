"""`statectl verify` on every real fixture (clean), and the shape of its findings and JSON."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from statectl.cli.main import main
from tests.conftest import FIXTURES, fixture_names, load_manifest
from tests.flink import harness


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    out, err = capsys.readouterr()
    return int(exit_info.value.code or 0), out, err


def snapshot(name: str) -> Path:
    """The fixture's savepoint; a retained checkpoint where its absolute paths point."""
    return harness.checkpoint_in_place(FIXTURES / name)


@pytest.mark.parametrize("deep", [False, True], ids=["shallow", "deep"])
@pytest.mark.parametrize("name", fixture_names())
def test_every_real_fixture_verifies_clean(
    name: str, deep: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    path = snapshot(name)
    code, out, err = run(["verify", "--json", *(["--deep"] if deep else []), str(path)], capsys)
    report = json.loads(out)
    assert (code, report["ok"], report["findings"]) == (0, True, []), err
    manifest = load_manifest(name)
    operators = manifest["operators"]
    assert report["checked"]["operators"] == len(operators)
    assert report["checked"]["subtasks"] == sum(
        op["parallelism"] for op in operators if op["uid"] != "src"
    )
    if deep:  # every entry Flink wrote was walked and sits in its key group
        assert report["checked"]["entries"] == sum(
            sum(op["entry_counts"].values()) for op in operators
        )


def test_clean_text_output(capsys: pytest.CaptureFixture[str]) -> None:
    path = snapshot("hashmap_canonical_files")
    code, out, err = run(["verify", "--deep", str(path)], capsys)
    assert code == 0
    assert out == (
        f"{path}: OK (7 operators, 12 subtasks, 8 files, 64 of 256 key groups hold data, "
        "452 entries walked)\n"
    )
    assert err == ""


def test_key_groups_are_counted_against_the_max_parallelism(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Two keyed operators at max parallelism 128: 64 of their 256 key groups hold data (not
    "64 key groups"); RocksDB instances' key groups are read only with --deep."""
    path = snapshot("hashmap_p4")
    code, out, _ = run(["verify", "--json", str(path)], capsys)
    checked = json.loads(out)["checked"]
    assert (code, checked["key_groups"], checked["key_groups_of"]) == (0, 64, 256)
    native = snapshot("rocksdb_native_full")
    code, out, _ = run(["verify", str(native)], capsys)
    assert code == 0
    assert "key groups of 4 RocksDB instances not read (--deep reads them)" in out
    assert "0 key groups" not in out


def test_a_header_with_a_snapshot_class_statectl_does_not_know(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """POJO serializer snapshots under a class statectl does not know: their payload is skipped
    up to what looks like the next snapshot, here one that then does not read as its layout, so
    the header is refused, one finding per file saying why (never a bare `None`). A header read
    in part and whole is a note, with what was read (real SQL state: tests/operations/rescale/
    test_sql_e2e.py)."""
    copy = tmp_path / "sp"
    shutil.copytree(FIXTURES / "values" / "2.3.0-hashmap-canonical" / "savepoint", copy)
    for file in copy.iterdir():
        if file.name != "_metadata":
            data = file.read_bytes().replace(b"PojoSerializerSnapshot", b"XxxxSerializerSnapshot")
            file.write_bytes(data)
    code, out, err = run(["verify", "--deep", str(copy)], capsys)
    findings = out.splitlines()
    assert code == 1 and len(findings) == 4, out
    for line in findings:
        assert line.startswith(f"{copy}/"), line
        assert "header: SetSerializerSnapshot does not match its layout" in line, line
    assert "None" not in out + err


def test_findings_one_line_each_with_operator_subtask_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "sp"
    shutil.copytree(snapshot("hashmap_canonical_files"), path)
    code, out, _ = run(["verify", "--json", str(path)], capsys)
    assert code == 0 and json.loads(out)["ok"]
    # Remove the state file of keyed-long, subtask 1, and shorten another one.
    from statectl.savepoint.reader import open_savepoint

    sp = open_savepoint(str(path))
    op = sp.find_operator("keyed-long")
    gone = sp.stream(op.subtasks[1].managed_keyed_state.delegate).location.path  # type: ignore[union-attr]
    Path(gone).unlink()
    op = sp.find_operator("opstate")
    short = Path(sp.stream(op.subtasks[0].managed_operator_state.delegate).location.path)  # type: ignore[union-attr]
    short.write_bytes(short.read_bytes()[:-3])
    code, out, err = run(["verify", str(path)], capsys)
    assert (code, err) == (1, "")
    assert sorted(out.splitlines()) == sorted(
        [
            f"{gone}: operator keyed-long, subtask 1: file not found",
            f"{short}: operator opstate, subtask 0: file is shorter than its handle says "
            "(377 bytes, not 380)",
        ]
    )
    code, out, _ = run(["verify", "--json", str(path)], capsys)
    report = json.loads(out)
    assert code == 1 and not report["ok"]
    assert {
        (f["operator"], f["operator_id"], f["subtask"], f["file"], f["problem"])
        for f in report["findings"]
    } == {
        ("keyed-long", sp.find_operator("keyed-long").operator_id_hex, 1, gone, "file not found"),
        (
            "opstate",
            sp.find_operator("opstate").operator_id_hex,
            0,
            str(short),
            "file is shorter than its handle says (377 bytes, not 380)",
        ),
    }


def test_unreadable_metadata_is_one_finding(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "_metadata").write_bytes(b"\x00\x00\x00\x01")
    code, out, err = run(["verify", str(tmp_path)], capsys)
    assert code == 1
    assert out == f"{tmp_path / '_metadata'}: bad magic number 0x00000001, expected 0x4960672D\n"
    assert err == ""


def test_usage_error_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, _ = run(["verify", "--no-such-flag", "x"], capsys)
    assert code == 2
