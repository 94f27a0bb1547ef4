"""Everything the commands print: rich tables for people, one JSON document for machines.

A command picks its renderer once from `--json` (`renderer(json_output)`) and hands it the
operation's result; warnings, errors and progress go to stderr in either mode.
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from statectl.cli.units import human_bytes

# rich, and the modules only one renderer needs, are imported where they are used: a command
# loads no more than it prints (`--json` needs no rich at all).
if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress, TaskID

    from statectl.api.reports import (
        DiffReport,
        Example,
        ExportReport,
        KeyedTarget,
        MigratedOperator,
        MigrationReport,
        NativeSummary,
        OperatorPlan,
        OperatorSummary,
        ParallelismPlan,
        PositionsEditReport,
        RescaledOperator,
        RescalePlan,
        RescaleReport,
        SavepointSummary,
        StateDiff,
        StateEditReport,
        StateSummary,
        SubtaskLoads,
        SubtaskSummary,
        SubtaskTarget,
        Verification,
    )
    from statectl.cli.tables import Column
    from statectl.progress import Progress as JobProgress


@functools.cache
def _stdout() -> Console:
    """The console of tables and lines, made on first use: `--json` never loads rich."""
    from rich.console import Console

    return Console(soft_wrap=False)


@functools.cache
def _stderr() -> Console:
    """The console of the progress bar, made on first use."""
    from rich.console import Console

    return Console(stderr=True)


# A uid and the operator id Flink derives from it (`uid-hash`).
UidId = tuple[str, str]
# Keyed bytes per new subtask a rescale plan predicts, by operator id.
KeyedLoads = Mapping[str, "SubtaskLoads"]


# --- the renderers ---------------------------------------------------------------------------


class Renderer(Protocol):
    """What a command prints of its result: `ConsoleRenderer` or `JsonRenderer`."""

    def inspect(self, summary: SavepointSummary) -> None: ...
    def verify(self, result: Verification) -> None: ...
    def diff(self, report: DiffReport) -> None: ...
    def plan(self, plan: RescalePlan, loads: KeyedLoads) -> None: ...
    def parallelism_plan(self, plan: ParallelismPlan) -> None: ...
    def rescale(self, report: RescaleReport) -> None: ...
    def migrate(self, report: MigrationReport) -> None: ...
    def export(self, report: ExportReport) -> None: ...
    def uid_hash(self, ids: Sequence[UidId]) -> None: ...
    def progress(self, what: str) -> TaskProgress: ...


def renderer(json_output: bool) -> Renderer:
    return JsonRenderer() if json_output else ConsoleRenderer()


class JsonRenderer:
    """One JSON document on stdout (the schemas in the README); no progress bar, so
    stderr stays quiet for scripts."""

    def inspect(self, summary: SavepointSummary) -> None:
        print_json(summary_to_json(summary))

    def verify(self, result: Verification) -> None:
        print_json(verification_to_json(result))

    def diff(self, report: DiffReport) -> None:
        print_json(diff_to_json(report))

    def plan(self, plan: RescalePlan, loads: KeyedLoads) -> None:
        print_json(plan_to_json(plan, loads))

    def parallelism_plan(self, plan: ParallelismPlan) -> None:
        from statectl.cli import plan_view

        print_json(plan_view.plan_json(plan))

    def rescale(self, report: RescaleReport) -> None:
        print_json(rescale_report_to_json(report))

    def migrate(self, report: MigrationReport) -> None:
        print_json(migration_to_json(report))

    def export(self, report: ExportReport) -> None:
        document = _pick(report, "output", "rows", "files", "engine", "states")
        document["raw"] = {
            state: {"rows": raw.rows, "first_reason": raw.first_reason}
            for state, raw in report.raw.items()
        }
        print_json(document)

    def uid_hash(self, ids: Sequence[UidId]) -> None:
        print_json([{"uid": uid, "id": id_} for uid, id_ in ids])

    def progress(self, what: str) -> TaskProgress:
        return TaskProgress(what, enabled=False)


class ConsoleRenderer:
    """Rich tables and plain lines on stdout; progress on stderr."""

    def inspect(self, summary: SavepointSummary) -> None:
        _print_summary(summary)

    def verify(self, result: Verification) -> None:
        _print_verification(result)

    def diff(self, report: DiffReport) -> None:
        _print_diff(report)

    def plan(self, plan: RescalePlan, loads: KeyedLoads) -> None:
        _print_plan(plan, loads)

    def parallelism_plan(self, plan: ParallelismPlan) -> None:
        from statectl.cli import plan_view

        plan_view.print_plan(_stdout(), plan)

    def rescale(self, report: RescaleReport) -> None:
        _print_rescale_report(report)

    def migrate(self, report: MigrationReport) -> None:
        _print_migration(report)

    def export(self, report: ExportReport) -> None:
        for label, count in report.states.items():
            raw = report.raw.get(label)
            left_raw = f" ({raw.rows} left raw: {raw.first_reason})" if raw else ""
            print_line(f"{label}: {count} rows{left_raw}")
        _stdout().print(
            f"wrote {report.rows} rows to {report.output} ({report.files} file(s))",
            highlight=False,
        )

    def uid_hash(self, ids: Sequence[UidId]) -> None:
        width = max(len(uid) for uid, _ in ids)
        for uid, id_ in ids:
            print(f"{uid:<{width}}  {id_}")

    def progress(self, what: str) -> TaskProgress:
        return TaskProgress(what)


# --- plain lines -----------------------------------------------------------------------------


def print_line(text: str) -> None:
    """One line of data, never wrapped (a table title would wrap a long path) nor styled."""
    _stdout().print(text, soft_wrap=True, markup=False, highlight=False)


def print_json(document: Any) -> None:
    sys.stdout.write(json.dumps(document, indent=2, ensure_ascii=False) + "\n")


def print_error(message: str) -> None:
    print(f"statectl: error: {message}", file=sys.stderr)


def print_note(message: str) -> None:
    print(f"statectl: note: {message}", file=sys.stderr)


def warn_stale_staging(urls: Sequence[str]) -> None:
    """Staging folders beside the destination that this run leaves alone: their owner may
    still be writing, or was killed on another host."""
    for url in urls:
        print(
            f"statectl: warning: {url}: staging folder of another run, not a savepoint; "
            "delete it once no other run writes there",
            file=sys.stderr,
        )


def warn(lines: Sequence[str]) -> None:
    """Warnings of a result: on stderr, in JSON mode too."""
    for line in lines:
        print(f"statectl: warning: {line}", file=sys.stderr)


def counted(count: int, noun: str) -> str:
    """`1 operator`, `3 operators`: English plurals of the nouns the summaries count."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def _pick(obj: object, *names: str) -> dict[str, Any]:
    """The named attributes of a result, in this order: a JSON document's fields."""
    return {name: getattr(obj, name) for name in names}


# --- inspect ---------------------------------------------------------------------------------


def summary_to_json(summary: SavepointSummary) -> dict[str, Any]:
    """The documented `inspect --json` schema (see README)."""
    return {
        **_pick(summary, "location", "metadata_version", "checkpoint_id", "snapshot"),
        "operators": [_operator_json(op, summary.deep) for op in summary.operators],
    }


def _operator_json(op: OperatorSummary, deep: bool) -> dict[str, Any]:
    return {
        **_pick(op, "id", "uid", "name", "parallelism", "max_parallelism", "finished"),
        **_pick(op, "key_serializer", "coordinator_bytes"),
        "states": [_state_json(state, deep) for state in op.states],
        "subtasks": [_subtask_json(s) for s in op.subtasks],
    }


def _state_json(state: StateSummary, deep: bool) -> dict[str, Any]:
    entry = _pick(state, "name", "scope", "kind", "mode", "type", "type_tree")
    if state.scope == "operator":
        entry["elements"] = state.elements
    elif deep:  # keyed entries are counted only by walking the blocks
        entry["entries"] = state.entries
    if deep:  # values are decoded only with --deep
        entry.update(_pick(state, "raw", "raw_reason"))
    return entry


def _subtask_json(s: SubtaskSummary) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "index": s.index,
        "key_groups": list(s.key_groups) if s.key_groups else None,
        **_pick(s, "keyed_bytes", "operator_bytes", "keyed_format", "finished"),
    }
    if s.native is not None:  # RocksDB native handles only
        entry["native"] = _native_json(s.native)
    return entry


def _native_json(native: NativeSummary) -> dict[str, Any]:
    return {
        **_pick(native, "checkpoint_id", "backend_id", "meta_bytes"),
        "column_families": list(native.column_families),
        "files": [_pick(f, "name", "kind", "shared", "bytes") for f in native.files],
    }


def _print_summary(summary: SavepointSummary) -> None:
    from rich.text import Text

    from statectl.cli.tables import print_words

    header = Text.assemble(
        (summary.location, "bold"),
        f"  {summary.snapshot}, metadata v{summary.metadata_version}, "
        f"checkpoint {summary.checkpoint_id}, {counted(len(summary.operators), 'operator')}",
    )
    print_words(_stdout(), header)
    print_table(*_operators_table(summary), title="Operators")
    for op in summary.operators:
        if op.states or any(s.keyed_bytes or s.operator_bytes for s in op.subtasks):
            _print_operator_detail(op, summary.deep)


def print_table(columns: Sequence[Column], rows: Sequence[Sequence[str]], title: str = "") -> None:
    """A table on stdout that fits the terminal and cuts no identifier (`cli/tables.py`)."""
    from statectl.cli import tables

    tables.print_table(_stdout(), columns, rows, title)


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
    print_table(*_subtasks_table(op), title=f"{op.uid or op.id}: subtasks")
    if any(s.native for s in op.subtasks):
        _print_native_files(op)


def _operator_states_table(op: OperatorSummary, deep: bool) -> tuple[list[Column], list[list[str]]]:
    """State names are typed into `--state`: never cut."""
    from statectl.cli.tables import Column

    columns = [Column("state", "id", key=True)]
    columns += [Column(header) for header in ("scope", "kind", "mode")]
    columns.append(Column("type", "type"))
    columns.append(Column("entries" if deep else "elements", "number", "right"))
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


# --- verify ----------------------------------------------------------------------------------


def verification_to_json(result: Verification) -> dict[str, Any]:
    return {
        **_pick(result, "location", "ok", "deep"),
        "checked": {
            **_pick(result, "operators", "subtasks", "files", "key_groups"),
            **({"entries": result.entries} if result.deep else {}),
        },
        "findings": [
            _pick(f, "operator", "operator_id", "subtask", "file", "problem")
            for f in result.findings
        ],
        "notes": list(result.notes),
    }


def _print_verification(result: Verification) -> None:
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
        f"{counted(result.files, 'file')}, {counted(result.key_groups, 'key group')}"
    )
    if result.deep:
        checked += f", {result.entries} {'entry' if result.entries == 1 else 'entries'} walked"
    return checked


# --- diff ------------------------------------------------------------------------------------


def diff_to_json(report: DiffReport) -> dict[str, Any]:
    return {
        **_pick(report, "a", "b", "identical", "engine"),
        "operators_only_in_a": [vars(o) for o in report.operators_only_in_a],
        "operators_only_in_b": [vars(o) for o in report.operators_only_in_b],
        "notes": list(report.notes),
        "states": [_state_diff_json(s) for s in report.states],
    }


def _state_diff_json(state: StateDiff) -> dict[str, Any]:
    return {
        **_pick(state, "operator", "operator_id", "state", "scope", "kind", "identical"),
        **_pick(state, "entries_a", "entries_b", "only_in_a", "only_in_b", "changed", "note"),
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


def _print_diff(report: DiffReport) -> None:
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
    _stdout().print(_diff_verdict(report))


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


# --- rescale and convert: the plan (--dry-run) and what was written --------------------------


def plan_to_json(plan: RescalePlan, loads: KeyedLoads) -> dict[str, Any]:
    return {
        "source": plan.source.directory.url,
        "operators": [
            _operator_plan_json(p, loads.get(p.operator.operator_id_hex)) for p in plan.operators
        ],
    }


def _operator_plan_json(plan: OperatorPlan, loads: SubtaskLoads | None) -> dict[str, Any]:
    op = plan.operator
    entry: dict[str, Any] = {
        "id": op.operator_id_hex,
        "uid": op.uid,
        "old_parallelism": op.parallelism,
        "new_parallelism": plan.new_parallelism,
        "old_max_parallelism": op.max_parallelism,
        "new_max_parallelism": plan.max_parallelism,
        "rescaled": plan.rescaled,
        "subtasks": [_subtask_plan_json(plan, target) for target in plan.targets or ()],
    }
    if plan.rekey is not None:
        from statectl.api.reports import describe_rehash

        entry["rehash"] = describe_rehash(plan.rekey)
    if loads is not None:  # the same prediction as `statectl plan`
        entry["keyed_block_bytes"] = list(loads.subtask_bytes)
        entry["keyed_max_over_mean"] = round(loads.max_over_mean, 6)
    return entry


def _subtask_plan_json(plan: OperatorPlan, target: SubtaskTarget) -> dict[str, Any]:
    keyed, operator = target.keyed, target.operator
    return {
        "index": target.index,
        "key_groups": _key_groups(plan, target.index),
        "keyed_sources": [
            {"file": run.source.description, "start": run.start, "end": run.end}
            for run in (keyed.runs if keyed else ())
        ],
        "keyed_bytes": keyed.size if keyed else 0,
        **({"native_sources": _native_sources(keyed)} if keyed and keyed.native else {}),
        **({"heap_sources": _heap_sources(keyed)} if keyed and keyed.heap else {}),
        "operator_state": {
            share.name: {"mode": share.mode.name, "elements": len(share.spans)}
            for share in (operator.states if operator else ())
        },
        "operator_bytes": operator.size if operator else 0,
    }


def _key_groups(plan: OperatorPlan, index: int) -> list[int] | None:
    if plan.rekey is not None:
        return list(plan.rekey.key_groups(index))
    keyed = plan.targets[index].keyed if plan.targets else None
    return list(keyed.key_groups) if keyed else None


def _native_sources(keyed: KeyedTarget) -> list[dict[str, Any]]:
    """RocksDB instances a new subtask reads (its keyed bytes are known only once written)."""
    return [
        {
            "instance": run.instance.description,
            "backend_id": run.instance.backend_id,
            "key_groups": [run.first, run.last],
            "files": len(run.instance.files),
            "instance_bytes": run.instance.size,
        }
        for run in keyed.native
    ]


def _heap_sources(keyed: KeyedTarget) -> list[dict[str, Any]]:
    """Key groups a new subtask reads from files in the hashmap backend's own snapshot format
    (its keyed bytes are known only once written as blocks)."""
    return [
        {
            "file": run.source.description,
            "key_groups": [run.spans[0].key_group, run.spans[-1].key_group],
            "bytes": run.size,
        }
        for run in keyed.heap
    ]


def _print_plan(plan: RescalePlan, loads: KeyedLoads) -> None:
    from rich.text import Text

    from statectl.cli.tables import print_words

    title = Text.assemble(
        (f"Plan for {plan.source.directory.url}", "bold"), " (dry run: nothing written)"
    )
    print_words(_stdout(), title)
    for entry in plan_to_json(plan, loads)["operators"]:
        _print_operator_plan(entry)


def _print_operator_plan(entry: dict[str, Any]) -> None:
    from statectl.cli.tables import Column

    name = entry["uid"] or entry["id"]
    max_change = ""
    if entry["old_max_parallelism"] != entry["new_max_parallelism"]:
        max_change = f", max parallelism {entry['old_max_parallelism']} → "
        max_change += str(entry["new_max_parallelism"])
    if not entry["rescaled"]:
        _stdout().print(f"{name}: parallelism {entry['old_parallelism']}{max_change}, carried over")
        return
    change = f"{entry['old_parallelism']} → {entry['new_parallelism']}"
    skew = ""
    if "keyed_max_over_mean" in entry:
        skew = f", keyed max/mean {entry['keyed_max_over_mean']:.2f}"
    columns = [
        Column("subtask", key=True),
        Column("key groups", "id"),
        Column("keyed sources"),  # file names whole, broken before their ranges
        Column("operator state"),
        Column("bytes", "number", "right"),
    ]
    rows = [list(_plan_subtask_row(sub)) for sub in entry["subtasks"]]
    print_table(columns, rows, title=f"{name}: parallelism {change}{max_change}{skew}")
    if "rehash" in entry:
        rehash = entry["rehash"]
        print_line(
            f"{rehash['key_type']} keys re-hashed from {rehash['sources']} sources "
            f"({human_bytes(rehash['source_bytes'])})"
        )


def _plan_subtask_row(sub: dict[str, Any]) -> tuple[str, ...]:
    key_groups = "{}–{}".format(*sub["key_groups"]) if sub["key_groups"] else "-"
    sources = "\n".join(
        [f"{s['file'].rsplit('/', 1)[-1]} [{s['start']}, {s['end']})" for s in sub["keyed_sources"]]
        + [
            "RocksDB {}…: key groups {}–{}".format(s["backend_id"][:8], *s["key_groups"])
            for s in sub.get("native_sources", ())
        ]
        + [
            "{} (heap format): key groups {}–{}".format(
                s["file"].rsplit("/", 1)[-1], *s["key_groups"]
            )
            for s in sub.get("heap_sources", ())
        ]
    )
    states = "\n".join(
        f"{n} ({v['mode']}): {v['elements']}" for n, v in sub["operator_state"].items()
    )
    size = human_bytes(sub["keyed_bytes"] + sub["operator_bytes"])
    return str(sub["index"]), key_groups, sources or "-", states or "-", size


def rescale_report_to_json(report: RescaleReport) -> dict[str, Any]:
    return {
        "destination": report.destination,
        "format": report.format,
        "bytes": report.bytes,
        "operators": [_rescaled_operator_json(op) for op in report.operators],
        "timings": dict(report.timings),
        "tasks": tasks_json(report.tasks_run),
    }


def _rescaled_operator_json(op: RescaledOperator) -> dict[str, Any]:
    return {
        **_pick(op, "id", "uid", "old_parallelism", "new_parallelism"),
        **_pick(op, "old_max_parallelism", "new_max_parallelism", "rescaled", "files", "bytes"),
        **_pick(op, "old_keyed_format", "new_keyed_format"),
        "keyed_bytes": list(op.keyed_bytes),
        "keyed_max_over_mean": _rounded(op.keyed_skew),
    }


def _rounded(ratio: float | None) -> float | None:
    return None if ratio is None else round(ratio, 6)


def _print_rescale_report(report: RescaleReport) -> None:
    from statectl.cli.tables import Column

    formats = {op.new_keyed_format for op in report.operators if op.new_keyed_format}
    print_line(f"Wrote {report.destination} ({', '.join(sorted(formats)) or 'canonical'})")
    columns = [
        Column("operator", "id", key=True),
        Column("parallelism"),
        Column("files", "number"),
        Column("bytes", "number", "right"),
        Column("keyed max/mean", "number", "right"),
    ]
    rows = [
        [
            op.uid or op.id,
            _parallelism_change(op),
            str(op.files),
            human_bytes(op.bytes),
            "-" if op.keyed_skew is None else f"{op.keyed_skew:.2f}",
        ]
        for op in report.operators
    ]
    print_table(columns, rows)
    print_tasks_run(report.tasks_run)


def print_tasks_run(tasks_run: tuple[tuple[str, int], ...]) -> None:
    """Where a writing command's tasks ran, when it ran any."""
    ran = dict(tasks_run)
    if ran:
        print_line(f"Tasks: {ran.get('driver', 0)} in this process, {ran.get('spark', 0)} on Spark")


def tasks_json(tasks_run: tuple[tuple[str, int], ...]) -> dict[str, int]:
    return {"driver": 0, "spark": 0, **dict(tasks_run)}


def _parallelism_change(op: RescaledOperator) -> str:
    same_max = op.old_max_parallelism == op.new_max_parallelism
    if not op.rescaled:
        change = f"{op.old_parallelism} (kept)"
    elif op.old_parallelism != op.new_parallelism:
        change = f"{op.old_parallelism} → {op.new_parallelism}"
    elif same_max:  # same parallelism and max parallelism: keyed state changed format
        change = f"{op.old_parallelism} ({op.old_keyed_format} → {op.new_keyed_format})"
    else:
        change = str(op.old_parallelism)
    if not same_max:
        change += f", max {op.old_max_parallelism} → {op.new_max_parallelism}"
    return change


# --- migrate ---------------------------------------------------------------------------------


def migration_to_json(report: MigrationReport) -> dict[str, Any]:
    from statectl.api.reports import CARRIED, DROPPED, RENAMED

    return {
        **_pick(report, "source", "destination", "metadata_version"),
        "renamed": report.count(RENAMED),
        "dropped": report.count(DROPPED),
        "carried": report.count(CARRIED),
        **_pick(report, "files", "bytes"),
        "operators": [_migrated_operator_json(op) for op in report.operators],
        "states": [
            _pick(edit, "operator", "state", "action", "new_name", "rows") for edit in report.states
        ],
        "tasks": tasks_json(report.tasks_run),
    }


def _migrated_operator_json(op: MigratedOperator) -> dict[str, Any]:
    change = op.change
    return {
        "action": change.action,
        "uid": change.new_uid,
        "id": change.new_id,
        "old_uid": change.old_uid,
        "old_id": change.old_id,
        "files": op.files,
        "bytes": op.bytes,
    }


def _print_migration(report: MigrationReport) -> None:
    from statectl.api.reports import CARRIED, DROPPED, RENAMED
    from statectl.cli.tables import Column

    print_line(f"Wrote {report.destination} (metadata v{report.metadata_version})")
    columns = [
        Column("operator", key=True),  # `old → new`: broken at the arrow, uids whole
        Column("operator id", "id", key=True),
        Column("change"),
        Column("files", "number", "right"),
        Column("bytes", "number", "right"),
    ]
    print_table(columns, [list(_migrated_operator_row(op)) for op in report.operators])
    _stdout().print(
        f"{report.count(RENAMED)} renamed, {report.count(DROPPED)} dropped, "
        f"{report.count(CARRIED)} kept; {report.files} files, {human_bytes(report.bytes)}"
    )
    for edit in report.states:
        print_line(f"state {edit.operator}/{edit.state}: {_state_edit_text(edit)}")
    print_tasks_run(report.tasks_run)


def _state_edit_text(edit: StateEditReport) -> str:
    if edit.action == "rename":
        return f"renamed to {edit.new_name!r}"
    if edit.action == "replace":
        return f"replaced by {edit.rows} entries"
    return {"drop": "dropped", "ttl": "TTL on", "no-ttl": "TTL off"}.get(edit.action, edit.action)


def _migrated_operator_row(op: MigratedOperator) -> tuple[str, ...]:
    from statectl.api.reports import DROPPED, RENAMED

    change = op.change
    old = change.old_uid or change.old_id
    if change.action == DROPPED:
        return old, change.old_id, "dropped", "", ""
    name, what = old, "kept"
    if change.action == RENAMED:  # a new uid that hashes to the old id only records the uid
        new_id = change.old_id != change.new_id
        name = f"{old} → {change.new_uid}" if new_id else old
        what = "renamed" if new_id else "uid set"
    return name, change.new_id or "-", what, str(op.files), human_bytes(op.bytes)


def print_position_edits(report: PositionsEditReport, json_output: bool) -> None:
    """What `migrate --kafka-offset/--file-position` moved: one line per split (or JSON)."""
    from statectl.api.reports import render_position

    changes = [
        {
            **_pick(change, "operator_id", "uid", "kind", "state", "subtask", "split_id"),
            "old": render_position(change.kind, change.old),
            "new": render_position(change.kind, change.new),
        }
        for change in report.changes
    ]
    if json_output:
        print_json(
            {**_pick(report, "source", "destination", "metadata_version"), "changes": changes}
        )
        return
    print_line(f"Wrote {report.destination} (metadata v{report.metadata_version})")
    for change in changes:
        where = "enumerator" if change["subtask"] is None else f"subtask {change['subtask']}"
        print_line(
            f"{change['uid'] or change['operator_id']} {where} {change['split_id']}: "
            f"{change['old']} → {change['new']}"
        )


# --- progress --------------------------------------------------------------------------------


class TaskProgress:
    """Files written and state bytes done, on stderr: a rich bar on a terminal, one plain line
    in a CI log."""

    def __init__(self, what: str, enabled: bool = True) -> None:
        self.what = what
        self.enabled = enabled
        self._progress: Progress | None = None
        self._task: TaskID | None = None
        self._reported_plain = False

    def __enter__(self) -> TaskProgress:
        if self.enabled and _stderr().is_terminal:
            from rich.progress import (
                BarColumn,
                DownloadColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
            )

            self._progress = Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                TextColumn("{task.fields[files]}"),
                DownloadColumn(binary_units=True),
                TimeElapsedColumn(),
                console=_stderr(),
                transient=True,
            )
            self._progress.start()
            self._task = self._progress.add_task(self.what, total=None, files="")
        return self

    def update(self, done: JobProgress) -> None:
        files = f"{done.files}/{done.total_files} files"
        if self._progress is not None and self._task is not None:
            self._progress.update(
                self._task, completed=done.bytes, total=done.total_bytes, files=files
            )
        elif self.enabled and done.complete and not self._reported_plain:
            self._reported_plain = True
            state = human_bytes(done.total_bytes)
            print(f"statectl: {self.what}: {files} written ({state} of state)", file=sys.stderr)

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()
