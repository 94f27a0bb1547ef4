"""An output's check takes a block's first entries as the readers' walk gives them, and counts
them all, without a Python step per entry."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from statectl.errors import FormatError
from statectl.savepoint import entries
from tests.formats.test_entry_scan import _block
from tests.formats.test_entry_scan import entries as run_entries

HEADER: Any = SimpleNamespace(states=tuple(f"state-{n}" for n in range(7)))


@settings(max_examples=100, deadline=None)
@given(
    st.integers(0, 1023),
    st.sampled_from([1, 2]),
    st.dictionaries(st.integers(0, 6), run_entries, min_size=1, max_size=4),
    st.integers(1, 20),
)
def test_the_first_entries_are_the_walk_s(
    key_group: int, prefix_bytes: int, runs: dict[int, list[tuple[bytes, bytes]]], limit: int
) -> None:
    key_group %= 128 if prefix_bytes == 1 else 1024
    block = _block(key_group, prefix_bytes, runs)
    walked = list(entries.block_entries(key_group, block, HEADER, False))
    count, first = entries.located_entries(key_group, block, HEADER, prefix_bytes, limit)
    assert (count, first) == (len(walked), walked[:limit])


def test_a_damaged_block_is_the_walk_s_error() -> None:
    block = _block(5, 2, {0: [(b"k", b"v")], 1: [(b"k2", b"v2")]})
    with pytest.raises(FormatError):
        entries.located_entries(5, block[:-3], HEADER, 2, 10)
