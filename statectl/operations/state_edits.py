"""State-level edits: drop or rename a state, turn a keyed state's TTL on or off, replace the
entries of a state.

An edit names a state of an operator of the input. `plan_state_edits` resolves the edits
against the savepoint and says, per operator, what happens to each of its states: keyed
states through `keyed_rewrite.StateChange` (every subtask's keyed state written anew by
`keyed_rewrite.write_subtask`), operator list, union and broadcast states through
`operator_rewrite.OperatorStateChange` (every subtask's operator-state file written anew);
`migrate` carries the rest over as bytes.

- **drop**: the state leaves every subtask's header and its entries are left out, so a job
  that no longer declares it restores without it.
- **rename**: the header names it anew (a native instance's column family with it); entries
  are carried as bytes.
- **TTL on**: every value is wrapped with a last-access time (`TtlSerializer`: the i64 time,
  then the value) and the state's snapshot becomes `TtlSerializerSnapshot`; for a LIST each
  element, for a MAP each value (flink-state-values.md §5.1). Flink before 2.2 refuses to
  restore a state whose descriptor gained or lost TTL; after this it restores it as it is.
- **TTL off**: the inverse.
- **replace**: the state's entries are those of a table with the state's columns
  (`transform.replacement` encodes it).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from statectl.errors import FormatError, StatectlError
from statectl.formats import snapshot_edits
from statectl.formats.metadata import OperatorState
from statectl.formats.state_headers import StateMetaInfo
from statectl.formats.state_values import (
    DECODE_ERRORS,
    LIST_DELIMITER,
    MAP_NULL_VALUE,
    StateCodec,
    keyed_codec,
)
from statectl.formats.values import Codec, RawCodec
from statectl.savepoint import entries
from statectl.savepoint.keyed_rewrite import (
    ReplacedRows,
    StateChange,
    SubtaskRewrite,
    plan_subtask,
)
from statectl.savepoint.model import Savepoint
from statectl.savepoint.operator_rewrite import OperatorStateChange

if TYPE_CHECKING:
    import pyarrow as pa

    from statectl.formats.arrays import Int64s
    from statectl.formats.values.batch import Buffer, DelimitedList

DROP, RENAME, TTL_ON, TTL_OFF, REPLACE = "drop", "rename", "ttl", "no-ttl", "replace"
SCHEMA = "schema"  # the new job's types: `schema_migration`
_TTL_TIMESTAMP_BYTES = 8


@dataclass(frozen=True)
class RowFeed:
    """A replaced keyed state's new rows, made by the write's tasks rather than held here,
    from one of: `sources` (picklable: splits of the state, say), each of which `chunks` turns
    into chunks of encoded entries (key group, its number within the source, `entry_chunks`
    bytes) that the shuffle routes to the task writing their subtask; a Spark DataFrame of
    such chunks (`frame`: `key_group`, `seq`, `chunk`) made by Spark's own tasks; or `runs`."""

    describe_key: Callable[[bytes], str]
    sources: Sequence[Any] = ()
    chunks: Callable[[Any], Iterable[tuple[int, int, bytes]]] | None = None
    frame: Any = None
    # The report's lines for nulls the tasks wrote into POJO fields of classes not read.
    warnings: Callable[[Mapping[tuple[str, str], int]], tuple[str, ...]] = lambda _: ()
    # Instead of sources: chunks the tasks already sorted into run files (`entry_chunks`),
    # their URLs per subtask (by position), merged by the task writing it; and the nulls
    # those tasks counted (POJO class, field, rows).
    runs: Sequence[Sequence[str]] | None = None
    runs_notes: tuple[tuple[str, str, int], ...] = ()
    # The bytes a source's task reads, when its rows pass through Python (a function's
    # batches): the head start then gives large feeds to its worker processes.
    source_bytes: Callable[[Any], int] | None = None


@dataclass(frozen=True)
class StateEdit:
    """One requested change to one state (`operator`: uid, 32-hex id or name)."""

    operator: str
    state: str
    action: str  # DROP | RENAME | TTL_ON | TTL_OFF | REPLACE
    new_name: str | None = None  # RENAME
    ttl_ms: int | None = None  # TTL_ON: the time-to-live the job declares (shown, not stored)
    last_access: int | None = None  # TTL_ON: the last-access time written (epoch ms; now)
    rows: ReplacedRows | None = None  # REPLACE: new rows by key group
    feed: RowFeed | None = None  # REPLACE: new rows made by the write's tasks
    rows_count: int = 0
    # REPLACE of operator state: list/union elements by subtask, or the broadcast map's bytes
    elements: Mapping[int, Sequence[bytes]] | None = None
    broadcast: bytes | None = None
    warnings: tuple[str, ...] = ()  # what the edit may do that statectl could not check
    # SCHEMA: the state's new meta info and each stored value converted to it
    schema_meta: Callable[[StateMetaInfo], StateMetaInfo] | None = None
    schema_value: Callable[[bytes], bytes] | None = None
    nulls: int | None = None  # SCHEMA: values written as null (`--on-error null`)

    @property
    def option(self) -> str:
        """The edit as `migrate` takes it, for messages."""
        target = f"{self.operator}/{self.state}"
        if self.action == RENAME:
            return f"--rename-state {target}={self.new_name}"
        if self.action == TTL_ON:
            return f"--ttl {target}"
        if self.action == TTL_OFF:
            return f"--no-ttl {target}"
        if self.action == DROP:
            return f"--drop-state {target}"
        if self.action == SCHEMA:
            return f"the migration of {target} to the new job's types"
        return f"the edit of {target}"


@dataclass(frozen=True)
class StateEditReport:
    """What one edit does: `rows` are a replaced state's new entries."""

    operator: str  # the operator's label
    state: str
    action: str
    new_name: str | None = None
    rows: int | None = None
    warnings: tuple[str, ...] = ()
    nulls: int | None = None  # a schema migration's values written as null (`--on-error null`)


@dataclass(frozen=True)
class StateEditPlan:
    """Edits resolved: per operator (by id in the input), each subtask's rewrite."""

    rewrites: Mapping[bytes, tuple[SubtaskRewrite, ...]]
    edits: tuple[StateEdit, ...]
    labels: Mapping[bytes, str]
    reports: tuple[StateEditReport, ...]
    # operator (by id in the input) → its operator states' changes, for every subtask's file
    operator_changes: Mapping[bytes, Mapping[str, OperatorStateChange]] = field(
        default_factory=dict
    )


def plan_state_edits(source: Savepoint, edits: Sequence[StateEdit]) -> StateEditPlan:
    """Resolve `edits` against `source`: unknown operators or states, a state named twice, a
    state kind an edit cannot apply to, a new name taken are StatectlErrors naming the option."""
    changes: dict[bytes, dict[str, StateChange]] = {}
    operator_changes: dict[bytes, dict[str, OperatorStateChange]] = {}
    labels: dict[bytes, str] = {}
    reports: list[StateEditReport] = []
    for edit in edits:
        op = source.find_operator(edit.operator)
        label = labels[op.operator_id] = entries.operator_label(op)
        keyed, operator = _keyed_states(source, op), _operator_states(source, op)
        edited = {*changes.get(op.operator_id, {}), *operator_changes.get(op.operator_id, {})}
        if edit.state in edited:
            raise StatectlError(f"{edit.option}: state {edit.state!r} is edited twice", label)
        try:
            if edit.state in keyed:
                meta = keyed[edit.state]
                change = _change(edit, meta, _codec(source, op, meta))
                changes.setdefault(op.operator_id, {})[edit.state] = change
            elif edit.state in operator:
                operator_change = _operator_change(edit)
                operator_changes.setdefault(op.operator_id, {})[edit.state] = operator_change
            else:
                known = ", ".join(sorted({*keyed, *operator})) or "none"
                raise StatectlError(
                    f"{edit.option}: operator {label} has no state {edit.state!r} (its states: "
                    f"{known})",
                    source.directory.url,
                )
        except FormatError as exc:
            raise StatectlError(f"{edit.option}: {exc.message}", label) from None
        rows = edit.rows_count if edit.action == REPLACE else None
        reports.append(
            StateEditReport(
                label, edit.state, edit.action, edit.new_name, rows, edit.warnings, edit.nulls
            )
        )
    rewrites = {
        op_id: tuple(
            plan_subtask(file, mine)
            for file in entries.keyed_files(source, source.find_operator(op_id.hex()))
        )
        for op_id, mine in changes.items()
    }
    for op_id, mine in operator_changes.items():
        _check_operator_names(source, op_id, mine, labels[op_id])
    return StateEditPlan(rewrites, tuple(edits), labels, tuple(reports), operator_changes)


def _operator_states(source: Savepoint, op: OperatorState) -> dict[str, str]:
    """Operator state name → distribution mode, over every subtask's handle."""
    return {
        state.name: state.mode.name
        for subtask in source.subtasks(op)
        if subtask.managed_operator_state is not None
        for state in subtask.managed_operator_state.states
    }


def _operator_change(edit: StateEdit) -> OperatorStateChange:
    if edit.action == DROP:
        return OperatorStateChange(drop=True)
    if edit.action == RENAME:
        if not edit.new_name:
            raise FormatError("the new name is empty")
        return OperatorStateChange(new_name=edit.new_name)
    if edit.action == REPLACE:
        return OperatorStateChange(elements=edit.elements, broadcast=edit.broadcast)
    if edit.action == SCHEMA:
        return OperatorStateChange(meta=edit.schema_meta, value=edit.schema_value)
    raise FormatError(f"{edit.state!r} is operator state, which has no TTL")


def _check_operator_names(
    source: Savepoint, op_id: bytes, changes: Mapping[str, OperatorStateChange], label: str
) -> None:
    names = [
        changes[n].new_name or n if n in changes else n
        for n in _operator_states(source, source.find_operator(op_id.hex()))
        if not (n in changes and changes[n].drop)
    ]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise StatectlError(f"two operator states would be named {twice[0]!r}", label)


def _keyed_states(source: Savepoint, op: OperatorState) -> dict[str, StateMetaInfo]:
    states: dict[str, StateMetaInfo] = {}
    for file in entries.keyed_files(source, op):
        for state in file.header().states:
            states.setdefault(state.name, state)
    return states


def _codec(source: Savepoint, op: OperatorState, meta: StateMetaInfo) -> StateCodec:
    files = entries.keyed_files(source, op)
    key = files[0].header().key_serializer_snapshot if files else None
    return keyed_codec(meta, key, files[0].flink_major if files else None)


def _change(edit: StateEdit, meta: StateMetaInfo, codec: StateCodec) -> StateChange:
    if edit.action == DROP:
        return StateChange(drop=True)
    if edit.action == RENAME:
        return _rename(edit, meta)
    if edit.action == SCHEMA:
        return StateChange(meta=edit.schema_meta, value=edit.schema_value)
    if edit.action == REPLACE:
        if edit.feed is not None:
            return StateChange(fed=True)
        return StateChange(rows=edit.rows or {})
    if meta.kind == "TIMERS":
        raise FormatError(f"{meta.name!r} holds timers: TTL does not apply")
    if edit.action == TTL_ON:
        last_access = edit.last_access if edit.last_access is not None else _now_ms()
        return StateChange(
            meta=snapshot_edits.with_ttl,
            value=ttl_wrapper(meta.kind, codec, last_access),
            values=ttl_batch(meta.kind, codec, wrap=last_access),
        )
    if edit.action == TTL_OFF:
        return StateChange(
            meta=snapshot_edits.without_ttl,
            value=ttl_unwrapper(meta.kind, codec),
            values=ttl_batch(meta.kind, codec),
        )
    raise FormatError(f"unknown edit {edit.action!r}")


def _rename(edit: StateEdit, meta: StateMetaInfo) -> StateChange:
    new_name = edit.new_name or ""
    if not new_name:
        raise FormatError("the new name is empty")
    if meta.kind == "TIMERS" or new_name.startswith("_timer_state/"):
        raise FormatError("timer states are named by their timer service: rename the service")

    def renamed(state: StateMetaInfo) -> StateMetaInfo:
        return dataclasses.replace(state, name=new_name)

    return StateChange(meta=renamed)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


# --- TTL on stored values ------------------------------------------------------------------


def ttl_wrapper(kind: str, codec: StateCodec, last_access: int) -> Callable[[bytes], bytes]:
    """How each stored value of a `kind` state gains a last-access time."""
    stamp = (last_access & 0xFFFFFFFFFFFFFFFF).to_bytes(_TTL_TIMESTAMP_BYTES, "big")
    if codec.ttl:
        raise FormatError(f"the state has TTL already ({codec.describe()})")
    if kind == "MAP":
        return lambda value: _map_value(value, lambda rest: stamp + rest, "wrap")
    if kind == "LIST":
        element = _element_codec(codec)
        return lambda value: _join(stamp + e for e in _elements(element, value))
    return lambda value: stamp + value


def ttl_unwrapper(kind: str, codec: StateCodec) -> Callable[[bytes], bytes]:
    """How each stored value of a `kind` state loses its last-access time."""
    if not codec.ttl:
        raise FormatError(f"the state has no TTL ({codec.describe()})")
    if kind == "MAP":
        return lambda value: _map_value(value, _strip_timestamp, "unwrap")
    if kind == "LIST":
        element = _element_codec(codec)
        return lambda value: _join(_strip_timestamp(e) for e in _elements(element, value))
    return _strip_timestamp


@dataclass(frozen=True)
class TtlBatch:
    """`ttl_wrapper` (`wrap`: the last-access time) or `ttl_unwrapper` of a VALUE or MAP
    state's stored values, a batch at a time (an Arrow large_binary array), refusing the
    first value they refuse with the same error: the timestamp goes in or out at the value's
    start (a MAP value's: after its null flag)."""

    kind: str
    wrap: int | None = None

    def __call__(self, values: pa.Array) -> pa.Array:
        import pyarrow.compute as pc

        from statectl.formats.values.batch_encode import join

        at = 1 if self.kind == "MAP" else 0  # the null flag's byte
        end = self._refuse(values, at) + 1  # past every value's end
        head, rest = pc.binary_slice(values, 0, at), pc.binary_slice(values, at, end)
        if self.wrap is not None:
            stamp = (self.wrap & 0xFFFFFFFFFFFFFFFF).to_bytes(_TTL_TIMESTAMP_BYTES, "big")
            return join(head, stamp, rest)
        return join(head, pc.binary_slice(values, at + _TTL_TIMESTAMP_BYTES, end))

    def _refuse(self, values: pa.Array, at: int) -> int:
        """The error `_map_value` or `_strip_timestamp` raises for the first value they
        refuse, if any; else the longest value's length."""
        import numpy as np

        from statectl.formats.values.batch_encode import data_of, lengths_of, offsets_of

        lengths = lengths_of(values)
        empty = (lengths == 0) if at else np.zeros(len(lengths), np.bool_)
        data = np.append(data_of(values), np.uint8(0))  # a first byte for empty values too
        null = ~empty & (data[offsets_of(values)[:-1]] == MAP_NULL_VALUE) if at else empty
        short = lengths < at + _TTL_TIMESTAMP_BYTES if self.wrap is None else np.zeros_like(empty)
        refused = empty | null | short
        if not refused.any():
            return int(lengths.max(initial=0))
        first = int(refused.argmax())
        if empty[first]:
            raise FormatError("map value without its null flag")
        if null[first]:
            what = "unwrap" if self.wrap is None else "wrap"
            raise FormatError(
                f"a null map value: TTL cannot {what} it (Flink stores no time for it)"
            )
        length = int(lengths[first]) - at
        raise FormatError(f"a TTL value of {length} bytes has no last-access time")


@dataclass(frozen=True)
class ListTtlBatch:
    """`ttl_wrapper` (`wrap`: the last-access time) or `ttl_unwrapper` of a LIST state's stored
    values a batch at a time: the batch reader of the elements' type finds where each element
    starts, and the timestamp goes in (or out) there. A batch holding a list the reader cannot
    take (or, unwrapping, an element too short for a timestamp) is changed value by value by
    `each`, which gives the same bytes, or the error at the first value refused."""

    elements: DelimitedList
    each: Callable[[bytes], bytes]
    wrap: int | None = None

    def __call__(self, values: pa.Array) -> pa.Array:
        import numpy as np
        import pyarrow.compute as pc

        from statectl.formats.values.batch import Buffer
        from statectl.formats.values.batch_encode import data_of, join, offsets_of

        offsets = offsets_of(values)
        buf = Buffer(data_of(values)[: offsets[-1]].data)
        live = np.ones(len(values), np.bool_)
        rows, starts, bad = self.elements.element_starts(buf, offsets[:-1], offsets[1:], live)
        if bad.any():
            return self._each(values)
        if not len(rows):
            return values  # empty lists stay empty
        pieces, lengths = _element_pieces(buf, offsets, rows, starts)
        if self.wrap is not None:
            stamp = (self.wrap & 0xFFFFFFFFFFFFFFFF).to_bytes(_TTL_TIMESTAMP_BYTES, "big")
            changed = join(stamp, pieces)
        elif (lengths < _TTL_TIMESTAMP_BYTES).any():
            return self._each(values)
        else:
            changed = pc.binary_slice(pieces, _TTL_TIMESTAMP_BYTES, int(offsets[-1]) + 1)
        return _joined_per_row(changed, rows, len(values))

    def _each(self, values: pa.Array) -> pa.Array:
        from statectl.formats.values.batch_encode import binary_rows

        return binary_rows([self.each(value) for value in values.to_pylist()])


def _element_pieces(
    buf: Buffer, offsets: Int64s, rows: Int64s, starts: Int64s
) -> tuple[pa.Array, Int64s]:
    """Each element's piece of its list (from its start to the next one's: its delimiter
    included), and the element's length (without the delimiter)."""
    import numpy as np
    import pyarrow as pa

    from statectl.formats.values.batch import binary_array
    from statectl.formats.values.batch_encode import BINARY

    last = np.append(rows[1:] != rows[:-1], True)  # of its list
    ends = np.append(starts[1:], 0)
    ends[last] = offsets[1:][rows[last]]
    pieces = binary_array(pa.binary(), buf, starts, ends - starts, np.ones(len(rows), np.bool_))
    return pieces.cast(BINARY), ends - starts - ~last


def _joined_per_row(pieces: pa.Array, rows: Int64s, count: int) -> pa.Array:
    """The pieces of each of `count` rows (`rows`: each piece's, ascending) joined."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    from statectl.formats.values.batch_encode import BINARY, binary_rows

    bounds = np.zeros(count + 1, np.int32)
    np.cumsum(np.bincount(rows, minlength=count), out=bounds[1:])
    lists = pa.Array.from_buffers(
        pa.list_(BINARY), count, [None, pa.py_buffer(bounds)], children=[pieces]
    )
    no_separator = binary_rows([b""])[0]  # pa.scalar(b"") would import pandas
    return pc.binary_join(lists, no_separator)


def ttl_batch(
    kind: str, codec: StateCodec, wrap: int | None = None
) -> TtlBatch | ListTtlBatch | None:
    """The batch form of a TTL change of a `kind` state's values (None: a LIST whose elements
    have no batch reader, changed value by value)."""
    if kind in ("VALUE", "MAP", "REDUCING", "AGGREGATING"):
        return TtlBatch(kind, wrap)
    if kind != "LIST":
        return None
    from statectl.formats.values.batch import list_reader_for

    reader = list_reader_for(codec.value)
    if reader is None:
        return None
    if wrap is None:
        return ListTtlBatch(reader, ttl_unwrapper(kind, codec))
    return ListTtlBatch(reader, ttl_wrapper(kind, codec, wrap), wrap)


def _strip_timestamp(value: bytes) -> bytes:
    if len(value) < _TTL_TIMESTAMP_BYTES:
        raise FormatError(f"a TTL value of {len(value)} bytes has no last-access time")
    return value[_TTL_TIMESTAMP_BYTES:]


def _map_value(value: bytes, change: Callable[[bytes], bytes], what: str) -> bytes:
    """A MAP entry's stored value is a null flag, then the value (`state_values.map_value`)."""
    if not value:
        raise FormatError("map value without its null flag")
    if value[0] == MAP_NULL_VALUE:
        raise FormatError(f"a null map value: TTL cannot {what} it (Flink stores no time for it)")
    return value[:1] + change(value[1:])


def _element_codec(codec: StateCodec) -> Codec:
    """The codec that finds where each element of a stored list ends."""
    element = codec.value
    if element is None or isinstance(element, RawCodec):
        reason = element.reason if isinstance(element, RawCodec) else "no serializer"
        raise FormatError(f"cannot find where the list's elements end ({reason})")
    return element


def _elements(element: Codec, value: bytes) -> list[bytes]:
    """The bytes of each element of a stored list (`,`-joined, not escaped: read to find ends)."""
    view = memoryview(value)
    parts: list[bytes] = []
    pos = 0
    while pos < len(view):
        try:
            _, end = element.read(view, pos)
        except DECODE_ERRORS as exc:
            raise FormatError(f"list element at offset {pos} is damaged ({exc})") from None
        parts.append(bytes(view[pos:end]))
        pos = end
        if pos < len(view):
            if view[pos] != LIST_DELIMITER:
                raise FormatError(f"list element not followed by ',' at offset {pos}")
            pos += 1
    return parts


def _join(parts: object) -> bytes:
    return bytes([LIST_DELIMITER]).join(parts)  # type: ignore[arg-type]
