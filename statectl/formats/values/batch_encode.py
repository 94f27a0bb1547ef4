"""Column writers: many values of one codec at once, with numpy: the inverse of `batch`.

`writer_for(codec)` gives a `BatchWriter` for the layouts written here (the base serializers'
fixed-width numbers and booleans, Java strings, VoidNamespace and GlobalWindow, TimeWindow and
CountWindow); None for anything else. A writer takes an Arrow array of the codec's
`arrow_type()` (a column of the state's table, `StateCodec.arrow_schema`) and returns each row's
bytes, `codec.encode(codec.from_arrow(value))` of every value, as one `large_binary` array, and
the rows it cannot write (a null where the serializer has no null of its own). Callers encode a
batch holding such a row value by value (`StateCodec.encode_*`), which also gives the error: the
results are the same.

Rows of bytes are Arrow arrays without nulls, built from numpy buffers (no Python object per
row) and put together with Arrow's kernels: `join` (each row's parts one after another),
`grouped` (the rows of each group one after another).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from statectl.formats.arrays import Bools, Int64s, UInt8s
from statectl.formats.values import scalars
from statectl.formats.values.batch import bool_bits_array
from statectl.formats.values.composites import WindowCodec
from statectl.formats.values.model import Codec

BINARY = pa.large_binary()
# Built from buffers: `pa.scalar(b"")` converts a Python value, and that imports pandas.
_EMPTY = pa.Array.from_buffers(BINARY, 1, [None, pa.py_buffer(bytes(16)), pa.py_buffer(b"")])[0]
_HIGH_BIT = 0x80


# --- rows of bytes -------------------------------------------------------------------------------


def rows_of(data: npt.NDArray[Any], lengths: Int64s) -> pa.Array:
    """The bytes `data` cut into rows of `lengths` bytes, in order."""
    offsets = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    buffer = pa.py_buffer(np.ascontiguousarray(data).view(np.uint8))
    return pa.Array.from_buffers(BINARY, len(lengths), [None, pa.py_buffer(offsets), buffer])


def binary_rows(rows: Sequence[bytes]) -> pa.Array:
    """Python byte strings as an Arrow array, built from their joined bytes and lengths:
    converting the objects with `pa.array` would import pandas (50 MiB in every process)."""
    offsets = np.zeros(len(rows) + 1, np.int64)
    np.cumsum(np.fromiter(map(len, rows), np.int64, len(rows)), out=offsets[1:])
    buffers = [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(rows))]
    return pa.Array.from_buffers(BINARY, len(rows), buffers)


def fixed_rows(matrix: npt.NDArray[Any]) -> pa.Array:
    """Each row of a matrix of bytes (or of any fixed-width type) as its own bytes."""
    data = np.ascontiguousarray(matrix).view(np.uint8).reshape(len(matrix), -1)
    width = data.shape[1]
    offsets = np.arange(0, (len(data) + 1) * width, width, dtype=np.int64)
    buffers = [None, pa.py_buffer(offsets), pa.py_buffer(data)]
    return pa.Array.from_buffers(BINARY, len(data), buffers)


def constant_rows(data: bytes, count: int) -> pa.Array:
    """`count` rows of the same bytes."""
    if not data:
        return rows_of(np.zeros(0, np.uint8), np.zeros(count, np.int64))
    return fixed_rows(np.tile(np.frombuffer(data, np.uint8), (count, 1)).reshape(count, len(data)))


def join(*parts: pa.Array | bytes) -> pa.Array:
    """Each row's parts (arrays of rows of bytes, or the same bytes for every row) one after
    another."""
    arrays = [pa.scalar(p, BINARY) if isinstance(p, bytes) else p for p in parts]
    if len(arrays) == 1 and not isinstance(parts[0], bytes):
        return arrays[0]
    return pc.binary_join_element_wise(*arrays, _EMPTY)


def offsets_of(rows: pa.Array) -> Int64s:
    """The n + 1 offsets of a binary or string array (into its data buffer)."""
    large = pa.types.is_large_binary(rows.type) or pa.types.is_large_string(rows.type)
    raw = rows.buffers()[1]
    if raw is None:
        return np.zeros(len(rows) + 1, np.int64)
    offsets = np.frombuffer(raw, np.int64 if large else np.int32)
    return offsets[rows.offset : rows.offset + len(rows) + 1].astype(np.int64)


def lengths_of(rows: pa.Array) -> Int64s:
    return np.diff(offsets_of(rows))


def data_of(rows: pa.Array) -> UInt8s:
    """The data buffer of a binary or string array (all of it: index it with `offsets_of`)."""
    data = rows.buffers()[2]
    return np.zeros(0, np.uint8) if data is None else np.frombuffer(data, np.uint8)


def big_endian_lengths(*columns: pa.Array) -> pa.Array:
    """Each row's lengths of the columns' rows, as big-endian i32s one after another."""
    lengths = np.stack([lengths_of(c) for c in columns], axis=1) if columns else None
    if lengths is None or not len(lengths):
        return pa.array([], BINARY)
    return fixed_rows(lengths.astype(">i4"))


def group_spans(groups: Int64s) -> tuple[Int64s, list[tuple[int, int, int]]]:
    """The rows ordered by group, stably (`order`: row numbers), and (group, start, end) of
    each group's rows in that order, the groups in the order of their first row."""
    order = np.argsort(_narrow(groups), kind="stable")  # a radix sort for 16 bits
    by_group = groups[order]
    starts = np.flatnonzero(np.concatenate(([True], by_group[1:] != by_group[:-1])))
    ends = np.append(starts[1:], len(by_group))
    firsts = order[starts]  # a stable sort: each group's first row is its first place
    spans = [
        (int(by_group[starts[i]]), int(starts[i]), int(ends[i]))
        for i in np.argsort(firsts).tolist()
    ]
    return order, spans


def _narrow(groups: Int64s) -> npt.NDArray[Any]:
    """The groups in 16 bits when they fit (key groups do: numpy sorts those by radix)."""
    if len(groups) and int(groups.min()) >= 0 and int(groups.max()) < 1 << 16:
        return groups.astype(np.uint16)
    return groups


def varints(values: Int64s) -> pa.Array:
    """Each value (0 ≤ v < 2^35) in 7-bit groups, least significant first, the high bit set on
    all but the last: `StringValue`'s lengths and characters."""
    top = int(values.max()) if len(values) else 0
    if top < _HIGH_BIT:  # the common case: a byte each
        return fixed_rows(values.astype(np.uint8).reshape(-1, 1))
    most = (top.bit_length() + 6) // 7
    unsigned = values.astype(np.uint64)
    widths = np.ones(len(values), np.int64)
    for bits in range(7, 7 * most, 7):
        widths += unsigned >= np.uint64(1 << bits)
    groups = np.empty((len(values), most), np.uint8)
    for i in range(most):
        more = np.where(widths > i + 1, _HIGH_BIT, 0).astype(np.uint8)
        groups[:, i] = ((unsigned >> np.uint64(7 * i)) & np.uint64(0x7F)).astype(np.uint8) | more
    return rows_of(groups[np.arange(most) < widths[:, None]], widths)


def little_endian_lengths(lengths: Int64s) -> pa.Array:
    """`CompositeKeySerializationUtils.writeVariableIntBytes` of each length: little-endian,
    as few bytes as hold it, at least one."""
    unsigned = lengths.astype(np.uint64)
    widths = np.ones(len(lengths), np.int64)
    for bits in (8, 16, 24):
        widths += unsigned >= np.uint64(1 << bits)
    groups = unsigned.astype("<u4").view(np.uint8).reshape(len(lengths), 4)
    return rows_of(groups[np.arange(4) < widths[:, None]], widths)


# --- writers ------------------------------------------------------------------------------------


def valid_rows(values: pa.Array) -> Bools:
    if not values.null_count:
        return np.ones(len(values), np.bool_)
    valid: Bools = values.is_valid().to_numpy(zero_copy_only=False)
    return valid


def numbers(values: pa.Array, dtype: str) -> npt.NDArray[Any]:
    """A fixed-width column's values (nulls as zero) as numpy `dtype`, from its buffer."""
    data = values.buffers()[1]
    if data is None or not len(values):
        return np.zeros(len(values), dtype)
    found = np.frombuffer(data, dtype)[values.offset : values.offset + len(values)]
    if values.null_count:
        found = np.where(valid_rows(values), found, np.zeros(1, dtype))
    return found


class BatchWriter:
    """Many values of one codec at once (see the module's docstring)."""

    arrow_type: pa.DataType

    def write(self, values: pa.Array) -> tuple[pa.Array, Bools]:
        """Each row's bytes (any bytes for a row it cannot write) and the rows it cannot write."""
        raise NotImplementedError


class BigEndian(BatchWriter):
    """A base serializer's fixed-width number (DataOutput: big-endian), from the bits of the
    column's values (a double's NaN keeps its bits, as `struct.pack` keeps them). No null."""

    def __init__(self, width: int, arrow: pa.DataType) -> None:
        self.width = width
        self.arrow_type = arrow

    def write(self, values: pa.Array) -> tuple[pa.Array, Bools]:
        bits = numbers(values, f"<u{self.width}")
        return fixed_rows(bits.astype(f">u{self.width}")), ~valid_rows(values)


class Boolean(BatchWriter):
    """`BooleanSerializer`: one byte, 1 or 0. No null."""

    arrow_type = pa.bool_()

    def write(self, values: pa.Array) -> tuple[pa.Array, Bools]:
        valid = valid_rows(values)
        flags = values.fill_null(False).to_numpy(zero_copy_only=False).astype(np.uint8)
        return fixed_rows(flags.reshape(-1, 1)), ~valid


class Void(BatchWriter):
    """VoidNamespace, GlobalWindow: one 0 byte, whatever the column holds."""

    arrow_type = pa.null()

    def write(self, values: pa.Array) -> tuple[pa.Array, Bools]:
        return constant_rows(b"\x00", len(values)), np.zeros(len(values), np.bool_)


class JavaString(BatchWriter):
    """`StringSerializer` (`StringValue.writeString`): varint length + 1 (0: null), then each
    UTF-16 unit as a varint. ASCII text is its own units, a byte each; other rows are turned
    into UTF-16 units all at once. A null is the one byte 0."""

    arrow_type = pa.string()

    def write(self, values: pa.Array) -> tuple[pa.Array, Bools]:
        count = len(values)
        offsets = offsets_of(values)
        valid = valid_rows(values)
        lengths = np.where(valid, np.diff(offsets), 0)
        text = values.buffers()[2] or pa.py_buffer(b"")
        bodies = pa.Array.from_buffers(BINARY, count, [None, pa.py_buffer(offsets), text])
        if not valid.all():
            bodies = pc.if_else(bool_bits_array(valid), bodies, _EMPTY)
        units = lengths.copy()
        bad = np.zeros(count, np.bool_)
        wide = valid & _rows_with_high_bytes(data_of(values), offsets)
        if wide.any():
            rows = np.flatnonzero(wide)
            converted = _utf16_varints(data_of(values), offsets[rows], lengths[rows])
            if converted is None:
                bad[rows] = True
            else:
                wide_bodies, units[rows] = converted
                bodies = pc.replace_with_mask(bodies, bool_bits_array(wide), wide_bodies)
        headers = varints(np.where(valid, units + 1, 0))
        return join(headers, bodies), bad


def _rows_with_high_bytes(data: UInt8s, offsets: Int64s) -> Bools:
    """The rows whose bytes [offsets[r], offsets[r + 1]) hold a byte ≥ 0x80."""
    rows = np.zeros(len(offsets) - 1, np.bool_)
    used = data[offsets[0] : offsets[-1]] if len(offsets) > 1 else data[:0]
    high = np.flatnonzero(used >= _HIGH_BIT) + offsets[0]
    if len(high):
        rows[np.searchsorted(offsets, high, side="right") - 1] = True
    return rows


def _utf16_varints(data: UInt8s, starts: Int64s, lengths: Int64s) -> tuple[pa.Array, Int64s] | None:
    """UTF-8 strings (the ranges of `data`) as `StringValue` writes their characters: each
    UTF-16 unit a varint (a character past U+FFFF two units, a surrogate pair). The rows'
    bytes and their numbers of units; None when the bytes are not UTF-8."""
    within = np.arange(int(lengths.sum()), dtype=np.int64)
    firsts = np.cumsum(lengths) - lengths
    owners = np.repeat(np.arange(len(starts)), lengths)
    text = data[np.repeat(starts - firsts, lengths) + within]
    try:
        units = np.frombuffer(text.tobytes().decode("utf-8").encode("utf-16-le"), "<u2").astype(
            np.int64
        )
    except UnicodeDecodeError:
        return None
    # one unit per leading byte (not 10xxxxxx), two for a 4-byte character's (11110xxx)
    per_byte = ((text & 0xC0) != 0x80).astype(np.int64) + (text >= 0xF0)
    counts = np.bincount(owners, per_byte, minlength=len(starts)).astype(np.int64)
    widths = 1 + (units >= 1 << 7) + (units >= 1 << 14)
    groups = np.empty((len(units), 3), np.uint8)
    for i in range(3):
        more = np.where(widths > i + 1, _HIGH_BIT, 0)
        groups[:, i] = ((units >> 7 * i) & 0x7F) | more
    unit_owners = np.repeat(np.arange(len(starts)), counts)
    sizes = np.bincount(unit_owners, widths, minlength=len(starts)).astype(np.int64)
    return rows_of(groups[np.arange(3) < widths[:, None]], sizes), counts


class Window(BatchWriter):
    """`TimeWindow.Serializer` (i64 start, i64 end), `CountWindow.Serializer` (i64 id): the
    struct's fields back to back. No null, nor a null field."""

    def __init__(self, codec: WindowCodec) -> None:
        self.names = codec.names
        self.arrow_type = codec.arrow_type()

    def write(self, values: pa.Array) -> tuple[pa.Array, Bools]:
        bad = ~valid_rows(values)
        fields = []
        for name in self.names:
            field = values.field(name)  # the struct's own slice of it
            bad |= ~valid_rows(field)
            fields.append(numbers(field, "<u8"))
        if not len(values):
            return pa.array([], BINARY), bad
        return fixed_rows(np.stack(fields, axis=1).astype(">u8")), bad


def _scalar_writers() -> dict[int, BatchWriter]:
    return {
        id(scalars.LONG): BigEndian(8, pa.int64()),
        id(scalars.INT): BigEndian(4, pa.int32()),
        id(scalars.SHORT): BigEndian(2, pa.int16()),
        id(scalars.BYTE): BigEndian(1, pa.int8()),
        id(scalars.DOUBLE): BigEndian(8, pa.float64()),
        id(scalars.BOOLEAN): Boolean(),
        id(scalars.STRING): JavaString(),
        id(scalars.VOID): Void(),
    }


_SCALARS = _scalar_writers()


def writer_for(codec: Codec | None) -> BatchWriter | None:
    """A batch writer of `codec`'s values, or None when its layout is not written in batches."""
    if codec is None:
        return None
    scalar = _SCALARS.get(id(codec))
    if scalar is not None:
        return scalar
    if type(codec) is WindowCodec and all(c is scalars.LONG for c in codec.codecs):
        return Window(codec)
    return None
