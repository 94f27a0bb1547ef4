"""Property tests: random bytes and random mutations of real files raise only statectl's errors.

Completes tests/formats/test_metadata.py (round trips, random bytes after a valid envelope,
single-byte overwrites of three fixtures) with: random bytes from the first byte, random
sequences of overwrites, insertions, deletions and cuts of every fixture's `_metadata`; the same
for state-file headers, key-group blocks (plain and Snappy-compressed) and operator-state
elements; and `verify` on a mutated savepoint, which must report, never raise.
"""

from __future__ import annotations

import contextlib
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from statectl.errors import StatectlError
from statectl.formats import keyed_blocks, snappy_framed, state_headers
from statectl.formats.handles import KeyGroupsHandle, RelativeFileHandle
from statectl.formats.metadata import read_metadata
from statectl.operations.verify import verify_location
from tests.conftest import fixture_names, fixture_savepoint

METADATA = {name: (fixture_savepoint(name) / "_metadata").read_bytes() for name in fixture_names()}


@st.composite
def mutated(draw: st.DrawFn, data: bytes) -> bytes:
    """`data` after 1–4 random edits: overwrite, insert, delete or cut."""
    out = bytearray(data)
    for _ in range(draw(st.integers(1, 4))):
        position = draw(st.integers(0, max(len(out) - 1, 0)))
        edit = draw(st.sampled_from(["overwrite", "insert", "delete", "cut"]))
        if edit == "overwrite" and out:
            out[position] = draw(st.integers(0, 255))
        elif edit == "insert":
            out[position:position] = draw(st.binary(min_size=1, max_size=8))
        elif edit == "delete":
            del out[position : position + draw(st.integers(1, 8))]
        else:
            del out[position:]
    return bytes(out)


def only_statectl_errors(parse: object, data: bytes) -> None:
    with contextlib.suppress(StatectlError):
        parse(data)  # type: ignore[operator]


@settings(max_examples=300)
@given(st.binary(max_size=300))
def test_random_bytes_raise_only_statectl_errors(data: bytes) -> None:
    only_statectl_errors(read_metadata, data)
    only_statectl_errors(state_headers.parse_keyed_header, data)
    only_statectl_errors(state_headers.parse_operator_header, data)
    only_statectl_errors(lambda d: list(keyed_blocks.iter_entries(d, False)), data)
    only_statectl_errors(snappy_framed.decompress_chunks, data)


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(METADATA)).flatmap(lambda name: mutated(METADATA[name])))
def test_mutated_real_metadata_raises_only_statectl_errors(data: bytes) -> None:
    only_statectl_errors(read_metadata, data)


def _keyed_files() -> list[tuple[bytes, KeyGroupsHandle]]:
    """(file bytes, handle) of every canonical keyed file of the file-backed fixtures."""
    files = []
    for name in ("hashmap_canonical_files", "hashmap_compressed", "hashmap_maxp300"):
        sp = fixture_savepoint(name)
        for op in read_metadata(METADATA[name]).operators:
            for subtask in op.subtasks or ():
                handle = subtask.managed_keyed_state
                if isinstance(handle, KeyGroupsHandle) and isinstance(
                    handle.delegate, RelativeFileHandle
                ):
                    files.append(((sp / handle.delegate.relative_path).read_bytes(), handle))
    return files


KEYED = _keyed_files()
HEADERS = [data[: min(o for o in h.offsets if o)] for data, h in KEYED]
BLOCKS = [
    (bytes(data[span.start : span.end]), state_headers.keyed_header_compressed(data[:8]))
    for data, handle in KEYED
    for span in keyed_blocks.block_spans(handle.start_key_group, handle.offsets, len(data))
]


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(HEADERS).flatmap(mutated))
def test_mutated_real_keyed_headers_raise_only_statectl_errors(header: bytes) -> None:
    only_statectl_errors(state_headers.parse_keyed_header, header)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(BLOCKS).flatmap(lambda b: st.tuples(mutated(b[0]), st.just(b[1]))))
def test_mutated_real_blocks_raise_only_statectl_errors(block: tuple[bytes, bool]) -> None:
    data, compressed = block
    only_statectl_errors(lambda d: list(keyed_blocks.iter_entries(d, compressed)), data)
    only_statectl_errors(lambda d: keyed_blocks.count_entries(d, compressed), data)
    if compressed:
        only_statectl_errors(lambda d: snappy_framed.decompress_stream(d, verify=True), data)


@pytest.fixture(scope="module")
def savepoint_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("mutated") / "sp"
    shutil.copytree(fixture_savepoint("hashmap_canonical_files"), target)
    return target


@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=mutated(METADATA["hashmap_canonical_files"]))
def test_verify_reports_mutated_metadata_never_raises(savepoint_copy: Path, data: bytes) -> None:
    (savepoint_copy / "_metadata").write_bytes(data)
    result = verify_location(str(savepoint_copy), deep=True)  # must not raise
    try:
        read_metadata(data)
    except StatectlError as exc:  # unreadable metadata: exactly one finding naming it
        assert [(f.file, f.problem) for f in result.findings] == [
            (str(savepoint_copy / "_metadata"), exc.message)
        ]
    for finding in result.findings:
        assert "\n" not in finding.line(result.location)
