"""Source positions: FLIP-27 reader and enumerator state, and the legacy Kafka consumer's.

Mirrors (flink-state-values.md §10):

* framing: `SourceOperator`'s `SourceReaderState` list state (`BytePrimitiveArraySerializer`
  around `SimpleVersionedSerialization.writeVersionAndSerialize`) and `SourceCoordinator`'s
  coordinator state (`SourceCoordinatorSerdeUtils`: serde version, serializer version, length);
* FileSource: `FileSourceSplitSerializer` v1 (Flink 1.15–2.3: with modification time and file
  size), `PendingSplitsCheckpointSerializer` v1 (little-endian, magic 0xDEADBEEF), Flink's
  `Path.serializeToDataOutputView`;
* KafkaSource: `KafkaPartitionSplitSerializer` v0 and `KafkaSourceEnumStateSerializer` v1–v3
  (flink-connector-kafka 3.0–5.0);
* `NumberSequenceSource`'s `SplitSerializer` and `CheckpointSerializer` v1;
* the legacy `FlinkKafkaConsumerBase` union state `topic-partition-offset-states`: a
  `Tuple2<KafkaTopicPartition, Long>` whose first field is Kryo 2.24 `FieldSerializer` bytes.

A split serializer's bytes do not name their class: `split_kinds` tells which layouts a split
parses as exactly (all bytes, nothing left), `enumerator_kinds` the same for the enumerator, and
`recognise` settles the kind only when the evidence names one; anything else stays an
`UnrecognisedSplit` with its bytes.

Every reader has its writer beside it (`write_*`), the inverse on the bytes Flink and the
connector write: reading and writing again gives back the very bytes. The few things a reading
renders rather than keeps are noted where they are (a FileSource split's `Path`, kept as its
`toString()`: `set_file_split_position` and `set_file_enumerator_positions` edit positions
keeping every other byte as it was).
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from statectl.errors import FormatError
from statectl.formats.java_io import DataReader, DataWriter
from statectl.formats.java_types import read_java_string, write_java_string, write_varint

READER_STATE = "SourceReaderState"  # SourceOperator's list state of splits
LEGACY_KAFKA_STATE = "topic-partition-offset-states"  # FlinkKafkaConsumerBase (union)

FILE = "file"
KAFKA = "kafka"
NUMBER_SEQUENCE = "number-sequence"
KINDS = (FILE, KAFKA, NUMBER_SEQUENCE)

# KafkaPartitionSplit's markers (starting offset; stopping: NO_STOPPING_OFFSET, LATEST, COMMITTED)
_LONG_MIN = -(1 << 63)
KAFKA_STARTING_MARKERS = {-2: "EARLIEST", -1: "LATEST", -3: "COMMITTED", _LONG_MIN: "MIGRATED"}
KAFKA_STOPPING_MARKERS = {_LONG_MIN: "NO_STOPPING_OFFSET", -1: "LATEST", -3: "COMMITTED"}
KAFKA_ASSIGNMENT = {0: "ASSIGNED", 1: "UNASSIGNED"}  # AssignmentStatus codes
# KafkaTopicPartitionStateSentinel: the legacy consumer's offsets that are not offsets.
LEGACY_KAFKA_MARKERS = {
    -915623761776: "OFFSET_NOT_SET",
    -915623761775: "EARLIEST_OFFSET",
    -915623761774: "LATEST_OFFSET",
    -915623761773: "GROUP_OFFSET",
}
FILE_NO_OFFSET = -1  # CheckpointedPosition.NO_OFFSET: a format that counts records only

_PENDING_SPLITS_MAGIC = 0xDEADBEEF  # PendingSplitsCheckpointSerializer VERSION_1_MAGIC_NUMBER
_LE_I32 = struct.Struct("<i")
_KRYO_KAFKA_TOPIC_PARTITION = 85  # class id of KafkaTopicPartition with default registrations


# --- framing ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Versioned:
    """A `SimpleVersionedSerializer`'s output and the version it was written with."""

    version: int
    data: bytes


State = TypeVar("State")
Record = TypeVar("Record")


@dataclass(frozen=True, slots=True)
class _Layout(Generic[State]):
    """How one source kind's splits (or enumerator states) are read and written, by version."""

    type: type[State]
    read: Callable[[bytes, int], State]
    write: Callable[[State, int], bytes]


@dataclass(frozen=True, slots=True)
class _Layouts(Generic[State]):
    """The layouts of one thing sources keep (`what`: their splits, or their enumerator state),
    by source kind. Any: each layout takes its own kind's type of `State`."""

    what: str
    by_kind: Mapping[str, _Layout[Any]]

    def read(self, kind: str, framed: Versioned) -> State:
        """The `what` of a known source `kind`; FormatError (with offsets) if it does not
        parse."""
        value: State = self.by_kind[kind].read(framed.data, framed.version)
        return value

    def write(self, kind: str, value: State, version: int) -> Versioned:
        """`read`'s inverse: the serializer's output and its version; the layout of `kind`
        must be the layout of the value's type."""
        layout = self.by_kind.get(kind)
        if layout is None or not isinstance(value, layout.type):
            raise FormatError(f"cannot write a {type(value).__name__} as a {kind} {self.what}")
        return Versioned(version, layout.write(value, version))

    def kinds(self, framed: Versioned) -> tuple[str, ...]:
        """The kinds whose layout reads these bytes exactly."""
        return tuple(kind for kind in KINDS if self._parses(kind, framed))

    def _parses(self, kind: str, framed: Versioned) -> bool:
        try:
            self.read(kind, framed)
        except FormatError:
            return False
        return True


@dataclass(frozen=True, slots=True)
class CoordinatorState:
    serde_version: int  # SourceCoordinatorSerdeUtils: 0 (trailing bytes allowed) or 1
    enumerator: Versioned
    trailing: bytes = b""  # serde version 0 only: what followed the enumerator checkpoint


def read_reader_state_element(element: bytes) -> Versioned:
    """One `SourceReaderState` element: i32 array length, i32 version, i32 length, bytes."""
    reader = DataReader(element)
    total = reader.read_i32()
    if total != reader.remaining():
        raise FormatError(
            f"SourceReaderState element: byte array length {total} at offset 0, but "
            f"{reader.remaining()} bytes follow"
        )
    version = reader.read_i32()
    data = reader.read_bytes(_length(reader, "split"))
    _expect_end(reader, "SourceReaderState element")
    return Versioned(version, data)


def read_coordinator_state(data: bytes) -> CoordinatorState:
    """A source operator's coordinator state (SourceCoordinator's enumerator checkpoint)."""
    reader = DataReader(data)
    serde = reader.read_i32()
    if serde not in (0, 1):
        raise FormatError(f"source coordinator state: unknown serde version {serde} at offset 0")
    version = reader.read_i32()
    body = reader.read_bytes(_length(reader, "enumerator checkpoint"))
    if serde == 1:
        _expect_end(reader, "source coordinator state")
    return CoordinatorState(serde, Versioned(version, body), reader.read_rest())


def write_reader_state_element(split: Versioned) -> bytes:
    """`read_reader_state_element`'s inverse: BytePrimitiveArraySerializer around
    SimpleVersionedSerialization.writeVersionAndSerialize."""
    framed = struct.pack(">ii", split.version, len(split.data)) + split.data
    return struct.pack(">i", len(framed)) + framed


def write_coordinator_state(state: CoordinatorState) -> bytes:
    """`read_coordinator_state`'s inverse (SourceCoordinatorSerdeUtils framing)."""
    if state.trailing and state.serde_version != 0:
        raise FormatError("source coordinator state: only serde version 0 has trailing bytes")
    body = state.enumerator.data
    head = struct.pack(">iii", state.serde_version, state.enumerator.version, len(body))
    return head + body + state.trailing


def _length(reader: DataReader, what: str) -> int:
    at = reader.pos
    length = reader.read_i32()
    if not 0 <= length <= reader.remaining():
        raise FormatError(
            f"{what} length {length} at offset {at} does not fit the {reader.remaining()} "
            "bytes left"
        )
    return length


def _expect_end(reader: DataReader, what: str) -> None:
    if not reader.at_end():
        raise FormatError(f"{what}: {reader.remaining()} unexpected bytes at offset {reader.pos}")


# --- splits ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FileSplit:
    """`FileSourceSplit`: a byte range of a file, and where the reader stands in it."""

    split_id: str
    path: str | None  # as Flink's Path.toString(); None for a null path
    offset: int
    length: int
    modification_time: int
    file_size: int
    hostnames: tuple[str, ...]
    reader_offset: int | None  # CheckpointedPosition offset (FILE_NO_OFFSET: records only)
    records_to_skip: int | None  # records after reader_offset already emitted


@dataclass(frozen=True, slots=True)
class KafkaSplit:
    """`KafkaPartitionSplit`: in reader state, `starting_offset` is the next offset to read."""

    topic: str
    partition: int
    starting_offset: int
    stopping_offset: int

    @property
    def split_id(self) -> str:
        return f"{self.topic}-{self.partition}"  # KafkaPartitionSplit.toSplitId

    @property
    def starting_marker(self) -> str | None:
        return KAFKA_STARTING_MARKERS.get(self.starting_offset)

    @property
    def stopping_marker(self) -> str | None:
        return KAFKA_STOPPING_MARKERS.get(self.stopping_offset)


@dataclass(frozen=True, slots=True)
class NumberSequenceSplit:
    """`NumberSequenceSplit`: the numbers still to emit, `first`..`last` inclusive."""

    split_id: str
    first: int
    last: int


@dataclass(frozen=True, slots=True)
class Unrecognised:
    """A split or an enumerator state statectl cannot read: its bytes, kept as they are."""

    version: int
    data: bytes
    reason: str


UnrecognisedSplit = Unrecognised
UnrecognisedEnumerator = Unrecognised


Split = FileSplit | KafkaSplit | NumberSequenceSplit | UnrecognisedSplit


def read_file_split(data: bytes, version: int = 1) -> FileSplit:
    """`FileSourceSplitSerializer` v1 (Flink 1.15–2.3)."""
    if version != 1:
        raise FormatError(f"FileSourceSplit: unknown serializer version {version}")
    reader = DataReader(data)
    split = _file_split(reader)
    _expect_end(reader, "FileSourceSplit")
    return split


def _file_split(reader: DataReader) -> FileSplit:
    return _file_split_at(reader)[0]


def _file_split_at(reader: DataReader) -> tuple[FileSplit, int]:
    """The split, and the offset of its position flag (everything before it is not a
    position)."""
    split_id = reader.read_utf()
    path = _read_path(reader)
    offset, length, modified, size = (reader.read_i64() for _ in range(4))
    at = reader.pos
    count = reader.check_count(reader.read_i32(), "hostname", at, 2)
    hosts = tuple(reader.read_utf() for _ in range(count))
    flag_at = reader.pos
    position = (reader.read_i64(), reader.read_i64()) if _read_flag(reader) else (None, None)
    split = FileSplit(split_id, path, offset, length, modified, size, hosts, *position)
    return split, flag_at


FilePosition = tuple[int, int]  # CheckpointedPosition: (offset or FILE_NO_OFFSET, records after)


def file_position(split: FileSplit) -> FilePosition | None:
    """The split's CheckpointedPosition, or None: read from the split's start."""
    if split.reader_offset is None or split.records_to_skip is None:
        return None
    return split.reader_offset, split.records_to_skip


def write_file_split(split: FileSplit, version: int = 1) -> bytes:
    """`FileSourceSplitSerializer` v1. The path is written from its `Path.toString()`
    rendering as `Path.serializeToDataOutputView` writes the URI a Flink `Path` holds: scheme,
    no user info unless rendered, host and port of the authority, the path, no query, no
    fragment (`new Path(String)` makes neither; a `#` or `?` is part of the path)."""
    if version != 1:
        raise FormatError(f"FileSourceSplit: unknown serializer version {version}")
    out = DataWriter()
    out.write_utf(split.split_id)
    out.write_bytes(_path_bytes(split.path))
    for value in (split.offset, split.length, split.modification_time, split.file_size):
        out.write_i64(value)
    out.write_i32(len(split.hostnames))
    for host in split.hostnames:
        out.write_utf(host)
    out.write_bytes(_position_bytes(file_position(split)))
    return out.getvalue()


def set_file_split_position(data: bytes, position: FilePosition | None, version: int = 1) -> bytes:
    """A FileSourceSplit's bytes with its checkpointed position replaced (None: no position,
    the reader starts at the split's start); every byte before the position is kept."""
    if version != 1:
        raise FormatError(f"FileSourceSplit: unknown serializer version {version}")
    reader = DataReader(data)
    _, flag_at = _file_split_at(reader)
    _expect_end(reader, "FileSourceSplit")
    return bytes(data[:flag_at]) + _position_bytes(position)


def _position_bytes(position: FilePosition | None) -> bytes:
    if position is None:
        return b"\x00"
    offset, records = position
    if offset < FILE_NO_OFFSET or records < 0:
        raise FormatError(
            f"bad checkpointed position ({offset}, {records}): the offset is -1 (none) or "
            "at least 0, the records to skip at least 0"
        )
    return b"\x01" + struct.pack(">qq", offset, records)


# A hierarchical URI as `_read_path` renders it: scheme, authority, path (query and fragment
# are never rendered back from a Flink Path, see `write_file_split`).
_RENDERED_URI = re.compile(r"(?:([A-Za-z][A-Za-z0-9+.\-]*):)?(?://([^/]*))?(.*)", re.DOTALL)
_PORT = re.compile(r"(.*):(\d+)", re.DOTALL)


def _path_bytes(text: str | None) -> bytes:
    """`Path.serializeToDataOutputView` of the Path whose `toString()` is `text`."""
    if text is None:
        return b"\x00"
    match = _RENDERED_URI.fullmatch(text)
    assert match is not None  # every string matches: the path part takes anything
    scheme, authority, path = match.groups()
    user = host = None
    port = -1
    if authority is not None:
        user_part, at, host_part = authority.rpartition("@")
        user = user_part if at else None
        with_port = _PORT.fullmatch(host_part)
        if with_port and "]" not in with_port.group(2):
            host_part, port = with_port.group(1), int(with_port.group(2))
        host = host_part
    out = b"\x01" + b"".join(_nullable_string_bytes(v) for v in (scheme, user, host))
    out += struct.pack(">i", port)
    return out + b"".join(_nullable_string_bytes(v) for v in (path, None, None))


def _nullable_string_bytes(text: str | None) -> bytes:
    """`StringUtils.writeNullableString`."""
    return b"\x00" if text is None else b"\x01" + write_java_string(text)


def _read_flag(reader: DataReader) -> bool:
    """A Java boolean that must be 0 or 1: anything else is not this layout."""
    at = reader.pos
    value = reader.read_u8()
    if value > 1:
        raise FormatError(f"boolean byte {value} at offset {at}")
    return value == 1


def _read_path(reader: DataReader) -> str | None:
    """`Path.serializeToDataOutputView`: a presence flag, then the URI's scheme, user info,
    host (nullable StringValue strings), i32 port, path, query, fragment; rendered as
    `Path.toString()` does (query left out)."""
    if not _read_flag(reader):
        return None
    scheme, user, host = (
        _nullable_string(reader),
        _nullable_string(reader),
        _nullable_string(reader),
    )
    port = reader.read_i32()
    path, _query, fragment = (_nullable_string(reader) for _ in range(3))
    text = f"{scheme}:" if scheme is not None else ""
    if host is not None:
        authority = (f"{user}@" if user is not None else "") + host
        text += "//" + authority + (f":{port}" if port != -1 else "")
    text += path or ""
    return text + (f"#{fragment}" if fragment is not None else "")


def _nullable_string(reader: DataReader) -> str | None:
    """`StringUtils.writeNullableString`: a flag, then `StringValue.writeString`."""
    if not _read_flag(reader):
        return None
    at = reader.pos
    view = memoryview(reader.slice(at, reader.size))
    try:
        text, used = read_java_string(view, 0)
    except (ValueError, IndexError) as exc:
        raise FormatError(f"bad string at offset {at}: {exc}") from None
    if text is None:
        raise FormatError(f"null string after a non-null flag at offset {at}")
    reader.read_bytes(used)
    return text


@dataclass(frozen=True, slots=True)
class _FieldsLayout(Generic[Record]):
    """A split serializer that writes its record's fields in order, each a Java `DataOutput`
    primitive, after nothing else: one version, read and written from this table."""

    name: str
    version: int
    record: Callable[..., Record]
    fields: tuple[tuple[str, str], ...]  # (attribute, "utf" | "i32" | "i64"), in order

    def read(self, data: bytes, version: int | None = None) -> Record:
        self._check(version)
        reader = DataReader(data)
        readers = {"utf": reader.read_utf, "i32": reader.read_i32, "i64": reader.read_i64}
        record = self.record(*(readers[kind]() for _, kind in self.fields))
        _expect_end(reader, self.name)
        return record

    def write(self, record: Record, version: int | None = None) -> bytes:
        self._check(version)
        out = DataWriter()
        writers: dict[str, Callable[[Any], None]] = {
            "utf": out.write_utf,
            "i32": out.write_i32,
            "i64": out.write_i64,
        }
        for attribute, kind in self.fields:
            writers[kind](getattr(record, attribute))
        return out.getvalue()

    def _check(self, version: int | None) -> None:
        if version is not None and version != self.version:
            raise FormatError(f"{self.name}: unknown serializer version {version}")


# `KafkaPartitionSplitSerializer` v0: utf topic, i32 partition, i64 start, i64 stop.
_KAFKA_SPLIT = _FieldsLayout(
    "KafkaPartitionSplit", 0, KafkaSplit,
    (("topic", "utf"), ("partition", "i32"), ("starting_offset", "i64"),
     ("stopping_offset", "i64")),
)  # fmt: skip
# `NumberSequenceSource.SplitSerializer` v1: utf id, i64 from, i64 to.
_NUMBER_SEQUENCE_SPLIT = _FieldsLayout(
    "NumberSequenceSplit", 1, NumberSequenceSplit,
    (("split_id", "utf"), ("first", "i64"), ("last", "i64")),
)  # fmt: skip
read_kafka_split = _KAFKA_SPLIT.read
write_kafka_split = _KAFKA_SPLIT.write
read_number_sequence_split = _NUMBER_SEQUENCE_SPLIT.read
write_number_sequence_split = _NUMBER_SEQUENCE_SPLIT.write


_SPLITS: _Layouts[Split] = _Layouts(
    "split",
    {
        FILE: _Layout(FileSplit, read_file_split, write_file_split),
        KAFKA: _Layout(KafkaSplit, read_kafka_split, write_kafka_split),
        NUMBER_SEQUENCE: _Layout(
            NumberSequenceSplit, read_number_sequence_split, write_number_sequence_split
        ),
    },
)
read_split = _SPLITS.read
write_split = _SPLITS.write
split_kinds = _SPLITS.kinds


# --- enumerator state ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FileEnumerator:
    """`PendingSplitsCheckpoint`: splits not yet assigned, and paths already processed
    (continuous enumeration only)."""

    pending: tuple[FileSplit, ...]
    processed_paths: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class KafkaPartitionAssignment:
    topic: str
    partition: int
    status: str | None  # ASSIGNED | UNASSIGNED (v2+); None in v0/v1 (all assigned)
    starting_offset: int | None = None  # v3 only (connector 5.0)
    stopping_offset: int | None = None


@dataclass(frozen=True, slots=True)
class KafkaEnumerator:
    """`KafkaSourceEnumState`: partitions the enumerator knows, per serializer version."""

    version: int
    partitions: tuple[KafkaPartitionAssignment, ...]
    initial_discovery_finished: bool | None  # v2+


@dataclass(frozen=True, slots=True)
class NumberSequenceEnumerator:
    remaining: tuple[NumberSequenceSplit, ...]


Enumerator = FileEnumerator | KafkaEnumerator | NumberSequenceEnumerator | UnrecognisedEnumerator


def read_file_enumerator(data: bytes, version: int = 1) -> FileEnumerator:
    """`PendingSplitsCheckpointSerializer` v1: little-endian i32 magic, split serializer
    version, split count, path count; then length-prefixed splits and UTF-8 paths."""
    parts = _pending_splits_parts(data, version)
    pending = []
    for at, chunk in parts.splits:
        try:
            pending.append(read_file_split(chunk, parts.split_version))
        except FormatError as exc:
            raise FormatError(f"pending split at offset {at}: {exc}") from None
    processed = tuple(chunk.decode("utf-8", "replace") for _, chunk in parts.paths)
    return FileEnumerator(tuple(pending), processed)


@dataclass(frozen=True, slots=True)
class _PendingSplitsParts:
    split_version: int
    splits: tuple[tuple[int, bytes], ...]  # (offset, serialized split)
    paths: tuple[tuple[int, bytes], ...]  # (offset, UTF-8 path)


def _pending_splits_parts(data: bytes, version: int) -> _PendingSplitsParts:
    if version != 1:
        raise FormatError(f"PendingSplitsCheckpoint: unknown serializer version {version}")
    if len(data) < 16:
        raise FormatError(f"PendingSplitsCheckpoint: {len(data)} bytes, shorter than its header")
    magic, split_version, splits, paths = struct.unpack_from("<IiiI", data)
    if magic != _PENDING_SPLITS_MAGIC:
        raise FormatError(f"PendingSplitsCheckpoint: bad magic 0x{magic:08X} at offset 0")
    pos = 16
    found: list[list[tuple[int, bytes]]] = [[], []]
    for n, (count, at, what) in enumerate(((splits, 8, "split"), (paths, 12, "path"))):
        for _ in range(_le_count(data, count, at, what)):
            chunk, end = _le_chunk(data, pos)
            found[n].append((pos + 4, chunk))
            pos = end
    if pos != len(data):
        raise FormatError(f"PendingSplitsCheckpoint: {len(data) - pos} trailing bytes at {pos}")
    return _PendingSplitsParts(split_version, tuple(found[0]), tuple(found[1]))


def _pending_splits_bytes(
    split_version: int, splits: Sequence[bytes], paths: Sequence[bytes]
) -> bytes:
    head = struct.pack("<Iiii", _PENDING_SPLITS_MAGIC, split_version, len(splits), len(paths))
    return head + b"".join(_LE_I32.pack(len(chunk)) + chunk for chunk in (*splits, *paths))


def write_file_enumerator(state: FileEnumerator, version: int = 1) -> bytes:
    """`PendingSplitsCheckpointSerializer` v1 (splits written by `write_file_split`, paths as
    the UTF-8 bytes of `Path.toString()`)."""
    if version != 1:
        raise FormatError(f"PendingSplitsCheckpoint: unknown serializer version {version}")
    splits = [write_file_split(split) for split in state.pending]
    return _pending_splits_bytes(1, splits, [p.encode("utf-8") for p in state.processed_paths])


def set_file_enumerator_positions(
    data: bytes, positions: Mapping[str, FilePosition | None], version: int = 1
) -> bytes:
    """A PendingSplitsCheckpoint with the checkpointed position of each pending split whose id
    is in `positions` replaced (`set_file_split_position`); every other byte is kept."""
    parts = _pending_splits_parts(data, version)
    splits = []
    for at, chunk in parts.splits:
        try:
            split = read_file_split(chunk, parts.split_version)
            if split.split_id in positions:
                chunk = set_file_split_position(chunk, positions[split.split_id])
        except FormatError as exc:
            raise FormatError(f"pending split at offset {at}: {exc}") from None
        splits.append(chunk)
    return _pending_splits_bytes(parts.split_version, splits, [c for _, c in parts.paths])


def _le_count(data: bytes, count: int, at: int, what: str) -> int:
    if not 0 <= count <= (len(data) - 16) // 4:
        raise FormatError(f"PendingSplitsCheckpoint: bad {what} count {count} at offset {at}")
    return count


def _le_chunk(data: bytes, pos: int) -> tuple[bytes, int]:
    if pos + 4 > len(data):
        raise FormatError(f"PendingSplitsCheckpoint: truncated at offset {pos}")
    (length,) = _LE_I32.unpack_from(data, pos)
    if not 0 <= length <= len(data) - pos - 4:
        raise FormatError(f"PendingSplitsCheckpoint: bad length {length} at offset {pos}")
    return data[pos + 4 : pos + 4 + length], pos + 4 + length


def read_kafka_enumerator(data: bytes, version: int) -> KafkaEnumerator:
    """`KafkaSourceEnumStateSerializer` v1 (topic, partition), v2 (+ assignment status,
    discovery flag), v3 (length-prefixed splits with offsets + status, discovery flag)."""
    if version not in (1, 2, 3):
        raise FormatError(f"KafkaSourceEnumState: unsupported serializer version {version}")
    reader = DataReader(data)
    at = reader.pos
    count = reader.check_count(reader.read_i32(), "partition", at, 6)
    split_version = reader.read_i32() if version == 3 else 0
    parts = tuple(_kafka_assignment(reader, version, split_version) for _ in range(count))
    finished = _read_flag(reader) if version >= 2 else None
    _expect_end(reader, "KafkaSourceEnumState")
    return KafkaEnumerator(version, parts, finished)


def _kafka_assignment(
    reader: DataReader, version: int, split_version: int
) -> KafkaPartitionAssignment:
    if version == 3:
        split = read_kafka_split(reader.read_bytes(_length(reader, "split")), split_version)
        return KafkaPartitionAssignment(
            split.topic,
            split.partition,
            _assignment_status(reader),
            split.starting_offset,
            split.stopping_offset,
        )
    topic, partition = reader.read_utf(), reader.read_i32()
    status = _assignment_status(reader) if version == 2 else None
    return KafkaPartitionAssignment(topic, partition, status)


def write_kafka_enumerator(state: KafkaEnumerator) -> bytes:
    """`KafkaSourceEnumStateSerializer` of `state.version` (v1–v3, as read)."""
    version = state.version
    if version not in (1, 2, 3):
        raise FormatError(f"KafkaSourceEnumState: unsupported serializer version {version}")
    if (state.initial_discovery_finished is None) != (version == 1):
        raise FormatError(f"KafkaSourceEnumState v{version}: discovery flag from v2 on only")
    out = DataWriter()
    out.write_i32(len(state.partitions))
    if version == 3:
        out.write_i32(0)  # the split serializer's version
    for part in state.partitions:
        if (part.status is None) != (version == 1):
            raise FormatError(f"KafkaSourceEnumState v{version}: assignment status from v2 on")
        if version == 3:
            if part.starting_offset is None or part.stopping_offset is None:
                raise FormatError("KafkaSourceEnumState v3: every split has its offsets")
            data = write_kafka_split(
                KafkaSplit(part.topic, part.partition, part.starting_offset, part.stopping_offset)
            )
            out.write_i32(len(data))
            out.write_bytes(data)
        else:
            out.write_utf(part.topic)
            out.write_i32(part.partition)
        if part.status is not None:
            out.write_i32(_ASSIGNMENT_CODES[part.status])
    if state.initial_discovery_finished is not None:
        out.write_bool(state.initial_discovery_finished)
    return out.getvalue()


_ASSIGNMENT_CODES = {name: code for code, name in KAFKA_ASSIGNMENT.items()}


def _assignment_status(reader: DataReader) -> str:
    at = reader.pos
    code = reader.read_i32()
    if code not in KAFKA_ASSIGNMENT:
        raise FormatError(f"unknown Kafka assignment status {code} at offset {at}")
    return KAFKA_ASSIGNMENT[code]


def read_number_sequence_enumerator(data: bytes, version: int = 1) -> NumberSequenceEnumerator:
    """`NumberSequenceSource.CheckpointSerializer` v1: i32 count, then that many splits."""
    if version != 1:
        raise FormatError(f"NumberSequenceSource checkpoint: unknown version {version}")
    reader = DataReader(data)
    at = reader.pos
    count = reader.check_count(reader.read_i32(), "split", at, 18)
    splits = tuple(
        NumberSequenceSplit(reader.read_utf(), reader.read_i64(), reader.read_i64())
        for _ in range(count)
    )
    _expect_end(reader, "NumberSequenceSource checkpoint")
    return NumberSequenceEnumerator(splits)


def write_number_sequence_enumerator(state: NumberSequenceEnumerator, version: int = 1) -> bytes:
    """`NumberSequenceSource.CheckpointSerializer` v1."""
    if version != 1:
        raise FormatError(f"NumberSequenceSource checkpoint: unknown version {version}")
    splits = [write_number_sequence_split(split) for split in state.remaining]
    return struct.pack(">i", len(splits)) + b"".join(splits)


def _write_kafka_enumerator_of(state: KafkaEnumerator, version: int) -> bytes:
    """`write_kafka_enumerator`, of a state read as that `version` (its layout differs by it)."""
    if state.version != version:
        raise FormatError(f"a v{state.version} Kafka enumerator state is not v{version}")
    return write_kafka_enumerator(state)


_ENUMERATORS: _Layouts[Enumerator] = _Layouts(
    "enumerator",
    {
        FILE: _Layout(FileEnumerator, read_file_enumerator, write_file_enumerator),
        KAFKA: _Layout(KafkaEnumerator, read_kafka_enumerator, _write_kafka_enumerator_of),
        NUMBER_SEQUENCE: _Layout(
            NumberSequenceEnumerator,
            read_number_sequence_enumerator,
            write_number_sequence_enumerator,
        ),
    },
)
read_enumerator = _ENUMERATORS.read
write_enumerator = _ENUMERATORS.write
enumerator_kinds = _ENUMERATORS.kinds


# --- which source ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Recognition:
    kind: str | None  # FILE, KAFKA, NUMBER_SEQUENCE, or None: not told apart
    evidence: str  # how: "enumerator and splits", "enumerator", "splits", or why not


_NAME_HINTS = {FILE: ("file",), KAFKA: ("kafka",), NUMBER_SEQUENCE: ("sequence", "number")}


def recognise(
    splits: Sequence[Versioned], enumerator: Versioned | None, name: str | None = None
) -> Recognition:
    """The source kind the evidence names. The enumerator's layout counts first (the
    FileSource one has a magic number); the splits must agree with it, each split parsing as
    the kind, except corrupt ones (they are reported when read). Where two kinds fit the same
    bytes (an empty list, say), the operator's name decides if it names exactly one of them.
    When no split fits any layout, only the FileSource enumerator's magic number names a kind
    (its splits are then reported as corrupt when read)."""
    from_enum = set(enumerator_kinds(enumerator)) if enumerator is not None else None
    from_splits = set().union(*(split_kinds(s) for s in splits)) if splits else None
    if from_splits == set():  # no split fits any layout: only a magic number still counts
        if from_enum != {FILE}:
            return Recognition(None, "no known split layout fits")
        from_splits = None
    if from_enum is not None and from_splits is not None:
        fits, evidence = from_enum & from_splits, "enumerator and splits"
    elif from_enum is not None:
        fits, evidence = from_enum, "enumerator"
    elif from_splits is not None:
        fits, evidence = from_splits, "splits"
    else:
        return Recognition(None, "no splits and no enumerator state")
    if len(fits) == 1:
        return Recognition(fits.pop(), evidence)
    if not fits:
        return Recognition(None, f"no known split or enumerator layout fits ({evidence})")
    named = [k for k in sorted(fits) if any(h in (name or "").lower() for h in _NAME_HINTS[k])]
    if len(named) == 1:
        return Recognition(named[0], f"{evidence} fit {', '.join(sorted(fits))}; operator name")
    return Recognition(None, f"{evidence} fit {' and '.join(sorted(fits))} alike")


# --- legacy FlinkKafkaConsumer ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LegacyKafkaOffset:
    """One `Tuple2<KafkaTopicPartition, Long>`: the last processed offset (restore resumes at
    offset + 1) or a `KafkaTopicPartitionStateSentinel`."""

    topic: str
    partition: int
    offset: int

    @property
    def marker(self) -> str | None:
        return LEGACY_KAFKA_MARKERS.get(self.offset)


def read_legacy_kafka_element(data: bytes) -> LegacyKafkaOffset:
    """Kryo 2.24: class id (varint+2), reference marker, FieldSerializer fields alphabetically
    (cachedHash, partition: zigzag varints; topic: reference marker + Kryo string), then the
    i64 offset of the Tuple2's LongSerializer field. The stored hash is checked against
    Java's `31 * topic.hashCode() + partition`, so a wrong reading cannot pass silently."""
    reader = _Kryo(data)
    class_id = reader.varint() - 2
    if class_id != _KRYO_KAFKA_TOPIC_PARTITION:
        raise FormatError(
            f"legacy Kafka offset: Kryo class id {class_id} at offset 0, expected "
            f"{_KRYO_KAFKA_TOPIC_PARTITION} (KafkaTopicPartition)"
        )
    reader.reference()
    cached_hash, partition = reader.zigzag(), reader.zigzag()
    reader.reference()
    topic = reader.string()
    if cached_hash != _java_int(31 * _java_hash(topic) + partition):
        raise FormatError(
            f"legacy Kafka offset: stored hash {cached_hash} does not match topic {topic!r} "
            f"partition {partition}"
        )
    offset = struct.unpack(">q", reader.take(8))[0]
    if reader.pos != len(data):
        raise FormatError(f"legacy Kafka offset: {len(data) - reader.pos} trailing bytes")
    return LegacyKafkaOffset(topic, partition, offset)


def write_legacy_kafka_element(offset: LegacyKafkaOffset) -> bytes:
    """`read_legacy_kafka_element`'s inverse: Kryo 2.24's `Output` writes of a
    KafkaTopicPartition (class id 85, its hash recomputed as Java does), then the i64."""
    out = bytearray(write_varint(_KRYO_KAFKA_TOPIC_PARTITION + 2))
    out += b"\x01"  # Kryo.NOT_NULL: a new object
    cached_hash = _java_int(31 * _java_hash(offset.topic) + offset.partition)
    out += write_varint(_zigzag(cached_hash)) + write_varint(_zigzag(offset.partition))
    out += b"\x01" + _kryo_string(offset.topic)
    return bytes(out) + struct.pack(">q", offset.offset)


def _zigzag(value: int) -> int:
    value = _java_int(value)
    return ((value << 1) ^ (value >> 31)) & 0xFFFFFFFF


def _kryo_string(text: str) -> bytes:
    """`Output.writeString`: 2–63 ASCII characters as bytes with the last one's high bit set,
    anything else as a UTF-8 length (characters + 1, `writeUtf8Length`) and each UTF-16 unit
    in one to three bytes."""
    units = text.encode("utf-16-be", "surrogatepass")
    chars = [unit for (unit,) in struct.iter_unpack(">H", units)]
    if 1 < len(chars) < 64 and all(c <= 127 for c in chars):
        data = bytearray(chars)
        data[-1] |= 0x80
        return bytes(data)
    out = bytearray(_utf8_length(len(chars) + 1))
    for c in chars:
        if c <= 0x7F:
            out.append(c)
        elif c > 0x7FF:
            out += bytes((0xE0 | (c >> 12) & 0x0F, 0x80 | (c >> 6) & 0x3F, 0x80 | c & 0x3F))
        else:
            out += bytes((0xC0 | (c >> 6) & 0x1F, 0x80 | c & 0x3F))
    return bytes(out)


def _utf8_length(value: int) -> bytes:
    """`Output.writeUtf8Length`: 6 bits with bits 8 (set) and 7 (more), then 7-bit groups."""
    first = (value & 0x3F) | 0x80
    value >>= 6
    if not value:
        return bytes((first,))
    out = bytearray((first | 0x40,))
    while value:
        more = value >> 7
        out.append((value & 0x7F) | (0x80 if more else 0))
        value = more
    return bytes(out)


class _Kryo:
    """The few Kryo 2.24 `Input` reads a KafkaTopicPartition needs."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, count: int) -> bytes:
        if self.pos + count > len(self.data):
            raise FormatError(f"legacy Kafka offset: truncated at offset {self.pos}")
        chunk = self.data[self.pos : self.pos + count]
        self.pos += count
        return chunk

    def varint(self) -> int:
        value = 0
        for shift in range(0, 35, 7):
            byte = self.take(1)[0]
            value |= (byte & 0x7F) << shift
            if byte < 0x80:
                return value
        raise FormatError(f"legacy Kafka offset: varint too long at offset {self.pos}")

    def zigzag(self) -> int:
        raw = self.varint() & 0xFFFFFFFF
        return (raw >> 1) ^ -(raw & 1)

    def reference(self) -> None:
        at = self.pos
        if self.varint() != 1:  # Kryo.NOT_NULL: a new object, not a back reference or null
            raise FormatError(f"legacy Kafka offset: unexpected Kryo reference at offset {at}")

    def string(self) -> str:
        at = self.pos
        first = self.take(1)[0]
        if first & 0x80:  # a UTF-8 length first (Kryo's `writeUtf8Length`)
            return self._utf8_string(first, at)
        end = at  # ASCII: every byte a character, the last one with its high bit set
        while end < len(self.data) and not self.data[end] & 0x80:
            end += 1
        self.pos = at
        chars = bytearray(self.take(end - at + 1))
        chars[-1] &= 0x7F
        return chars.decode("ascii")

    def _utf8_string(self, first: int, at: int) -> str:
        length = first & 0x3F
        shift, more = 6, first & 0x40
        while more:
            byte = self.take(1)[0]
            length |= (byte & 0x7F) << shift
            shift, more = shift + 7, byte & 0x80
        if length == 0:
            raise FormatError(f"legacy Kafka offset: null topic at offset {at}")
        units = []
        for _ in range(length - 1):
            units.append(self._utf8_char())
        # UTF-16 units: a surrogate pair becomes its character, a lone surrogate stays
        return (
            "".join(units).encode("utf-16-be", "surrogatepass").decode("utf-16-be", "surrogatepass")
        )

    def _utf8_char(self) -> str:
        b = self.take(1)[0]
        if b < 0x80:
            return chr(b)
        if b >> 5 == 0b110:
            return chr(((b & 0x1F) << 6) | (self.take(1)[0] & 0x3F))
        second, third = self.take(2)
        return chr(((b & 0x0F) << 12) | ((second & 0x3F) << 6) | (third & 0x3F))


def _java_hash(text: str) -> int:
    """Java's `String.hashCode` over UTF-16 units."""
    units = text.encode("utf-16-be", "surrogatepass")
    h = 0
    for (unit,) in struct.iter_unpack(">H", units):
        h = (31 * h + unit) & 0xFFFFFFFF
    return _java_int(h)


def _java_int(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value
