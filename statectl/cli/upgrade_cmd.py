"""`statectl upgrade`: whether Flink 2.x restores a 1.x savepoint, state by state."""

from __future__ import annotations

from typing import Annotated

import typer

from statectl.cli.options import RewriteOptions, SavepointArgument, option_groups


@option_groups
def upgrade_command(
    path: SavepointArgument,
    check: Annotated[
        bool, typer.Option("--check", help="Say which states Flink 2.x would not restore.")
    ] = False,
    to: Annotated[
        str, typer.Option("--to", metavar="VERSION", help="The Flink 2.x release.")
    ] = "2.3",
    destination: Annotated[
        str | None,
        typer.Option("--output", "-o", metavar="DST", help="Write the upgraded savepoint here."),
    ] = None,
    drop_unconvertible: Annotated[
        bool,
        typer.Option(
            "--drop-unconvertible", help="Drop the states that cannot be converted (else: refuse)."
        ),
    ] = False,
    classpath: Annotated[
        list[str] | None,
        typer.Option(
            "--classpath",
            metavar="JAR_OR_DIR",
            help="The job's jar or class folder, for user classes Kryo wrote (repeatable).",
        ),
    ] = None,
    *,
    rewrite: RewriteOptions,
) -> None:
    """Check a Flink 1.x savepoint for Flink 2.x, or rewrite it so that 2.x restores it.

    For every keyed and operator state: `ok` (Flink 2.x restores it as it is), `refused` (the
    restore fails: a POJO's List, Map or Set field, which 1.x wrote with Kryo; a serializer 2.x
    removed; the legacy FlinkKafkaConsumer's offsets), `wrong` (the restore succeeds with wrong
    values: Kryo 2 bytes that Kryo 5 reads otherwise) or `unknown` (Kryo values of a class
    statectl cannot read without the job's classes). Exit 1 when a state is not `ok`: meant
    for a CI step before an upgrade. Reads state headers, and the values of Kryo states whose
    type does not decide.

    With -o DST, every flagged state is converted: Kryo 2 values written as Kryo 5 writes them,
    a POJO's List, Map and Set fields as Flink 2.x's collection serializers write them (their
    element types from the values), the serializer snapshots and `_metadata` (V6) as 2.x
    writes them; everything else is copied. A state that cannot be converted (a user class
    Kryo wrote field by field, without --classpath) is refused in one line naming it, and
    nothing is written, unless --drop-unconvertible drops exactly those states. --classpath
    JOB.jar reads the job's class files (no JVM) for the fields Kryo wrote.

    Examples:

      statectl upgrade ./savepoint-1a2b3c --check

      statectl upgrade s3://b/sp --check --to 2.3 --json | jq '.states[] | select(.verdict != "ok")'

      statectl upgrade ./sp-1.20 -o ./sp-2.3 --to 2.3
    """
    import statectl
    from statectl.cli import upgrade_view

    if check == (destination is not None):
        raise typer.BadParameter("give exactly one of them", param_hint="'--check' / '-o'")
    options = rewrite.read.storage_options
    savepoint = rewrite.read.open(path)
    if destination is not None:
        from statectl.api import stale_staging
        from statectl.cli import console

        console.warn_stale_staging(stale_staging(destination, options))
        written = statectl.upgrade(
            savepoint, destination, to=to, drop_unconvertible=drop_unconvertible,
            classpath=classpath or (), overwrite=rewrite.overwrite, storage_options=options,
            master=rewrite.spark.master, spark_conf=rewrite.spark.spark_conf,
            head_start=rewrite.spark.head_start,
        )  # fmt: skip
        upgrade_view.print_upgrade(written, rewrite.json_output)
        return
    report = savepoint.check_upgrade(to, classpath or ())
    if rewrite.json_output:
        upgrade_view.print_check_json(report)
    else:
        upgrade_view.print_check(report)
    if not report.ok:
        raise typer.Exit(1)
