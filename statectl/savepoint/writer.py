"""Writing a new savepoint without ever leaving a half-written one behind.

State files go to a staging folder beside the destination; `_metadata` is written last, and
the folder is then published under its final name (a rename on local disks; on object
stores the state files move first and `_metadata` last). A folder without `_metadata` is not
a savepoint, so an interrupted run leaves nothing Flink would restore.
"""

from __future__ import annotations

import contextlib
import os
import re
import uuid
from dataclasses import dataclass
from typing import Any

from statectl.errors import SavepointError
from statectl.formats.metadata import CheckpointMetadata, write_metadata
from statectl.savepoint.model import METADATA_FILE
from statectl.savepoint.storage import Location, locate

STAGING_MARK = ".statectl-staging-"


@dataclass(frozen=True)
class StagedSavepoint:
    """A destination and the staging folder that becomes it."""

    destination: Location
    staging: Location
    storage_options: dict[str, Any] | None
    overwrite: bool = False

    @property
    def staging_url(self) -> str:
        return self.staging.url


def stage(
    destination_url: str, overwrite: bool, storage_options: dict[str, Any] | None = None
) -> StagedSavepoint:
    """Refuse an existing destination unless `overwrite`; create an empty staging folder."""
    destination = locate(destination_url, storage_options)
    if destination.exists() and not overwrite:
        raise SavepointError("destination exists; pass --overwrite to replace it", destination.url)
    staging = destination.parent.child(f"{STAGING_MARK}{destination.name}-{uuid.uuid4().hex[:12]}")
    staging.fs.makedirs(staging.path, exist_ok=True)
    return StagedSavepoint(destination, staging, storage_options, overwrite)


def publish(staged: StagedSavepoint, metadata: CheckpointMetadata) -> None:
    """Write `_metadata` into the staging folder, then move the folder into place."""
    data = write_metadata(metadata)
    staged.staging.fs.pipe_file(staged.staging.child(METADATA_FILE).path, data)
    destination = staged.destination
    if destination.exists():
        if not staged.overwrite:  # another run published there while this one was writing
            raise SavepointError(
                "destination appeared while writing; pass --overwrite to replace it",
                destination.url,
            )
        _remove_existing(destination)
    if staged.staging.is_local:
        os.replace(staged.staging.path, destination.path)
        return
    _move_metadata_last(staged)


def _remove_existing(destination: Location) -> None:
    """Drop the old `_metadata` first, so an interrupted replace is never half a savepoint."""
    metadata = destination.child(METADATA_FILE)
    if metadata.exists():
        destination.fs.rm(metadata.path)
    destination.fs.rm(destination.path, recursive=True)


def _move_metadata_last(staged: StagedSavepoint) -> None:
    fs = staged.staging.fs
    destination = staged.destination
    fs.makedirs(destination.path, exist_ok=True)
    for path in fs.ls(staged.staging.path, detail=False):
        name = path.rstrip("/").rsplit("/", 1)[-1]
        if name != METADATA_FILE:
            fs.mv(path, destination.child(name).path, recursive=True)
    fs.mv(staged.staging.child(METADATA_FILE).path, destination.child(METADATA_FILE).path)
    # Object stores have no empty folders: the staging "folder" went with its last file.
    with contextlib.suppress(FileNotFoundError):
        fs.rm(staged.staging.path, recursive=True)


def stale_staging(destination_url: str, storage_options: dict[str, Any] | None = None) -> list[str]:
    """Staging folders beside the destination that were never published (killed runs).

    They are reported, never deleted: one may belong to a run still writing elsewhere.
    """
    destination = locate(destination_url, storage_options)
    parent = destination.parent
    pattern = re.compile(re.escape(f"{STAGING_MARK}{destination.name}-") + "[0-9a-f]{12}")
    try:
        paths = parent.fs.ls(parent.path, detail=False)
    except (FileNotFoundError, NotADirectoryError):
        return []
    names = (path.rstrip("/").rsplit("/", 1)[-1] for path in paths)
    return sorted(parent.child(name).url for name in names if pattern.fullmatch(name))


def discard(staged: StagedSavepoint) -> None:
    """Remove the staging folder after a failure (best effort: the error that got us here wins)."""
    try:
        if staged.staging.exists():
            staged.staging.fs.rm(staged.staging.path, recursive=True)
    except OSError:
        pass


def ensure_not_inside(
    source: Location, destination_url: str, storage_options: dict[str, Any] | None
) -> None:
    """The input is never modified: refuse a destination that is the source or inside it."""
    destination = locate(destination_url, storage_options)
    src = source.path.rstrip("/") + "/"
    dst = destination.path.rstrip("/") + "/"
    if type(source.fs) is type(destination.fs) and (dst.startswith(src) or src.startswith(dst)):
        raise SavepointError(
            "destination must not be the source savepoint, inside it or around it", destination.url
        )
