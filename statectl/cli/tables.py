"""Tables that fit the terminal without cutting what users type.

A column says how its cells may break: an `id` (uid, operator id, state name, file) and a
`number` (counts, sizes) never; `text` at spaces; a `type` (`MAP<STRING, POJO a.b.C{…}>`) at
spaces and after `<`, `{`, `(`, `[` and `,`, so that a class name stays whole. A table whose
columns fit at their narrowest is drawn as a table, what the terminal has left widening first
the columns that need least to be whole; one that does not is stacked: per row, its `key` cells
on a line (the identifiers that name the row), then its other cells as `header: value`, as many
to a line as fit. Nothing is cut or folded; only a single word wider than the terminal makes a
line wider than it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from rich.console import Console, RenderableType
    from rich.text import Text

Kind = Literal["id", "number", "text", "type"]

_PIECES = {
    "text": re.compile(r"\S+\s*"),
    "type": re.compile(r"[^\s<{(\[,]*[<{(\[,]?\s*"),
}
# Between a stacked row's fields, and the indent of the lines under its key.
_FIELD_GAP = "  "
_INDENT = "  "
# A long field's value continues under itself after a header this short, else under the header.
_MAX_HANG = 16


@dataclass(frozen=True)
class Column:
    header: str
    kind: Kind = "text"
    justify: Literal["left", "right"] = "left"
    # Names the row: its cell heads the row's lines when the table is stacked.
    key: bool = False
    # A cell's style by its text (`refused` in red).
    styles: Mapping[str, str] = field(default_factory=dict)


def print_table(
    console: Console, columns: Sequence[Column], rows: Sequence[Sequence[str]], title: str = ""
) -> None:
    """The table on `console`, fitted to its width; `title` a line above it."""
    if title:
        console.print(title, soft_wrap=True, markup=False, highlight=False)
    from rich.text import Text

    table = fitted(columns, rows, console.width)
    # stacked lines are never wrapped by rich: a word wider than the terminal is left whole
    console.print(table, crop=False, soft_wrap=isinstance(table, Text), highlight=False)


def print_words(console: Console, text: Text) -> None:
    """A sentence wrapped at spaces only: a word wider than the terminal (a location) whole,
    where rich would fold it."""
    plain = text.plain
    offset = 0
    for line in wrap(plain, "text", console.width):
        start = plain.index(line, offset)
        offset = start + len(line)
        console.print(text[start:offset], soft_wrap=True, highlight=False)


def fitted(columns: Sequence[Column], rows: Sequence[Sequence[str]], width: int) -> RenderableType:
    """A rich table if the columns fit `width` at their narrowest, else the rows stacked."""
    least = [_min_width(c, [row[i] for row in rows]) for i, c in enumerate(columns)]
    if table_width(least) <= width:
        return _table(columns, rows, _widths(columns, rows, least, width))
    return _stacked(columns, rows, width)


def table_width(widths: Sequence[int]) -> int:
    """The width of a rich table with these column widths: one space of padding either side of
    each column, a border before each column and one ending the row."""
    return sum(width + 3 for width in widths) + 1


# --- breaking cells --------------------------------------------------------------------------


def pieces(text: str, kind: Kind) -> list[str]:
    """Where a line of a cell may break: the pieces a wrapped line is made of."""
    pattern = _PIECES.get(kind)
    if pattern is None:
        return [text]
    return [piece for piece in pattern.findall(text) if piece]


def wrap(text: str, kind: Kind, width: int) -> list[str]:
    """A cell's lines at most `width` columns wide, broken only where its kind allows (a piece
    wider than that alone on its line)."""
    from rich.cells import cell_len

    lines: list[str] = []
    for paragraph in text.split("\n"):
        line = ""
        for piece in pieces(paragraph, kind):
            if line and cell_len((line + piece).rstrip()) > width:
                lines.append(line.rstrip())
                line = piece
            else:
                line += piece
        lines.append(line.rstrip())
    return lines


def _min_width(column: Column, cells: Sequence[str]) -> int:
    """The narrowest a column can be: its widest unbreakable piece, of its header (words) or
    its cells."""
    from rich.cells import cell_len

    header = [cell_len(p.rstrip()) for p in pieces(column.header, "text")]
    body = [
        cell_len(p.rstrip())
        for cell in cells
        for line in cell.split("\n")
        for p in pieces(line, column.kind)
    ]
    return max([1, *header, *body])


def _max_width(column: Column, cells: Sequence[str]) -> int:
    from rich.cells import cell_len

    return max(cell_len(line) for text in (column.header, *cells) for line in text.split("\n"))


def _widths(
    columns: Sequence[Column], rows: Sequence[Sequence[str]], least: Sequence[int], width: int
) -> list[int]:
    """Each column's width: its least, then what the terminal has left, up to its widest cell,
    given first to the columns that need least to be whole (the most columns unwrapped)."""
    spare = width - table_width(least)
    widths = list(least)
    most = [_max_width(c, [row[i] for row in rows]) for i, c in enumerate(columns)]
    for i in sorted(range(len(columns)), key=lambda i: most[i] - least[i]):
        grown = min(spare, most[i] - least[i])
        if grown > 0:
            widths[i] += grown
            spare -= grown
    return widths


# --- drawing ---------------------------------------------------------------------------------


def _table(
    columns: Sequence[Column], rows: Sequence[Sequence[str]], widths: Sequence[int]
) -> RenderableType:
    """Cells wrapped here, where their kind allows, so that rich has nothing left to wrap."""
    from rich.table import Table
    from rich.text import Text

    table = Table()
    for column, width in zip(columns, widths, strict=True):
        table.add_column(
            "\n".join(wrap(column.header, "text", width)),
            width=width,
            no_wrap=True,
            justify=column.justify,
        )
    for row in rows:
        table.add_row(
            *(
                Text("\n".join(wrap(cell, c.kind, w)), style=c.styles.get(cell, ""))
                for c, w, cell in zip(columns, widths, row, strict=True)
            )
        )
    return table


def _stacked(columns: Sequence[Column], rows: Sequence[Sequence[str]], width: int) -> Text:
    from rich.text import Text

    text = Text(no_wrap=True, overflow="ignore")
    for row in rows:
        for line in _stacked_row(columns, row, width):
            text.append_text(line)
            text.append("\n")
    text.rstrip()
    return text


def _stacked_row(columns: Sequence[Column], row: Sequence[str], width: int) -> Iterator[Text]:
    """The row's key cells on a line (each on its own if together they are too wide), then its
    other cells as `header: value`, as many to a line as fit, a long one wrapped beneath its
    header."""
    from rich.cells import cell_len
    from rich.text import Text

    keys = [cell for column, cell in zip(columns, row, strict=True) if column.key]
    heading = _FIELD_GAP.join(keys)
    if keys and cell_len(heading) <= width:
        yield Text(heading, style="bold")
    else:
        yield from (Text(key, style="bold") for key in keys)
    line = Text(_INDENT)
    for column, cell in zip(columns, row, strict=True):
        if column.key or not cell:
            continue
        value = "; ".join(cell.split("\n"))
        entry = Text.assemble((f"{column.header}: ", "dim"), (value, column.styles.get(cell, "")))
        gap = _FIELD_GAP if line.plain.strip() else ""
        if cell_len(line.plain + gap + entry.plain) <= width:
            line.append(gap)
            line.append_text(entry)
            continue
        if line.plain.strip():
            yield line
        line = Text(_INDENT)
        if cell_len(_INDENT + entry.plain) <= width:
            line.append_text(entry)
            continue
        yield from _long_field(column, cell, value, width)
    if line.plain.strip():
        yield line


def _long_field(column: Column, cell: str, value: str, width: int) -> Iterator[Text]:
    """A field too long for a line: its value wrapped where its kind allows, under itself after
    a short header, under the header after a long one."""
    from rich.text import Text

    style = column.styles.get(cell, "")
    prefix = f"{column.header}: "
    hang = len(_INDENT) + len(prefix)
    if hang > _MAX_HANG:
        yield Text(_INDENT).append(prefix.rstrip(), "dim")
        hang = 2 * len(_INDENT)
        prefix = ""
    for number, part in enumerate(wrap(value, column.kind, width - hang)):
        line = Text(_INDENT if number == 0 else " " * hang)
        if number == 0 and prefix:
            line.append(prefix, "dim")
        elif number == 0:
            line.append(" " * (hang - len(_INDENT)))
        yield line.append(part, style)
