"""Carrying operators over unchanged into a new savepoint: their handles renamed to copies.

Every file an operator's handles reference (a file, or one file-merging segment of one) gets one
copy in the new savepoint, referenced by a relative handle (code 6), so the output is
self-contained; inline state travels inside `_metadata`.
"""

from __future__ import annotations

import dataclasses

from statectl.errors import UnsupportedError
from statectl.formats import handles
from statectl.formats.metadata import OperatorState, SubtaskState
from statectl.savepoint.files import CopyTask
from statectl.savepoint.model import Savepoint, describe_operator


class CopyNames:
    """Names for copied files: one copy per distinct source stream (a file, or one
    file-merging segment of a file)."""

    def __init__(self, source: Savepoint) -> None:
        self.source = source
        self.tasks: list[CopyTask] = []
        self._by_source: dict[tuple[str, int, int], handles.RelativeFileHandle] = {}

    def relocate(
        self, handle: handles.StreamHandle | None, prefix: str
    ) -> handles.StreamHandle | None:
        if handle is None or isinstance(handle, handles.ByteStreamHandle):
            return handle  # inline state travels inside _metadata
        if isinstance(handle, handles.KeyGroupsHandle):
            return dataclasses.replace(handle, delegate=self.relocate(handle.delegate, prefix))
        stream = self.source.stream(handle)
        key = (stream.description, stream.start, stream.size)
        if key not in self._by_source:
            name = f"{prefix}-{len(self.tasks):05d}"
            self.tasks.append(CopyTask(stream, name))
            self._by_source[key] = handles.RelativeFileHandle(name, stream.size)
        return self._by_source[key]


def carry_over(op: OperatorState, names: CopyNames) -> OperatorState:
    if op.subtasks is None:
        return op
    prefix = op.operator_id_hex
    subtasks = tuple(
        _relocate_subtask(s, names, prefix, describe_operator(op)) for s in op.subtasks
    )
    return dataclasses.replace(op, subtasks=subtasks)


def _relocate_subtask(
    subtask: SubtaskState, names: CopyNames, prefix: str, where: str
) -> SubtaskState:
    if subtask.finished:
        return subtask
    if subtask.input_channel_states or subtask.output_channel_states:
        raise UnsupportedError(
            f"operator {where} has unaligned channel state; take a savepoint instead"
        )
    return dataclasses.replace(
        subtask,
        managed_operator_state=_relocate_operator_handle(
            subtask.managed_operator_state, names, prefix
        ),
        raw_operator_state=_relocate_operator_handle(subtask.raw_operator_state, names, prefix),
        managed_keyed_state=_relocate_keyed(subtask.managed_keyed_state, names, prefix, where),
        raw_keyed_state=_relocate_keyed(subtask.raw_keyed_state, names, prefix, where),
    )


def _relocate_operator_handle(
    handle: handles.OperatorStateHandle | None, names: CopyNames, prefix: str
) -> handles.OperatorStateHandle | None:
    if handle is None:
        return None
    # File-merging handles become plain ones over a copied file.
    code = handles.HandleCode.PARTITIONABLE_OPERATOR_STATE
    return handles.OperatorStateHandle(code, handle.states, names.relocate(handle.delegate, prefix))


def _relocate_keyed(
    handle: handles.KeyedHandle | None, names: CopyNames, prefix: str, where: str
) -> handles.KeyedHandle | None:
    if handle is None:
        return None
    if isinstance(handle, handles.KeyGroupsHandle):
        return dataclasses.replace(handle, delegate=names.relocate(handle.delegate, prefix))
    if isinstance(handle, handles.IncrementalKeyedHandle):
        return dataclasses.replace(
            handle,
            meta=names.relocate(handle.meta, prefix),
            shared=tuple(_relocate_local(f, names, prefix) for f in handle.shared),
            private=tuple(_relocate_local(f, names, prefix) for f in handle.private),
        )
    raise UnsupportedError(
        f"operator {where} has changelog state, which statectl cannot read; "
        "take a CANONICAL savepoint instead"
    )


def _relocate_local(file: handles.LocalFile, names: CopyNames, prefix: str) -> handles.LocalFile:
    return dataclasses.replace(file, handle=names.relocate(file.handle, prefix))
