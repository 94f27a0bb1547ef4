"""`plan --png`: the plan's charts drawn with matplotlib (the optional `plot` extra)."""

from __future__ import annotations

import io
from typing import TYPE_CHECKING

import fsspec

from statectl.errors import StatectlError

if TYPE_CHECKING:
    from matplotlib.axes import Axes

    from statectl.api.reports import Candidate, OperatorOutlook, ParallelismPlan

_WIDTH_INCHES = 10.0
_ROW_INCHES = 2.6


def draw_plan(plan: ParallelismPlan, path: str) -> None:
    """Per keyed operator: bytes per subtask at the chosen parallelism, bytes per key group."""
    try:
        import matplotlib

        matplotlib.use("Agg")  # files only: no display
        import matplotlib.pyplot as plt
    except ImportError:
        raise StatectlError("--png needs matplotlib: pip install 'statectl[plot]'", path) from None
    from statectl.cli.plan_view import chosen_candidate

    keyed = [
        (op, chosen)
        for op in plan.operators
        if op.keyed_format is not None and (chosen := chosen_candidate(op)) is not None
    ]
    if not keyed:
        raise StatectlError("no operator with keyed state to draw", plan.source)
    figure, axes = plt.subplots(
        len(keyed), 2, figsize=(_WIDTH_INCHES, _ROW_INCHES * len(keyed)), squeeze=False
    )
    for (subtasks, key_groups), (op, chosen) in zip(axes, keyed, strict=True):
        _draw_operator(subtasks, key_groups, op, chosen)
    figure.tight_layout()
    image = io.BytesIO()
    figure.savefig(image, format="png", dpi=110)
    plt.close(figure)
    try:
        with fsspec.open(path, "wb") as out:  # a local path or any fsspec URL
            out.write(image.getvalue())
    except OSError as exc:
        raise StatectlError(f"cannot write the PNG ({exc.strerror or exc})", path) from None


def _draw_operator(
    subtasks: Axes, key_groups: Axes, op: OperatorOutlook, chosen: Candidate
) -> None:
    label = op.uid or op.name or op.id
    loads = chosen.keyed
    largest = loads.largest
    colours = ["#e15759" if b == largest else "#4e79a7" for b in loads.subtask_bytes]
    subtasks.bar(range(loads.parallelism), loads.subtask_bytes, color=colours)
    subtasks.set_title(
        f"{label}: bytes per subtask at p={loads.parallelism} (max/mean {loads.max_over_mean:.2f})",
        fontsize=9,
    )
    subtasks.set_xlabel("subtask")
    if loads.parallelism <= 32:
        subtasks.set_xticks(range(loads.parallelism))
    key_groups.bar(range(op.max_parallelism), op.key_group_bytes, width=1.0, color="#f28e2b")
    key_groups.set_title(f"{label}: bytes per key group (M={op.max_parallelism})", fontsize=9)
    key_groups.set_xlabel("key group")
