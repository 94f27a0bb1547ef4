"""Everything the commands print: rich tables for people, one JSON document for machines.

A command picks its renderer once from `--json` (`renderer(json_output)`) and hands it the
operation's result; warnings, errors and progress go to stderr in either mode.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from statectl.cli import diff_view, inspect_view, migrate_view, rescale_view
from statectl.cli.console import pick_fields, print_json, print_line, stdout_console
from statectl.cli.progress_view import TaskProgress
from statectl.cli.rescale_view import KeyedLoads

# rich is imported where it is used: `--json` needs none of it. The views import only what the
# consoles print.
if TYPE_CHECKING:
    from statectl.api.reports import (
        DiffReport,
        ExportReport,
        MigrationReport,
        ParallelismPlan,
        RescalePlan,
        RescaleReport,
        SavepointSummary,
        Verification,
    )

# A uid and the operator id Flink derives from it (`uid-hash`).
UidId = tuple[str, str]


# --- the renderers ---------------------------------------------------------------------------


class Renderer(Protocol):
    """What a command prints of its result: `ConsoleRenderer` or `JsonRenderer`."""

    def inspect(self, summary: SavepointSummary) -> None: ...
    def verify(self, result: Verification) -> None: ...
    def diff(self, report: DiffReport) -> None: ...
    def plan(self, plan: RescalePlan, loads: KeyedLoads) -> None: ...
    def parallelism_plan(self, plan: ParallelismPlan) -> None: ...
    def rescale(self, report: RescaleReport) -> None: ...
    def migrate(self, report: MigrationReport) -> None: ...
    def export(self, report: ExportReport) -> None: ...
    def uid_hash(self, ids: Sequence[UidId]) -> None: ...
    def progress(self, what: str, *, writes: bool = True, shown: bool = True) -> TaskProgress:
        """Progress on stderr while the command works (`TaskProgress`): `writes`, a job that
        writes files (its plain line off a terminal); `shown`, whether this run shows any."""
        ...


def renderer(json_output: bool) -> Renderer:
    return JsonRenderer() if json_output else ConsoleRenderer()


class JsonRenderer:
    """One JSON document on stdout (the schemas in docs/commands/); no progress bar, so
    stderr stays quiet for scripts."""

    def inspect(self, summary: SavepointSummary) -> None:
        print_json(inspect_view.summary_to_json(summary))

    def verify(self, result: Verification) -> None:
        print_json(inspect_view.verification_to_json(result))

    def diff(self, report: DiffReport) -> None:
        print_json(diff_view.diff_to_json(report))

    def plan(self, plan: RescalePlan, loads: KeyedLoads) -> None:
        print_json(rescale_view.plan_to_json(plan, loads))

    def parallelism_plan(self, plan: ParallelismPlan) -> None:
        from statectl.cli import plan_view

        print_json(plan_view.plan_json(plan))

    def rescale(self, report: RescaleReport) -> None:
        print_json(rescale_view.rescale_report_to_json(report))

    def migrate(self, report: MigrationReport) -> None:
        print_json(migrate_view.migration_to_json(report))

    def export(self, report: ExportReport) -> None:
        document = pick_fields(report, "output", "rows", "files", "engine", "states")
        document["raw"] = {
            state: {"rows": raw.rows, "first_reason": raw.first_reason}
            for state, raw in report.raw.items()
        }
        print_json(document)

    def uid_hash(self, ids: Sequence[UidId]) -> None:
        print_json([{"uid": uid, "id": id_} for uid, id_ in ids])

    def progress(self, what: str, *, writes: bool = True, shown: bool = True) -> TaskProgress:
        return TaskProgress(what, enabled=False)


class ConsoleRenderer:
    """Rich tables and plain lines on stdout; progress on stderr."""

    def inspect(self, summary: SavepointSummary) -> None:
        inspect_view.print_summary(summary)

    def verify(self, result: Verification) -> None:
        inspect_view.print_verification(result)

    def diff(self, report: DiffReport) -> None:
        diff_view.print_diff(report)

    def plan(self, plan: RescalePlan, loads: KeyedLoads) -> None:
        rescale_view.print_plan(plan, loads)

    def parallelism_plan(self, plan: ParallelismPlan) -> None:
        from statectl.cli import plan_view

        plan_view.print_plan(stdout_console(), plan)

    def rescale(self, report: RescaleReport) -> None:
        rescale_view.print_rescale_report(report)

    def migrate(self, report: MigrationReport) -> None:
        migrate_view.print_migration(report)

    def export(self, report: ExportReport) -> None:
        for label, count in report.states.items():
            raw = report.raw.get(label)
            left_raw = f" ({raw.rows} left raw: {raw.first_reason})" if raw else ""
            print_line(f"{label}: {count} rows{left_raw}")
        stdout_console().print(
            f"wrote {report.rows} rows to {report.output} ({report.files} file(s))",
            highlight=False,
        )

    def uid_hash(self, ids: Sequence[UidId]) -> None:
        width = max(len(uid) for uid, _ in ids)
        for uid, id_ in ids:
            print(f"{uid:<{width}}  {id_}")

    def progress(self, what: str, *, writes: bool = True, shown: bool = True) -> TaskProgress:
        return TaskProgress(what, enabled=shown, writes=writes)
