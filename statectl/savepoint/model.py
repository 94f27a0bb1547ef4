"""A savepoint on some filesystem: its `_metadata`, its operators, and the bytes behind handles.

The byte-level records (operators, subtasks, handles) are the dataclasses of
`statectl.formats.metadata` / `statectl.formats.handles`; this module binds them to a
location so handles resolve to readable streams (flink-savepoint-format.md §2.10).
"""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import mmh3

from statectl.errors import SavepointError, StatectlError, UnsupportedError
from statectl.formats.handles import (
    ByteStreamHandle,
    EmptySegmentFileHandle,
    FileHandle,
    KeyGroupsHandle,
    RelativeFileHandle,
    SegmentFileHandle,
    StreamHandle,
)
from statectl.formats.metadata import CheckpointMetadata, OperatorState, SubtaskState
from statectl.savepoint.moved import MovedCheckpoint
from statectl.savepoint.storage import Location, locate

METADATA_FILE = "_metadata"
_HEX_ID = re.compile(r"^[0-9a-fA-F]{32}$")


def operator_id_for_uid(uid: str) -> bytes:
    """Flink's operator id of a uid: murmur3_128 (seed 0) over its UTF-8 bytes (§6.6)."""
    return mmh3.hash_bytes(uid.encode("utf-8"), 0, x64arch=True)


@dataclass(frozen=True)
class StateStream:
    """The bytes behind one stream handle: inline in `_metadata`, or a range of a file."""

    description: str
    size: int
    inline: bytes | None = None
    location: Location | None = None
    start: int = 0  # where the stream begins inside `location` (file-merging segments)

    def read(self, start: int = 0, end: int | None = None) -> bytes:
        data = self._read(start, end, mapped=False)
        assert isinstance(data, bytes)
        return data

    def read_view(self, start: int = 0, end: int | None = None) -> bytes | memoryview:
        """The bytes [start, end), of a local file a view of it mapped into memory
        (`Location.read_view`): for readers that copy what they keep."""
        return self._read(start, end, mapped=True)

    def _read(self, start: int, end: int | None, mapped: bool) -> bytes | memoryview:
        end = self.size if end is None else end
        if not 0 <= start <= end <= self.size:
            raise SavepointError(
                f"range [{start}, {end}) is outside {self.size} bytes", self.description
            )
        if self.inline is not None:
            return self.inline[start:end]
        if self.location is None:
            raise SavepointError("the stream has neither inline bytes nor a file", self.description)
        first, last = self.start + start, self.start + end
        read = self.location.read_view if mapped else self.location.read_bytes
        data = read(first, last)
        if len(data) != end - start:
            raise SavepointError(
                f"file is shorter than its handle says ({self.size} bytes)", self.description
            )
        return data


@dataclass(frozen=True)
class Savepoint:
    """A parsed savepoint (or retained checkpoint) and where it lives."""

    directory: Location
    metadata: CheckpointMetadata
    storage_options: dict[str, Any] | None = None
    allow_external_files: bool = False  # absolute handles anywhere (`absolute`)
    moved: MovedCheckpoint | None = None  # a checkpoint read from a copy (`moved.find_move`)

    @property
    def metadata_location(self) -> Location:
        return self.directory.child(METADATA_FILE)

    @property
    def operators(self) -> tuple[OperatorState, ...]:
        return self.metadata.operators

    def find_operator(self, name: str) -> OperatorState:
        """The operator named by uid, by 32-hex operator id, or by its name in the metadata
        (Flink 2.x writes it; planner-generated SQL operators have a name but no uid); an
        unknown name lists the known operators, an ambiguous name its candidates."""
        wanted = bytes.fromhex(name) if _HEX_ID.match(name) else operator_id_for_uid(name)
        for op in self.operators:
            if op.operator_id == wanted or (op.uid is not None and op.uid == name):
                return op
        named = [op for op in self.operators if op.name == name]
        if len(named) == 1:
            return named[0]
        if named:
            candidates = ", ".join(describe_operator(op) for op in named)
            raise StatectlError(
                f"operator name {name!r} is ambiguous; candidates: {candidates}",
                self.directory.url,
            )
        known = ", ".join(describe_operator(op) for op in self.operators)
        raise StatectlError(
            f"unknown operator {name!r}; known operators: {known}", self.directory.url
        )

    def stream(self, handle: StreamHandle) -> StateStream:
        """Resolve a stream handle to its bytes (§2.9.1, §2.10)."""
        match handle:
            case ByteStreamHandle(_, data):
                return StateStream(f"{self.metadata_location.url} (inline state)", len(data), data)
            case RelativeFileHandle(path, size):
                location = self.contained(path)
                return StateStream(location.url, size, None, location)
            case FileHandle(path, size):
                location = self.absolute(path)
                return StateStream(location.url, size, None, location)
            case SegmentFileHandle(start, size, _, physical_path, _):
                location = self.absolute(physical_path)
                return StateStream(location.url, size, None, location, start)
            case EmptySegmentFileHandle():
                return StateStream("empty file-merging segment", 0, b"")
            case KeyGroupsHandle(delegate=delegate) if delegate is not None:
                return self.stream(delegate)
        raise UnsupportedError(
            f"cannot read state handle {type(handle).__name__}", self.metadata_location.url
        )

    def contained(self, relative: str) -> Location:
        """The file a relative handle names, inside the folder that holds `_metadata`.

        Flink's `RelativeFileStateHandle` names a file of the savepoint's own folder (§2.10);
        a name that leaves it (absolute, `..` past the folder, also with `\\` read as a
        separator) is refused, so a savepoint cannot make statectl read, copy or export files
        that are not its own. Absolute handles (code 2, segments) are not relative handles.
        """
        if "\x00" in relative:  # no filesystem takes it; named as the OS error named it
            raise SavepointError(
                f"not a valid file name (state handle {relative!r} has a NUL byte)",
                self.directory.child(relative).url,
            )
        if _leaves_folder(relative) or _leaves_folder(relative.replace("\\", "/")):
            raise SavepointError(
                f"state handle {relative!r} points outside the savepoint directory",
                self.metadata_location.url,
            )
        name = posixpath.normpath(relative)
        if name == ".":
            raise SavepointError(
                f"state handle {relative!r} names no file in the savepoint directory",
                self.metadata_location.url,
            )
        location = self.directory.child(name)
        if not _within(location, self.directory):
            raise SavepointError(
                f"state handle {relative!r} points outside the savepoint directory"
                " (through a symbolic link)",
                self.metadata_location.url,
            )
        return location

    def absolute(self, path: str) -> Location:
        """The file an absolute handle (code 2, file-merging segments) names.

        Flink writes them only into checkpoints, for files of the job's checkpoint folder:
        `<job id>/chk-N/…` (beside `_metadata`), `<job id>/shared/…` and `<job id>/taskowned/…`;
        of a checkpoint copied elsewhere in this layout, the copy's (`moved`).
        A handle anywhere else is refused unless `allow_external_files`: a `_metadata` from
        elsewhere must not make statectl read, copy or export any file it names.
        """
        mapped = self.moved.resolve(path) if self.moved else None
        location = mapped or locate(path, self.storage_options)
        if self.allow_external_files or any(
            _within(location, folder) for folder in self.checkpoint_folders()
        ):
            return location
        moved = self.moved.advice(path) if self.moved else None
        advice = moved or "pass --allow-external-files to read it"
        raise SavepointError(
            f"state handle {path!r} points outside the checkpoint's folders"
            f" ({', '.join(folder.name for folder in self.checkpoint_folders())}); {advice}",
            self.metadata_location.url,
        )

    def checkpoint_folders(self) -> tuple[Location, ...]:
        """Where a checkpoint's absolute handles point: its own folder and the job's shared
        and task-owned folders beside it."""
        job = self.directory.parent
        return self.directory, job.child("shared"), job.child("taskowned")

    def subtasks(self, op: OperatorState) -> Iterator[SubtaskState]:
        """Subtasks with state (finished subtasks carry none)."""
        for subtask in op.subtasks or ():
            if not subtask.finished:
                yield subtask


def _leaves_folder(relative: str) -> bool:
    """Absolute, or climbing above its folder once normalised (`a/../../x`, `..`)."""
    name = posixpath.normpath(relative)
    return name.startswith("/") or name == ".." or name.startswith("../")


def _within(location: Location, folder: Location) -> bool:
    """`location` lies below `folder` on the same filesystem (local paths: symbolic links
    resolved, so a link inside the folder cannot lead out of it)."""
    if type(location.fs) is not type(folder.fs):
        return False
    inner, outer = location.path, folder.path
    if location.is_local:
        inner, outer = os.path.realpath(inner), os.path.realpath(outer)
    inner, outer = posixpath.normpath(inner), posixpath.normpath(outer)
    return inner.startswith(outer.rstrip("/") + "/")


def has_state(op: OperatorState) -> bool:
    """Whether a subtask of `op` holds a state handle (finished subtasks hold none)."""
    return any(
        s.managed_keyed_state
        or s.managed_operator_state
        or s.raw_keyed_state
        or s.raw_operator_state
        for s in op.subtasks or ()
    )


def describe_operator(op: OperatorState) -> str:
    return f"{op.uid} ({op.operator_id_hex})" if op.uid else op.operator_id_hex
