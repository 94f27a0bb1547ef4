"""Key-group range math, as Flink's `KeyGroupRangeAssignment` computes it (spec §6.3, §6.4).

Pure integer math shared by `verify` (key-group coverage) and the rescale planner.
"""

from __future__ import annotations

from statectl.errors import StatectlError
from statectl.formats.java_types import UPPER_BOUND_MAX_PARALLELISM

DEFAULT_LOWER_BOUND_MAX_PARALLELISM = 1 << 7


def check_max_parallelism(max_parallelism: int) -> None:
    """Flink's bound on the number of key groups: 1..32768."""
    if not 0 < max_parallelism <= UPPER_BOUND_MAX_PARALLELISM:
        raise StatectlError(
            f"max parallelism {max_parallelism} is outside 1..{UPPER_BOUND_MAX_PARALLELISM}"
        )


def check_parallelism(max_parallelism: int, parallelism: int) -> None:
    if not 0 < parallelism <= max_parallelism <= UPPER_BOUND_MAX_PARALLELISM:
        raise StatectlError(
            f"parallelism {parallelism} is not within 1..max parallelism {max_parallelism} "
            f"(at most {UPPER_BOUND_MAX_PARALLELISM})"
        )


def key_group_range(max_parallelism: int, parallelism: int, index: int) -> tuple[int, int]:
    """`computeKeyGroupRangeForOperatorIndex`: the inclusive key-group range of a subtask."""
    check_parallelism(max_parallelism, parallelism)
    start = (index * max_parallelism + parallelism - 1) // parallelism
    end = ((index + 1) * max_parallelism - 1) // parallelism
    return start, end


def operator_index_for_key_group(max_parallelism: int, parallelism: int, key_group: int) -> int:
    """`computeOperatorIndexForKeyGroup`."""
    return key_group * parallelism // max_parallelism


def default_max_parallelism(parallelism: int) -> int:
    """`computeDefaultMaxParallelism`: 1.5 × parallelism rounded up to a power of two, ≥ 128."""
    wanted = parallelism + parallelism // 2
    power = 1 << max(wanted - 1, 0).bit_length()
    return min(max(power, DEFAULT_LOWER_BOUND_MAX_PARALLELISM), UPPER_BOUND_MAX_PARALLELISM)
