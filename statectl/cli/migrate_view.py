"""What `migrate`, `transform` and `positions --set` print: the states edited, what was written."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from statectl.cli.console import (
    pick_fields,
    print_json,
    print_line,
    print_table,
    stdout_console,
)
from statectl.cli.rescale_view import print_tasks_run, tasks_json
from statectl.cli.units import human_bytes

if TYPE_CHECKING:
    from statectl.api.reports import (
        MigratedOperator,
        MigrationReport,
        PositionsEditReport,
        StateEditReport,
    )


def migration_to_json(report: MigrationReport) -> dict[str, Any]:
    from statectl.api.reports import CARRIED, DROPPED, RENAMED

    return {
        **pick_fields(report, "source", "destination", "metadata_version"),
        "renamed": report.count(RENAMED),
        "dropped": report.count(DROPPED),
        "carried": report.count(CARRIED),
        **pick_fields(report, "files", "bytes"),
        "operators": [_migrated_operator_json(op) for op in report.operators],
        "states": [
            pick_fields(edit, "operator", "state", "action", "new_name", "rows", "nulls")
            for edit in report.states
        ],
        "tasks": tasks_json(report.tasks_run),
    }


def _migrated_operator_json(op: MigratedOperator) -> dict[str, Any]:
    change = op.change
    return {
        "action": change.action,
        "uid": change.new_uid,
        "id": change.new_id,
        "old_uid": change.old_uid,
        "old_id": change.old_id,
        **pick_fields(op, "files", "bytes"),
    }


def print_migration(report: MigrationReport) -> None:
    from statectl.api.reports import CARRIED, DROPPED, RENAMED
    from statectl.cli.tables import Column

    print_line(f"Wrote {report.destination} (metadata v{report.metadata_version})")
    columns = [
        Column("operator", key=True),  # `old → new`: broken at the arrow, uids whole
        Column("operator id", "id", key=True),
        Column("change"),
        Column("files", "number", "right"),
        Column("bytes", "number", "right"),
    ]
    edited: dict[str, int] = {}  # states edited, by operator label
    for edit in report.states:
        edited[edit.operator] = edited.get(edit.operator, 0) + 1
    rows = [list(_migrated_operator_row(op, edited)) for op in report.operators]
    print_table(columns, rows)
    stdout_console().print(
        f"{report.count(RENAMED)} renamed, {report.count(DROPPED)} dropped, "
        f"{report.count(CARRIED)} kept; {report.files} files, {human_bytes(report.bytes)}"
    )
    for edit in report.states:
        print_line(f"state {edit.operator}/{edit.state}: {_state_edit_text(edit)}")
    print_tasks_run(report.tasks_run)


def _state_edit_text(edit: StateEditReport) -> str:
    if edit.action == "rename":
        return f"renamed to {edit.new_name!r}"
    if edit.action == "replace":
        return f"replaced by {edit.rows} entries"
    if edit.action == "schema":
        return "; ".join(("rewritten into the new job's types", *edit.warnings))
    return {"drop": "dropped", "ttl": "TTL on", "no-ttl": "TTL off"}.get(edit.action, edit.action)


def _migrated_operator_row(op: MigratedOperator, edited: dict[str, int]) -> tuple[str, ...]:
    from statectl.api.reports import DROPPED, RENAMED

    change = op.change
    old = change.old_uid or change.old_id
    if change.action == DROPPED:
        return old, change.old_id, "dropped", "", ""
    # An operator whose states were edited is not merely kept (the states: lines below).
    name, what = old, "edited" if edited.get(old) else "kept"
    if change.action == RENAMED:  # a new uid that hashes to the old id only records the uid
        new_id = change.old_id != change.new_id
        name = f"{old} → {change.new_uid}" if new_id else old
        what = "renamed" if new_id else "uid set"
    return name, change.new_id or "-", what, str(op.files), human_bytes(op.bytes)


def print_position_edits(report: PositionsEditReport, json_output: bool) -> None:
    """What `migrate --kafka-offset/--file-position` moved: one line per split (or JSON)."""
    from statectl.api.reports import render_position

    changes = [
        {
            **pick_fields(change, "operator_id", "uid", "kind", "state", "subtask", "split_id"),
            "old": render_position(change.kind, change.old),
            "new": render_position(change.kind, change.new),
        }
        for change in report.changes
    ]
    if json_output:
        print_json(
            {**pick_fields(report, "source", "destination", "metadata_version"), "changes": changes}
        )
        return
    print_line(f"Wrote {report.destination} (metadata v{report.metadata_version})")
    for change in changes:
        where = "enumerator" if change["subtask"] is None else f"subtask {change['subtask']}"
        print_line(
            f"{change['uid'] or change['operator_id']} {where} {change['split_id']}: "
            f"{change['old']} → {change['new']}"
        )
