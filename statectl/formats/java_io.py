"""Java `DataInput`/`DataOutput` primitives: big-endian integers and modified UTF-8.

Mirrors `java.io.DataOutputStream` and Flink's `DataOutputViewStreamWrapper`
(flink-savepoint-format.md §1). Readers raise `FormatError` with the byte offset
when the input ends early, so a truncated file never surfaces as an IndexError.
"""

from __future__ import annotations

import struct

from statectl.errors import FormatError

_I16 = struct.Struct(">h")
_U16 = struct.Struct(">H")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


def decode_modified_utf8(data: bytes | bytearray | memoryview) -> str:
    """Java's modified UTF-8: `C0 80` is NUL, supplementary characters are surrogate pairs."""
    try:
        cesu = bytes(data).replace(b"\xc0\x80", b"\x00").decode("utf-8", "surrogatepass")
        return cesu.encode("utf-16-be", "surrogatepass").decode("utf-16-be")
    except (UnicodeDecodeError, UnicodeEncodeError) as exc:
        raise FormatError(f"invalid modified UTF-8 string: {exc.reason}") from None


def excerpt(text: str, limit: int = 60) -> str:
    """`text` quoted for an error message, cut after `limit` characters: names read from a
    corrupt file can be up to 64 KiB of arbitrary bytes."""
    if len(text) <= limit:
        return repr(text)
    return f"{text[:limit]!r}… ({len(text)} characters)"


def encode_modified_utf8(text: str) -> bytes:
    """Inverse of `decode_modified_utf8`: NUL as `C0 80`, each surrogate as 3 bytes."""
    units = text.encode("utf-16-be", "surrogatepass")
    out = bytearray()
    for i in range(0, len(units), 2):
        unit = (units[i] << 8) | units[i + 1]
        if 0 < unit < 0x80:
            out.append(unit)
        elif unit < 0x800:
            out += bytes((0xC0 | (unit >> 6), 0x80 | (unit & 0x3F)))
        else:
            out += bytes((0xE0 | (unit >> 12), 0x80 | ((unit >> 6) & 0x3F), 0x80 | (unit & 0x3F)))
    return bytes(out)


class DataReader:
    """Sequential big-endian reader over an in-memory buffer."""

    def __init__(self, data: bytes | bytearray | memoryview, pos: int = 0) -> None:
        self._data = memoryview(data)
        self.pos = pos

    @property
    def size(self) -> int:
        return len(self._data)

    def fork(self) -> DataReader:
        """An independent reader at the same position (for look-ahead)."""
        return DataReader(self._data, self.pos)

    def remaining(self) -> int:
        return len(self._data) - self.pos

    def at_end(self) -> bool:
        return self.pos >= len(self._data)

    def _take(self, count: int) -> memoryview:
        if count < 0:
            raise FormatError(f"negative length {count} at offset {self.pos}")
        end = self.pos + count
        if end > len(self._data):
            raise FormatError(
                f"truncated: needs {count} bytes at offset {self.pos}, only {self.remaining()} left"
            )
        view = self._data[self.pos : end]
        self.pos = end
        return view

    def check_count(self, count: int, what: str, at: int, element_size: int = 1) -> int:
        """`count` as read at `at`, refused unless that many elements of at least
        `element_size` bytes fit in the bytes left: a corrupt count must not drive a loop or an
        allocation."""
        if count < 0:
            raise FormatError(f"negative {what} count {count} at offset {at}")
        if count * element_size > self.remaining():
            raise FormatError(
                f"{what} count {count} at offset {at} exceeds the {self.remaining()} bytes left"
            )
        return count

    def read_bytes(self, count: int) -> bytes:
        return bytes(self._take(count))

    def _unpack(self, layout: struct.Struct) -> int:
        value: int = layout.unpack(self._take(layout.size))[0]
        return value

    def read_u8(self) -> int:
        return self._take(1)[0]

    def read_bool(self) -> bool:
        return self._take(1)[0] != 0

    def read_i16(self) -> int:
        return self._unpack(_I16)

    def read_u16(self) -> int:
        return self._unpack(_U16)

    def read_i32(self) -> int:
        return self._unpack(_I32)

    def read_i64(self) -> int:
        return self._unpack(_I64)

    def read_utf(self) -> str:
        start = self.pos
        length = self.read_u16()
        try:
            return decode_modified_utf8(self._take(length))
        except FormatError as exc:
            raise FormatError(f"{exc.message} at offset {start}") from None

    def slice(self, start: int, end: int) -> bytes:
        """The bytes in [start, end) of the whole buffer (already read, typically)."""
        return bytes(self._data[start:end])

    def read_rest(self) -> bytes:
        return self.read_bytes(self.remaining())


class DataWriter:
    """Big-endian writer into a growing buffer; `getvalue()` returns the bytes."""

    def __init__(self) -> None:
        self._buf = bytearray()

    @property
    def pos(self) -> int:
        return len(self._buf)

    def getvalue(self) -> bytes:
        return bytes(self._buf)

    def write_bytes(self, data: bytes | bytearray | memoryview) -> None:
        self._buf += data

    def write_u8(self, value: int) -> None:
        self._buf.append(value & 0xFF)

    def write_bool(self, value: bool) -> None:
        self._buf.append(1 if value else 0)

    def write_i16(self, value: int) -> None:
        self._buf += _I16.pack(value)

    def write_u16(self, value: int) -> None:
        self._buf += _U16.pack(value)

    def write_i32(self, value: int) -> None:
        self._buf += _I32.pack(value)

    def write_i64(self, value: int) -> None:
        self._buf += _I64.pack(value)

    def write_utf(self, text: str) -> None:
        encoded = encode_modified_utf8(text)
        if len(encoded) > 0xFFFF:
            raise FormatError(f"string of {len(encoded)} encoded bytes is too long for writeUTF")
        self.write_u16(len(encoded))
        self._buf += encoded
