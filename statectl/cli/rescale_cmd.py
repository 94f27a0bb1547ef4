"""`statectl rescale`: a new savepoint at a new parallelism, written by a Spark job."""

from __future__ import annotations

import dataclasses
import itertools
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any

import typer

from statectl.cli import console, output
from statectl.cli.options import (
    DestinationOption,
    KeyedFormatOption,
    PlannedWriteOptions,
    option_groups,
    parse_keyed_format,
)

if TYPE_CHECKING:
    from statectl.api import Savepoint
    from statectl.api.reports import Engine, RescalePlan, RescaleReport


@option_groups
def rescale(
    source: Annotated[
        str, typer.Argument(help="Savepoint to read (directory or _metadata, path or URL).")
    ],
    destination: DestinationOption,
    parallelism: Annotated[
        int | None,
        typer.Option(
            "--parallelism",
            "-p",
            metavar="N",
            min=1,
            help="New parallelism of every operator with state.",
        ),
    ] = None,
    operator: Annotated[
        list[str] | None,
        typer.Option(
            "--operator",
            metavar="OPERATOR=N",
            help="New parallelism N of one operator (uid, name or 32-hex id); repeatable.",
        ),
    ] = None,
    max_parallelism: Annotated[
        int | None,
        typer.Option(
            "--max-parallelism",
            metavar="N",
            min=1,
            max=32768,
            help="New max parallelism (number of key groups) of every operator; keys are "
            "re-hashed. Key types: String, Long, Integer, Short, Byte, Boolean, Character, "
            "Double, Float; SQL's RowData; Tuple and Row of the basic types.",
        ),
    ] = None,
    keyed_format: KeyedFormatOption = None,
    *,
    write: PlannedWriteOptions,
) -> None:
    """Repartition keyed state by key group and redistribute operator state, as Flink would.

    Key-group blocks and list elements are copied as bytes. Keyed state keeps the input's
    format unless --format says otherwise: CANONICAL key-group blocks, or NATIVE RocksDB
    instances (one per new subtask, holding exactly its key groups, which Flink's RocksDB
    backend restores as fast as its own native savepoint). Flink restores the output at the new
    parallelism; the input is never modified.

    --max-parallelism re-hashes every key into the key groups of the new max parallelism
    (keys of the types listed under the option only); the restored job must set that max
    parallelism or leave it unset.

    Examples:

      statectl rescale ./sp -o ./sp-p8 --parallelism 8

      statectl rescale ./sp -o ./sp-m4096 --max-parallelism 4096 --parallelism 16

      statectl rescale s3://b/sp -o s3://b/sp-p4 -p 4 --operator enrich=2 --master spark://host:7077
    """
    overrides = dict(_operator_override(pair) for pair in operator or ())
    if parallelism is None and not overrides and max_parallelism is None:
        raise typer.BadParameter(
            "give --parallelism, --max-parallelism or at least one --operator UID=N",
            param_hint="--parallelism",
        )

    def plan_with(savepoint: Savepoint) -> RescalePlan:
        import statectl

        return statectl.plan_rescale(
            savepoint,
            parallelism,
            operators=overrides,
            max_parallelism=max_parallelism,
            keyed_format=parse_keyed_format(keyed_format),
        )

    plan_and_write("rescale", source, destination, write, plan_with)


def _operator_override(pair: str) -> tuple[str, int]:
    """`UID_NAME_OR_ID=N`, split at the last `=`: operator names may hold one
    (`GroupAggregate(groupBy=[k], select=[…])` without simplified names)."""
    name, sep, value = pair.rpartition("=")
    if not sep or not name:
        raise typer.BadParameter(f"expected KEY=VALUE, got {pair!r}", param_hint="--operator")
    return name, _positive_int(value, name)


def _positive_int(value: str, name: str) -> int:
    if not value.isdigit() or int(value) < 1:
        raise typer.BadParameter(
            f"{name}={value}: parallelism must be a positive integer", param_hint="--operator"
        )
    return int(value)


def plan_and_write(
    command: str,
    source: str,
    destination: str,
    flags: PlannedWriteOptions,
    make_plan: Callable[[Savepoint], RescalePlan],
) -> None:
    """Plan `command` over a consistent `source`; show the plan (--dry-run) or write it.

    A write prepares its engine first (a cluster's Spark starts in the background, so that its
    start overlaps reading and planning); `--json` reports the seconds of each phase
    (`timings`) and where the tasks ran (`tasks`)."""
    from statectl.api import predicted_loads, prepare_engine

    options = flags.read.storage_options
    engine, conf = None, {}
    if not flags.dry_run:
        conf = flags.spark.spark_conf
        engine = prepare_engine(
            source,
            destination,
            master=flags.spark.master,
            spark_conf=conf,
            storage_options=options,
            head_start=flags.spark.head_start,
        )
    clock = [time.monotonic()]  # after the imports, once a cluster's Spark is starting
    savepoint = flags.read.open(source)
    savepoint.ensure_consistent()  # refuse inconsistent input before planning or writing
    clock.append(time.monotonic())
    plan = make_plan(savepoint)
    clock.append(time.monotonic())
    render = output.renderer(flags.json_output)
    if flags.dry_run:
        render.plan(plan, predicted_loads(plan))
        return
    report = _write(command, plan, destination, flags, render, options, conf, engine)
    read, planned = (round(b - a, 3) for a, b in itertools.pairwise(clock))
    timings = (("read_metadata", read), ("plan", planned), *report.timings)
    render.rescale(dataclasses.replace(report, timings=timings))


def _write(
    command: str,
    plan: RescalePlan,
    destination: str,
    flags: PlannedWriteOptions,
    render: output.Renderer,
    options: dict[str, Any] | None,
    conf: dict[str, str],
    engine: Engine | None,
) -> RescaleReport:
    """Write `plan` with a progress bar, after warning of other runs' staging folders."""
    import statectl
    from statectl.api import stale_staging

    console.warn_stale_staging(stale_staging(destination, options))
    with render.progress(command) as progress:
        return statectl.write_rescale(
            plan,
            destination,
            overwrite=flags.overwrite,
            master=flags.spark.master,
            spark_conf=conf,
            head_start=flags.spark.head_start,
            engine=engine,
            progress=progress.update,
            storage_options=options,
        )
