"""Rows of a RocksDB instance in batches: what rocksdict's tuples become."""

from __future__ import annotations

import gc
import struct

import numpy as np
import pytest

from statectl.savepoint import native_rows

ROWS = [
    (bytes([g >> 8, g & 0xFF]) + b"k%d" % i, b"v" * (i % 7)) for g in (1, 2, 300) for i in range(5)
]


def test_batches_carry_every_row_in_order_whatever_their_size(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(native_rows, "BATCH_BYTES", 40)
    monkeypatch.setattr(native_rows, "_FIRST_ROWS", 2)
    found = list(native_rows.batches(iter(ROWS)))
    assert len(found) > 3
    rows = [
        pair
        for keys, values in found
        for pair in zip(keys.to_pylist(), values.to_pylist(), strict=True)
    ]
    assert rows == ROWS
    assert gc.isenabled()  # paused only while a batch is made


def test_key_groups_are_the_big_endian_prefix() -> None:
    keys, _ = next(native_rows.batches(iter(ROWS)))
    assert native_rows.key_groups(keys, 2).tolist() == [1] * 5 + [2] * 5 + [300] * 5
    assert native_rows.key_groups(keys, 1).tolist() == [0] * 10 + [1] * 5
    with pytest.raises(ValueError, match="shorter than its 2-byte key-group prefix"):
        native_rows.key_groups(next(native_rows.batches(iter([(b"\x01", b"")])))[0], 2)


def test_laid_out_rows_are_block_entries_without_flags() -> None:
    keys, values = next(native_rows.batches(iter(ROWS)))
    data, key_starts, key_ends, value_ends = native_rows.laid_out(keys, values)
    expected = b"".join(
        struct.pack(">i", len(k)) + k + struct.pack(">i", len(v)) + v for k, v in ROWS
    )
    assert data == expected
    for i, (key, value) in enumerate(ROWS):
        assert data[key_starts[i] : key_ends[i]] == key
        assert data[key_ends[i] + 4 : value_ends[i]] == value
    assert np.all(key_starts[1:] == value_ends[:-1] + 4)
