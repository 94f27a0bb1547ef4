"""`statectl check`: what Flink does when the new version of a job restores a savepoint."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from statectl.cli.options import JsonOption, ReadOptions, SavepointArgument, option_groups

if TYPE_CHECKING:
    from statectl.api import Savepoint


@option_groups
def check_command(
    path: SavepointArgument,
    classpath: Annotated[
        list[str],
        typer.Option(
            "--classpath",
            metavar="JAR_OR_DIR",
            help="The new job's jar or class folder (repeatable).",
        ),
    ],
    types: Annotated[
        list[str] | None,
        typer.Option(
            "--type",
            metavar="OP/STATE=TYPE",
            help="A state's new type declared in code, as inspect prints types (repeatable).",
        ),
    ] = None,
    json_output: JsonOption = False,
    *,
    read: ReadOptions,
) -> None:
    """Say, state by state, what Flink does when the new job restores a savepoint.

    For every state: `as-is`, `migrates` (Flink converts it on restore, nothing lost: a POJO
    field added or removed), `loses` (Flink restores, but values are lost: a renamed POJO
    field comes back null), `refused` (Flink refuses the restore: a field retyped, a Row or
    Tuple changed, a class no longer a POJO) or `unknown` (the new type could not be
    determined), with the reason. The new types come from the job's class files, read
    without a JVM (POJOs, enums, Avro specific records, Kryo classes); types declared in code
    (a Row's RowTypeInfo, a Tuple's type arguments, basic types) are given with --type and
    are otherwise assumed unchanged. Exit 0 when every state is `as-is` or `migrates`, 1
    otherwise: meant for a CI step before a deployment.

    Examples:

      statectl check ./savepoint-1a2b3c --classpath target/job-2.0.jar

      statectl check s3://b/sp --classpath job.jar --type 'orders/sum=TUPLE2{f0 STRING, f1 BIGINT}'

      statectl check ./sp --classpath job.jar --json | jq '.states[] | select(.verdict=="loses")'
    """
    import statectl
    from statectl.cli import check_view

    for entry in classpath:
        if not Path(entry).exists():
            raise typer.BadParameter(f"{entry}: no such file or folder", param_hint="--classpath")
    given = dict(type_option(value) for value in types or ())
    savepoint = read.open(path)
    for target in given:
        _known_state(savepoint, target)
    report = statectl.check(savepoint, classpath, given)
    if json_output:
        check_view.print_check_json(report)
    else:
        check_view.print_check(report)
    if not report.ok:
        raise typer.Exit(1)


def _known_state(savepoint: Savepoint, target: str) -> None:
    """A --type naming no state of the savepoint is a usage error."""
    from statectl import StatectlError

    operator, _, state = target.rpartition("/")
    try:
        savepoint.operator(operator).state(state)
    except StatectlError as exc:
        raise typer.BadParameter(f"{target}: {exc.message}", param_hint="--type") from None


def type_option(value: str) -> tuple[str, str]:
    """`OPERATOR/STATE=TYPE` as (OPERATOR/STATE, TYPE); the type's syntax is checked here,
    so that a mistyped one is a usage error."""
    from statectl.api.helpers import parse_state_type

    target, equals, text = value.partition("=")
    if not equals or "/" not in target.strip("/") or not text.strip():
        raise typer.BadParameter(f"expected OP/STATE=TYPE, got {value!r}", param_hint="--type")
    try:
        parse_state_type(text)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--type") from None
    return target, text
