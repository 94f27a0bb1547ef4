"""`statectl upgrade --check` against what Flink 2.3.0 does (tests/fixtures/values/upgrade-2.3.0.json,
observed by restoring the values job's 1.x savepoints with Flink 2.3.0:
tests/flink/test_upgrade_truth.py): the check names exactly the states Flink 2.3 refuses or
restores wrong; the one it cannot decide without the job's classes (a user class written by
Kryo's FieldSerializer) is `unknown`, never `ok`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from statectl.operations.upgrade import OK, UNKNOWN, check_upgrade
from statectl.savepoint.reader import open_savepoint

FIXTURES = Path(__file__).parents[1] / "fixtures"
TRUTH = json.loads((FIXTURES / "values" / "upgrade-2.3.0.json").read_text())
SOURCES = [name for name in TRUTH if name[0].isdigit()]
UNDECIDED = {("values", "kryo-custom")}  # Kryo FieldSerializer: its fields need the classes


def outcomes(source: str) -> dict[tuple[str, str], str]:
    return {
        (operator, state): found["outcome"]
        for operator, states in TRUTH[source].items()
        if operator != "restore"
        for state, found in states.items()
    }


def verdicts(path: Path) -> dict[tuple[str, str], str]:
    report = check_upgrade(open_savepoint(str(path)))
    uids = {"8918828246c22e7d25902f74d971b709": "values", "01203aa9a12dc1ec725e03853dd7c8f2": "window",
            "21991e99748be05b56fddb2033c0ff3b": "opstate", "f362c87ffabe89c8a91fa7d0a523ba6c": "src"}  # fmt: skip
    return {(uids[s.operator_id], s.state): s.verdict for s in report.states}


@pytest.mark.parametrize("source", SOURCES)
def test_the_check_names_what_flink_refuses_or_restores_wrong(source: str) -> None:
    truth, found = outcomes(source), verdicts(FIXTURES / "values" / source / "savepoint")
    expected = {
        state: (UNKNOWN if state in UNDECIDED else outcome) for state, outcome in truth.items()
    }
    assert {s: found[s] for s in expected} == expected


# 1.18.1 with compression wrote operator state no reader can split (FLINK-34063): refused.
COMPAT = sorted(
    p.name
    for p in (FIXTURES / "compat").iterdir()
    if p.name.startswith("1.") and p.name != "1.18.1-hashmap-compressed"
)


@pytest.mark.parametrize("fixture", COMPAT)
def test_no_alarm_on_states_of_plain_types(fixture: str) -> None:
    """The compat job's states (String and Long keys and values, timers, list, union and
    broadcast state of Longs) have no serializer 2.x changed."""
    report = check_upgrade(open_savepoint(str(FIXTURES / "compat" / fixture / "savepoint")))
    assert report.ok and {s.verdict for s in report.states} == {OK}
