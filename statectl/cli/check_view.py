"""How `statectl check` shows its verdicts: a table of the states that do not restore as they
are, then the counts; or one JSON document."""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING

from statectl.cli.console import print_json, print_line, print_table

if TYPE_CHECKING:
    from statectl.api.reports import CheckReport

VERDICTS = ("as-is", "migrates", "loses", "refused", "unknown")
_STYLE = {
    "as-is": "green", "migrates": "green", "loses": "red", "refused": "red", "unknown": "yellow"
}  # fmt: skip


def print_check_json(report: CheckReport) -> None:
    print_json(
        {
            "source": report.source,
            "classpath": list(report.classpath),
            "ok": report.ok,
            "counts": {v: report.count(v) for v in VERDICTS},
            "states": [asdict(state) for state in report.states],
        }
    )


def print_check(report: CheckReport) -> None:
    """Every state that does not restore as it is, one row each, then the counts."""
    from statectl.cli.tables import Column

    changed = [s for s in report.states if s.verdict != "as-is"]
    if changed:
        columns = [
            Column("operator", "id", key=True),
            Column("state", "id", key=True),
            Column("verdict", styles=_STYLE),
            Column("why"),  # wrapped at spaces: class names stay whole
        ]
        print_table(columns, [[s.operator, s.state, s.verdict, s.reason] for s in changed])
    counts = ", ".join(f"{report.count(v)} {v}" for v in VERDICTS)
    print_line(f"New job restoring {report.source}: {len(report.states)} states, {counts}")
