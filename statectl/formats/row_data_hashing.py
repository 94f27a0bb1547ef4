"""`BinaryRowData.hashCode()` of many serialized RowData keys at once, in numpy arithmetic.

A RowData key is what `RowDataSerializer` / `BinaryRowDataSerializer` wrote: a big-endian i32
size, then the binary row (whole 8-byte words). Its hash is `MurmurHashUtil.hashBytesByWords`:
murmur3 with seed 42 over the row's little-endian 4-byte words, finalised with the row's size
(`java_types.hash_bytes_by_words` is the scalar version). Keys are grouped by size, so each
group is one matrix of words hashed column by column; SQL keys come in few sizes.

`row_data_kernel` has the signature of a kernel of `formats.key_hashing`: it hashes the keys it
can and says which, leaving the others (bad sizes, rows past their key) to the per-key path.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from statectl.formats.arrays import Bools, Int64s, UInt8s, UInt32s
from statectl.formats.java_types import MURMUR_SEED

_SIZE_BYTES = 4  # the i32 size before the row


def _rotl(value: UInt32s, bits: int) -> UInt32s:
    return (value << np.uint32(bits)) | (value >> np.uint32(32 - bits))


def _mix(h1: UInt32s, words: UInt32s) -> UInt32s:
    """`MurmurHashUtil.mixK1` then `mixH1`, per key."""
    k1 = _rotl(words * np.uint32(0xCC9E2D51), 15) * np.uint32(0x1B873593)
    return _rotl(h1 ^ k1, 13) * np.uint32(5) + np.uint32(0xE6546B64)


def _fmix(h1: UInt32s, length: int) -> UInt32s:
    h1 = h1 ^ np.uint32(length)
    h1 ^= h1 >> np.uint32(16)
    h1 *= np.uint32(0x85EBCA6B)
    h1 ^= h1 >> np.uint32(13)
    h1 *= np.uint32(0xC2B2AE35)
    h1 ^= h1 >> np.uint32(16)
    return h1


def hash_rows(rows: npt.NDArray[np.uint8]) -> UInt32s:
    """`hashBytesByWords` of each row of a (keys × size) byte matrix, size a multiple of 4."""
    count, size = rows.shape
    words = np.ascontiguousarray(rows).view("<u4").astype(np.uint32).reshape(count, size // 4)
    h1 = np.full(count, MURMUR_SEED, np.uint32)
    for column in range(size // 4):
        h1 = _mix(h1, words[:, column])
    return _fmix(h1, size)


def row_data_kernel(buffer: UInt8s, positions: Int64s, ends: Int64s, codes: UInt32s) -> Bools:
    """Hash codes (uint32 bits of a Java int) of the RowData keys at `positions` (each within
    its composite key `[.., ends[i])`) into `codes`; True for each key hashed here."""
    done = np.zeros(len(positions), np.bool_)
    fits = np.flatnonzero(positions + _SIZE_BYTES <= ends)
    if not len(fits):
        return done
    starts = positions[fits]
    header = buffer[starts[:, None] + np.arange(_SIZE_BYTES)]
    sizes = np.ascontiguousarray(header).view(">i4").reshape(-1).astype(np.int64)
    valid = (sizes >= 0) & (sizes % 4 == 0) & (starts + _SIZE_BYTES + sizes <= ends[fits])
    with np.errstate(over="ignore"):  # uint32 arithmetic wraps as Java's int does
        for size in np.unique(sizes[valid]).tolist():
            chosen = fits[valid & (sizes == size)]
            columns = positions[chosen][:, None] + _SIZE_BYTES + np.arange(size)
            codes[chosen] = hash_rows(buffer[columns].reshape(len(chosen), size))
            done[chosen] = True
    return done
