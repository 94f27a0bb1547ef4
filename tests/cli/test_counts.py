"""One count per state, the same in every command (docs/counts.md): a broadcast state's map
entries once, not once per subtask copy nor as one element per copy."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import statectl
from tests.conftest import fixture_savepoint, load_manifest, run_cli

FIXTURE = "hashmap_p4"  # bcast: a broadcast state at parallelism 4 (four copies of one map)


def cli_json(*argv: str) -> Any:
    code, out, err = run_cli(*argv, "--json")
    assert code == 0, err
    return json.loads(out)


def written_entries(uid: str, state: str) -> dict[str, int]:
    """The state's entries as the job wrote them: every subtask holds the same map."""
    subtasks = load_manifest(FIXTURE)["state"]["operators"][uid]["subtasks"]
    maps = [sub["broadcast"][state] for sub in subtasks.values()]
    assert all(m == maps[0] for m in maps) and len(maps) == 4
    return dict(maps[0])


@pytest.mark.parametrize(("uid", "state"), [("bcast", "bcast")])
def test_a_broadcast_state_is_counted_the_same_everywhere(
    uid: str, state: str, tmp_path: Path
) -> None:
    path = str(fixture_savepoint(FIXTURE))
    expected = len(written_entries(uid, state))
    assert expected == 5

    (op,) = cli_json("inspect", path, "--operator", uid)["operators"]
    (inspected,) = [s for s in op["states"] if s["name"] == state]
    (plan_op,) = cli_json("plan", path, "--operator", uid, "--parallelism", "3")["operators"]
    (at3,) = plan_op["candidates"][0]["operator_state"]
    (diffed,) = cli_json("diff", path, path, "--operator", uid)["states"]
    exported = cli_json("export", path, "-o", str(tmp_path / "json"), "--operator", uid)
    typed = cli_json("export", path, "-o", str(tmp_path / "typed"), "--typed", "--operator", uid)
    read = statectl.open(path).operator(uid).state(state).to_arrow()

    counts = {
        "inspect": inspected["elements"],
        "plan (as each subtask restores it)": at3["elements"][0],
        "diff": diffed["entries_a"],
        "export": exported["rows"],
        "export --typed": typed["rows"],
        "library": read.num_rows,
    }
    assert counts == dict.fromkeys(counts, expected)
    assert inspected["copies"] == 4  # the copies are said apart from the count
    assert at3["elements"] == [expected] * 3


def test_export_rows_of_a_broadcast_state_are_its_entries_once(tmp_path: Path) -> None:
    """As Flink's State Processor API (`readBroadcastState`) gives them: each key once."""
    import pyarrow.parquet as pq

    path = str(fixture_savepoint(FIXTURE))
    out = tmp_path / "bcast.parquet"
    cli_json("export", path, "-o", str(out), "--operator", "bcast")
    rows = pq.read_table(out).to_pylist()
    exported = {json.loads(r["key_json"]): json.loads(r["value_json"]) for r in rows}
    assert len(rows) == len(exported) == 5
    assert exported == written_entries("bcast", "bcast")
    assert {r["subtask"] for r in rows} == {0}  # the copy read


def test_inspect_says_a_broadcast_count_is_of_one_copy() -> None:
    code, out, _ = run_cli("inspect", str(fixture_savepoint(FIXTURE)), "--operator", "bcast")
    assert code == 0
    said = " ".join(out.split())  # as wrapped to the terminal
    assert (
        "bcast: broadcast state, its 5 entries counted once (each of 4 subtasks holds a copy)"
        in (said)
    )


def test_rescale_dry_run_calls_a_broadcast_share_a_copy_of_the_map() -> None:
    path = str(fixture_savepoint(FIXTURE))
    plan = cli_json("rescale", path, "-o", "memory://counts-dry", "-p", "3", "--dry-run")
    (bcast,) = [op for op in plan["operators"] if op["uid"] == "bcast"]
    shares = [sub["operator_state"]["bcast"] for sub in bcast["subtasks"]]
    assert shares == [{"mode": "BROADCAST", "copies": 1}] * 3


def test_migrate_says_an_operator_with_edited_states_is_edited(tmp_path: Path) -> None:
    path = str(fixture_savepoint(FIXTURE))
    out = str(tmp_path / "out")
    code, stdout, err = run_cli("migrate", path, "-o", out, "--drop-state", "keyed-str/lst")
    assert code == 0, err
    rows = {line.split("│")[1].strip(): line for line in stdout.splitlines() if "│" in line}
    assert "edited" in rows["keyed-str"] and "kept" not in rows["keyed-str"]
    assert "kept" in rows["keyed-long"]
    assert "state keyed-str/lst: dropped" in stdout
