"""Publishing what a command wrote: `_metadata` last, and only once the output checks.

Every writing command (rescale, convert, migrate, transform, upgrade, the Spark writer, source
positions) publishes through here, so none can exit 0 with an output its own `verify` rejects.
"""

from __future__ import annotations

from collections.abc import Collection

from statectl.formats.metadata import CheckpointMetadata
from statectl.operations.verify import check_written
from statectl.savepoint import writer


def publish(
    staged: writer.StagedSavepoint,
    metadata: CheckpointMetadata,
    rewritten: Collection[bytes] | None = None,
) -> None:
    """Check the staged output (`verify.check_written`; `rewritten`: the operators, by id,
    whose keyed state the command wrote anew rather than copied), then publish it; a failed
    check raises, and the caller discards the staging as for any failure."""
    check_written(staged, metadata, rewritten)
    writer.publish(staged, metadata)
