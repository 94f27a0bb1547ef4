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
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from statectl.errors import FormatError
from statectl.formats.java_io import DataReader
from statectl.formats.java_types import read_java_string

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


@dataclass(frozen=True, slots=True)
class CoordinatorState:
    serde_version: int  # SourceCoordinatorSerdeUtils: 0 (trailing bytes allowed) or 1
    enumerator: Versioned


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
    return CoordinatorState(serde, Versioned(version, body))


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
class UnrecognisedSplit:
    version: int
    data: bytes
    reason: str


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
    split_id = reader.read_utf()
    path = _read_path(reader)
    offset, length, modified, size = (reader.read_i64() for _ in range(4))
    at = reader.pos
    count = reader.check_count(reader.read_i32(), "hostname", at, 2)
    hosts = tuple(reader.read_utf() for _ in range(count))
    position = (reader.read_i64(), reader.read_i64()) if _read_flag(reader) else (None, None)
    return FileSplit(split_id, path, offset, length, modified, size, hosts, *position)


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


def read_kafka_split(data: bytes, version: int = 0) -> KafkaSplit:
    """`KafkaPartitionSplitSerializer` v0: utf topic, i32 partition, i64 start, i64 stop."""
    if version != 0:
        raise FormatError(f"KafkaPartitionSplit: unknown serializer version {version}")
    reader = DataReader(data)
    split = KafkaSplit(reader.read_utf(), reader.read_i32(), reader.read_i64(), reader.read_i64())
    _expect_end(reader, "KafkaPartitionSplit")
    return split


def read_number_sequence_split(data: bytes, version: int = 1) -> NumberSequenceSplit:
    """`NumberSequenceSource.SplitSerializer` v1: utf id, i64 from, i64 to."""
    if version != 1:
        raise FormatError(f"NumberSequenceSplit: unknown serializer version {version}")
    reader = DataReader(data)
    split = NumberSequenceSplit(reader.read_utf(), reader.read_i64(), reader.read_i64())
    _expect_end(reader, "NumberSequenceSplit")
    return split


_SPLIT_READERS: dict[str, Callable[[bytes, int], Split]] = {
    FILE: read_file_split,
    KAFKA: read_kafka_split,
    NUMBER_SEQUENCE: read_number_sequence_split,
}


def read_split(kind: str, split: Versioned) -> Split:
    """The split of a known source `kind`; FormatError (with offsets) if it does not parse."""
    return _SPLIT_READERS[kind](split.data, split.version)


def split_kinds(split: Versioned) -> tuple[str, ...]:
    """The kinds whose split layout reads these bytes exactly."""
    return tuple(k for k in KINDS if _parses(read_split, k, split))


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


@dataclass(frozen=True, slots=True)
class UnrecognisedEnumerator:
    version: int
    data: bytes
    reason: str


Enumerator = FileEnumerator | KafkaEnumerator | NumberSequenceEnumerator | UnrecognisedEnumerator


def read_file_enumerator(data: bytes, version: int = 1) -> FileEnumerator:
    """`PendingSplitsCheckpointSerializer` v1: little-endian i32 magic, split serializer
    version, split count, path count; then length-prefixed splits and UTF-8 paths."""
    if version != 1:
        raise FormatError(f"PendingSplitsCheckpoint: unknown serializer version {version}")
    if len(data) < 16:
        raise FormatError(f"PendingSplitsCheckpoint: {len(data)} bytes, shorter than its header")
    magic, split_version, splits, paths = struct.unpack_from("<IiiI", data)
    if magic != _PENDING_SPLITS_MAGIC:
        raise FormatError(f"PendingSplitsCheckpoint: bad magic 0x{magic:08X} at offset 0")
    pos = 16
    pending = []
    for _ in range(_le_count(data, splits, 8, "split")):
        chunk, pos = _le_chunk(data, pos)
        try:
            pending.append(read_file_split(chunk, split_version))
        except FormatError as exc:
            raise FormatError(f"pending split at offset {pos - len(chunk)}: {exc}") from None
    processed = []
    for _ in range(_le_count(data, paths, 12, "path")):
        chunk, pos = _le_chunk(data, pos)
        processed.append(chunk.decode("utf-8", "replace"))
    if pos != len(data):
        raise FormatError(f"PendingSplitsCheckpoint: {len(data) - pos} trailing bytes at {pos}")
    return FileEnumerator(tuple(pending), tuple(processed))


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


_ENUMERATOR_READERS: dict[str, Callable[[bytes, int], Enumerator]] = {
    FILE: read_file_enumerator,
    KAFKA: read_kafka_enumerator,
    NUMBER_SEQUENCE: read_number_sequence_enumerator,
}


def read_enumerator(kind: str, state: Versioned) -> Enumerator:
    return _ENUMERATOR_READERS[kind](state.data, state.version)


def enumerator_kinds(state: Versioned) -> tuple[str, ...]:
    """The kinds whose enumerator layout reads these bytes exactly."""
    return tuple(k for k in KINDS if _parses(read_enumerator, k, state))


T = TypeVar("T")


def _parses(read: Callable[[str, Versioned], T], kind: str, data: Versioned) -> bool:
    try:
        read(kind, data)
    except FormatError:
        return False
    return True


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
        return "".join(units)

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
