"""How `statectl plan` looks: a JSON document, or tables with a bar chart and a heat strip."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from statectl.api import key_group_range
from statectl.cli.console import pick_fields
from statectl.cli.units import human_bytes

if TYPE_CHECKING:  # rich draws the tables only: `plan --json` needs none of it
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from statectl.api.reports import Candidate, OperatorOutlook, ParallelismPlan

_BAR_WIDTH = 40
_MAX_BARS = 64
_STRIP_ROW = 64  # heat-strip cells per line
_STRIP_CELLS = 1024  # above this many key groups, a cell sums several
_EIGHTHS = " ▏▎▍▌▋▊▉"
_LEVELS = "▁▂▃▄▅▆▇█"
_HEAT = ("#4e79a7", "#59a14f", "#edc948", "#f28e2b", "#e15759")  # cool to hot


# --- JSON ------------------------------------------------------------------------------------


def plan_json(plan: ParallelismPlan) -> dict[str, Any]:
    return {
        "source": plan.source,
        "deep": plan.deep,
        "operators": [_operator_json(op) for op in plan.operators],
    }


def _operator_json(op: OperatorOutlook) -> dict[str, Any]:
    hint = op.recommendation
    return {
        **pick_fields(op, "uid", "id", "name", "max_parallelism", "parallelism", "keyed_format"),
        "estimated": op.estimated,
        "key_group_bytes": list(op.key_group_bytes),
        **({"key_group_entries": list(op.key_group_entries)} if op.key_group_entries else {}),
        "candidates": [_candidate_json(c) for c in op.candidates],
        "recommendation": {
            "parallelism": hint.parallelism,
            "near_current": list(hint.near_current),
            "divide_max_parallelism": list(hint.even_divisors),
            "reason": hint.reason,
            "hottest_key_groups": [
                {"key_group": g.key_group, "bytes": g.bytes, "share": round(g.share, 6)}
                for g in hint.hottest
            ],
        },
    }


def _candidate_json(candidate: Candidate) -> dict[str, Any]:
    loads = candidate.keyed
    return {
        "parallelism": loads.parallelism,
        "subtask_bytes": list(loads.subtask_bytes),
        "largest_subtask_bytes": loads.largest,
        "max_over_mean": round(loads.max_over_mean, 6),
        "key_group_count_skew": round(loads.key_group_count_skew, 6),
        "hot_key_group_skew": round(loads.hot_key_group_skew, 6),
        "operator_state": [
            {"name": s.name, "mode": s.mode, "elements": list(s.elements), "bytes": list(s.bytes)}
            for s in candidate.operator_state
        ],
    }


# --- the terminal ------------------------------------------------------------------------------


def print_plan(console: Console, plan: ParallelismPlan) -> None:
    """Per operator: the candidates table, the recommendation, the charts."""
    console.print(f"[bold]Parallelism plan for {plan.source}[/]", highlight=False)
    for op in plan.operators:
        _print_operator(console, op)


def _print_operator(console: Console, op: OperatorOutlook) -> None:
    console.print()
    console.print(_title(op), highlight=False)
    chosen = chosen_candidate(op)
    if op.keyed_format is not None and op.candidates:
        console.print(_candidates_table(op))
        console.print(_recommendation(op), highlight=False)
    if chosen is not None and op.keyed_format is not None:
        console.print(f"Bytes per subtask at parallelism {chosen.parallelism}:")
        console.print(bar_chart(chosen.keyed.subtask_bytes, op.max_parallelism))
        console.print(_strip_title(op), highlight=False)
        console.print(heat_strip(op.key_group_bytes))
    if chosen is not None and chosen.operator_state:
        console.print(_operator_state_table(chosen))


def _title(op: OperatorOutlook) -> str:
    label = op.uid or op.name or op.id
    text = f"[bold]{label}[/] ({op.id}) · parallelism {op.parallelism} · max parallelism "
    text += str(op.max_parallelism)
    if op.keyed_format is not None:
        filled = sum(1 for b in op.key_group_bytes if b)
        estimate = ", estimated from SST key ranges" if op.estimated else ""
        text += f" · {op.keyed_format} keyed state: {human_bytes(sum(op.key_group_bytes))} in "
        text += f"{filled} key groups{estimate}"
        if op.key_group_entries is not None:
            text += f", {sum(op.key_group_entries)} entries"
    return text


def chosen_candidate(op: OperatorOutlook) -> Candidate | None:
    """The candidate the charts show: the only one asked for, else the recommended one."""
    if len(op.candidates) == 1:
        return op.candidates[0]
    for wanted in (op.recommendation.parallelism, op.parallelism):
        if wanted is not None and (found := op.candidate(wanted)) is not None:
            return found
    return op.candidates[0] if op.candidates else None


def _candidates_table(op: OperatorOutlook) -> Table:
    from rich.table import Table

    table = Table(
        box=None,
        pad_edge=False,
        caption="max/mean = count skew (uneven key-group counts) × hot skew (hot key groups)",
        caption_justify="left",
    )
    for column in ("p", "largest subtask", "max/mean", "count skew", "hot skew"):
        table.add_column(column, justify="right")
    table.add_column(f"divides {op.max_parallelism}")
    table.add_column("")
    for c in op.candidates:
        loads = c.keyed
        table.add_row(
            str(loads.parallelism),
            human_bytes(loads.largest),
            f"{loads.max_over_mean:.2f}",
            f"{loads.key_group_count_skew:.2f}",
            f"{loads.hot_key_group_skew:.2f}",
            "yes" if op.max_parallelism % loads.parallelism == 0 else "",
            _note(loads.parallelism, op),
        )
    return table


def _note(parallelism: int, op: OperatorOutlook) -> str:
    notes = []
    if parallelism == op.parallelism:
        notes.append("current")
    if parallelism == op.recommendation.parallelism:
        notes.append("[bold green]recommended[/]")
    return ", ".join(notes)


def _recommendation(op: OperatorOutlook) -> str:
    hint = op.recommendation
    lines = []
    if hint.reason:
        lines.append(f"Recommended: {hint.reason}")
    if hint.near_current:
        lines.append(
            "Lowest skew near the current parallelism: " + ", ".join(map(str, hint.near_current))
        )
    if hint.even_divisors:
        lines.append(
            f"Dividing {op.max_parallelism} evenly: " + ", ".join(map(str, hint.even_divisors))
        )
    if hint.hottest:
        hot = ", ".join(
            f"{g.key_group} ({human_bytes(g.bytes)}, {g.share:.1%})" for g in hint.hottest
        )
        lines.append(f"Hottest key groups: {hot}")
    return "\n".join(lines)


def _strip_title(op: OperatorOutlook) -> str:
    per_cell = _group_size(len(op.key_group_bytes))
    cells = "one cell per key group" if per_cell == 1 else f"one cell per {per_cell} key groups"
    hottest = human_bytes(max(op.key_group_bytes, default=0))
    return f"Key groups 0–{op.max_parallelism - 1} ({cells}; ▁ to █ up to {hottest}, · empty):"


def bar_chart(subtask_bytes: Sequence[int], max_parallelism: int) -> Table:
    """One bar per subtask (its key-group range beside it); the largest in red."""
    from rich.table import Table
    from rich.text import Text

    table = Table(box=None, show_header=False, pad_edge=False)
    table.add_column(justify="right")
    table.add_column()
    table.add_column(justify="right")
    table.add_column(style="dim")
    largest = max(subtask_bytes, default=0)
    parallelism = len(subtask_bytes)
    for index, size in enumerate(subtask_bytes[:_MAX_BARS]):
        first, last = key_group_range(max_parallelism, parallelism, index)
        style = "red" if size == largest and largest else "cyan"
        bar = Text(_bar(size, largest), style=style)
        table.add_row(str(index), bar, human_bytes(size), f"key groups {first}–{last}")
    if parallelism > _MAX_BARS:
        table.add_row("…", f"{parallelism - _MAX_BARS} more subtasks (see --json)", "", "")
    return table


def _bar(size: int, largest: int) -> str:
    if not largest:
        return ""
    eighths = round(size * _BAR_WIDTH * 8 / largest)
    full, rest = divmod(eighths, 8)
    return "█" * full + (_EIGHTHS[rest] if rest else "")


def heat_strip(key_group_bytes: Sequence[int]) -> Text:
    """A line per 64 cells: block height and colour grow with a cell's bytes."""
    from rich.text import Text

    per_cell = _group_size(len(key_group_bytes))
    cells = [
        sum(key_group_bytes[i : i + per_cell]) for i in range(0, len(key_group_bytes), per_cell)
    ]
    hottest = max(cells, default=0)
    text = Text()
    for row in range(0, len(cells), _STRIP_ROW):
        text.append(f"{row * per_cell:>6} ", style="dim")
        for size in cells[row : row + _STRIP_ROW]:
            text.append(*_cell(size, hottest))
        text.append("\n")
    text.rstrip()
    return text


def _cell(size: int, hottest: int) -> tuple[str, str]:
    if not size or not hottest:
        return "·", "dim"
    level = min(len(_LEVELS) - 1, size * len(_LEVELS) // (hottest + 1))
    return _LEVELS[level], _HEAT[min(len(_HEAT) - 1, level * len(_HEAT) // len(_LEVELS))]


def _group_size(key_groups: int) -> int:
    return max(1, -(-key_groups // _STRIP_CELLS))


def _operator_state_table(candidate: Candidate) -> Table:
    from rich.table import Table

    table = Table(
        title=f"Operator state per subtask at parallelism {candidate.parallelism} (as restored)",
        title_justify="left",
        box=None,
        pad_edge=False,
    )
    table.add_column("state")
    table.add_column("mode")
    table.add_column("entries per subtask")
    table.add_column("bytes per subtask")
    for state in candidate.operator_state:
        table.add_row(
            state.name,
            state.mode,
            _compact(state.elements, str),
            _compact(state.bytes, human_bytes),
        )
    return table


def _compact(values: Sequence[int], show: Callable[[int], str]) -> str:
    """`7, 7, 6`, or `6 each` when every subtask gets the same."""
    if values and all(v == values[0] for v in values):
        return f"{show(values[0])} each"
    shown = ", ".join(show(v) for v in values[:16])
    return shown + (", …" if len(values) > 16 else "")
