"""`--help` of every command: no type markers beside flags, descriptions on one line."""

from __future__ import annotations

import inspect

import pytest

from statectl.cli.main import app
from tests.conftest import run_cli

COMMANDS = [command.name for command in app.registered_commands]


def help_at(width: int, *argv: str) -> str:
    """`statectl … --help` as a `width`-column terminal shows it (typer's console reads
    COLUMNS on every help)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("COLUMNS", str(width))
        code, out, err = run_cli(*argv, "--help")
    assert code == 0, err
    return out


@pytest.mark.parametrize("command", [None, *COMMANDS])
def test_flags_show_no_type_marker(command: str | None) -> None:
    out = help_at(100, *([command] if command else []))
    assert "<bool>" not in out
    assert "--help" in out


def test_every_description_is_one_line_in_the_command_list() -> None:
    out = help_at(100)
    lines = [" ".join(line.strip("│ ").split()) for line in out.splitlines()]
    for command in app.registered_commands:
        assert command.callback is not None
        first = inspect.cleandoc(command.callback.__doc__ or "").split("\n\n")[0]
        assert "\n" not in first, command.name
        assert f"{command.name} {first}" in lines, command.name
