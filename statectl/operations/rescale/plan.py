"""Planning a rescale in pure Python: which bytes of which old file each new file is made of.

The plan reads only `_metadata` and the small serializer-proxy headers; executing it
(`statectl.operations.rescale.execute`) copies key-group blocks and list elements as bytes.
Keyed state follows spec §4.7 (one file per new subtask, blocks copied in key-group order);
operator state follows §3.6 via `operator_state_plan`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from statectl.errors import FormatError, StatectlError, UnsupportedError
from statectl.formats import java_types, state_headers
from statectl.formats.handles import (
    HandleCode,
    IncrementalKeyedHandle,
    KeyGroupsHandle,
    OperatorStateHandle,
)
from statectl.formats.key_groups import check_max_parallelism, check_parallelism, key_group_range
from statectl.formats.keyed_blocks import BlockSpan
from statectl.formats.metadata import OperatorState, SubtaskState
from statectl.formats.operator_state import Span, StateElements
from statectl.formats.state_headers import KeyedStateHeader
from statectl.formats.state_values import flink_major
from statectl.operations.rescale.operator_state_plan import (
    ElementSource,
    StateAssignment,
    assign_operator_state,
)
from statectl.operations.rescale.rekey import (
    CanonicalSource,
    HeapSource,
    KeyRegrouper,
    NativeSource,
    RekeyOperator,
    RekeySource,
)
from statectl.savepoint import native
from statectl.savepoint.entries import operator_file_layout
from statectl.savepoint.keyed import (
    StateIdMap,
    batches,
    block_spans,
    header_end,
    is_heap_snapshot,
    merge_keyed_headers,
    read_header,
)
from statectl.savepoint.model import Savepoint, StateStream, describe_operator, has_state
from statectl.savepoint.native_writer import NativeOutput


@dataclass(frozen=True, slots=True)
class BlockRun:
    """Consecutive key-group blocks of one old file, copied as one byte range.

    `offsets` are (key group, offset in the old stream) of the non-empty key groups in the run.
    `state_id_map` is set when the old file's header numbers states differently from the new one.
    """

    source: StateStream
    start: int
    end: int
    offsets: tuple[tuple[int, int], ...]
    state_id_map: StateIdMap | None = None

    @property
    def size(self) -> int:
        return self.end - self.start


@dataclass(frozen=True, slots=True)
class NativeRun:
    """Key groups `first..last` of one RocksDB instance, read and written as canonical blocks.

    `states` maps the instance's column families to state ids of the new header, by id.
    """

    instance: native.NativeInstance
    first: int
    last: int
    states: tuple[tuple[str, int], ...]
    prefix_bytes: int


@dataclass(frozen=True, slots=True)
class HeapRun:
    """Key groups of one old file in the hashmap backend's own snapshot format (a retained
    checkpoint or NATIVE savepoint of that backend), read through `heap_snapshot` into
    canonical entries and written as canonical blocks (or RocksDB rows).

    `spans` are the key groups' byte ranges in the old file, `header` the old file's header
    (its codecs read the entries); `state_id_map` as for `BlockRun`.
    """

    source: StateStream
    spans: tuple[BlockSpan, ...]
    header: bytes
    max_parallelism: int
    flink_major: int
    state_id_map: StateIdMap | None = None

    @property
    def size(self) -> int:
        return sum(span.length for span in self.spans)


@dataclass(frozen=True, slots=True)
class KeyedTarget:
    key_groups: tuple[int, int]
    header: bytes
    compressed: bool
    runs: tuple[BlockRun, ...]
    native: tuple[NativeRun, ...] = ()  # RocksDB instances converted to canonical blocks
    output: NativeOutput | None = None  # set: written as a RocksDB instance, not blocks
    heap: tuple[HeapRun, ...] = ()  # heap-format key groups converted to canonical blocks

    @property
    def size(self) -> int:
        """Bytes known before writing (native and heap runs are only known once converted)."""
        return len(self.header) + sum(run.size for run in self.runs)


@dataclass(frozen=True, slots=True)
class ElementSpan:
    source: StateStream
    start: int
    end: int
    compressed: bool  # element is a run of Snappy chunks, written out decompressed


# One state's elements for a new subtask (for annotations: a frozen slotted generic cannot
# be instantiated through its alias).
StateShare = StateElements[ElementSpan]


@dataclass(frozen=True, slots=True)
class OperatorTarget:
    header: bytes  # compression flag cleared: elements are written uncompressed
    states: tuple[StateShare, ...]

    @property
    def size(self) -> int:
        return len(self.header) + sum(e.end - e.start for s in self.states for e in s.spans)


@dataclass(frozen=True, slots=True)
class SubtaskTarget:
    """What one Spark task writes: a new subtask's keyed file and operator-state file."""

    operator_id: str
    index: int
    keyed: KeyedTarget | None
    operator: OperatorTarget | None

    @property
    def file_prefix(self) -> str:
        return f"{self.operator_id}-{self.index:05d}"


@dataclass(frozen=True, slots=True)
class OperatorPlan:
    operator: OperatorState
    new_parallelism: int
    targets: tuple[SubtaskTarget, ...] | None  # None: carried over as it is
    new_max_parallelism: int | None = None  # None: unchanged
    rekey: RekeyOperator | None = None  # keyed state re-hashed for the new max parallelism

    @property
    def rescaled(self) -> bool:
        return self.targets is not None

    @property
    def max_parallelism(self) -> int:
        return self.new_max_parallelism or self.operator.max_parallelism

    @property
    def has_keyed_state(self) -> bool:
        return self.rekey is not None or any(t.keyed is not None for t in self.targets or ())

    @property
    def reads_heap(self) -> bool:
        """Its keyed state is read from the hashmap backend's own snapshot format."""
        if self.rekey is not None:
            return any(isinstance(source, HeapSource) for source in self.rekey.sources)
        return any(t.keyed is not None and t.keyed.heap for t in self.targets or ())

    @property
    def writes_native(self) -> bool:
        """Its keyed state is written as RocksDB instances."""
        if self.rekey is not None:
            return self.rekey.native is not None
        return any(t.keyed is not None and t.keyed.output is not None for t in self.targets or ())


@dataclass(frozen=True, slots=True)
class RescalePlan:
    source: Savepoint
    operators: tuple[OperatorPlan, ...]


def plan_rescale(
    sp: Savepoint,
    parallelism: int | None,
    overrides: Mapping[str, int] | None = None,
    max_parallelism: int | None = None,
    keyed_format: str | None = None,
) -> RescalePlan:
    """New parallelism per stateful operator: `overrides` (uid or id → N), else `parallelism`.

    `keyed_format` is "native" (RocksDB instances) or "canonical" (key-group blocks); None keeps
    each operator's own. Operators whose keyed state changes format, or stays native, are
    always planned, at their own parallelism when no new one is given; so is keyed state in the
    hashmap backend's own snapshot format (its checkpoints, NATIVE savepoints), written as
    canonical blocks (or RocksDB instances).
    A new `max_parallelism` applies to every operator; keyed state is then re-hashed.
    """
    wanted = {sp.find_operator(name).operator_id: n for name, n in (overrides or {}).items()}
    if max_parallelism is not None:
        check_max_parallelism(max_parallelism)
    plans = []
    for op in sp.operators:
        new_parallelism = wanted.get(op.operator_id, parallelism)
        native_in = has_native_keyed_state(op)
        native_out = native_in if keyed_format is None else keyed_format == "native"
        if max_parallelism is not None and max_parallelism != op.max_parallelism:
            plans.append(
                _plan_new_max_parallelism(sp, op, new_parallelism, max_parallelism, native_out)
            )
        elif native_in or (native_out and has_keyed_state(op)) or has_heap_keyed_state(sp, op):
            plans.append(plan_operator(sp, op, new_parallelism or op.parallelism, None, native_out))
        elif new_parallelism is None or not has_state(op) or new_parallelism == op.parallelism:
            plans.append(OperatorPlan(op, op.parallelism, None))
        else:
            plans.append(plan_operator(sp, op, new_parallelism))
    return RescalePlan(sp, tuple(plans))


def has_keyed_state(op: OperatorState) -> bool:
    return any(s.managed_keyed_state is not None for s in op.subtasks or () if not s.finished)


def has_heap_keyed_state(sp: Savepoint, op: OperatorState) -> bool:
    """Whether keyed files of `op` are in the hashmap backend's own snapshot format."""
    return any(
        isinstance(handle, KeyGroupsHandle)
        and handle.delegate is not None
        and is_heap_snapshot(sp, handle)
        for handle in (s.managed_keyed_state for s in op.subtasks or () if not s.finished)
    )


def has_native_keyed_state(op: OperatorState) -> bool:
    return any(
        isinstance(s.managed_keyed_state, IncrementalKeyedHandle)
        for s in op.subtasks or ()
        if not s.finished
    )


def plan_operator(
    sp: Savepoint,
    op: OperatorState,
    new_parallelism: int,
    max_parallelism: int | None = None,
    native_out: bool = False,
) -> OperatorPlan:
    """Targets of every new subtask; keyed state re-hashed when `max_parallelism` changes,
    written as RocksDB instances when `native_out`."""
    where = describe_operator(op)
    new_max = max_parallelism or op.max_parallelism
    try:
        check_parallelism(new_max, new_parallelism)
    except StatectlError as exc:
        raise StatectlError(f"operator {where}: {exc.message}", sp.directory.url) from None
    subtasks = subtasks_by_index(op, where)
    _refuse_unsupported(subtasks, where)
    rekey = keyed = None
    if new_max != op.max_parallelism:
        rekey = _plan_rekey(sp, op, subtasks, new_parallelism, new_max, native_out)
    else:
        keyed = _plan_keyed(sp, op, subtasks, new_parallelism, native_out)
    operator = _plan_operator_state(sp, subtasks, new_parallelism)
    targets = tuple(
        SubtaskTarget(
            op.operator_id_hex, i, keyed[i] if keyed else None, operator[i] if operator else None
        )
        for i in range(new_parallelism)
    )
    return OperatorPlan(op, new_parallelism, targets, max_parallelism, rekey)


def _plan_new_max_parallelism(
    sp: Savepoint,
    op: OperatorState,
    parallelism: int | None,
    max_parallelism: int,
    native_out: bool = False,
) -> OperatorPlan:
    """Operators with state are planned anew (keyed state re-hashed); the others only get the
    new max parallelism (their parallelism in `_metadata` capped by it: it holds no state)."""
    if has_state(op):
        return plan_operator(sp, op, parallelism or op.parallelism, max_parallelism, native_out)
    return OperatorPlan(
        op, min(op.parallelism, max_parallelism), None, new_max_parallelism=max_parallelism
    )


def subtasks_by_index(op: OperatorState, where: str) -> list[SubtaskState | None]:
    by_index: list[SubtaskState | None] = [None] * op.parallelism
    for subtask in op.subtasks or ():
        if not 0 <= subtask.index < op.parallelism:
            raise StatectlError(f"operator {where}: subtask index {subtask.index} out of range")
        by_index[subtask.index] = None if subtask.finished else subtask
    return by_index


def _refuse_unsupported(subtasks: Sequence[SubtaskState | None], where: str) -> None:
    kinds = set()
    for subtask in subtasks:
        if subtask is None:
            continue
        if subtask.raw_keyed_state or subtask.raw_operator_state:
            raise UnsupportedError(f"operator {where} has raw state, which statectl cannot rescale")
        keyed = subtask.managed_keyed_state
        if keyed is not None:
            kinds.add(type(keyed))
        if keyed is not None and not isinstance(keyed, KeyGroupsHandle | IncrementalKeyedHandle):
            raise UnsupportedError(
                f"operator {where} has {type(keyed).__name__} keyed state (changelog), "
                "which statectl cannot rescale; take a CANONICAL savepoint instead"
            )
    if len(kinds) > 1:
        raise UnsupportedError(
            f"operator {where} mixes canonical and RocksDB native keyed state; "
            "take a CANONICAL savepoint instead"
        )


# --- keyed state -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _OldKeyedFile:
    stream: StateStream
    header: bytes
    info: KeyedStateHeader
    spans: tuple[BlockSpan, ...]
    heap: bool  # in the hashmap backend's own snapshot format, not canonical blocks


def _old_keyed_files(sp: Savepoint, subtasks: Sequence[SubtaskState | None]) -> list[_OldKeyedFile]:
    """The keyed-state file (canonical, or in the hashmap backend's own snapshot format) of
    every subtask that has one, read by `keyed`.

    One backend wrote a checkpoint's files: when one is in the heap snapshot format, so are the
    others of its kind (code 12; one of key group 0 alone cannot tell by itself,
    `is_heap_snapshot`). Heap-format files next to savepoint files (code 7) are refused."""
    files = []
    checkpoint_files = []
    for subtask in subtasks:
        handle = subtask.managed_keyed_state if subtask else None
        if isinstance(handle, KeyGroupsHandle) and handle.delegate is not None:
            stream = sp.stream(handle.delegate)
            heap = is_heap_snapshot(sp, handle)
            header, info = read_header(stream, header_end(stream, handle))
            spans = tuple(block_spans(stream, handle))
            files.append(_OldKeyedFile(stream, header, info, spans, heap))
            checkpoint_files.append(handle.code != HandleCode.SAVEPOINT_KEY_GROUPS)
    if not any(f.heap for f in files):
        return files
    if not all(checkpoint_files):
        raise UnsupportedError(
            "an operator's keyed state is partly in the hashmap backend's own snapshot format, "
            "partly in canonical savepoint files; statectl cannot rescale or convert that mix: "
            "take a savepoint (CANONICAL) of the job instead",
            files[0].stream.description,
        )
    return [dataclasses.replace(f, heap=True) for f in files]


def _common_header(
    old_files: list[_OldKeyedFile], where: str
) -> tuple[_OldKeyedFile, list[StateIdMap | None]]:
    """The old file whose header every new file gets, and per old file its state ids remapped
    by name (None where its header is that one)."""
    if all(f.header == old_files[0].header for f in old_files):
        return old_files[0], [None] * len(old_files)
    infos = [f.info for f in old_files]
    widest, id_maps = merge_keyed_headers(infos, where, [f.stream.description for f in old_files])
    return old_files[widest], id_maps


def _plan_keyed(
    sp: Savepoint,
    op: OperatorState,
    subtasks: Sequence[SubtaskState | None],
    new_parallelism: int,
    native_out: bool,
) -> list[KeyedTarget] | None:
    if has_native_keyed_state(op):
        found = _native_instances(sp, op, subtasks)
        if found is None:
            return None
        info = found.header_info
        output = _native_output(sp, op, op.max_parallelism, info) if native_out else None
        return _plan_native_keyed(op, found, new_parallelism, output)
    old_files = _old_keyed_files(sp, subtasks)
    if not old_files:
        return None
    common, id_maps = _common_header(old_files, describe_operator(op))
    output = _native_output(sp, op, op.max_parallelism, common.info) if native_out else None
    if old_files[0].heap:
        return _plan_heap_keyed(sp, op, old_files, common, id_maps, new_parallelism, output)
    targets = []
    for index in range(new_parallelism):
        first, last = key_group_range(op.max_parallelism, new_parallelism, index)
        runs = []
        for old, id_map in zip(old_files, id_maps, strict=True):
            wanted = [span for span in old.spans if first <= span.key_group <= last]
            runs.extend(_runs(old.stream, wanted, id_map))
        keyed = KeyedTarget(
            (first, last), common.header, common.info.compressed, tuple(runs), (), output
        )
        targets.append(keyed)
    return targets


def _plan_heap_keyed(
    sp: Savepoint,
    op: OperatorState,
    old_files: list[_OldKeyedFile],
    common: _OldKeyedFile,
    id_maps: list[StateIdMap | None],
    new_parallelism: int,
    output: NativeOutput | None,
) -> list[KeyedTarget]:
    """Each new subtask reads the key groups of its range from the heap-format files holding
    them (in key-group order) and writes them as canonical blocks, compression off (§4.8)."""
    header = state_headers.set_keyed_header_compression(common.header, False)
    flink = flink_major(sp.metadata.version)
    old_order = sorted(
        zip(old_files, id_maps, strict=True),
        key=lambda pair: pair[0].spans[0].key_group if pair[0].spans else -1,
    )
    targets = []
    for index in range(new_parallelism):
        first, last = key_group_range(op.max_parallelism, new_parallelism, index)
        runs = []
        for old, id_map in old_order:
            wanted = tuple(span for span in old.spans if first <= span.key_group <= last)
            if wanted:
                runs.append(
                    HeapRun(old.stream, wanted, old.header, op.max_parallelism, flink, id_map)
                )
        targets.append(KeyedTarget((first, last), header, False, (), (), output, tuple(runs)))
    return targets


def _runs(stream: StateStream, spans: list[BlockSpan], id_map: StateIdMap | None) -> list[BlockRun]:
    """Group adjacent blocks into byte ranges (Flink writes them back to back)."""
    runs: list[BlockRun] = []
    group: list[BlockSpan] = []
    for span in spans:
        if group and span.start != group[-1].end:
            runs.append(_run(stream, group, id_map))
            group = []
        group.append(span)
    if group:
        runs.append(_run(stream, group, id_map))
    return runs


def _run(stream: StateStream, group: list[BlockSpan], id_map: StateIdMap | None) -> BlockRun:
    offsets = tuple((s.key_group, s.start) for s in group)
    return BlockRun(stream, group[0].start, group[-1].end, offsets, id_map)


@dataclass(frozen=True, slots=True)
class _NativeInstances:
    """An operator's RocksDB instances (by key-group range) and the header of the new files."""

    header: bytes  # the widest instance's meta header, compression off
    header_info: KeyedStateHeader
    instances: tuple[tuple[native.NativeInstance, tuple[tuple[str, int], ...]], ...]


def _native_instances(
    sp: Savepoint, op: OperatorState, subtasks: Sequence[SubtaskState | None]
) -> _NativeInstances | None:
    """Each instance with its column families mapped to state ids of one common header."""
    where = describe_operator(op)
    instances = []
    for subtask in subtasks:
        if subtask is not None and isinstance(subtask.managed_keyed_state, IncrementalKeyedHandle):
            instance = native.native_instance(
                sp, subtask.managed_keyed_state, f"operator {where} subtask {subtask.index}"
            )
            instances.append((instance, *native.meta_header(instance)))
    if not instances:
        return None
    infos = [info for _, _, info in instances]
    widest, id_maps = merge_keyed_headers(infos, where, [i.description for i, _, _ in instances])
    _, header, header_info = instances[widest]
    families = [
        (instance, _column_families(info, id_map))
        for (instance, _, info), id_map in zip(instances, id_maps, strict=True)
    ]
    return _NativeInstances(
        state_headers.set_keyed_header_compression(header, False),
        header_info,
        tuple(sorted(families, key=lambda x: x[0].key_groups or (-1, -1))),
    )


def _column_families(
    info: KeyedStateHeader, id_map: StateIdMap | None
) -> tuple[tuple[str, int], ...]:
    """(column family, state id in the common header) of each state, by id."""
    new_ids = dict(id_map or ())
    states = ((s.name, new_ids.get(i, i)) for i, s in enumerate(info.states))
    return tuple(sorted(states, key=lambda state: state[1]))


def _native_output(
    sp: Savepoint, op: OperatorState, max_parallelism: int, info: KeyedStateHeader
) -> NativeOutput:
    """How the new instances of `op` are written: one column family per state of the header."""
    return NativeOutput(
        tuple(info.state_names()),
        java_types.key_group_prefix_bytes(max_parallelism),
        sp.metadata.checkpoint_id,
    )


def _plan_native_keyed(
    op: OperatorState, found: _NativeInstances, new_parallelism: int, output: NativeOutput | None
) -> list[KeyedTarget]:
    """Each new subtask reads the instances whose key-group ranges intersect its range (§5.3)."""
    prefix_bytes = java_types.key_group_prefix_bytes(op.max_parallelism)
    targets = []
    for index in range(new_parallelism):
        first, last = key_group_range(op.max_parallelism, new_parallelism, index)
        runs = []
        for instance, states in found.instances:
            owned = instance.key_groups
            if owned is None or owned[1] < first or owned[0] > last:
                continue
            start, end = max(first, owned[0]), min(last, owned[1])
            runs.append(NativeRun(instance, start, end, states, prefix_bytes))
        targets.append(KeyedTarget((first, last), found.header, False, (), tuple(runs), output))
    return targets


# --- keyed state under a new max parallelism ---------------------------------------------

_SOURCE_BYTES = 64 << 20  # canonical files are read in slices of about this size


def _plan_rekey(
    sp: Savepoint,
    op: OperatorState,
    subtasks: Sequence[SubtaskState | None],
    new_parallelism: int,
    max_parallelism: int,
    native_out: bool = False,
) -> RekeyOperator | None:
    """Every old file (or RocksDB instance) is a source of the shuffle to the new subtasks;
    large files are sliced so that they spread over tasks."""
    sources: list[RekeySource]
    if has_native_keyed_state(op):
        found = _native_instances(sp, op, subtasks)
        if found is None:
            return None
        header, info = found.header, found.header_info
        sources = [NativeSource(instance, states) for instance, states in found.instances]
        where = found.instances[0][0].description
    else:
        old_files = _old_keyed_files(sp, subtasks)
        if not old_files:
            return None
        common, id_maps = _common_header(old_files, describe_operator(op))
        header, info = common.header, common.info
        where = old_files[0].stream.description
        flink = flink_major(sp.metadata.version)
        sources = [
            HeapSource(old.stream, tuple(batch), old.header, flink, id_map)
            if old.heap
            else CanonicalSource(
                old.stream, tuple(batch), info.compressed, len(info.states), id_map
            )
            for old, id_map in zip(old_files, id_maps, strict=True)
            for batch in batches(old.spans, _SOURCE_BYTES)
        ]
    regrouper = KeyRegrouper(
        _rehashable_key_type(op, info, where),
        op.max_parallelism,
        max_parallelism,
        frozenset(i for i, s in enumerate(info.states) if s.kind == "TIMERS"),
    )
    return RekeyOperator(
        op.operator_id_hex,
        new_parallelism,
        regrouper,
        state_headers.set_keyed_header_compression(header, False),
        tuple(sources),
        _native_output(sp, op, max_parallelism, info) if native_out else None,
    )


def _rehashable_key_type(
    op: OperatorState, info: KeyedStateHeader, source: str
) -> java_types.KeyType:
    """The key type of the header's key serializer; `source` names the file it came from."""
    where = describe_operator(op)
    key_type = java_types.key_type_for_snapshot(info.key_serializer_snapshot)
    if key_type is None:
        basic = ", ".join(t.name for t in java_types.KEY_TYPES.values())
        supported = f"{basic}, RowData, and Tuple or Row of the basic types"
        raise UnsupportedError(
            f"operator {where}: keys serialized by {info.key_serializer or 'an unknown serializer'}"
            f" cannot be re-hashed for a new max parallelism (supported key types: {supported})",
            source,
        )
    queues = [s.name for s in info.states if s.kind == "PRIORITY_QUEUE"]
    if queues:
        raise UnsupportedError(
            f"operator {where}: priority-queue state {', '.join(queues)} cannot be re-hashed "
            "(only timers can)",
            source,
        )
    return key_type


# --- operator state ----------------------------------------------------------------------


def _plan_operator_state(
    sp: Savepoint, subtasks: Sequence[SubtaskState | None], new_parallelism: int
) -> list[OperatorTarget] | None:
    old = OldOperatorState.read(sp, subtasks)
    return old.targets(new_parallelism) if old.files else None


@dataclass(frozen=True, slots=True)
class OldOperatorState:
    """An operator's old operator-state files, read once; `targets` deals them to p subtasks."""

    handles: tuple[OperatorStateHandle | None, ...]
    files: Mapping[int, _OldOperatorFile]

    @staticmethod
    def read(sp: Savepoint, subtasks: Sequence[SubtaskState | None]) -> OldOperatorState:
        handles = tuple(s.managed_operator_state if s else None for s in subtasks)
        files = {i: _OldOperatorFile.read(sp, h) for i, h in enumerate(handles) if h is not None}
        return OldOperatorState(handles, files)

    def targets(self, new_parallelism: int) -> list[OperatorTarget]:
        header = next(iter(self.files.values())).header
        if new_parallelism == len(self.handles):  # a conversion: Flink keeps elements in place
            assignments = _in_place(self.handles)
        else:
            assignments = assign_operator_state(list(self.handles), new_parallelism)
        return [OperatorTarget(header, _shares(share, self.files)) for share in assignments]


def _in_place(handles: Sequence[OperatorStateHandle | None]) -> list[list[StateAssignment]]:
    return [
        [
            StateAssignment(s.name, s.mode, (ElementSource(i, 0, len(s.offsets)),))
            for s in (handle.states if handle else ())
        ]
        for i, handle in enumerate(handles)
    ]


@dataclass(frozen=True, slots=True)
class _OldOperatorFile:
    stream: StateStream
    header: bytes  # compression flag cleared
    elements: dict[str, tuple[Span, ...]]
    compressed: bool

    @staticmethod
    def read(sp: Savepoint, handle: OperatorStateHandle) -> _OldOperatorFile:
        if handle.delegate is None:
            raise FormatError(
                "operator-state handle without a state file", sp.metadata_location.url
            )
        stream = sp.stream(handle.delegate)
        layout, head = operator_file_layout(stream, handle)
        try:
            header = state_headers.set_operator_header_compression(
                head[: layout.header_length], False
            )
        except StatectlError as exc:
            raise exc.with_source(stream.description) from None
        return _OldOperatorFile(stream, header, layout.elements, layout.compressed)


def _shares(
    share: list[StateAssignment], files: Mapping[int, _OldOperatorFile]
) -> tuple[StateShare, ...]:
    result = []
    for state in share:
        elements: list[ElementSpan] = []
        for source in state.sources:
            old = files[source.old_subtask]
            spans = old.elements[state.name][source.first : source.first + source.count]
            elements.extend(ElementSpan(old.stream, a, b, old.compressed) for a, b in spans)
        result.append(StateElements(state.name, state.mode, tuple(elements)))
    return tuple(result)
