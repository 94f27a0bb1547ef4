"""Progress of a command's long work, as the CLI shows it: the phase, files and bytes.

Operations take a `ProgressCallback` and call it with a `Progress` as their work advances: a
job that writes state files counts the files it wrote and the input bytes of their tasks; work
that reads (deep walks, diff, export) counts the files (or tasks) it read and their bytes. A
`phase` names what the work does now ("walking key groups (operator orders)", "starting
Spark"); a report without one continues the phase named before. `begun(phase)` names a phase
whose work is not counted yet.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Progress:
    """Files done of the total, and the input bytes of the tasks that did them."""

    files: int
    total_files: int
    bytes: int
    total_bytes: int
    phase: str | None = None  # what the work does now; None: the phase named before
    counted: bool = True  # False: a phase begun whose work is not counted yet (`begun`)

    @property
    def complete(self) -> bool:
        return self.counted and self.files == self.total_files

    def plus_pending(self, files: int, size: int) -> Progress:
        """The same, with work that starts later (re-hashed files) added to the totals."""
        return dataclasses.replace(
            self, total_files=self.total_files + files, total_bytes=self.total_bytes + size
        )


ProgressCallback = Callable[[Progress], None]


def finished(files: int, size: int) -> Progress:
    return Progress(files, files, size, size)


def begun(phase: str) -> Progress:
    """A phase that has begun before its work can be counted (starting Spark, a query)."""
    return Progress(0, 0, 0, 0, phase, counted=False)


class Steps:
    """One phase's work reported step by step to `progress` (None: nothing is reported): a
    file read or a task run adds its files and bytes. A phase with no files to do (an operator
    without keyed state) is not reported at all."""

    def __init__(
        self, progress: ProgressCallback | None, phase: str, total_files: int, total_bytes: int
    ) -> None:
        self.progress = progress
        self.phase = phase
        self.total_files, self.total_bytes = total_files, total_bytes
        self.files = self.bytes = 0
        self._report()

    def name(self, phase: str) -> None:
        """The work goes on as another phase (the next operator's, the next state's)."""
        if phase != self.phase:
            self.phase = phase
            self._report()

    def step(self, size: int, files: int = 1) -> None:
        self.files, self.bytes = self.files + files, self.bytes + size
        self._report()

    def _report(self) -> None:
        if self.progress is not None and self.total_files > 0:
            done = Progress(self.files, self.total_files, self.bytes, self.total_bytes, self.phase)
            self.progress(done)
