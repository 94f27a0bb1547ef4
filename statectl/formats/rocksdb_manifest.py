"""A RocksDB MANIFEST: the log of `VersionEdit`s that says which SST files an instance holds.

Mirrors RocksDB's `log::Reader`/`log::Writer` (32 KiB blocks, 7-byte record headers: masked
CRC32C of type and payload, length, type) and `VersionEdit::EncodeTo`/`DecodeFrom`
(db/version_edit.cc) for the tags FRocksDB 6.20.3 (Flink 1.x), 8.10 (Flink 2.x) and RocksDB
10.4 (rocksdict) write for a plain instance. `read` replays the edits into the live files per
column family; `write` makes the MANIFEST of a new instance from such files, with no optional
`NewFile4` field (the ones newer RocksDBs add are "safe to ignore": FRocksDB 6.20.3 reads the
result, and RocksDB >= 7.10 infers L0 epoch numbers from sequence numbers when absent).

Anything else (blob files, files in other db paths, user-defined timestamps, a tag this module
does not know and RocksDB would not ignore) raises `UnknownManifest`: the caller then moves the
instance's rows instead (docs/design/native-by-files.md).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from statectl.formats.java_types import write_varint
from statectl.formats.snappy_framed import masked_crc32c

_BLOCK = 32768
_HEADER = 7
_FULL, _FIRST, _MIDDLE, _LAST = 1, 2, 3, 4

# VersionEdit tags (db/version_edit.h)
_COMPARATOR, _LOG_NUMBER, _NEXT_FILE, _LAST_SEQUENCE, _COMPACT_CURSOR = 1, 2, 3, 4, 5
_DELETED_FILE, _PREV_LOG, _MIN_LOG_TO_KEEP, _NEW_FILE4 = 6, 9, 10, 103
_COLUMN_FAMILY, _COLUMN_FAMILY_ADD, _COLUMN_FAMILY_DROP, _MAX_COLUMN_FAMILY = 200, 201, 202, 203
_IN_ATOMIC_GROUP = 300
_NUMBERS_SKIPPED = (
    _LOG_NUMBER, _NEXT_FILE, _PREV_LOG, _MIN_LOG_TO_KEEP, _MAX_COLUMN_FAMILY, _IN_ATOMIC_GROUP
)  # fmt: skip
_SAFE_TO_IGNORE = 1 << 13  # a newer RocksDB's tag an older one may skip (length-prefixed)
# NewFile4's optional fields
_TERMINATE, _PATH_ID = 1, 65
_FIELD_MUST_NOT_IGNORE = 1 << 6


class UnknownManifest(Exception):
    """The MANIFEST holds something this module does not read (or is damaged)."""


@dataclass(frozen=True, slots=True)
class SstFile:
    """One live SST file as the MANIFEST describes it (keys are internal keys: user key, then
    8 bytes of sequence number and type)."""

    level: int
    number: int
    size: int
    smallest: bytes
    largest: bytes
    smallest_seqno: int
    largest_seqno: int


@dataclass(frozen=True, slots=True)
class Manifest:
    """An instance's live files per column family (by name), its last sequence number and
    comparator."""

    families: dict[str, list[SstFile]]
    last_sequence: int
    comparator: str


# --- varints ---------------------------------------------------------------------------------


def read_varint64(data: bytes, pos: int, error: type[Exception]) -> tuple[int, int]:
    """RocksDB's varint64 (`GetVarint64`, util/coding.h) at `pos`, and the position after;
    `error` raised where it runs past `data` or past 64 bits."""
    result = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise error("truncated varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    return read_varint64(data, pos, UnknownManifest)


def _slice(data: bytes, pos: int) -> tuple[bytes, int]:
    length, pos = _varint(data, pos)
    if pos + length > len(data):
        raise UnknownManifest("truncated length-prefixed field")
    return data[pos : pos + length], pos + length


def _put_slice(value: bytes) -> bytes:
    return write_varint(len(value)) + value


# --- log records -----------------------------------------------------------------------------


def records(data: bytes) -> Iterator[bytes]:
    """The records of a RocksDB log file, checksums verified (a damaged one raises)."""
    partial: bytes | None = None
    pos = 0
    while pos + _HEADER <= len(data):
        left = _BLOCK - pos % _BLOCK
        if left < _HEADER:  # a block's trailer: zeros
            pos += left
            continue
        crc = int.from_bytes(data[pos : pos + 4], "little")
        length = int.from_bytes(data[pos + 4 : pos + 6], "little")
        kind = data[pos + 6]
        if kind == 0 and length == 0 and crc == 0:  # preallocated zeros to the block's end
            pos += left
            continue
        payload = data[pos + _HEADER : pos + _HEADER + length]
        if len(payload) != length or masked_crc32c(bytes([kind]) + payload) != crc:
            raise UnknownManifest(f"damaged record at byte {pos}")
        pos += _HEADER + length
        if kind == _FULL and partial is None:
            yield payload
        elif kind == _FIRST and partial is None:
            partial = payload
        elif kind == _MIDDLE and partial is not None:
            partial += payload
        elif kind == _LAST and partial is not None:
            yield partial + payload
            partial = None
        else:  # recyclable records (types 5–8) or fragments out of order
            raise UnknownManifest(f"record type {kind} at byte {pos}")
    if partial is not None:
        raise UnknownManifest("the last record is cut short")


def encode_records(payloads: Sequence[bytes]) -> bytes:
    """A log file holding `payloads`, fragmented across 32 KiB blocks as `log::Writer` does."""
    out = bytearray()
    for payload in payloads:
        first = True
        while True:
            left = _BLOCK - len(out) % _BLOCK
            if left < _HEADER:
                out += b"\x00" * left
                left = _BLOCK
            chunk, payload = payload[: left - _HEADER], payload[left - _HEADER :]
            if first:
                kind = _FULL if not payload else _FIRST
            else:
                kind = _LAST if not payload else _MIDDLE
            crc = masked_crc32c(bytes([kind]) + chunk)
            out += crc.to_bytes(4, "little") + len(chunk).to_bytes(2, "little")
            out.append(kind)
            out += chunk
            first = False
            if not payload:
                break
    return bytes(out)


# --- reading ---------------------------------------------------------------------------------


@dataclass
class _Edit:
    family: int = 0
    added_name: str | None = None
    dropped: bool = False
    added: list[SstFile] = field(default_factory=list)
    deleted: list[int] = field(default_factory=list)
    last_sequence: int | None = None
    comparator: str | None = None


def _new_file(record: bytes, pos: int) -> tuple[SstFile, int]:
    level, pos = _varint(record, pos)
    number, pos = _varint(record, pos)
    size, pos = _varint(record, pos)
    smallest, pos = _slice(record, pos)
    largest, pos = _slice(record, pos)
    smallest_seqno, pos = _varint(record, pos)
    largest_seqno, pos = _varint(record, pos)
    while True:
        custom, pos = _varint(record, pos)
        if custom == _TERMINATE:
            break
        _, pos = _slice(record, pos)
        if custom == _PATH_ID:
            raise UnknownManifest("an SST file in another db path")
        if custom & _FIELD_MUST_NOT_IGNORE:
            raise UnknownManifest(f"NewFile4 custom {custom}")
    if number >> 62:  # the path id packed into the number (older encodings)
        raise UnknownManifest("an SST file in another db path")
    return SstFile(level, number, size, smallest, largest, smallest_seqno, largest_seqno), pos


def _decode_edit(record: bytes) -> _Edit:
    edit = _Edit()
    pos = 0
    while pos < len(record):
        tag, pos = _varint(record, pos)
        if tag == _COMPARATOR:
            name, pos = _slice(record, pos)
            edit.comparator = name.decode("utf-8", errors="replace")
        elif tag in _NUMBERS_SKIPPED:
            _, pos = _varint(record, pos)
        elif tag == _LAST_SEQUENCE:
            edit.last_sequence, pos = _varint(record, pos)
        elif tag == _COMPACT_CURSOR:  # level, internal key: where compaction resumes
            _, pos = _varint(record, pos)
            _, pos = _slice(record, pos)
        elif tag == _DELETED_FILE:
            _, pos = _varint(record, pos)  # level
            number, pos = _varint(record, pos)
            edit.deleted.append(number)
        elif tag == _NEW_FILE4:
            added, pos = _new_file(record, pos)
            edit.added.append(added)
        elif tag == _COLUMN_FAMILY:
            edit.family, pos = _varint(record, pos)
        elif tag == _COLUMN_FAMILY_ADD:
            name, pos = _slice(record, pos)
            edit.added_name = name.decode("utf-8", errors="replace")
        elif tag == _COLUMN_FAMILY_DROP:
            edit.dropped = True
        elif tag & _SAFE_TO_IGNORE:
            _, pos = _slice(record, pos)
        else:  # blob files (tags 400, 401), timestamps, an older NewFile encoding, ...
            raise UnknownManifest(f"VersionEdit tag {tag}")
    return edit


def read(data: bytes) -> Manifest:
    """Replay a MANIFEST's edits: the live files of each column family."""
    names: dict[int, str] = {0: "default"}
    files: dict[int, dict[int, SstFile]] = {0: {}}
    last_sequence, comparator = 0, ""
    for record in records(data):
        edit = _decode_edit(record)
        if edit.added_name is not None:
            names[edit.family] = edit.added_name
            files[edit.family] = {}
        if edit.family not in files:
            raise UnknownManifest(f"an edit of column family {edit.family}, never added")
        if edit.dropped:
            del names[edit.family], files[edit.family]
            continue
        for number in edit.deleted:
            files[edit.family].pop(number, None)
        for added in edit.added:
            files[edit.family][added.number] = added
        if edit.last_sequence is not None:
            last_sequence = max(last_sequence, edit.last_sequence)
        comparator = edit.comparator or comparator
    families = {names[cf]: list(live.values()) for cf, live in files.items()}
    return Manifest(families, last_sequence, comparator)


# --- writing ---------------------------------------------------------------------------------


def encode(
    families: Sequence[tuple[str, Sequence[SstFile]]],
    last_sequence: int,
    comparator: str,
    next_file_number: int,
) -> bytes:
    """A MANIFEST of a new instance holding `families` (the first "default"), each file at its
    level under its number; no WAL (log number 0)."""
    if not families or families[0][0] != "default":
        raise ValueError("the first column family must be 'default'")
    head = (
        write_varint(_COMPARATOR) + _put_slice(comparator.encode())
        + write_varint(_LOG_NUMBER) + write_varint(0)
        + write_varint(_NEXT_FILE) + write_varint(next_file_number)
        + write_varint(_LAST_SEQUENCE) + write_varint(last_sequence)
        + write_varint(_MAX_COLUMN_FAMILY) + write_varint(len(families) - 1)
    )  # fmt: skip
    edits = [head]
    for cf, (name, files) in enumerate(families):
        family = write_varint(_COLUMN_FAMILY) + write_varint(cf) if cf else b""
        if cf:  # RocksDB adds a column family in an edit of its own
            edits.append(
                family + write_varint(_COLUMN_FAMILY_ADD) + _put_slice(name.encode())
                + write_varint(_COMPARATOR) + _put_slice(comparator.encode())
            )  # fmt: skip
        edit = family + write_varint(_LOG_NUMBER) + write_varint(0)
        for sst in files:
            edit += (
                write_varint(_NEW_FILE4) + write_varint(sst.level) + write_varint(sst.number)
                + write_varint(sst.size) + _put_slice(sst.smallest) + _put_slice(sst.largest)
                + write_varint(sst.smallest_seqno) + write_varint(sst.largest_seqno)
                + write_varint(_TERMINATE)
            )  # fmt: skip
        edits.append(edit)
    return encode_records(edits)
