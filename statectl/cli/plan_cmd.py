"""`statectl plan`: what each parallelism would cost, with charts of subtask and key-group loads."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from statectl.cli import console, output
from statectl.cli.options import (
    JsonOption,
    OperatorOption,
    ReadOptions,
    SavepointArgument,
    option_groups,
)


@option_groups
def plan(
    path: SavepointArgument,
    parallelism: Annotated[
        str | None,
        typer.Option(
            "--parallelism",
            "-p",
            metavar="LIST",
            help="Candidates: a list and ranges, e.g. 2,3,5 or 1-16 (default: 1 to twice the "
            "current parallelism, at least 16, and the divisors of the max parallelism).",
        ),
    ] = None,
    operator: OperatorOption = None,
    deep: Annotated[
        bool,
        typer.Option(
            "--deep", help="Read every entry: entries per key group, exact RocksDB native bytes."
        ),
    ] = False,
    json_output: JsonOption = False,
    png: Annotated[
        str | None,
        typer.Option(
            "--png",
            metavar="FILE",
            help="Also draw the charts into this PNG file (pip install 'statectl[plot]').",
        ),
    ] = None,
    *,
    read: ReadOptions,
) -> None:
    """Bytes per key group and per new subtask at each candidate parallelism, and the skew.

    With one candidate, the bar chart shows that parallelism; otherwise the recommended one.

    Examples:

      statectl plan ./sp

      statectl plan ./sp --operator my-uid -p 2-12 --deep

      statectl plan s3://bucket/sp -p 4,8,16 --json | jq '.operators[].candidates'
    """
    import statectl

    candidates = _candidates(parallelism)
    render = output.renderer(json_output)
    with render.progress("plan", writes=False, shown=deep) as progress:
        progress.phase("reading metadata")
        savepoint = read.open(path)
        result = statectl.plan(savepoint, operator, candidates, deep, progress=progress.update)
    render.parallelism_plan(result)
    if png:
        from statectl.cli.plot import draw_plan  # matplotlib: an optional extra

        draw_plan(result, png)
        if json_output:  # stdout is the JSON document alone
            print(f"statectl: wrote {png}", file=sys.stderr)
        else:
            console.print_line(f"Wrote {png}")


def _candidates(text: str | None) -> list[int] | None:
    if text is None:
        return None
    from statectl.api import parse_parallelisms

    try:
        return parse_parallelisms(text)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--parallelism") from None
