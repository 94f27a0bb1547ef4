"""`--operator` resolution (Savepoint.find_operator): uid, 32-hex id, or operator name."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from statectl.errors import StatectlError
from statectl.savepoint.model import Savepoint
from statectl.savepoint.reader import open_savepoint
from tests.conftest import fixture_savepoint, run_cli


def _savepoint() -> Savepoint:
    return open_savepoint(str(fixture_savepoint("hashmap_canonical_files")))


def _without_uids(sp: Savepoint, names: dict[str, str]) -> Savepoint:
    """The savepoint as Flink writes planner-generated operators: names, no uids."""
    ops = tuple(
        dataclasses.replace(op, uid=None, name=names.get(op.uid or "", op.name))
        for op in sp.operators
    )
    return dataclasses.replace(sp, metadata=dataclasses.replace(sp.metadata, operators=ops))


def test_operator_by_name_uid_and_id() -> None:
    sp = _savepoint()
    source = next(op for op in sp.operators if op.uid == "src")
    assert source.name == "Source: src"
    assert sp.find_operator("Source: src") is source
    assert sp.find_operator("src") is source
    assert sp.find_operator(source.operator_id_hex) is source


def test_operator_by_name_without_uid() -> None:
    sp = _without_uids(_savepoint(), {"keyed-str": "GroupAggregate[4]"})
    found = sp.find_operator("GroupAggregate[4]")
    assert found.name == "GroupAggregate[4]" and found.uid is None
    assert found.operator_id_hex.startswith("0cad1b1f")


def test_ambiguous_name_lists_the_candidates() -> None:
    sp = _without_uids(_savepoint(), {"keyed-str": "Join[7]", "keyed-long": "Join[7]"})
    ids = [op.operator_id_hex for op in sp.operators if op.name == "Join[7]"]
    with pytest.raises(StatectlError) as caught:
        sp.find_operator("Join[7]")
    assert caught.value.message == (
        f"operator name 'Join[7]' is ambiguous; candidates: {ids[0]}, {ids[1]}"
    )


def test_cli_selects_an_operator_by_name() -> None:
    path = str(fixture_savepoint("hashmap_canonical_files"))
    code, out, err = run_cli("inspect", path, "--operator", "sink: Writer", "--json")
    assert (code, err) == (0, "")
    assert '"uid": "sink"' in out and '"uid": "src"' not in out


@pytest.mark.parametrize(
    ("pair", "message"),
    [
        # split at the last `=`: names of planner operators may hold one
        ("Agg(groupBy=[k])=2", "unknown operator 'Agg(groupBy=[k])'; known operators: "),
        ("Source: src=x", "Invalid value for --operator: Source: src=x: parallelism must be "),
        ("Source: src", "Invalid value for --operator: expected KEY=VALUE, got 'Source: src'"),
    ],
)
def test_rescale_operator_overrides_split_at_the_last_equals(
    pair: str, message: str, tmp_path: Path
) -> None:
    path = str(fixture_savepoint("hashmap_canonical_files"))
    code, _, err = run_cli("rescale", path, "-o", str(tmp_path / "out"), "--operator", pair)
    assert code != 0 and message in err


def test_rescale_operator_override_applies_to_that_operator_only(tmp_path: Path) -> None:
    path = str(fixture_savepoint("hashmap_canonical_files"))
    argv = ["rescale", path, "-o", str(tmp_path / "out"), "--operator", "keyed-str=3"]
    code, out, err = run_cli(*argv, "--dry-run", "--json")
    assert (code, err) == (0, "")
    plans = {op["uid"]: op["new_parallelism"] for op in json.loads(out)["operators"]}
    assert (plans["keyed-str"], plans["keyed-long"]) == (3, 2)
