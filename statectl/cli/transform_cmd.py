"""`statectl transform`: edit one keyed state as a table (Spark SQL or Python), write it back."""

from __future__ import annotations

from typing import Annotated

import typer

from statectl.cli import console, output
from statectl.cli.options import (
    DestinationOption,
    JsonOption,
    MasterOption,
    OverwriteOption,
    ReadOptions,
    SourceArgument,
    SparkConfOption,
    option_groups,
    parse_spark_conf,
)


@option_groups
def transform_command(
    source: SourceArgument,
    destination: DestinationOption,
    operator: Annotated[
        str, typer.Option("--operator", metavar="OPERATOR", help="The operator: uid, name or id.")
    ],
    state: Annotated[str, typer.Option("--state", metavar="NAME", help="The keyed state to edit.")],
    sql: Annotated[
        str | None,
        typer.Option(
            "--sql",
            metavar="QUERY",
            help="A Spark SQL query over the view `state`; its rows are kept.",
        ),
    ] = None,
    python: Annotated[
        str | None,
        typer.Option(
            "--python",
            metavar="MODULE:FUNCTION",
            help="A function called with each pyarrow RecordBatch of the state; it returns "
            "a RecordBatch, a Table or None.",
        ),
    ] = None,
    classpath: Annotated[
        list[str] | None,
        typer.Option(
            "--classpath",
            metavar="JAR_OR_DIR",
            help="The job's jar or class folder (repeatable): a null into a POJO field its "
            "class declares primitive is refused; for user classes Kryo wrote.",
        ),
    ] = None,
    master: MasterOption = "local[*]",
    conf: SparkConfOption = None,
    overwrite: OverwriteOption = False,
    json_output: JsonOption = False,
    *,
    read: ReadOptions,
) -> None:
    """Edit one keyed state as a table and write the savepoint back with the result.

    The state reads as the table `export --typed` and `spark.read.format("flink-state")`
    give: key, namespace, value (MAP: user_key; TTL: ttl_timestamp; timers: timestamp). The
    result's rows become the state's entries: rows left out are removed, new keys go to the
    key group (and subtask) Flink assigns them. A result whose columns do not fit the state
    is refused, naming the column; nothing is written then. The output keeps the input's
    format (canonical or RocksDB native); every other state is carried over as bytes.

    A null written into a POJO field that the job's class (--classpath) declares primitive
    (`int`, not `Integer`) is refused: Flink cannot restore it. Without the class, such nulls
    are written with a warning naming the field.

    Examples:

      statectl transform ./sp -o ./sp-fixed --operator orders --state totals \\
        --sql "SELECT * FROM state WHERE key <> 'poison'"

      statectl transform ./sp -o ./sp-fixed --operator orders --state totals \\
        --python fixes:reset_counters
    """
    import statectl
    from statectl.api import stale_staging

    if (sql is None) == (python is None):
        raise typer.BadParameter("give exactly one of them", param_hint="'--sql' / '--python'")
    options = read.storage_options
    spark_conf = parse_spark_conf(conf)
    savepoint = read.open(source)
    console.warn_stale_staging(stale_staging(destination, options))
    render = output.renderer(json_output)
    with render.progress("transform") as progress:
        report = statectl.transform(
            savepoint,
            destination,
            operator,
            state,
            sql=sql,
            python=python,
            master=master,
            spark_conf=spark_conf,
            overwrite=overwrite,
            storage_options=options,
            progress=progress.update,
            classpath=classpath or (),
        )
    render.migrate(report)
    console.warn([line for edit in report.states for line in edit.warnings])
