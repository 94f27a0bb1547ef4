"""Rendering: rich tables for people, one JSON document on stdout for machines."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

from statectl.operations.rescale import rekey
from statectl.operations.summary import OperatorSummary, SavepointSummary, SubtaskSummary

if TYPE_CHECKING:
    from statectl.operations.rescale.job import RescaleReport
    from statectl.operations.rescale.plan import KeyedTarget, OperatorPlan, RescalePlan
    from statectl.progress import Progress as JobProgress

stdout = Console(soft_wrap=False)
stderr = Console(stderr=True)


def print_line(text: str) -> None:
    """One line of data, never wrapped (a table title would wrap a long path) nor styled."""
    stdout.print(text, soft_wrap=True, markup=False, highlight=False)


def print_json(document: Any) -> None:
    sys.stdout.write(json.dumps(document, indent=2, ensure_ascii=False) + "\n")


def counted(count: int, noun: str) -> str:
    """`1 operator`, `3 operators`: English plurals of the nouns the summaries count."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def human_bytes(count: int) -> str:
    if count < 1024:
        return f"{count} B"
    size = count / 1024
    for unit in ("KiB", "MiB", "GiB"):
        if size < 1024:
            return f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TiB"


def summary_to_json(summary: SavepointSummary) -> dict[str, Any]:
    """The documented `inspect --json` schema (see README)."""
    return {
        "location": summary.location,
        "metadata_version": summary.metadata_version,
        "checkpoint_id": summary.checkpoint_id,
        "snapshot": summary.snapshot,
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
        "subtasks": [_subtask_json(s) for s in op.subtasks],
    }


def _subtask_json(s: SubtaskSummary) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "index": s.index,
        "key_groups": list(s.key_groups) if s.key_groups else None,
        "keyed_bytes": s.keyed_bytes,
        "operator_bytes": s.operator_bytes,
        "keyed_format": s.keyed_format,
        "finished": s.finished,
    }
    if s.native is not None:  # RocksDB native handles only
        entry["native"] = {
            "checkpoint_id": s.native.checkpoint_id,
            "backend_id": s.native.backend_id,
            "meta_bytes": s.native.meta_bytes,
            "column_families": list(s.native.column_families),
            "files": [
                {"name": f.name, "kind": f.kind, "shared": f.shared, "bytes": f.bytes}
                for f in s.native.files
            ],
        }
    return entry


def print_summary(summary: SavepointSummary) -> None:
    stdout.print(
        f"[bold]{summary.location}[/]  {summary.snapshot}, metadata v{summary.metadata_version}, "
        f"checkpoint {summary.checkpoint_id}, {counted(len(summary.operators), 'operator')}"
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
    if op.states:
        stdout.print(_operator_states_table(op, deep))
    stdout.print(_subtasks_table(op))
    if any(s.native for s in op.subtasks):
        _print_native_files(op)


def _operator_states_table(op: OperatorSummary, deep: bool) -> Table:
    title = f"{op.uid or op.id}: states"
    if op.key_serializer:
        title += f" (key serializer {op.key_serializer.rsplit('.', 1)[-1]})"
    table = Table(title=title, title_justify="left")
    for column in ("state", "scope", "kind", "mode"):
        table.add_column(column)
    table.add_column("entries" if deep else "elements", justify="right")
    for s in op.states:
        count = s.elements if s.scope == "operator" else s.entries
        table.add_row(s.name, s.scope, s.kind, s.mode or "-", "-" if count is None else str(count))
    return table


def _subtasks_table(op: OperatorSummary) -> Table:
    table = Table(title=f"{op.uid or op.id}: subtasks", title_justify="left")
    for column in ("subtask", "key groups", "keyed format"):
        table.add_column(column)
    table.add_column("keyed bytes", justify="right")
    table.add_column("operator bytes", justify="right")
    for s in op.subtasks:
        key_groups = f"{s.key_groups[0]}–{s.key_groups[1]}" if s.key_groups else "-"
        table.add_row(
            str(s.index) + (" (finished)" if s.finished else ""),
            key_groups,
            s.keyed_format or "-",
            human_bytes(s.keyed_bytes),
            human_bytes(s.operator_bytes),
        )
    return table


def _print_native_files(op: OperatorSummary) -> None:
    """Per RocksDB instance: its files, shared (across checkpoints) or private, and sizes."""
    table = Table(title=f"{op.uid or op.id}: RocksDB native files", title_justify="left")
    for column in ("subtask", "file", "kind", "scope"):
        table.add_column(column)
    table.add_column("bytes", justify="right")
    for s in op.subtasks:
        if s.native is None:
            continue
        for f in s.native.files:
            scope = "shared" if f.shared else "private"
            table.add_row(str(s.index), f.name, f.kind, scope, human_bytes(f.bytes))
    stdout.print(table)
    families = next(s.native.column_families for s in op.subtasks if s.native)
    stdout.print(f"column families: {', '.join(families) or '-'}")


# --- rescale -----------------------------------------------------------------------------


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
        if self.enabled and stderr.is_terminal:
            self._progress = Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                TextColumn("{task.fields[files]}"),
                DownloadColumn(binary_units=True),
                TimeElapsedColumn(),
                console=stderr,
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


def plan_to_json(plan: RescalePlan) -> dict[str, Any]:
    return {
        "source": plan.source.directory.url,
        "operators": [_operator_plan_json(p) for p in plan.operators],
    }


def _operator_plan_json(plan: OperatorPlan) -> dict[str, Any]:
    op = plan.operator
    entry: dict[str, Any] = {
        "id": op.operator_id_hex,
        "uid": op.uid,
        "old_parallelism": op.parallelism,
        "new_parallelism": plan.new_parallelism,
        "old_max_parallelism": op.max_parallelism,
        "new_max_parallelism": plan.max_parallelism,
        "rescaled": plan.rescaled,
        "subtasks": [],
    }
    if plan.rekey is not None:
        entry["rehash"] = rekey.describe(plan.rekey)
    for target in plan.targets or ():
        keyed = target.keyed
        entry["subtasks"].append(
            {
                "index": target.index,
                "key_groups": _key_groups(plan, target.index),
                "keyed_sources": [
                    {"file": run.source.description, "start": run.start, "end": run.end}
                    for run in (keyed.runs if keyed else ())
                ],
                "keyed_bytes": keyed.size if keyed else 0,
                **({"native_sources": _native_sources(keyed)} if keyed and keyed.native else {}),
                "operator_state": {
                    share.name: {"mode": share.mode.name, "elements": len(share.elements)}
                    for share in (target.operator.states if target.operator else ())
                },
                "operator_bytes": target.operator.size if target.operator else 0,
            }
        )
    return entry


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


def print_plan(plan: RescalePlan) -> None:
    stdout.print(f"[bold]Plan for {plan.source.directory.url}[/] (dry run: nothing written)")
    for entry in plan_to_json(plan)["operators"]:
        name = entry["uid"] or entry["id"]
        change = f"{entry['old_parallelism']} → {entry['new_parallelism']}"
        max_change = ""
        if entry["old_max_parallelism"] != entry["new_max_parallelism"]:
            max_change = f", max parallelism {entry['old_max_parallelism']} → "
            max_change += str(entry["new_max_parallelism"])
        if not entry["rescaled"]:
            stdout.print(
                f"{name}: parallelism {entry['old_parallelism']}{max_change}, carried over"
            )
            continue
        table = Table(title=f"{name}: parallelism {change}{max_change}", title_justify="left")
        if "rehash" in entry:
            rehash = entry["rehash"]
            table.caption = (
                f"{rehash['key_type']} keys re-hashed from {rehash['sources']} sources "
                f"({human_bytes(rehash['source_bytes'])})"
            )
        for column in ("subtask", "key groups", "keyed sources", "operator state"):
            table.add_column(column)
        table.add_column("bytes", justify="right")
        for sub in entry["subtasks"]:
            key_groups = "{}–{}".format(*sub["key_groups"]) if sub["key_groups"] else "-"
            sources = "\n".join(
                [
                    f"{s['file'].rsplit('/', 1)[-1]} [{s['start']}, {s['end']})"
                    for s in sub["keyed_sources"]
                ]
                + [
                    "RocksDB {}…: key groups {}–{}".format(s["backend_id"][:8], *s["key_groups"])
                    for s in sub.get("native_sources", ())
                ]
            )
            states = "\n".join(
                f"{n} ({v['mode']}): {v['elements']}" for n, v in sub["operator_state"].items()
            )
            size = human_bytes(sub["keyed_bytes"] + sub["operator_bytes"])
            table.add_row(str(sub["index"]), key_groups, sources or "-", states or "-", size)
        stdout.print(table)


def rescale_report_to_json(report: RescaleReport) -> dict[str, Any]:
    return {
        "destination": report.destination,
        "format": "CANONICAL",
        "bytes": report.bytes,
        "operators": [
            {
                "id": op.id,
                "uid": op.uid,
                "old_parallelism": op.old_parallelism,
                "new_parallelism": op.new_parallelism,
                "old_max_parallelism": op.old_max_parallelism,
                "new_max_parallelism": op.new_max_parallelism,
                "rescaled": op.rescaled,
                "files": op.files,
                "bytes": op.bytes,
            }
            for op in report.operators
        ],
        "timings": dict(report.timings),
    }


def print_rescale_report(report: RescaleReport) -> None:
    print_line(f"Wrote {report.destination} (canonical)")
    table = Table()
    for column in ("operator", "parallelism", "files"):
        table.add_column(column)
    table.add_column("bytes", justify="right")
    for op in report.operators:
        same_max = op.old_max_parallelism == op.new_max_parallelism
        if not op.rescaled:
            change = f"{op.old_parallelism} (kept)"
        elif op.old_parallelism != op.new_parallelism:
            change = f"{op.old_parallelism} → {op.new_parallelism}"
        else:  # same parallelism: a new max parallelism, or RocksDB native state converted
            change = (
                str(op.old_parallelism)
                if not same_max
                else f"{op.old_parallelism} (native → canonical)"
            )
        if not same_max:
            change += f", max {op.old_max_parallelism} → {op.new_max_parallelism}"
        table.add_row(op.uid or op.id, change, str(op.files), human_bytes(op.bytes))
    stdout.print(table)
