"""Rendering: rich tables for people, one JSON document on stdout for machines."""

from __future__ import annotations

import json
import sys
from typing import Any

from rich.console import Console
from rich.table import Table

from statectl.savepoint.summary import OperatorSummary, SavepointSummary

stdout = Console(soft_wrap=False)
stderr = Console(stderr=True)


def print_json(document: Any) -> None:
    sys.stdout.write(json.dumps(document, indent=2, ensure_ascii=False) + "\n")


def human_bytes(count: int) -> str:
    size = float(count)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{int(size)} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


def summary_to_json(summary: SavepointSummary) -> dict[str, Any]:
    """The documented `inspect --json` schema (see README)."""
    return {
        "location": summary.location,
        "metadata_version": summary.metadata_version,
        "checkpoint_id": summary.checkpoint_id,
        "operators": [_operator_json(op, summary.deep) for op in summary.operators],
    }


def _operator_json(op: OperatorSummary, deep: bool) -> dict[str, Any]:
    states = []
    for state in op.states:
        entry: dict[str, Any] = {
            "name": state.name,
            "scope": state.scope,
            "kind": state.kind,
            "mode": state.mode,
        }
        if state.scope == "operator":
            entry["elements"] = state.elements
        elif deep:
            entry["entries"] = state.entries
        states.append(entry)
    return {
        "id": op.id,
        "uid": op.uid,
        "name": op.name,
        "parallelism": op.parallelism,
        "max_parallelism": op.max_parallelism,
        "finished": op.finished,
        "key_serializer": op.key_serializer,
        "coordinator_bytes": op.coordinator_bytes,
        "states": states,
        "subtasks": [
            {
                "index": s.index,
                "key_groups": list(s.key_groups) if s.key_groups else None,
                "keyed_bytes": s.keyed_bytes,
                "operator_bytes": s.operator_bytes,
                "keyed_format": s.keyed_format,
                "finished": s.finished,
            }
            for s in op.subtasks
        ],
    }


def print_summary(summary: SavepointSummary) -> None:
    stdout.print(
        f"[bold]{summary.location}[/]  metadata v{summary.metadata_version}, "
        f"checkpoint {summary.checkpoint_id}, {len(summary.operators)} operators"
    )
    stdout.print(_operators_table(summary))
    for op in summary.operators:
        if op.states or any(s.keyed_bytes or s.operator_bytes for s in op.subtasks):
            _print_operator_detail(op, summary.deep)


def _operators_table(summary: SavepointSummary) -> Table:
    table = Table(title="Operators", title_justify="left")
    for column in ("uid", "name", "operator id", "parallelism", "max parallelism", "states"):
        table.add_column(column)
    table.add_column("bytes", justify="right")
    for op in summary.operators:
        table.add_row(
            op.uid or "-",
            op.name or "-",
            op.id,
            "finished" if op.finished else str(op.parallelism),
            str(op.max_parallelism),
            str(len(op.states)),
            human_bytes(op.total_bytes),
        )
    return table


def _print_operator_detail(op: OperatorSummary, deep: bool) -> None:
    title = f"{op.uid or op.id}: states"
    if op.key_serializer:
        title += f" (key serializer {op.key_serializer.rsplit('.', 1)[-1]})"
    states = Table(title=title, title_justify="left")
    for column in ("state", "scope", "kind", "mode"):
        states.add_column(column)
    states.add_column("entries" if deep else "elements", justify="right")
    for s in op.states:
        count = s.elements if s.scope == "operator" else s.entries
        states.add_row(s.name, s.scope, s.kind, s.mode or "-", "-" if count is None else str(count))
    if op.states:
        stdout.print(states)
    subtasks = Table(title=f"{op.uid or op.id}: subtasks", title_justify="left")
    for column in ("subtask", "key groups", "keyed format"):
        subtasks.add_column(column)
    subtasks.add_column("keyed bytes", justify="right")
    subtasks.add_column("operator bytes", justify="right")
    for s in op.subtasks:
        key_groups = f"{s.key_groups[0]}–{s.key_groups[1]}" if s.key_groups else "-"
        subtasks.add_row(
            str(s.index) + (" (finished)" if s.finished else ""),
            key_groups,
            s.keyed_format or "-",
            human_bytes(s.keyed_bytes),
            human_bytes(s.operator_bytes),
        )
    stdout.print(subtasks)
