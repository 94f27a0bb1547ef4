"""Operator-state files: where the header ends and where each list element or map lies.

Mirrors `DefaultOperatorStateBackendSnapshotStrategy` / `OperatorStateRestoreOperation`
(flink-savepoint-format.md §3.3–§3.5). Element ends are not stored: an element ends at the next
larger offset of any state in the handle, or at the end of the stream. With compression each
state's region is a Snappy-framed stream whose identifier precedes the first element.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from statectl.errors import FormatError
from statectl.formats.handles import OperatorStateOffsets
from statectl.formats.java_io import DataReader
from statectl.formats.snappy_framed import STREAM_IDENTIFIER


@dataclass(frozen=True, slots=True)
class OperatorFileLayout:
    header_length: int
    compressed: bool
    elements: dict[str, list[tuple[int, int]]]  # per state: [start, end) of each element


def is_compressed(header_start: bytes) -> bool:
    """Header version ≥ 6 carries a compression flag right after the version."""
    r = DataReader(header_start)
    return r.read_i32() >= 6 and r.read_bool()


def file_layout(
    states: Sequence[OperatorStateOffsets], file_size: int, file_start: bytes
) -> OperatorFileLayout:
    """Layout of one operator-state file from its handle; `file_start` is its first bytes."""
    compressed = is_compressed(file_start)
    all_offsets = sorted({o for s in states for o in s.offsets})
    if any(not 0 < o < file_size for o in all_offsets):
        bad = next(o for o in all_offsets if not 0 < o < file_size)
        raise FormatError(f"operator state offset {bad} is outside the file ({file_size} bytes)")
    header_length = all_offsets[0] if all_offsets else file_size
    marker = header_length - len(STREAM_IDENTIFIER)
    if compressed and file_start[marker:header_length] == STREAM_IDENTIFIER:
        header_length = marker
    ends = dict(zip(all_offsets, [*all_offsets[1:], file_size], strict=True))
    elements = {s.name: [(o, ends[o]) for o in s.offsets] for s in states}
    return OperatorFileLayout(header_length, compressed, elements)
