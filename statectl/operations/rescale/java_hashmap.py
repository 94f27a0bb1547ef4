"""Iteration order of a `java.util.HashMap<String, …>`.

Flink's `RoundRobinOperatorStateRepartitioner` walks operator state names in HashMap order
and carries a start index from one name to the next, so reproducing its assignment of
SPLIT_DISTRIBUTE elements needs the same order (spec §3.6).
"""

from __future__ import annotations

from collections.abc import Iterable

from statectl.formats.java_types import java_string_hash

_LOAD_FACTOR = 0.75


def _spread(h: int) -> int:
    h &= 0xFFFFFFFF
    return h ^ (h >> 16)


def _table_size_for(capacity: int) -> int:
    return 1 if capacity <= 1 else 1 << (capacity - 1).bit_length()


def expected_size_capacity(expected_size: int) -> int:
    """Flink's `CollectionUtil.newHashMapWithExpectedSize` initial capacity."""
    return expected_size + 1 if expected_size <= 2 else -(-expected_size * 4 // 3)


def hashmap_order(
    keys: Iterable[str], initial_capacity: int = 16, computed: bool = False
) -> list[str]:
    """Keys (given in insertion order, duplicates ignored) in the map's iteration order.

    Entries iterate by bucket. Within a bucket, `put` appends and `computeIfAbsent`
    (`computed=True`) prepends; resizes keep the relative order.
    (Buckets turned into trees after eight collisions are not modelled.)
    """
    unique = list(dict.fromkeys(keys))
    capacity = _table_size_for(initial_capacity)
    for size in range(1, len(unique) + 1):
        while size > capacity * _LOAD_FACTOR:
            capacity *= 2
    position = {key: -i if computed else i for i, key in enumerate(unique)}
    return sorted(
        unique, key=lambda k: (_spread(java_string_hash(k)) & (capacity - 1), position[k])
    )
