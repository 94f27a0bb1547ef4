"""Serializer snapshots changed for a state-level migration: TTL turned on or off.

A state with TTL has its value serializer wrapped in `TtlStateFactory.TtlSerializer`, whose
snapshot (`TtlSerializerSnapshot`, a `CompositeTypeSerializerSnapshot`, outer version 2, no outer
payload) nests `LongSerializer` (the last-access time) and the user serializer. Which serializer
is wrapped depends on the state kind (flink-state-values.md §5.1): the value of VALUE, REDUCING
and AGGREGATING state, the element of a LIST (`ListSerializerSnapshot`) and the value of a MAP
(`MapSerializerSnapshot`). List and map snapshots are composites without an outer payload, so
they are rebuilt around their new nested snapshot byte for byte as Flink writes them
(`CompositeTypeSerializerSnapshot.writeSnapshot`, `NestedSerializersSnapshotDelegate`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from statectl.errors import FormatError
from statectl.formats.java_io import DataReader, DataWriter
from statectl.formats.serializer_snapshots import (
    SerializerSnapshot,
    at_end,
    composite,
    read_versioned_snapshot,
)
from statectl.formats.state_headers import StateMetaInfo

TTL_SNAPSHOT = "org.apache.flink.runtime.state.ttl.TtlStateFactory$TtlSerializerSnapshot"
TTL_SNAPSHOT_VERSION = 3  # CompositeTypeSerializerSnapshot.VERSION
TTL_OUTER_VERSION = 2  # TtlSerializerSnapshot.CURRENT_VERSION
LONG_SNAPSHOT = "org.apache.flink.api.common.typeutils.base.LongSerializer$LongSerializerSnapshot"
LONG_SNAPSHOT_VERSION = 3  # SimpleTypeSerializerSnapshot's current version
_BASE = "org.apache.flink.api.common.typeutils.base."
LIST_SNAPSHOT = _BASE + "ListSerializerSnapshot"
MAP_SNAPSHOT = _BASE + "MapSerializerSnapshot"
TTL_KINDS = ("VALUE", "LIST", "MAP", "REDUCING", "AGGREGATING")


def has_ttl(state: StateMetaInfo) -> bool:
    """Whether the state's values carry a last-access time."""
    wrapped = _wrapped_slot(state)
    return wrapped is not None and wrapped.class_name == TTL_SNAPSHOT


def with_ttl(state: StateMetaInfo) -> StateMetaInfo:
    """The state's meta info with its values wrapped in `TtlSerializer`."""
    user = _wrapped_slot(state)
    if user is None:
        raise FormatError(f"state {state.name!r}: {state.kind} state cannot have TTL")
    if user.class_name == TTL_SNAPSHOT:
        raise FormatError(f"state {state.name!r} has TTL already")
    return _replace_slot(state, ttl_snapshot(user))


def without_ttl(state: StateMetaInfo) -> StateMetaInfo:
    """The state's meta info with `TtlSerializer` unwrapped from its values."""
    wrapped = _wrapped_slot(state)
    if wrapped is None or wrapped.class_name != TTL_SNAPSHOT:
        raise FormatError(f"state {state.name!r} has no TTL")
    if len(wrapped.nested) != 2 or not wrapped.complete:
        raise FormatError(f"state {state.name!r}: its TTL serializer snapshot was not understood")
    return _replace_slot(state, wrapped.nested[1])


def ttl_snapshot(user: SerializerSnapshot) -> SerializerSnapshot:
    """`TtlSerializerSnapshot` nesting `LongSerializer` and `user`."""
    long_snapshot = DataWriter()
    long_snapshot.write_utf(LONG_SNAPSHOT)
    long_snapshot.write_i32(LONG_SNAPSHOT_VERSION)
    timestamp = read_versioned_snapshot(DataReader(long_snapshot.getvalue()), at_end)
    return composite(TTL_SNAPSHOT, TTL_OUTER_VERSION, b"", [timestamp, user], TTL_SNAPSHOT_VERSION)


def _wrapped_slot(state: StateMetaInfo) -> SerializerSnapshot | None:
    """The snapshot TTL wraps (or has wrapped) for this state's kind; None where none can."""
    value = state.value_serializer
    if state.kind not in TTL_KINDS or value is None:
        return None
    if state.kind == "LIST":
        return _nested_at(value, LIST_SNAPSHOT, 1, 0)
    if state.kind == "MAP":
        return _nested_at(value, MAP_SNAPSHOT, 2, 1)
    return value


def _nested_at(
    snapshot: SerializerSnapshot, class_name: str, count: int, index: int
) -> SerializerSnapshot:
    if snapshot.class_name != class_name or len(snapshot.nested) != count:
        raise FormatError(f"expected a {class_name.rsplit('.', 1)[-1]}, found {snapshot.label}")
    return snapshot.nested[index]


def _replace_slot(state: StateMetaInfo, new: SerializerSnapshot) -> StateMetaInfo:
    value = state.value_serializer
    assert value is not None
    if state.kind == "LIST":
        new = _rebuilt(value, [new])
    elif state.kind == "MAP":
        new = _rebuilt(value, [value.nested[0], new])
    serializers = {**state.serializers, "VALUE_SERIALIZER": new}
    return dataclasses.replace(state, serializers=serializers)


def _rebuilt(outer: SerializerSnapshot, nested: Sequence[SerializerSnapshot]) -> SerializerSnapshot:
    """A list or map snapshot around new nested snapshots, its versions kept."""
    outer_version = outer.param("outer_version")
    if outer_version is None:
        raise FormatError(f"the snapshot of {outer.label} was not read as a composite")
    return composite(outer.class_name, outer_version, b"", nested, outer.version)
