"""Chunks of entries: packed and read back as Arrow arrays, sorted, and written as a block's run
exactly as `keyed_blocks` writes one entry by entry."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from statectl.errors import FormatError
from statectl.formats import keyed_blocks
from statectl.savepoint.entry_chunks import join_chunks, pack, sorted_rows, unpack

keys = st.binary(min_size=1, max_size=12).map(lambda k: bytes((k[0] & 0x7F,)) + k[1:])
rows = st.lists(st.tuples(keys, st.binary(max_size=20)), max_size=40)


@given(st.lists(rows, min_size=1, max_size=4))
def test_chunks_joined_hold_their_rows_in_order(parts: list[list[tuple[bytes, bytes]]]) -> None:
    joined = join_chunks([pack(part) for part in parts])
    assert list(unpack(joined)) == [row for part in parts for row in part]


@given(st.dictionaries(keys, st.binary(max_size=20), min_size=1, max_size=60), st.integers(0, 9))
def test_sorted_rows_make_the_run_keyed_blocks_makes(entries: dict[bytes, bytes], n: int) -> None:
    items = list(entries.items())
    chunks = [pack(items[: len(items) // 2]), pack(items[len(items) // 2 :])]
    packed = sorted_rows(chunks, bytes.hex)
    assert list(packed) == sorted(items)
    assert packed[len(items) - 1] == sorted(items)[-1]
    assert packed.run_bytes(n) == keyed_blocks.run_bytes(n, sorted(items))


def test_a_key_given_twice_is_named() -> None:
    chunks = [pack([(b"\x01a", b"x"), (b"\x01b", b"y")]), pack([(b"\x01a", b"z")])]
    with pytest.raises(FormatError, match="0161 appears more than once"):
        sorted_rows(chunks, bytes.hex)


def test_a_damaged_chunk_is_refused() -> None:
    with pytest.raises(FormatError, match="damaged"):
        sorted_rows([pack([(b"\x01a", b"x")])[:-1]], bytes.hex)
