"""The plain lines every command prints: data on stdout, notes, warnings and errors on stderr.

The consoles are made on first use, so `--json` never loads rich.
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

    from statectl.cli.tables import Column


@functools.cache
def stdout_console() -> Console:
    """The console of tables and lines, made on first use: `--json` never loads rich."""
    from rich.console import Console

    return Console(soft_wrap=False)


@functools.cache
def stderr_console() -> Console:
    """The console of the progress bar, made on first use."""
    from rich.console import Console

    return Console(stderr=True)


def print_line(text: str) -> None:
    """One line of data, never wrapped (a table title would wrap a long path) nor styled."""
    stdout_console().print(text, soft_wrap=True, markup=False, highlight=False)


def print_json(document: Any) -> None:
    sys.stdout.write(json.dumps(document, indent=2, ensure_ascii=False) + "\n")


def print_error(message: str) -> None:
    print(f"statectl: error: {message}", file=sys.stderr)


def print_note(message: str) -> None:
    print(f"statectl: note: {message}", file=sys.stderr)


def warn_stale_staging(urls: Sequence[str]) -> None:
    """Staging folders beside the destination that this run leaves alone: their owner may
    still be writing, or was killed on another host."""
    for url in urls:
        print(
            f"statectl: warning: {url}: staging folder of another run, not a savepoint; "
            "delete it once no other run writes there",
            file=sys.stderr,
        )


def warn(lines: Sequence[str]) -> None:
    """Warnings of a result: on stderr, in JSON mode too."""
    for line in lines:
        print(f"statectl: warning: {line}", file=sys.stderr)


def counted(count: int, noun: str) -> str:
    """`1 operator`, `3 operators`: English plurals of the nouns the summaries count."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def pick_fields(obj: object, *names: str) -> dict[str, Any]:
    """The named attributes of a result, in this order: a JSON document's fields."""
    return {name: getattr(obj, name) for name in names}


def print_table(columns: Sequence[Column], rows: Sequence[Sequence[str]], title: str = "") -> None:
    """A table on stdout that fits the terminal and cuts no identifier (`cli/tables.py`)."""
    from statectl.cli import tables

    tables.print_table(stdout_console(), columns, rows, title)
