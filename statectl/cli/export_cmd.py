"""`statectl export`: every state entry of a savepoint as rows of Parquet."""

from __future__ import annotations

import functools
from typing import Annotated

import typer

from statectl.cli import output
from statectl.cli.options import (
    AllowExternalFilesOption,
    JsonSummaryOption,
    MasterImpliesSparkOption,
    OperatorOption,
    OverwriteOutOption,
    SavepointArgument,
    SparkConfOption,
    StorageOptionFlags,
    parse_spark_conf,
    parse_storage_options,
)


def export_command(
    path: SavepointArgument,
    out: Annotated[
        str,
        typer.Option(
            "--output", "-o", help="OUT.parquet, or a folder (ending in /) of part files."
        ),
    ],
    operator: OperatorOption = None,
    state: Annotated[str | None, typer.Option("--state", help="Only this state (name).")] = None,
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
    storage_option: StorageOptionFlags = None,
    allow_external_files: AllowExternalFilesOption = False,
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
    from statectl.execution.factory import choose_engine
    from statectl.operations.export import export  # pyarrow: for this command only
    from statectl.operations.verify import ensure_consistent
    from statectl.savepoint.reader import open_savepoint
    from statectl.savepoint.storage import locate

    options = parse_storage_options(storage_option)
    sp = open_savepoint(path, options, allow_external_files)
    ensure_consistent(sp, [sp.find_operator(operator)] if operator else None)
    use_spark = spark or master is not None
    engine = choose_engine(
        use_spark, master, parse_spark_conf(conf), sp.directory, locate(out, options)
    )
    from statectl.operations.typed_export import export_typed

    run = export_typed if typed else functools.partial(export, folder=use_spark)
    report = run(
        sp,
        out,
        operator=operator,
        state=state,
        engine=engine,
        overwrite=overwrite,
        storage_options=options,
    )
    output.renderer(json_output).export(report)
