"""What a parallelism does to keyed state: bytes per new subtask from bytes per key group.

Key groups are the unit Flink moves (`KeyGroupRangeAssignment`): at parallelism p each subtask
gets a contiguous range of ⌊M/p⌋ or ⌈M/p⌉ key groups. A subtask's load is the sum over its
range, so its skew has two causes that multiply: uneven key-group counts (only when p does not
divide M) and hot key groups. `plan`, `rescale --dry-run` and the rescale report all use this.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import accumulate

from statectl.errors import FormatError
from statectl.formats.key_groups import key_group_range
from statectl.formats.keyed_blocks import block_spans


@dataclass(frozen=True, slots=True)
class SubtaskLoads:
    """Bytes per new subtask at one parallelism, and how uneven they are."""

    parallelism: int
    max_parallelism: int
    subtask_bytes: tuple[int, ...]

    @property
    def largest(self) -> int:
        return max(self.subtask_bytes, default=0)

    @property
    def mean(self) -> float:
        return sum(self.subtask_bytes) / self.parallelism

    @property
    def max_over_mean(self) -> float:
        """1.0 is perfectly even; 2.0 means the largest subtask holds twice the mean."""
        return self.largest / self.mean if self.mean else 1.0

    @property
    def key_group_count_skew(self) -> float:
        """The skew if every key group held the same bytes: ⌈M/p⌉ / (M/p)."""
        most = -(-self.max_parallelism // self.parallelism)
        return most * self.parallelism / self.max_parallelism

    @property
    def hot_key_group_skew(self) -> float:
        """The rest of the skew, caused by key groups that hold more bytes than others."""
        return self.max_over_mean / self.key_group_count_skew


def subtask_loads(key_group_bytes: Sequence[int], parallelism: int) -> SubtaskLoads:
    """Loads under Flink's assignment of `len(key_group_bytes)` key groups to `parallelism`."""
    max_parallelism = len(key_group_bytes)
    prefix = [0, *accumulate(key_group_bytes)]
    loads = []
    for index in range(parallelism):
        first, last = key_group_range(max_parallelism, parallelism, index)
        loads.append(prefix[last + 1] - prefix[first])
    return SubtaskLoads(parallelism, max_parallelism, tuple(loads))


@dataclass(frozen=True, slots=True)
class CanonicalFile:
    """What a canonical keyed-state file's blocks are measured from: its handle's key-group
    offsets and the file's size."""

    start_key_group: int
    offsets: Sequence[int]
    size: int
    description: str


def block_loads(
    files: Iterable[CanonicalFile], max_parallelism: int, parallelism: int
) -> SubtaskLoads:
    """Keyed bytes per subtask at `parallelism` of canonical files' key-group blocks (a block
    ends where the next begins, `keyed_blocks.block_spans`; headers count for none): what
    `rescale --dry-run` predicts from the input and the rescale report measures of the output,
    so that the two say the same "keyed max/mean" (and `plan`, which reads blocks alike)."""
    sizes = [0] * max_parallelism
    for file in files:
        try:
            spans = block_spans(file.start_key_group, file.offsets, file.size)
        except FormatError as exc:
            raise exc.with_source(file.description) from None
        for span in spans:
            if not 0 <= span.key_group < max_parallelism:
                raise FormatError(
                    f"key group {span.key_group} is outside the max parallelism {max_parallelism}",
                    file.description,
                )
            sizes[span.key_group] += span.length
    return subtask_loads(sizes, parallelism)


def parse_parallelisms(text: str) -> list[int]:
    """`2,3,5`, `1-16` or a mix (`1-4,8,16`), ascending without repeats."""
    wanted: set[int] = set()
    for part in text.split(","):
        first, dash, last = part.strip().partition("-")
        if not first.isdigit() or (dash and not last.strip().isdigit()):
            raise ValueError(f"{part.strip()!r} is not a parallelism or a range like 1-16")
        low, high = int(first), int(last) if dash else int(first)
        if not 0 < low <= high:
            raise ValueError(f"{part.strip()!r}: parallelisms are positive, ranges ascending")
        wanted.update(range(low, high + 1))
    return sorted(wanted)


def default_candidates(max_parallelism: int, parallelism: int) -> list[int]:
    """Every p up to twice the current one (at least 16), and every divisor of M above."""
    limit = min(max_parallelism, max(16, 2 * parallelism))
    divisors = [p for p in range(limit + 1, max_parallelism + 1) if max_parallelism % p == 0]
    return [*range(1, limit + 1), *divisors]
