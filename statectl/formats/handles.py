"""State handles as they appear in `_metadata`, one dataclass per handle code.

Mirrors the handle (de)serialization of Flink's `MetadataV2V3SerializerBase`
(flink-savepoint-format.md §2.9). The dataclasses carry every serialized field so
that reading and writing a `_metadata` file round-trips byte for byte.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import ClassVar


class HandleCode(IntEnum):
    NULL = 0
    BYTE_STREAM = 1
    FILE_STREAM = 2
    KEY_GROUPS = 3
    PARTITIONABLE_OPERATOR_STATE = 4
    INCREMENTAL_KEY_GROUPS = 5
    RELATIVE_STREAM = 6
    SAVEPOINT_KEY_GROUPS = 7
    CHANGELOG = 8
    CHANGELOG_BYTE_INCREMENT = 9
    CHANGELOG_FILE_INCREMENT = 10
    INCREMENTAL_KEY_GROUPS_V2 = 11
    KEY_GROUPS_V2 = 12
    CHANGELOG_FILE_INCREMENT_V2 = 13
    CHANGELOG_V2 = 14
    SEGMENT_FILE = 15
    EMPTY_SEGMENT_FILE = 16
    SEGMENT_PARTITIONABLE_OPERATOR_STATE = 17


# --- stream state handles: where the bytes of one state stream live -----------------------


@dataclass(frozen=True, slots=True)
class ByteStreamHandle:
    """Code 1: state bytes inlined in `_metadata`."""

    name: str
    data: bytes

    @property
    def size(self) -> int:
        return len(self.data)


@dataclass(frozen=True, slots=True)
class FileHandle:
    """Code 2: an absolute path or URI (checkpoints, `shared/` files)."""

    path: str
    size: int


@dataclass(frozen=True, slots=True)
class RelativeFileHandle:
    """Code 6: a file name relative to the directory that holds `_metadata`."""

    relative_path: str
    size: int


@dataclass(frozen=True, slots=True)
class SegmentFileHandle:
    """Code 15: bytes [start, start + size) of a shared physical file (file merging)."""

    start: int
    size: int
    scope: int
    physical_path: str
    logical_file_id: str


@dataclass(frozen=True, slots=True)
class EmptySegmentFileHandle:
    """Code 16: file-merging placeholder without bytes."""

    size: int = 0


# --- keyed state handles ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class KeyGroupsHandle:
    """Codes 7 (canonical savepoint), 12 (full checkpoint, with id) and 3 (legacy).

    `offsets[i]` is where key group `start_key_group + i` begins in the delegate stream;
    0 means the key group is empty.
    """

    code: int
    start_key_group: int
    offsets: tuple[int, ...]
    delegate: StreamHandle | None
    handle_id: str | None = None

    @property
    def key_groups(self) -> tuple[int, int] | None:
        """Inclusive [start, end], or None for an empty range."""
        if not self.offsets:
            return None
        return (self.start_key_group, self.start_key_group + len(self.offsets) - 1)


# A legacy KeyGroupsHandle (code 3) may stand where a stream handle is expected.
StreamHandle = (
    ByteStreamHandle
    | FileHandle
    | RelativeFileHandle
    | SegmentFileHandle
    | EmptySegmentFileHandle
    | KeyGroupsHandle
)


@dataclass(frozen=True, slots=True)
class LocalFile:
    """A file of a RocksDB instance: its name inside the instance folder and where it lives."""

    local_path: str
    handle: StreamHandle | None


@dataclass(frozen=True, slots=True)
class IncrementalKeyedHandle:
    """Codes 11 and 5 (legacy): a RocksDB instance (native savepoint or incremental checkpoint)."""

    code: int
    checkpoint_id: int
    backend_id: str
    start_key_group: int
    num_key_groups: int
    checkpointed_size: int | None
    meta: StreamHandle | None
    shared: tuple[LocalFile, ...]
    private: tuple[LocalFile, ...]
    handle_id: str | None

    @property
    def key_groups(self) -> tuple[int, int] | None:
        if self.num_key_groups <= 0:
            return None
        return (self.start_key_group, self.start_key_group + self.num_key_groups - 1)


@dataclass(frozen=True, slots=True)
class ChangelogHandle:
    """Codes 14 and 8 (legacy, no checkpoint id): materialized part plus changelog increments."""

    code: int
    start_key_group: int
    num_key_groups: int
    checkpointed_size: int
    materialized: tuple[KeyedHandle | None, ...]
    non_materialized: tuple[KeyedHandle | None, ...]
    materialization_id: int
    checkpoint_id: int | None
    handle_id: str


@dataclass(frozen=True, slots=True)
class ChangelogByteIncrementHandle:
    """Code 9: in-memory changelog with (key group, change bytes) pairs."""

    code: ClassVar[int] = 9
    start_key_group: int
    num_key_groups: int
    from_sequence: int
    to_sequence: int
    changes: tuple[tuple[int, bytes], ...]
    handle_id: str


@dataclass(frozen=True, slots=True)
class ChangelogFileIncrementHandle:
    """Codes 13 and 10 (legacy, no storage id): changelog stored in files."""

    code: int
    start_key_group: int
    num_key_groups: int
    handles_and_offsets: tuple[tuple[StreamHandle | None, int], ...]
    state_size: int
    checkpointed_size: int
    handle_id: str
    storage_id: str | None


KeyedHandle = (
    KeyGroupsHandle
    | IncrementalKeyedHandle
    | ChangelogHandle
    | ChangelogByteIncrementHandle
    | ChangelogFileIncrementHandle
)


# --- operator state handles --------------------------------------------------------------


class DistributionMode(IntEnum):
    """`OperatorStateHandle.Mode` ordinals."""

    SPLIT_DISTRIBUTE = 0
    UNION = 1
    BROADCAST = 2


@dataclass(frozen=True, slots=True)
class OperatorStateOffsets:
    """One operator state in a handle: element offsets (list state) or the map's offset."""

    name: str
    mode: DistributionMode
    offsets: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class OperatorStateHandle:
    """Codes 4 and 17 (file merging, with directory strings and an empty flag)."""

    code: int
    states: tuple[OperatorStateOffsets, ...]
    delegate: StreamHandle | None
    task_owned_dir: str | None = None
    shared_dir: str | None = None
    is_empty: bool | None = None


def stream_size(handle: StreamHandle | None) -> int:
    """Bytes behind a stream handle (0 for none)."""
    if handle is None or isinstance(handle, KeyGroupsHandle):
        return 0 if handle is None else stream_size(handle.delegate)
    return handle.size
