"""What is in a savepoint, as plain data: the model behind `statectl inspect`.

Operators, their states (from the serializer-proxy headers of the state files, §3.1, §4.2) with
each state's type as the value codecs read it, per-subtask key-group ranges and bytes, and with
`deep` the entries per keyed state and how many entries of each state stay raw.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any

from statectl.errors import StatectlError
from statectl.formats import java_types, keyed_blocks, operator_state
from statectl.formats.handles import (
    DistributionMode,
    IncrementalKeyedHandle,
    KeyedHandle,
    KeyGroupsHandle,
    stream_size,
)
from statectl.formats.metadata import OperatorState, SubtaskState, snapshot_kind
from statectl.formats.state_headers import KeyedStateHeader
from statectl.formats.state_values import StateCodec, flink_major, keyed_codec, operator_codec
from statectl.progress import ProgressCallback, Steps
from statectl.savepoint import entries as state_entries
from statectl.savepoint import native
from statectl.savepoint.keyed import (
    block_spans,
    entries_header,
    is_heap_snapshot,
    iter_blocks,
    keyed_handle_bytes,
    keyed_header,
    operator_handle_bytes,
)
from statectl.savepoint.model import Savepoint, StateStream


@dataclass(frozen=True)
class StateSummary:
    name: str
    scope: str  # "keyed" | "operator"
    kind: str  # VALUE, LIST, MAP, REDUCING, AGGREGATING, TIMERS, BROADCAST, …
    mode: str | None  # operator state: SPLIT_DISTRIBUTE | UNION | BROADCAST
    entries: int | None = None  # keyed state with --deep: entries in key-group blocks
    # operator state: list elements (a union's over all subtasks); a broadcast state's map
    # entries, counted once (docs/counts.md)
    elements: int | None = None
    type: str | None = None  # the value's type on one line, e.g. `MAP<STRING, BIGINT>, TTL`
    type_tree: dict[str, Any] | None = None  # key, namespace, user key and value types
    raw: int | None = None  # --deep: entries (or elements) with a part that stays undecoded
    raw_reason: str | None = None  # --deep: why the first of them does
    copies: int | None = None  # broadcast state: subtasks holding a copy of the map


@dataclass(frozen=True)
class NativeFileSummary:
    name: str  # local name inside the RocksDB instance, e.g. 000019.sst
    kind: str  # SST, MANIFEST, CURRENT, OPTIONS, OTHER
    shared: bool  # shared (incremental: reused across checkpoints) or private
    bytes: int


@dataclass(frozen=True)
class NativeSummary:
    """A RocksDB instance behind a native keyed handle (§5.1)."""

    checkpoint_id: int
    backend_id: str
    meta_bytes: int
    files: tuple[NativeFileSummary, ...]
    column_families: tuple[str, ...]  # one per state, named by it


@dataclass(frozen=True)
class SubtaskSummary:
    index: int
    key_groups: tuple[int, int] | None
    keyed_bytes: int
    operator_bytes: int
    keyed_format: str | None  # "canonical" | "heap" (the hashmap backend's own) | "native" | None
    finished: bool = False
    native: NativeSummary | None = None


@dataclass(frozen=True)
class OperatorSummary:
    id: str
    uid: str | None
    name: str | None
    parallelism: int
    max_parallelism: int
    finished: bool
    coordinator_bytes: int
    states: tuple[StateSummary, ...]
    subtasks: tuple[SubtaskSummary, ...]
    key_serializer: str | None = None

    @property
    def total_bytes(self) -> int:
        return sum(s.keyed_bytes + s.operator_bytes for s in self.subtasks) + self.coordinator_bytes


@dataclass(frozen=True)
class SavepointSummary:
    location: str
    metadata_version: int
    checkpoint_id: int
    snapshot: str  # "savepoint (CANONICAL)", "savepoint (NATIVE)", "checkpoint" or "unknown"
    operators: tuple[OperatorSummary, ...]
    deep: bool = False
    notes: tuple[str, ...] = field(default=())


def summarize(
    sp: Savepoint,
    operator: str | None = None,
    deep: bool = False,
    progress: ProgressCallback | None = None,
) -> SavepointSummary:
    """`progress`: with `deep`, the keyed files whose entries are counted, then the files
    whose entries are decoded, operator by operator."""
    ops = (sp.find_operator(operator),) if operator else sp.operators
    return SavepointSummary(
        location=sp.directory.url,
        metadata_version=sp.metadata.version,
        checkpoint_id=sp.metadata.checkpoint_id,
        snapshot=_snapshot(sp),
        operators=tuple(summarize_operator(sp, op, deep, progress) for op in ops),
        deep=deep,
    )


def summarize_operator(
    sp: Savepoint, op: OperatorState, deep: bool, progress: ProgressCallback | None = None
) -> OperatorSummary:
    subtasks = op.subtasks or ()
    steps = None
    if deep:
        handles = [s.managed_keyed_state for s in subtasks if s.managed_keyed_state is not None]
        phase = f"counting entries (operator {state_entries.operator_label(op)})"
        steps = Steps(progress, phase, len(handles), sum(map(keyed_handle_bytes, handles)))
    keyed = _keyed_states(sp, subtasks, steps, op.max_parallelism)
    states = keyed.states + _operator_states(sp, op, subtasks)
    if deep:
        states = _with_raw_counts(sp, op, states, progress)
    return OperatorSummary(
        id=op.operator_id_hex,
        uid=op.uid,
        name=op.name,
        parallelism=op.parallelism,
        max_parallelism=op.max_parallelism,
        finished=op.subtasks is None,
        coordinator_bytes=stream_size(op.coordinator_state),
        states=states,
        subtasks=tuple(_subtask_summary(sp, s) for s in subtasks),
        key_serializer=keyed.key_serializer,
    )


def _subtask_summary(sp: Savepoint, subtask: SubtaskState) -> SubtaskSummary:
    keyed = subtask.managed_keyed_state
    return SubtaskSummary(
        index=subtask.index,
        key_groups=getattr(keyed, "key_groups", None),
        keyed_bytes=keyed_handle_bytes(keyed) + keyed_handle_bytes(subtask.raw_keyed_state),
        operator_bytes=operator_handle_bytes(subtask.managed_operator_state)
        + operator_handle_bytes(subtask.raw_operator_state),
        keyed_format=_keyed_format(sp, keyed),
        finished=subtask.finished,
        native=_native_summary(sp, keyed) if isinstance(keyed, IncrementalKeyedHandle) else None,
    )


def _native_summary(sp: Savepoint, handle: IncrementalKeyedHandle) -> NativeSummary:
    size = stream_size
    files = tuple(
        NativeFileSummary(f.local_path, native.file_kind(f.local_path), shared, size(f.handle))
        for shared, group in ((True, handle.shared), (False, handle.private))
        for f in sorted(group, key=lambda f: f.local_path)
    )
    header = keyed_header(sp, handle)
    families = tuple(header.state_names()) if header else ()
    return NativeSummary(
        handle.checkpoint_id, handle.backend_id, stream_size(handle.meta), files, families
    )


def _keyed_format(sp: Savepoint, handle: KeyedHandle | None) -> str | None:
    if isinstance(handle, KeyGroupsHandle):
        try:  # a file that does not read is `verify`'s finding, not inspect's
            heap = is_heap_snapshot(sp, handle)
        except StatectlError:
            heap = False
        return "heap" if heap else "canonical"
    if isinstance(handle, IncrementalKeyedHandle):
        return "native"
    return None if handle is None else "changelog"


# --- keyed states ------------------------------------------------------------------------


@dataclass(frozen=True)
class _KeyedStates:
    states: tuple[StateSummary, ...] = ()
    key_serializer: str | None = None


def _keyed_states(
    sp: Savepoint, subtasks: tuple[SubtaskState, ...], steps: Steps | None, max_parallelism: int
) -> _KeyedStates:
    """The keyed states' kinds and types; with `steps` (deep), their entries counted."""
    deep = steps is not None
    kinds: dict[str, str] = {}
    codecs: dict[str, StateCodec] = {}
    entries: Counter[str] = Counter()
    key_serializer = None
    flink = flink_major(sp.metadata.version)
    for subtask in subtasks:
        handle = subtask.managed_keyed_state
        header = keyed_header(sp, handle) if handle is not None else None
        if header is None:
            if steps is not None and handle is not None:
                steps.step(keyed_handle_bytes(handle))
            continue
        key_serializer = key_serializer or header.key_serializer
        for state in header.states:
            kinds.setdefault(state.name, state.kind)
            if state.name not in codecs:
                codecs[state.name] = keyed_codec(state, header.key_serializer_snapshot, flink)
        if deep and isinstance(handle, KeyGroupsHandle) and handle.delegate is not None:
            stream = sp.stream(handle.delegate)
            header = entries_header(stream, handle)  # entries are counted by every state
            if is_heap_snapshot(sp, handle):
                for _, counts in state_entries.heap_entry_counts(
                    stream, handle, header, max_parallelism, flink
                ):
                    entries.update(counts)
            else:
                entries.update(_count_canonical_entries(stream, handle, header))
        elif deep and isinstance(handle, IncrementalKeyedHandle):
            instance = native.native_instance(sp, handle, f"subtask {subtask.index}")
            prefix_bytes = java_types.key_group_prefix_bytes(max_parallelism)
            entries.update(native.count_entries(instance, prefix_bytes))
        if steps is not None:
            steps.step(keyed_handle_bytes(handle))
    states = tuple(
        _typed(
            StateSummary(name, "keyed", kind, None, entries.get(name, 0) if deep else None),
            codecs.get(name),
        )
        for name, kind in kinds.items()
    )
    return _KeyedStates(states, key_serializer)


def _typed(state: StateSummary, codec: StateCodec | None) -> StateSummary:
    if codec is None:
        return state
    return replace(state, type=codec.describe(), type_tree=codec.tree())


def _with_raw_counts(
    sp: Savepoint,
    op: OperatorState,
    states: tuple[StateSummary, ...],
    progress: ProgressCallback | None = None,
) -> tuple[StateSummary, ...]:
    """Each state's entries that keep a part undecoded, read as `export` reads them."""
    from statectl.operations.export import Tally, plan_export, task_bytes, task_rows

    tally = Tally()
    tasks = plan_export(sp, op.operator_id_hex)
    sizes = [task_bytes(task) for task in tasks]
    phase = f"decoding entries (operator {state_entries.operator_label(op)})"
    steps = Steps(progress, phase, len(tasks), sum(sizes))
    for task, size in zip(tasks, sizes, strict=True):
        for row in task_rows(task):
            tally.count(row)
        steps.step(size)
    label = state_entries.operator_label(op)
    counted = []
    for state in states:
        raw = tally.raw.get(f"{label}/{state.name}")
        reason = raw.first_reason if raw else None
        counted.append(replace(state, raw=raw.rows if raw else 0, raw_reason=reason))
    return tuple(counted)


def _count_canonical_entries(
    stream: StateStream, handle: KeyGroupsHandle, header: KeyedStateHeader
) -> Counter[str]:
    counts: Counter[str] = Counter()
    names = [s.name for s in header.states]
    for span, block in iter_blocks(stream, block_spans(stream, handle)):
        try:
            per_state = keyed_blocks.count_entries(block, header.compressed, len(names))
        except StatectlError as exc:
            raise exc.with_source(f"{stream.description} (key group {span.key_group})") from None
        for state_id, count in per_state.items():
            counts[names[state_id]] += count
    return counts


# --- operator states ---------------------------------------------------------------------


def _operator_states(
    sp: Savepoint, op: OperatorState, subtasks: tuple[SubtaskState, ...]
) -> tuple[StateSummary, ...]:
    modes: dict[str, DistributionMode] = {}
    elements: Counter[str] = Counter()
    copies: Counter[str] = Counter()
    for subtask in subtasks:
        for handle in (subtask.managed_operator_state, subtask.raw_operator_state):
            for state in handle.states if handle else ():
                modes.setdefault(state.name, state.mode)
                elements[state.name] += len(state.offsets)
                copies[state.name] += 1
    codecs = _operator_codecs(sp, op) if modes else {}
    broadcast = [n for n, m in modes.items() if m == DistributionMode.BROADCAST]
    entries = _broadcast_entries(sp, op, broadcast) if broadcast else {}
    return tuple(
        _typed(
            StateSummary(
                name,
                "operator",
                "BROADCAST" if mode == DistributionMode.BROADCAST else "LIST",
                mode.name,
                elements=entries.get(name)
                if mode == DistributionMode.BROADCAST
                else elements[name],
                copies=copies[name] if mode == DistributionMode.BROADCAST else None,
            ),
            codecs.get(name),
        )
        for name, mode in modes.items()
    )


def _broadcast_entries(sp: Savepoint, op: OperatorState, names: list[str]) -> dict[str, int]:
    """Each broadcast state's map entries, from the first subtask's copy (every subtask holds
    the same map). A file that does not read leaves the count unknown: verify reports it."""
    counts: dict[str, int] = {}
    for file in state_entries.operator_files(sp, op):
        if not any(s.name in names and s.name not in counts for s in file.handle.states):
            continue
        try:
            for element in file.elements():
                if element.state in names and element.state not in counts:
                    counts[element.state] = operator_state.broadcast_entry_count(element.value)
        except StatectlError:
            continue
        if len(counts) == len(names):
            break
    return counts


def _operator_codecs(sp: Savepoint, op: OperatorState) -> dict[str, StateCodec]:
    """Operator states' codecs from the header of the first file that holds each (a header
    that does not parse leaves the types unknown: verify reports it)."""
    codecs: dict[str, StateCodec] = {}
    for file in state_entries.operator_files(sp, op):
        wanted = [s for s in file.handle.states if s.name not in codecs]
        if not wanted:
            continue
        try:
            metas = file.state_metas()
        except StatectlError:
            continue
        for state in wanted:
            if state.name in metas:
                kind = state_entries.OPERATOR_KINDS[state.mode]
                codecs[state.name] = operator_codec(metas[state.name], kind, file.flink_major)
    return codecs


def _snapshot(sp: Savepoint) -> str:
    kind = snapshot_kind(sp.metadata.properties)
    if kind is None:
        return "unknown"
    return f"savepoint ({kind.format})" if kind.savepoint else "checkpoint"
