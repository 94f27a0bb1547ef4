"""Entries located by numpy equal the exact walk's, whatever the block holds."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from statectl.errors import FormatError
from statectl.formats import entry_scan, keyed_blocks


def _walked(block: bytes, num_states: int | None = None, base: int = 0) -> tuple:
    found = keyed_blocks.entry_positions(block, num_states, base)
    return found.key_starts, found.key_ends, found.value_ends, found.runs


def _located(block: bytes, key_group: int, prefix_bytes: int, base: int = 0) -> tuple:
    starts, ends, value_ends, runs = entry_scan.locate(block, key_group, prefix_bytes, None, base)
    return starts.tolist(), ends.tolist(), value_ends.tolist(), runs


def _block(key_group: int, prefix_bytes: int, runs: dict[int, list[tuple[bytes, bytes]]]) -> bytes:
    prefix = key_group.to_bytes(prefix_bytes, "big")
    return keyed_blocks.build_block(
        (state_id, [(prefix + key, value) for key, value in entries])
        for state_id, entries in sorted(runs.items())
    )


entries = st.lists(st.tuples(st.binary(max_size=6), st.binary(max_size=12)), min_size=1, max_size=8)


@settings(max_examples=200, deadline=None)
@given(
    st.integers(0, 1023),
    st.sampled_from([1, 2]),
    st.dictionaries(st.integers(0, 6), entries, min_size=1, max_size=4),
    st.integers(0, 1000),
)
def test_located_as_walked(
    key_group: int, prefix_bytes: int, runs: dict[int, list[tuple[bytes, bytes]]], base: int
) -> None:
    key_group %= 128 if prefix_bytes == 1 else 1024
    block = _block(key_group, prefix_bytes, runs)
    assert _located(block, key_group, prefix_bytes, base) == _walked(block, base=base)


# Values holding bytes that look like an entry of key group 5 (a key length below 64 KiB, then
# its prefix): false candidates, some followed by another candidate nearby or far, most by none.
look_alike = st.lists(
    st.sampled_from(
        [
            b"\x00\x00\x00\x03\x00\x05",
            b"\x00\x00\x00\x01\x80\x05",
            b"\x00\x00\x00\x06\x00\x05",
            b"\x00",
            b"x",
        ]
    ),
    max_size=8,
).map(b"".join)


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(
        st.integers(0, 3),
        st.lists(st.tuples(st.binary(max_size=3), look_alike), min_size=1, max_size=8),
        min_size=1,
        max_size=3,
    )
)
def test_located_as_walked_among_values_that_look_like_entries(
    runs: dict[int, list[tuple[bytes, bytes]]],
) -> None:
    block = _block(5, 2, runs)
    assert _located(block, 5, 2) == _walked(block)


def test_values_that_look_like_entries_are_not_taken_for_entries() -> None:
    """Zero bytes and the key-group prefix inside values make false candidates."""
    fake = b"\x00\x00\x00\x03\x00\x05\x00"  # a key length, then the prefix of key group 5
    block = _block(5, 2, {0: [(b"a", fake * 3), (b"b", fake)], 2: [(b"", b"\x00\x05" * 4)]})
    assert _located(block, 5, 2) == _walked(block)


def test_a_block_the_fast_path_cannot_read_is_walked() -> None:
    """Keys of another key group (no candidates): the exact walk's positions."""
    block = _block(9, 2, {1: [(b"k", b"v")]})
    assert _located(block, 8, 2) == _walked(block)


def test_a_damaged_block_raises_the_walks_error() -> None:
    block = bytearray(_block(3, 1, {0: [(b"key", b"value")]}))
    block[-2:] = b"\x00\x01"  # the end mark replaced by a state id, then nothing
    with pytest.raises(
        FormatError, match=r"^key-group block ends at offset 21 inside a key length$"
    ):
        entry_scan.locate(bytes(block), 3, 1, None)


def test_positions_are_int64_arrays() -> None:
    block = _block(0, 1, {0: [(b"k", b"")]})
    starts, ends, value_ends, runs = entry_scan.locate(block, 0, 1, 1)
    assert [a.dtype for a in (starts, ends, value_ends)] == [np.dtype(np.int64)] * 3
    assert runs == [(0, 1)]
