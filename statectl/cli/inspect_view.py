"""What `inspect` and `verify` print: operators, states and subtasks, and the verdict."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from statectl.cli.console import (
    counted,
    pick_fields,
    print_line,
    print_note,
    print_table,
    stdout_console,
)
from statectl.cli.units import human_bytes

if TYPE_CHECKING:
    from statectl.api.reports import (
        NativeSummary,
        OperatorSummary,
        SavepointSummary,
        StateSummary,
        SubtaskSummary,
        Verification,
    )
    from statectl.cli.tables import Column


def summary_to_json(summary: SavepointSummary) -> dict[str, Any]:
    """The documented `inspect --json` schema (docs/commands/inspect.md)."""
    return {
        **pick_fields(summary, "location", "metadata_version", "checkpoint_id", "snapshot"),
        "operators": [_operator_json(op, summary.deep) for op in summary.operators],
    }


def _operator_json(op: OperatorSummary, deep: bool) -> dict[str, Any]:
    return {
        **pick_fields(op, "id", "uid", "name", "parallelism", "max_parallelism", "finished"),
        **pick_fields(op, "key_serializer", "coordinator_bytes"),
        "states": [_state_json(state, deep) for state in op.states],
        "subtasks": [_subtask_json(s) for s in op.subtasks],
    }


def _state_json(state: StateSummary, deep: bool) -> dict[str, Any]:
    entry = pick_fields(state, "name", "scope", "kind", "mode", "type", "type_tree")
    if state.scope == "operator":
        entry["elements"] = state.elements  # a broadcast state's map entries, once
        if state.copies is not None:
            entry["copies"] = state.copies
    elif deep:  # keyed entries are counted only by walking the blocks
        entry["entries"] = state.entries
    if deep:  # values are decoded only with --deep
        entry.update(pick_fields(state, "raw", "raw_reason"))
    return entry


def _subtask_json(s: SubtaskSummary) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "index": s.index,
        "key_groups": list(s.key_groups) if s.key_groups else None,
        **pick_fields(s, "keyed_bytes", "operator_bytes", "keyed_format", "finished"),
    }
    if s.native is not None:  # RocksDB native handles only
        entry["native"] = _native_json(s.native)
    return entry


def _native_json(native: NativeSummary) -> dict[str, Any]:
    return {
        **pick_fields(native, "checkpoint_id", "backend_id", "meta_bytes"),
        "column_families": list(native.column_families),
        "files": [pick_fields(f, "name", "kind", "shared", "bytes") for f in native.files],
    }


def print_summary(summary: SavepointSummary) -> None:
    from rich.text import Text

    from statectl.cli.tables import print_words

    header = Text.assemble(
        (summary.location, "bold"),
        f"  {summary.snapshot}, metadata v{summary.metadata_version}, "
        f"checkpoint {summary.checkpoint_id}, {counted(len(summary.operators), 'operator')}",
    )
    print_words(stdout_console(), header)
    print_table(*_operators_table(summary), title="Operators")
    for op in summary.operators:
        if op.states or any(s.keyed_bytes or s.operator_bytes for s in op.subtasks):
            _print_operator_detail(op, summary.deep)


def _operators_table(summary: SavepointSummary) -> tuple[list[Column], list[list[str]]]:
    """Uids and ids are what users copy: never cut, the keys of a stacked row."""
    from statectl.cli.tables import Column

    columns = [
        Column("uid", "id", key=True),
        Column("name"),
        Column("operator id", "id", key=True),
        Column("parallelism (max)", "id"),
        Column("states", "number", "right"),
        Column("bytes", "number", "right"),
    ]
    rows = [
        [
            op.uid or "-",
            op.name or "-",
            op.id,
            f"{'finished' if op.finished else op.parallelism} ({op.max_parallelism})",
            str(len(op.states)),
            human_bytes(op.total_bytes),
        ]
        for op in summary.operators
    ]
    return columns, rows


def _print_operator_detail(op: OperatorSummary, deep: bool) -> None:
    # Titles are plain lines, not table titles: a table title folds a uid wider than the table.
    if op.states:
        title = f"{op.uid or op.id}: states"
        if op.key_serializer:
            title += f" (key serializer {op.key_serializer.rsplit('.', 1)[-1]})"
        print_table(*_operator_states_table(op, deep), title=title)
        for state in op.states:
            if state.copies is not None:
                from rich.text import Text

                from statectl.cli.tables import print_words

                print_words(stdout_console(), Text(_copies_line(state, state.copies)))
    print_table(*_subtasks_table(op), title=f"{op.uid or op.id}: subtasks")
    if any(s.native for s in op.subtasks):
        _print_native_files(op)


def _copies_line(state: StateSummary, copies: int) -> str:
    entries = "?" if state.elements is None else str(state.elements)
    return (
        f"{state.name}: broadcast state, its {entries} entries counted once "
        f"(each of {counted(copies, 'subtask')} holds a copy)"
    )


def _operator_states_table(op: OperatorSummary, deep: bool) -> tuple[list[Column], list[list[str]]]:
    """State names are typed into `--state`: never cut."""
    from statectl.cli.tables import Column

    columns = [Column("state", "id", key=True)]
    columns += [Column(header) for header in ("scope", "kind", "mode")]
    columns.append(Column("type", "type"))
    # One count for every state (docs/counts.md): keyed entries (--deep), list elements, a
    # broadcast state's map entries once (its copies in a line below the table).
    columns.append(Column("entries", "number", "right"))
    if deep:
        columns.append(Column("raw", justify="right"))
    rows = []
    for s in op.states:
        count = s.elements if s.scope == "operator" else s.entries
        cells = [s.name, s.scope, s.kind, s.mode or "-", s.type or "?"]
        cells.append("-" if count is None else str(count))
        if deep:
            cells.append(_raw_cell(s))
        rows.append(cells)
    return columns, rows


def _raw_cell(state: StateSummary) -> str:
    if not state.raw:
        return "0"
    return f"{state.raw} ({state.raw_reason})" if state.raw_reason else str(state.raw)


def _subtasks_table(op: OperatorSummary) -> tuple[list[Column], list[list[str]]]:
    from statectl.cli.tables import Column

    columns = [
        Column("subtask", key=True),
        Column("key groups", "id"),
        Column("keyed format"),
        Column("keyed bytes", "number", "right"),
        Column("operator bytes", "number", "right"),
    ]
    rows = [
        [
            str(s.index) + (" (finished)" if s.finished else ""),
            f"{s.key_groups[0]}–{s.key_groups[1]}" if s.key_groups else "-",
            s.keyed_format or "-",
            human_bytes(s.keyed_bytes),
            human_bytes(s.operator_bytes),
        ]
        for s in op.subtasks
    ]
    return columns, rows


def _print_native_files(op: OperatorSummary) -> None:
    """Per RocksDB instance: its files, shared (across checkpoints) or private, and sizes."""
    from statectl.cli.tables import Column

    columns = [
        Column("subtask", key=True),
        Column("file", "id", key=True),
        Column("kind"),
        Column("scope"),
        Column("bytes", "number", "right"),
    ]
    natives = [(s.index, s.native) for s in op.subtasks if s.native is not None]
    rows = [
        [str(index), f.name, f.kind, "shared" if f.shared else "private", human_bytes(f.bytes)]
        for index, native in natives
        for f in native.files
    ]
    print_table(columns, rows, title=f"{op.uid or op.id}: RocksDB native files")
    families = natives[0][1].column_families if natives else ()
    print_line(f"column families: {', '.join(families) or '-'}")


def verification_to_json(result: Verification) -> dict[str, Any]:
    return {
        **pick_fields(result, "location", "ok", "deep"),
        "checked": {
            **pick_fields(result, "operators", "subtasks", "files", "key_groups"),
            "key_groups_of": result.key_groups_of,
            **({"entries": result.entries} if result.deep else {}),
        },
        "findings": [
            pick_fields(f, "operator", "operator_id", "subtask", "file", "problem")
            for f in result.findings
        ],
        "notes": list(result.notes),
    }


def print_verification(result: Verification) -> None:
    """Findings are the data (stdout, one line each); notes are not (stderr)."""
    for note in result.notes:
        print_note(note)
    for finding in result.findings:
        sys.stdout.write(finding.line(result.location) + "\n")
    if result.ok:
        sys.stdout.write(f"{result.location}: OK ({_checked(result)})\n")


def _checked(result: Verification) -> str:
    checked = (
        f"{counted(result.operators, 'operator')}, {counted(result.subtasks, 'subtask')}, "
        f"{counted(result.files, 'file')}"
    )
    if result.key_groups_of:  # the non-empty ones, of the operators' max parallelisms
        held = "holds" if result.key_groups == 1 else "hold"
        checked += f", {result.key_groups} of {result.key_groups_of} key groups {held} data"
    if result.unread_instances:
        checked += f", key groups of {counted(result.unread_instances, 'RocksDB instance')}"
        checked += " not read (--deep reads them)"
    if result.deep:
        checked += f", {result.entries} {'entry' if result.entries == 1 else 'entries'} walked"
    return checked
