"""Tables at 80 columns (a pipe, a CI log, many terminals): no column dropped, no identifier a
user types cut or broken (uids, ids, state names, class names), no size split over two lines,
and no table wider than the terminal."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from statectl.cli.tables import Column, fitted, table_width, wrap
from statectl.cli.units import human_bytes
from tests.cli.test_inspect_width import run_at_width
from tests.conftest import FIXTURES, run_cli

HASHMAP = FIXTURES / "hashmap_canonical_files" / "savepoint"
VALUES = FIXTURES / "values" / "2.3.0-hashmap-canonical" / "savepoint"
FLINK_1 = FIXTURES / "values" / "1.20.3-rocksdb-native" / "savepoint"


def words(out: str) -> set[str]:
    """Every word on the output's lines, without the tables' borders."""
    return set(re.sub("[│┃]", " ", out).split())


def too_wide(out: str, width: int) -> list[str]:
    """Lines wider than `width`, but a location printed whole on its own line (`B: PATH`): a
    path is never cut, and the checkout's own may be longer than the width."""
    return [line for line in out.splitlines() if len(line) > width and not _whole_path(line)]


def _whole_path(line: str) -> bool:
    words = line.split()
    return 0 < len(words) <= 2 and "/" in words[-1]


@pytest.mark.parametrize("savepoint", [HASHMAP, VALUES], ids=["hashmap", "values"])
@pytest.mark.parametrize("width", [80, 100])
def test_inspect_keeps_every_column_and_cuts_no_name(savepoint: Path, width: int) -> None:
    code, out, err = run_cli("inspect", "--json", str(savepoint))
    assert code == 0, err
    operators = json.loads(out)["operators"]
    code, out, err = run_at_width(width, "inspect", str(savepoint))
    assert code == 0, err
    assert too_wide(out, width) == []
    assert "…" not in out
    shown = words(out)
    for op in operators:
        assert {op["uid"], op["id"], *op["name"].split()} <= shown, op["uid"]
        assert f"{op['parallelism']} ({op['max_parallelism']})" in out, op["uid"]
        for state in op["states"]:
            assert state["name"] in shown, state["name"]  # typed into --state: whole
            assert set(state["type"].replace("<", "< ").replace(",", ", ").split()) <= {
                piece for word in shown for piece in word.replace("<", "< ").split()
            }, state["type"]
        total = sum(s["keyed_bytes"] + s["operator_bytes"] for s in op["subtasks"])
        assert human_bytes(total + op["coordinator_bytes"]) in out  # a size on one line


def test_inspect_shows_a_location_wider_than_the_terminal_whole(tmp_path: Path) -> None:
    import shutil

    location = tmp_path / ("a-folder-name-without-spaces-" * 3) / "savepoint"
    shutil.copytree(HASHMAP, location)
    assert len(str(location)) > 80
    code, out, err = run_at_width(80, "inspect", str(location))
    assert code == 0, err
    assert out.splitlines()[0] == str(location)


def test_inspect_at_80_columns_stacks_the_operators_it_cannot_tabulate() -> None:
    code, out, _ = run_at_width(80, "inspect", str(HASHMAP))
    assert code == 0
    lines = out.splitlines()
    heading = lines.index("keyed-str  0cad1b1f959e0cc01a89a8ec2be0100c")
    fields = lines[heading + 1].split("  ")
    assert [f for f in fields if f] == [
        "name: keyed-str",
        "parallelism (max): 2 (128)",
        "states: 5",
        "bytes: 10.7 KiB",
    ]


def test_inspect_of_a_wide_terminal_is_a_table() -> None:
    code, out, _ = run_at_width(200, "inspect", str(HASHMAP))
    assert code == 0
    header = next(line for line in out.splitlines() if "operator id" in line)
    cells = [cell.strip() for cell in header.strip("┃").split("┃")]
    assert cells == ["uid", "name", "operator id", "parallelism (max)", "states", "bytes"]


@pytest.mark.parametrize("width", [80, 120])
def test_upgrade_check_breaks_no_class_name(width: int) -> None:
    code, out, err = run_cli("upgrade", "--check", "--json", str(FLINK_1))
    failing = [s for s in json.loads(out)["states"] if s["verdict"] != "ok"]
    assert failing
    code, out, err = run_at_width(width, "upgrade", "--check", str(FLINK_1))
    assert code == 1, err  # states that would not restore
    table = out.rsplit("\n", 2)[0]  # without the closing sentence (its path is data)
    assert too_wide(table, width) == []
    shown = words(out)
    for state in failing:
        assert {state["operator"], state["state"], *state["reason"].split()} <= shown, state
    assert "statectl.values.Model$Pojo" in shown
    assert "java.util.ArrayList:" in shown


def test_diff_fits_the_terminal_in_a_ci_log() -> None:
    """No terminal: 80 columns (or COLUMNS), not a fixed 160."""
    for width in (80, 100):
        code, out, err = run_at_width(width, "diff", str(HASHMAP), str(HASHMAP))
        assert code == 0, err
        assert too_wide(out, width) == []
        assert out.strip().endswith("identical (13 states compared)")
        assert "_timer_state/processing_user-timers" in words(out)


def test_diff_examples_are_one_line_each() -> None:
    code, out, _ = run_cli("diff", "--json", str(HASHMAP), str(VALUES))
    count = sum(len(state["examples"]) for state in json.loads(out)["states"])
    code, out, _ = run_at_width(80, "diff", str(HASHMAP), str(VALUES))
    assert code == 1
    examples = [line for line in out.splitlines() if line.startswith("  opstate/")]
    assert len(examples) == count
    assert all(line.count(": only in ") == 1 for line in examples)
    table = [line for line in out.splitlines() if line not in examples]
    assert too_wide("\n".join(table), 80) == []


def test_migrate_and_a_rescale_plan_cut_no_uid_and_no_file(tmp_path: Path) -> None:
    uid = "a-much-longer-window-uid-for-testing"
    argv = ("migrate", str(VALUES), "-o", str(tmp_path / "m"), "--rename-uid", f"window={uid}")
    code, out, err = run_at_width(80, *argv)
    assert code == 0, err
    assert uid in words(out) and "…" not in out
    argv = ("rescale", str(VALUES), "-o", str(tmp_path / "r"), "-p", "3", "--dry-run")
    code, out, err = run_cli(*argv, "--json")
    files = {
        source["file"].rsplit("/", 1)[-1]
        for op in json.loads(out)["operators"]
        for sub in op["subtasks"]
        for source in sub["keyed_sources"]
    }
    assert files
    code, out, err = run_at_width(80, *argv)
    assert code == 0, err
    assert files <= words(out) and "…" not in out
    assert too_wide(out.split("\n", 2)[2], 80) == []  # after the title, whose path is data


def test_positions_fit_the_terminal_with_split_ids_and_paths_whole() -> None:
    savepoint = Path(__file__).resolve().parents[1] / "flink" / "sources" / "fixture" / "savepoint"
    code, out, err = run_cli("positions", "--json", str(savepoint))
    (source,) = json.loads(out)["sources"]
    typed = {split["split_id"] for split in source["splits"]}
    typed |= {split["path"] for split in source["splits"]}
    code, out, err = run_at_width(80, "positions", str(savepoint))
    assert code == 0, err
    assert too_wide(out, 80) == []
    assert typed <= words(out)


# --- the fitting itself ----------------------------------------------------------------------


def test_a_type_breaks_after_brackets_and_commas_never_in_a_class_name() -> None:
    type_ = "MAP<STRING, POJO com.example.Order{id BIGINT, lines LIST<ROW<sku STRING>>}>"
    lines = wrap(type_, "type", 24)
    assert all(len(line) <= 24 for line in lines)
    assert (
        "".join(line if line.endswith(("<", "{")) else line + " " for line in lines).split()
        == type_.split()
    )
    assert any("com.example.Order{" in line for line in lines)


def test_text_breaks_at_spaces_only() -> None:
    assert wrap("Kryo of java.util.HashMap: Flink 2.x reads", "text", 12) == [
        "Kryo of",
        "java.util.HashMap:",
        "Flink 2.x",
        "reads",
    ]


def test_a_table_is_stacked_rather_than_cut() -> None:
    from rich.console import Console

    columns = [
        Column("uid", "id", key=True),
        Column("id", "id", key=True),
        Column("bytes", "number"),
    ]
    rows = [
        [
            "an-uid-much-longer-than-the-terminal-is-wide",
            "0cad1b1f959e0cc01a89a8ec2be0100c",
            "10.7 KiB",
        ]
    ]
    assert table_width([44, 32, 8]) > 60
    console = Console(width=60, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    console.print(fitted(columns, rows, 60), soft_wrap=True, crop=False)
    assert console.export_text().splitlines() == [
        "an-uid-much-longer-than-the-terminal-is-wide",
        "0cad1b1f959e0cc01a89a8ec2be0100c",
        "  bytes: 10.7 KiB",
    ]
