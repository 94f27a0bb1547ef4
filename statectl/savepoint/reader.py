"""Opening a savepoint given its directory or its `_metadata` file, on any fsspec filesystem."""

from __future__ import annotations

from typing import Any

from statectl.errors import SavepointError, StatectlError
from statectl.formats.metadata import read_metadata
from statectl.savepoint.model import METADATA_FILE, Savepoint
from statectl.savepoint.storage import locate


def open_savepoint(url: str, storage_options: dict[str, Any] | None = None) -> Savepoint:
    """Read and parse `_metadata`; handles resolve against the folder that holds it (§2.10)."""
    location = locate(url, storage_options)
    if location.name == METADATA_FILE:
        metadata_location, directory = location, location.parent
    else:
        directory, metadata_location = location, location.child(METADATA_FILE)
    if not metadata_location.exists():
        if not directory.exists():
            raise SavepointError("no such file or directory", url)
        raise SavepointError(f"not a savepoint: no {METADATA_FILE} file", directory.url)
    data = metadata_location.read_bytes()
    try:
        metadata = read_metadata(data)
    except StatectlError as exc:
        raise exc.with_source(metadata_location.url) from None
    return Savepoint(directory, metadata, storage_options)
