"""`statectl diff`: do two savepoints hold the same state? Exit 0 identical, 1 different."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from statectl.cli import output
from statectl.cli.options import (
    JsonOption,
    MasterImpliesSparkOption,
    OperatorOption,
    SparkConfOption,
    StorageOptionFlags,
    parse_spark_conf,
    parse_storage_options,
)
from statectl.execution.engine import choose_engine
from statectl.formats.state_values import jsonable
from statectl.operations.diff import DiffReport, Example, StateDiff, diff, wants_spark
from statectl.operations.verify import ensure_consistent
from statectl.savepoint.reader import open_savepoint


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
    storage_option: StorageOptionFlags = None,
) -> None:
    """Compare the state of two savepoints, whatever their parallelism and file layout.

    Operators are matched by id. Per state it counts entries only in A, only in B and with a
    different value, and shows the first few, decoded where the serializers are known.
    Exit code 0: identical; 1: different.

    Examples:

      statectl diff ./sp ./sp-p8

      statectl diff s3://b/sp s3://b/sp-p16 --operator enrich --json | jq '.states[]'
    """
    options = parse_storage_options(storage_option)
    sp_a, sp_b = open_savepoint(a, options), open_savepoint(b, options)
    ensure_consistent(sp_a)  # refuse inconsistent input before reading entries
    ensure_consistent(sp_b)
    use_spark = wants_spark(sp_a, sp_b, operator, True if master else spark)
    engine = choose_engine(
        use_spark, master, parse_spark_conf(conf), sp_a.directory, sp_b.directory
    )
    report = diff(sp_a, sp_b, operator, engine)
    if json_output:
        output.print_json(report_to_json(report))
    else:
        print_report(report)
    raise typer.Exit(0 if report.identical else 1)


def report_to_json(report: DiffReport) -> dict[str, Any]:
    return {
        "a": report.a,
        "b": report.b,
        "identical": report.identical,
        "engine": report.engine,
        "operators_only_in_a": [vars(o) for o in report.operators_only_in_a],
        "operators_only_in_b": [vars(o) for o in report.operators_only_in_b],
        "notes": list(report.notes),
        "states": [_state_json(s) for s in report.states],
    }


def _state_json(state: StateDiff) -> dict[str, Any]:
    return {
        "operator": state.operator,
        "operator_id": state.operator_id,
        "state": state.state,
        "scope": state.scope,
        "kind": state.kind,
        "identical": state.identical,
        "entries_a": state.entries_a,
        "entries_b": state.entries_b,
        "only_in_a": state.only_in_a,
        "only_in_b": state.only_in_b,
        "changed": state.changed,
        "note": state.note,
        "examples": [_example_json(e) for e in state.examples],
    }


def _example_json(example: Example) -> dict[str, Any]:
    shown: dict[str, Any] = {"change": example.change}
    if example.key_group is not None:
        shown["key_group"] = example.key_group
    if example.key is not None:
        shown["key"] = jsonable(example.key)
    if example.user_key is not None:
        shown["user_key"] = jsonable(example.user_key)
    if example.timestamp is not None:
        shown["timestamp"] = example.timestamp
    shown["a"] = jsonable(example.a)
    shown["b"] = jsonable(example.b)
    return shown


def print_report(report: DiffReport) -> None:
    # A CI log is no terminal: give the table room instead of rich's 80 columns.
    out = output.stdout if output.stdout.is_terminal else Console(soft_wrap=False, width=160)
    out.print(f"A: {report.a}\nB: {report.b}", highlight=False)
    for side, refs in (("A", report.operators_only_in_a), ("B", report.operators_only_in_b)):
        for ref in refs:
            out.print(f"operator only in {side}: {ref.operator} ({ref.operator_id})")
    for note in report.notes:
        out.print(f"note: {note}", highlight=False)
    if report.states:
        out.print(_states_table(report))
    for state in report.states:
        for example in state.examples:
            out.print(f"  {state.operator}/{state.state}: {_describe(example)}", highlight=False)
    differing = sum(not s.identical for s in report.states)
    if report.identical:
        compared = output.counted(len(report.states), "state")
        out.print(f"[bold green]identical[/] ({compared} compared)")
    else:
        only = len(report.operators_only_in_a) + len(report.operators_only_in_b)
        extra = f", {output.counted(only, 'operator')} on one side only" if only else ""
        out.print(f"[bold red]different[/]: {differing} of {len(report.states)} states{extra}")


def _states_table(report: DiffReport) -> Table:
    table = Table(title="States", title_justify="left")
    for column in ("operator", "state", "scope", "kind"):
        table.add_column(column)
    for column in ("entries A", "entries B", "only in A", "only in B", "changed"):
        table.add_column(column, justify="right")
    table.add_column("")
    for s in report.states:
        status = "same" if s.identical else (s.note or "differs")
        table.add_row(
            s.operator,
            s.state,
            s.scope,
            s.kind,
            *(str(n) for n in (s.entries_a, s.entries_b, s.only_in_a, s.only_in_b, s.changed)),
            status,
        )
    return table


def _describe(example: Example) -> str:
    parts = []
    if example.key is not None:
        parts.append(f"key {_text(example.key)}")
    if example.user_key is not None:
        parts.append(f"user key {_text(example.user_key)}")
    if example.timestamp is not None:
        parts.append(f"timer {example.timestamp}")
    if example.key_group is not None:
        parts.append(f"(key group {example.key_group})")
    where = " ".join(parts) or "element"
    if example.change == "changed":
        return f"{where}: A {_text(example.a)} → B {_text(example.b)}"
    side, value = ("A", example.a) if example.change == "only_in_a" else ("B", example.b)
    return f"{where}: only in {side}" + ("" if value is None else f" = {_text(value)}")


def _text(value: Any) -> str:
    return json.dumps(jsonable(value), ensure_ascii=False)
