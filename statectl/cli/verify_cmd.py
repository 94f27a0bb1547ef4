"""`statectl verify`: the check a CI step runs before deploying a savepoint.

Findings are the command's data: one line each on stdout (or one JSON document with `--json`).
Exit 0 when clean, 1 when anything was found, 2 for usage errors.
"""

from __future__ import annotations

from typing import Annotated

import typer

from statectl.cli import output
from statectl.cli.options import JsonOption, ReadOptions, SavepointArgument, option_groups


@option_groups
def verify(
    path: SavepointArgument,
    deep: Annotated[
        bool,
        typer.Option(
            "--deep",
            help="Also walk every key-group block and check every key's key group.",
        ),
    ] = False,
    json_output: JsonOption = False,
    *,
    read: ReadOptions,
) -> None:
    """Check that a savepoint is complete and consistent; exit 1 when it is not.

    Files exist with their declared sizes, key-group ranges cover every key group exactly once,
    offsets lie inside their files in order, headers parse; with --deep every key-group block
    walks cleanly and every key sits in its key group.

    Examples:

      statectl verify ./savepoint-1a2b3c-0123456789ab

      statectl verify s3://bucket/savepoints/sp-1 --deep --json | jq '.findings[]'
    """
    import statectl

    render = output.renderer(json_output)
    with render.progress("verify", writes=False, shown=deep) as progress:
        result = statectl.verify(
            path, deep, read.storage_options, allow_external_files=read.allow_external_files,
            progress=progress.update,
        )  # fmt: skip
    render.verify(result)
    if not result.ok:
        raise typer.Exit(1)
