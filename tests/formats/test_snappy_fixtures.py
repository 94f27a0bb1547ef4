"""Snappy framing against what Flink wrote: every compressed key-group block and operator-state
element of the committed fixtures (tests/fixtures/**/savepoint) decodes, and re-encodes with
Flink's framing: the same chunks, checksums and uncompressed payloads.

The compressed payloads are cramjam's Snappy encoder's: byte-identical to what Flink 1.15.4
wrote, while the snappy-java of later Flink versions often picks other copies (with cramjam 2.14,
120 of the 510 compressed chunks are byte-identical), so only 1.15.4's are compared byte for byte.
"""

from __future__ import annotations

import random
from collections import Counter

import cramjam
import pytest

from statectl.formats import keyed_blocks as kb
from statectl.formats import operator_state as ops
from statectl.formats import snappy_framed as sf
from statectl.formats import state_headers as sh
from statectl.formats.handles import KeyGroupsHandle
from statectl.formats.metadata import read_metadata
from tests.conftest import FIXTURES
from tests.formats.test_real_savepoints import stream_bytes


def compressed_spans() -> list[tuple[str, str, bytes]]:
    """(fixture, "block" or "element", bytes) of every compressed key-group block and every
    distinct operator-state element span (Flink 1.18.1's elements share offsets) of every
    fixture savepoint."""
    found = []
    for metadata in sorted(FIXTURES.glob("**/savepoint/_metadata")):
        directory = metadata.parent
        name = str(directory.parent.relative_to(FIXTURES))
        for operator in read_metadata(metadata.read_bytes()).operators:
            for subtask in operator.subtasks or ():
                keyed = subtask.managed_keyed_state
                if isinstance(keyed, KeyGroupsHandle) and keyed.delegate is not None:
                    data = stream_bytes(directory, keyed.delegate)
                    if sh.keyed_header_compressed(data):
                        for s in kb.block_spans(keyed.start_key_group, keyed.offsets, len(data)):
                            found.append((name, "block", data[s.start : s.end]))
                handle = subtask.managed_operator_state
                if handle is not None and handle.delegate is not None:
                    data = stream_bytes(directory, handle.delegate)
                    if ops.is_compressed(data):
                        states = ops.element_spans(handle.states, len(data))
                        for start, end in sorted({span for s in states for span in s.spans}):
                            found.append((name, "element", data[start:end]))
    return found


def streams(data: bytes) -> list[bytes]:
    """The runs of data chunks between stream identifiers: what one Flink stream wrote each."""
    runs, begin, pos = [], 0, 0
    for chunk in sf.iter_chunks(data):
        if chunk.type == sf.STREAM_IDENTIFIER_TYPE:
            runs.append(data[begin:pos])
            begin = chunk.end
        pos = chunk.end
    runs.append(data[begin:])
    return [run for run in runs if run]


def framing(data: bytes) -> list[tuple[int, int | None, bytes | None]]:
    """Each chunk's type and checksum, and an uncompressed chunk's payload."""
    return [
        (c.type, c.masked_crc, data[c.start : c.end] if c.type == sf.UNCOMPRESSED else None)
        for c in sf.iter_chunks(data)
    ]


def test_fixture_snappy_data_decodes_and_reencodes_with_flinks_framing() -> None:
    counts: Counter[str] = Counter()
    for name, kind, data in compressed_spans():
        counts[kind] += 1
        decoded = sf.decompress_chunks(data, verify=True)
        assert decoded == sf.decompress_chunks(data)
        if kind == "block":
            assert sf.decompress_stream(data, verify=True) == decoded
        # cramjam's framing decoder, which checks every checksum, reads the same
        assert bytes(cramjam.snappy.decompress(sf.STREAM_IDENTIFIER + data)) == decoded
        for run in streams(data):
            counts["streams"] += 1
            counts.update(f"chunks of type {c.type}" for c in sf.iter_chunks(run))
            again = sf.compress_stream(sf.decompress_chunks(run, verify=True))
            assert again.startswith(sf.STREAM_IDENTIFIER)
            again = again[len(sf.STREAM_IDENTIFIER) :]
            assert framing(again) == framing(run), name
            assert sf.decompress_chunks(again, verify=True) == sf.decompress_chunks(run)
            if name == "compat/1.15.4-hashmap-compressed":
                assert again == run
                counts["byte-identical streams of Flink 1.15.4"] += 1
    assert dict(counts) == {
        "block": 502,
        "element": 66,
        "streams": 502 + 66,
        "chunks of type 0": 510,
        "chunks of type 1": 58,
        "byte-identical streams of Flink 1.15.4": 41,
    }


def in_the_ratio_band(size: int, incompressible: int) -> bytes:
    """`size` bytes that Snappy shrinks by 12.5–15 %: xerial stores them uncompressed, cramjam's
    framing would not."""
    rng = random.Random(size)
    repeated = (rng.randbytes(64) * (size // 64 + 1))[: size - incompressible + 64]
    block = repeated + rng.randbytes(incompressible - 64)
    assert 0.85 < len(cramjam.snappy.compress_raw(block)) / size < 0.875
    return block


@pytest.mark.parametrize(
    ("before", "size", "incompressible", "after", "kinds"),
    [
        (b"", 1000, 845, b"", [0x01]),
        (b"", sf.BLOCK_SIZE, 56500, b"", [0x01]),
        (bytes(sf.BLOCK_SIZE), sf.BLOCK_SIZE, 56500, b"tail" * 100, [0x00, 0x01, 0x00]),
    ],
)
def test_blocks_saving_less_than_15_percent_are_stored_uncompressed(
    before: bytes, size: int, incompressible: int, after: bytes, kinds: list[int]
) -> None:
    block = in_the_ratio_band(size, incompressible)
    data = before + block + after
    stream = sf.compress_stream(data)
    chunks = list(sf.iter_chunks(stream))
    assert [c.type for c in chunks] == [0xFF, *kinds]
    (stored,) = (c for c in chunks if c.type == sf.UNCOMPRESSED)
    assert stream[stored.start : stored.end] == block
    assert stored.masked_crc == sf.masked_crc32c(block)
    assert sf.decompress_stream(stream, verify=True) == data
    assert bytes(cramjam.snappy.decompress(stream)) == data  # cramjam checks the checksums
