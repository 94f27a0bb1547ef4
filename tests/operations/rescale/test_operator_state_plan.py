"""The planner's operator-state assignment against hand-computed cases and Flink's own code."""

from __future__ import annotations

import random
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from statectl.formats.handles import DistributionMode, OperatorStateHandle, OperatorStateOffsets
from statectl.operations.rescale.java_hashmap import hashmap_order
from statectl.operations.rescale.operator_state_plan import assign_operator_state

ORACLES = Path(__file__).parent / "oracles"
SPLIT, UNION, BROADCAST = DistributionMode

# a case: old parallelism, new parallelism, per old subtask [(name, mode, element count)]
Case = tuple[int, int, list[list[tuple[str, DistributionMode, int]]]]


def handles(case: Case) -> list[OperatorStateHandle | None]:
    _, _, subtasks = case
    return [
        OperatorStateHandle(
            4, tuple(OperatorStateOffsets(n, m, tuple(range(c))) for n, m, c in states), None
        )
        for states in subtasks
    ]


def planned(case: Case) -> Counter[tuple[int, str, int, int]]:
    """(new subtask, state, old subtask, element index) for every placed element."""
    placed: Counter[tuple[int, str, int, int]] = Counter()
    for new_index, share in enumerate(assign_operator_state(handles(case), case[1])):
        for state in share:
            for source in state.sources:
                for i in range(source.first, source.first + source.count):
                    placed[(new_index, state.name, source.old_subtask, i)] += 1
    return placed


def test_split_state_is_dealt_round_robin_with_the_start_carried() -> None:
    # 2 → 3; "a" has 5 elements: 2,2,1 from position 0; the next name starts where the
    # extras ran out (position 2), so "b" (4 elements: base 1, one extra) gives 2 to subtask 2.
    case: Case = (2, 3, [[("a", SPLIT, 3), ("b", SPLIT, 2)], [("a", SPLIT, 2), ("b", SPLIT, 2)]])
    assert hashmap_order(["a", "b"]) == ["a", "b"]
    got = planned(case)
    assert sorted(k for k in got if k[1] == "a") == [
        (0, "a", 0, 0), (0, "a", 0, 1), (1, "a", 0, 2), (1, "a", 1, 0), (2, "a", 1, 1),
    ]  # fmt: skip
    assert sorted(k for k in got if k[1] == "b") == [
        (0, "b", 1, 0), (1, "b", 1, 1), (2, "b", 0, 0), (2, "b", 0, 1),
    ]  # fmt: skip


def test_union_elements_land_once_and_broadcast_once_per_subtask() -> None:
    case: Case = (4, 2, [[("u", UNION, 2), ("bc", BROADCAST, 1)] for _ in range(4)])
    got = planned(case)
    union = sorted(k for k in got if k[1] == "u")
    assert union == [(0, "u", s, i) for s in (0, 1) for i in (0, 1)] + [
        (1, "u", s, i) for s in (2, 3) for i in (0, 1)
    ]
    assert sorted(k for k in got if k[1] == "bc") == [(0, "bc", 0, 0), (1, "bc", 1, 0)]
    assert set(got.values()) == {1}


def _random_case(rng: random.Random) -> Case:
    old, new = rng.randint(1, 5), rng.randint(1, 6)
    names = rng.sample(["split", "s2", "other-split", "union", "u2", "Aa", "BB", "bcast"], 5)
    modes = {
        n: (BROADCAST if n == "bcast" else UNION if n.startswith("u") else SPLIT) for n in names
    }
    subtasks = []
    for _ in range(old):
        order = rng.sample(names, len(names))
        subtasks.append(
            [(n, modes[n], 1 if modes[n] is BROADCAST else rng.randint(0, 7)) for n in order]
        )
    return old, new, subtasks


def flink_assignments(cases: list[Case], flink_dist: Path) -> list[Counter]:
    lines = []
    for old, new, subtasks in cases:
        specs = [f"{s}:{n}:{m.name}:{c}" for s, states in enumerate(subtasks) for n, m, c in states]
        lines.append(" ".join([str(old), str(new), *specs]))
    out = subprocess.run(
        ["java", "-cp", str(flink_dist), str(ORACLES / "RoundRobinOracle.java")],
        input="\n".join(lines) + "\n", capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    results: list[Counter] = [Counter()]
    for line in out.splitlines():
        if line == "--":
            results.append(Counter())
            continue
        new_index, name, old_index, element = line.split()
        results[-1][(int(new_index), name, int(old_index), int(element))] += 1
    return results[: len(cases)]


@pytest.mark.flink
def test_split_and_broadcast_match_flinks_round_robin_repartitioner(flink_dist: Path) -> None:
    rng = random.Random(7)
    cases = [c for c in (_random_case(rng) for _ in range(120)) if c[0] != c[1]]
    for case, flink in zip(cases, flink_assignments(cases, flink_dist), strict=True):
        ours = planned(case)
        not_union = {k: v for k, v in flink.items() if not k[1].startswith("u")}
        assert {k: v for k, v in ours.items() if not k[1].startswith("u")} == not_union, case
        # Flink gives every new subtask every union element; statectl places each once and
        # lets Flink's restore-time re-union hand them to all.
        flink_union = {(n, s, i) for (_, n, s, i) in flink if n.startswith("u")}
        ours_union = Counter((n, s, i) for (_, n, s, i) in ours.elements() if n.startswith("u"))
        assert set(ours_union) == flink_union and set(ours_union.values()) <= {1}, case


@pytest.mark.flink
def test_hashmap_order_matches_java() -> None:
    rng = random.Random(3)
    words = ["split", "union", "bcast", "Aa", "BB", "C#", "lst", "mp", "_timer", "é", "x" * 20]
    for capacity in (1, 2, 3, 16):
        for computed in (False, True):
            keys = rng.sample(words, rng.randint(1, len(words)))
            how = f"{'compute' if computed else 'put'}:{capacity}"
            java = subprocess.run(
                ["java", str(ORACLES / "HashMapOrder.java"), how, *keys],
                capture_output=True, text=True, check=True,
            ).stdout.split("\n")[:-1]  # fmt: skip
            assert hashmap_order(keys, capacity, computed) == java, how
