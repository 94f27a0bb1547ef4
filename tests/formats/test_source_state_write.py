"""The writers of `formats/source_state.py`: reading then writing gives back the very bytes.

Byte strings: every one `tests/formats/test_source_state.py` reads (the Kafka ones built from
flink-state-values.md §10, as the Kafka connector is not in the Flink wheels, and the legacy
consumer's elements written by Flink 1.19), and the FileSource state Flink 2.3.0 wrote into the
committed savepoint tests/flink/sources/fixture (and, marked `flink`, into fresh ones, one of
them with its operator state in Snappy-compressed files).
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from statectl.errors import FormatError
from statectl.formats import operator_state
from statectl.formats import source_state as ss
from statectl.savepoint.entries import operator_files
from statectl.savepoint.reader import open_savepoint
from tests.formats.test_source_state import (
    DOC_KAFKA_ELEMENT,
    FLINK_1_19_ELEMENTS,
    element,
    file_split_bytes,
    kafka_split,
    utf,
)

FIXTURE = Path(__file__).resolve().parents[1] / "flink" / "sources" / "fixture"
LONG_MIN = -(1 << 63)


# --- framing ---------------------------------------------------------------------------------

NUMBER_SEQUENCE_ELEMENT = bytes.fromhex("0000001B 00000001 00000013 0001322000000000 0036DC3FFFFFFFFFFFFFFF")  # fmt: skip


@pytest.mark.parametrize(
    "raw", [DOC_KAFKA_ELEMENT, NUMBER_SEQUENCE_ELEMENT, element(1, file_split_bytes())]
)
def test_reader_state_element_round_trip(raw: bytes) -> None:
    assert ss.write_reader_state_element(ss.read_reader_state_element(raw)) == raw


@pytest.mark.parametrize(
    "raw",
    [
        bytes.fromhex("00000001 00000001 00000004 00000000"),
        bytes.fromhex("00000000 00000001 00000004 00000000 CAFE"),  # serde 0: trailing bytes
    ],
)
def test_coordinator_state_round_trip(raw: bytes) -> None:
    assert ss.write_coordinator_state(ss.read_coordinator_state(raw)) == raw


def test_trailing_bytes_only_in_serde_version_0() -> None:
    with pytest.raises(FormatError, match="serde version 0"):
        ss.write_coordinator_state(ss.CoordinatorState(1, ss.Versioned(1, b""), b"\x01"))


# --- KafkaSource -----------------------------------------------------------------------------


@pytest.mark.parametrize("start", [42, -2, -1, -3, 0])
def test_kafka_split_round_trip(start: int) -> None:
    raw = kafka_split("orders", 3, start, LONG_MIN)
    split = ss.read_kafka_split(raw)
    assert ss.write_kafka_split(split) == raw
    assert ss.write_split(ss.KAFKA, split, 0) == ss.Versioned(0, raw)


def kafka_enumerators() -> list[tuple[int, bytes]]:
    split = kafka_split("orders", 3, 42, LONG_MIN)
    v3 = struct.pack(">iii", 1, 0, len(split)) + split + struct.pack(">i?", 0, True)
    v2 = bytes.fromhex("00000001") + utf("orders") + bytes.fromhex("00000003 00000001 01")
    v1 = bytes.fromhex("00000001") + utf("orders") + bytes.fromhex("00000003")
    return [(3, v3), (2, v2), (1, v1), (1, bytes.fromhex("00000000"))]


@pytest.mark.parametrize(("version", "raw"), kafka_enumerators())
def test_kafka_enumerator_round_trip(version: int, raw: bytes) -> None:
    enum = ss.read_kafka_enumerator(raw, version)
    assert ss.write_kafka_enumerator(enum) == raw
    assert ss.write_enumerator(ss.KAFKA, enum, version) == ss.Versioned(version, raw)


def test_kafka_enumerator_v3_needs_offsets() -> None:
    part = ss.KafkaPartitionAssignment("t", 0, "ASSIGNED")
    with pytest.raises(FormatError, match="offsets"):
        ss.write_kafka_enumerator(ss.KafkaEnumerator(3, (part,), True))


def test_kafka_split_moved_exact_bytes() -> None:
    """The §10.2 element with its next offset set to EARLIEST (-2): only the start changes."""
    split = ss.read_split(ss.KAFKA, ss.read_reader_state_element(DOC_KAFKA_ELEMENT))
    assert isinstance(split, ss.KafkaSplit)
    moved = ss.KafkaSplit(split.topic, split.partition, -2, split.stopping_offset)
    new = ss.write_reader_state_element(ss.write_split(ss.KAFKA, moved, 0))
    assert new == bytes.fromhex(
        "00000024 00000000 0000001C 00066F7264657273 00000003 FFFFFFFFFFFFFFFE 8000000000000000"
    )


# --- legacy FlinkKafkaConsumer ----------------------------------------------------------------

LEGACY_REFERENCE = [
    "5701839998FF0806016F72646572F3000000000000002A",  # ("orders", 3) → 42, §10.4
    "5701983800018274FFFFFF2AD0922891",  # ("t", 0) → EARLIEST_OFFSET, §10.4
]


@pytest.mark.parametrize("hex_bytes", [h for h, _ in FLINK_1_19_ELEMENTS] + LEGACY_REFERENCE)
def test_legacy_kafka_round_trip(hex_bytes: str) -> None:
    raw = bytes.fromhex(hex_bytes)
    assert ss.write_legacy_kafka_element(ss.read_legacy_kafka_element(raw)) == raw


@pytest.mark.parametrize("topic", ["", "a", "ab", "x" * 63, "x" * 64, "x" * 9000, "é", "日本", "a\U0001f600"])  # fmt: skip
def test_legacy_kafka_topics_kryo_writes_each_way(topic: str) -> None:
    """ASCII of 2–63 characters inline, anything else with a UTF-8 length (1, 2 and 3 bytes)."""
    offset = ss.LegacyKafkaOffset(topic, 7, 123)
    assert ss.read_legacy_kafka_element(ss.write_legacy_kafka_element(offset)) == offset


def test_legacy_kafka_moved_exact_bytes() -> None:
    """("abc", 13) of Flink 1.19 moved to GROUP_OFFSET, and to the next offset 100 (stored 99):
    the Kryo part is the very bytes Flink wrote, the i64 after it the new value."""
    raw = bytes.fromhex(FLINK_1_19_ELEMENTS[0][0])
    offset = ss.read_legacy_kafka_element(raw)
    group = ss.write_legacy_kafka_element(ss.LegacyKafkaOffset("abc", 13, -915623761773))
    assert group == bytes.fromhex("5701d6cfec021a016162e3 FFFFFF2AD0922893")
    moved = ss.write_legacy_kafka_element(ss.LegacyKafkaOffset(offset.topic, offset.partition, 99))
    assert moved == raw[:-8] + struct.pack(">q", 99)


# --- FileSource ------------------------------------------------------------------------------


@pytest.mark.parametrize("position", [(-1, 5), None, (120, 0)])
def test_file_split_round_trip(position: tuple[int, int] | None) -> None:
    raw = file_split_bytes(position=position)
    split = ss.read_file_split(raw)
    assert ss.write_file_split(split) == raw
    assert ss.set_file_split_position(raw, ss.file_position(split)) == raw


@pytest.mark.parametrize(
    "path",
    ["hdfs://nn:8020/data/x", "s3://bucket/key/part-0", "hdfs://user@nn/x", "file:/a b/ü.txt"],
)
def test_file_split_paths(path: str) -> None:
    split = ss.FileSplit("7", path, 0, 10, 1, 10, (), None, None)
    assert ss.read_file_split(ss.write_file_split(split)) == split


def test_file_split_position_edit() -> None:
    raw = file_split_bytes(position=(-1, 5))
    moved = ss.set_file_split_position(raw, (40, 2))
    assert moved == raw[:-17] + b"\x01" + struct.pack(">qq", 40, 2)
    assert ss.set_file_split_position(raw, None) == raw[:-17] + b"\x00"
    with pytest.raises(FormatError, match="bad checkpointed position"):
        ss.set_file_split_position(raw, (-2, 0))


def test_pending_splits_round_trip_and_edit() -> None:
    split = file_split_bytes(position=None)
    path = b"file:/data/done.txt"
    body = struct.pack("<Iiii", 0xDEADBEEF, 1, 1, 1) + struct.pack("<i", len(split)) + split
    body += struct.pack("<i", len(path)) + path
    enum = ss.read_file_enumerator(body)
    assert ss.write_file_enumerator(enum) == body
    assert ss.set_file_enumerator_positions(body, {}) == body
    moved = ss.set_file_enumerator_positions(body, {"0000000001": (-1, 9)})
    assert ss.read_file_enumerator(moved).pending[0].records_to_skip == 9
    assert len(moved) == len(body) + 16


def test_number_sequence_round_trip() -> None:
    framed = ss.read_reader_state_element(NUMBER_SEQUENCE_ELEMENT)
    split = ss.read_split(ss.NUMBER_SEQUENCE, framed)
    assert ss.write_split(ss.NUMBER_SEQUENCE, split, 1) == framed
    enum = bytes.fromhex("00000001") + framed.data
    state = ss.read_number_sequence_enumerator(enum)
    assert ss.write_number_sequence_enumerator(state) == enum


def file_source_state(savepoint: Path) -> tuple[list[bytes], bytes]:
    """Every SourceReaderState element and the coordinator state of a FileSource savepoint."""
    sp = open_savepoint(str(savepoint))
    op = sp.find_operator("file-src")
    elements = []
    for file in operator_files(sp, op):
        data = file.stream.read()
        layout = operator_state.file_layout(file.handle.states, file.stream.size, data)
        for start, end in layout.elements[ss.READER_STATE]:
            elements.append(operator_state.element_bytes(data[start:end], layout.compressed))
    assert op.coordinator_state is not None
    return elements, sp.stream(op.coordinator_state).read()


def check_file_source_round_trip(savepoint: Path) -> None:
    elements, coordinator = file_source_state(savepoint)
    assert elements
    for raw in elements:
        framed = ss.read_reader_state_element(raw)
        split = ss.read_split(ss.FILE, framed)
        assert ss.write_reader_state_element(ss.write_split(ss.FILE, split, 1)) == raw
    state = ss.read_coordinator_state(coordinator)
    enum = ss.read_enumerator(ss.FILE, state.enumerator)
    assert isinstance(enum, ss.FileEnumerator) and enum.pending
    written = ss.write_enumerator(ss.FILE, enum, state.enumerator.version)
    assert ss.write_coordinator_state(ss.CoordinatorState(state.serde_version, written)) == coordinator  # fmt: skip


def test_real_file_source_round_trip() -> None:
    check_file_source_round_trip(FIXTURE / "savepoint")


@pytest.mark.flink
@pytest.mark.parametrize("name", ["savepoint", "savepoint-files"])
def test_fresh_file_source_round_trip(name: str) -> None:
    from tests.flink import harness

    check_file_source_round_trip(harness.file_source_savepoint() / name)
