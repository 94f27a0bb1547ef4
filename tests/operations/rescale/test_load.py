"""Loads per new subtask from bytes per key group, against Flink's own key-group assignment."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from statectl.operations.plan import plan_parallelism
from statectl.operations.rescale.load import (
    SubtaskLoads,
    default_candidates,
    parse_parallelisms,
    subtask_loads,
)
from statectl.savepoint.reader import open_savepoint
from tests.conftest import fixture_savepoint

ORACLE = Path(__file__).parents[1] / "oracles" / "KeyGroupRanges.java"


def test_loads_sum_contiguous_ranges() -> None:
    loads = subtask_loads([5, 0, 1, 2, 0, 0, 9, 3], 3)  # ranges 0–2, 3–5, 6–7
    assert loads.subtask_bytes == (6, 2, 12)
    assert loads.largest == 12
    assert loads.max_over_mean == pytest.approx(12 / (20 / 3))
    assert loads.key_group_count_skew == pytest.approx(3 * 3 / 8)
    assert loads.hot_key_group_skew == pytest.approx((12 / (20 / 3)) / (9 / 8))


def test_even_key_groups_skew_only_from_their_counts() -> None:
    loads = subtask_loads([10] * 128, 3)  # 43, 43, 42 key groups
    assert loads.subtask_bytes == (430, 430, 420)
    assert loads.max_over_mean == pytest.approx(430 / (1280 / 3))
    assert loads.key_group_count_skew == pytest.approx(43 * 3 / 128)
    assert loads.hot_key_group_skew == pytest.approx(1.0)


def test_no_bytes_is_even() -> None:
    assert subtask_loads([0] * 16, 4) == SubtaskLoads(4, 16, (0, 0, 0, 0))
    assert subtask_loads([0] * 16, 4).max_over_mean == 1.0


@pytest.mark.parametrize(
    ("text", "expected"),
    [("3", [3]), ("2,3,5", [2, 3, 5]), ("1-4", [1, 2, 3, 4]), ("8, 1-3,2", [1, 2, 3, 8])],
)
def test_parse_parallelisms(text: str, expected: list[int]) -> None:
    assert parse_parallelisms(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "'' is not a parallelism or a range like 1-16"),
        ("a", "'a' is not a parallelism or a range like 1-16"),
        ("3-", "'3-' is not a parallelism or a range like 1-16"),
        ("0", "'0': parallelisms are positive, ranges ascending"),
        ("5-2", "'5-2': parallelisms are positive, ranges ascending"),
    ],
)
def test_bad_parallelisms(text: str, message: str) -> None:
    with pytest.raises(ValueError) as raised:
        parse_parallelisms(text)
    assert str(raised.value) == message


def test_default_candidates() -> None:
    assert default_candidates(128, 4) == [*range(1, 17), 32, 64, 128]
    assert default_candidates(128, 12) == [*range(1, 25), 32, 64, 128]
    assert default_candidates(10, 4) == list(range(1, 11))
    assert default_candidates(300, 2) == [*range(1, 17), 20, 25, 30, 50, 60, 75, 100, 150, 300]


@pytest.mark.flink
def test_loads_follow_flinks_key_group_ranges(flink_dist: Path) -> None:
    """Each subtask's load is the sum over the range Flink's KeyGroupRangeAssignment gives it:
    on real fixtures' key-group bytes at M = 128 and 300, synthetic ones at the other M."""
    cases = [(m, p) for m in (1, 7, 128, 300, 4096) for p in (1, 2, 3, 5, 7, 16, 127) if p <= m]
    cases += [(32768, 3), (32768, 1000)]
    lines = subprocess.run(
        ["java", "-cp", str(flink_dist), str(ORACLE)],
        input="".join(f"{m} {p}\n" for m, p in cases),
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    real = _real_key_group_bytes()
    for max_parallelism, parallelism in cases:
        key_group_bytes = real.get(max_parallelism) or [
            (g * 7919) % 1013 for g in range(max_parallelism)
        ]
        loads = subtask_loads(key_group_bytes, parallelism)
        ranges, lines = lines[:parallelism], lines[parallelism:]
        for index, line in enumerate(ranges):
            flink_index, first, last = map(int, line.split())
            assert flink_index == index
            expected = sum(key_group_bytes[int(first) : int(last) + 1])
            assert loads.subtask_bytes[index] == expected, (max_parallelism, parallelism, index)
    assert lines == []


def _real_key_group_bytes() -> dict[int, list[int]]:
    """Bytes per key group of Flink-written fixtures, by max parallelism (128 and 300)."""
    result = {}
    for name, uid in (("hashmap_p4", "keyed-str"), ("hashmap_maxp300", "keyed-long")):
        sp = open_savepoint(str(fixture_savepoint(name)))
        outlook = plan_parallelism(sp, uid, [1]).operators[0]
        result[outlook.max_parallelism] = list(outlook.key_group_bytes)
    return result


@pytest.mark.parametrize(
    ("name", "parallelism"),
    [
        ("hashmap_p4", 3),
        ("hashmap_p4", 6),
        ("hashmap_canonical_files", 3),
        ("hashmap_compressed", 5),
    ],
)
def test_dry_run_and_report_say_the_same_keyed_max_over_mean(name: str, parallelism: int) -> None:
    """`rescale --dry-run` predicts from the input's key-group blocks; the report measures the
    output's, through the same computation (`load.block_loads`): the same numbers, not the
    written files' sizes with their headers."""
    import statectl
    from statectl.api import predicted_loads

    source = str(fixture_savepoint(name))
    plan = statectl.plan_rescale(source, parallelism)
    predicted = predicted_loads(plan)
    report = statectl.write_rescale(plan, f"memory://loads-{name}-{parallelism}", overwrite=True)
    written = {op.id: op for op in report.operators if op.keyed_loads is not None}
    assert predicted and set(predicted) == set(written)
    for op_id, loads in predicted.items():
        assert written[op_id].keyed_loads == loads
        assert written[op_id].keyed_skew == loads.max_over_mean
