"""What `diff` prints: a verdict, the states that differ and an example of each difference."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from statectl.cli.console import (
    counted,
    pick_fields,
    print_line,
    print_table,
    stdout_console,
)

if TYPE_CHECKING:
    from statectl.api.reports import (
        DiffReport,
        Example,
        StateDiff,
    )
    from statectl.cli.tables import Column


def diff_to_json(report: DiffReport) -> dict[str, Any]:
    return {
        **pick_fields(report, "a", "b", "identical", "engine"),
        "operators_only_in_a": [vars(o) for o in report.operators_only_in_a],
        "operators_only_in_b": [vars(o) for o in report.operators_only_in_b],
        "notes": list(report.notes),
        "states": [_state_diff_json(s) for s in report.states],
    }


def _state_diff_json(state: StateDiff) -> dict[str, Any]:
    return {
        **pick_fields(state, "operator", "operator_id", "state", "scope", "kind", "identical"),
        **pick_fields(state, "entries_a", "entries_b", "only_in_a", "only_in_b", "changed", "note"),
        "examples": [_example_json(e) for e in state.examples],
    }


def _example_json(example: Example) -> dict[str, Any]:
    from statectl.api.reports import jsonable

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


def print_diff(report: DiffReport) -> None:
    """Fitted to the terminal like every table (a CI log gets 80 columns, or COLUMNS); an
    example is one line, never wrapped (values are JSON)."""
    print_line(f"A: {report.a}")
    print_line(f"B: {report.b}")
    for side, refs in (("A", report.operators_only_in_a), ("B", report.operators_only_in_b)):
        for ref in refs:
            print_line(f"operator only in {side}: {ref.operator} ({ref.operator_id})")
    for note in report.notes:
        print_line(f"note: {note}")
    if report.states:
        print_table(*_diff_table(report), title="States")
    for state in report.states:
        for example in state.examples:
            print_line(f"  {state.operator}/{state.state}: {_describe(example)}")
    stdout_console().print(_diff_verdict(report))


def _diff_verdict(report: DiffReport) -> str:
    if report.identical:
        return f"[bold green]identical[/] ({counted(len(report.states), 'state')} compared)"
    differing = sum(not s.identical for s in report.states)
    only = len(report.operators_only_in_a) + len(report.operators_only_in_b)
    extra = f", {counted(only, 'operator')} on one side only" if only else ""
    return f"[bold red]different[/]: {differing} of {len(report.states)} states{extra}"


def _diff_table(report: DiffReport) -> tuple[list[Column], list[list[str]]]:
    from statectl.cli.tables import Column

    columns = [Column("operator", "id", key=True), Column("state", "id", key=True)]
    columns += [Column("scope"), Column("kind")]
    columns += [
        Column(header, "number", "right")
        for header in ("entries A", "entries B", "only in A", "only in B", "changed")
    ]
    columns.append(Column("result"))
    rows = []
    for s in report.states:
        status = "same" if s.identical else (s.note or "differs")
        counts = (s.entries_a, s.entries_b, s.only_in_a, s.only_in_b, s.changed)
        rows.append([s.operator, s.state, s.scope, s.kind, *map(str, counts), status])
    return columns, rows


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
    from statectl.api.reports import jsonable

    return json.dumps(jsonable(value), ensure_ascii=False)
