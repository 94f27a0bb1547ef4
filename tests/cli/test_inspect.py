"""`statectl inspect` against the manifests real Flink wrote beside each fixture."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from statectl.cli.main import main
from statectl.savepoint.model import operator_id_for_uid
from tests.conftest import fixture_names, fixture_savepoint, load_manifest
from tests.flink import harness

CANONICAL = [
    n
    for n in fixture_names()
    if load_manifest(n)["format"] == "CANONICAL" and load_manifest(n)["mode"] == "savepoint"
]


def inspect_json(path: Path, capsys: pytest.CaptureFixture[str], *flags: str) -> dict[str, Any]:
    with pytest.raises(SystemExit) as exit_info:
        main(["inspect", "--json", *flags, str(path)])
    out, err = capsys.readouterr()
    assert exit_info.value.code in (0, None), err
    return json.loads(out)


def assert_matches_manifest(report: dict[str, Any], manifest: dict[str, Any]) -> None:
    operators = {op["uid"]: op for op in report["operators"]}
    assert set(operators) == {op["uid"] for op in manifest["operators"]}
    for expected in manifest["operators"]:
        uid = expected["uid"]
        seen = operators[uid]
        assert seen["id"] == expected["id"] == operator_id_for_uid(uid).hex()
        assert (seen["name"], seen["parallelism"], seen["max_parallelism"]) == (
            expected["name"],
            expected["parallelism"],
            expected["max_parallelism"],
        )
        assert _states(seen) == _states(expected), uid
        assert _key_group_ranges(seen) == _manifest_key_group_ranges(manifest, uid), uid


def _states(op: dict[str, Any]) -> list[tuple[str, str, str, str | None]]:
    return sorted((s["name"], s["scope"], s["kind"], s["mode"]) for s in op["states"])


def _key_group_ranges(op: dict[str, Any]) -> dict[int, tuple[int, int]]:
    return {s["index"]: tuple(s["key_groups"]) for s in op["subtasks"] if s["key_groups"]}


def _manifest_key_group_ranges(manifest: dict[str, Any], uid: str) -> dict[int, tuple[int, int]]:
    subtasks = manifest["state"]["operators"].get(uid, {}).get("subtasks", {})
    return {
        int(index): tuple(sub["key_group_range"])
        for index, sub in subtasks.items()
        if sub.get("keyed") or sub.get("timers")
    }


@pytest.mark.parametrize("name", fixture_names())
def test_inspect_json_matches_manifest(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    manifest = load_manifest(name)
    report = inspect_json(fixture_savepoint(name), capsys)
    assert report["checkpoint_id"] == manifest["checkpoint_id"]
    expected = (
        f"savepoint ({manifest['format']})" if manifest["mode"] == "savepoint" else "checkpoint"
    )
    assert report["snapshot"] == expected
    assert_matches_manifest(report, manifest)


@pytest.mark.parametrize("name", CANONICAL)
def test_deep_entry_counts_equal_manifest(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    manifest = load_manifest(name)
    report = inspect_json(fixture_savepoint(name), capsys, "--deep")
    for op in report["operators"]:
        expected = next(m for m in manifest["operators"] if m["uid"] == op["uid"])
        counts = {s["name"]: s["entries"] for s in op["states"] if s["scope"] == "keyed"}
        assert counts == expected["entry_counts"], op["uid"]


def test_human_tables_name_every_operator(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["inspect", str(fixture_savepoint("hashmap_canonical_files"))])
    out = capsys.readouterr().out
    for op in load_manifest("hashmap_canonical_files")["operators"]:
        assert op["uid"] in out
    for fragment in ("SPLIT_DISTRIBUTE", "UNION", "BROADCAST", "TIMERS", "0–63", "64–127"):
        assert fragment in out


def test_split_and_union_list_states_are_both_lists_of_their_elements(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = fixture_savepoint("hashmap_canonical_files")
    (opstate,) = [op for op in inspect_json(path, capsys)["operators"] if op["uid"] == "opstate"]
    types = {(s["name"], s["mode"]): (s["kind"], s["type"]) for s in opstate["states"]}
    assert types == {
        ("split", "SPLIT_DISTRIBUTE"): ("LIST", "LIST<BIGINT>"),
        ("union", "UNION"): ("LIST", "LIST<BIGINT>"),
    }
    monkeypatch.setenv("COLUMNS", "200")  # no column cut short
    with pytest.raises(SystemExit):
        main(["inspect", str(path)])
    rows = [line.split("│")[1:-1] for line in capsys.readouterr().out.splitlines()]
    listed = [[cell.strip() for cell in row] for row in rows if row and "LIST" in row[2]]
    assert [row[:5] for row in listed if row[1] == "operator"] == [
        ["split", "operator", "LIST", "SPLIT_DISTRIBUTE", "LIST<BIGINT>"],
        ["union", "operator", "LIST", "UNION", "LIST<BIGINT>"],
    ]


@pytest.mark.flink
def test_inspects_a_savepoint_flink_just_wrote(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A savepoint not in the committed fixtures: parallelism 3, max parallelism 200."""
    fixture = harness.write_fixture(tmp_path / "fresh", parallelism=3, max_parallelism=200).parent
    manifest = harness.load_manifest(fixture)
    path = harness.snapshot_path(fixture)
    assert_matches_manifest(inspect_json(path, capsys), manifest)
    deep = inspect_json(path, capsys, "--deep")
    keyed = next(op for op in deep["operators"] if op["uid"] == "keyed-long")
    assert {s["name"]: s["entries"] for s in keyed["states"]} == next(
        m["entry_counts"] for m in manifest["operators"] if m["uid"] == "keyed-long"
    )
