"""TTL turned on or off a batch of stored values at a time gives what value by value gives:
the same bytes, or the same error at the first value refused."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from statectl.errors import FormatError
from statectl.operations.state_edits import ttl_batch, ttl_unwrapper, ttl_wrapper

STAMP = 1_764_000_000_123


class _Codec:
    """What `ttl_wrapper` asks of a VALUE or MAP state's codec."""

    def __init__(self, ttl: bool) -> None:
        self.ttl = ttl

    def describe(self) -> str:
        return "a test codec"


def _each(change: Any, values: list[bytes]) -> list[bytes] | str:
    try:
        return [change(value) for value in values]
    except FormatError as exc:
        return exc.message


def _batch(change: Any, values: list[bytes]) -> list[bytes] | str:
    try:
        return change(pa.array(values, pa.large_binary())).to_pylist()  # type: ignore[no-any-return]
    except FormatError as exc:
        return exc.message


@pytest.mark.parametrize("kind", ["VALUE", "MAP"])
@settings(deadline=None)
@given(values=st.lists(st.binary(max_size=20), max_size=30))
def test_a_batch_changes_as_each_value_does(kind: str, values: list[bytes]) -> None:
    wrap = ttl_wrapper(kind, _Codec(False), STAMP)  # type: ignore[arg-type]
    unwrap = ttl_unwrapper(kind, _Codec(True))  # type: ignore[arg-type]
    assert _batch(ttl_batch(kind, wrap=STAMP), values) == _each(wrap, values)
    assert _batch(ttl_batch(kind), values) == _each(unwrap, values)


def test_a_list_s_elements_are_not_batched() -> None:
    assert ttl_batch("LIST") is None
