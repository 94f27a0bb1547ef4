"""The `_metadata` codec: byte-exact round trips of real fixtures, every handle code, bad input."""

from __future__ import annotations

import contextlib
import struct
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from statectl.errors import FormatError, StatectlError, UnsupportedError
from statectl.formats.handles import (
    ByteStreamHandle,
    ChangelogByteIncrementHandle,
    ChangelogFileIncrementHandle,
    ChangelogHandle,
    DistributionMode,
    EmptySegmentFileHandle,
    FileHandle,
    IncrementalKeyedHandle,
    KeyGroupsHandle,
    LocalFile,
    OperatorStateHandle,
    OperatorStateOffsets,
    RelativeFileHandle,
    SegmentFileHandle,
)
from statectl.formats.metadata import (
    ChannelStateHandle,
    CheckpointMetadata,
    MasterState,
    OperatorState,
    SubtaskState,
    read_metadata,
    snapshot_kind,
    write_metadata,
)
from tests.conftest import fixture_names, fixture_savepoint, load_manifest

# The Java-serialized CheckpointProperties tails real Flink wrote (savepoint and checkpoint).
REAL_PROPERTIES = sorted(
    {
        read_metadata((fixture_savepoint(n) / "_metadata").read_bytes()).properties
        for n in fixture_names()
    }
)

# --- strategies -------------------------------------------------------------------------

texts = st.text(max_size=12)
longs = st.integers(-(2**63), 2**63 - 1)
ints = st.integers(-(2**31), 2**31 - 1)
small = st.integers(0, 2**31 - 1)
offsets = st.lists(st.integers(0, 2**40), max_size=4).map(tuple)

file_handles = st.one_of(
    st.builds(ByteStreamHandle, texts, st.binary(max_size=16)),
    st.builds(FileHandle, texts, longs),
    st.builds(RelativeFileHandle, texts, longs),
    st.builds(SegmentFileHandle, longs, longs, ints, texts, texts),
    st.just(EmptySegmentFileHandle()),
)
stream_handles = st.one_of(
    st.none(),
    file_handles,
    st.builds(KeyGroupsHandle, st.just(3), ints, offsets, st.one_of(st.none(), file_handles)),
)
local_files = st.lists(st.builds(LocalFile, texts, stream_handles), max_size=2).map(tuple)


def _keyed(children: st.SearchStrategy) -> st.SearchStrategy:
    handles = st.lists(children, max_size=2).map(tuple)
    return st.one_of(
        st.builds(KeyGroupsHandle, st.sampled_from([3, 7]), ints, offsets, stream_handles),
        st.builds(KeyGroupsHandle, st.just(12), ints, offsets, stream_handles, texts),
        st.builds(
            IncrementalKeyedHandle, st.just(11), longs, texts, ints, ints, longs, stream_handles,
            local_files, local_files, texts,
        ),
        st.builds(
            IncrementalKeyedHandle, st.just(5), longs, texts, ints, ints, st.none(), stream_handles,
            local_files, local_files, st.none(),
        ),
        st.builds(ChangelogHandle, st.just(14), ints, ints, longs, handles, handles, longs, longs, texts),
        st.builds(ChangelogHandle, st.just(8), ints, ints, longs, handles, handles, longs, st.none(), texts),
        st.builds(
            ChangelogByteIncrementHandle, ints, ints, longs, longs,
            st.lists(st.tuples(ints, st.binary(max_size=8)), max_size=2).map(tuple), texts,
        ),
        st.builds(
            ChangelogFileIncrementHandle, st.just(13), ints, ints,
            st.lists(st.tuples(stream_handles, longs), max_size=2).map(tuple), longs, longs, texts, texts,
        ),
        st.builds(
            ChangelogFileIncrementHandle, st.just(10), ints, ints,
            st.lists(st.tuples(stream_handles, longs), max_size=2).map(tuple), longs, longs, texts,
            st.none(),
        ),
    )  # fmt: skip


keyed_handles = st.one_of(st.none(), st.recursive(_keyed(st.none()), _keyed, max_leaves=3))
operator_states = st.lists(
    st.builds(OperatorStateOffsets, texts, st.sampled_from(DistributionMode), offsets), max_size=3
).map(tuple)
operator_handles = st.one_of(
    st.none(),
    st.builds(OperatorStateHandle, st.just(4), operator_states, stream_handles),
    st.builds(
        OperatorStateHandle,
        st.just(17),
        operator_states,
        stream_handles,
        texts,
        texts,
        st.booleans(),
    ),
)


def channel_handles(version: int) -> st.SearchStrategy:
    plain = st.builds(
        ChannelStateHandle,
        st.sampled_from([1, 2]) if version >= 6 else st.none(),
        ints, st.tuples(ints, ints), offsets, longs, stream_handles,
    )  # fmt: skip
    if version < 6:
        return plain
    merged = st.builds(
        ChannelStateHandle, st.sampled_from([3, 4]), ints, st.none(), st.just(()), longs,
        stream_handles, st.binary(max_size=8),
    )  # fmt: skip
    return st.one_of(plain, merged)


@st.composite
def metadata(draw: st.DrawFn) -> CheckpointMetadata:
    version = draw(st.sampled_from([3, 4, 5, 6, 7]))
    channels = st.lists(channel_handles(version), max_size=2).map(tuple)
    subtask = st.one_of(
        st.builds(SubtaskState, small, st.just(True)),
        st.builds(
            SubtaskState, small, st.just(False), operator_handles, operator_handles, keyed_handles,
            keyed_handles, channels, channels, st.one_of(st.none(), longs) if version >= 7 else st.none(),
        ),
    )  # fmt: skip
    named = version >= 5
    operator = st.builds(
        OperatorState,
        st.binary(min_size=16, max_size=16),
        ints,
        ints,
        st.one_of(st.none(), st.builds(ByteStreamHandle, texts, st.binary(max_size=8))),
        st.one_of(st.none(), st.lists(subtask, max_size=3).map(tuple)),
        st.one_of(st.none(), st.text(min_size=1, max_size=8)) if named else st.none(),
        st.one_of(st.none(), st.text(min_size=1, max_size=8)) if named else st.none(),
    )
    return CheckpointMetadata(
        version,
        draw(st.integers(0, 2**63 - 1)),
        tuple(
            draw(st.lists(st.builds(MasterState, ints, texts, st.binary(max_size=8)), max_size=2))
        ),
        tuple(draw(st.lists(operator, max_size=3))),
        draw(st.sampled_from(REAL_PROPERTIES)) if version >= 4 else b"",
    )


# --- round trips ----------------------------------------------------------------------


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(metadata())
def test_any_metadata_written_reads_back_equal(md: CheckpointMetadata) -> None:
    data = write_metadata(md)
    assert read_metadata(data) == md
    assert write_metadata(read_metadata(data)) == data


@pytest.mark.parametrize("name", fixture_names())
def test_real_fixture_round_trips_byte_for_byte(name: str) -> None:
    data = (fixture_savepoint(name) / "_metadata").read_bytes()
    md = read_metadata(data)
    assert md.version == 6
    assert write_metadata(md) == data


@pytest.mark.parametrize("name", fixture_names())
def test_real_fixture_truncated_anywhere_raises_a_format_error(name: str) -> None:
    data = (fixture_savepoint(name) / "_metadata").read_bytes()
    for cut in range(len(data)):  # the properties tail included: it is parsed to its end
        with pytest.raises(FormatError):
            read_metadata(data[:cut])


@pytest.mark.parametrize("name", fixture_names())
def test_properties_tail_says_what_the_snapshot_is(name: str) -> None:
    manifest = load_manifest(name)
    md = read_metadata((fixture_savepoint(name) / "_metadata").read_bytes())
    kind = snapshot_kind(md.properties)
    assert kind is not None
    assert kind.savepoint == (manifest["mode"] == "savepoint")
    assert kind.format == (manifest["format"] if kind.savepoint else None)


@settings(max_examples=300)
@given(st.binary(max_size=200))
def test_random_bytes_raise_only_statectl_errors(data: bytes) -> None:
    with contextlib.suppress(StatectlError):
        read_metadata(struct.pack(">ii", 0x4960672D, 6) + data)


@pytest.mark.parametrize("name", fixture_names()[:3])
def test_mutated_real_metadata_raises_only_statectl_errors(name: str) -> None:
    data = bytearray((fixture_savepoint(name) / "_metadata").read_bytes())
    for position in range(0, len(data), max(1, len(data) // 400)):
        for value in (0x00, 0x7F, 0xFF):
            mutated = bytearray(data)
            mutated[position] = value
            with contextlib.suppress(StatectlError):
                read_metadata(bytes(mutated))


# --- bad input --------------------------------------------------------------------------


def test_bad_magic() -> None:
    with pytest.raises(FormatError, match="bad magic number 0x00000000"):
        read_metadata(b"\x00" * 16)


def test_unknown_version() -> None:
    with pytest.raises(UnsupportedError, match="unsupported metadata version 9"):
        read_metadata(struct.pack(">ii", 0x4960672D, 9))


def _one_subtask_with_keyed_code(code: int) -> bytes:
    md = CheckpointMetadata(
        6,
        1,
        (),
        (OperatorState(b"\x01" * 16, 1, 128, None, (SubtaskState(0),)),),
        REAL_PROPERTIES[0],
    )
    data = bytearray(write_metadata(md))
    # magic, version, checkpoint id, 0 masters, 1 operator, name "", uid "", id, parallelism,
    # max parallelism, no coordinator, 1 subtask, index, no operator states: then the code.
    position = 4 + 4 + 8 + 4 + 4 + 2 + 2 + 16 + 4 + 4 + 1 + 4 + 4 + 4 + 4
    assert data[position] == 0
    data[position] = code
    return bytes(data)


def test_unknown_handle_code_names_code_and_offset() -> None:
    data = _one_subtask_with_keyed_code(42)
    with pytest.raises(FormatError, match=r"unknown keyed state handle code 42 at byte offset \d+"):
        read_metadata(data)


def test_canonical_savepoint_properties_are_flinks() -> None:
    """The properties tail `upgrade` gives a V3 `_metadata` is what Flink 1.20 and 2.3 write."""
    from statectl.formats.metadata import CANONICAL_SAVEPOINT_PROPERTIES, read_metadata

    values = Path(__file__).parents[1] / "fixtures" / "values"
    for fixture in ("1.20.3-hashmap-canonical", "2.3.0-hashmap-canonical"):
        data = (values / fixture / "savepoint" / "_metadata").read_bytes()
        assert read_metadata(data).properties == CANONICAL_SAVEPOINT_PROPERTIES
