"""`plan --png`: the figure names the savepoint and its parallelism, sets every candidate side
by side, labels its axes with units and draws the subtask boundaries over the key groups."""

from __future__ import annotations

from pathlib import Path

import pytest

import statectl
from statectl.api import key_group_range
from statectl.cli.plot import byte_unit, draw_plan, plan_figure, savepoint_name
from tests.conftest import fixture_savepoint

pytest.importorskip("matplotlib")


def _figure(*candidates: int) -> tuple[object, statectl.api.reports.ParallelismPlan]:
    source = fixture_savepoint("hashmap_p4")  # keyed-str at parallelism 4, max parallelism 128
    plan = statectl.plan(str(source), "keyed-str", list(candidates) or None)
    return plan_figure(plan), plan


def test_the_title_names_the_savepoint_and_its_current_parallelism() -> None:
    figure, _ = _figure(2, 3, 4, 8)
    assert figure._suptitle.get_text() == "hashmap_p4/savepoint · current parallelism 4"


def test_every_candidate_shows_its_largest_and_mean_subtask_side_by_side() -> None:
    figure, plan = _figure(2, 3, 4, 8)
    (op,) = plan.operators
    candidates = figure.axes[0]
    largest, mean = candidates.containers
    assert len(largest) == len(mean) == 4
    scale, unit = byte_unit(max(c.keyed.largest for c in op.candidates))
    assert unit == "KiB"
    assert [bar.get_height() for bar in largest] == [c.keyed.largest / scale for c in op.candidates]
    heights = [bar.get_height() for bar in mean]
    assert heights == pytest.approx([c.keyed.mean / scale for c in op.candidates])
    assert all(m.get_x() > b.get_x() for b, m in zip(largest, mean, strict=True))  # side by side
    ratios = [t.get_text() for t in candidates.texts]
    assert ratios == [f"{c.keyed.max_over_mean:.2f}" for c in op.candidates]
    ticks = [t.get_text() for t in candidates.get_xticklabels()]
    assert ticks[2] == "4\ncurrent"
    assert candidates.get_ylabel() == "keyed state (KiB)"
    assert candidates.get_xlabel() == "candidate parallelism"


def test_the_key_group_chart_draws_subtask_boundaries_of_each_parallelism() -> None:
    figure, _ = _figure(3)  # the one asked for is charted, beside the current 4
    subtasks, key_groups = figure.axes[1], figure.axes[2]
    assert "at p=3 (asked for" in subtasks.get_title()
    assert len(subtasks.patches) == 3
    assert key_groups.get_xlabel() == "key group (0–127)"
    assert key_groups.get_ylabel().startswith("keyed state (")
    starts = [line.get_xdata()[0] for line in key_groups.lines]
    boundaries = {p: [key_group_range(128, p, i)[0] for i in range(1, p)] for p in (4, 3)}
    assert starts == boundaries[4] + boundaries[3] == [32, 64, 96, 43, 86]
    legend = [t.get_text() for t in key_groups.get_legend().get_texts()]
    assert legend == [
        "subtask boundaries at p=4 (current)",
        "subtask boundaries at p=3 (asked for)",
    ]


def test_the_png_is_written(tmp_path: Path) -> None:
    plan = statectl.plan(str(fixture_savepoint("hashmap_p4")), parallelisms=[2, 4])
    draw_plan(plan, str(tmp_path / "plan.png"))
    assert (tmp_path / "plan.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_names_and_units() -> None:
    assert savepoint_name("s3://b/savepoints/savepoint-1a2b3c-0123456789ab/") == (
        "savepoint-1a2b3c-0123456789ab"
    )
    assert savepoint_name("file:///jobs/4f2a/chk-42/_metadata") == "4f2a/chk-42"
    assert [byte_unit(n)[1] for n in (0, 1023, 1024, 5 << 20, 3 << 30)] == [
        "B", "B", "KiB", "MiB", "GiB",
    ]  # fmt: skip
