"""Paths and URLs through fsspec: local paths, `file://`, `s3://`, `gs://`, `memory://`, ….

Flink writes Hadoop/Presto flavoured URIs (`s3a://`, `s3p://`) and bare `file:/x` into
`_metadata`; `to_fsspec_url` maps them to what fsspec understands, for reading only.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import posixpath
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from statectl.errors import SavepointError, setup_error

if TYPE_CHECKING:  # fsspec loads on the first locate(): `uid-hash` reads no files
    import fsspec

_SCHEME_ALIASES = {"s3a": "s3", "s3p": "s3", "s3n": "s3", "oss": "oss", "wasbs": "abfs"}


def to_fsspec_url(uri: str) -> str:
    """Map a URI from `_metadata` (Hadoop style) to an fsspec URL."""
    scheme, sep, rest = uri.partition(":")
    if not sep or len(scheme) < 2:  # a plain path (or a Windows drive letter)
        return uri
    scheme = _SCHEME_ALIASES.get(scheme.lower(), scheme.lower())
    if scheme == "file" and not rest.startswith("//"):
        return "file://" + rest  # Flink's `file:/tmp/x`
    return f"{scheme}:{rest}"


@dataclass(frozen=True)
class Location:
    """A file or folder on some filesystem: the fsspec filesystem and the path inside it."""

    fs: fsspec.AbstractFileSystem
    path: str
    url: str = field(compare=False)

    @property
    def is_local(self) -> bool:
        protocol = self.fs.protocol
        protocols = (protocol,) if isinstance(protocol, str) else protocol
        return "file" in protocols or "local" in protocols

    @property
    def is_process_local(self) -> bool:
        """Storage only this Python process sees (fsspec `memory://`), not Spark's workers."""
        protocol = self.fs.protocol
        return "memory" in ((protocol,) if isinstance(protocol, str) else protocol)

    def child(self, name: str) -> Location:
        return Location(self.fs, posixpath.join(self.path, name), _join_url(self.url, name))

    @property
    def parent(self) -> Location:
        return Location(self.fs, posixpath.dirname(self.path.rstrip("/")), _parent_url(self.url))

    @property
    def name(self) -> str:
        return posixpath.basename(self.path.rstrip("/"))

    def exists(self) -> bool:
        with _one_line_errors(self.url):
            if self.is_local:  # fsspec's own check swallows every error, a Ctrl-C's too
                return os.path.exists(self.path)
            found = bool(self.fs.exists(self.path))
        return found

    def size(self) -> int:
        with _one_line_errors(self.url):
            size = int(self.fs.size(self.path))
        return size

    def read_view(self, start: int, end: int) -> bytes | memoryview:
        """The bytes [start, end): of a local file, a view of it mapped into memory (no copy:
        the reader copies what it keeps, and the view unmaps it once dropped); else read."""
        if not self.is_local or end - start < _MAPPED_MIN_BYTES:
            return self.read_bytes(start, end)
        try:
            with open(self.path, "rb") as file:
                if os.fstat(file.fileno()).st_size < end:  # short: the read names the error
                    return self.read_bytes(start, end)
                first_page = start - start % mmap.ALLOCATIONGRANULARITY
                mapped = mmap.mmap(
                    file.fileno(), end - first_page, access=mmap.ACCESS_READ, offset=first_page
                )
        except (OSError, ValueError):
            return self.read_bytes(start, end)
        return memoryview(mapped)[start - first_page :]

    def read_bytes(self, start: int | None = None, end: int | None = None) -> bytes:
        with _one_line_errors(self.url):
            if start is None and end is None:
                data: bytes = self.fs.cat_file(self.path)
            else:
                data = self.fs.cat_file(self.path, start=start, end=end)
        return data


@contextlib.contextmanager
def _one_line_errors(url: str) -> Iterator[None]:
    """A filesystem call's errors as one line naming `url`."""
    try:
        yield
    except FileNotFoundError:
        raise SavepointError("file not found", url) from None
    except IsADirectoryError:
        raise SavepointError("is a directory, not a file", url) from None
    except ValueError as exc:  # e.g. a NUL byte in a name read from a corrupt `_metadata`
        raise SavepointError(f"not a valid file name ({exc})", url) from None
    except Exception as exc:
        raise _setup_error(exc, url) from None


def _setup_error(exc: Exception, url: str) -> Exception:
    """What a filesystem's error tells of this machine's set-up (no S3 credentials, no Hadoop
    client), as one line naming `url`; any other error as it was raised."""
    return setup_error(exc, url) or exc


_MAPPED_MIN_BYTES = 1 << 20  # smaller reads cost less than a mapping


def _join_url(url: str, name: str) -> str:
    if url.endswith("://"):  # the root of a filesystem (`memory://`)
        return url + name
    return url.rstrip("/") + "/" + name


def _parent_url(url: str) -> str:
    head, slash, _ = url.rstrip("/").rpartition("/")
    if not slash:  # a bare relative name: its parent is the working directory, not itself
        return "."
    if head.endswith(":/"):  # `memory://x`: its parent is `memory://`, not the path `memory:/`
        return head + "/"
    return head or url


def protocol(url: str) -> str:
    """The filesystem a path or URL is on (`file` for a plain path)."""
    scheme, sep, _ = to_fsspec_url(url).partition("://")
    return scheme if sep else "file"


def options_for(
    url: str, source_url: str, given: dict[str, Any] | None, source: dict[str, Any] | None
) -> dict[str, Any] | None:
    """The storage options of a write to `url` from a savepoint at `source_url`: those given,
    else the source's when `url` is on the same store (the credentials and endpoint that
    opened one serve the other); a local destination ignores them either way."""
    if given:
        return given
    return source if protocol(url) == protocol(source_url) else None


def locate(url: str, storage_options: dict[str, Any] | None = None) -> Location:
    """Resolve a user-given path or URL (or a URI from `_metadata`) to a Location."""
    from fsspec.core import url_to_fs

    fs_url = to_fsspec_url(url)
    try:
        fs, path = url_to_fs(fs_url, **(storage_options or {}))
    except (ImportError, ValueError) as exc:
        raise SavepointError(f"cannot open this location: {exc}", url) from None
    except OSError as exc:  # hdfs:// without Hadoop's client
        raise _setup_error(exc, url) from None
    return Location(fs, path, url)
