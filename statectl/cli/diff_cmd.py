"""`statectl diff`: do two savepoints hold the same state? Exit 0 identical, 1 different."""

from __future__ import annotations

from typing import Annotated

import typer

from statectl.cli import output
from statectl.cli.options import (
    JsonOption,
    MasterImpliesSparkOption,
    OperatorOption,
    ReadOptions,
    SparkConfOption,
    option_groups,
    parse_spark_conf,
)


@option_groups
def diff_command(
    a: Annotated[
        str,
        typer.Argument(metavar="A", help="First savepoint (directory or _metadata; path or URL)."),
    ],
    b: Annotated[str, typer.Argument(metavar="B", help="Second savepoint.")],
    operator: OperatorOption = None,
    json_output: JsonOption = False,
    spark: Annotated[
        bool | None,
        typer.Option(
            "--spark/--no-spark",
            help="Compare keyed state with a Spark job (default: only above 64 MiB of it, "
            "or when --master is given).",
        ),
    ] = None,
    master: MasterImpliesSparkOption = None,
    conf: SparkConfOption = None,
    *,
    read: ReadOptions,
) -> None:
    """Compare the state of two savepoints, whatever their parallelism and file layout.

    Operators are matched by id. Per state it counts entries only in A, only in B and with a
    different value, and shows the first few, decoded where the serializers are known.
    Exit code 0: identical; 1: different.

    Examples:

      statectl diff ./sp ./sp-p8

      statectl diff s3://b/sp s3://b/sp-p16 --operator enrich --json | jq '.states[]'
    """
    import statectl

    spark_conf = parse_spark_conf(conf)
    render = output.renderer(json_output)
    with render.progress("diff", writes=False) as progress:
        progress.phase("reading metadata")
        sp_a = read.open(a)
        sp_b = read.open(b)
        # Refuse inconsistent input before reading entries.
        sp_a.ensure_consistent(progress=progress.update)
        sp_b.ensure_consistent(progress=progress.update)
        report = statectl.diff(
            sp_a, sp_b, operator, spark=spark, master=master, spark_conf=spark_conf,
            progress=progress.update,
        )  # fmt: skip
    render.diff(report)
    raise typer.Exit(0 if report.identical else 1)
