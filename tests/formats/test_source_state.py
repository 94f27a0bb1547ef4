"""`formats/source_state.py` on bytes.

What is covered how:
* FileSource split and PendingSplitsCheckpoint: real bytes written by Flink 2.3.0 (the committed
  savepoint tests/flink/sources/fixture, checked against Flink's own serializers in
  tests/operations/test_positions.py); here only corruption.
* KafkaSource split and enumerator state v1–v3: the Kafka connector is not in the Flink wheels,
  so the bytes are built here from flink-state-values.md §10.2/§10.3, whose layouts were checked
  against flink-connector-kafka's KafkaPartitionSplitSerializer and
  KafkaSourceEnumStateSerializer (serializeV1/V2/V3) at its main branch; the §10.2/§10.3 worked
  examples are used verbatim.
* Legacy FlinkKafkaConsumer: real bytes written by Flink 1.19's FlinkKafkaConsumer, the two
  elements of flink-connector-kafka v3.4.0's
  src/test/resources/kafka-consumer-migration-test-flink1.19-snapshot (blob ca2179ca), whose
  FlinkKafkaConsumerBaseMigrationTest expects ("abc", 13) → 16768 and ("def", 7) → 987654321;
  and the §10.4 worked examples.
* NumberSequenceSource: the element measured on Flink 2.3 in §10.1.
"""

from __future__ import annotations

import struct

import pytest

from statectl.errors import FormatError
from statectl.formats import source_state as ss


def utf(text: str) -> bytes:
    return struct.pack(">H", len(text)) + text.encode()


def kafka_split(topic: str, partition: int, start: int, stop: int) -> bytes:
    return utf(topic) + struct.pack(">iqq", partition, start, stop)


def element(version: int, body: bytes) -> bytes:
    framed = struct.pack(">ii", version, len(body)) + body
    return struct.pack(">i", len(framed)) + framed


# --- FLIP-27 framing and KafkaSource ---------------------------------------------------------

DOC_KAFKA_ELEMENT = bytes.fromhex(
    "00000024 00000000 0000001C 00066F7264657273 00000003 000000000000002A 8000000000000000"
)


def test_kafka_split_of_the_reference() -> None:
    framed = ss.read_reader_state_element(DOC_KAFKA_ELEMENT)
    assert framed.version == 0
    assert ss.split_kinds(framed) == (ss.KAFKA,)
    split = ss.read_split(ss.KAFKA, framed)
    assert split == ss.KafkaSplit("orders", 3, 42, -(1 << 63))
    assert (split.split_id, split.starting_marker, split.stopping_marker) == (
        "orders-3", None, "NO_STOPPING_OFFSET"
    )  # fmt: skip
    assert element(0, kafka_split("orders", 3, 42, -(1 << 63))) == DOC_KAFKA_ELEMENT


@pytest.mark.parametrize(
    ("start", "marker"), [(-2, "EARLIEST"), (-1, "LATEST"), (-3, "COMMITTED"), (7, None)]
)
def test_kafka_starting_markers(start: int, marker: str | None) -> None:
    split = ss.read_kafka_split(kafka_split("t", 0, start, -3))
    assert (split.starting_marker, split.stopping_marker) == (marker, "COMMITTED")


def test_kafka_enumerator_versions() -> None:
    split = kafka_split("orders", 3, 42, -(1 << 63))
    v3 = struct.pack(">iii", 1, 0, len(split)) + split + struct.pack(">i?", 0, True)
    coordinator = struct.pack(">iii", 1, 3, len(v3)) + v3
    assert coordinator.hex().startswith("00000001000000030000002d0000000100000000")  # §10.3
    state = ss.read_coordinator_state(coordinator)
    assert ss.enumerator_kinds(state.enumerator) == (ss.KAFKA,)
    enum = ss.read_enumerator(ss.KAFKA, state.enumerator)
    assert enum == ss.KafkaEnumerator(
        3,
        (ss.KafkaPartitionAssignment("orders", 3, "ASSIGNED", 42, -(1 << 63)),),
        True,
    )
    v2 = bytes.fromhex("00000001") + utf("orders") + bytes.fromhex("00000003 00000001 01")
    assert ss.read_kafka_enumerator(v2, 2).partitions == (
        ss.KafkaPartitionAssignment("orders", 3, "UNASSIGNED"),
    )
    v1 = bytes.fromhex("00000001") + utf("orders") + bytes.fromhex("00000003")
    assert ss.read_kafka_enumerator(v1, 1) == ss.KafkaEnumerator(
        1, (ss.KafkaPartitionAssignment("orders", 3, None),), None
    )
    with pytest.raises(FormatError, match="assignment status 7"):
        ss.read_kafka_enumerator(v2[:-5] + bytes.fromhex("00000007 01"), 2)


def test_number_sequence_element_measured_on_flink() -> None:
    raw = bytes.fromhex("0000001B 00000001 00000013 0001322000000000 0036DC3FFFFFFFFFFFFFFF")
    framed = ss.read_reader_state_element(raw)
    assert ss.split_kinds(framed) == (ss.NUMBER_SEQUENCE,)
    split = ss.read_split(ss.NUMBER_SEQUENCE, framed)
    assert (split.split_id, split.last) == ("2", (1 << 62) - 1)
    enum = ss.read_coordinator_state(bytes.fromhex("00000001 00000001 00000004 00000000"))
    # an empty list reads as a NumberSequenceSource and a v1 KafkaSource enumerator alike
    assert ss.enumerator_kinds(enum.enumerator) == (ss.KAFKA, ss.NUMBER_SEQUENCE)
    assert ss.recognise([], enum.enumerator).kind is None
    assert ss.recognise([], enum.enumerator, "Source: Sequence").kind == ss.NUMBER_SEQUENCE
    assert ss.recognise([framed], enum.enumerator).kind == ss.NUMBER_SEQUENCE


def test_framing_errors_name_offsets() -> None:
    with pytest.raises(FormatError, match="byte array length 36 at offset 0"):
        ss.read_reader_state_element(DOC_KAFKA_ELEMENT[:-1])
    with pytest.raises(FormatError, match="split length 99 at offset 8"):
        ss.read_reader_state_element(DOC_KAFKA_ELEMENT[:8] + struct.pack(">i", 99) + DOC_KAFKA_ELEMENT[12:])  # fmt: skip
    with pytest.raises(FormatError, match="serde version 5"):
        ss.read_coordinator_state(bytes.fromhex("00000005 00000001 00000000"))


def test_unknown_bytes_stay_unrecognised() -> None:
    custom = ss.Versioned(3, b"\x01\x02\x03")
    assert ss.split_kinds(custom) == ()
    found = ss.recognise([custom], ss.Versioned(1, b"\x07"))
    assert found.kind is None


# --- FileSource -------------------------------------------------------------------------------


def file_split_bytes(
    path: str = "/data/a.txt", position: tuple[int, int] | None = (-1, 5)
) -> bytes:
    def string(text: str) -> bytes:  # nullable StringValue, ASCII
        return b"\x01" + bytes([len(text) + 1]) + text.encode()

    uri = (
        b"\x01" + string("file") + b"\x00\x00" + struct.pack(">i", -1) + string(path) + b"\x00\x00"
    )
    body = utf("0000000001") + uri + struct.pack(">qqqq", 0, 100, 1700000000000, 100)
    body += struct.pack(">i", 1) + utf("host-a")
    body += b"\x01" + struct.pack(">qq", *position) if position else b"\x00"
    return body


def test_file_split() -> None:
    split = ss.read_file_split(file_split_bytes())
    assert split == ss.FileSplit(
        "0000000001", "file:/data/a.txt", 0, 100, 1700000000000, 100, ("host-a",), -1, 5
    )
    assert ss.read_file_split(file_split_bytes(position=None)).reader_offset is None
    assert ss.split_kinds(ss.Versioned(1, file_split_bytes())) == (ss.FILE,)


def test_pending_splits_checkpoint() -> None:
    split = file_split_bytes(position=None)
    path = b"file:/data/done.txt"
    body = struct.pack("<Iiii", 0xDEADBEEF, 1, 1, 1) + struct.pack("<i", len(split)) + split
    body += struct.pack("<i", len(path)) + path
    enum = ss.read_file_enumerator(body)
    assert enum.processed_paths == ("file:/data/done.txt",)
    assert enum.pending[0].path == "file:/data/a.txt"
    assert ss.enumerator_kinds(ss.Versioned(1, body)) == (ss.FILE,)
    with pytest.raises(FormatError, match="bad magic"):
        ss.read_file_enumerator(b"\0" * 16)


def test_corrupt_file_split() -> None:
    data = file_split_bytes()
    with pytest.raises(FormatError, match="offset"):
        ss.read_file_split(data[:-3])
    with pytest.raises(FormatError, match="boolean byte 7"):
        ss.read_file_split(data[:12] + b"\x07" + data[13:])


# --- legacy FlinkKafkaConsumer ----------------------------------------------------------------

# The union list's two elements in kafka-consumer-migration-test-flink1.19-snapshot (connector v3.4.0)
FLINK_1_19_ELEMENTS = [
    ("5701d6cfec021a016162e30000000000004180", ("abc", 13, 16768)),
    ("5701c4f2f7020e016465e6000000003ade68b1", ("def", 7, 987654321)),
]


@pytest.mark.parametrize(("hex_bytes", "expected"), FLINK_1_19_ELEMENTS)
def test_legacy_kafka_written_by_flink_1_19(hex_bytes: str, expected: tuple[str, int, int]) -> None:
    offset = ss.read_legacy_kafka_element(bytes.fromhex(hex_bytes))
    assert (offset.topic, offset.partition, offset.offset) == expected
    assert offset.marker is None


def test_legacy_kafka_reference_examples() -> None:
    orders = ss.read_legacy_kafka_element(bytes.fromhex("570183999 8FF08 0601 6F72646572F3 000000000000002A".replace(" ", "")))  # fmt: skip
    assert (orders.topic, orders.partition, orders.offset) == ("orders", 3, 42)
    t = ss.read_legacy_kafka_element(bytes.fromhex("5701983800018274FFFFFF2AD0922891"))
    assert (t.topic, t.partition, t.marker) == ("t", 0, "EARLIEST_OFFSET")


def test_legacy_kafka_wrong_hash_or_class_is_refused() -> None:
    good = bytes.fromhex(FLINK_1_19_ELEMENTS[0][0])
    with pytest.raises(FormatError, match="stored hash"):
        ss.read_legacy_kafka_element(good[:2] + b"\xd8" + good[3:])
    with pytest.raises(FormatError, match="class id 86"):
        ss.read_legacy_kafka_element(b"\x58" + good[1:])
