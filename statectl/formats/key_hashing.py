"""Key groups of many serialized keys at once: Java `hashCode`, `MathUtils.murmurHash` and
`KeyGroupRangeAssignment.computeKeyGroupForKeyHash` in numpy arithmetic over one buffer.

A batch is one buffer holding composite keys at `[starts[i], ends[i])`; the user key starts
`offsets[i]` bytes into key i (after the key-group prefix, and a timer's timestamp). Key types
with a vectorised kernel below (Flink's base serializers: Long, Integer, Short, Byte, Boolean,
Character, Double, Float, String of fewer than 16383 characters, and SQL's RowData through
`row_data_hashing`) are hashed without a Python step per key. Every other key, and every key
type without a kernel, takes the per-key fallback `key_type.hash_code(key_type.read(key,
offset))`: the same code (and the same errors) as the scalar path in `java_types`, so a new
`KeyType` works here unchanged and may add a kernel later. Results equal
`java_types.assign_to_key_group(key_type.hash_code(value), M)`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt

from statectl.formats.arrays import Int64s, UInt8s, UInt32s
from statectl.formats.java_types import (
    ROW_DATA_SERIALIZER,
    UPPER_BOUND_MAX_PARALLELISM,
    Buffer,
    KeyType,
)
from statectl.formats.row_data_hashing import row_data_kernel

_BASE = "org.apache.flink.api.common.typeutils.base."
_M32 = np.uint64(0xFFFFFFFF)


def key_groups(
    key_type: KeyType,
    data: Buffer,
    starts: npt.ArrayLike,
    ends: npt.ArrayLike,
    offsets: npt.ArrayLike,
    max_parallelism: int,
) -> Int64s:
    """The key group (under `max_parallelism`) of every key of the batch."""
    if not 0 < max_parallelism <= UPPER_BOUND_MAX_PARALLELISM:
        raise ValueError(f"max parallelism {max_parallelism} is outside 1..32768")
    codes = hash_codes(key_type, data, starts, ends, offsets)
    return (murmur_hash(codes) % max_parallelism).astype(np.int64)


def key_groups_of(
    key_type: KeyType, keys: Sequence[bytes], offset: int, max_parallelism: int
) -> Int64s:
    """`key_groups` of separate composite keys whose user keys all start at `offset`."""
    lengths = np.fromiter((len(k) for k in keys), np.int64, len(keys))
    ends = np.cumsum(lengths)
    starts = ends - lengths
    return key_groups(key_type, b"".join(keys), starts, ends, offset, max_parallelism)


def hash_codes(
    key_type: KeyType,
    data: Buffer,
    starts: npt.ArrayLike,
    ends: npt.ArrayLike,
    offsets: npt.ArrayLike,
) -> UInt32s:
    """Java `hashCode()` of every key of the batch, as the bits of a Java int."""
    key_starts = np.asarray(starts, np.int64)
    key_ends = np.broadcast_to(np.asarray(ends, np.int64), key_starts.shape)
    positions = key_starts + np.asarray(offsets, np.int64)
    buffer = np.frombuffer(data, np.uint8) if len(data) else np.zeros(1, np.uint8)
    codes = np.zeros(len(key_starts), np.uint32)
    kernel = _KERNELS.get(key_type.serializer)
    if kernel is None:
        done = np.zeros(len(key_starts), np.bool_)
    else:
        done = kernel(buffer, positions, key_ends, codes)
    missing = np.flatnonzero(~done)
    if len(missing):
        view = memoryview(data)
        for i in missing.tolist():
            codes[i] = _scalar_code(key_type, view, key_starts[i], key_ends[i], positions[i])
    return codes


def _scalar_code(key_type: KeyType, data: memoryview, start: int, end: int, pos: int) -> int:
    """The fallback: read the key from its own bytes (errors name offsets within the key)."""
    value, _ = key_type.read(data[start:end], pos - start)
    return key_type.hash_code(value) & 0xFFFFFFFF


# --- MathUtils.murmurHash ---------------------------------------------------------------------


def _rotl(value: UInt32s, bits: int) -> UInt32s:
    return (value << np.uint32(bits)) | (value >> np.uint32(32 - bits))


def murmur_hash(codes: UInt32s) -> Int64s:
    """`MathUtils.murmurHash(int)` of every code (uint32 bits of a Java int): non-negative."""
    c = np.asarray(codes, np.uint32) * np.uint32(0xCC9E2D51)
    c = _rotl(c, 15) * np.uint32(0x1B873593)
    c = _rotl(c, 13) * np.uint32(5) + np.uint32(0xE6546B64)
    c ^= np.uint32(4)
    c ^= c >> np.uint32(16)
    c *= np.uint32(0x85EBCA6B)
    c ^= c >> np.uint32(13)
    c *= np.uint32(0xC2B2AE35)
    c ^= c >> np.uint32(16)
    signed = c.view(np.int32).astype(np.int64)
    # Java: non-negative as is, else negated; Integer.MIN_VALUE becomes 0.
    return np.where(signed == -(1 << 31), 0, np.abs(signed))


# --- kernels: each hashes the keys it can, and says which ---------------------------------

Kernel = Callable[[UInt8s, Int64s, Int64s, UInt32s], npt.NDArray[np.bool_]]


def _fixed(size: int, dtype: str, code: Callable[[npt.NDArray[np.generic]], UInt32s]) -> Kernel:
    """A fixed-length big-endian value: `size` bytes at each position, within its key."""
    columns = np.arange(size, dtype=np.int64)

    def kernel(
        buffer: UInt8s, positions: Int64s, ends: Int64s, codes: UInt32s
    ) -> npt.NDArray[np.bool_]:
        done = (positions >= 0) & (positions + size <= ends)
        rows = positions[done]
        values = np.ascontiguousarray(buffer[rows[:, None] + columns]).view(dtype).ravel()
        codes[done] = code(values)
        return done

    return kernel


def _low32(values: npt.NDArray[np.generic]) -> UInt32s:
    return values.astype(np.int64).astype(np.uint32)


def _long_code(bits: npt.NDArray[np.generic]) -> UInt32s:
    """`Long.hashCode` = `(int) (v ^ (v >>> 32))`."""
    unsigned = bits.astype(np.uint64)
    return ((unsigned ^ (unsigned >> np.uint64(32))) & _M32).astype(np.uint32)


def _double_code(bits: npt.NDArray[np.generic]) -> UInt32s:
    """`Double.hashCode`: `doubleToLongBits` (NaNs canonical), then as a Long."""
    unsigned = bits.astype(np.uint64)
    exponent = (unsigned >> np.uint64(52)) & np.uint64(0x7FF)
    mantissa = unsigned & np.uint64((1 << 52) - 1)
    nan = (exponent == 0x7FF) & (mantissa != 0)
    return _long_code(np.where(nan, np.uint64(0x7FF8000000000000), unsigned))


def _float_code(bits: npt.NDArray[np.generic]) -> UInt32s:
    """`Float.hashCode` = `floatToIntBits` (NaNs canonical)."""
    unsigned = bits.astype(np.uint32)
    nan = ((unsigned >> np.uint32(23)) & np.uint32(0xFF) == 0xFF) & (
        unsigned & np.uint32(0x7FFFFF) != 0
    )
    return np.where(nan, np.uint32(0x7FC00000), unsigned)


def _bool_code(values: npt.NDArray[np.generic]) -> UInt32s:
    return np.where(values != 0, np.uint32(1231), np.uint32(1237))


def _string_kernel(
    buffer: UInt8s, positions: Int64s, ends: Int64s, codes: UInt32s
) -> npt.NDArray[np.bool_]:
    """`StringValue.writeString` (varint length + 1, then a varint per UTF-16 unit):
    `String.hashCode` is the 31-polynomial over the units. ASCII text is its own units, a byte
    each; other text is split into units (`_wide_codes`). Lengths take one or two varint bytes;
    null or longer strings, and units that do not read, are left over."""
    size = len(buffer)
    inside = (positions >= 0) & (positions < ends) & (positions < size)
    first = np.zeros(len(positions), np.int64)
    first[inside] = buffer[positions[inside]]
    second_at = np.minimum(positions + 1, size - 1)
    second = np.where(inside & (positions + 1 < ends), buffer[np.maximum(second_at, 0)], 0x80)
    one_byte = inside & (first > 0) & (first < 0x80)
    two_bytes = inside & (first >= 0x80) & (second < 0x80)
    length = np.where(one_byte, first, (first & 0x7F) | (second.astype(np.int64) << 7))
    body = positions + np.where(one_byte, 1, 2)
    count = length - 1
    done: npt.NDArray[np.bool_] = (one_byte | two_bytes) & (count >= 0) & (body + count <= ends)
    starts, counts = body[done], count[done]
    hashes, ascii_only = _polynomial(buffer, starts, counts)
    chosen = np.flatnonzero(done)
    codes[chosen[ascii_only]] = hashes[ascii_only]
    wide = chosen[~ascii_only]
    if len(wide):
        wide_hashes, read = _wide_codes(buffer, body[wide], count[wide], ends[wide])
        codes[wide[read]] = wide_hashes[read]
        done[wide[~read]] = False
    return done


def _wide_codes(
    buffer: UInt8s, starts: Int64s, counts: Int64s, ends: Int64s
) -> tuple[UInt32s, npt.NDArray[np.bool_]]:
    """31-polynomial hash of `counts` varint UTF-16 units at each start (each unit at most
    three bytes: a window of 3 × count, within the key, holds every string), and which rows
    read: all their units inside the window, none longer than three bytes or past 0xFFFF."""
    hashes = np.zeros(len(starts), np.uint32)
    window = np.maximum(np.minimum(3 * counts, ends - starts), 0)
    total = int(window.sum())
    if not total:
        return hashes, np.zeros(len(starts), np.bool_)
    firsts = np.cumsum(window) - window  # each row's first byte among the windows' bytes
    data = buffer[np.repeat(starts - firsts, window) + np.arange(total, dtype=np.int64)]
    last_byte = data < 0x80  # the last byte of a unit
    through = np.cumsum(last_byte, dtype=np.int64)
    before = np.concatenate(([0], through))[firsts]
    last = np.searchsorted(through, before + counts)  # the byte that ends each row's last unit
    taken = (last < firsts + window) & (through[np.minimum(last, total - 1)] == before + counts)
    # the taken rows' bytes, split into units at each unit's last byte
    used = np.where(taken, last + 1 - firsts, 0)
    row_of = np.repeat(np.arange(len(starts)), window)
    inside = np.arange(total) - firsts[row_of] < used[row_of]
    own, own_last = data[inside].astype(np.int64), last_byte[inside]
    if not len(own):
        return hashes, taken
    unit_starts = np.concatenate(([0], np.flatnonzero(own_last)[:-1] + 1))
    unit_of = np.cumsum(own_last) - own_last
    shift = (np.arange(len(own)) - unit_starts[unit_of]) * 7
    units = np.add.reduceat((own & 0x7F) << np.minimum(shift, 21), unit_starts)
    too_long = np.add.reduceat((shift > 14).astype(np.int64), unit_starts) > 0
    taken_counts = np.where(taken, counts, 0)
    unit_rows = np.repeat(np.arange(len(starts)), taken_counts)
    read = taken.copy()
    read[unit_rows[too_long | (units > 0xFFFF)]] = False
    # unit i of n is multiplied by 31^(n-1-i), modulo 2^32: uint64 products and sums wrap
    # modulo 2^64, a multiple of it
    row_ends = np.cumsum(taken_counts)
    index = np.arange(len(units)) - (row_ends - taken_counts)[unit_rows]
    powers = np.full(int(taken_counts.max()), 31, np.uint64)
    powers[0] = 1
    powers = np.cumprod(powers) & _M32
    terms = units.astype(np.uint64) * powers[counts[unit_rows] - 1 - index]
    sums = np.concatenate(([np.uint64(0)], np.cumsum(terms, dtype=np.uint64)))
    per_row = sums[row_ends] - sums[row_ends - taken_counts]
    hashes[read] = (per_row[read] & _M32).astype(np.uint32)
    return hashes, read


def _polynomial(
    buffer: UInt8s, starts: Int64s, counts: Int64s
) -> tuple[UInt32s, npt.NDArray[np.bool_]]:
    """31-polynomial hash of each byte run, and whether all its bytes are ASCII: runs of one
    length at a time, as a matrix of their bytes (keys of a job tend to few lengths)."""
    hashes = np.zeros(len(starts), np.uint32)
    ascii_only = np.ones(len(starts), np.bool_)
    if not len(starts):
        return hashes, ascii_only
    powers = np.full(int(counts.max()) + 1, 31, np.uint64)
    powers[0] = 1
    # 31^(L-1) … 1 for the last L, modulo 2^32: a uint32 matrix product wraps as Java's int
    powers = (np.cumprod(powers)[::-1] & _M32).astype(np.uint32)
    order = np.argsort(counts, kind="stable")
    sorted_counts = counts[order]
    edges = np.flatnonzero(np.diff(sorted_counts)) + 1
    for rows in np.split(order, edges):
        length = int(counts[rows[0]])
        if length == 0:
            continue
        matrix = buffer[starts[rows, None] + np.arange(length)]
        hashes[rows] = matrix @ powers[-length:]
        ascii_only[rows] = ~(matrix & 0x80).any(axis=1)
    return hashes, ascii_only


_KERNELS: dict[str, Kernel] = {
    _BASE + "StringSerializer": _string_kernel,
    _BASE + "LongSerializer": _fixed(8, ">u8", _long_code),
    _BASE + "IntSerializer": _fixed(4, ">i4", _low32),
    _BASE + "ShortSerializer": _fixed(2, ">i2", _low32),
    _BASE + "ByteSerializer": _fixed(1, "i1", _low32),
    _BASE + "BooleanSerializer": _fixed(1, "u1", _bool_code),
    _BASE + "CharSerializer": _fixed(2, ">u2", _low32),
    _BASE + "DoubleSerializer": _fixed(8, ">u8", _double_code),
    _BASE + "FloatSerializer": _fixed(4, ">u4", _float_code),
    ROW_DATA_SERIALIZER: row_data_kernel,
}
"""Vectorised `hashCode` per key serializer class; a key type without one uses the fallback."""
