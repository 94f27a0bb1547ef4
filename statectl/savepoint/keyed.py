"""Reading a savepoint's keyed-state files: their headers and key-group blocks, and handle sizes.

The one read path that inspect, verify, diff, export and rescale share: a canonical file's
header is its bytes up to the first block (§4.3), a native instance's is its meta file (§5).
"""

from __future__ import annotations

from collections.abc import Iterator

from statectl.errors import StatectlError
from statectl.formats import keyed_blocks, state_headers
from statectl.formats.handles import (
    IncrementalKeyedHandle,
    KeyedHandle,
    KeyGroupsHandle,
    OperatorStateHandle,
    stream_size,
)
from statectl.savepoint.model import Savepoint, StateStream

_BLOCK_BATCH_BYTES = 32 << 20


def keyed_handle_bytes(handle: KeyedHandle | None) -> int:
    if isinstance(handle, KeyGroupsHandle):
        return stream_size(handle.delegate)
    if isinstance(handle, IncrementalKeyedHandle):
        files = handle.shared + handle.private
        return stream_size(handle.meta) + sum(stream_size(f.handle) for f in files)
    return 0


def operator_handle_bytes(handle: OperatorStateHandle | None) -> int:
    return 0 if handle is None else stream_size(handle.delegate)


def keyed_header(sp: Savepoint, handle: KeyedHandle) -> state_headers.KeyedStateHeader | None:
    """The serializer-proxy header of a keyed handle (canonical file or native meta file)."""
    if isinstance(handle, KeyGroupsHandle) and handle.delegate is not None:
        return canonical_header(sp.stream(handle.delegate), handle)
    if isinstance(handle, IncrementalKeyedHandle) and handle.meta is not None:
        stream = sp.stream(handle.meta)
        try:
            return state_headers.parse_keyed_header(stream.read())
        except StatectlError as exc:
            raise exc.with_source(stream.description) from None
    return None


def canonical_header(
    stream: StateStream, handle: KeyGroupsHandle
) -> state_headers.KeyedStateHeader:
    """The header of a canonical keyed-state file: its bytes up to the first block (§4.3)."""
    try:
        length = keyed_blocks.header_length(handle.offsets, stream.size)
        return state_headers.parse_keyed_header(stream.read(0, length))
    except StatectlError as exc:
        raise exc.with_source(stream.description) from None


def iter_blocks(
    stream: StateStream, handle: KeyGroupsHandle
) -> Iterator[tuple[keyed_blocks.BlockSpan, memoryview]]:
    """Each non-empty key group's block, read in batches so small blocks cost few requests."""
    try:
        spans = keyed_blocks.block_spans(handle.start_key_group, handle.offsets, stream.size)
    except StatectlError as exc:
        raise exc.with_source(stream.description) from None
    batch: list[keyed_blocks.BlockSpan] = []
    for span in spans:
        batch.append(span)
        if span.end - batch[0].start >= _BLOCK_BATCH_BYTES:
            yield from _read_batch(stream, batch)
            batch = []
    if batch:
        yield from _read_batch(stream, batch)


def _read_batch(
    stream: StateStream, batch: list[keyed_blocks.BlockSpan]
) -> Iterator[tuple[keyed_blocks.BlockSpan, memoryview]]:
    base = batch[0].start
    data = memoryview(stream.read(base, batch[-1].end))
    for span in batch:
        yield span, data[span.start - base : span.end - base]
