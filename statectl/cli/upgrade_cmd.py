"""`statectl upgrade`: whether Flink 2.x restores a 1.x savepoint, state by state."""

from __future__ import annotations

from typing import Annotated

import typer

from statectl.cli.options import (
    AllowExternalFilesOption,
    JsonOption,
    SavepointArgument,
    StorageOptionFlags,
    parse_storage_options,
)


def upgrade_command(
    path: SavepointArgument,
    check: Annotated[
        bool, typer.Option("--check", help="Say which states Flink 2.x would not restore.")
    ] = False,
    to: Annotated[
        str, typer.Option("--to", metavar="VERSION", help="The Flink 2.x release.")
    ] = "2.3",
    json_output: JsonOption = False,
    storage_option: StorageOptionFlags = None,
    allow_external_files: AllowExternalFilesOption = False,
) -> None:
    """Check a Flink 1.x savepoint before restoring it with Flink 2.x.

    For every keyed and operator state: `ok` (Flink 2.x restores it as it is), `refused` (the
    restore fails: a POJO's List, Map or Set field, which 1.x wrote with Kryo; a serializer 2.x
    removed; the legacy FlinkKafkaConsumer's offsets), `wrong` (the restore succeeds with wrong
    values: Kryo 2 bytes that Kryo 5 reads otherwise) or `unknown` (Kryo values of a class
    statectl cannot read without the job's classes). Exit 1 when a state is not `ok`: meant
    for a CI step before an upgrade. Reads state headers, and the values of Kryo states whose
    type does not decide.

    Examples:

      statectl upgrade ./savepoint-1a2b3c --check

      statectl upgrade s3://b/sp --check --to 2.3 --json | jq '.states[] | select(.verdict != "ok")'
    """
    import statectl
    from statectl.cli import upgrade_view

    if not check:
        raise typer.BadParameter("only --check is available so far", param_hint="'--check'")
    options = parse_storage_options(storage_option)
    savepoint = statectl.open(path, options, allow_external_files=allow_external_files)
    report = savepoint.check_upgrade(to)
    if json_output:
        upgrade_view.print_check_json(report)
    else:
        upgrade_view.print_check(report)
    if not report.ok:
        raise typer.Exit(1)
