"""TTL turned on or off a batch of stored values at a time gives what value by value gives:
the same bytes, or the same error at the first value refused."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from statectl.errors import FormatError
from statectl.formats.state_values import StateCodec
from statectl.operations.state_edits import ListTtlBatch, ttl_batch, ttl_unwrapper, ttl_wrapper
from statectl.savepoint import entries
from statectl.savepoint.reader import open_savepoint
from tests.conftest import FIXTURES, fixture_savepoint

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
    codec = _Codec(False)
    assert _batch(ttl_batch(kind, codec, wrap=STAMP), values) == _each(wrap, values)  # type: ignore[arg-type]
    assert _batch(ttl_batch(kind, codec), values) == _each(unwrap, values)  # type: ignore[arg-type]


def _list_states() -> list[tuple[StateCodec, list[bytes]]]:
    """Keyed LIST states Flink wrote (elements of strings, Tuple2 and a POJO): each codec and
    its stored values."""
    found = []
    for savepoint, uid, state in LIST_STATES:
        sp = open_savepoint(str(savepoint))
        files = entries.keyed_files(sp, sp.find_operator(uid))
        codec = entries.codecs_for(files[0].header(), files[0].flink_major)[state]
        values = [e.value for f in files for e in f.entries(states={state})]
        found.append((codec, values))
    return found


LIST_STATES = [
    (fixture_savepoint("rocksdb_canonical"), "keyed-str", "lst"),
    (FIXTURES / "values" / "2.3.0-hashmap-canonical" / "savepoint", "values", "tuple2-list"),
    (FIXTURES / "values" / "2.3.0-hashmap-canonical" / "savepoint", "values", "pojo-list"),
]


def test_a_batch_of_lists_gains_each_element_s_timestamp_as_each_list_does() -> None:
    for codec, values in _list_states():
        batch = ttl_batch("LIST", codec, wrap=STAMP)
        assert isinstance(batch, ListTtlBatch)
        wrap = ttl_wrapper("LIST", codec, STAMP)
        assert len(values) > 10 and any(b"," in value for value in values)
        assert _batch(batch, [*values, b""]) == _each(wrap, [*values, b""])
        assert _batch(batch, [b"", b""]) == [b"", b""]  # empty lists only


@pytest.mark.parametrize(
    ("damaged", "refused"),
    [(b",", True), (b"\x00", True), (bytes(8) + b";" + bytes(8), True), (bytes(8) + b",", False)],
    ids=["delimiter-alone", "cut-short", "not-a-delimiter", "trailing-delimiter"],
)
def test_a_batch_with_a_damaged_list_changes_as_value_by_value_does(
    damaged: bytes, refused: bool
) -> None:
    """The same error at the first list refused; a trailing delimiter is dropped by both."""
    (codec, values), *_ = _list_states()  # LIST<BIGINT>: elements of 8 bytes
    wrap = ttl_wrapper("LIST", codec, STAMP)
    batch = [*values[:3], damaged, *values[3:]]
    expected = _each(wrap, batch)
    assert isinstance(expected, str) == refused
    assert _batch(ttl_batch("LIST", codec, wrap=STAMP), batch) == expected


def test_a_list_of_elements_with_ttl_is_unwrapped_value_by_value() -> None:
    """A TTL element (its time, then the value) has no batch reader: None, as before."""
    sp = open_savepoint(str(FIXTURES / "values" / "2.3.0-hashmap-canonical" / "savepoint"))
    files = entries.keyed_files(sp, sp.find_operator("values"))
    codec = entries.codecs_for(files[0].header(), files[0].flink_major)["ttl-list"]
    assert codec.ttl and ttl_batch("LIST", codec) is None
