"""`statectl migrate`: rename operators' uids and drop operators' state, into a new savepoint."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from statectl.cli import output
from statectl.cli.options import (
    AllowExternalFilesOption,
    DestinationOption,
    JsonOption,
    OverwriteOption,
    SourceArgument,
    StorageOptionFlags,
    parse_storage_options,
)


def _repeatable(flag: str, metavar: str, help: str) -> Any:
    """A list option given once per value (typer collects the repeats)."""
    return typer.Option(flag, metavar=metavar, help=help)


def migrate_command(
    source: SourceArgument,
    destination: DestinationOption,
    rename_uid: Annotated[
        list[str] | None,
        _repeatable(
            "--rename-uid",
            "OLD=NEW",
            "Give operator OLD (uid or 32-hex id) the uid NEW and its id (repeatable).",
        ),
    ] = None,
    drop: Annotated[
        list[str] | None,
        _repeatable(
            "--drop",
            "UID_OR_ID",
            "Remove this operator and its state from the savepoint (repeatable).",
        ),
    ] = None,
    overwrite: OverwriteOption = False,
    json_output: JsonOption = False,
    storage_option: StorageOptionFlags = None,
    allow_external_files: AllowExternalFilesOption = False,
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
    import statectl
    from statectl.api import stale_staging

    renames = _parse_renames(rename_uid)
    if not renames and not drop:
        raise typer.BadParameter(
            "nothing to do: give at least one of them", param_hint="'--rename-uid' / '--drop'"
        )
    options = parse_storage_options(storage_option)
    savepoint = statectl.open(source, options, allow_external_files=allow_external_files)
    plan = statectl.plan_migration(savepoint, renames, drop or ())  # of a consistent savepoint
    output.warn_stale_staging(stale_staging(destination, options))
    render = output.renderer(json_output)
    with render.progress("migrate") as progress:
        report = statectl.write_migration(
            plan,
            destination,
            overwrite=overwrite,
            storage_options=options,
            progress=progress.update,
        )
    render.migrate(report)


def _parse_renames(pairs: list[str] | None) -> list[tuple[str, str]]:
    renames = []
    for pair in pairs or ():
        old, sep, new = pair.partition("=")
        if not sep or not old or not new:
            raise typer.BadParameter(f"expected OLD=NEW, got {pair!r}", param_hint="--rename-uid")
        renames.append((old, new))
    return renames
