"""How `statectl upgrade --check` shows its verdicts: a table, or one JSON document."""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING

from statectl.cli.console import print_json, print_line, print_table
from statectl.cli.rescale_view import print_tasks_run, tasks_json

if TYPE_CHECKING:
    from statectl.api.reports import UpgradeCheck, UpgradeReport

_STYLE = {"ok": "green", "refused": "red", "wrong": "red", "unknown": "yellow"}


def print_check_json(report: UpgradeCheck) -> None:
    print_json(
        {
            "source": report.source,
            "metadata_version": report.metadata_version,
            "to": report.target,
            "ok": report.ok,
            "counts": {v: report.count(v) for v in ("ok", "refused", "wrong", "unknown")},
            "states": [asdict(state) for state in report.states],
        }
    )


def print_check(report: UpgradeCheck) -> None:
    """The states that would not restore as they are, one row each, then the counts."""
    from statectl.cli.tables import Column

    failing = [state for state in report.states if state.verdict != "ok"]
    if failing:
        columns = [
            Column("operator", "id", key=True),
            Column("state", "id", key=True),
            Column("scope"),
            Column("verdict", styles=_STYLE),
            Column("why"),  # wrapped at spaces: class names stay whole
        ]
        rows = [[s.operator, s.state, s.scope, s.verdict, s.reason] for s in failing]
        print_table(columns, rows)
    counts = ", ".join(f"{report.count(v)} {v}" for v in ("ok", "refused", "wrong", "unknown"))
    print_line(
        f"Flink {report.target} restoring {report.source}: {len(report.states)} states, {counts}"
    )


def print_upgrade(report: UpgradeReport, json_output: bool) -> None:
    """What `upgrade -o` converted and dropped."""
    written = report.written
    if json_output:
        print_json(
            {
                "source": written.source,
                "destination": written.destination,
                "metadata_version": written.metadata_version,
                "to": report.check.target,
                "converted": [asdict(state) for state in report.converted],
                "dropped": [asdict(state) for state in report.dropped],
                "files": written.files,
                "bytes": written.bytes,
                "tasks": tasks_json(written.tasks_run),
            }
        )
        return
    print_line(f"Wrote {written.destination} (metadata v{written.metadata_version})")
    for state in report.converted:
        print_line(f"converted {state.operator}/{state.state}: {state.reason}")
    for state in report.dropped:
        print_line(f"dropped {state.operator}/{state.state}: {state.reason}")
    kept = len(report.check.states) - len(report.converted) - len(report.dropped)
    print_line(
        f"{len(report.converted)} converted, {len(report.dropped)} dropped, {kept} copied "
        f"for Flink {report.check.target}"
    )
    print_tasks_run(written.tasks_run)
