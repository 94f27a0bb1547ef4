"""`statectl export`: every state entry of a savepoint as rows of Parquet."""

from __future__ import annotations

from typing import Annotated

import typer

from statectl.cli import output
from statectl.cli.options import (
    JsonSummaryOption,
    MasterImpliesSparkOption,
    OperatorOption,
    OverwriteOutOption,
    ReadOptions,
    SavepointArgument,
    SparkConfOption,
    option_groups,
    parse_spark_conf,
)


@option_groups
def export_command(
    path: SavepointArgument,
    out: Annotated[
        str,
        typer.Option(
            "--output",
            "-o",
            metavar="OUT",
            help="OUT.parquet, or a folder (ending in /) of part files.",
        ),
    ],
    operator: OperatorOption = None,
    state: Annotated[
        str | None, typer.Option("--state", metavar="NAME", help="Only this state (name).")
    ] = None,
    typed: Annotated[
        bool,
        typer.Option(
            "--typed",
            help="One Parquet dataset per state, in typed columns: OUT/<operator>/<state>/.",
        ),
    ] = False,
    spark: Annotated[
        bool,
        typer.Option("--spark", help="Write a folder of part files with a Spark job."),
    ] = False,
    master: MasterImpliesSparkOption = None,
    conf: SparkConfOption = None,
    overwrite: OverwriteOutOption = False,
    json_output: JsonSummaryOption = False,
    *,
    read: ReadOptions,
) -> None:
    """Write one Parquet row per state entry: raw bytes plus JSON-decoded columns.

    Keyed entries (canonical, or RocksDB native read through rocksdict), operator list
    elements and broadcast map entries. With --typed, one dataset per (operator, state) whose
    columns are real Arrow types (key, namespace, value, ...), for DuckDB, pandas and Spark.
    OUT is written under a temporary name and renamed at the end; an existing OUT is refused
    unless --overwrite.

    Examples:

      statectl export ./sp -o state.parquet

      statectl export ./sp -o cnt.parquet --operator keyed-str --state cnt

      statectl export ./sp -o ./sp-tables/ --typed

      statectl export s3://b/sp -o s3://b/sp-export/ --spark --master spark://host:7077
    """
    import statectl

    render = output.renderer(json_output)
    with render.progress("export", writes=False) as progress:
        progress.phase("reading metadata")
        sp = read.open(path)
        sp.ensure_consistent(operator, progress=progress.update)
        report = statectl.export(
            sp,
            out,
            operator=operator,
            state=state,
            typed=typed,
            spark=spark,
            master=master,
            spark_conf=parse_spark_conf(conf),
            overwrite=overwrite,
            storage_options=read.storage_options,
            progress=progress.update,
        )
    render.export(report)
