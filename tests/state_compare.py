"""Comparing state dumps: what Flink wrote (the manifest) with what Flink restored.

Both use the dump schema of tests/flink (see tests/flink/README.md):
operators → uid → subtasks → index → keyed / timers / operator / broadcast.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

Dump = dict[str, Any]


def _subtasks(dump: Dump, uid: str) -> dict[str, Any]:
    return dump["operators"].get(uid, {}).get("subtasks", {})


def keyed_union(dump: Dump, uid: str, section: str = "keyed") -> dict[str, dict[str, Any]]:
    """state → key → value over all subtasks; a key held by two subtasks is an error."""
    merged: dict[str, dict[str, Any]] = {}
    for index, subtask in _subtasks(dump, uid).items():
        for state, entries in subtask.get(section, {}).items():
            target = merged.setdefault(state, {})
            for key, value in entries.items():
                assert key not in target, (
                    f"{uid}/{state}: key {key!r} restored twice (subtask {index})"
                )
                target[key] = value
    return merged


def list_elements(dump: Dump, uid: str, state: str) -> Counter:
    found: Counter = Counter()
    for subtask in _subtasks(dump, uid).values():
        found.update(subtask.get("operator", {}).get(state, []))
    return found


def per_subtask_elements(dump: Dump, uid: str, state: str) -> dict[str, Counter]:
    return {
        index: Counter(subtask.get("operator", {}).get(state, []))
        for index, subtask in _subtasks(dump, uid).items()
    }


def assert_restored_equals_written(
    written: Dump, restored: Dump, manifest_operators: list[dict[str, Any]], parallelism: int
) -> None:
    """Every key, value, timer and element Flink wrote came back, once, where it belongs."""
    for op in manifest_operators:
        uid = op["uid"]
        restored_subtasks = _subtasks(restored, uid)
        states = {s["name"]: s for s in op["states"]}
        if not states:
            continue
        assert len(restored_subtasks) == parallelism, f"{uid}: {sorted(restored_subtasks)}"
        for index, subtask in restored_subtasks.items():
            assert subtask.get("unreachable", []) == [], f"{uid}[{index}] unreachable keys"
            assert subtask.get("misplaced", []) == [], f"{uid}[{index}] misplaced keys"
        if any(s["scope"] == "keyed" for s in states.values()):
            assert keyed_union(restored, uid) == keyed_union(written, uid), uid
            assert keyed_union(restored, uid, "timers") == keyed_union(written, uid, "timers"), uid
        for name, state in states.items():
            if state["mode"] == "SPLIT_DISTRIBUTE":
                assert list_elements(restored, uid, name) == list_elements(written, uid, name), name
            elif state["mode"] == "UNION":
                everything = list_elements(written, uid, name)
                for index, seen in per_subtask_elements(restored, uid, name).items():
                    assert seen == everything, f"{uid}[{index}] union {name}"
            elif state["mode"] == "BROADCAST":
                expected = next(iter(_subtasks(written, uid).values()))["broadcast"][name]
                for index, subtask in restored_subtasks.items():
                    assert subtask["broadcast"][name] == expected, (
                        f"{uid}[{index}] broadcast {name}"
                    )


def assert_same_split_placement(
    ours: Dump, flinks: Dump, manifest_operators: list[dict[str, Any]]
) -> None:
    """SPLIT_DISTRIBUTE elements sit on the same subtask as when Flink rescales the original."""
    for op in manifest_operators:
        for state in op["states"]:
            if state["mode"] == "SPLIT_DISTRIBUTE":
                uid, name = op["uid"], state["name"]
                assert per_subtask_elements(ours, uid, name) == per_subtask_elements(
                    flinks, uid, name
                )
