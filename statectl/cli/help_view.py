"""`--help` that fits the terminal, 80 columns included, with every option name and metavar whole.

typer's panels give each option a row of five columns and, in a terminal narrower than its
widest row, cut names (`--max-parallel…`) and wrap help one word a line; its usage line shows
its type markers (`{path}`, `<list[str]>`) and rich markup eats `[plot]` in help texts. Here an
option is one entry: its names and metavar (`-o, --output DESTINATION`), then its help beside
them where both fit, else below them, indented. Help texts are plain text, never markup. Prose
paragraphs are wrapped to the width; indented lines (examples) are kept as they are, a long one
continued on the next line after a shell backslash.

rich is imported only to print a help: a command that prints none loads no rich
(tests/cli/test_import_cost.py).
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import typer

if TYPE_CHECKING:
    from rich.console import RenderableType
    from rich.text import Text

# Wider lines of prose are harder to read, not easier.
MAX_WIDTH = 100
# A panel's border and padding take two columns on either side.
_PANEL = 4
# Between an entry's names and its help.
_GAP = 2
# The help below names that leave no room beside them.
_INDENT = 4
# Names wider than this share of a panel get their help below them, so that one long name does
# not push every other entry's help to the right.
_NAMES_SHARE = 0.4
# Narrower than this, a help column is no longer worth keeping: every help goes below its names.
_MIN_HELP = 24

_NAME_STYLE = "bold cyan"
_METAVAR_STYLE = "bold yellow"
_EXTRA_STYLE = "dim"


@dataclass(frozen=True)
class _Entry:
    """One argument, option or command of a panel: its names (the words a user types, each
    with its style) and the help beside or below them."""

    names: tuple[tuple[str, str], ...]
    help: str
    extras: tuple[str, ...] = ()

    @property
    def names_width(self) -> int:
        return len(" ".join(text for text, _ in self.names))


class Command(typer.core.TyperCommand):
    """A sub-command whose usage line and `--help` are drawn here."""

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        return usage_pieces(self, ctx)

    def format_help(self, ctx: Any, formatter: Any) -> None:
        print_help(self, ctx)


class Group(typer.core.TyperGroup):
    """The `statectl` command: its usage line and `--help` drawn here, like its commands'."""

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        return usage_pieces(self, ctx)

    def format_help(self, ctx: Any, formatter: Any) -> None:
        print_help(self, ctx)


# --- what a help shows -----------------------------------------------------------------------


def usage_pieces(command: Any, ctx: Any) -> list[str]:
    """`[OPTIONS] SOURCE`: arguments by their metavar (or upper-cased name), not typer's
    `{source}`; an optional one in brackets."""
    params = [p for p in command.get_params(ctx) if not getattr(p, "hidden", False)]
    pieces = ["[OPTIONS]"] if any(p.param_type_name == "option" for p in params) else []
    for param in params:
        if param.param_type_name == "argument":
            name = argument_metavar(param)
            pieces.append(name if param.required else f"[{name}]")
    subcommands = getattr(command, "subcommand_metavar", None)
    if subcommands:
        pieces.append(subcommands)
    return pieces


def argument_metavar(param: Any) -> str:
    if param.metavar:
        return str(param.metavar)
    return str(param.name).upper() + ("..." if param.nargs != 1 else "")


def option_metavar(param: Any) -> str:
    """What an option takes, `""` for a flag: its metavar, else its parameter's name."""
    if param.is_flag or getattr(param, "count", False):
        return ""
    return str(param.metavar or param.name.upper())


def _option_entry(param: Any) -> _Entry:
    names: list[tuple[str, str]] = [(opt, _NAME_STYLE) for opt in sorted(param.opts, key=len)]
    names = [(f"{text}," if i < len(names) - 1 else text, s) for i, (text, s) in enumerate(names)]
    if param.secondary_opts:
        names.append(("/", _EXTRA_STYLE))
        names.extend((opt, _NAME_STYLE) for opt in param.secondary_opts)
    metavar = option_metavar(param)
    if metavar:
        names.append((metavar, _METAVAR_STYLE))
    return _Entry(tuple(names), _plain(param.help), _extras(param))


def _argument_entry(param: Any) -> _Entry:
    help_text = _plain(getattr(param, "help", None))
    return _Entry(((argument_metavar(param), _METAVAR_STYLE),), help_text, _extras(param))


def _extras(param: Any) -> tuple[str, ...]:
    extras = []
    bounds = _range(param)
    if bounds:
        extras.append(f"[{bounds}]")
    default = _default(param)
    if default:
        extras.append(f"[default: {default}]")
    if param.required:
        extras.append("[required]")
    return tuple(extras)


def _range(param: Any) -> str | None:
    """`1 to 32768`, `at least 1`: typer keeps a number's bounds on the option, click on its
    type."""
    low = getattr(param, "min", None)
    high = getattr(param, "max", None)
    if low is None and high is None:
        kind = getattr(param, "type", None)
        low, high = getattr(kind, "min", None), getattr(kind, "max", None)
    if low is not None and high is not None:
        return f"{low} to {high}"
    if low is not None:
        return f"at least {low}"
    if high is not None:
        return f"at most {high}"
    return None


def _default(param: Any) -> str | None:
    """A default worth showing: a value, or the name of a flag pair's side that is on."""
    if param.param_type_name != "option" or getattr(param, "show_default", None) is False:
        return None
    default = param.default
    if param.is_flag:
        return param.opts[0] if param.secondary_opts and default is True else None
    if default is None or default == () or default == [] or callable(default):
        return None
    return str(default)


def _plain(text: str | None) -> str:
    return " ".join(inspect.cleandoc(text or "").split())


def _first_paragraph(command: Any) -> str:
    text = inspect.cleandoc(command.help or "").partition("\f")[0]
    return " ".join(text.split("\n\n")[0].split())


# --- drawing ---------------------------------------------------------------------------------


def print_help(command: Any, ctx: Any) -> None:
    """The usage line, the command's description, then panels of its arguments, options and
    (for `statectl` itself) commands, on stdout."""
    from rich.console import Console, Group
    from rich.panel import Panel

    console = Console(highlight=False)
    width = min(console.width, MAX_WIDTH)
    parts: list[RenderableType] = [_text(""), *_usage(command, ctx, width), _text("")]
    if command.help:
        parts.extend(_description(command.help, width))
    params = [p for p in command.get_params(ctx) if not getattr(p, "hidden", False)]
    panels = [
        ("Arguments", [_argument_entry(p) for p in params if p.param_type_name == "argument"]),
        ("Options", [_option_entry(p) for p in params if p.param_type_name == "option"]),
    ]
    if hasattr(command, "list_commands"):
        commands = [command.get_command(ctx, name) for name in command.list_commands(ctx)]
        panels.append(
            (
                "Commands",
                [
                    _Entry(((c.name, _NAME_STYLE),), _first_paragraph(c))
                    for c in commands
                    if c is not None and not c.hidden
                ],
            )
        )
    for title, entries in panels:
        if entries:
            lines = _entry_lines(entries, width - _PANEL)
            parts.append(
                Panel(
                    Group(*lines),
                    title=title,
                    title_align="left",
                    border_style="dim",
                    width=width,
                )
            )
    console.print(Group(*parts), soft_wrap=False, crop=False)


def _text(text: str = "", style: str = "") -> Text:
    from rich.text import Text

    return Text(text, style=style, no_wrap=True, overflow="ignore")


def _usage(command: Any, ctx: Any, width: int) -> list[Text]:
    words = [ctx.command_path, *" ".join(usage_pieces(command, ctx)).split()]
    lines = _wrap_words(words, width - 1 - len(" Usage: "))
    indent = " " * len(" Usage: ")
    out = []
    for i, line in enumerate(lines):
        text = _text(" Usage: " if i == 0 else indent, style="yellow" if i == 0 else "")
        text.append(line, style="bold")
        out.append(text)
    return out


def _description(doc: str, width: int) -> Iterator[Text]:
    """A command's docstring: the first paragraph plain, the rest dim; prose wrapped, indented
    lines (examples) kept, a long one continued after a backslash."""
    text = inspect.cleandoc(doc).partition("\f")[0]
    for number, paragraph in enumerate(text.split("\n\n")):
        style = "" if number == 0 else "dim"
        lines = paragraph.split("\n")
        if number and all(line.startswith(" ") for line in lines):
            for line in lines:
                for part in _continued(line, width - 1):
                    yield _text(" " + part, style)
        else:
            for line in _wrap_words(paragraph.split(), width - 2):
                yield _text(" " + line, style)
        yield _text("")


def _continued(line: str, width: int) -> list[str]:
    """A shell command too long for the line, split at spaces with ` \\` at each end."""
    if len(line) <= width:
        return [line]
    indent = len(line) - len(line.lstrip())
    words = line.split()
    out: list[str] = []
    current = " " * indent + words[0]
    for word in words[1:]:
        if len(current) + 1 + len(word) + 2 <= width:
            current += " " + word
        else:
            out.append(current + " \\")
            current = " " * (indent + _INDENT) + word
    out.append(current)
    return out


def _wrap_words(words: Sequence[str], width: int) -> list[str]:
    """Words on lines of at most `width` columns; a word longer than a line, alone and folded."""
    lines: list[str] = []
    current = ""
    for word in _folded(words, width):
        if current and len(current) + 1 + len(word) > width:
            lines.append(current)
            current = word
        else:
            current = f"{current} {word}" if current else word
    if current or not lines:
        lines.append(current)
    return lines


def _entry_lines(entries: Sequence[_Entry], inner: int) -> list[Text]:
    """A panel's entries in `inner` columns: names in a column as wide as the widest that is not
    too wide, help beside them; the help of wider names below them, in the same column; in a
    panel too narrow for a help column, every help below its names."""
    fitting = [e.names_width for e in entries if e.names_width <= inner * _NAMES_SHARE]
    column = max(fitting, default=0) + _GAP
    if inner - column < _MIN_HELP:
        column = _INDENT
    lines: list[Text] = []
    for entry in entries:
        names = _names_lines(entry, inner)
        # `[default: local[*]]` is one word: not broken
        words = [(word, "") for word in entry.help.split()]
        words += [(extra, _EXTRA_STYLE) for extra in entry.extras]
        # a word too long beside the names (a URL) puts the help below them, less indented
        indent = column if max((len(w) for w, _ in words), default=0) <= inner - column else _INDENT
        helps = _wrap_styled(words, inner - indent)
        beside = indent > _INDENT and len(names) == 1 and len(names[0]) + _GAP <= indent
        if beside and helps:
            first = names[0]
            first.append(" " * (indent - len(first)))
            first.append_text(helps[0])
            helps = helps[1:]
        for line in helps:
            names.append(_text(" " * indent).append_text(line))
        lines.extend(names)
    return lines


def _names_lines(entry: _Entry, inner: int) -> list[Text]:
    """An entry's names on one line, or on more, broken at spaces between names and indented:
    never cut."""
    lines = [_text()]
    for name, style in entry.names:
        for text in _folded([name], inner - _INDENT):  # a terminal narrower than a name
            line = lines[-1]
            if line.plain and len(line) + 1 + len(text) > inner:
                line = _text(" " * _INDENT)
                lines.append(line)
            if line.plain.strip():
                line.append(" ")
            line.append(text, style=style)
    return lines


def _wrap_styled(words: Sequence[tuple[str, str]], width: int) -> list[Text]:
    lines: list[Text] = []
    pieces = [(piece, style) for word, style in words for piece in _folded([word], width)]
    for word, style in pieces:
        if lines and len(lines[-1]) + 1 + len(word) <= width:
            lines[-1].append(" ")
            lines[-1].append(word, style=style)
        else:
            lines.append(_text(word, style))
    return lines


def _folded(words: Sequence[str], width: int) -> Iterator[str]:
    """The words, a word longer than `width` in pieces of `width`: the last resort of a terminal
    narrower than a word."""
    for word in words:
        while len(word) > width > 0:
            yield word[:width]
            word = word[width:]
        yield word
