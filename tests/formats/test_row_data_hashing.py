"""Vectorised `BinaryRowData.hashCode()` (formats/row_data_hashing.py) against the scalar one."""

from __future__ import annotations

import random

import numpy as np

from statectl.formats import java_types as jt
from statectl.formats.row_data_hashing import row_data_kernel
from tests.formats.test_row_keys import FLINK_VECTORS


def _kernel(keys: list[bytes], offset: int) -> tuple[list[int], list[bool]]:
    """Hash codes (signed) and done flags of composite keys whose RowData starts at `offset`."""
    lengths = np.array([len(k) for k in keys], np.int64)
    ends = np.cumsum(lengths)
    positions = ends - lengths + offset
    buffer = np.frombuffer(b"".join(keys), np.uint8)
    codes = np.zeros(len(keys), np.uint32)
    done = row_data_kernel(buffer, positions, ends, codes)
    return codes.view(np.int32).tolist(), done.tolist()


def test_flink_vectors() -> None:
    rows = [
        bytes.fromhex(hex_) for key_type, hex_, *_ in FLINK_VECTORS if key_type.name == "RowData"
    ]
    expected = [hash_ for key_type, _, hash_, *_ in FLINK_VECTORS if key_type.name == "RowData"]
    assert _kernel(rows, 0) == (expected, [True] * len(rows))


def test_random_rows_in_composite_keys_equal_the_scalar_hash() -> None:
    rng = random.Random(5)
    keys, expected = [], []
    for _ in range(2000):
        row = rng.randbytes(8 * rng.choice([1, 2, 2, 3, 5, 12]))
        # key-group prefix, timer timestamp, row, namespace and length suffix
        keys.append(b"\x07" + rng.randbytes(8) + len(row).to_bytes(4, "big") + row + b"\x00\x01")
        expected.append(jt.hash_bytes_by_words(row))
    assert _kernel(keys, 9) == (expected, [True] * len(keys))


def test_keys_it_cannot_hash_are_left_to_the_scalar_path() -> None:
    good = bytes.fromhex("000000080000000000000000")
    keys = [
        bytes.fromhex("00000006") + bytes(6),  # not whole words
        bytes.fromhex("00000010") + bytes(8),  # runs past its key
        bytes.fromhex("ffffffff"),  # negative size
        b"\x00\x00",  # ends inside the size
        good,
    ]
    codes, done = _kernel(keys, 0)
    assert done == [False, False, False, False, True]
    assert codes[4] == jt.hash_bytes_by_words(bytes(8)) == -1670924195
