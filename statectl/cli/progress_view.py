"""Progress on stderr: a rich bar on a terminal, one plain line in a CI log."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from statectl.cli.console import stderr_console
from statectl.cli.units import human_bytes

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

    from statectl.progress import Progress as JobProgress


class TaskProgress:
    """Files written and state bytes done, on stderr: a rich bar on a terminal, one plain line
    in a CI log."""

    def __init__(self, what: str, enabled: bool = True) -> None:
        self.what = what
        self.enabled = enabled
        self._progress: Progress | None = None
        self._task: TaskID | None = None
        self._reported_plain = False

    def __enter__(self) -> TaskProgress:
        if self.enabled and stderr_console().is_terminal:
            from rich.progress import (
                BarColumn,
                DownloadColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
            )

            self._progress = Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                TextColumn("{task.fields[files]}"),
                DownloadColumn(binary_units=True),
                TimeElapsedColumn(),
                console=stderr_console(),
                transient=True,
            )
            self._progress.start()
            self._task = self._progress.add_task(self.what, total=None, files="")
        return self

    def update(self, done: JobProgress) -> None:
        files = f"{done.files}/{done.total_files} files"
        if self._progress is not None and self._task is not None:
            self._progress.update(
                self._task, completed=done.bytes, total=done.total_bytes, files=files
            )
        elif self.enabled and done.complete and not self._reported_plain:
            self._reported_plain = True
            state = human_bytes(done.total_bytes)
            print(f"statectl: {self.what}: {files} written ({state} of state)", file=sys.stderr)

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()
