"""`plan --png`: the plan's charts drawn with matplotlib (the optional `plot` extra).

The figure is titled with the savepoint's name and current parallelism; per keyed operator, a
row of every candidate's largest and mean subtask side by side (max/mean above each pair, the
current and the recommended one marked), then the bytes per subtask at the chosen candidate
and the bytes per key group with the subtask boundaries of the current parallelism (and of the
chosen one, where it differs) drawn across them.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import TYPE_CHECKING

import fsspec

from statectl.errors import StatectlError

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from statectl.api.reports import Candidate, OperatorOutlook, ParallelismPlan

_WIDTH_INCHES = 12.0
_ROW_INCHES = 2.8  # a row of charts; an operator has two
_MAX = "#e15759"  # the largest subtask
_MEAN = "#4e79a7"
_KEY_GROUPS = "#f28e2b"
_CURRENT = "#555555"  # the current parallelism's marks
_CHOSEN = "#59a14f"  # the charted candidate's, where it is not the current one
_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")
_MAX_BOUNDARIES = 512  # subtask boundaries drawn on a key-group chart, at most


def draw_plan(plan: ParallelismPlan, path: str) -> None:
    """`plan_figure` as a PNG file at `path` (a local path or any fsspec URL)."""
    figure = plan_figure(plan)
    image = io.BytesIO()
    figure.savefig(image, format="png", dpi=110)
    try:
        with fsspec.open(path, "wb") as out:
            out.write(image.getvalue())
    except OSError as exc:
        raise StatectlError(f"cannot write the PNG ({exc.strerror or exc})", path) from None


def plan_figure(plan: ParallelismPlan) -> Figure:
    """The plan's charts as a matplotlib Figure (no display needed: drawn with Agg)."""
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise StatectlError(
            "--png needs matplotlib: pip install 'statectl[plot]'", plan.source
        ) from None
    from statectl.cli.plan_view import chosen_candidate

    keyed = [
        (op, chosen)
        for op in plan.operators
        if op.keyed_format is not None and (chosen := chosen_candidate(op)) is not None
    ]
    if not keyed:
        raise StatectlError("no operator with keyed state to draw", plan.source)
    figure = Figure(figsize=(_WIDTH_INCHES, 2 * _ROW_INCHES * len(keyed) + 0.6))
    grid = figure.add_gridspec(2 * len(keyed), 2)
    for row, (op, chosen) in enumerate(keyed):
        _draw_candidates(figure.add_subplot(grid[2 * row, :]), op, chosen)
        _draw_subtasks(figure.add_subplot(grid[2 * row + 1, 0]), op, chosen)
        _draw_key_groups(figure.add_subplot(grid[2 * row + 1, 1]), op, chosen)
    figure.suptitle(_figure_title(plan, [op for op, _ in keyed]), fontsize=11)
    figure.tight_layout()
    return figure


def savepoint_name(source: str) -> str:
    """The last path component of the savepoint's location (`savepoint-1a2b3c-0123456789ab`),
    with its folder's where that alone says little (`<job id>/chk-42`, `orders/latest`)."""
    path = source.split("://", 1)[-1]  # the bucket is a folder as good as any
    parts = [p for p in path.removesuffix("_metadata").rstrip("/").split("/") if p]
    if not parts:
        return source
    last = parts[-1]
    vague = last.startswith("chk-") or not any(c.isdigit() for c in last)
    return "/".join(parts[-2:]) if vague and len(parts) > 1 else last


def _figure_title(plan: ParallelismPlan, ops: Sequence[OperatorOutlook]) -> str:
    current = sorted({op.parallelism for op in ops})
    if len(current) == 1:
        parallelism = f"current parallelism {current[0]}"
    else:
        parallelism = f"current parallelism {current[0]}–{current[-1]} (per operator below)"
    deep = ", every entry read" if plan.deep else ""
    return f"{savepoint_name(plan.source)} · {parallelism}{deep}"


def _label(op: OperatorOutlook) -> str:
    return op.uid or op.name or op.id


def _role(op: OperatorOutlook, chosen: Candidate) -> str:
    """Why the charts show `chosen`."""
    if chosen.parallelism == op.parallelism:
        return "current"
    if len(op.candidates) == 1:
        return "asked for"
    if chosen.parallelism == op.recommendation.parallelism:
        return "recommended"
    return "charted"


def _draw_candidates(axes: Axes, op: OperatorOutlook, chosen: Candidate) -> None:
    """Every candidate's largest and mean subtask, side by side, max/mean above each pair."""
    candidates = op.candidates
    scale, unit = byte_unit(max((c.keyed.largest for c in candidates), default=0))
    positions = range(len(candidates))
    largest = [c.keyed.largest / scale for c in candidates]
    mean = [c.keyed.mean / scale for c in candidates]
    width = 0.4
    left, right = [x - width / 2 for x in positions], [x + width / 2 for x in positions]
    axes.bar(left, largest, width, color=_MAX, label="largest subtask")
    axes.bar(right, mean, width, color=_MEAN, label="mean subtask")
    top = max(largest, default=0) or 1.0
    small = 6 if len(candidates) > 24 else 7
    for x, candidate in zip(positions, candidates, strict=True):
        ratio = f"{candidate.keyed.max_over_mean:.2f}"
        axes.annotate(
            ratio, (x, candidate.keyed.largest / scale), xytext=(0, 2),
            textcoords="offset points", ha="center", va="bottom", fontsize=small,
        )  # fmt: skip
    axes.set_ylim(0, top * 1.18)
    axes.set_xticks(list(positions))
    axes.set_xticklabels([_candidate_tick(c.parallelism, op) for c in candidates], fontsize=small)
    for tick, candidate in zip(axes.get_xticklabels(), candidates, strict=True):
        if candidate.parallelism == op.parallelism:
            tick.set_fontweight("bold")
        if candidate.parallelism == chosen.parallelism != op.parallelism:
            tick.set_color(_CHOSEN)
    current = next((i for i, c in enumerate(candidates) if c.parallelism == op.parallelism), None)
    if current is not None:
        axes.axvspan(current - 0.5, current + 0.5, color=_CURRENT, alpha=0.12, label="current")
    title = (
        f"{_label(op)}: largest and mean subtask per candidate parallelism "
        f"(max/mean above; current p={op.parallelism})"
    )
    _label_axes(axes, title, "candidate parallelism", unit)
    axes.legend(fontsize=7, loc="upper right")


def _candidate_tick(parallelism: int, op: OperatorOutlook) -> str:
    if parallelism == op.parallelism:
        return f"{parallelism}\ncurrent"
    if parallelism == op.recommendation.parallelism:
        return f"{parallelism}\nrecommended"
    return str(parallelism)


def _draw_subtasks(axes: Axes, op: OperatorOutlook, chosen: Candidate) -> None:
    """Bytes per subtask at the chosen candidate, the largest in red, the mean as a line."""
    loads = chosen.keyed
    scale, unit = byte_unit(loads.largest)
    largest = loads.largest
    colours = [_MAX if b == largest else _MEAN for b in loads.subtask_bytes]
    axes.bar(range(loads.parallelism), [b / scale for b in loads.subtask_bytes], color=colours)
    axes.axhline(loads.mean / scale, color=_CURRENT, linestyle=":", linewidth=1, label="mean")
    title = (
        f"{_label(op)}: bytes per subtask at p={loads.parallelism} ({_role(op, chosen)}; "
        f"max/mean {loads.max_over_mean:.2f})"
    )
    _label_axes(axes, title, "subtask", unit)
    if loads.parallelism <= 32:
        axes.set_xticks(range(loads.parallelism))
    axes.legend(fontsize=7, loc="upper right")


def _draw_key_groups(axes: Axes, op: OperatorOutlook, chosen: Candidate) -> None:
    """Bytes per key group (key group g spans [g, g+1)), with subtask boundaries."""
    from statectl.api import key_group_range

    sizes = op.key_group_bytes
    scale, unit = byte_unit(max(sizes, default=0))
    axes.stairs(
        [b / scale for b in sizes], range(op.max_parallelism + 1), fill=True, color=_KEY_GROUPS
    )
    marked = [(op.parallelism, "current", _CURRENT, "--")]
    if chosen.parallelism != op.parallelism:
        marked.append((chosen.parallelism, _role(op, chosen), _CHOSEN, "-"))
    for parallelism, role, colour, style in marked:
        if parallelism > _MAX_BOUNDARIES:
            continue
        for index in range(1, parallelism):
            first, _ = key_group_range(op.max_parallelism, parallelism, index)
            axes.axvline(
                first,
                color=colour,
                linestyle=style,
                linewidth=0.8,
                label=f"subtask boundaries at p={parallelism} ({role})" if index == 1 else None,
            )
    axes.set_xlim(0, op.max_parallelism)
    title = f"{_label(op)}: bytes per key group (M={op.max_parallelism})"
    _label_axes(axes, title, f"key group (0–{op.max_parallelism - 1})", unit)
    if any(p > 1 for p, *_ in marked):
        axes.legend(fontsize=7, loc="upper right")


def _label_axes(axes: Axes, title: str, x_label: str, unit: str) -> None:
    """A chart's title and axis labels, in the type sizes of every chart of the figure; the
    y axis is always keyed state, in `unit`."""
    axes.set_title(title, fontsize=9)
    axes.set_xlabel(x_label, fontsize=8)
    axes.set_ylabel(f"keyed state ({unit})", fontsize=8)


def byte_unit(largest: float) -> tuple[float, str]:
    """The binary unit that shows `largest` as 1 to 1023 of it: (bytes in it, its name)."""
    scale = 1.0
    for unit in _UNITS:
        if largest < scale * 1024 or unit == _UNITS[-1]:
            return scale, unit
        scale *= 1024
    raise AssertionError("unreachable")
