"""`statectl plan`: what each candidate parallelism would give every stateful operator.

Keyed state is measured per key group: exactly from the key-group offsets of canonical files
(a block ends where the next begins), estimated from the SST files' key ranges and sizes for
RocksDB native instances, or read row by row with `deep`. Loads per new subtask follow Flink's
key-group assignment (`rescale.load`); operator state follows the rescale planner's dealing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from statectl.errors import FormatError, StatectlError
from statectl.formats import java_types, keyed_blocks, operator_state
from statectl.formats.handles import DistributionMode, IncrementalKeyedHandle, KeyGroupsHandle
from statectl.formats.metadata import OperatorState, SubtaskState
from statectl.formats.state_values import flink_major
from statectl.operations.rescale.load import (
    CanonicalFile,
    SubtaskLoads,
    block_loads,
    default_candidates,
    subtask_loads,
)
from statectl.operations.rescale.plan import (
    ElementSpan,
    OldOperatorState,
    RescalePlan,
    subtasks_by_index,
)
from statectl.progress import ProgressCallback, Steps
from statectl.savepoint import native
from statectl.savepoint.entries import heap_entry_counts
from statectl.savepoint.keyed import (
    block_spans,
    entries_header,
    is_heap_snapshot,
    iter_blocks,
    keyed_handle_bytes,
)
from statectl.savepoint.model import Savepoint, describe_operator, has_state

_HOTTEST = 5  # hot key groups named in a recommendation
_NEAR = 3  # parallelisms recommended near the current one


@dataclass(frozen=True, slots=True)
class OperatorStateLoad:
    """One operator-state list per new subtask, as the subtask restores it (a UNION list is
    restored whole by every subtask). `elements` counts what `inspect` counts (docs/counts.md):
    list elements, or a broadcast state's map entries (every subtask restores the whole map)."""

    name: str
    mode: str
    elements: tuple[int, ...]
    bytes: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Candidate:
    keyed: SubtaskLoads
    operator_state: tuple[OperatorStateLoad, ...]

    @property
    def parallelism(self) -> int:
        return self.keyed.parallelism


@dataclass(frozen=True, slots=True)
class HotKeyGroup:
    key_group: int
    bytes: int
    share: float  # of the operator's keyed bytes


@dataclass(frozen=True, slots=True)
class Recommendation:
    # The current parallelism, unless a candidate near it is clearly better (`_recommend`).
    parallelism: int | None
    near_current: tuple[int, ...]  # the lowest-skew candidates near the current parallelism
    even_divisors: tuple[int, ...]  # candidates that divide the max parallelism
    hottest: tuple[HotKeyGroup, ...]
    reason: str | None = None  # why `parallelism`, on one line


@dataclass(frozen=True, slots=True)
class OperatorOutlook:
    """One operator: its keyed bytes per key group and every candidate parallelism."""

    id: str
    uid: str | None
    name: str | None
    parallelism: int
    max_parallelism: int
    keyed_format: str | None  # canonical, native, or None without keyed state
    estimated: bool  # native bytes spread over SST key ranges rather than read
    key_group_bytes: tuple[int, ...]
    key_group_entries: tuple[int, ...] | None  # with deep
    candidates: tuple[Candidate, ...]
    recommendation: Recommendation

    def candidate(self, parallelism: int) -> Candidate | None:
        return next((c for c in self.candidates if c.parallelism == parallelism), None)


@dataclass(frozen=True, slots=True)
class ParallelismPlan:
    source: str
    deep: bool
    operators: tuple[OperatorOutlook, ...]


def plan_parallelism(
    sp: Savepoint,
    operator: str | None = None,
    parallelisms: Sequence[int] | None = None,
    deep: bool = False,
    progress: ProgressCallback | None = None,
) -> ParallelismPlan:
    """Every stateful operator (or the one named) under each of `parallelisms` (default:
    `load.default_candidates`). `progress`: the subtasks' keyed state read, operator by
    operator."""
    ops = [sp.find_operator(operator)] if operator else [op for op in sp.operators if has_state(op)]
    outlooks = tuple(_outlook(sp, op, parallelisms, deep, progress) for op in ops)
    return ParallelismPlan(sp.directory.url, deep, outlooks)


def _outlook(
    sp: Savepoint,
    op: OperatorState,
    parallelisms: Sequence[int] | None,
    deep: bool,
    progress: ProgressCallback | None = None,
) -> OperatorOutlook:
    subtasks = subtasks_by_index(op, describe_operator(op))
    doing = "walking key groups" if deep else "measuring key groups"
    handles = [s.managed_keyed_state for s in subtasks if s and s.managed_keyed_state is not None]
    phase = f"{doing} (operator {op.uid or op.operator_id_hex})"
    steps = Steps(progress, phase, len(handles), sum(map(keyed_handle_bytes, handles)))
    keyed = _KeyGroupSizes.read(sp, op, subtasks, deep, steps)
    wanted = parallelisms or default_candidates(op.max_parallelism, op.parallelism)
    old_operator_state = OldOperatorState.read(sp, subtasks)
    map_entries: dict[tuple[str, int], int] = {}  # a broadcast map's entries, by its span
    candidates = tuple(
        Candidate(
            subtask_loads(keyed.bytes, p),
            _operator_state_loads(old_operator_state, p, map_entries),
        )
        for p in wanted
        if p <= op.max_parallelism
    )
    return OperatorOutlook(
        op.operator_id_hex,
        op.uid,
        op.name,
        op.parallelism,
        op.max_parallelism,
        keyed.format,
        keyed.format == "native" and not deep,
        keyed.bytes,
        keyed.entries,
        candidates,
        _recommend(op, keyed.bytes, candidates),
    )


def predicted_keyed_loads(plan: RescalePlan) -> dict[str, SubtaskLoads]:
    """What `plan` predicts per new subtask for each operator a rescale moves, by operator id.

    Only canonical keyed state at an unchanged max parallelism: its key-group bytes come from
    `_metadata` alone (RocksDB instances would have to be fetched, re-hashed keys hashed).
    """
    loads = {}
    sp = plan.source
    for operator_plan in plan.operators:
        op = operator_plan.operator
        if not operator_plan.rescaled or operator_plan.rekey is not None:
            continue
        subtasks = subtasks_by_index(op, describe_operator(op))
        handles = [s.managed_keyed_state for s in subtasks if s and s.managed_keyed_state]
        canonical = [h for h in handles if isinstance(h, KeyGroupsHandle) and h.delegate]
        if not canonical or len(canonical) < len(handles):  # native instances, or none
            continue
        if any(is_heap_snapshot(sp, h) for h in canonical):  # known once written as blocks
            continue
        files = (
            CanonicalFile(h.start_key_group, h.offsets, stream.size, stream.description)
            for h in canonical
            if h.delegate is not None and (stream := sp.stream(h.delegate))
        )
        loads[op.operator_id_hex] = block_loads(
            files, operator_plan.max_parallelism, operator_plan.new_parallelism
        )
    return loads


# --- keyed state per key group -----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _KeyGroupSizes:
    format: str | None
    bytes: tuple[int, ...]
    entries: tuple[int, ...] | None

    @staticmethod
    def read(
        sp: Savepoint,
        op: OperatorState,
        subtasks: Sequence[SubtaskState | None],
        deep: bool,
        steps: Steps | None = None,
    ) -> _KeyGroupSizes:
        sizes = [0.0] * op.max_parallelism
        entries = [0] * op.max_parallelism if deep else None
        formats = set()
        for subtask in subtasks:
            handle = subtask.managed_keyed_state if subtask else None
            if isinstance(handle, KeyGroupsHandle) and handle.delegate is not None:
                formats.add("canonical")
                _add_canonical(sp, handle, sizes, entries)
            elif isinstance(handle, IncrementalKeyedHandle):
                formats.add("native")
                _add_native(sp, op, handle, sizes, entries)
            if steps is not None and handle is not None:
                steps.step(keyed_handle_bytes(handle))
        keyed_format = "native" if "native" in formats else next(iter(formats), None)
        rounded = tuple(round(size) for size in sizes)
        counted = tuple(entries) if entries is not None else None
        return _KeyGroupSizes(keyed_format, rounded, counted)


def _add_canonical(
    sp: Savepoint, handle: KeyGroupsHandle, sizes: list[float], entries: list[int] | None
) -> None:
    """A block's bytes are the difference of its key group's offset and the next one's."""
    if handle.delegate is None:
        return
    stream = sp.stream(handle.delegate)
    spans = block_spans(stream, handle)
    for span in spans:
        _check_key_group(span.key_group, len(sizes), stream.description)
        sizes[span.key_group] += span.length
    if entries is None:
        return
    header = entries_header(stream, handle)
    if is_heap_snapshot(sp, handle):
        flink = flink_major(sp.metadata.version)
        for key_group, per_state in heap_entry_counts(stream, handle, header, len(sizes), flink):
            entries[key_group] += sum(per_state.values())
        return
    for span, block in iter_blocks(stream, spans):
        try:
            counts = keyed_blocks.count_entries(block, header.compressed, len(header.states))
        except StatectlError as exc:
            raise exc.with_source(f"{stream.description} (key group {span.key_group})") from None
        entries[span.key_group] += sum(counts.values())


def _add_native(
    sp: Savepoint,
    op: OperatorState,
    handle: IncrementalKeyedHandle,
    sizes: list[float],
    entries: list[int] | None,
) -> None:
    instance = native.native_instance(sp, handle, describe_operator(op))
    prefix_bytes = java_types.key_group_prefix_bytes(op.max_parallelism)
    bytes_by_group, entries_by_group = native.key_group_sizes(
        instance, prefix_bytes, entries is not None
    )
    for key_group, size in bytes_by_group.items():
        _check_key_group(key_group, len(sizes), instance.description)
        sizes[key_group] += size
    if entries is not None and entries_by_group is not None:
        for key_group, count in entries_by_group.items():
            entries[key_group] += count


def _check_key_group(key_group: int, max_parallelism: int, source: str) -> None:
    if not 0 <= key_group < max_parallelism:
        raise FormatError(
            f"key group {key_group} is outside the max parallelism {max_parallelism}", source
        )


# --- operator state per new subtask ------------------------------------------------------


def _operator_state_loads(
    old: OldOperatorState, parallelism: int, map_entries: dict[tuple[str, int], int]
) -> tuple[OperatorStateLoad, ...]:
    if not old.files:
        return ()
    targets = old.targets(parallelism)
    loads = []
    for index, state in enumerate(targets[0].states):
        shares = [target.states[index] for target in targets]
        if state.mode == DistributionMode.BROADCAST:  # a map: its entries, not 1
            elements = [sum(_map_entries(s, map_entries) for s in share.spans) for share in shares]
        else:
            elements = [len(share.spans) for share in shares]
        sizes = [sum(span.end - span.start for span in share.spans) for share in shares]
        if state.mode == DistributionMode.UNION:  # Flink restores the whole union everywhere
            elements, sizes = [sum(elements)] * parallelism, [sum(sizes)] * parallelism
        loads.append(OperatorStateLoad(state.name, state.mode.name, tuple(elements), tuple(sizes)))
    return tuple(loads)


def _map_entries(span: ElementSpan, known: dict[tuple[str, int], int]) -> int:
    where = (span.source.description, span.start)
    if where not in known:
        try:
            raw = span.source.read(span.start, span.end)
            data = operator_state.element_bytes(raw, span.compressed)
            known[where] = operator_state.broadcast_entry_count(data)
        except StatectlError as exc:
            raise exc.with_source(span.source.description) from None
    return known[where]


# --- the recommendation --------------------------------------------------------------------


# A change of parallelism rewrites and moves every key group: it is recommended only when it
# cuts the keyed max/mean by this share at least, without a larger largest subtask.
CLEAR_GAIN = 0.10


def _recommend(
    op: OperatorState, key_group_bytes: Sequence[int], candidates: Sequence[Candidate]
) -> Recommendation:
    """Keeping the current parallelism costs nothing; another is recommended only when it is
    clearly better: a max/mean lower by `CLEAR_GAIN` and a largest subtask no larger (fewer
    subtasks even out by holding more each: whether the job can run on fewer is not in the
    savepoint). Of those, the least skewed, then the nearest."""
    divisors = tuple(c.parallelism for c in candidates if op.max_parallelism % c.parallelism == 0)
    if not any(key_group_bytes):
        return Recommendation(None, (), divisors, ())
    # A single subtask is never skewed: only p > 1 is a choice worth naming.
    low, high = max(2, -(-op.parallelism // 2)), max(4, 2 * op.parallelism)
    near = sorted(
        (c for c in candidates if low <= c.parallelism <= high),
        key=lambda c: (round(c.keyed.max_over_mean, 3), abs(c.parallelism - op.parallelism)),
    )
    current = subtask_loads(key_group_bytes, op.parallelism)
    better = [
        c
        for c in near
        if c.parallelism != op.parallelism
        and c.keyed.max_over_mean <= current.max_over_mean * (1 - CLEAR_GAIN)
        and c.keyed.largest <= current.largest
    ]
    if better:
        best = better[0].keyed
        gain = 1 - best.max_over_mean / current.max_over_mean
        chosen = best.parallelism
        reason = (
            f"{best.parallelism}: keyed max/mean {best.max_over_mean:.2f} against "
            f"{current.max_over_mean:.2f} at the current {op.parallelism} ({gain:.0%} less "
            "skew, no larger largest subtask): worth moving the state"
        )
    else:
        chosen, reason = op.parallelism, _keep_reason(op.parallelism, current, near, low, high)
    return Recommendation(
        chosen,
        tuple(c.parallelism for c in near[:_NEAR]),
        divisors,
        _hottest(key_group_bytes),
        reason,
    )


def _keep_reason(
    parallelism: int, current: SubtaskLoads, near: Sequence[Candidate], low: int, high: int
) -> str:
    reason = (
        f"keep {parallelism}: keyed max/mean {current.max_over_mean:.2f}; no parallelism in "
        f"{low}–{high} cuts it by {CLEAR_GAIN:.0%} without a larger largest subtask"
    )
    rival = next((c.keyed for c in near if c.parallelism != parallelism), None)
    if rival is not None and rival.max_over_mean < current.max_over_mean:
        reason += f" (least skewed: {rival.parallelism} at {rival.max_over_mean:.2f}"
        reason += ", with a larger largest subtask)" if rival.largest > current.largest else ")"
    return reason + ", so moving the state would not pay"


def _hottest(key_group_bytes: Sequence[int]) -> tuple[HotKeyGroup, ...]:
    total = sum(key_group_bytes)
    ranked = sorted(range(len(key_group_bytes)), key=lambda g: (-key_group_bytes[g], g))
    return tuple(
        HotKeyGroup(g, key_group_bytes[g], key_group_bytes[g] / total)
        for g in ranked[:_HOTTEST]
        if key_group_bytes[g] > 0
    )
