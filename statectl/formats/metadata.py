"""The `_metadata` file: reading and writing versions 3 to 7, byte for byte.

Mirrors Flink's `Checkpoints`, `MetadataV3Serializer` … `MetadataV7Serializer`,
`MetadataV2V3SerializerBase` and `ChannelStateHandleSerializerV1/V2`
(flink-savepoint-format.md §2). Every field is kept, including the V4+ Java-serialized
`CheckpointProperties` tail, so `write_metadata(read_metadata(b)) == b` for files Flink wrote.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, TypeVar

from statectl.errors import FormatError, UnsupportedError
from statectl.formats import java_serialization
from statectl.formats.handles import (
    ByteStreamHandle,
    ChangelogByteIncrementHandle,
    ChangelogFileIncrementHandle,
    ChangelogHandle,
    DistributionMode,
    EmptySegmentFileHandle,
    FileHandle,
    HandleCode,
    IncrementalKeyedHandle,
    KeyedHandle,
    KeyGroupsHandle,
    LocalFile,
    OperatorStateHandle,
    OperatorStateOffsets,
    RelativeFileHandle,
    SegmentFileHandle,
    StreamHandle,
)
from statectl.formats.java_io import DataReader, DataWriter

MAGIC = 0x4960672D
MASTER_STATE_MAGIC = 0xC96B1696 - (1 << 32)  # written with writeInt: a negative int
SUPPORTED_VERSIONS = (3, 4, 5, 6, 7)

T = TypeVar("T")

# The fewest bytes one element of a counted list takes (a count is refused when that many
# elements cannot fit in the rest of the file).
_OFFSET_SIZE = 8  # an i64
_MASTER_STATE_MIN = 8  # i32 magic, i32 length
_OPERATOR_MIN = 29  # 16-byte id, i32 parallelism, i32 max parallelism, handle code, i32 count
_SUBTASK_MIN = 4  # a finished subtask is its i32 index alone
_LOCAL_FILE_MIN = 3  # u16 path length, handle code
_CHANGE_MIN = 8  # i32 key group, i32 length
_CHANGELOG_FILE_MIN = 9  # i64 offset, handle code
_OPERATOR_OFFSETS_MIN = 7  # u16 name length, u8 mode, i32 offset count
_CHANNEL_MIN = 18  # V6 merged: u8 type, i32 index, i64 size, handle code, i32 length


@dataclass(frozen=True, slots=True)
class MasterState:
    version: int
    name: str
    payload: bytes


@dataclass(frozen=True, slots=True)
class ChannelStateHandle:
    """Unaligned-checkpoint channel state; kept opaque but complete for round trips.

    `kind` is the V6+ type byte (1 input, 2 output, 3/4 merged) or None for V3–V5 entries.
    Unmerged entries use `info`, `offsets`; merged ones keep their serialized `offsets_blob`.
    """

    kind: int | None
    subtask_index: int
    info: tuple[int, int] | None
    offsets: tuple[int, ...]
    state_size: int
    delegate: StreamHandle | None
    offsets_blob: bytes | None = None


@dataclass(frozen=True, slots=True)
class SubtaskState:
    index: int
    finished: bool = False
    managed_operator_state: OperatorStateHandle | None = None
    raw_operator_state: OperatorStateHandle | None = None
    managed_keyed_state: KeyedHandle | None = None
    raw_keyed_state: KeyedHandle | None = None
    input_channel_states: tuple[ChannelStateHandle, ...] = ()
    output_channel_states: tuple[ChannelStateHandle, ...] = ()
    ref_checkpoint_id: int | None = None  # V7 only


@dataclass(frozen=True, slots=True)
class OperatorState:
    operator_id: bytes  # 16 bytes: lowerPart ‖ upperPart, big-endian (= murmur3_128 of the uid)
    parallelism: int
    max_parallelism: int
    coordinator_state: ByteStreamHandle | None
    subtasks: tuple[SubtaskState, ...] | None  # None: the operator is fully finished
    name: str | None = None  # V5+
    uid: str | None = None  # V5+

    @property
    def operator_id_hex(self) -> str:
        return self.operator_id.hex()


@dataclass(frozen=True, slots=True)
class CheckpointMetadata:
    version: int
    checkpoint_id: int
    master_states: tuple[MasterState, ...]
    operators: tuple[OperatorState, ...]
    properties: bytes = b""  # V4+: Java-serialized CheckpointProperties, copied verbatim


# ---------------------------------------------------------------------------------------
# reading
# ---------------------------------------------------------------------------------------


# The properties tail of a CANONICAL savepoint's `_metadata` (Java-serialized
# CheckpointProperties with SavepointType CANONICAL), byte for byte as Flink 1.20 and 2.3 write
# it (tests/formats/test_metadata.py compares it with theirs): what a V3 `_metadata`, which has
# no tail, gets when it is written as V6 (`statectl upgrade`).
CANONICAL_SAVEPOINT_PROPERTIES = bytes.fromhex(
    "aced0005737200386f72672e6170616368652e666c696e6b2e72756e74696d652e636865636b706f696e742e"
    "436865636b706f696e7450726f7065727469657300000000000000020200085a00106469736361726443616e"
    "63656c6c65645a000d646973636172644661696c65645a000f6469736361726446696e69736865645a000f64"
    "69736361726453756273756d65645a00106469736361726453757370656e6465645a0006666f726365645a00"
    "09756e636c61696d65644c000e636865636b706f696e74547970657400324c6f72672f6170616368652f666c"
    "696e6b2f72756e74696d652f636865636b706f696e742f536e617073686f74547970653b7870000000000001"
    "00737200316f72672e6170616368652e666c696e6b2e72756e74696d652e636865636b706f696e742e536176"
    "65706f696e7454797065a087d308a45814b80200034c000a666f726d6174547970657400354c6f72672f6170"
    "616368652f666c696e6b2f636f72652f657865637574696f6e2f53617665706f696e74466f726d6174547970"
    "653b4c00046e616d657400124c6a6176612f6c616e672f537472696e673b4c0014706f7374436865636b706f"
    "696e74416374696f6e7400484c6f72672f6170616368652f666c696e6b2f72756e74696d652f636865636b70"
    "6f696e742f53617665706f696e745479706524506f7374436865636b706f696e74416374696f6e3b78707e72"
    "00336f72672e6170616368652e666c696e6b2e636f72652e657865637574696f6e2e53617665706f696e7446"
    "6f726d61745479706500000000000000001200007872000e6a6176612e6c616e672e456e756d000000000000"
    "0000120000787074000943414e4f4e4943414c74000953617665706f696e747e7200466f72672e6170616368"
    "652e666c696e6b2e72756e74696d652e636865636b706f696e742e53617665706f696e745479706524506f73"
    "74436865636b706f696e74416374696f6e00000000000000001200007871007e00097400044e4f4e45"
)


def read_metadata(data: bytes | bytearray | memoryview) -> CheckpointMetadata:
    """Parse a whole `_metadata` file. Raises FormatError naming the byte offset at fault."""
    reader = DataReader(data)
    magic = reader.read_i32()
    if magic & 0xFFFFFFFF != MAGIC:
        raise FormatError(f"bad magic number 0x{magic & 0xFFFFFFFF:08X}, expected 0x{MAGIC:08X}")
    version = reader.read_i32()
    if version not in SUPPORTED_VERSIONS:
        raise UnsupportedError(
            f"unsupported metadata version {version} "
            f"(statectl reads {SUPPORTED_VERSIONS[0]}–{SUPPORTED_VERSIONS[-1]})"
        )
    return _MetadataReader(reader, version).read()


@dataclass(frozen=True, slots=True)
class SnapshotKind:
    """What the CheckpointProperties tail says: a savepoint (with its format) or a checkpoint."""

    savepoint: bool
    format: str | None  # CANONICAL / NATIVE for savepoints


def snapshot_kind(properties: bytes) -> SnapshotKind | None:
    """Decoded from the V4+ tail; None for V3 (no tail)."""
    if not properties:
        return None
    (root,) = java_serialization.read_object_stream(properties)[:1]
    checkpoint_type = getattr(root, "fields", {}).get("checkpointType")
    fields = getattr(checkpoint_type, "fields", {})
    is_savepoint = getattr(checkpoint_type, "class_name", "").endswith(".SavepointType")
    return SnapshotKind(is_savepoint, fields.get("formatType") if is_savepoint else None)


def _check_properties(properties: bytes, offset: int) -> None:
    """The tail runs to EOF, so a cut there is only visible by parsing it."""
    try:
        objects = java_serialization.read_object_stream(properties)
    except FormatError as exc:
        raise FormatError(f"checkpoint properties at offset {offset}: {exc}") from None
    if len(objects) != 1:
        count = len(objects)
        raise FormatError(f"checkpoint properties at offset {offset}: {count} objects, not 1")


class _MetadataReader:
    def __init__(self, reader: DataReader, version: int) -> None:
        self.r = reader
        self.version = version

    def read(self) -> CheckpointMetadata:
        r = self.r
        checkpoint_id = r.read_i64()
        if checkpoint_id < 0:
            raise FormatError(f"negative checkpoint id {checkpoint_id} at offset {r.pos - 8}")
        master_states = self._list(self._master_state, "master states", _MASTER_STATE_MIN)
        operators = self._list(self._operator_state, "operator states", _OPERATOR_MIN)
        properties = b""
        if self.version >= 4:
            start = r.pos
            properties = r.read_rest()
            _check_properties(properties, start)
        if self.version == 3 and not r.at_end():
            raise FormatError(f"{r.remaining()} unexpected bytes after the last operator")
        return CheckpointMetadata(self.version, checkpoint_id, master_states, operators, properties)

    def _count(self, what: str, element_size: int = 1, allow_minus_one: bool = False) -> int:
        """An i32 count of elements that each take at least `element_size` bytes; checked
        against the bytes left before anything is read or allocated for them."""
        at = self.r.pos
        count = self.r.read_i32()
        if count < 0 and not (allow_minus_one and count == -1):
            raise FormatError(f"negative number of {what} ({count}) at offset {at}")
        if count * element_size > self.r.remaining():
            raise FormatError(
                f"{what} count {count} at offset {at} exceeds the file size "
                f"({self.r.remaining()} bytes left)"
            )
        return count

    def _list(self, read_one: Callable[[], T], what: str, element_size: int = 1) -> tuple[T, ...]:
        return tuple(read_one() for _ in range(self._count(what, element_size)))

    def _master_state(self) -> MasterState:
        r = self.r
        at = r.pos
        if r.read_i32() != MASTER_STATE_MAGIC:
            raise FormatError(f"bad master state magic number at offset {at}")
        length = r.read_i32()
        if length <= 0:
            raise FormatError(f"invalid master state length {length} at offset {at + 4}")
        inner = DataReader(r.read_bytes(length))
        version = inner.read_i32()
        name = inner.read_utf()
        payload = inner.read_bytes(inner.read_i32())
        if not inner.at_end():
            raise FormatError(f"trailing bytes in master state at offset {at}")
        return MasterState(version, name, payload)

    def _operator_state(self) -> OperatorState:
        r = self.r
        name = uid = None
        if self.version >= 5:
            name = r.read_utf() or None
            uid = r.read_utf() or None
        operator_id = r.read_bytes(16)
        parallelism = r.read_i32()
        max_parallelism = r.read_i32()
        at = r.pos
        coordinator = self.stream_handle()
        if coordinator is not None and not isinstance(coordinator, ByteStreamHandle):
            raise FormatError(f"coordinator state at offset {at} is not an inline byte stream")
        count = self._count("subtask states", _SUBTASK_MIN, allow_minus_one=True)
        subtasks = None if count == -1 else tuple(self._subtask_state() for _ in range(count))
        return OperatorState(
            operator_id, parallelism, max_parallelism, coordinator, subtasks, name, uid
        )

    def _subtask_state(self) -> SubtaskState:
        r = self.r
        index = r.read_i32()
        if index < 0:
            return SubtaskState(index=-index - 1, finished=True)
        managed_op = self.operator_handle() if r.read_i32() != 0 else None
        raw_op = self.operator_handle() if r.read_i32() != 0 else None
        managed_keyed = self.keyed_handle()
        raw_keyed = self.keyed_handle()
        inputs = self._list(self._channel_handle, "input channel states", _CHANNEL_MIN)
        outputs = self._list(self._channel_handle, "result subpartition states", _CHANNEL_MIN)
        ref_checkpoint_id = None
        if self.version >= 7 and r.read_u8() != 0:
            ref_checkpoint_id = r.read_i64()
        return SubtaskState(
            index, False, managed_op, raw_op, managed_keyed, raw_keyed, inputs, outputs,
            ref_checkpoint_id,
        )  # fmt: skip

    # --- handles -----------------------------------------------------------------------

    def stream_handle(self) -> StreamHandle | None:
        r = self.r
        code, at = self._handle_code()
        if code == HandleCode.NULL:
            return None
        if code == HandleCode.BYTE_STREAM:
            name = r.read_utf()
            return ByteStreamHandle(name, r.read_bytes(self._length("inline state")))
        if code == HandleCode.FILE_STREAM:
            size = r.read_i64()
            return FileHandle(r.read_utf(), size)
        if code == HandleCode.RELATIVE_STREAM:
            path = r.read_utf()
            return RelativeFileHandle(path, r.read_i64())
        if code == HandleCode.KEY_GROUPS:
            return self._key_groups_body(code)
        if code == HandleCode.SEGMENT_FILE:
            start, size, scope = r.read_i64(), r.read_i64(), r.read_i32()
            return SegmentFileHandle(start, size, scope, r.read_utf(), r.read_utf())
        if code == HandleCode.EMPTY_SEGMENT_FILE:
            return EmptySegmentFileHandle()
        raise FormatError(f"unknown stream state handle code {code} at byte offset {at}")

    def _handle_code(self) -> tuple[int, int]:
        """The next handle's type code and the offset it stands at."""
        at = self.r.pos
        return self.r.read_u8(), at

    def _length(self, what: str) -> int:
        at = self.r.pos
        length = self.r.read_i32()
        if length < 0:
            raise FormatError(f"negative {what} length {length} at offset {at}")
        return length

    def _key_groups_body(self, code: int, with_id: bool = False) -> KeyGroupsHandle:
        r = self.r
        start = r.read_i32()
        count = self._count("key groups", _OFFSET_SIZE)
        offsets = tuple(r.read_i64() for _ in range(count))
        delegate = self.stream_handle()
        handle_id = r.read_utf() if with_id else None
        return KeyGroupsHandle(code, start, offsets, delegate, handle_id)

    def keyed_handle(self) -> KeyedHandle | None:
        code, at = self._handle_code()
        if code == HandleCode.NULL:
            return None
        if code in (HandleCode.KEY_GROUPS, HandleCode.SAVEPOINT_KEY_GROUPS):
            return self._key_groups_body(code)
        if code == HandleCode.KEY_GROUPS_V2:
            return self._key_groups_body(code, with_id=True)
        if code in (HandleCode.INCREMENTAL_KEY_GROUPS, HandleCode.INCREMENTAL_KEY_GROUPS_V2):
            return self._incremental(code)
        if code in (HandleCode.CHANGELOG, HandleCode.CHANGELOG_V2):
            return self._changelog(code)
        if code == HandleCode.CHANGELOG_BYTE_INCREMENT:
            return self._changelog_bytes()
        if code in (HandleCode.CHANGELOG_FILE_INCREMENT, HandleCode.CHANGELOG_FILE_INCREMENT_V2):
            return self._changelog_files(code)
        raise FormatError(f"unknown keyed state handle code {code} at byte offset {at}")

    def _incremental(self, code: int) -> IncrementalKeyedHandle:
        r = self.r
        v2 = code == HandleCode.INCREMENTAL_KEY_GROUPS_V2
        checkpoint_id = r.read_i64()
        backend_id = r.read_utf()
        start, count = r.read_i32(), r.read_i32()
        checkpointed_size = r.read_i64() if v2 else None
        meta = self.stream_handle()
        shared = self._list(self._local_file, "shared files", _LOCAL_FILE_MIN)
        private = self._list(self._local_file, "private files", _LOCAL_FILE_MIN)
        handle_id = r.read_utf() if v2 else None
        return IncrementalKeyedHandle(
            code, checkpoint_id, backend_id, start, count, checkpointed_size, meta, shared,
            private, handle_id,
        )  # fmt: skip

    def _local_file(self) -> LocalFile:
        local_path = self.r.read_utf()
        return LocalFile(local_path, self.stream_handle())

    def _changelog(self, code: int) -> ChangelogHandle:
        r = self.r
        start, count, checkpointed_size = r.read_i32(), r.read_i32(), r.read_i64()
        materialized = self._list(self.keyed_handle, "materialized handles")
        non_materialized = self._list(self.keyed_handle, "changelog handles")
        materialization_id = r.read_i64()
        checkpoint_id = r.read_i64() if code == HandleCode.CHANGELOG_V2 else None
        return ChangelogHandle(
            code, start, count, checkpointed_size, materialized, non_materialized,
            materialization_id, checkpoint_id, r.read_utf(),
        )  # fmt: skip

    def _changelog_bytes(self) -> ChangelogByteIncrementHandle:
        r = self.r
        start, count = r.read_i32(), r.read_i32()
        from_sequence, to_sequence = r.read_i64(), r.read_i64()
        changes = self._list(
            lambda: (r.read_i32(), r.read_bytes(self._length("change"))), "changes", _CHANGE_MIN
        )
        return ChangelogByteIncrementHandle(
            start, count, from_sequence, to_sequence, changes, r.read_utf()
        )

    def _changelog_files(self, code: int) -> ChangelogFileIncrementHandle:
        r = self.r
        start, count = r.read_i32(), r.read_i32()

        def handle_and_offset() -> tuple[StreamHandle | None, int]:
            offset = r.read_i64()
            return self.stream_handle(), offset

        pairs = self._list(handle_and_offset, "changelog files", _CHANGELOG_FILE_MIN)
        state_size, checkpointed_size = r.read_i64(), r.read_i64()
        handle_id = r.read_utf()
        storage_id = r.read_utf() if code == HandleCode.CHANGELOG_FILE_INCREMENT_V2 else None
        return ChangelogFileIncrementHandle(
            code, start, count, pairs, state_size, checkpointed_size, handle_id, storage_id
        )

    def operator_handle(self) -> OperatorStateHandle | None:
        r = self.r
        code, at = self._handle_code()
        if code == HandleCode.NULL:
            return None
        if code not in (
            HandleCode.PARTITIONABLE_OPERATOR_STATE,
            HandleCode.SEGMENT_PARTITIONABLE_OPERATOR_STATE,
        ):
            raise FormatError(f"unknown operator state handle code {code} at byte offset {at}")
        states = self._list(
            self._operator_state_offsets, "operator states in a handle", _OPERATOR_OFFSETS_MIN
        )
        if code == HandleCode.PARTITIONABLE_OPERATOR_STATE:
            return OperatorStateHandle(code, states, self.stream_handle())
        task_owned_dir, shared_dir, is_empty = r.read_utf(), r.read_utf(), r.read_bool()
        return OperatorStateHandle(
            code, states, self.stream_handle(), task_owned_dir, shared_dir, is_empty
        )

    def _operator_state_offsets(self) -> OperatorStateOffsets:
        r = self.r
        name = r.read_utf()
        at = r.pos
        mode = r.read_u8()
        if mode not in DistributionMode._value2member_map_:
            raise FormatError(f"unknown distribution mode {mode} at byte offset {at}")
        offsets = tuple(r.read_i64() for _ in range(self._count("offsets", _OFFSET_SIZE)))
        return OperatorStateOffsets(name, DistributionMode(mode), offsets)

    def _channel_handle(self) -> ChannelStateHandle:
        r = self.r
        kind = None
        if self.version >= 6:
            at = r.pos
            kind = r.read_u8()
            if kind not in (1, 2, 3, 4):
                raise FormatError(f"unknown channel state handle type {kind} at byte offset {at}")
            if kind in (3, 4):
                index, size = r.read_i32(), r.read_i64()
                delegate = self.stream_handle()
                blob = r.read_bytes(self._length("channel offsets"))
                return ChannelStateHandle(kind, index, None, (), size, delegate, blob)
        index, info = r.read_i32(), (r.read_i32(), r.read_i32())
        offsets = tuple(r.read_i64() for _ in range(self._count("channel offsets", _OFFSET_SIZE)))
        size = r.read_i64()
        return ChannelStateHandle(kind, index, info, offsets, size, self.stream_handle())


# ---------------------------------------------------------------------------------------
# writing
# ---------------------------------------------------------------------------------------


def write_metadata(metadata: CheckpointMetadata) -> bytes:
    """Serialize `metadata` exactly as Flink's serializer of `metadata.version` would."""
    if metadata.version not in SUPPORTED_VERSIONS:
        raise UnsupportedError(f"cannot write metadata version {metadata.version}")
    writer = _MetadataWriter(metadata.version)
    writer.write(metadata)
    return writer.w.getvalue()


class _KeyGroupRanged(Protocol):
    """A handle that starts with its key-group range (incremental and changelog handles)."""

    @property
    def start_key_group(self) -> int: ...

    @property
    def num_key_groups(self) -> int: ...


class _MetadataWriter:
    def __init__(self, version: int) -> None:
        self.w = DataWriter()
        self.version = version

    def write(self, md: CheckpointMetadata) -> None:
        w = self.w
        w.write_i32(MAGIC)
        w.write_i32(md.version)
        w.write_i64(md.checkpoint_id)
        self._list(md.master_states, self._master_state)
        self._list(md.operators, self._operator_state)
        if self.version >= 4:
            w.write_bytes(md.properties)

    def _list(self, items: tuple[T, ...], write_one: Callable[[T], None]) -> None:
        self.w.write_i32(len(items))
        for item in items:
            write_one(item)

    def _master_state(self, state: MasterState) -> None:
        inner = DataWriter()
        inner.write_i32(state.version)
        inner.write_utf(state.name)
        inner.write_i32(len(state.payload))
        inner.write_bytes(state.payload)
        self.w.write_i32(MASTER_STATE_MAGIC)
        self.w.write_i32(inner.pos)
        self.w.write_bytes(inner.getvalue())

    def _operator_state(self, op: OperatorState) -> None:
        w = self.w
        if self.version >= 5:
            w.write_utf(op.name or "")
            w.write_utf(op.uid or "")
        if len(op.operator_id) != 16:
            raise FormatError(f"operator id must be 16 bytes, got {len(op.operator_id)}")
        w.write_bytes(op.operator_id)
        w.write_i32(op.parallelism)
        w.write_i32(op.max_parallelism)
        self.stream_handle(op.coordinator_state)
        if op.subtasks is None:
            w.write_i32(-1)
        else:
            self._list(op.subtasks, self._subtask_state)

    def _subtask_state(self, st: SubtaskState) -> None:
        w = self.w
        if st.finished:
            w.write_i32(-st.index - 1)
            return
        w.write_i32(st.index)
        for op_handle in (st.managed_operator_state, st.raw_operator_state):
            w.write_i32(0 if op_handle is None else 1)
            if op_handle is not None:
                self.operator_handle(op_handle)
        self.keyed_handle(st.managed_keyed_state)
        self.keyed_handle(st.raw_keyed_state)
        self._list(st.input_channel_states, self._channel_handle)
        self._list(st.output_channel_states, self._channel_handle)
        if self.version >= 7:
            w.write_u8(0 if st.ref_checkpoint_id is None else 1)
            if st.ref_checkpoint_id is not None:
                w.write_i64(st.ref_checkpoint_id)

    def stream_handle(self, handle: StreamHandle | None) -> None:
        w = self.w
        match handle:
            case None:
                w.write_u8(HandleCode.NULL)
            case ByteStreamHandle(name, data):
                w.write_u8(HandleCode.BYTE_STREAM)
                w.write_utf(name)
                w.write_i32(len(data))
                w.write_bytes(data)
            case FileHandle(path, size):
                w.write_u8(HandleCode.FILE_STREAM)
                w.write_i64(size)
                w.write_utf(path)
            case RelativeFileHandle(path, size):
                w.write_u8(HandleCode.RELATIVE_STREAM)
                w.write_utf(path)
                w.write_i64(size)
            case KeyGroupsHandle():
                w.write_u8(HandleCode.KEY_GROUPS)
                self._key_groups_body(handle)
            case SegmentFileHandle(start, size, scope, physical_path, logical_file_id):
                w.write_u8(HandleCode.SEGMENT_FILE)
                w.write_i64(start)
                w.write_i64(size)
                w.write_i32(scope)
                w.write_utf(physical_path)
                w.write_utf(logical_file_id)
            case EmptySegmentFileHandle():
                w.write_u8(HandleCode.EMPTY_SEGMENT_FILE)
            case _:
                raise TypeError(f"not a stream state handle: {handle!r}")

    def _key_groups_body(self, handle: KeyGroupsHandle) -> None:
        self.w.write_i32(handle.start_key_group)
        self.w.write_i32(len(handle.offsets))
        for offset in handle.offsets:
            self.w.write_i64(offset)
        self.stream_handle(handle.delegate)
        if handle.code == HandleCode.KEY_GROUPS_V2:
            self.w.write_utf(handle.handle_id or "")

    def keyed_handle(self, handle: KeyedHandle | None) -> None:
        w = self.w
        if handle is None:
            w.write_u8(HandleCode.NULL)
            return
        w.write_u8(handle.code)
        match handle:
            case KeyGroupsHandle():
                self._key_groups_body(handle)
            case IncrementalKeyedHandle():
                self._incremental(handle)
            case ChangelogHandle():
                self._changelog(handle)
            case ChangelogByteIncrementHandle():
                self._changelog_bytes(handle)
            case ChangelogFileIncrementHandle():
                self._changelog_files(handle)
            case _:
                raise TypeError(f"not a keyed state handle: {handle!r}")

    def _incremental(self, h: IncrementalKeyedHandle) -> None:
        w = self.w
        v2 = h.code == HandleCode.INCREMENTAL_KEY_GROUPS_V2
        w.write_i64(h.checkpoint_id)
        w.write_utf(h.backend_id)
        self._key_group_range(h)
        if v2:
            w.write_i64(h.checkpointed_size if h.checkpointed_size is not None else -1)
        self.stream_handle(h.meta)
        for files in (h.shared, h.private):
            self._list(files, self._local_file)
        if v2:
            w.write_utf(h.handle_id or "")

    def _local_file(self, file: LocalFile) -> None:
        self.w.write_utf(file.local_path)
        self.stream_handle(file.handle)

    def _key_group_range(self, h: _KeyGroupRanged) -> None:
        self.w.write_i32(h.start_key_group)
        self.w.write_i32(h.num_key_groups)

    def _changelog(self, h: ChangelogHandle) -> None:
        w = self.w
        self._key_group_range(h)
        w.write_i64(h.checkpointed_size)
        self._list(h.materialized, self.keyed_handle)
        self._list(h.non_materialized, self.keyed_handle)
        w.write_i64(h.materialization_id)
        if h.code == HandleCode.CHANGELOG_V2:
            w.write_i64(h.checkpoint_id if h.checkpoint_id is not None else h.materialization_id)
        w.write_utf(h.handle_id)

    def _changelog_bytes(self, h: ChangelogByteIncrementHandle) -> None:
        w = self.w
        self._key_group_range(h)
        w.write_i64(h.from_sequence)
        w.write_i64(h.to_sequence)
        w.write_i32(len(h.changes))
        for key_group, change in h.changes:
            w.write_i32(key_group)
            w.write_i32(len(change))
            w.write_bytes(change)
        w.write_utf(h.handle_id)

    def _changelog_files(self, h: ChangelogFileIncrementHandle) -> None:
        w = self.w
        self._key_group_range(h)
        w.write_i32(len(h.handles_and_offsets))
        for handle, offset in h.handles_and_offsets:
            w.write_i64(offset)
            self.stream_handle(handle)
        w.write_i64(h.state_size)
        w.write_i64(h.checkpointed_size)
        w.write_utf(h.handle_id)
        if h.code == HandleCode.CHANGELOG_FILE_INCREMENT_V2:
            w.write_utf(h.storage_id or "")

    def operator_handle(self, h: OperatorStateHandle) -> None:
        w = self.w
        w.write_u8(h.code)
        w.write_i32(len(h.states))
        for state in h.states:
            w.write_utf(state.name)
            w.write_u8(state.mode)
            w.write_i32(len(state.offsets))
            for offset in state.offsets:
                w.write_i64(offset)
        if h.code == HandleCode.SEGMENT_PARTITIONABLE_OPERATOR_STATE:
            w.write_utf(h.task_owned_dir or "")
            w.write_utf(h.shared_dir or "")
            w.write_bool(bool(h.is_empty))
        self.stream_handle(h.delegate)

    def _channel_handle(self, h: ChannelStateHandle) -> None:
        w = self.w
        if self.version >= 6:
            w.write_u8(h.kind if h.kind is not None else 1)
            if h.kind in (3, 4):
                w.write_i32(h.subtask_index)
                w.write_i64(h.state_size)
                self.stream_handle(h.delegate)
                blob = h.offsets_blob or b""
                w.write_i32(len(blob))
                w.write_bytes(blob)
                return
        info = h.info or (0, 0)
        w.write_i32(h.subtask_index)
        w.write_i32(info[0])
        w.write_i32(info[1])
        w.write_i32(len(h.offsets))
        for offset in h.offsets:
            w.write_i64(offset)
        w.write_i64(h.state_size)
        self.stream_handle(h.delegate)
