"""One subtask's operator-state file written anew with some of its states changed.

Per state (by its name in the input): dropped, renamed, or its elements replaced (a list or
union state's elements on this subtask, a broadcast state's whole map). The header is the
input's with those changes (`state_headers.write_operator_header`), written uncompressed;
every other state's elements are carried as bytes. Operator state is small by Flink's design
(it travels through the JobManager), so the file is built in memory.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from statectl.errors import StatectlError
from statectl.formats import operator_state, state_headers
from statectl.formats.handles import (
    ByteStreamHandle,
    HandleCode,
    OperatorStateHandle,
    OperatorStateOffsets,
    RelativeFileHandle,
)
from statectl.formats.state_headers import StateMetaInfo
from statectl.savepoint.entries import OperatorFile
from statectl.savepoint.storage import Location


@dataclass(frozen=True)
class OperatorStateChange:
    """What happens to one operator state (by its name in the input) on every subtask."""

    drop: bool = False
    new_name: str | None = None
    # Replaced elements by subtask (list and union state; a subtask not named gets none), or
    # the broadcast map's bytes every subtask holds.
    elements: Mapping[int, Sequence[bytes]] | None = None
    broadcast: bytes | None = None
    # The state's meta info changed (its serializers), and each element (or map) to match.
    meta: Callable[[StateMetaInfo], StateMetaInfo] | None = None
    value: Callable[[bytes], bytes] | None = None

    @property
    def replaces(self) -> bool:
        return self.elements is not None or self.broadcast is not None


def rewrite_file(
    file: OperatorFile, changes: Mapping[str, OperatorStateChange], output: Location, name: str
) -> OperatorStateHandle:
    """The subtask's new operator-state file (or inline stream, if it was inline)."""
    stream = file.stream
    try:
        data = stream.read()
        layout = operator_state.file_layout(file.handle.states, stream.size, data)
        header = state_headers.parse_operator_header(data[: layout.header_length])
        out = bytearray(state_headers.write_operator_header(_new_header(header, changes)))
        states = []
        for state in layout.states:
            change = changes.get(state.name, OperatorStateChange())
            if change.drop:
                continue
            offsets = []
            for value in _elements(file, state, data, layout.compressed, change):
                offsets.append(len(out))
                out += value
            new_name = change.new_name or state.name
            states.append(OperatorStateOffsets(new_name, state.mode, tuple(offsets)))
    except StatectlError as exc:
        raise exc.with_source(stream.description) from None
    code = HandleCode.PARTITIONABLE_OPERATOR_STATE
    if isinstance(file.handle.delegate, ByteStreamHandle):  # inline state stays inline
        inline = ByteStreamHandle(file.handle.delegate.name, bytes(out))
        return OperatorStateHandle(code, tuple(states), inline)
    output.child(name).fs.pipe_file(output.child(name).path, bytes(out))
    return OperatorStateHandle(code, tuple(states), RelativeFileHandle(name, len(out)))


def _new_header(
    header: state_headers.OperatorStateHeader, changes: Mapping[str, OperatorStateChange]
) -> state_headers.OperatorStateHeader:
    def kept(states: tuple[StateMetaInfo, ...]) -> tuple[StateMetaInfo, ...]:
        out = []
        for state in states:
            change = changes.get(state.name, OperatorStateChange())
            if change.drop:
                continue
            if change.meta is not None:
                state = change.meta(state)
            if change.new_name:
                state = dataclasses.replace(state, name=change.new_name)
            out.append(state)
        return tuple(out)

    return dataclasses.replace(
        header,
        compressed=False,
        list_states=kept(header.list_states),
        broadcast_states=kept(header.broadcast_states),
    )


def _elements(
    file: OperatorFile,
    state: operator_state.StateElements[operator_state.Span],
    data: bytes,
    compressed: bool,
    change: OperatorStateChange,
) -> Sequence[bytes]:
    if change.broadcast is not None:
        return [change.broadcast]
    if change.elements is not None:
        return change.elements.get(file.subtask, ())
    stored = [operator_state.element_bytes(data[a:b], compressed) for a, b in state.spans]
    return [change.value(value) for value in stored] if change.value else stored
