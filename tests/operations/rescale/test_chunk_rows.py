"""A new key group's rows out of the re-hash's chunks, as the RocksDB writer takes them."""

from __future__ import annotations

import struct

from statectl.operations.rescale.chunk_rows import sorted_rows


def chunk(runs: list[tuple[int, list[tuple[bytes, bytes]]]]) -> tuple[bytes, tuple]:
    """Runs laid out as the re-hash's chunks are: entries without flags, and per run (state
    id, start, end, where its last key's first byte is)."""
    payload, spans = bytearray(), []
    for state_id, rows in runs:
        start = len(payload)
        for key, value in rows:
            last_key = len(payload) + 4
            payload += struct.pack(">i", len(key)) + key + struct.pack(">i", len(value)) + value
        spans.append((state_id, start, len(payload), last_key))
    return bytes(payload), tuple(spans)


def test_rows_of_every_chunk_come_sorted_per_state_with_no_flag_left() -> None:
    key_group = b"\x00\x07"  # two-byte prefixes: max parallelism above 128
    first = chunk([(0, [(key_group + b"b", b"1"), (key_group + b"a", b"")]), (2, [(key_group + b"z", b"9" * 300)])])  # fmt: skip
    # a value holding bytes that look like an entry of the key group
    look_alike = struct.pack(">i", 3) + key_group + b"q"
    second = chunk([(0, [(key_group + b"c", look_alike), (key_group + b"\x00", b"0")])])
    found = [(state_id, list(rows)) for state_id, rows in sorted_rows([first, second], 7, 2)]
    assert found == [
        (
            0,
            [
                (key_group + b"\x00", b"0"),
                (key_group + b"a", b""),
                (key_group + b"b", b"1"),
                (key_group + b"c", look_alike),
            ],
        ),
        (2, [(key_group + b"z", b"9" * 300)]),
    ]
