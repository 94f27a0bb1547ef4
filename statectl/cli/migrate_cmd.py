"""`statectl migrate`: rename operators' uids and drop operators' state, into a new savepoint."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.table import Table

from statectl.cli import output
from statectl.cli.options import (
    DestinationOption,
    JsonOption,
    OverwriteOption,
    SourceArgument,
    StorageOptionFlags,
    parse_storage_options,
)
from statectl.cli.rescale_cmd import warn_stale_staging
from statectl.operations.migrate import (
    CARRIED,
    DROPPED,
    RENAMED,
    MigrationReport,
    OperatorReport,
    migrate,
    plan_migration,
)
from statectl.operations.verify import ensure_consistent
from statectl.savepoint.reader import open_savepoint


def migrate_command(
    source: SourceArgument,
    destination: DestinationOption,
    rename_uid: Annotated[
        list[str] | None,
        typer.Option(
            "--rename-uid",
            metavar="OLD=NEW",
            help="Give operator OLD (uid or 32-hex id) the uid NEW and its id (repeatable).",
        ),
    ] = None,
    drop: Annotated[
        list[str] | None,
        typer.Option(
            "--drop",
            metavar="UID_OR_ID",
            help="Remove this operator and its state from the savepoint (repeatable).",
        ),
    ] = None,
    overwrite: OverwriteOption = False,
    json_output: JsonOption = False,
    storage_option: StorageOptionFlags = None,
) -> None:
    """Rename operator uids and drop operators, writing a new self-contained savepoint.

    A renamed operator gets the operator id Flink derives from its new uid, so a job whose
    operator now has .uid("NEW") restores the old state. A dropped operator leaves the
    savepoint, so a job without it restores without --allowNonRestoredState. Every other
    operator is carried over unchanged; all files are copied into DESTINATION and referenced
    relatively, so it can be moved anywhere. No Spark, no JVM; the input is never modified.

    Examples:

      statectl migrate ./sp -o ./sp-renamed --rename-uid keyed-str=sessions

      statectl migrate ./sp -o ./sp-new --drop old-enricher --drop 0cad1b1f959e0cc01a89a8ec2be0100c

      statectl migrate s3://b/chk-42 -o s3://b/sp-42 --rename-uid Map=normalize --json
    """
    renames = _parse_renames(rename_uid)
    if not renames and not drop:
        raise typer.BadParameter(
            "nothing to do: give at least one of them", param_hint="'--rename-uid' / '--drop'"
        )
    options = parse_storage_options(storage_option)
    savepoint = open_savepoint(source, options)
    ensure_consistent(savepoint, copies_only=True)  # refuse inconsistent input before writing
    plan = plan_migration(savepoint, renames, drop or ())
    warn_stale_staging(destination, options)
    with output.TaskProgress("migrate", enabled=not json_output) as progress:
        report = migrate(
            plan,
            destination,
            overwrite=overwrite,
            storage_options=options,
            progress=progress.update,
        )
    if json_output:
        output.print_json(report_to_json(report))
    else:
        print_report(report)


def _parse_renames(pairs: list[str] | None) -> list[tuple[str, str]]:
    renames = []
    for pair in pairs or ():
        old, sep, new = pair.partition("=")
        if not sep or not old or not new:
            raise typer.BadParameter(f"expected OLD=NEW, got {pair!r}", param_hint="--rename-uid")
        renames.append((old, new))
    return renames


def report_to_json(report: MigrationReport) -> dict[str, Any]:
    return {
        "source": report.source,
        "destination": report.destination,
        "metadata_version": report.metadata_version,
        "renamed": report.count(RENAMED),
        "dropped": report.count(DROPPED),
        "carried": report.count(CARRIED),
        "files": report.files,
        "bytes": report.bytes,
        "operators": [_operator_json(op) for op in report.operators],
    }


def _operator_json(op: OperatorReport) -> dict[str, Any]:
    change = op.change
    return {
        "action": change.action,
        "uid": change.new_uid,
        "id": change.new_id,
        "old_uid": change.old_uid,
        "old_id": change.old_id,
        "files": op.files,
        "bytes": op.bytes,
    }


def print_report(report: MigrationReport) -> None:
    output.print_line(f"Wrote {report.destination} (metadata v{report.metadata_version})")
    table = Table()
    table.add_column("operator")
    table.add_column("operator id", no_wrap=True, min_width=32)
    table.add_column("change")
    table.add_column("files", justify="right")
    table.add_column("bytes", justify="right")
    for op in report.operators:
        change = op.change
        old = change.old_uid or change.old_id
        if change.action == RENAMED:
            name = f"{old} → {change.new_uid}" if change.old_id != change.new_id else old
            what = "renamed" if change.old_id != change.new_id else "uid set"
            table.add_row(name, change.new_id, what, str(op.files), _bytes(op))
        elif change.action == DROPPED:
            table.add_row(old, change.old_id, "dropped", "", "")
        else:
            table.add_row(old, change.new_id, "kept", str(op.files), _bytes(op))
    output.stdout.print(table)
    output.stdout.print(
        f"{report.count(RENAMED)} renamed, {report.count(DROPPED)} dropped, "
        f"{report.count(CARRIED)} kept; {report.files} files, {output.human_bytes(report.bytes)}"
    )


def _bytes(op: OperatorReport) -> str:
    return output.human_bytes(op.bytes)
