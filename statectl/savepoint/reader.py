"""Opening a savepoint given its directory or its `_metadata` file, on any fsspec filesystem."""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any

from statectl.errors import SavepointError, StatectlError, StatectlNote
from statectl.formats.handles import EmptySegmentFileHandle, OperatorStateHandle
from statectl.formats.metadata import CheckpointMetadata, SubtaskState, read_metadata
from statectl.savepoint.model import METADATA_FILE, Savepoint
from statectl.savepoint.moved import find_move
from statectl.savepoint.storage import locate


def open_savepoint(
    url: str, storage_options: dict[str, Any] | None = None, allow_external_files: bool = False
) -> Savepoint:
    """Read and parse `_metadata`; handles resolve against the folder that holds it (§2.10).
    `allow_external_files`: absolute handles may name files outside the checkpoint's folders
    (`Savepoint.absolute`). A retained checkpoint copied elsewhere with its job folder's layout
    is read from the copy, with a `StatectlNote` saying so (`moved.find_move`)."""
    location = locate(url, storage_options)
    if location.name == METADATA_FILE:
        metadata_location, directory = location, location.parent
    else:
        directory, metadata_location = location, location.child(METADATA_FILE)
    if not metadata_location.exists():
        if not directory.exists():
            raise SavepointError("no such file or directory", url)
        raise SavepointError(f"not a savepoint: no {METADATA_FILE} file", directory.url)
    data = metadata_location.read_bytes()
    try:
        metadata = read_metadata(data)
    except StatectlError as exc:
        raise exc.with_source(metadata_location.url) from None
    moved = find_move(directory, metadata, storage_options)
    if moved and moved.mapped:
        warnings.warn(moved.note, StatectlNote, stacklevel=3)  # where `statectl.open` is called
    return Savepoint(
        directory, _without_empty_segments(metadata), storage_options, allow_external_files, moved
    )


def _without_empty_segments(metadata: CheckpointMetadata) -> CheckpointMetadata:
    """With file merging on, Flink gives every operator without operator state an empty
    segment (code 17 over code 16, no states) and skips it on restore; so does statectl."""
    operators = []
    for op in metadata.operators:
        subtasks = op.subtasks and tuple(_drop_empty_operator_state(s) for s in op.subtasks)
        operators.append(dataclasses.replace(op, subtasks=subtasks))
    return dataclasses.replace(metadata, operators=tuple(operators))


def _drop_empty_operator_state(subtask: SubtaskState) -> SubtaskState:
    def kept(handle: OperatorStateHandle | None) -> OperatorStateHandle | None:
        if handle is None or handle.states:
            return handle
        return None if isinstance(handle.delegate, EmptySegmentFileHandle) else handle

    return dataclasses.replace(
        subtask,
        managed_operator_state=kept(subtask.managed_operator_state),
        raw_operator_state=kept(subtask.raw_operator_state),
    )
