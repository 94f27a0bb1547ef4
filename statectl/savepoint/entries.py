"""The logical entries of a savepoint's state, independent of parallelism and file layout.

Shared by `diff` and `export`. Keyed state: every entry of every CANONICAL key-group block
(flink-savepoint-format.md §4.4), of every key group of the hashmap backend's own snapshot
format (its checkpoints and NATIVE savepoints, §4.8, read through `heap_snapshot` into the
canonical form) or RocksDB native row (§5.2, read through `native`), with its
state (from the header, §4.2), key group, composite key (§4.6) and value. Operator state: every
list element, and each broadcast state's map (§3.3). Changelog keyed state and raw state raise
`UnsupportedError`.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from statectl.errors import StatectlError, UnsupportedError
from statectl.formats import heap_snapshot, keyed_blocks, operator_state, state_headers
from statectl.formats.class_files import ClassFinder
from statectl.formats.handles import (
    DistributionMode,
    IncrementalKeyedHandle,
    KeyGroupsHandle,
    OperatorStateHandle,
)
from statectl.formats.java_types import (
    COMPOSITE_KEY_KINDS,
    key_group_prefix_bytes,
    split_composite_key,
)
from statectl.formats.metadata import OperatorState
from statectl.formats.state_headers import KeyedStateHeader, StateMetaInfo
from statectl.formats.state_values import (
    StateCodec,
    flink_major,
    keyed_codec,
    operator_codec,
)
from statectl.formats.values import RawCodec, Undecodable
from statectl.savepoint import native
from statectl.savepoint.keyed import (
    StateIdMap,
    batches,
    block_spans,
    entries_header,
    is_heap_snapshot,
    iter_blocks,
)
from statectl.savepoint.model import Savepoint, StateStream, describe_operator

if TYPE_CHECKING:
    import pyarrow as pa

OPERATOR_KINDS = {
    DistributionMode.SPLIT_DISTRIBUTE: "LIST",
    DistributionMode.UNION: "UNION",
    DistributionMode.BROADCAST: "BROADCAST",
}
_TIMESTAMP_BYTES = 8


def operator_label(op: OperatorState) -> str:
    """How an operator is named in reports and exports: its uid, or its hex id."""
    return op.uid or op.operator_id_hex


# --- keyed state -----------------------------------------------------------------------------


@dataclass(frozen=True)
class _SubtaskKeyedState:
    """Whose keyed state a source holds (sources are picklable: they travel to Spark executors)."""

    operator_id: str
    operator: str  # `operator_label`
    subtask: int
    max_parallelism: int
    flink_major: int  # 1 or 2: which Flink wrote it (Kryo 2 or 5)


@dataclass(frozen=True)
class _KeyGroupsStream(_SubtaskKeyedState):
    """A subtask's keyed-state stream with a key-group offset per key group (canonical blocks
    or the hashmap backend's own format): its header and its key-group ranges."""

    handle: KeyGroupsHandle
    stream: StateStream

    def header(self) -> KeyedStateHeader:
        return entries_header(self.stream, self.handle)

    @property
    def description(self) -> str:
        return self.stream.description

    def chunks(self, max_bytes: int) -> list[tuple[int, int]]:
        """Contiguous key-group ranges of at most about `max_bytes` each."""
        spans = block_spans(self.stream, self.handle)
        return [(batch[0].key_group, batch[-1].key_group) for batch in batches(spans, max_bytes)]


@dataclass(frozen=True)
class KeyedFile(_KeyGroupsStream):
    """One subtask's CANONICAL keyed-state stream."""

    def entries(
        self,
        key_groups: tuple[int, int] | None = None,
        header: KeyedStateHeader | None = None,
        states: Collection[str] | None = None,
    ) -> Iterator[KeyedEntry]:
        return iter_keyed_entries(self, key_groups, header, states)


@dataclass(frozen=True)
class NativeKeyedFile(_SubtaskKeyedState):
    """One subtask's RocksDB native instance, read through rocksdict (`native`)."""

    instance: native.NativeInstance

    @property
    def description(self) -> str:
        return self.instance.description

    def header(self) -> KeyedStateHeader:
        return native.meta_header(self.instance)[1]

    def chunks(self, max_bytes: int) -> list[tuple[int, int]]:
        """One chunk: the instance is opened (gathered locally) once per task."""
        return [self.instance.key_groups] if self.instance.key_groups else []

    def entries(
        self,
        key_groups: tuple[int, int] | None = None,
        header: KeyedStateHeader | None = None,
        states: Collection[str] | None = None,
    ) -> Iterator[KeyedEntry]:
        """Rows of every column family (of `states` only, if given), in the owned key-group
        range, state by state."""
        header = header or self.header()
        chosen = [s for s in header.states if states is None or s.name in states]
        prefix = key_group_prefix_bytes(self.max_parallelism)
        for state, keys, values in self.row_batches(chosen, key_groups):
            for key, value in zip(keys.to_pylist(), values.to_pylist(), strict=True):
                yield KeyedEntry(state, int.from_bytes(key[:prefix], "big"), key, value)

    def row_batches(
        self, states: Iterable[StateMetaInfo], key_groups: tuple[int, int] | None = None
    ) -> Iterator[tuple[StateMetaInfo, pa.Array, pa.Array]]:
        """(state, keys, values) of each batch of rows of `states`, state by state, in the
        owned key-group range (or `key_groups` of it): Arrow arrays (`native_rows`)."""
        owned = self.instance.key_groups
        if owned is None:
            return
        first, last = key_groups or owned
        prefix = key_group_prefix_bytes(self.max_parallelism)
        with native.opened(self.instance) as db:
            for state in states:
                for keys, values in db.row_batches(state.name, first, last, prefix):
                    yield state, keys, values


@dataclass(frozen=True)
class HeapKeyedFile(_KeyGroupsStream):
    """One subtask's keyed state in the hashmap backend's own snapshot format (a retained
    checkpoint or NATIVE savepoint of that backend), read into canonical entries."""

    def entries(
        self,
        key_groups: tuple[int, int] | None = None,
        header: KeyedStateHeader | None = None,
        states: Collection[str] | None = None,
    ) -> Iterator[KeyedEntry]:
        """Every entry (of `states` only, if given), key group by key group (each read whole
        before its entries come: the format has no lengths to skip other states by)."""
        header = header or self.header()
        layouts = heap_snapshot.heap_states(header, self.flink_major)
        spans = block_spans(self.stream, self.handle)
        if key_groups:
            spans = [s for s in spans if key_groups[0] <= s.key_group <= key_groups[1]]
        for span, data in iter_blocks(self.stream, spans):
            try:
                found = heap_entries(span.key_group, data, header, layouts, self.max_parallelism)
            except StatectlError as exc:
                where = f"{self.stream.description} (key group {span.key_group})"
                raise exc.with_source(where) from None
            yield from (e for e in found if states is None or e.state.name in states)


def heap_entries(
    key_group: int,
    data: keyed_blocks.Buffer,
    header: KeyedStateHeader,
    states: tuple[heap_snapshot.HeapState, ...],
    max_parallelism: int,
    verify_checksums: bool = False,
) -> list[KeyedEntry]:
    """The entries of one key group in the heap snapshot format, in canonical form, their
    state ids resolved against `header` (the rule `verify --deep` walks them by too)."""
    found = heap_snapshot.read_key_group(
        data, key_group, states, header.compressed, max_parallelism, verify_checksums
    )
    return [KeyedEntry(header.states[e.state_id], key_group, e.key, e.value) for e in found]


# One key group of a heap-format file as rows: (key group, [(state id, [(key, value)])]).
HeapKeyGroup = tuple[int, list[tuple[int, list[tuple[bytes, bytes]]]]]


def heap_key_group_rows(
    stream: StateStream,
    spans: Sequence[keyed_blocks.BlockSpan],
    header: bytes,
    max_parallelism: int,
    flink: int | None = None,
    state_id_map: StateIdMap | None = None,
) -> Iterator[HeapKeyGroup]:
    """Every key group of `spans` (of a file in the heap snapshot format whose header is the
    bytes `header`) that holds entries: its entries in canonical form, grouped by state id
    (renumbered by `state_id_map`), ids ascending, each state's entries in the order written.
    What rescale writes as canonical blocks or RocksDB rows, and re-hashes."""
    try:
        info = state_headers.parse_keyed_header(header)
        state_headers.require_state_list(info, "keyed state")
    except StatectlError as exc:
        raise exc.with_source(stream.description) from None
    states = heap_snapshot.heap_states(info, flink)
    mapping = dict(state_id_map or ())
    for span, data in iter_blocks(stream, spans):
        try:
            found = heap_snapshot.read_key_group(
                data, span.key_group, states, info.compressed, max_parallelism
            )
        except StatectlError as exc:
            raise exc.with_source(f"{stream.description} (key group {span.key_group})") from None
        by_state: dict[int, list[tuple[bytes, bytes]]] = {}
        for entry in found:
            state_id = mapping.get(entry.state_id, entry.state_id)
            by_state.setdefault(state_id, []).append((entry.key, entry.value))
        if by_state:
            yield span.key_group, sorted(by_state.items(), key=lambda item: item[0])


def heap_entry_counts(
    stream: StateStream,
    handle: KeyGroupsHandle,
    header: KeyedStateHeader,
    max_parallelism: int,
    flink: int | None = None,
) -> Iterator[tuple[int, dict[str, int]]]:
    """(key group, entries per state name) of every key group of a heap-format file, read
    whole (the heap format has no lengths to walk: `inspect --deep` and `plan` count this)."""
    states = heap_snapshot.heap_states(header, flink)
    for span, data in iter_blocks(stream, block_spans(stream, handle)):
        try:
            found = heap_entries(span.key_group, data, header, states, max_parallelism)
        except StatectlError as exc:
            raise exc.with_source(f"{stream.description} (key group {span.key_group})") from None
        counts: dict[str, int] = {}
        for entry in found:
            counts[entry.state.name] = counts.get(entry.state.name, 0) + 1
        yield span.key_group, counts


KeyedSource = KeyedFile | NativeKeyedFile | HeapKeyedFile


def source_bytes(source: KeyedSource, key_groups: tuple[int, int] | None = None) -> int:
    """The stored bytes of a keyed source's key groups (all: None): what a task reading them
    counts toward progress (a native instance's are all of its files)."""
    if isinstance(source, NativeKeyedFile):
        return source.instance.size
    if key_groups is None:
        return source.stream.size
    first, last = key_groups
    spans = block_spans(source.stream, source.handle)
    return sum(span.length for span in spans if first <= span.key_group <= last)


@dataclass(frozen=True, slots=True)
class KeyedEntry:
    state: StateMetaInfo
    key_group: int
    key: bytes  # the composite key: flag cleared, key-group prefix included
    value: bytes


def check_readable(op: OperatorState) -> None:
    """Refuse what statectl cannot read entry by entry (yet), naming the operator."""
    where = describe_operator(op)
    for subtask in op.subtasks or ():
        if subtask.finished:
            continue
        if subtask.raw_keyed_state is not None or subtask.raw_operator_state is not None:
            raise UnsupportedError(f"operator {where} has raw state, which statectl cannot read")
        keyed = subtask.managed_keyed_state
        if keyed is not None and not isinstance(keyed, KeyGroupsHandle | IncrementalKeyedHandle):
            raise UnsupportedError(
                f"operator {where} has {type(keyed).__name__} keyed state (changelog), which "
                "statectl cannot read; take a CANONICAL savepoint instead"
            )


def keyed_files(sp: Savepoint, op: OperatorState) -> list[KeyedSource]:
    """Every subtask's keyed state: CANONICAL files, files in the hashmap backend's own
    snapshot format, or RocksDB native instances."""
    check_readable(op)
    files: list[KeyedSource] = []
    for subtask in sp.subtasks(op):
        whose = (
            op.operator_id_hex,
            operator_label(op),
            subtask.index,
            op.max_parallelism,
            flink_major(sp.metadata.version),
        )
        handle = subtask.managed_keyed_state
        if isinstance(handle, IncrementalKeyedHandle):
            where = f"operator {describe_operator(op)} subtask {subtask.index}"
            files.append(NativeKeyedFile(*whose, native.native_instance(sp, handle, where)))
        elif isinstance(handle, KeyGroupsHandle) and handle.delegate is not None:
            stream = sp.stream(handle.delegate)
            if is_heap_snapshot(sp, handle):
                files.append(HeapKeyedFile(*whose, handle, stream))
            else:
                files.append(KeyedFile(*whose, handle, stream))
    return files


def iter_keyed_entries(
    file: KeyedFile,
    key_groups: tuple[int, int] | None = None,
    header: KeyedStateHeader | None = None,
    states: Collection[str] | None = None,
) -> Iterator[KeyedEntry]:
    """Every entry of `file` (only key groups in the inclusive range `key_groups`, and of
    `states`, if given: the other states' runs are skipped without a step per entry)."""
    header = header or file.header()
    for span, block in iter_blocks(file.stream, block_spans(file.stream, file.handle)):
        if key_groups and not key_groups[0] <= span.key_group <= key_groups[1]:
            continue
        try:
            if states is None:
                yield from block_entries(span.key_group, block, header, header.compressed)
            else:
                prefix = key_group_prefix_bytes(file.max_parallelism)
                yield from _state_entries(span.key_group, block, header, prefix, states)
        except StatectlError as exc:
            where = f"{file.stream.description} (key group {span.key_group})"
            raise exc.with_source(where) from None


def block_entries(
    key_group: int, block: keyed_blocks.Buffer, header: KeyedStateHeader, compressed: bool
) -> Iterator[KeyedEntry]:
    """The entries of one key group's block, their state ids resolved against `header`: the
    one rule every reader and `verify --deep` walk blocks by (§4.4). `compressed` is separate
    from the header's flag for callers that decompressed the block already."""
    states = header.states
    for entry in keyed_blocks.iter_entries(block, compressed, len(states)):
        yield KeyedEntry(states[entry.state_id], key_group, entry.key, entry.value)


def located_entries(
    key_group: int,
    block: keyed_blocks.Buffer,
    header: KeyedStateHeader,
    prefix_bytes: int,
    limit: int,
) -> tuple[int, list[KeyedEntry]]:
    """The number of entries in one uncompressed block and the first `limit` of them, as
    `block_entries` gives them: the block's layout is found by `entry_scan` (which walks it
    exactly, with `block_entries`' errors, where its entries do not chain), so a large block
    is checked whole without a Python step per entry."""
    from statectl.formats import entry_scan  # numpy: not for commands that only copy blocks

    states = header.states
    key_starts, key_ends, value_ends, runs = entry_scan.locate(
        block, key_group, prefix_bytes, len(states)
    )
    ids = [state_id for state_id, count in runs for _ in range(min(count, limit))][:limit]
    view = memoryview(block)
    found = []
    for i, state_id in enumerate(ids):
        key = bytearray(view[key_starts[i] : key_ends[i]])
        key[0] &= ~keyed_blocks.FIRST_BIT_IN_BYTE_MASK
        value = bytes(view[key_ends[i] + 4 : value_ends[i]])
        found.append(KeyedEntry(states[state_id], key_group, bytes(key), value))
    return len(key_starts), found


def _state_entries(
    key_group: int,
    block: keyed_blocks.Buffer,
    header: KeyedStateHeader,
    prefix_bytes: int,
    states: Collection[str],
) -> Iterator[KeyedEntry]:
    """The entries of `states` in one block: their runs found by `entry_scan`, then walked."""
    from statectl.formats import entry_scan  # numpy: not for commands that only copy blocks

    data = keyed_blocks.raw_block(block, header.compressed)
    num_states = len(header.states)
    for state_id, start, end in entry_scan.run_spans(data, key_group, prefix_bytes, num_states):
        if header.states[state_id].name in states:
            run = keyed_blocks.join_runs([keyed_blocks.copied_run(state_id, data[start:end])])
            yield from block_entries(key_group, run, header, False)


@dataclass(frozen=True, slots=True)
class KeyParts:
    """A composite key split into its parts; None where the serializers do not tell."""

    key_group: int
    key: bytes
    namespace: bytes | None
    user_key: bytes | None
    timestamp: int | None


def split_key(entry: KeyedEntry, max_parallelism: int, codec: StateCodec) -> KeyParts:
    """Split a keyed entry's composite key (§4.6) with the state's key and namespace codecs;
    a key no codec reads splits as far as the namespace's fixed length allows."""
    kind = entry.state.kind
    namespace = None if isinstance(codec.namespace, RawCodec) else codec.namespace
    readable = codec.key is not None and not isinstance(codec.key, RawCodec)
    if readable and kind in COMPOSITE_KEY_KINDS:
        assert codec.key is not None
        parts = split_composite_key(entry.key, max_parallelism, codec.key, namespace, kind)
        user_key = parts.user_key_bytes if kind == "MAP" else None
        return KeyParts(
            parts.key_group, parts.key_bytes, parts.namespace_bytes, user_key, parts.timestamp
        )
    ns_length = namespace.fixed_length if namespace is not None else None
    return _split_unknown_key(entry, max_parallelism, ns_length)


def _split_unknown_key(entry: KeyedEntry, max_parallelism: int, ns_length: int | None) -> KeyParts:
    """Without a key reader: the key runs up to a fixed-length namespace (or to the end)."""
    prefix = key_group_prefix_bytes(max_parallelism)
    rest = entry.key[prefix:]
    timestamp = None
    if entry.state.kind == "TIMERS" and len(rest) >= _TIMESTAMP_BYTES:
        flipped = int.from_bytes(rest[:_TIMESTAMP_BYTES], "big") ^ (1 << 63)
        timestamp = flipped - (1 << 64) if flipped >= 1 << 63 else flipped
        rest = rest[_TIMESTAMP_BYTES:]
    if entry.state.kind != "MAP" and ns_length is not None and len(rest) >= ns_length:
        key_end = len(rest) - ns_length
        return KeyParts(entry.key_group, rest[:key_end], rest[key_end:], None, timestamp)
    return KeyParts(entry.key_group, rest, None, None, timestamp)


def codecs_for(
    header: KeyedStateHeader, flink: int | None = None, classpath: ClassFinder | None = None
) -> dict[str, StateCodec]:
    """Each state's codec; `flink` is the writing Flink's major version (`flink_major`),
    `classpath` the job's classes when given."""
    key = header.key_serializer_snapshot
    return {s.name: keyed_codec(s, key, flink, classpath) for s in header.states}


# --- operator state --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OperatorElement:
    state: str
    kind: str  # LIST (split), UNION or BROADCAST
    subtask: int
    value: bytes  # a list element, or a broadcast state's whole map
    meta: StateMetaInfo | None  # from the file's header, when it parses
    source: str  # the file it was read from, for errors found while decoding it
    flink_major: int | None = None  # which Flink wrote it (Kryo 2 or 5)


@dataclass(frozen=True)
class OperatorFile:
    """One subtask's operator-state stream (picklable: it travels to Spark executors)."""

    operator_id: str
    operator: str
    subtask: int
    handle: OperatorStateHandle
    stream: StateStream
    flink_major: int | None = None

    def elements(self) -> Iterator[OperatorElement]:
        """Every list element and broadcast map of the file, state by state."""
        stream = self.stream
        try:
            data = stream.read()  # one subtask's operator state: small by design in Flink
            layout = operator_state.file_layout(self.handle.states, stream.size, data)
            header = _operator_header(data[: layout.header_length])
            metas = {s.name: s for s in header.states}
            for state in layout.states:
                kind = OPERATOR_KINDS[state.mode]
                for start, end in state.spans:
                    value = operator_state.element_bytes(data[start:end], layout.compressed)
                    meta = metas.get(state.name)
                    yield OperatorElement(
                        state.name,
                        kind,
                        self.subtask,
                        value,
                        meta,
                        stream.description,
                        self.flink_major,
                    )
        except StatectlError as exc:
            raise exc.with_source(stream.description) from None

    def state_metas(self) -> dict[str, StateMetaInfo]:
        """Each state's serializers, from the file's header (its elements are not read)."""
        layout, head = operator_file_layout(self.stream, self.handle)
        try:
            header = _operator_header(head[: layout.header_length])
        except StatectlError as exc:
            raise exc.with_source(self.stream.description) from None
        return {s.name: s for s in header.states}


def _operator_header(data: bytes) -> state_headers.OperatorStateHeader:
    """An operator-state file's header with its state list read in full: a broadcast state
    without its serializers cannot be split into entries (`require_state_list`)."""
    header = state_headers.parse_operator_header(data)
    state_headers.require_state_list(header, "operator state")
    return header


def operator_file_layout(
    stream: StateStream, handle: OperatorStateHandle
) -> tuple[operator_state.OperatorFileLayout, bytes]:
    """Where an operator-state file's header and elements lie (§3.4), read from its bytes up
    to the first element; those bytes too."""
    first = min((o for s in handle.states for o in s.offsets), default=stream.size)
    head = stream.read(0, min(stream.size, max(first, 0)))
    try:
        return operator_state.file_layout(handle.states, stream.size, head), head
    except StatectlError as exc:
        raise exc.with_source(stream.description) from None


def operator_files(sp: Savepoint, op: OperatorState) -> list[OperatorFile]:
    check_readable(op)
    files = []
    for subtask in sp.subtasks(op):
        handle = subtask.managed_operator_state
        if handle is not None and handle.delegate is not None:
            stream = sp.stream(handle.delegate)
            files.append(
                OperatorFile(
                    op.operator_id_hex,
                    operator_label(op),
                    subtask.index,
                    handle,
                    stream,
                    flink_major(sp.metadata.version),
                )
            )
    return files


def iter_operator_elements(sp: Savepoint, op: OperatorState) -> Iterator[OperatorElement]:
    """Every operator list element and broadcast map, subtask by subtask."""
    for file in operator_files(sp, op):
        yield from file.elements()


def broadcast_entries(element: OperatorElement) -> list[tuple[bytes, bytes]] | None:
    """A broadcast map's (key, value) bytes, or None when its serializers are not known."""
    codec = element_codec(element)
    if codec.key is None or codec.value is None:
        return None
    if isinstance(codec.key, RawCodec) or isinstance(codec.value, RawCodec):
        return None
    try:
        return operator_state.split_broadcast_entries(element.value, codec.key, codec.value)
    except Undecodable:  # well-formed, but a key or value serializer statectl cannot read
        return None
    except StatectlError as exc:
        raise exc.with_source(element.source) from None


def element_codec(element: OperatorElement) -> StateCodec:
    return operator_codec(element.meta, element.kind, element.flink_major)
