"""Progress on stderr: a rich bar on a terminal, one plain line in a CI log (or none)."""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING

from statectl.cli.console import stderr_console
from statectl.cli.units import human_bytes

if TYPE_CHECKING:
    from rich.progress import Progress, ProgressColumn, TaskID

    from statectl.progress import Progress as JobProgress


class TaskProgress:
    """The phase a command is in, files and state bytes done, on stderr: a rich bar on a
    terminal; off one, a command that `writes` prints one plain line when its files are
    written, and one that only reads prints nothing."""

    def __init__(self, what: str, enabled: bool = True, *, writes: bool = True) -> None:
        self.what = what
        self.enabled = enabled
        self.writes = writes
        self._progress: Progress | None = None
        self._task: TaskID | None = None
        self._reported_plain = False
        self._phase: str | None = None
        self._started = 0.0

    def __enter__(self) -> TaskProgress:
        if self.enabled and stderr_console().is_terminal:
            from rich.progress import BarColumn, Progress, TextColumn

            self._progress = Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                TextColumn("{task.fields[files]}"),
                *_columns(),
                console=stderr_console(),
                transient=True,
                redirect_stdout=False,  # stdout may be a pipe: what it gets stays its own
            )
            self._progress.start()
            self._started = time.monotonic()
            self._task = self._uncounted(self._progress)
        return self

    def phase(self, name: str) -> None:
        """Name what the command does now, before its work is counted."""
        from statectl.progress import begun

        self.update(begun(name))

    def update(self, done: JobProgress) -> None:
        named = done.phase is not None and done.phase != self._phase
        if named:
            self._phase = done.phase
        if self._progress is not None and self._task is not None:
            self._show(self._progress, self._task, done, named)
        elif self.enabled and self.writes and done.complete and not self._reported_plain:
            self._reported_plain = True
            state = human_bytes(done.total_bytes)
            files = f"{done.files}/{done.total_files} files"
            print(f"statectl: {self.what}: {files} written ({state} of state)", file=sys.stderr)

    def _uncounted(self, progress: Progress) -> TaskID:
        """A pulsing bar without counts (rich sets no total back to none: a new task)."""
        return progress.add_task(
            self._description(), total=None, files="", bytes=False, since=self._started
        )

    def _show(self, progress: Progress, task: TaskID, done: JobProgress, named: bool) -> None:
        if not done.counted:  # nothing to count yet
            progress.remove_task(task)
            self._task = self._uncounted(progress)
        else:
            by_bytes = done.total_bytes > 0
            progress.update(
                task,
                description=self._description(),
                completed=done.bytes if by_bytes else done.files,
                total=done.total_bytes if by_bytes else done.total_files,
                files=f"{done.files}/{done.total_files} files",
                bytes=by_bytes,
            )
        if named:  # a new phase shows at once, however short
            progress.refresh()

    def _description(self) -> str:
        from rich.markup import escape

        return escape(f"{self.what}: {self._phase}" if self._phase else self.what)

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()


def _columns() -> tuple[ProgressColumn, ...]:
    """Bytes done of the total (binary units), blank until bytes are counted (rather than
    rich's `0/? bytes`); the time since the command began, whatever the phase."""
    from rich.progress import DownloadColumn, Task, TimeElapsedColumn
    from rich.text import Text

    class BytesColumn(DownloadColumn):
        def render(self, task: Task) -> Text:
            if task.total is None or not task.fields.get("bytes", False):
                return Text("")
            return super().render(task)

    class SinceColumn(TimeElapsedColumn):
        def render(self, task: Task) -> Text:
            elapsed = int(time.monotonic() - task.fields["since"])
            minutes, seconds = divmod(elapsed, 60)
            hours, minutes = divmod(minutes, 60)
            return Text(f"{hours}:{minutes:02d}:{seconds:02d}", style="progress.elapsed")

    return BytesColumn(binary_units=True), SinceColumn()
