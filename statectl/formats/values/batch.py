"""Column readers: many values of one codec at once, with numpy over one buffer.

`reader_for(codec)` gives a `BatchReader` for the layouts that allow it (the base serializers'
numbers, booleans and Java strings, enums, VoidNamespace, POJOs, Tuples, case classes and windows
of those, SQL rows of numbers, strings and compact decimals); None for anything else.
`list_reader_for(element)` reads a keyed LIST state's value (its elements joined by `,`). A reader
takes the positions of many values in one buffer and returns them as an Arrow array of the
codec's `arrow_type()` (what `to_arrow` of each `read` gives), the positions after them and the
rows it could not take. Rows it cannot take (a string holding an unpaired surrogate, a POJO
subclass, bytes that run past the end) are left to the codec's per-value `read`, which also
gives their errors: callers decode those one by one, so results are the same. `json` gives the
JSON text of each value, as `json.dumps(codec.to_json(value))`.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from statectl.formats.arrays import Bools, Int64s, UInt8s
from statectl.formats.state_values import LIST_DELIMITER
from statectl.formats.values import scalars
from statectl.formats.values.binary_fields import (
    CompactDecimalField,
    FixedField,
    StringField,
)
from statectl.formats.values.composites import (
    EnumCodec,
    ListCodec,
    MapCodec,
    NullableCodec,
    ObjectArrayCodec,
    OptionCodec,
    SetCodec,
    StructCodec,
    WindowCodec,
)
from statectl.formats.values.json_form import base64_json, json_text
from statectl.formats.values.model import Codec
from statectl.formats.values.pojo import NO_SUBCLASS, PojoCodec
from statectl.formats.values.row_data import RowDataCodec

_IS_NULL = 1
_HIGH_BIT = 0x80


PAD = 256  # zero bytes after a batch's data: a fixed-width read past a value's end stays inside


class Buffer:
    """The bytes of a batch (zero-padded by `PAD`), with views several readers share."""

    def __init__(self, *parts: bytes | bytearray | memoryview) -> None:
        """The parts' bytes one after another (copied once)."""
        self.size = sum(len(part) for part in parts)
        self.data: UInt8s = np.empty(self.size + PAD, np.uint8)
        at = 0
        for part in parts:
            self.data[at : at + len(part)] = np.frombuffer(part, np.uint8)
            at += len(part)
        self.data[at:] = 0
        self._views: dict[str, npt.NDArray[Any]] = {}

    def __len__(self) -> int:
        return self.size

    def view(self, dtype: str) -> npt.NDArray[Any]:
        """The buffer read as `dtype` at every byte offset (an unaligned view, no copy)."""
        found = self._views.get(dtype)
        if found is None:
            count = len(self.data) - np.dtype(dtype).itemsize + 1
            found = self._views[dtype] = np.ndarray((count,), dtype, self.data, 0, (1,))
        return found

    def byte(self, pos: Int64s) -> UInt8s:
        """The byte at each position (past the end: a padding or the last byte; callers check
        bounds themselves)."""
        return self.data[_within(pos, len(self.data) - 1)]

    def words(self, pos: Int64s, width: int, dtype: str) -> npt.NDArray[Any]:
        """`width` bytes at each position read as `dtype` (callers check bounds)."""
        view = self.view(dtype)
        return view[_within(pos, len(view) - 1)]

    def ranges(self, starts: Int64s, lengths: Int64s) -> UInt8s:
        """The bytes [start, start + length) of every row, one after another."""
        if not len(starts) or not int(lengths.max(initial=0)):
            return np.zeros(0, np.uint8)
        width = (int(lengths.max()) + 7) & ~7
        if width <= PAD:  # rows of `width` bytes through the view, cut to their lengths
            rows = self.words(starts, width, f"V{width}").view(np.uint8).reshape(-1, width)
            return rows[np.arange(width) < lengths[:, None]]
        total = int(lengths.sum())
        before = np.cumsum(lengths) - lengths
        index = np.repeat(starts - before, lengths) + np.arange(total, dtype=np.int64)
        return self.data[index]


def _within(pos: Int64s, last: int) -> Int64s:
    """The positions, those past `last` moved to it (checked first: rarely any is)."""
    if len(pos) and int(pos.max()) > last:
        return np.minimum(pos, last)
    return pos


def overlapping(buf: Buffer, starts: Int64s, sizes: Int64s, live: Bools) -> Bools:
    """The live rows whose declared bytes [start, start + size) run into the next live row's.
    In a batch Flink wrote each value has bytes of its own; hostile sizes that overlap would
    together ask for many times the buffer (rows × its size) before any row fails. Looked for
    only when the sizes add up to more than the buffer holds; the rows are left to the codec."""
    sizes = np.where(live, sizes, 0)
    if int(sizes.sum()) <= len(buf):
        return np.zeros(len(starts), np.bool_)
    rows = np.flatnonzero(sizes > 0)
    rows = rows[np.argsort(starts[rows], kind="stable")]
    ends = starts[rows] + sizes[rows]
    next_starts = np.append(starts[rows][1:], np.iinfo(np.int64).max)
    bad = np.zeros(len(starts), np.bool_)
    bad[rows[ends > next_starts]] = True
    return bad


def fixed_width_array(
    arrow: pa.DataType, values: npt.NDArray[Any], valid: Bools | None = None
) -> pa.Array:
    """Fixed-width numbers as an Arrow array of their buffer (null where not `valid`). Arrays
    are built from buffers here: `pa.array` over numpy imports pandas to check for its types,
    0.3 CPU-seconds of a command that never uses it."""
    data = np.ascontiguousarray(values, values.dtype.newbyteorder("="))
    mask = None if valid is None else validity(valid)
    return pa.Array.from_buffers(arrow, len(data), [mask, pa.py_buffer(data)])


def bool_bits_array(values: Bools, valid: Bools | None = None) -> pa.Array:
    """Booleans as an Arrow array (null where not `valid`), from their bits."""
    bits = pa.py_buffer(np.packbits(values, bitorder="little"))
    mask = None if valid is None else validity(valid)
    return pa.Array.from_buffers(pa.bool_(), len(values), [mask, bits])


def bool_array(values: Any) -> Bools:
    return np.asarray(values, np.bool_)


def validity(valid: Bools) -> pa.Buffer | None:
    return None if valid.all() else pa.py_buffer(np.packbits(valid, bitorder="little"))


def binary_array(
    arrow: pa.DataType, buf: Buffer, starts: Int64s, lengths: Int64s, valid: Bools
) -> pa.Array:
    """A binary or string array of the byte ranges (null where not `valid`), unchecked."""
    lengths = np.where(valid, lengths, 0)
    ends = starts + lengths
    if buf.size < _MAX_I32:
        # Arrow's take copies the ranges when they are elements of one array over the buffer:
        # each row and then the gap to the next (a row without bytes where the last one ended)
        ends = np.maximum.accumulate(np.where(valid, ends, 0))
        bounds = np.empty(2 * len(starts) + 1, np.int64)
        bounds[0:-1:2] = np.where(valid, starts, ends)
        bounds[1::2] = ends
        bounds[-1] = bounds[-2] if len(starts) else 0
        if not len(starts) or (bounds[0] >= 0 and (np.diff(bounds) >= 0).all()):
            spans = pa.Array.from_buffers(
                pa.binary(),
                len(bounds) - 1,
                [None, pa.py_buffer(bounds.astype(np.int32)), pa.py_buffer(buf.data)],
            )
            every_other = np.arange(0, len(bounds) - 1, 2, dtype=np.int32)
            rows = spans.take(fixed_width_array(pa.int32(), every_other))
            offsets, data = rows.buffers()[1:]
            return pa.Array.from_buffers(arrow, len(starts), [validity(valid), offsets, data])
    offsets = np.concatenate(([0], np.cumsum(lengths))).astype(np.int32)
    data = buf.ranges(starts, lengths)
    buffers = [validity(valid), pa.py_buffer(offsets), pa.py_buffer(data)]
    return pa.Array.from_buffers(arrow, len(starts), buffers)


_MAX_I32 = (1 << 31) - 1


def _rows_with_high_bytes(values: pa.Array) -> Bools:
    """The rows of a binary or string array holding a byte ≥ 0x80."""
    offsets, data = values.buffers()[1:]
    used = np.frombuffer(data, np.uint8) if data is not None else np.zeros(0, np.uint8)
    rows = np.zeros(len(values), np.bool_)
    high = np.flatnonzero(used >= _HIGH_BIT)
    if len(high):
        bounds = np.frombuffer(offsets, np.int32)[values.offset : values.offset + len(values) + 1]
        rows[np.searchsorted(bounds, high, side="right") - 1] = True
    return rows


def utf8_strings(
    buf: Buffer, starts: Int64s, lengths: Int64s, valid: Bools
) -> tuple[pa.Array, Bools]:
    """The ranges as a string array (UTF-8 bytes); the rows that are not valid UTF-8 are left
    (null) to the codec, which keeps invalid bytes as surrogates."""
    values = binary_array(pa.string(), buf, starts, lengths, valid)
    try:
        values.validate(full=True)
    except pa.ArrowInvalid:  # rare: find the rows one by one among those not ASCII
        invalid = np.zeros(len(starts), np.bool_)
        raw = values.cast(pa.binary())
        for row in np.flatnonzero(_rows_with_high_bytes(values)).tolist():
            try:
                raw[row].as_py().decode("utf-8")
            except UnicodeDecodeError:
                invalid[row] = True
        return binary_array(pa.string(), buf, starts, lengths, valid & ~invalid), invalid
    return values, np.zeros(len(starts), np.bool_)


def java_strings(
    buf: Buffer, starts: Int64s, chars: Int64s, valid: Bools
) -> tuple[pa.Array, Int64s, Bools]:
    """`chars` UTF-16 units at each start, each a varint (`StringValue`): the string array, the
    positions after them and the valid rows left (null) to the codec: a unit longer than three
    bytes or past the end, or an unpaired surrogate, which UTF-8 cannot hold. ASCII strings (a
    byte per unit) are copied as they are; the others are decoded after them."""
    values = binary_array(pa.string(), buf, starts, chars, valid)
    ends = starts + np.where(valid, chars, 0)
    wide = _rows_with_high_bytes(values)
    if not wide.any():
        return values, ends, np.zeros(len(starts), np.bool_)
    rows = np.flatnonzero(wide)
    decoded, wide_ends, failed = _utf16_varints(buf, starts[rows], chars[rows])
    ends[rows] = wide_ends
    bad = np.zeros(len(starts), np.bool_)
    bad[rows[failed]] = True
    return pc.replace_with_mask(values, bool_bits_array(wide), decoded), ends, bad


def _utf16_varints(buf: Buffer, starts: Int64s, chars: Int64s) -> tuple[pa.Array, Int64s, Bools]:
    """Strings of `chars` varint-encoded UTF-16 units (each at most three bytes: a window of
    3 × chars holds every string); the rows that fail are null."""
    window = np.maximum(np.minimum(3 * chars, len(buf) - starts), 0)
    first = np.cumsum(window) - window  # each row's first byte among the windows' bytes
    data = buf.ranges(starts, window)
    last_bit = data < _HIGH_BIT  # a unit's last byte
    units_through = np.cumsum(last_bit, dtype=np.int64)
    before = np.concatenate(([0], units_through))[first]
    last = np.searchsorted(units_through, before + chars)  # the byte ending each row's last unit
    complete = (last < first + window) & (
        units_through[np.minimum(last, len(data) - 1)] == before + chars
    )
    failed = (chars > 0) & ~complete
    used = np.where(failed, 0, np.where(chars > 0, last + 1 - first, 0))
    # the bytes of the rows that end in place, split into units at each last byte
    row_of = np.repeat(np.arange(len(starts)), window)
    inside = np.arange(len(data)) - first[row_of] < used[row_of]
    own, own_last = data[inside], last_bit[inside]
    if not len(own):
        return pa.nulls(len(starts), pa.string()), starts, failed | (chars > 0)
    unit_starts = np.concatenate(([0], np.flatnonzero(own_last)[:-1] + 1))
    unit_of = np.cumsum(own_last) - own_last
    shift = (np.arange(len(own)) - unit_starts[unit_of]) * 7
    units = np.add.reduceat((own & 0x7F).astype(np.int64) << np.minimum(shift, 21), unit_starts)
    too_long = np.add.reduceat((shift > 14).astype(np.int64), unit_starts) > 0
    unit_rows = np.repeat(np.arange(len(starts)), np.where(failed, 0, chars))
    failed[unit_rows[too_long | (units > 0xFFFF)]] = True
    failed[unit_rows[_unpaired_surrogates(units, unit_rows)]] = True
    keep = ~failed[unit_rows]
    units, unit_rows = units[keep], unit_rows[keep]
    text = units.astype("<u2").tobytes().decode("utf-16-le").encode("utf-8")
    widths = np.select(
        [units < 0x80, units < 0x800, (units >= 0xD800) & (units < 0xE000)], [1, 2, 2], 3
    )
    sizes = np.bincount(unit_rows, widths, minlength=len(starts)).astype(np.int64)
    offsets = np.concatenate(([0], np.cumsum(sizes))).astype(np.int32)
    strings = pa.Array.from_buffers(
        pa.string(),
        len(starts),
        [validity(~failed), pa.py_buffer(offsets), pa.py_buffer(text)],
    )
    return strings, starts + used, failed


def _unpaired_surrogates(units: Int64s, rows: Int64s) -> Bools:
    """The units that are a surrogate without its other half in the same string."""
    high = (units >= 0xD800) & (units < 0xDC00)
    low = (units >= 0xDC00) & (units < 0xE000)
    same_row_next = np.append(rows[1:] == rows[:-1], False)
    paired_high = high & np.append(low[1:], False) & same_row_next
    paired_low = low & np.concatenate(([False], paired_high[:-1]))
    unpaired: Bools = (high & ~paired_high) | (low & ~paired_low)
    return unpaired


# --- JSON text -----------------------------------------------------------------------------------


def constant_text(text: str, count: int) -> pa.Array:
    """`count` times the same text, built from its offsets (no Python string per row)."""
    data = text.encode()
    offsets = np.arange(count + 1, dtype=np.int32) * len(data)
    return pa.Array.from_buffers(
        pa.string(), count, [None, pa.py_buffer(offsets), pa.py_buffer(data * count)]
    )


_NULL = constant_text("null", 1)  # its scalar: a Python "null" would be converted through pandas


def _null_text(texts: pa.Array) -> pa.Array:
    return pc.fill_null(texts, _NULL[0])


def number_json(values: pa.Array) -> pa.Array:
    return _null_text(pc.cast(values, pa.string()))


_NON_FINITE = {"nan": '"NaN"', "inf": '"Infinity"', "-inf": '"-Infinity"'}
# Where Arrow's shortest round-trip text is positional as Python's `repr` is (Arrow writes
# exponents from other magnitudes on): the same digits, "1" for "1.0".
_POSITIONAL = (1e-4, 1e9)


def float_json(values: pa.Array) -> pa.Array:
    """`float.__repr__` of the double (a FLOAT widened), NaN and infinities as strings."""
    doubles = values.cast(pa.float64())
    magnitude = np.abs(doubles.to_numpy(zero_copy_only=False))
    with np.errstate(invalid="ignore"):
        plain = ((magnitude >= _POSITIONAL[0]) & (magnitude < _POSITIONAL[1])) | (magnitude == 0)
    texts = pc.cast(doubles, pa.string())
    texts = pc.if_else(
        pc.match_substring(texts, "."), texts, pc.binary_join_element_wise(texts, ".0", "")
    )
    others = np.flatnonzero(~plain & doubles.is_valid().to_numpy(zero_copy_only=False))
    if len(others):  # Python's own text for the rest
        numbers = doubles.take(pa.array(others)).to_pylist()
        own = [_NON_FINITE.get(t, t) for t in map(float.__repr__, numbers)]
        mask = np.zeros(len(values), np.bool_)
        mask[others] = True
        replacement = np.empty(len(values), object)
        replacement[others] = own
        texts = pc.if_else(pa.array(mask), pa.array(replacement, pa.string()), texts)
    return _null_text(texts)


_ESCAPED = np.zeros(256, np.bool_)
_ESCAPED[:0x20] = True
_ESCAPED[[ord('"'), ord("\\")]] = True


def string_json(values: pa.Array) -> pa.Array:
    """`json.dumps(s, ensure_ascii=False)` of ASCII strings: quoted, with quotes and
    backslashes escaped; the rare one with a control character is left to `json.dumps`."""
    data = values.buffers()[2]
    used = np.frombuffer(data, np.uint8) if data is not None else np.zeros(0, np.uint8)
    texts = values
    if _ESCAPED[used].any():
        texts = pc.replace_substring(texts, "\\", "\\\\")
        texts = pc.replace_substring(texts, '"', '\\"')
    texts = pc.binary_join_element_wise('"', texts, '"', "")
    if _ESCAPED[used[used < 0x20]].any():
        control = pc.match_substring_regex(values, "[\\x00-\\x1f]")
        chosen = [
            json.dumps(s, ensure_ascii=False) if c else t
            for s, c, t in zip(
                values.to_pylist(), control.to_pylist(), texts.to_pylist(), strict=True
            )
        ]
        texts = pa.array(chosen, pa.string())
    return _null_text(texts)


def object_json(names: list[str], texts: list[pa.Array], valid: pa.Array) -> pa.Array:
    """`{"name": value, …}` as json.dumps writes a dict (", " and ": "), null where not valid."""
    parts: list[Any] = []
    for i, (name, text) in enumerate(zip(names, texts, strict=True)):
        parts += [("{" if i == 0 else ", ") + json.dumps(name) + ": ", text]
    if not parts:
        return pc.if_else(valid, "{}", "null")
    parts.append("}")
    return pc.if_else(valid, pc.binary_join_element_wise(*parts, ""), "null")


# --- readers -------------------------------------------------------------------------------------


class BatchReader:
    """Many values of one codec at once (see the module's docstring)."""

    arrow_type: pa.DataType

    def read(self, buf: Buffer, pos: Int64s, live: Bools) -> tuple[pa.Array, Int64s, Bools]:
        """The values at `pos` of the `live` rows (null elsewhere), the positions after them
        (unchanged elsewhere) and the live rows this reader cannot take."""
        raise NotImplementedError

    def json(self, values: pa.Array) -> pa.Array:
        """Each value's JSON text ("null" for a null)."""
        raise NotImplementedError


class BigEndian(BatchReader):
    """A base serializer's fixed-width number (DataOutput: big-endian)."""

    def __init__(self, dtype: str, arrow: pa.DataType, floating: bool = False) -> None:
        self.dtype = dtype
        self.width = np.dtype(dtype).itemsize
        self.arrow_type = arrow
        self.floating = floating

    def read(self, buf: Buffer, pos: Int64s, live: Bools) -> tuple[pa.Array, Int64s, Bools]:
        bad = live & (pos + self.width > len(buf))
        words = buf.words(pos, self.width, self.dtype)
        values = fixed_width_array(self.arrow_type, words, live & ~bad)
        return values, np.where(live, pos + self.width, pos), bad

    def json(self, values: pa.Array) -> pa.Array:
        return float_json(values) if self.floating else number_json(values)


class Boolean(BatchReader):
    arrow_type = pa.bool_()

    def read(self, buf: Buffer, pos: Int64s, live: Bools) -> tuple[pa.Array, Int64s, Bools]:
        bad = live & (pos >= len(buf))
        values = bool_bits_array(buf.byte(pos) != 0, live & ~bad)
        return values, np.where(live, pos + 1, pos), bad

    def json(self, values: pa.Array) -> pa.Array:
        return number_json(values)


class Void(BatchReader):
    """VoidNamespace, GlobalWindow: one byte, no value."""

    arrow_type = pa.null()

    def read(self, buf: Buffer, pos: Int64s, live: Bools) -> tuple[pa.Array, Int64s, Bools]:
        bad = live & (pos >= len(buf))
        return pa.nulls(len(pos)), np.where(live, pos + 1, pos), bad

    def json(self, values: pa.Array) -> pa.Array:
        return constant_text("null", len(values))


class JavaString(BatchReader):
    """`StringSerializer` (`StringValue.writeString`): varint length + 1 (0: null), then each
    UTF-16 unit as a varint; taken here when every unit is one byte (ASCII) and the length fits
    two varint bytes."""

    arrow_type = pa.string()

    def read(self, buf: Buffer, pos: Int64s, live: Bools) -> tuple[pa.Array, Int64s, Bools]:
        first = buf.byte(pos).astype(np.int64)
        second = buf.byte(pos + 1).astype(np.int64)
        wide = first >= _HIGH_BIT
        length = np.where(wide, (first & 0x7F) | (second << 7), first)
        head = np.where(wide, 2, 1)
        bad = live & ((pos + head > len(buf)) | (wide & (second >= _HIGH_BIT)))
        null = length == 0
        chars = np.maximum(length - 1, 0)
        starts = pos + head
        bad |= live & (starts + chars > len(buf))
        bad |= overlapping(buf, starts, chars, live & ~bad & ~null)
        values, ends, wide_failed = java_strings(buf, starts, chars, live & ~bad & ~null)
        return values, np.where(live, ends, pos), bad | wide_failed

    def json(self, values: pa.Array) -> pa.Array:
        return string_json(values)


class _Fields(BatchReader):
    """A value of named fields, each read by its own reader: a struct array, a JSON object."""

    def __init__(self, codec: PojoCodec | StructCodec, fields: list[BatchReader]) -> None:
        self.names = codec.names
        self.fields = fields
        self.arrow_type = codec.arrow_type()

    def _struct(self, arrays: list[pa.Array], taken: Bools) -> pa.Array:
        mask = bool_bits_array(~taken)
        return pa.StructArray.from_arrays(arrays, fields=list(self.arrow_type), mask=mask)

    def json(self, values: pa.Array) -> pa.Array:
        texts = [r.json(values.field(i)) for i, r in enumerate(self.fields)]
        return object_json(self.names, texts, values.is_valid())


class Pojo(_Fields):
    """`PojoSerializer` of a class without subclasses: flags 2 (or 1: null), then per field a
    null flag and the field's bytes. A subclass value is left to the codec."""

    def read(self, buf: Buffer, pos: Int64s, live: Bools) -> tuple[pa.Array, Int64s, Bools]:
        flags = buf.byte(pos)
        bad = live & ((pos >= len(buf)) | ((flags != NO_SUBCLASS) & (flags != _IS_NULL)))
        own = live & ~bad & (flags == NO_SUBCLASS)
        pos = np.where(live & ~bad, pos + 1, pos)
        arrays = []
        for reader in self.fields:
            null_flag = buf.byte(pos)
            bad |= own & (pos >= len(buf))
            present = own & ~bad & (null_flag == 0)
            pos = np.where(own & ~bad, pos + 1, pos)
            values, pos, failed = reader.read(buf, pos, present)
            bad |= failed
            own &= ~failed
            arrays.append(values)
        return self._struct(arrays, own & ~bad), pos, bad


class Struct(_Fields):
    """`TupleSerializer`, Scala's case class serializers, `TimeWindow.Serializer` and
    `CountWindow.Serializer` (`StructCodec`): the fields one after another, without null flags;
    the value itself is never null."""

    def read(self, buf: Buffer, pos: Int64s, live: Bools) -> tuple[pa.Array, Int64s, Bools]:
        bad = np.zeros(len(pos), np.bool_)
        arrays = []
        for reader in self.fields:
            values, pos, failed = reader.read(buf, pos, live & ~bad)
            bad |= failed
            arrays.append(values)
        return self._struct(arrays, live & ~bad), pos, bad


class TtlTimestamp(BigEndian):
    """`TtlSerializer`'s last-access time before the user value: an i64 of epoch ms, as the
    `ttl_timestamp` column holds it (its JSON: the number)."""

    def __init__(self) -> None:
        super().__init__(">i8", pa.timestamp("ms", "UTC"))

    def json(self, values: pa.Array) -> pa.Array:
        return number_json(values.cast(pa.int64()))


class Enum(BatchReader):
    """`EnumSerializer`: a big-endian i32 index into the snapshot's constants, read as the
    constant's name. An index out of range is left to the codec (it raises)."""

    arrow_type = pa.string()

    def __init__(self, constants: pa.Array) -> None:
        self.constants = constants

    def read(self, buf: Buffer, pos: Int64s, live: Bools) -> tuple[pa.Array, Int64s, Bools]:
        index = buf.words(pos, 4, ">i4").astype(np.int64)
        bad = live & ((pos + 4 > len(buf)) | (index < 0) | (index >= len(self.constants)))
        taken = live & ~bad
        picks = fixed_width_array(pa.int32(), np.where(taken, index, 0).astype(np.int32), taken)
        return self.constants.take(picks), np.where(live, pos + 4, pos), bad

    def json(self, values: pa.Array) -> pa.Array:
        return string_json(values)


def _enum_reader(codec: EnumCodec) -> Enum | None:
    """The reader of an enum whose constants UTF-8 can hold (built from buffers, as every array
    of the batch path is)."""
    try:
        names = [c.encode("utf-8") for c in codec.constants]
    except UnicodeEncodeError:
        return None
    offsets = np.cumsum([0, *map(len, names)]).astype(np.int32)
    buffers = [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(names))]
    return Enum(pa.Array.from_buffers(pa.string(), len(names), buffers))


class DelimitedList(BatchReader):
    """A keyed LIST state's value without TTL (`state_values.split_list`): the elements one after
    another, each followed by `,` except the last, filling the stored value (empty: no elements).
    The delimiter is not escaped: an element is found only by reading the one before. Elements
    of a fixed width are located all at once; others in rounds (the first element of every
    list, then the second, …), for lists of at most `MAX_ROUNDS` elements: longer ones are left
    to the codec. The value is an Arrow list of the element type; its JSON an array."""

    MAX_ROUNDS = 64

    def __init__(self, element: BatchReader, width: int | None) -> None:
        self.element = element
        self.width = width
        self.arrow_type = pa.list_(element.arrow_type)

    def read(self, buf: Buffer, pos: Int64s, live: Bools) -> tuple[pa.Array, Int64s, Bools]:
        raise TypeError("a LIST value ends where its entry ends: read it with read_until")

    def read_until(
        self, buf: Buffer, pos: Int64s, ends: Int64s, live: Bools
    ) -> tuple[pa.Array, Bools]:
        """The lists filling [pos, ends) of the live rows (null elsewhere) and the live rows this
        reader cannot take."""
        bad = live & ((pos > ends) | (ends > len(buf)))
        live = live & ~bad
        values, rows, _, failed = self._elements(buf, pos, ends, live)
        bad |= failed
        return _list_array(self.arrow_type, values, rows, live & ~bad), bad

    def element_starts(
        self, buf: Buffer, pos: Int64s, ends: Int64s, live: Bools
    ) -> tuple[Int64s, Int64s, Bools]:
        """Where each element of the lists filling [pos, ends) of the live rows starts, and its
        row, in list order; and the live rows this reader cannot take."""
        bad = live & ((pos > ends) | (ends > len(buf)))
        _, rows, starts, failed = self._elements(buf, pos, ends, live & ~bad)
        return rows, starts, bad | failed

    def _elements(
        self, buf: Buffer, pos: Int64s, ends: Int64s, live: Bools
    ) -> tuple[pa.Array, Int64s, Int64s, Bools]:
        """The elements, their rows and starts, in list order; and the rows not taken."""
        if self.width is not None:
            return self._fixed_width(buf, pos, ends, live, self.width)
        return self._in_rounds(buf, pos, ends, live)

    def _fixed_width(
        self, buf: Buffer, pos: Int64s, ends: Int64s, live: Bools, width: int
    ) -> tuple[pa.Array, Int64s, Int64s, Bools]:
        """Every element at once: n elements take n × (width + 1) - 1 bytes."""
        size = np.where(live, ends - pos, 0)
        stride = width + 1
        bad = live & (size > 0) & ((size + 1) % stride != 0)
        counts = np.where(live & ~bad, (size + 1) // stride, 0)
        rows, index = _elements_of(counts)
        starts = pos[rows] + index * stride
        values, after, failed = self.element.read(buf, starts, np.ones(len(rows), np.bool_))
        last = index == counts[rows] - 1
        delimited = last | (buf.byte(after) == LIST_DELIMITER)
        failed |= (after != starts + width) | ~delimited
        bad[rows[failed]] = True
        return values, rows, starts, bad

    def _in_rounds(
        self, buf: Buffer, pos: Int64s, ends: Int64s, live: Bools
    ) -> tuple[pa.Array, Int64s, Int64s, Bools]:
        """Element k of every list still open in round k; the elements in list order."""
        bad = np.zeros(len(pos), np.bool_)
        open_lists = live & (pos < ends)
        at = pos.copy()
        pieces: list[pa.Array] = []
        owners: list[Int64s] = []
        starts: list[Int64s] = []
        for _ in range(self.MAX_ROUNDS):
            rows = np.flatnonzero(open_lists)
            if not len(rows):
                break
            starts.append(at[rows])
            values, after, failed = self.element.read(buf, at[rows], np.ones(len(rows), np.bool_))
            end = ends[rows]
            more = after < end  # then a delimiter and at least one byte of the next element
            delimited = (buf.byte(after) == LIST_DELIMITER) & (after + 1 < end)
            failed |= (after > end) | (more & ~delimited)
            bad[rows[failed]] = True
            open_lists[rows] = more & ~failed
            at[rows] = after + 1
            pieces.append(values)
            owners.append(rows)
        bad |= open_lists  # more elements than rounds
        values, rows, in_order = _in_list_order(pieces, owners, self.element.arrow_type)
        return values, rows, np.concatenate(starts)[in_order] if starts else rows, bad

    def json(self, values: pa.Array) -> pa.Array:
        """`[a, b]` as json.dumps writes a list (", "), "null" for a null."""
        return _joined(values, self.element.json(_children(values, values.values)), "[", "]")


def _elements_of(counts: Int64s) -> tuple[Int64s, Int64s]:
    """For `counts[r]` elements of each row r: every element's row and index within its row."""
    rows = np.repeat(np.arange(len(counts), dtype=np.int64), counts)
    firsts = np.cumsum(counts) - counts
    return rows, np.arange(len(rows), dtype=np.int64) - firsts[rows]


def list_reader_for(element: Codec | None) -> DelimitedList | None:
    """A batch reader of a keyed LIST state's value (without TTL) of `element`s, or None."""
    reader = reader_for(element)
    if reader is None or isinstance(reader, Void) or element is None:
        return None
    return DelimitedList(reader, element.fixed_length)


# --- collections (flink-state-values.md §4.4, §4.6, §4.7) ----------------------------------------


def _list_array(arrow: pa.DataType, values: pa.Array, rows: Int64s, taken: Bools) -> pa.Array:
    """The list (or map) array of the `taken` rows' elements (`values`, of rows `rows`, in
    order); null elsewhere."""
    keep = taken[rows]
    if not keep.all():
        values = values.filter(bool_bits_array(keep))
    counts = np.bincount(rows[keep], minlength=len(taken))
    offsets = np.concatenate(([0], np.cumsum(counts))).astype(np.int32)
    buffers = [validity(taken), pa.py_buffer(offsets)]
    return pa.Array.from_buffers(arrow, len(taken), buffers, children=[values])


def _in_list_order(
    pieces: list[pa.Array], owners: list[Int64s], empty: pa.DataType
) -> tuple[pa.Array, Int64s, Int64s]:
    """Elements read in rounds (element k of every list in round k) put in list order; and
    that order (indexes into the rounds' elements)."""
    if not pieces:
        return pa.nulls(0, empty), np.zeros(0, np.int64), np.zeros(0, np.int64)
    rows = np.concatenate(owners)
    order = np.argsort(rows, kind="stable")  # rounds are in element order
    elements = pa.concat_arrays(pieces).take(fixed_width_array(pa.int64(), order))
    return elements, rows[order], order


def _joined(values: pa.Array, texts: pa.Array, opening: str, closing: str) -> pa.Array:
    """Each list's element texts joined by ", " between `opening` and `closing` ("null" for a
    null list), as json.dumps writes a list or a dict."""
    offsets = values.offsets.to_numpy()
    bounds = pa.py_buffer((offsets - offsets[0]).astype(np.int32))
    lists = pa.Array.from_buffers(
        pa.list_(pa.string()), len(values), [None, bounds], children=[texts]
    )
    joined = pc.binary_join_element_wise(opening, pc.binary_join(lists, ", "), closing, "")
    return pc.if_else(values.is_valid(), joined, _NULL[0])


def text_array(texts: list[str]) -> pa.Array:
    """Python strings as a string array, built from buffers (`pa.array` would import pandas)."""
    data = [t.encode("utf-8", "surrogatepass") for t in texts]
    offsets = np.cumsum([0, *map(len, data)]).astype(np.int32)
    buffers = [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(data))]
    return pa.Array.from_buffers(pa.string(), len(texts), buffers)


def _element_rows(values: pa.Array) -> Int64s:
    """The row of each element of a list or map array (`_children`' owners)."""
    offsets = values.offsets.to_numpy().astype(np.int64)
    return np.repeat(np.arange(len(values), dtype=np.int64), np.diff(offsets))


def _children(values: pa.Array, child: pa.Array) -> pa.Array:
    """The part of a list or map array's child (`.values`, `.keys`, `.items`: all of it, even
    for a slice) its offsets span."""
    offsets = values.offsets.to_numpy()
    return child[offsets[0] : offsets[-1]]


def _count_at(buf: Buffer, pos: Int64s, live: Bools) -> tuple[Int64s, Bools]:
    """The i32 element count at each position and the live rows where it cannot be one."""
    count = buf.words(pos, 4, ">i4").astype(np.int64)
    bad = live & ((pos + 4 > len(buf)) | (count < 0))
    return np.where(live & ~bad, count, 0), bad


class Sized(BatchReader):
    """An i32 count (big-endian), then that many elements (`_element`). Elements of a fixed
    width are located all at once; others in rounds (the first element of every collection,
    then the second, …) for at most `MAX_ROUNDS` elements: longer ones are left to the codec,
    as is a negative count (`composites.read_count` raises)."""

    MAX_ROUNDS = 64
    width: int | None = None  # every element's bytes, when fixed
    element_type: pa.DataType

    def read(self, buf: Buffer, pos: Int64s, live: Bools) -> tuple[pa.Array, Int64s, Bools]:
        counts, bad = _count_at(buf, pos, live)
        if self.width is not None:
            values, rows, after, failed = self._fixed_width(buf, pos + 4, counts, self.width)
        else:
            values, rows, after, failed = self._in_rounds(buf, pos + 4, counts)
        bad |= live & failed
        taken = live & ~bad
        return _list_array(self.arrow_type, values, rows, taken), np.where(live, after, pos), bad

    def _element(self, buf: Buffer, at: Int64s) -> tuple[pa.Array, Int64s, Bools]:
        """One element at each position: its value, the positions after, the rows failed."""
        raise NotImplementedError

    def _fixed_width(
        self, buf: Buffer, at: Int64s, counts: Int64s, width: int
    ) -> tuple[pa.Array, Int64s, Int64s, Bools]:
        """Every element at once: element i of a row is at i × width."""
        after = at + counts * width
        bad = after > len(buf)
        bad |= overlapping(buf, at, counts * width, ~bad)
        counts = np.where(bad, 0, counts)
        rows, index = _elements_of(counts)
        starts = at[rows] + index * width
        values, ends, failed = self._element(buf, starts)
        bad[rows[failed | (ends != starts + width)]] = True
        return values, rows, after, bad

    def _in_rounds(
        self, buf: Buffer, at: Int64s, counts: Int64s
    ) -> tuple[pa.Array, Int64s, Int64s, Bools]:
        """Element k of every collection still open in round k; the elements in list order."""
        left, at = counts.copy(), at.copy()
        bad = np.zeros(len(at), np.bool_)
        pieces: list[pa.Array] = []
        owners: list[Int64s] = []
        for _ in range(self.MAX_ROUNDS):
            rows = np.flatnonzero(left > 0)
            if not len(rows):
                break
            values, after, failed = self._element(buf, at[rows])
            bad[rows[failed]] = True
            left[rows] = np.where(failed, 0, left[rows] - 1)
            at[rows] = after
            pieces.append(values)
            owners.append(rows)
        bad |= left > 0  # more elements than rounds
        values, rows, _ = _in_list_order(pieces, owners, self.element_type)
        return values, rows, at, bad


def _flagged(
    reader: BatchReader, buf: Buffer, at: Int64s, null_when_set: bool
) -> tuple[pa.Array, Int64s, Bools]:
    """A null flag byte, then the value unless the flag says null (`null_when_set`: any byte
    but 0 is null, as `SetSerializer`'s and `MapSerializer`'s value flags; else 0 is null, as
    `GenericArraySerializer`'s presence flag)."""
    flag = buf.byte(at)
    bad = at >= len(buf)
    null = (flag != 0) if null_when_set else (flag == 0)
    values, after, failed = reader.read(buf, at + 1, ~bad & ~null)
    return values, np.where(bad, at, after), bad | failed


class ListOf(Sized):
    """`ListSerializer` (and `ArrayListSerializer`; `composites.ListCodec`): i32 size, then each
    element with the element serializer, without null flags. Its JSON: an array."""

    def __init__(self, element: BatchReader, width: int | None) -> None:
        self.element = element
        self.width = width
        self.element_type = element.arrow_type
        self.arrow_type = pa.list_(element.arrow_type)

    def _element(self, buf: Buffer, at: Int64s) -> tuple[pa.Array, Int64s, Bools]:
        return self.element.read(buf, at, np.ones(len(at), np.bool_))

    def json(self, values: pa.Array) -> pa.Array:
        return _joined(values, self.element.json(_children(values, values.values)), "[", "]")


class PrimitiveArray(ListOf):
    """`{Boolean,Short,Int,Long,Float,Double}PrimitiveArraySerializer` (`scalars._numbers`,
    `_read_booleans`): i32 length, then the elements in the primitive's big-endian width."""


class FlaggedListOf(ListOf):
    """`SetSerializer` (2.x; `composites.SetCodec`): i32 size, then per element a null flag
    (not 0 = null) and the element if not null; its JSON an array sorted by each element's
    compact JSON text (`json_form.sorted_json`). `GenericArraySerializer`
    (`composites.ObjectArrayCodec`): the same with a presence flag (0 = null), in order."""

    def __init__(self, element: BatchReader, null_when_set: bool, sort: bool) -> None:
        super().__init__(element, None)
        self.null_when_set = null_when_set
        self.sort = sort

    def _element(self, buf: Buffer, at: Int64s) -> tuple[pa.Array, Int64s, Bools]:
        return _flagged(self.element, buf, at, self.null_when_set)

    def json(self, values: pa.Array) -> pa.Array:
        texts = self.element.json(_children(values, values.values))
        if self.sort and len(texts):
            texts = _sorted_in_rows(texts, _element_rows(values), self.element)
        return _joined(values, texts, "[", "]")


def _sorted_in_rows(texts: pa.Array, rows: Int64s, element: BatchReader) -> pa.Array:
    """The texts sorted within each row by the compact JSON text of their values, stably."""
    keys = texts
    if not _compact_json(element):
        keys = text_array([json_text(json.loads(t)) for t in texts.to_pylist()])
    table = pa.table({"row": fixed_width_array(pa.int64(), rows), "key": keys})
    order = pc.sort_indices(table, sort_keys=[("row", "ascending"), ("key", "ascending")])
    return texts.take(order)


class MapOf(Sized):
    """`MapSerializer` (`composites.MapCodec`): i32 size, then per entry the key, a null flag
    (not 0 = null) and the value if not null. A null key (Arrow's map keys cannot be null) is
    left to the codec. Its JSON (`json_form.map_json`): an object when every key is a string
    (a repeated key keeps its first place and last value), else [key, value] pairs sorted by the
    key's compact JSON text."""

    def __init__(self, key: BatchReader, value: BatchReader) -> None:
        self.key = key
        self.value = value
        self.arrow_type = pa.map_(key.arrow_type, value.arrow_type)
        self.element_type = pa.struct([self.arrow_type.key_field, self.arrow_type.item_field])

    def _element(self, buf: Buffer, at: Int64s) -> tuple[pa.Array, Int64s, Bools]:
        keys, after, bad = self.key.read(buf, at, np.ones(len(at), np.bool_))
        bad |= keys.is_null().to_numpy(zero_copy_only=False)
        values, after, failed = _flagged(self.value, buf, after, True)
        after = np.where(bad, at, after)
        entries = pa.StructArray.from_arrays([keys, values], fields=list(self.element_type))
        return entries, after, bad | failed

    def json(self, values: pa.Array) -> pa.Array:
        keys = self.key.json(_children(values, values.keys))
        items = self.value.json(_children(values, values.items))
        pairs = pc.binary_join_element_wise(keys, items, ": ")
        objects = _joined(values, pairs, "{", "}")
        others = self._rows_not_objects(values, keys)
        if not others.any():
            return objects
        key_texts, item_texts = keys.to_pylist(), items.to_pylist()
        offsets = values.offsets.to_numpy() - values.offsets.to_numpy()[0]
        texts = [
            _map_text(
                key_texts[offsets[r] : offsets[r + 1]], item_texts[offsets[r] : offsets[r + 1]]
            )
            for r in np.flatnonzero(others).tolist()
        ]
        return pc.replace_with_mask(objects, bool_bits_array(others), text_array(texts))

    @staticmethod
    def _rows_not_objects(values: pa.Array, keys: pa.Array) -> Bools:
        """The valid rows with a key that is not a string, or a key twice."""
        rows = _element_rows(values)
        strings = pc.starts_with(keys, '"').to_numpy(zero_copy_only=False)
        others = np.bincount(rows[~strings], minlength=len(values)) > 0
        others[_rows_with_a_key_twice(rows, keys)] = True
        valid: Bools = values.is_valid().to_numpy(zero_copy_only=False)
        return others & valid


def _rows_with_a_key_twice(rows: Int64s, keys: pa.Array) -> Int64s:
    """The rows holding the same key text twice (found next to each other once sorted)."""
    if len(rows) < 2:
        return np.zeros(0, np.int64)
    table = pa.table({"row": fixed_width_array(pa.int64(), rows), "key": keys})
    order = pc.sort_indices(table, sort_keys=[("row", "ascending"), ("key", "ascending")])
    by_row, by_key = rows[order.to_numpy()], keys.take(order)
    same_key = pc.equal(by_key[1:], by_key[:-1]).to_numpy(zero_copy_only=False)
    twice: Int64s = by_row[1:][(by_row[1:] == by_row[:-1]) & same_key]
    return twice


def _map_text(keys: list[str], items: list[str]) -> str:
    """`json.dumps(json_form.map_json(pairs))` of the pairs' JSON texts."""
    if all(k.startswith('"') for k in keys):
        merged = dict(zip(keys, items, strict=True))  # a repeated key: its first place, last value
        return "{" + ", ".join(f"{k}: {v}" for k, v in merged.items()) + "}"
    pairs = sorted(zip(keys, items, strict=True), key=lambda kv: json_text(json.loads(kv[0])))
    return "[" + ", ".join(f"[{k}, {v}]" for k, v in pairs) + "]"


class Nullable(BatchReader):
    """`NullableSerializer` (`composites.NullableCodec`): a null flag (not 0 = null), then
    `padding` zero bytes if null, else the value. Scala's `OptionSerializer`
    (`composites.OptionCodec`): 0 for None, else 1 then the value (`null_when_set` False)."""

    def __init__(self, inner: BatchReader, padding: int, null_when_set: bool) -> None:
        self.inner = inner
        self.padding = padding
        self.null_when_set = null_when_set
        self.arrow_type = inner.arrow_type

    def read(self, buf: Buffer, pos: Int64s, live: Bools) -> tuple[pa.Array, Int64s, Bools]:
        flag = buf.byte(pos)
        bad = live & (pos >= len(buf))
        null = (flag != 0) if self.null_when_set else (flag == 0)
        values, after, failed = self.inner.read(buf, pos + 1, live & ~bad & ~null)
        after = np.where(null, pos + 1 + self.padding, after)
        return values, np.where(live, after, pos), bad | failed

    def json(self, values: pa.Array) -> pa.Array:
        return self.inner.json(values)


class Bytes(BatchReader):
    """`BytePrimitiveArraySerializer` (`scalars._read_bytes`): i32 length, then the bytes. Its
    JSON: the bytes in base64, quoted."""

    arrow_type = pa.binary()

    def read(self, buf: Buffer, pos: Int64s, live: Bools) -> tuple[pa.Array, Int64s, Bools]:
        lengths, bad = _count_at(buf, pos, live)
        bad |= live & (pos + 4 + lengths > len(buf))
        bad |= overlapping(buf, pos + 4, lengths, live & ~bad)
        taken = live & ~bad
        values = binary_array(pa.binary(), buf, pos + 4, lengths, taken)
        return values, np.where(live, pos + 4 + lengths, pos), bad

    def json(self, values: pa.Array) -> pa.Array:
        data = values.to_pylist()
        return text_array(["null" if b is None else f'"{base64_json(b)}"' for b in data])


def _compact_json(reader: BatchReader) -> bool:
    """Whether the reader's JSON text is the compact one `json_form.json_text` writes (a
    scalar's: no ", " or ": " inside)."""
    if isinstance(reader, Nullable):
        return _compact_json(reader.inner)
    return isinstance(reader, BigEndian | Boolean | JavaString | Enum | Bytes)


def _collection_reader(codec: Codec) -> BatchReader | None:
    """The reader of a List, Set, Map, object array, Nullable or Option of elements read in
    batches (not VoidNamespace), or None."""
    kind = type(codec)
    if isinstance(codec, NullableCodec) and kind in (NullableCodec, OptionCodec):
        inner = _member_reader(codec.inner)
        return None if inner is None else Nullable(inner, codec.padding, kind is NullableCodec)
    if isinstance(codec, ListCodec) and kind in (ListCodec, SetCodec, ObjectArrayCodec):
        element = _member_reader(codec.element)
        if element is None:
            return None
        if kind is ListCodec:
            return ListOf(element, codec.element.fixed_length)
        return FlaggedListOf(element, null_when_set=kind is SetCodec, sort=kind is SetCodec)
    if isinstance(codec, MapCodec) and kind is MapCodec:
        key, value = _member_reader(codec.key), _member_reader(codec.value)
        return None if key is None or value is None else MapOf(key, value)
    return None


def _member_reader(codec: Codec) -> BatchReader | None:
    """A reader for an element of a collection (VoidNamespace is none)."""
    reader = reader_for(codec)
    return None if isinstance(reader, Void) else reader


# --- SQL rows ------------------------------------------------------------------------------------

_INLINE = np.uint64(1 << 63)


class _Slot:
    """One BinaryRowData field (little-endian slot; strings inline or in the var part)."""

    arrow_type: pa.DataType

    def read(
        self, buf: Buffer, base: Int64s, end: Int64s, at: Int64s, live: Bools
    ) -> tuple[pa.Array, Bools]:
        raise NotImplementedError

    def json(self, values: pa.Array) -> pa.Array:
        raise NotImplementedError


class _FixedSlot(_Slot):
    def __init__(self, field: FixedField) -> None:
        self.code = field.code
        self.arrow_type = field.arrow_type()
        self.width = field.width

    def read(
        self, buf: Buffer, base: Int64s, end: Int64s, at: Int64s, live: Bools
    ) -> tuple[pa.Array, Bools]:
        if self.code == "?":
            values = bool_bits_array(buf.byte(at) != 0, live)
        else:
            words = buf.words(at, self.width, "<" + _NUMPY[self.code])
            values = fixed_width_array(self.arrow_type, words, live)
        return values, np.zeros(len(at), np.bool_)

    def json(self, values: pa.Array) -> pa.Array:
        if self.code in "fd":
            return float_json(values)
        return number_json(values)


_NUMPY = {"b": "i1", "h": "i2", "i": "i4", "q": "i8", "f": "f4", "d": "f8"}


class _StringSlot(_Slot):
    """CHAR/VARCHAR: ≤ 7 bytes inline (byte 7 = 0x80 | length), else offset << 32 | size into
    the row; taken here when ASCII."""

    arrow_type = pa.string()

    def read(
        self, buf: Buffer, base: Int64s, end: Int64s, at: Int64s, live: Bools
    ) -> tuple[pa.Array, Bools]:
        word = buf.words(at, 8, "<u8")
        inline = (word & _INLINE) != 0
        starts = np.where(inline, at, base + (word >> np.uint64(32)).astype(np.int64))
        lengths = np.where(
            inline,
            ((word >> np.uint64(56)) & np.uint64(0x7F)).astype(np.int64),
            (word & np.uint64(0xFFFFFFFF)).astype(np.int64),
        )
        bad = live & (starts + lengths > end)
        values, invalid = utf8_strings(buf, starts, lengths, live & ~bad)
        return values, bad | invalid

    def json(self, values: pa.Array) -> pa.Array:
        return string_json(values)


class _DecimalSlot(_Slot):
    """DECIMAL(p ≤ 18): the unscaled long in the slot."""

    def __init__(self, field: CompactDecimalField) -> None:
        self.precision = field.precision
        self.scale = field.scale
        self.arrow_type = field.arrow_type()

    def read(
        self, buf: Buffer, base: Int64s, end: Int64s, at: Int64s, live: Bools
    ) -> tuple[pa.Array, Bools]:
        unscaled = buf.words(at, 8, "<i8").astype(np.int64)
        limit = 10**self.precision
        bad = live & ((unscaled >= limit) | (unscaled <= -limit))
        taken = live & ~bad
        words = np.stack([unscaled, np.where(unscaled < 0, -1, 0)], axis=1)
        data = pa.py_buffer(np.ascontiguousarray(np.where(taken[:, None], words, 0)))
        return pa.Array.from_buffers(self.arrow_type, len(at), [validity(taken), data]), bad

    def json(self, values: pa.Array) -> pa.Array:
        """`format(Decimal, "f")` with every digit of the scale, quoted."""
        return _null_text(pc.binary_join_element_wise('"', pc.cast(values, pa.string()), '"', ""))


def _slot(field: Any) -> _Slot | None:
    if isinstance(field, FixedField):
        return _FixedSlot(field)
    if isinstance(field, StringField):
        return _StringSlot()
    if type(field) is CompactDecimalField:
        return _DecimalSlot(field)
    return None


class RowData(BatchReader):
    """`RowDataSerializer`: i32 size (big-endian), then a BinaryRowData: the header word
    (RowKind, null bits), an 8-byte slot per field, the var part."""

    def __init__(self, codec: RowDataCodec, slots: list[_Slot]) -> None:
        self.names = codec.layout.names
        self.slots = slots
        self.header = codec.layout.header
        self.fixed_size = codec.layout.fixed_size
        self.arrow_type = codec.arrow_type()

    def read(self, buf: Buffer, pos: Int64s, live: Bools) -> tuple[pa.Array, Int64s, Bools]:
        size = buf.words(pos, 4, ">i4").astype(np.int64)
        base = pos + 4
        end = base + size
        bad = live & ((base > len(buf)) | (size < self.fixed_size) | (end > len(buf)))
        bad |= overlapping(buf, base, size, live & ~bad)
        bits = buf.words(base, 8, "<u8")
        kind = (bits & np.uint64(0xFF)).astype(np.int64)
        bad |= live & (kind > np.iinfo(np.int8).max)
        arrays = []
        for i, slot in enumerate(self.slots):
            null = ((bits >> np.uint64(i + 8)) & np.uint64(1)) != 0
            at = base + self.header + 8 * i
            values, failed = slot.read(buf, base, end, at, live & ~bad & ~null)
            bad |= failed
            arrays.append(values)
        taken = live & ~bad
        arrays.append(fixed_width_array(pa.int8(), kind.astype(np.int8), taken))
        mask = bool_bits_array(~taken)
        struct = pa.StructArray.from_arrays(arrays, fields=list(self.arrow_type), mask=mask)
        return struct, np.where(live, end, pos), bad

    def json(self, values: pa.Array) -> pa.Array:
        texts = [s.json(values.field(i)) for i, s in enumerate(self.slots)]
        return object_json(self.names, texts, values.is_valid())


# --- which codecs ------------------------------------------------------------------------------


def _scalar_readers() -> dict[int, BatchReader]:
    return {
        id(scalars.LONG): BigEndian(">i8", pa.int64()),
        id(scalars.INT): BigEndian(">i4", pa.int32()),
        id(scalars.SHORT): BigEndian(">i2", pa.int16()),
        id(scalars.BYTE): BigEndian(">i1", pa.int8()),
        id(scalars.DOUBLE): BigEndian(">f8", pa.float64(), floating=True),
        id(scalars.FLOAT): BigEndian(">f4", pa.float32(), floating=True),
        id(scalars.BOOLEAN): Boolean(),
        id(scalars.STRING): JavaString(),
        id(scalars.VOID): Void(),
        id(scalars.BYTES): Bytes(),
        **_primitive_array_readers(),
    }


def _primitive_array_readers() -> dict[int, BatchReader]:
    """`*PrimitiveArraySerializer`s of numbers and booleans (`scalars.PRIMITIVE_ARRAYS`)."""
    elements: dict[str, tuple[BatchReader, int]] = {
        "BooleanPrimitiveArray": (Boolean(), 1),
        "ShortPrimitiveArray": (BigEndian(">i2", pa.int16()), 2),
        "IntPrimitiveArray": (BigEndian(">i4", pa.int32()), 4),
        "LongPrimitiveArray": (BigEndian(">i8", pa.int64()), 8),
        "FloatPrimitiveArray": (BigEndian(">f4", pa.float32(), floating=True), 4),
        "DoublePrimitiveArray": (BigEndian(">f8", pa.float64(), floating=True), 8),
    }
    return {
        id(scalars.PRIMITIVE_ARRAYS[name]): PrimitiveArray(element, width)
        for name, (element, width) in elements.items()
    }


_SCALARS = _scalar_readers()
# The struct codecs whose values are their fields back to back (not Row's null mask, Tuple0's 42)
_FIELDS_BACK_TO_BACK = (StructCodec, WindowCodec)


def reader_for(codec: Codec | None) -> BatchReader | None:
    """A batch reader of `codec`'s values, or None when its layout is not read in batches."""
    if codec is None:
        return None
    scalar = _SCALARS.get(id(codec))
    if scalar is not None:
        return scalar
    if isinstance(codec, PojoCodec) and not codec.subclasses:
        fields = [reader_for(c) for c in codec.codecs]
        if all(f is not None and not isinstance(f, Void) for f in fields):
            return Pojo(codec, [f for f in fields if f is not None])
    if isinstance(codec, StructCodec) and type(codec) in _FIELDS_BACK_TO_BACK and codec.codecs:
        members = [reader_for(c) for c in codec.codecs]
        if all(m is not None and not isinstance(m, Void) for m in members):
            return Struct(codec, [m for m in members if m is not None])
    if isinstance(codec, EnumCodec):
        return _enum_reader(codec)
    collection = _collection_reader(codec)
    if collection is not None:
        return collection
    if isinstance(codec, RowDataCodec) and len(codec.layout.fields) <= 56:
        slots = [_slot(f) for f in codec.layout.fields]
        if all(s is not None for s in slots):
            return RowData(codec, [s for s in slots if s is not None])
    return None
