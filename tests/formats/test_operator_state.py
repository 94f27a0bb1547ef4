"""Operator-state file layout (spec §3.3–§3.5) on hand-built files with Flink-written headers."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from statectl.errors import FormatError, UnsupportedError
from statectl.formats import java_types as jt
from statectl.formats import operator_state as ops
from statectl.formats import snappy_framed
from statectl.formats.handles import DistributionMode, OperatorStateOffsets

DATA = Path(__file__).parent / "data"
SPLIT, UNION, BROADCAST = (
    DistributionMode.SPLIT_DISTRIBUTE,
    DistributionMode.UNION,
    DistributionMode.BROADCAST,
)
STRING = jt.KEY_TYPES["org.apache.flink.api.common.typeutils.base.StringSerializer"]
LONG = jt.KEY_TYPES["org.apache.flink.api.common.typeutils.base.LongSerializer"]


def longs(*values: int) -> bytes:
    return b"".join(struct.pack(">q", v) for v in values)


def test_spans_as_in_the_spec_example() -> None:
    # 2.3, two Long list states: union [366], split [374, 382, 390], file length 398 (§3.3)
    states = [
        OperatorStateOffsets("union", UNION, (366,)),
        OperatorStateOffsets("split", SPLIT, (374, 382, 390)),
    ]
    assert ops.element_spans(states, 398) == (
        ops.StateElements("union", UNION, ((366, 374),)),
        ops.StateElements("split", SPLIT, ((374, 382), (382, 390), (390, 398))),
    )


def test_uncompressed_file_layout() -> None:
    header = (DATA / "operator.bin").read_bytes()
    h = len(header)
    file = header + longs(1, 2) + longs(3) + b"\x00\x00\x00\x00"  # split 2, union 1, empty map
    states = [
        OperatorStateOffsets("split", SPLIT, (h, h + 8)),
        OperatorStateOffsets("union", UNION, (h + 16,)),
        OperatorStateOffsets("bc", BROADCAST, (h + 24,)),
        OperatorStateOffsets("empty", SPLIT, ()),
    ]
    layout = ops.file_layout(states, len(file), file)
    assert (layout.header_length, layout.compressed) == (h, False)
    assert layout.elements == {
        "split": ((h, h + 8), (h + 8, h + 16)),
        "union": ((h + 16, h + 24),),
        "bc": ((h + 24, h + 28),),
        "empty": (),
    }
    assert [ops.element_bytes(file[a:b], False) for a, b in layout.elements["split"]] == [
        longs(1),
        longs(2),
    ]


def chunk(element: bytes) -> bytes:
    crc = struct.pack("<I", snappy_framed.masked_crc32c(element))
    return b"\x01" + (len(element) + 4).to_bytes(3, "little") + crc + element


def test_compressed_file_layout_as_flink_writes_it() -> None:
    # header (flag 1), one Snappy stream for all data, every element a chunk of its own (§3.5)
    header = (DATA / "operator_compressed.bin").read_bytes()
    h = len(header) + 10
    file = (
        header
        + snappy_framed.STREAM_IDENTIFIER
        + chunk(longs(1))
        + chunk(longs(2))
        + chunk(longs(3))
    )
    states = [
        OperatorStateOffsets("split", SPLIT, (h, h + 16)),
        OperatorStateOffsets("union", UNION, (h + 32,)),
    ]
    layout = ops.file_layout(states, len(file), file)
    assert (layout.header_length, layout.compressed) == (len(header), True)
    assert file[h : h + 4] == bytes.fromhex("010c0000")
    spans = layout.elements["split"] + layout.elements["union"]
    assert [ops.element_bytes(file[a:b], True) for a, b in spans] == [longs(1), longs(2), longs(3)]


def test_compressed_file_whose_states_are_all_empty() -> None:
    header = (DATA / "operator_compressed.bin").read_bytes()
    file = header + snappy_framed.STREAM_IDENTIFIER
    layout = ops.file_layout([OperatorStateOffsets("split", SPLIT, ())], len(file), file)
    assert layout.header_length == len(header)


def test_compressed_file_without_identifier() -> None:
    header = (DATA / "operator_compressed.bin").read_bytes()
    file = header + chunk(longs(1))
    state = OperatorStateOffsets("split", SPLIT, (len(header),))
    with pytest.raises(FormatError, match="no Snappy stream identifier before offset"):
        ops.file_layout([state], len(file), file)
    with pytest.raises(ValueError, match="must reach the first offset"):
        ops.file_layout([state], len(file), file[:10])


def test_compressed_elements_sharing_an_offset_are_refused() -> None:
    # Flink 1.18.1 with snapshot compression: getPos() did not flush, so the two elements of
    # "split" both carry the offset of the one chunk holding them (FLINK-34063).
    header = (DATA / "operator_compressed.bin").read_bytes()
    h = len(header) + 10
    file = header + snappy_framed.STREAM_IDENTIFIER + chunk(longs(1, 2)) + chunk(longs(3))
    states = [
        OperatorStateOffsets("split", SPLIT, (h, h)),
        OperatorStateOffsets("union", UNION, (h + 24,)),
    ]
    with pytest.raises(
        UnsupportedError, match=r"'split': 2 elements at only 1 offsets.*FLINK-34063"
    ):
        ops.file_layout(states, len(file), file)
    # the same offsets in an uncompressed file are zero-length elements, not an error
    plain = (DATA / "operator.bin").read_bytes()
    ops.file_layout(
        [OperatorStateOffsets("split", SPLIT, (len(plain), len(plain)))], len(plain) + 8, plain
    )


@pytest.mark.parametrize("offset", [0, -1, 500])
def test_offsets_outside_the_file(offset: int) -> None:
    with pytest.raises(FormatError, match=f"operator state 'split': offset {offset} is outside"):
        ops.element_spans([OperatorStateOffsets("split", SPLIT, (100, offset))], 400)


def test_shared_offsets_share_a_span() -> None:
    spans = ops.element_spans([OperatorStateOffsets("s", SPLIT, (10, 10, 20))], 30)
    assert spans[0].spans == ((10, 20), (10, 20), (20, 30))


# --- broadcast state -------------------------------------------------------------------------


def test_broadcast_map() -> None:
    entries = [(jt.write_java_string("a"), longs(1)), (jt.write_java_string("é"), longs(-2))]
    element = ops.build_broadcast_element(entries)
    assert element == bytes.fromhex(
        "00000002 0261 0000000000000001 02e901 fffffffffffffffe".replace(" ", "")
    )
    assert ops.broadcast_entry_count(element) == 2
    assert ops.split_broadcast_entries(element, STRING, LONG) == entries
    assert ops.split_broadcast_entries(element, STRING, ops.FixedLength(8)) == entries
    assert ops.split_broadcast_entries(ops.build_broadcast_element([]), STRING, LONG) == []


@pytest.mark.parametrize(
    ("element", "message"),
    [
        (b"\x00\x00", "has no entry count"),
        (b"\xff\xff\xff\xff", "negative broadcast state entry count -1"),
        (
            b"\x00\x00\x00\x01\x02a" + longs(1) + b"\x00",
            "1 unexpected bytes after 1 broadcast entries",
        ),
        (b"\x00\x00\x00\x02\x02a" + longs(1), "cannot read a String key"),
        (b"\x00\x00\x00\x01\x02a\x00\x00", "value of 8 bytes at offset 6 runs past the end"),
    ],
)
def test_bad_broadcast_maps(element: bytes, message: str) -> None:
    with pytest.raises(FormatError, match=message):
        ops.split_broadcast_entries(element, STRING, ops.FixedLength(8))
