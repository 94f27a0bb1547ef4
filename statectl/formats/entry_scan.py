"""Locating the entries of a canonical key-group block without a Python step per entry.

An entry's position depends on the lengths of every entry before it (`i32 keyLen, key, i32
valueLen, value`, flink-savepoint-format.md §4.4), so `keyed_blocks.entry_positions` walks
them one by one. Here numpy finds the candidates instead: every key of a block starts with the
block's key-group prefix (§4.6, bit 7 of the first byte being the run-end flag), after a key
length below 64 KiB, so the positions where those bytes occur include every entry. Lengths are
read at all candidates at once, and when the candidates chain from the block's first entry to
its end mark, that chain is the walk's. Anything else (a false candidate, a longer key, a
damaged block) is handed to the exact walk, which also gives the errors.
"""

from __future__ import annotations

import struct

import numpy as np
import numpy.typing as npt

from statectl.formats import keyed_blocks
from statectl.formats.arrays import Int64s
from statectl.formats.keyed_blocks import END_OF_KEY_GROUP_MARK, FIRST_BIT_IN_BYTE_MASK, Buffer

Positions = tuple[Int64s, Int64s, Int64s, list[tuple[int, int]]]
"""(key starts, key ends, value ends) per entry, (state id, entries) per run: as
`keyed_blocks.EntryPositions`, in arrays."""


def locate(
    block: Buffer, key_group: int, prefix_bytes: int, num_states: int | None, base: int = 0
) -> Positions:
    """Where the entries of an uncompressed block of `key_group` lie (plus `base`)."""
    found = _candidate_chain(np.frombuffer(block, np.uint8), key_group, prefix_bytes)
    runs = None
    if found is not None:
        key_starts, key_ends, value_ends, flagged = found
        runs = _runs(block, value_ends[flagged], np.flatnonzero(flagged), num_states)
    if found is None or runs is None:
        walked = keyed_blocks.entry_positions(block, num_states, base)
        return (
            np.array(walked.key_starts, np.int64),
            np.array(walked.key_ends, np.int64),
            np.array(walked.value_ends, np.int64),
            walked.runs,
        )
    return key_starts + base, key_ends + base, value_ends + base, runs


def _candidate_chain(
    data: npt.NDArray[np.uint8], key_group: int, prefix_bytes: int
) -> tuple[Int64s, Int64s, Int64s, npt.NDArray[np.bool_]] | None:
    size = len(data)
    if size < 4 + 4 + prefix_bytes + 4 or prefix_bytes not in (1, 2):
        return None
    prefix = key_group.to_bytes(prefix_bytes, "big")
    span = size - 4 - prefix_bytes  # candidate entry starts p: p + 4 + prefix_bytes <= size
    starts = _candidate_starts(data, prefix, span)
    if not len(starts) or starts[0] != 2:
        return None
    key_lengths = (data[starts + 2].astype(np.int64) << 8) | data[starts + 3]
    key_starts = starts + 4
    key_ends = key_starts + key_lengths
    fits = (key_lengths > 0) & (key_ends + 4 <= size)
    value_lengths = np.zeros(len(starts), np.int64)
    at = key_ends[fits]
    value_lengths[fits] = (
        (data[at].astype(np.int64) << 24)
        | (data[at + 1].astype(np.int64) << 16)
        | (data[at + 2].astype(np.int64) << 8)
        | data[at + 3]
    )
    value_ends = key_ends + 4 + value_lengths
    fits &= (value_ends <= size) & (value_lengths < 1 << 31)  # an i32, not negative
    flagged = (data[key_starts] & FIRST_BIT_IN_BYTE_MASK) != 0
    following = value_ends + 2 * flagged  # a run's last entry is followed by a u16
    # The common case: candidates are exactly the entries, each followed by the next.
    if _chained(starts, following, flagged, fits, size):
        return key_starts, key_ends, value_ends, flagged
    # Else false candidates (entry-like bytes in keys and values) lie among the entries, few,
    # most of them followed by no candidate nearby: without those, the rest may chain.
    nearby = _nearby_links(starts, following)
    kept = np.flatnonzero(fits & _followed_nearby(nearby, following, size))
    if _chained(starts[kept], following[kept], flagged[kept], fits[kept], size):
        return key_starts[kept], key_ends[kept], value_ends[kept], flagged[kept]
    # Else the chain from the first, by the nearby successors, then by every successor.
    ends_block = fits & (following == size) & flagged
    successor, linked = _nearby_successors(nearby)
    chain = _chain(successor, fits & linked, ends_block)
    if chain is None:
        chain = _chain(*_successors(starts, following, fits), ends_block)
    if chain is None:
        return None
    return key_starts[chain], key_ends[chain], value_ends[chain], flagged[chain]


_PIECE_BYTES = 256 << 10  # of a block tested at once: the byte tests' arrays stay in cache


def _candidate_starts(data: npt.NDArray[np.uint8], prefix: bytes, span: int) -> Int64s:
    """The positions p < span where an entry may start: bytes p, p+1 zero (a key length below
    64 KiB), then at p+4 the key-group prefix (its first byte's bit 7 the run-end flag).
    Every position takes every test: the prefix's first byte alone is 0 for most key groups
    of a 2-byte prefix (as are many length and value bytes), so filtering on it first kept a
    third of all positions as candidates."""
    pieces = []
    for first in range(0, span, _PIECE_BYTES):
        last = min(span, first + _PIECE_BYTES)
        candidate = (data[first + 4 : last + 4] & 0x7F) == prefix[0]
        candidate &= data[first:last] == 0
        candidate &= data[first + 1 : last + 1] == 0
        if len(prefix) == 2:
            candidate &= data[first + 5 : last + 5] == prefix[1]
        pieces.append(np.flatnonzero(candidate) + first)
    starts = np.concatenate(pieces) if pieces else np.zeros(0, np.int64)
    return starts[starts >= 2]  # bytes 0-1: the first run's state id


_NEARBY = 4  # candidates ahead where a candidate's successor is sought first


def _nearby_links(starts: Int64s, following: Int64s) -> list[npt.NDArray[np.bool_]]:
    """For each step 1…`_NEARBY`: which candidates are followed by the candidate that many
    ahead (the last `step` candidates left out)."""
    steps = range(1, min(_NEARBY, len(starts) - 1) + 1)
    return [following[:-step] == starts[step:] for step in steps]


def _followed_nearby(
    nearby: list[npt.NDArray[np.bool_]], following: Int64s, size: int
) -> npt.NDArray[np.bool_]:
    """The candidates followed by one of the next `_NEARBY` candidates, or by the block's end."""
    followed: npt.NDArray[np.bool_] = following == size
    for step, links in enumerate(nearby, 1):
        followed[:-step] |= links
    return followed


def _nearby_successors(
    nearby: list[npt.NDArray[np.bool_]],
) -> tuple[Int64s, npt.NDArray[np.bool_]]:
    """Each candidate's successor (the candidate starting where it is followed) among the next
    `_NEARBY`, and whether it has one there: as `_successors` for every candidate that has."""
    count = len(nearby[0]) + 1 if nearby else 1
    successor = np.full(count, count - 1, np.int64)
    linked = np.zeros(count, np.bool_)
    for step, links in enumerate(nearby, 1):
        found = np.flatnonzero(links)
        successor[found] = found + step  # a candidate starts at one position: one step links
        linked[found] = True
    return successor, linked


def _successors(
    starts: Int64s, following: Int64s, fits: npt.NDArray[np.bool_]
) -> tuple[Int64s, npt.NDArray[np.bool_]]:
    """Each candidate's successor, by a search over them all, and whether it has one."""
    successor = np.minimum(np.searchsorted(starts, following), len(starts) - 1)
    return successor, fits & (starts[successor] == following)


def _chained(
    starts: Int64s,
    following: Int64s,
    flagged: npt.NDArray[np.bool_],
    fits: npt.NDArray[np.bool_],
    size: int,
) -> bool:
    """Whether the candidates chain from the block's first entry (the first candidate) to its
    end mark, each followed by the next: then they are the walk's entries."""
    return bool(
        len(starts)
        and starts[0] == 2
        and fits.all()
        and np.array_equal(following[:-1], starts[1:])
        and following[-1] == size
        and flagged[-1]
    )


def _chain(
    successor: Int64s, linked: npt.NDArray[np.bool_], ends_block: npt.NDArray[np.bool_]
) -> Int64s | None:
    """The candidates reachable from the first by following each one's successor (where it is
    `linked` to one), when the last of them ends the block."""
    reached = _pruned(successor, linked, ends_block)
    if reached is None:
        reached = _reached(successor, linked)
    chain = np.flatnonzero(reached)
    if not len(chain) or not ends_block[chain[-1]] or linked[chain[-1]]:
        return None
    return chain


_PRUNING_ROUNDS = 8


def _pruned(
    successor: Int64s, linked: npt.NDArray[np.bool_], ends_block: npt.NDArray[np.bool_]
) -> npt.NDArray[np.bool_] | None:
    """The chain as what is left once candidates that lead nowhere (no successor left, not the
    block's last) or that nothing leads to (but the first) are dropped, round after round: every
    candidate left then has a predecessor left back to the first, so it is on the first's chain.
    A round per false candidate in a row (values holding entry-like bytes run to one or two);
    None when that takes more rounds than `_PRUNING_ROUNDS`."""
    count = len(successor)
    alive = np.ones(count, np.bool_)
    for _ in range(_PRUNING_ROUNDS):
        leads = linked & alive[successor]
        led_to = np.zeros(count, np.bool_)
        led_to[successor[alive & leads]] = True
        led_to[0] = True
        kept = alive & (leads | ends_block) & led_to
        if np.array_equal(kept, alive):
            return alive
        alive = kept
    return None


def _reached(successor: Int64s, linked: npt.NDArray[np.bool_]) -> npt.NDArray[np.bool_]:
    """The candidates reachable from the first (pointer doubling: log2(candidates) rounds)."""
    count = len(successor)
    jump = np.append(np.where(linked, successor, count), count)  # `count`: nowhere
    reached = np.zeros(count + 1, np.bool_)
    reached[0] = True
    for _ in range(max(1, int(count).bit_length())):
        reached[jump[reached]] = True
        jump = jump[jump]
    return reached[:count]


def _runs(
    block: Buffer, run_ends: Int64s, last_entries: Int64s, num_states: int | None
) -> list[tuple[int, int]] | None:
    """(state id, entries) per run: the u16 before each run, the end mark after the last."""
    view = memoryview(block)
    ids = [int.from_bytes(view[0:2], "big")]
    ids += [int.from_bytes(view[end : end + 2], "big") for end in run_ends.tolist()]
    if ids[-1] != END_OF_KEY_GROUP_MARK:
        return None
    ids.pop()
    if len(set(ids)) != len(ids) or END_OF_KEY_GROUP_MARK in ids:
        return None
    if num_states is not None and max(ids) >= num_states:
        return None
    counts = np.diff(last_entries, prepend=-1).tolist()
    return list(zip(ids, counts, strict=True))


RunSpans = tuple[tuple[int, int, int], ...]
"""(state id, start, end) of each state's run in an uncompressed block: bytes [start, end) are
the run's entries, flags included, without its u16 state id (a run copied whole into another
block keeps its entries and their last-of-run flag)."""


def run_spans(block: Buffer, key_group: int, prefix_bytes: int, num_states: int | None) -> RunSpans:
    """The runs of an uncompressed block."""
    key_starts, _, value_ends, runs = locate(block, key_group, prefix_bytes, num_states)
    return spans_of(key_starts, value_ends, runs)


def spans_of(
    key_starts: Int64s, value_ends: Int64s, runs: list[tuple[int, int]], base: int = 0
) -> RunSpans:
    """The runs of a block from its entries' positions (`locate`'s, located at `base`)."""
    spans = []
    first = 0
    for state_id, count in runs:
        last = first + count - 1
        spans.append((state_id, int(key_starts[first]) - 4 - base, int(value_ends[last]) - base))
        first = last + 1
    return tuple(spans)


def spans_tile(block: Buffer, spans: RunSpans) -> bool:
    """Whether `spans` are the runs of `block`: each after the u16 of its state id, one after
    another, the last followed by the end mark. Spans found in another read of the same bytes
    pass; spans of other bytes all but never do."""
    view = memoryview(block)
    at = 0
    for state_id, start, end in spans:
        if start != at + 2 or end <= start or int.from_bytes(view[at:start], "big") != state_id:
            return False
        at = end
    return bool(spans) and view[at:].tobytes() == END_OF_KEY_GROUP_MARK.to_bytes(2, "big")


BlockRuns = tuple[int, RunSpans]
"""A block's length and its runs: what a task that read the block sends its writer."""

_SPANS_HEAD = struct.Struct(">qH")  # the block's length, its runs
_SPAN = struct.Struct(">Hqq")


def pack_spans(block_length: int, spans: RunSpans) -> bytes:
    """A block's length and runs as bytes (`unpack_spans` reads them)."""
    return _SPANS_HEAD.pack(block_length, len(spans)) + b"".join(
        _SPAN.pack(*span) for span in spans
    )


def unpack_spans(data: bytes) -> BlockRuns:
    length, count = _SPANS_HEAD.unpack_from(data)
    spans = (_SPAN.unpack_from(data, _SPANS_HEAD.size + n * _SPAN.size) for n in range(count))
    return length, tuple(spans)
