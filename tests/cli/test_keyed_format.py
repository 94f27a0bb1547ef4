"""`--format native|canonical` of `rescale` and `convert`: the keyed format of the output."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from statectl.formats.handles import IncrementalKeyedHandle, KeyGroupsHandle
from statectl.formats.metadata import snapshot_kind
from statectl.savepoint.reader import open_savepoint
from tests.conftest import fixture_savepoint, run_cli
from tests.flink import harness

KEYED = ("keyed-str", "keyed-long")


def _keyed_handles(path: Path) -> set[type]:
    sp = open_savepoint(str(path))
    return {
        type(s.managed_keyed_state) for uid in KEYED for s in sp.subtasks(sp.find_operator(uid))
    }


def _format(path: Path) -> str | None:
    kind = snapshot_kind(open_savepoint(str(path)).metadata.properties)
    return None if kind is None else kind.format


@pytest.mark.parametrize("command", [("rescale", "-p", "2"), ("convert",)])
def test_an_unknown_format_is_refused(tmp_path: Path, command: tuple[str, ...]) -> None:
    source = str(fixture_savepoint("hashmap_p4"))
    name, *args = command
    code, _, err = run_cli(name, source, "-o", str(tmp_path / "out"), *args, "--format", "xml")
    assert code == 2
    assert "Invalid value for --format: 'xml': choose 'native' or 'canonical'" in err
    assert not (tmp_path / "out").exists()


@pytest.mark.spark
def test_rescale_keeps_the_inputs_keyed_format_unless_told(tmp_path: Path) -> None:
    source = str(fixture_savepoint("rocksdb_native_full"))
    code, out, err = run_cli("rescale", source, "-o", str(tmp_path / "native"), "-p", "3")
    assert code == 0, err
    assert out.startswith(f"Wrote {tmp_path / 'native'} (native)")
    assert _keyed_handles(tmp_path / "native") == {IncrementalKeyedHandle}
    assert _format(tmp_path / "native") == "NATIVE"
    out_dir = tmp_path / "canonical"
    code, out, err = run_cli("rescale", source, "-o", str(out_dir), "-p", "3", "--format", "canonical", "--json")  # fmt: skip
    assert code == 0, err
    keyed = [op for op in json.loads(out)["operators"] if op["uid"] in KEYED]
    assert [(op["old_keyed_format"], op["new_keyed_format"]) for op in keyed] == [
        ("native", "canonical"),
        ("native", "canonical"),
    ]
    assert _keyed_handles(out_dir) == {KeyGroupsHandle}
    assert _format(out_dir) == "CANONICAL"


@pytest.mark.spark
def test_convert_to_native_turns_every_keyed_subtask_into_an_instance(tmp_path: Path) -> None:
    source = fixture_savepoint("hashmap_canonical_files")
    out_dir = tmp_path / "native"
    code, out, err = run_cli("convert", str(source), "-o", str(out_dir), "--format", "native")
    assert code == 0, err
    assert out.startswith(f"Wrote {out_dir} (native)")
    assert "2 (canonical → native)" in out
    assert _keyed_handles(out_dir) == {IncrementalKeyedHandle}
    assert (_format(source), _format(out_dir)) == ("CANONICAL", "NATIVE")
    code, out, err = run_cli("diff", str(source), str(out_dir))
    assert (code, err) == (0, ""), out
    assert out.strip().endswith("identical (13 states compared)")


def _heap_checkpoint() -> Path:
    return harness.checkpoint_in_place(harness.heap_snapshots()["checkpoint"])


@pytest.mark.parametrize(
    ("source", "argv", "written"),
    [
        (lambda: fixture_savepoint("rocksdb_native_full"), ("rescale", "-p", "3"), "NATIVE"),
        (lambda: fixture_savepoint("rocksdb_native_full"), ("convert",), "CANONICAL"),
        (lambda: fixture_savepoint("hashmap_p4"), ("rescale", "-p", "2"), "CANONICAL"),
        (lambda: fixture_savepoint("hashmap_p4"), ("convert", "--format", "native"), "NATIVE"),
        pytest.param(_heap_checkpoint, ("rescale", "-p", "3"), "CANONICAL", marks=pytest.mark.flink),
        pytest.param(_heap_checkpoint, ("convert", "--format", "native"), "NATIVE", marks=pytest.mark.flink),
    ],
    ids=["native-rescale", "native-convert", "canonical-rescale", "canonical-convert",
         "heap-rescale", "heap-convert"],
)  # fmt: skip
def test_the_json_report_names_the_format_written(
    tmp_path: Path, source: Callable[[], Path], argv: tuple[str, ...], written: str
) -> None:
    """A savepoint's format is its `_metadata`'s; a checkpoint's `_metadata` names none: the
    format its keyed state was written in."""
    command, *options = argv
    out_dir = tmp_path / "out"
    code, out, err = run_cli(command, str(source()), "-o", str(out_dir), *options, "--json")
    assert code == 0, err
    assert json.loads(out)["format"] == written
    expected_handles = {"NATIVE": IncrementalKeyedHandle, "CANONICAL": KeyGroupsHandle}[written]
    assert _keyed_handles(out_dir) == {expected_handles}
    assert _format(out_dir) == (None if source is _heap_checkpoint else written)
