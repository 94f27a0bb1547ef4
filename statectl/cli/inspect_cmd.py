"""`statectl inspect`: what is in a savepoint, as rich tables or one JSON document."""

from __future__ import annotations

from typing import Annotated

import typer

from statectl.cli import output
from statectl.cli.options import ReadOptions, ShowOptions, option_groups


@option_groups
def inspect(
    shown: ShowOptions,
    deep: Annotated[
        bool, typer.Option("--deep", help="Walk every key-group block and count entries per state.")
    ] = False,
    *,
    read: ReadOptions,
) -> None:
    """Show operators, states, key-group ranges and bytes per subtask.

    Examples:

      statectl inspect ./savepoint-1a2b3c-0123456789ab

      statectl inspect s3://bucket/savepoints/sp-1/_metadata --operator my-uid --deep

      statectl inspect ./sp --json | jq '.operators[] | {uid, parallelism}'
    """

    render = output.renderer(shown.json_output)
    with render.progress("inspect", writes=False, shown=deep) as progress:
        progress.phase("reading metadata")
        savepoint = read.open(shown.path)
        savepoint.ensure_consistent(shown.operator, progress=progress.update)
        summary = savepoint.inspect(shown.operator, deep, progress=progress.update)
    render.inspect(summary)
