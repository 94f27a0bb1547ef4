"""Reading a savepoint's keyed-state files: the one reader of their headers and key-group blocks.

inspect, verify, diff, export and rescale all read keyed state through here: a header is the
serializer-proxy header (§4.2) of a canonical file, its bytes up to the first block (§4.3), or of
a native instance's meta file, the whole file (§5.1); blocks lie where `keyed_blocks.block_spans`
says and are read in batches; subtasks' headers merge into one by `merge_keyed_headers`.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence

from statectl.errors import StatectlError, UnsupportedError
from statectl.formats import keyed_blocks, state_headers
from statectl.formats.handles import (
    HandleCode,
    IncrementalKeyedHandle,
    KeyedHandle,
    KeyGroupsHandle,
    OperatorStateHandle,
    stream_size,
)
from statectl.formats.keyed_blocks import BlockSpan, Layout
from statectl.formats.metadata import snapshot_kind
from statectl.formats.state_headers import KeyedStateHeader
from statectl.savepoint.model import Savepoint, StateStream

_BLOCK_BATCH_BYTES = 32 << 20  # blocks read per request: small blocks cost few requests

# Per subtask header: its state ids mapped to the merged header's, None where they agree.
StateIdMap = tuple[tuple[int, int], ...]


def keyed_handle_bytes(handle: KeyedHandle | None) -> int:
    if isinstance(handle, KeyGroupsHandle):
        return stream_size(handle.delegate)
    if isinstance(handle, IncrementalKeyedHandle):
        files = handle.shared + handle.private
        return stream_size(handle.meta) + sum(stream_size(f.handle) for f in files)
    return 0


def operator_handle_bytes(handle: OperatorStateHandle | None) -> int:
    return 0 if handle is None else stream_size(handle.delegate)


# --- headers ---------------------------------------------------------------------------------


def read_header(stream: StateStream, end: int | None = None) -> tuple[bytes, KeyedStateHeader]:
    """The bytes [0, end) of `stream` (all of it by default) and the keyed header they hold."""
    data = stream.read(0, end)
    try:
        return data, state_headers.parse_keyed_header(data)
    except StatectlError as exc:
        raise exc.with_source(stream.description) from None


def header_end(stream: StateStream, handle: KeyGroupsHandle) -> int:
    """Where a canonical file's header ends: at its first block (§4.3)."""
    try:
        return keyed_blocks.header_length(handle.offsets, stream.size)
    except StatectlError as exc:
        raise exc.with_source(stream.description) from None


def canonical_header(stream: StateStream, handle: KeyGroupsHandle) -> KeyedStateHeader:
    """The header of a canonical keyed-state file."""
    return read_header(stream, header_end(stream, handle))[1]


def entries_header(stream: StateStream, handle: KeyGroupsHandle) -> KeyedStateHeader:
    """The header of a canonical file whose entries are read: its state list read in full
    (`state_headers.require_state_list`)."""
    header = canonical_header(stream, handle)
    try:
        state_headers.require_state_list(header, "keyed state")
    except StatectlError as exc:
        raise exc.with_source(stream.description) from None
    return header


def keyed_header(sp: Savepoint, handle: KeyedHandle) -> KeyedStateHeader | None:
    """The header of a keyed handle (canonical file or native meta file) as far as it parses;
    None for changelog handles. `native.meta_header` adds what reading a native instance needs."""
    if isinstance(handle, KeyGroupsHandle) and handle.delegate is not None:
        return canonical_header(sp.stream(handle.delegate), handle)
    if isinstance(handle, IncrementalKeyedHandle) and handle.meta is not None:
        return read_header(sp.stream(handle.meta))[1]
    return None


def merge_keyed_headers(
    headers: Sequence[KeyedStateHeader], where: str, sources: Sequence[str]
) -> tuple[int, list[StateIdMap | None]]:
    """One header for an operator's subtasks: the index of the one listing the most states, and
    per header its state ids mapped to that one's by name (None where they already agree).

    Raises `UnsupportedError` when subtasks disagree on key serializer or compression, or list
    a state the widest header does not (the rescale planner copies one header into every new
    file; `verify --deep` runs the same rule so that it passes only what rescale can merge).
    The error's source is `sources[i]`, the file of the header that does not fit.
    """
    widest = max(range(len(headers)), key=lambda i: len(headers[i].states))
    target = headers[widest]
    target_ids = {s.name: i for i, s in enumerate(target.states)}
    id_maps: list[StateIdMap | None] = []
    for header, source in zip(headers, sources, strict=True):
        if header.key_serializer != target.key_serializer or header.compressed != target.compressed:
            raise UnsupportedError(
                f"operator {where}: subtasks disagree on key serializer or compression", source
            )
        missing = [s.name for s in header.states if s.name not in target_ids]
        if missing:
            raise UnsupportedError(
                f"operator {where}: subtasks registered different keyed states "
                f"({', '.join(missing)}); statectl cannot merge their headers",
                source,
            )
        ids = tuple((i, target_ids[s.name]) for i, s in enumerate(header.states))
        id_maps.append(None if all(a == b for a, b in ids) else ids)
    return widest, id_maps


# --- key-group blocks ------------------------------------------------------------------------


def block_spans(stream: StateStream, handle: KeyGroupsHandle) -> list[BlockSpan]:
    """Each non-empty key group's block in a canonical file, by `keyed_blocks.block_spans`."""
    try:
        return keyed_blocks.block_spans(handle.start_key_group, handle.offsets, stream.size)
    except StatectlError as exc:
        raise exc.with_source(stream.description) from None


_LAYOUT_PROBE_BYTES = 1 << 20  # of a first block, walked to tell the layouts apart


def is_heap_snapshot(sp: Savepoint, handle: KeyGroupsHandle) -> bool:
    """Whether a keyed-state file is in the hashmap backend's own snapshot format (its
    checkpoints and NATIVE savepoints, `formats.heap_snapshot`) rather than canonical blocks
    (savepoints, RocksDB's full checkpoints).

    Told by what cannot be mistaken, in this order: the handle (code 7 is a canonical
    savepoint's), the metadata (a NATIVE savepoint's code-12 files are the hashmap backend's:
    RocksDB's are instances), the file itself (`file_layout`), then the snapshot's other
    files, which one backend wrote. A file none of them tells about is refused, never guessed.
    """
    if handle.code == HandleCode.SAVEPOINT_KEY_GROUPS or handle.delegate is None:
        return False
    if _is_native_savepoint(sp):
        return True
    stream = sp.stream(handle.delegate)
    layout = file_layout(stream, handle) or _snapshot_layout(sp)
    if layout is None:
        raise UnsupportedError(
            "cannot tell whether this keyed-state file holds canonical key-group blocks or the "
            "hashmap backend's snapshot format (its first key group reads as both or neither, "
            "and no other file of the checkpoint tells which backend wrote it)",
            stream.description,
        )
    return layout is Layout.HEAP


def file_layout(stream: StateStream, handle: KeyGroupsHandle) -> Layout | None:
    """The layout a code-12 file's own bytes show (`keyed_blocks.first_block_layout`), or None.
    The heap format gives every key group of the range an offset, empty ones too; a file with
    an empty key group holds canonical blocks."""
    spans = block_spans(stream, handle)
    if not spans or not all(handle.offsets):
        return Layout.CANONICAL
    header = canonical_header(stream, handle)
    first = spans[0]
    head = stream.read(first.start, min(first.end, first.start + _LAYOUT_PROBE_BYTES))
    return keyed_blocks.first_block_layout(
        head, first.length, first.key_group, header.compressed, len(header.states)
    )


def _is_native_savepoint(sp: Savepoint) -> bool:
    return _native_savepoint_properties(sp.metadata.properties)


@functools.lru_cache(maxsize=8)
def _native_savepoint_properties(properties: bytes) -> bool:
    """Whether a `_metadata`'s properties say NATIVE savepoint (parsed once per savepoint, not
    once per file)."""
    try:
        kind = snapshot_kind(properties)
    except StatectlError:  # unreadable properties are verify's finding; the files still tell
        return False
    return kind is not None and kind.savepoint and kind.format == "NATIVE"


def _snapshot_layout(sp: Savepoint) -> Layout | None:
    """The layout the first code-12 file of the snapshot that tells by itself shows."""
    for op in sp.operators:
        for subtask in sp.subtasks(op):
            handle = subtask.managed_keyed_state  # raw keyed state is the user's own bytes
            if (
                not isinstance(handle, KeyGroupsHandle)
                or handle.code == HandleCode.SAVEPOINT_KEY_GROUPS
                or handle.delegate is None
            ):
                continue
            try:
                layout = file_layout(sp.stream(handle.delegate), handle)
            except StatectlError:  # a file that does not read tells nothing
                continue
            if layout is not None:
                return layout
    return None


def batches(spans: Sequence[BlockSpan], max_bytes: int) -> list[list[BlockSpan]]:
    """Consecutive blocks in batches of at most `max_bytes` (a larger block alone in one)."""
    result: list[list[BlockSpan]] = []
    batch: list[BlockSpan] = []
    for span in spans:
        if batch and span.end - batch[0].start > max_bytes:
            result.append(batch)
            batch = []
        batch.append(span)
    if batch:
        result.append(batch)
    return result


def iter_blocks(
    stream: StateStream, spans: Sequence[BlockSpan]
) -> Iterator[tuple[BlockSpan, memoryview]]:
    """The bytes of each block of `spans`, read a batch at a time (views of a local file
    mapped into memory: callers copy what they keep)."""
    for batch in batches(spans, _BLOCK_BATCH_BYTES):
        base = batch[0].start
        data = memoryview(stream.read_view(base, batch[-1].end))
        for span in batch:
            yield span, data[span.start - base : span.end - base]
