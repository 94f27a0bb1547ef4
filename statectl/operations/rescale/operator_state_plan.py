"""Where each operator-state element goes at a new parallelism, exactly as Flink assigns it.

Mirrors `RoundRobinOperatorStateRepartitioner` (spec §3.6): SPLIT_DISTRIBUTE elements are dealt
round robin per state name in HashMap order with the start index carried across names;
BROADCAST copies come from old subtask `i % old`; UNION elements go to exactly one new subtask
each, because Flink re-unions them on restore (the spec's UNION trap).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from statectl.formats.handles import DistributionMode, OperatorStateHandle
from statectl.operations.rescale.java_hashmap import expected_size_capacity, hashmap_order


@dataclass(frozen=True, slots=True)
class ElementSource:
    """Elements `first .. first+count-1` of one state in one old subtask's handle."""

    old_subtask: int
    first: int
    count: int


@dataclass(frozen=True, slots=True)
class StateAssignment:
    """One state's share for one new subtask."""

    name: str
    mode: DistributionMode
    sources: tuple[ElementSource, ...]

    @property
    def element_count(self) -> int:
        return sum(s.count for s in self.sources)


def assign_operator_state(
    old_handles: list[OperatorStateHandle | None], new_parallelism: int
) -> list[list[StateAssignment]]:
    """Per new subtask, its share of every state (states with no share get an empty one)."""
    by_mode = _group_by_mode(old_handles)
    shares: list[dict[str, list[ElementSource]]] = [
        defaultdict(list) for _ in range(new_parallelism)
    ]
    _deal_split(by_mode[DistributionMode.SPLIT_DISTRIBUTE], shares)
    _place_union(by_mode[DistributionMode.UNION], len(old_handles), shares)
    _copy_broadcast(by_mode[DistributionMode.BROADCAST], shares)
    modes = {name: mode for mode, states in by_mode.items() for name in states}
    return [
        [StateAssignment(name, modes[name], tuple(share.get(name, ()))) for name in modes]
        for share in shares
    ]


# name → [(old subtask, element count)] in old-subtask order, per mode
_ByName = dict[str, list[tuple[int, int]]]


def _group_by_mode(
    old_handles: list[OperatorStateHandle | None],
) -> dict[DistributionMode, _ByName]:
    """`groupByStateMode`: names enter a default HashMap via `computeIfAbsent`, in the
    iteration order of each old handle's map (which the metadata reader filled with `put`)."""
    inserted: dict[DistributionMode, list[str]] = {mode: [] for mode in DistributionMode}
    located: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for subtask, handle in enumerate(old_handles):
        if handle is None:
            continue
        states = {s.name: s for s in handle.states}
        for name in hashmap_order(states, expected_size_capacity(len(states))):
            inserted[states[name].mode].append(name)
            located[name].append((subtask, len(states[name].offsets)))
    return {
        mode: {n: located[n] for n in hashmap_order(names, computed=True)}
        for mode, names in inserted.items()
    }


def _deal_split(states: _ByName, shares: list[dict[str, list[ElementSource]]]) -> None:
    """`repartitionSplitState`, element for element."""
    new_parallelism = len(shares)
    start = 0
    for name, locations in states.items():
        total = sum(count for _, count in locations)
        base, remainder = divmod(total, new_parallelism)
        next_start = start
        cursor = _Cursor(locations)
        for i in range(new_parallelism):
            target = (i + start) % new_parallelism
            wanted = base
            if remainder > 0:
                wanted += 1
                remainder -= 1
            elif remainder == 0:
                next_start = target
                remainder -= 1
            shares[target][name].extend(cursor.take(wanted))
        start = next_start


class _Cursor:
    """Takes elements in order across old subtasks, splitting one subtask's list if needed."""

    def __init__(self, locations: list[tuple[int, int]]) -> None:
        self._locations = locations
        self._index = 0
        self._offset = 0

    def take(self, count: int) -> list[ElementSource]:
        taken = []
        while count > 0:
            subtask, size = self._locations[self._index]
            chunk = min(count, size - self._offset)
            if chunk:
                taken.append(ElementSource(subtask, self._offset, chunk))
            self._offset += chunk
            count -= chunk
            if self._offset == size:
                self._index += 1
                self._offset = 0
        return taken


def _place_union(
    states: _ByName, old_parallelism: int, shares: list[dict[str, list[ElementSource]]]
) -> None:
    """Old subtask j's elements go to new subtask j·new/old: each element once, order kept."""
    new_parallelism = len(shares)
    for name, locations in states.items():
        for subtask, count in locations:
            if count:
                target = subtask * new_parallelism // old_parallelism
                shares[target][name].append(ElementSource(subtask, 0, count))


def _copy_broadcast(states: _ByName, shares: list[dict[str, list[ElementSource]]]) -> None:
    """`repartitionBroadcastState`: new subtask i takes the copy of old entry i % old."""
    for name, locations in states.items():
        for i, share in enumerate(shares):
            subtask, count = locations[i % len(locations)]
            share[name].append(ElementSource(subtask, 0, count))
