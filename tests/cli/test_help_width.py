"""Every `--help` fits the terminal, 80 columns included (pipes and CI logs get 80): no line
wider, no option name or metavar cut, no typer type marker in the usage line."""

from __future__ import annotations

import re
from typing import Any

import pytest

from statectl.cli.main import _click_command
from tests.cli.test_help import COMMANDS, help_at

WIDTHS = [60, 80, 120]


def command_of(name: str | None) -> Any:
    group = _click_command()
    return group if name is None else group.commands[name]


def whole(word: str, text: str) -> bool:
    """`word` in `text`, not as part of a longer name (`--json` is not `--json-x`)."""
    return re.search(rf"(?<![\w-]){re.escape(word)}(?![\w.…-])", text) is not None


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("name", [None, *COMMANDS])
def test_every_line_fits_and_nothing_is_cut(name: str | None, width: int) -> None:
    out = help_at(width, *([name] if name else []))
    too_wide = [line for line in out.splitlines() if len(line) > width]
    assert too_wide == []
    assert "…" not in out  # rich's mark of a cut cell (no help text has one)


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("name", [None, *COMMANDS])
def test_every_option_name_and_metavar_appears_whole(name: str | None, width: int) -> None:
    out = help_at(width, *([name] if name else []))
    for param in command_of(name).params:
        if param.param_type_name == "argument":
            metavar = param.metavar or param.name.upper()
            assert whole(metavar, out), metavar
            continue
        for opt in (*param.opts, *param.secondary_opts):
            assert whole(opt, out), opt
        if not param.is_flag:
            assert param.metavar, f"{param.opts}: no metavar (typer would show <str>)"
            assert whole(param.metavar, out), param.metavar
            longest = max(param.opts, key=len)
            if width >= 80:  # beside its name (at 60, the longest goes on the next line)
                assert f"{longest} {param.metavar}" in out, (longest, param.metavar)
    assert whole("--help", out)


@pytest.mark.parametrize("name", COMMANDS)
def test_the_usage_line_names_arguments_without_type_markers(name: str) -> None:
    usage = help_at(80, name).strip().splitlines()[0]
    assert usage.startswith(f"Usage: statectl {name} [OPTIONS]")
    assert not set("{}<>") & set(usage), usage
    arguments = [p for p in command_of(name).params if p.param_type_name == "argument"]
    assert arguments
    for argument in arguments:
        assert whole(argument.metavar or argument.name.upper(), usage)


def flowing(out: str) -> str:
    """A help's words in one line, without the panels' borders."""
    return " ".join(out.replace("│", " ").split())


def test_help_texts_are_not_markup() -> None:
    assert "(pip install 'statectl[plot]')" in flowing(help_at(80, "plan"))


def test_the_usage_of_a_usage_error_names_arguments_as_help_does() -> None:
    from tests.conftest import run_cli

    code, _, err = run_cli("rescale", "./sp", "-o", "./out", "--parallelism", "0")
    assert code == 2
    assert "Usage: statectl rescale [OPTIONS] SOURCE" in err


def test_long_examples_continue_after_a_backslash() -> None:
    """An example too long for the terminal is split at a space, as a shell reads it."""
    out = help_at(80, "rescale")
    lines = out.splitlines()
    (start,) = [i for i, line in enumerate(lines) if "--operator enrich=2" in line]
    assert lines[start].endswith(" \\")
    assert lines[start + 1].split() == ["--master", "spark://host:7077"]
