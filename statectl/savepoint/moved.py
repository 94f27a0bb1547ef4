"""A retained checkpoint read from a copy of its job folder, away from where Flink wrote it.

Flink names a checkpoint's files by absolute path (§2.9.1 codes 2 and 15, §2.10): files of
`<job folder>/chk-N/`, `<job folder>/shared/` and `<job folder>/taskowned/`. A copy that keeps
this layout (`<copy>/chk-N/_metadata`, `shared/` and `taskowned/` beside it) is read by mapping
the original job folder, found in the handles, to the copy's: the folder that holds `chk-N`.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from statectl.errors import StatectlError
from statectl.formats.handles import FileHandle, SegmentFileHandle
from statectl.formats.metadata import CheckpointMetadata
from statectl.savepoint.storage import Location, locate, to_fsspec_url

SHARED_FOLDERS = ("shared", "taskowned")  # beside chk-N in the job folder


@dataclass(frozen=True)
class MovedCheckpoint:
    """Where a moved checkpoint's absolute handles are read: below `original` (the job folder
    they name, as Flink wrote it), each of `folders` stands for the same folder in `copy` (the
    folder holding the opened `chk-N`). `missing`: the folders the handles use that the copy
    lacks; while any is, nothing is mapped."""

    original: str
    copy: Location
    folders: tuple[str, ...]
    missing: tuple[str, ...] = ()

    @property
    def mapped(self) -> bool:
        """Whether handles into the original job folder are read from the copy."""
        return not self.missing

    def resolve(self, path: str) -> Location | None:
        """The copy's file for an absolute handle's path into one of the original's folders."""
        rest = _below(path, self.original) if self.mapped else None
        if rest is None or rest.split("/", 1)[0] not in self.folders:
            return None
        return self.copy.child(rest)

    @property
    def note(self) -> str:
        return f"checkpoint moved: reading {self.original} from {self.copy.url}"

    def advice(self, path: str) -> str | None:
        """What to do about a handle into the original job folder while folders are missing."""
        if self.mapped or _below(path, self.original) is None:
            return None
        folders = " and ".join(f"{name}/" for name in self.missing)
        them = "them" if len(self.missing) > 1 else "it"
        return (
            f"the checkpoint was moved from {self.original} without its {folders}: copy {them}"
            f" into {self.copy.url}, or pass --allow-external-files to read it where it was"
        )


def find_move(
    directory: Location, metadata: CheckpointMetadata, storage_options: dict[str, Any] | None
) -> MovedCheckpoint | None:
    """How the checkpoint in `directory` (its `chk-N`) moved from where its absolute handles
    point, or None: none points into a job folder's `chk-N`, `shared` or `taskowned`, or the
    checkpoint is where they point."""
    paths = list(absolute_paths(metadata))
    copy = directory.parent
    original = _original_job_folder(paths, directory.name, copy)
    if original is None or _same_folder(original, copy, storage_options):
        return None
    folders = (directory.name, *SHARED_FOLDERS)
    used = {rest.split("/", 1)[0] for rest in (_below(p, original) for p in paths) if rest}
    missing = tuple(
        name for name in SHARED_FOLDERS if name in used and not copy.child(name).exists()
    )
    return MovedCheckpoint(original, copy, folders, missing)


def absolute_paths(value: object) -> Iterator[str]:
    """The path of every absolute stream handle (codes 2 and 15) in `value` (metadata, an
    operator, a handle), however deeply nested."""
    if isinstance(value, FileHandle):
        yield value.path
    elif isinstance(value, SegmentFileHandle):
        yield value.physical_path
    elif isinstance(value, tuple):
        for item in value:
            yield from absolute_paths(item)
    elif fields := getattr(type(value), "__dataclass_fields__", None):
        for name in fields:
            yield from absolute_paths(getattr(value, name))


def _original_job_folder(paths: list[str], checkpoint_name: str, copy: Location) -> str | None:
    """The job folder the handles name: the folder holding a `checkpoint_name` folder with
    files in it (the checkpoint's own files), else the one holding `shared`/`taskowned`
    folders with files (Flink writes most of a checkpoint's own files as relative handles).
    Handles into two job folders (an incremental checkpoint of a job restored in CLAIM mode
    shares the files of the job it was restored from): the one whose files the copy has."""
    for names in ((checkpoint_name,), SHARED_FOLDERS):
        found: dict[str, str] = {}  # job folder → the rest of a path below it
        for path in paths:
            if folder := _job_folder(path, names):
                found.setdefault(folder, path[len(folder) + 1 :])
        if len(found) > 1:
            found = {folder: rest for folder, rest in found.items() if copy.child(rest).exists()}
            return next(iter(found)) if len(found) == 1 else None
        if found:
            return next(iter(found))
    return None


def _job_folder(path: str, names: tuple[str, ...]) -> str | None:
    """The folder holding `path`'s nearest ancestor folder named one of `names`."""
    parts = path.split("/")
    for index in range(len(parts) - 2, 0, -1):
        if parts[index] in names:
            return "/".join(parts[:index])
    return None


def _below(path: str, folder: str) -> str | None:
    """`path` relative to `folder` when below it (`file:/x` and `file:///x` alike), else None."""
    url, prefix = to_fsspec_url(path), to_fsspec_url(folder).rstrip("/") + "/"
    return url[len(prefix) :] if url.startswith(prefix) else None


def _same_folder(url: str, folder: Location, storage_options: dict[str, Any] | None) -> bool:
    try:
        location = locate(url, storage_options)
    except StatectlError:  # a filesystem not installed here: not where the copy is
        return False
    if type(location.fs) is not type(folder.fs):
        return False
    if location.is_local:
        return os.path.realpath(location.path) == os.path.realpath(folder.path)
    return posixpath.normpath(location.path) == posixpath.normpath(folder.path)
