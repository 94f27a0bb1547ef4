"""Progress of a job that writes state files, as the CLI shows it: files and bytes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Progress:
    """Files written of the total, and the input bytes of the tasks that wrote them."""

    files: int
    total_files: int
    bytes: int
    total_bytes: int

    @property
    def complete(self) -> bool:
        return self.files == self.total_files

    def plus_pending(self, files: int, size: int) -> Progress:
        """The same, with work that starts later (re-hashed files) added to the totals."""
        return Progress(self.files, self.total_files + files, self.bytes, self.total_bytes + size)


ProgressCallback = Callable[[Progress], None]


def finished(files: int, size: int) -> Progress:
    return Progress(files, files, size, size)
