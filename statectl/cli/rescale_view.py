"""What `rescale` and `convert` print: the plan (`--dry-run`) and what was written."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from statectl.cli.console import (
    pick_fields,
    print_line,
    print_table,
    stdout_console,
)
from statectl.cli.units import human_bytes

if TYPE_CHECKING:
    from statectl.api.reports import (
        KeyedTarget,
        OperatorPlan,
        RescaledOperator,
        RescalePlan,
        RescaleReport,
        SubtaskLoads,
        SubtaskTarget,
    )


# Keyed bytes per new subtask a rescale plan predicts, by operator id.
KeyedLoads = Mapping[str, "SubtaskLoads"]


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
            share.name: _share_json(share.mode.name, len(share.spans))
            for share in (operator.states if operator else ())
        },
        "operator_bytes": operator.size if operator else 0,
    }


def _share_json(mode: str, spans: int) -> dict[str, Any]:
    """List elements a new subtask restores; of a broadcast state, the copy of the map it
    restores (its entries are counted by `inspect` and `plan`: docs/counts.md)."""
    if mode == "BROADCAST":
        return {"mode": mode, "copies": spans}
    return {"mode": mode, "elements": spans}


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


def print_plan(plan: RescalePlan, loads: KeyedLoads) -> None:
    from rich.text import Text

    from statectl.cli.tables import print_words

    title = Text.assemble(
        (f"Plan for {plan.source.directory.url}", "bold"), " (dry run: nothing written)"
    )
    print_words(stdout_console(), title)
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
        stdout_console().print(
            f"{name}: parallelism {entry['old_parallelism']}{max_change}, carried over"
        )
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
        f"{n} ({v['mode']}): " + (f"{v['elements']}" if "elements" in v else "map copy")
        for n, v in sub["operator_state"].items()
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
        **pick_fields(op, "id", "uid", "old_parallelism", "new_parallelism"),
        **pick_fields(
            op, "old_max_parallelism", "new_max_parallelism", "rescaled", "files", "bytes"
        ),
        **pick_fields(op, "old_keyed_format", "new_keyed_format"),
        "keyed_bytes": list(op.keyed_bytes),
        # the key-group blocks written per new subtask, as `--dry-run` predicts them
        **({"keyed_block_bytes": list(op.keyed_loads.subtask_bytes)} if op.keyed_loads else {}),
        "keyed_max_over_mean": _rounded(op.keyed_skew),
        # RocksDB instances assembled from the old instances' SST files
        **({"sst_files": _sst_files_json(op)} if op.sst_files is not None else {}),
    }


def _sst_files_json(op: RescaledOperator) -> dict[str, int]:
    files = op.sst_files
    assert files is not None
    return {
        **pick_fields(files, "carried", "rewritten", "written", "left_out", "pushed_down"),
        "carried_bytes": files.carried_bytes,
    }


def _rounded(ratio: float | None) -> float | None:
    return None if ratio is None else round(ratio, 6)


def print_rescale_report(report: RescaleReport) -> None:
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
    for op in report.operators:
        files = op.sst_files
        if files is not None:
            print_line(
                f"{op.uid or op.id}: RocksDB SST files carried whole {files.carried} "
                f"({human_bytes(files.carried_bytes)}), rewritten {files.rewritten} "
                f"(into {files.written}), left out {files.left_out}"
            )
    print_tasks_run(report.tasks_run)


def print_tasks_run(tasks_run: tuple[tuple[str, int], ...]) -> None:
    """Where a writing command's tasks ran, when it ran any."""
    ran = dict(tasks_run)
    if ran:
        workers = ran.get("processes", 0)  # named only where some ran, as few commands have any
        in_workers = f", {workers} in worker processes" if workers else ""
        print_line(
            f"Tasks: {ran.get('driver', 0)} in this process{in_workers}, "
            f"{ran.get('spark', 0)} on Spark"
        )


def tasks_json(tasks_run: tuple[tuple[str, int], ...]) -> dict[str, int]:
    return {"driver": 0, "processes": 0, "spark": 0, **dict(tasks_run)}


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
