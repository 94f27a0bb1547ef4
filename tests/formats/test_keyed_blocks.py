"""Canonical key-group blocks and offsets (spec §4.3–§4.5) on hand-built bytes."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from statectl.errors import FormatError
from statectl.formats import keyed_blocks as kb
from statectl.formats import snappy_framed

# Spec §4.6 examples: String key "k29" (key group 0, maxParallelism 128), VoidNamespace.
CNT_KEY = bytes.fromhex("00046b323900")
CNT_VALUE = (16).to_bytes(8, "big")
MP_KEY = bytes.fromhex("00046b323900036d30")
MP_VALUE = b"\x00" + (7).to_bytes(8, "big")


def entry(key: bytes, value: bytes, last: bool) -> bytes:
    flagged = bytes([key[0] | 0x80]) + key[1:] if last else key
    return len(flagged).to_bytes(4, "big") + flagged + len(value).to_bytes(4, "big") + value


# state 2 with one entry, then state 0 with two entries, then the end mark
BLOCK = (
    b"\x00\x02"
    + entry(MP_KEY, MP_VALUE, last=True)
    + b"\x00\x00"
    + entry(CNT_KEY, CNT_VALUE, last=False)
    + entry(CNT_KEY[:-1] + b"\x01", b"", last=True)
    + b"\xff\xff"
)


def test_build_block_writes_flags_state_ids_and_end_mark() -> None:
    built = kb.build_block(
        [
            (2, [(MP_KEY, MP_VALUE)]),
            (1, []),
            (0, [(CNT_KEY, CNT_VALUE), (CNT_KEY[:-1] + b"\x01", b"")]),
        ]
    )
    assert built == BLOCK
    assert built[:15] == bytes.fromhex("0002 00000009 80046b323900036d30".replace(" ", ""))


def test_iter_entries_clears_the_flag() -> None:
    entries = list(kb.iter_entries(BLOCK, compressed=False, num_states=3))
    assert entries == [
        kb.Entry(2, MP_KEY, MP_VALUE),
        kb.Entry(0, CNT_KEY, CNT_VALUE),
        kb.Entry(0, CNT_KEY[:-1] + b"\x01", b""),
    ]


def test_count_entries() -> None:
    assert kb.count_entries(BLOCK, compressed=False) == {2: 1, 0: 2}
    assert kb.count_entries(memoryview(BLOCK), compressed=False, num_states=3) == {2: 1, 0: 2}


def test_compressed_block_is_one_framed_stream() -> None:
    compressed = kb.build_block(
        [(2, [(MP_KEY, MP_VALUE)]), (0, [(CNT_KEY, CNT_VALUE), (CNT_KEY[:-1] + b"\x01", b"")])],
        compress=True,
    )
    assert compressed.startswith(snappy_framed.STREAM_IDENTIFIER)
    assert snappy_framed.decompress_stream(compressed, verify=True) == BLOCK
    assert kb.count_entries(compressed, compressed=True) == {2: 1, 0: 2}
    assert [e.key for e in kb.iter_entries(compressed, True)] == [
        e.key for e in kb.iter_entries(BLOCK, False)
    ]


def test_remap_state_ids() -> None:
    remapped = kb.remap_state_ids(BLOCK, {0: 5, 2: 1}, compressed=False)
    assert remapped == b"\x00\x01" + BLOCK[2:28] + b"\x00\x05" + BLOCK[30:]
    assert kb.count_entries(remapped, False) == {1: 1, 5: 2}
    compressed = kb.build_block([(0, [(CNT_KEY, CNT_VALUE)])], compress=True)
    assert kb.count_entries(kb.remap_state_ids(compressed, {0: 3}, True), True) == {3: 1}
    assert kb.remap_state_ids(BLOCK, {0: 0, 2: 2}, False) == BLOCK
    with pytest.raises(FormatError, match="state id 2 has no counterpart"):
        kb.remap_state_ids(BLOCK, {0: 1}, False)


BAD_BLOCKS = [
    (BLOCK + b"\x00", "1 unexpected bytes after the end mark"),
    (BLOCK[:-2], "ends at offset .* inside a state id"),
    (BLOCK[:-1], "ends at offset .* inside a state id"),
    (BLOCK[:10], "key length 9 at offset 2 runs past the end"),
    (b"\x00\x00" + b"\xff\xff\xff\xfe" + b"\x00" * 8, "key length -2"),
    (b"\x00\x00" + entry(CNT_KEY, b"", True)[:10] + b"\xff\xff\xff\xff\xff\xff", "value length -1"),
    (b"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\xff\xff", "empty key"),
    (b"\xff\xff", "end mark at offset 0 where a state run starts"),
    (b"\x00", "inside a state id"),
    (b"", "inside a state id"),
    (
        b"\x00\x00"
        + entry(CNT_KEY, b"", True)
        + b"\x00\x00"
        + entry(CNT_KEY, b"", True)
        + b"\xff\xff",
        "state id 0 appears twice",
    ),
    (b"\x00\x00" + entry(CNT_KEY, b"", True)[:-2], "inside a value length"),
]


@pytest.mark.parametrize(("block", "message"), BAD_BLOCKS)
def test_bad_blocks_raise_format_errors(block: bytes, message: str) -> None:
    with pytest.raises(FormatError, match=message):
        list(kb.iter_entries(block, compressed=False))
    with pytest.raises(FormatError, match=message):
        kb.count_entries(block, compressed=False)


def test_unknown_state_id_is_reported() -> None:
    with pytest.raises(FormatError, match=r"unknown state id 2 at offset 0 .* lists 2 states"):
        kb.count_entries(BLOCK, False, num_states=2)
    with pytest.raises(FormatError, match="unknown state id 2"):
        list(kb.iter_entries(BLOCK, False, num_states=2))


def test_corrupt_compressed_block() -> None:
    with pytest.raises(FormatError, match="stream identifier"):
        kb.count_entries(BLOCK, compressed=True)


def test_build_block_rejects_what_no_block_can_hold() -> None:
    with pytest.raises(ValueError, match="at least one entry"):
        kb.build_block([(0, [])])
    with pytest.raises(ValueError, match="repeated"):
        kb.build_block([(0, [(CNT_KEY, b"")]), (0, [(CNT_KEY, b"")])])
    with pytest.raises(ValueError, match="flag bit"):
        kb.build_block([(0, [(b"\x80", b"")])])
    with pytest.raises(ValueError, match="out of range"):
        kb.build_block([(0xFFFF, [(CNT_KEY, b"")])])


# --- offsets -------------------------------------------------------------------------------


def test_block_spans_from_offsets() -> None:
    # key groups 64..69: 64 and 67 empty; header ends at 1853 (spec §2.1 example)
    spans = kb.block_spans(64, [0, 1853, 2025, 0, 2100, 2500], 3000)
    assert spans == [
        kb.BlockSpan(65, 1853, 2025),
        kb.BlockSpan(66, 2025, 2100),
        kb.BlockSpan(68, 2100, 2500),
        kb.BlockSpan(69, 2500, 3000),
    ]
    assert spans[0].length == 172
    assert kb.block_spans(0, [0, 0], 100) == []
    assert kb.header_length([0, 1853, 2025], 3000) == 1853
    assert kb.header_length([0, 0], 400) == 400


@pytest.mark.parametrize(
    ("offsets", "size", "message"),
    [
        ([100, 90], 200, "key group 0: offset 100 is not below the offset 90 of key group 1"),
        ([100, 0, 100], 200, "key group 0: offset 100 is not below the offset 100 of key group 2"),
        ([100, 250], 200, r"key group 1: offset 250 is outside the file \(200 bytes\)"),
        ([200], 200, "key group 0: offset 200 is outside"),
        ([-5, 100], 200, "key group 0: offset -5 is outside"),
    ],
)
def test_bad_offsets_name_key_group_and_offset(offsets: list[int], size: int, message: str) -> None:
    with pytest.raises(FormatError, match=message):
        kb.block_spans(0, offsets, size)


def test_header_length_rejects_offsets_outside_the_file() -> None:
    with pytest.raises(FormatError, match="offset 500 is outside the file"):
        kb.header_length([0, 500], 400)


# --- properties ----------------------------------------------------------------------------

keys = st.binary(min_size=1, max_size=12).map(lambda k: bytes([k[0] & 0x7F]) + k[1:])
runs = st.dictionaries(
    st.integers(0, 20),
    st.lists(st.tuples(keys, st.binary(max_size=12)), min_size=1, max_size=5),
    min_size=1,
    max_size=4,
)


@given(runs, st.booleans())
def test_built_blocks_read_back(runs: dict[int, list[tuple[bytes, bytes]]], compress: bool) -> None:
    block = kb.build_block(runs.items(), compress)
    expected = [kb.Entry(s, k, v) for s, entries in runs.items() for k, v in entries]
    assert list(kb.iter_entries(block, compress, num_states=21)) == expected
    assert kb.count_entries(block, compress) == {s: len(e) for s, e in runs.items()}
    mapping = {s: 40 - s for s in runs}
    remapped = kb.remap_state_ids(block, mapping, compress)
    assert kb.count_entries(remapped, compress) == {40 - s: len(e) for s, e in runs.items()}


@given(st.binary(max_size=64))
def test_random_blocks_raise_only_format_errors(data: bytes) -> None:
    for compressed in (False, True):
        with contextlib.suppress(FormatError):
            kb.count_entries(data, compressed)
        with contextlib.suppress(FormatError):
            list(kb.iter_entries(data, compressed, num_states=3))


# --- telling canonical blocks from the hashmap backend's snapshot format (§4.8) ---------------


def heap_key_group(key_group: int, states: list[tuple[int, int, bytes]]) -> bytes:
    """A heap snapshot's key group, uncompressed: its id, then per state its id, entry count
    and entries' bytes."""
    parts = [key_group.to_bytes(4, "big")]
    for state_id, count, data in states:
        parts += [state_id.to_bytes(2, "big"), count.to_bytes(4, "big"), data]
    return b"".join(parts)


STRING_ENTRY = b"\x00\x03k29" + (16).to_bytes(8, "big")  # namespace-less: key, value


@pytest.mark.parametrize(
    ("block", "key_group", "compressed", "expected"),
    [
        # key group 0: four zero bytes begin both layouts
        (heap_key_group(0, [(0, 1, STRING_ENTRY), (1, 0, b"")]), 0, False, kb.Layout.HEAP),
        (heap_key_group(0, [(1, 0, b""), (0, 1, STRING_ENTRY)]), 0, False, kb.Layout.HEAP),
        (kb.build_block([(0, [(CNT_KEY, CNT_VALUE)])]), 0, False, kb.Layout.CANONICAL),
        (kb.build_block([(1, [(CNT_KEY, CNT_VALUE)])]), 0, False, kb.Layout.CANONICAL),
        # from key group 1 on, a canonical block never starts with the key group's id
        (heap_key_group(5, [(0, 0, b""), (1, 0, b"")]), 5, False, kb.Layout.HEAP),
        (
            kb.build_block([(0, [(b"\x05" + CNT_KEY[1:], CNT_VALUE)])]),
            5,
            False,
            kb.Layout.CANONICAL,
        ),
        # compressed: a canonical block is one Snappy stream; a heap key group's id comes first
        (
            kb.build_block([(0, [(CNT_KEY, CNT_VALUE)])], compress=True),
            0,
            True,
            kb.Layout.CANONICAL,
        ),
        (
            b"\x00\x00\x00\x00" + snappy_framed.compress_stream(b"\x00\x00\x00\x00\x00\x00"),
            0,
            True,
            kb.Layout.HEAP,
        ),
    ],
)
def test_first_block_layout(
    block: bytes, key_group: int, compressed: bool, expected: kb.Layout
) -> None:
    assert kb.first_block_layout(block, len(block), key_group, compressed, 2) is expected


def test_first_block_layout_of_a_prefix() -> None:
    """A large first block is told from its start: canonical entries as far as they go."""
    block = kb.build_block([(0, [(CNT_KEY + bytes([n]), CNT_VALUE) for n in range(100)])])
    assert kb.first_block_layout(block[:250], len(block), 0, False, 2) is kb.Layout.CANONICAL
    heap = heap_key_group(0, [(0, 100, STRING_ENTRY * 100)])
    assert kb.first_block_layout(heap[:250], len(heap), 0, False, 2) is kb.Layout.HEAP


def test_a_block_that_fits_both_layouts_is_not_guessed() -> None:
    """Key group 0, state 0, a first key of 6 bytes without the last-of-run bit: its length's
    low half reads as heap state id 6 and the key's first bytes as a count, which ten states
    admit."""
    block = kb.build_block([(0, [(CNT_KEY, CNT_VALUE), (CNT_KEY + b"x", CNT_VALUE)])])
    assert kb.first_block_layout(block, len(block), 0, False, 10) is None
    assert kb.first_block_layout(b"\x00\x00\x00\x00\xff\xff", 6, 0, False, 10) is None  # neither
