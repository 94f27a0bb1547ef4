"""Writing a new savepoint (or export folder) without ever leaving a half-written one behind.

State files go to a staging folder beside the destination; `_metadata` is written last, and
the folder is then published under its final name. A folder without `_metadata` is not a
savepoint, so an interrupted run leaves nothing Flink would restore.

`--overwrite` replaces only what statectl itself writes there (`OutputKind`: a savepoint
folder, i.e. one with `_metadata`, or a folder of statectl's Parquet part files), and the old
output stays until the new one is complete: on local disks the old folder is renamed aside,
the staging folder renamed into place, and only then the old one deleted; on object stores
the new state files move in first, then `_metadata` replaces the old one (one PUT: there is
always a `_metadata`), then the old files the new savepoint does not have are removed.

Each staging folder holds an owner marker (host, pid, process start, boot id) until it is
published; after a successful publish, staging folders of the same destination whose owner
is a dead process of this host (or, unmarked, older than a day) are removed. Others may
belong to a run still writing, perhaps elsewhere: they are only reported (`stale_staging`).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import posixpath
import re
import shutil
import socket
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from statectl.errors import SavepointError
from statectl.formats.metadata import CheckpointMetadata, write_metadata
from statectl.savepoint.model import METADATA_FILE
from statectl.savepoint.storage import Location, locate

STAGING_MARK = ".statectl-staging-"
REPLACED_MARK = ".statectl-replaced-"  # the old output, renamed aside while the new moves in
OWNER_FILE = ".statectl-owner"
UNMARKED_STALE_SECONDS = 24 * 3600  # staging folders of statectl versions without an owner


@dataclass(frozen=True)
class OutputKind:
    """What statectl writes at a destination, and how it recognises its own earlier output.

    `refusal` returns why an existing destination must not be replaced, or None if it may.
    """

    refusal: Callable[[Location], str | None]
    exists_message: str


def _savepoint_refusal(destination: Location) -> str | None:
    if not is_folder(destination):
        return "is a file, not a savepoint folder"
    names = _names(destination)
    if names and METADATA_FILE not in names:
        return "is not a savepoint (no _metadata)"
    return None


SAVEPOINT = OutputKind(_savepoint_refusal, "destination exists; pass --overwrite to replace it")


@dataclass(frozen=True)
class StagedSavepoint:
    """A destination and the staging folder that becomes it."""

    destination: Location
    staging: Location
    storage_options: dict[str, Any] | None
    overwrite: bool = False
    kind: OutputKind = SAVEPOINT

    @property
    def staging_url(self) -> str:
        return self.staging.url


def stage(
    destination_url: str,
    overwrite: bool,
    storage_options: dict[str, Any] | None = None,
    kind: OutputKind = SAVEPOINT,
) -> StagedSavepoint:
    """Refuse a destination statectl may not replace; create an empty staging folder."""
    destination = locate(destination_url.rstrip("/") or destination_url, storage_options)
    check_destination(destination, overwrite, kind)
    staging = destination.parent.child(f"{STAGING_MARK}{destination.name}-{uuid.uuid4().hex[:12]}")
    staged = StagedSavepoint(destination, staging, storage_options, overwrite, kind)
    try:
        staging.fs.makedirs(staging.path, exist_ok=True)
        staging.fs.pipe_file(staging.child(OWNER_FILE).path, Owner.current().to_bytes())
    except OSError as exc:
        discard(staged)
        raise unwritable(exc, destination) from None
    return staged


def check_destination(destination: Location, overwrite: bool, kind: OutputKind) -> None:
    """Nothing there, or (with `overwrite`) output of this kind that statectl may replace."""
    try:
        if not destination.exists():
            return
        refusal = kind.refusal(destination)
    except FileNotFoundError:  # gone meanwhile (another run moving its old one aside)
        return
    except OSError as exc:
        raise unwritable(exc, destination) from None
    if refusal is not None:
        raise SavepointError(f"{refusal}; refusing to replace it", destination.url)
    if not overwrite:
        raise SavepointError(kind.exists_message, destination.url)


def unwritable(exc: OSError, destination: Location) -> SavepointError:
    """One line naming the destination, not the hidden staging folder the OS named."""
    reasons = {
        errno.EACCES: "permission denied",
        errno.EPERM: "permission denied",
        errno.EROFS: "read-only file system",
        errno.ENOSPC: "no space left on device",
        errno.EDQUOT: "disk quota exceeded",
        errno.ENOTDIR: "a parent is not a folder",
    }
    code = exc.errno
    reason = reasons.get(code) if code is not None else None
    if reason is None:
        reason = os.strerror(code).lower() if code is not None else str(exc)
    return SavepointError(f"cannot write here: {reason}", destination.url)


def publish(staged: StagedSavepoint, metadata: CheckpointMetadata) -> None:
    """Write `_metadata` into the staging folder, then move the folder into place."""
    data = write_metadata(metadata)
    try:
        staged.staging.fs.pipe_file(staged.staging.child(METADATA_FILE).path, data)
    except OSError as exc:
        raise unwritable(exc, staged.destination) from None
    publish_folder(staged)


def publish_folder(staged: StagedSavepoint) -> None:
    """Move the complete staging folder into place, replacing what `overwrite` allowed, then
    remove staging folders that killed runs left for this destination."""
    destination = staged.destination
    try:
        with contextlib.suppress(FileNotFoundError):
            staged.staging.fs.rm(staged.staging.child(OWNER_FILE).path)
        # Checked again: another run may have published there while this one was writing.
        if destination.exists():
            if not staged.overwrite:
                raise SavepointError(
                    "destination appeared while writing; pass --overwrite to replace it",
                    destination.url,
                )
            check_destination(destination, True, staged.kind)
        if staged.staging.is_local:
            _swap_local(staged)
        else:
            _move_into_place(staged)
    except OSError as exc:
        raise unwritable(exc, destination) from None
    remove_abandoned(staged)


def _swap_local(staged: StagedSavepoint) -> None:
    """Old output aside, new into place, old deleted: a failure in between puts the old back."""
    target, staging = staged.destination.path, staged.staging.path
    aside = os.path.join(
        os.path.dirname(target), f"{REPLACED_MARK}{staged.destination.name}-{uuid.uuid4().hex[:12]}"
    )
    try:
        os.rename(target, aside)
    except FileNotFoundError:
        aside = ""
    try:
        os.rename(staging, target)
    except OSError as exc:
        if aside and not _put_back(aside, target):
            # Another run published at the same moment: its complete output is in place.
            shutil.rmtree(aside, ignore_errors=True)
        if exc.errno in (errno.ENOTEMPTY, errno.EEXIST, errno.EISDIR, errno.ENOTDIR):
            raise SavepointError(
                "another run published here while this one was writing; its output was kept",
                staged.destination.url,
            ) from None
        raise
    if aside:
        shutil.rmtree(aside, ignore_errors=True)


def _put_back(aside: str, target: str) -> bool:
    try:
        os.rename(aside, target)
    except OSError:
        return False
    return True


def _move_into_place(staged: StagedSavepoint) -> None:
    """Object stores have no folder rename: files move one by one (files only: a "folder" is a
    key prefix, not a key that can be copied). New names first (the old output stays whole
    meanwhile), then same-named files, then `_metadata` over the old one (there is always one),
    then the old files the new output does not have. A failed move takes back the new names
    moved so far, so a destination that was empty is empty again."""
    fs = staged.staging.fs
    destination = staged.destination
    existed = destination.exists()
    old = _files(destination) if existed else set()
    new = _files(staged.staging)
    order = sorted(new - {METADATA_FILE}, key=lambda n: (n in old, n))
    order += [METADATA_FILE] if METADATA_FILE in new else []
    moved: list[str] = []
    try:
        for folder in sorted({posixpath.dirname(name) for name in new}):  # stores with folders
            fs.makedirs(destination.child(folder).path, exist_ok=True)
        for name in order:
            fs.mv(staged.staging.child(name).path, destination.child(name).path)
            moved.append(name)
    except BaseException:
        _take_back(destination, [name for name in moved if name not in old], existed)
        raise
    for name in sorted(old - new):
        with contextlib.suppress(FileNotFoundError):
            fs.rm(destination.child(name).path)
    # Object stores have no empty folders: the staging "folder" went with its last file.
    with contextlib.suppress(FileNotFoundError):
        fs.rm(staged.staging.path, recursive=True)


def _files(folder: Location) -> set[str]:
    """The paths of the files under `folder`, relative to it."""
    root = folder.path.rstrip("/") + "/"
    return {path[len(root) :] for path in folder.fs.find(folder.path) if path.startswith(root)}


def _take_back(destination: Location, moved: list[str], existed: bool) -> None:
    """Remove what a failed publish moved in, and the destination folder if it is new (best
    effort: the error that got us here wins); same-named files that replaced old ones stay
    (object stores keep no older version)."""
    fs = destination.fs
    with contextlib.suppress(OSError):
        for name in moved:
            with contextlib.suppress(FileNotFoundError):
                fs.rm(destination.child(name).path)
        if not existed and destination.exists():  # stores that keep folders (memory://)
            fs.rm(destination.path, recursive=True)


def is_folder(location: Location) -> bool:
    """A folder (FileNotFoundError if nothing is there: `isdir` would say a file)."""
    return bool(location.fs.info(location.path)["type"] == "directory")


def _names(folder: Location) -> list[str]:
    return [p.rstrip("/").rsplit("/", 1)[-1] for p in folder.fs.ls(folder.path, detail=False)]


# --- staging folders of other runs -------------------------------------------------------


@dataclass(frozen=True)
class Owner:
    """The process writing a staging folder: enough to tell, on its host, that it is gone."""

    host: str
    pid: int
    started: str | None  # the process's start time (Linux /proc), so a reused pid is not it
    boot: str | None  # the host's boot id: after a reboot no earlier run is alive

    @classmethod
    def current(cls) -> Owner:
        pid = os.getpid()
        return cls(socket.gethostname(), pid, _process_start(pid), _boot_id())

    def to_bytes(self) -> bytes:
        fields = {"host": self.host, "pid": self.pid, "started": self.started, "boot": self.boot}
        return json.dumps(fields).encode()

    @classmethod
    def parse(cls, data: bytes) -> Owner | None:
        try:
            fields = json.loads(data)
            return cls(str(fields["host"]), int(fields["pid"]), fields["started"], fields["boot"])
        except (ValueError, KeyError, TypeError):
            return None

    def is_gone(self) -> bool:
        """True only when certain: a process of another host may still be writing."""
        if self.host != socket.gethostname():
            return False
        if self.boot is not None and _boot_id() not in (None, self.boot):
            return True
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:  # alive, another user's
            pass
        started = _process_start(self.pid)
        return self.started is not None and started is not None and started != self.started


def _process_start(pid: int) -> str | None:
    """Field 22 of /proc/PID/stat (clock ticks after boot), after the parenthesised name."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[1].split()[19].decode()
    except (OSError, IndexError):
        return None


def _boot_id() -> str | None:
    try:
        with open("/proc/sys/kernel/random/boot_id") as boot:
            return boot.read().strip()
    except OSError:
        return None


def _staging_folders(destination: Location) -> list[Location]:
    parent = destination.parent
    pattern = re.compile(re.escape(f"{STAGING_MARK}{destination.name}-") + "[0-9a-f]{12}")
    try:
        names = _names(parent)
    except (FileNotFoundError, NotADirectoryError, PermissionError):
        return []
    return [parent.child(name) for name in sorted(names) if pattern.fullmatch(name)]


def _abandoned(staging: Location) -> bool:
    """Its owner is a dead process of this host, or (no owner marker) it is a day old."""
    try:
        data = staging.fs.cat_file(staging.child(OWNER_FILE).path)
    except FileNotFoundError:
        if not staging.is_local:  # object stores keep no folder times
            return False
        try:
            age = time.time() - os.stat(staging.path).st_mtime
        except OSError:
            return False
        return age > UNMARKED_STALE_SECONDS
    except OSError:
        return False
    owner = Owner.parse(data)
    return owner is not None and owner.is_gone()


def stale_staging(destination_url: str, storage_options: dict[str, Any] | None = None) -> list[str]:
    """Staging folders beside the destination that a successful run will leave alone: their
    owner may still be writing (or was killed on another host). Abandoned ones are not listed:
    the next successful run to this destination removes them."""
    destination = locate(destination_url, storage_options)
    return [s.url for s in _staging_folders(destination) if not _abandoned(s)]


def remove_abandoned(staged: StagedSavepoint) -> list[str]:
    """After a successful publish: remove this destination's abandoned staging folders."""
    removed = []
    for staging in _staging_folders(staged.destination):
        if staging.path != staged.staging.path and _abandoned(staging):
            with contextlib.suppress(OSError):  # another run may be removing it too
                staging.fs.rm(staging.path, recursive=True)
                removed.append(staging.url)
    return removed


@contextlib.contextmanager
def discarded_on_failure(
    staged: StagedSavepoint, *, name_os_errors: bool = False
) -> Iterator[None]:
    """The block that writes into `staged`: if it fails, the staging folder is removed and the
    error passed on; with `name_os_errors`, an OSError as one line naming the destination."""
    try:
        yield
    except OSError as exc:
        discard(staged)
        if name_os_errors:
            raise unwritable(exc, staged.destination) from None
        raise
    except BaseException:
        discard(staged)
        raise


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
