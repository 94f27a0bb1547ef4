"""The `statectl` command: global options, error reporting and the sub-commands.

Errors are one line on stderr (`statectl: error: <file>: <what is wrong>`) with exit code 1;
usage errors exit 2 (click's convention); `--debug` shows the traceback instead, and the log
records of statectl and the libraries it uses (Spark's JVM output whole among them).
Sub-command modules declare their options at module level but import the operations they run
inside the command function: `--help` loads no operation, and a command only what it runs
(tests/cli/test_import_cost.py).
"""

from __future__ import annotations

import copy
import functools
import logging
import sys
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Annotated, Any, NoReturn

import typer

from statectl import __version__
from statectl.cli import (
    allocator,
    check_cmd,
    convert_cmd,
    diff_cmd,
    export_cmd,
    inspect_cmd,
    migrate_cmd,
    plan_cmd,
    positions_cmd,
    rescale_cmd,
    transform_cmd,
    uid_hash_cmd,
    upgrade_cmd,
    verify_cmd,
)
from statectl.cli.console import print_error, print_note
from statectl.cli.help_view import Command as _Command
from statectl.cli.help_view import Group as _Group
from statectl.cli.options import DebugOption
from statectl.errors import StatectlError, StatectlNote, one_line, setup_error

app = typer.Typer(
    name="statectl",
    cls=_Group,
    help=(
        "Inspect, rescale and migrate Apache Flink savepoints without a JVM.\n\n"
        "Examples:\n\n"
        "  statectl inspect s3://bucket/savepoints/savepoint-1a2b3c-0123456789ab\n\n"
        "  statectl inspect ./savepoint --json | jq '.operators[].uid'\n\n"
        "  statectl migrate ./savepoint -o ./renamed --rename-uid keyed-str=sessions\n\n"
    ),
    no_args_is_help=True,
    add_completion=True,  # --install-completion, --show-completion
    pretty_exceptions_enable=False,
    pretty_exceptions_show_locals=False,
    rich_markup_mode="rich",
)

_debug = False


def _version(value: bool) -> None:
    if value:
        typer.echo(f"statectl {__version__}")
        raise typer.Exit()


@app.callback()
def _global_options(
    debug: DebugOption = False,
    version: Annotated[
        bool,
        typer.Option(
            "--version", "-V", callback=_version, is_eager=True, help="Print the version."
        ),
    ] = False,
) -> None:
    _set_debug(debug)


def _set_debug(debug: bool) -> None:
    global _debug
    _debug = debug
    _configure_logging(debug)


def _configure_logging(debug: bool) -> None:
    """Python log records show with `--debug` only: an error is one line otherwise, and the
    libraries log theirs as well (py4j logs a dead JVM's broken connection at ERROR, with a
    traceback). statectl's DEBUG records say to copy Spark's JVM output whole."""
    logging.getLogger().setLevel(logging.WARNING if debug else logging.CRITICAL)
    logging.getLogger("statectl").setLevel(logging.DEBUG if debug else logging.NOTSET)


_COMMANDS: dict[str, Callable[..., None]] = {  # in the order `statectl --help` lists them
    "inspect": inspect_cmd.inspect,
    "plan": plan_cmd.plan,
    "rescale": rescale_cmd.rescale,
    "convert": convert_cmd.convert,
    "diff": diff_cmd.diff_command,
    "export": export_cmd.export_command,
    "verify": verify_cmd.verify,
    "migrate": migrate_cmd.migrate_command,
    "uid-hash": uid_hash_cmd.uid_hash,
    "positions": positions_cmd.positions_command,
    "transform": transform_cmd.transform_command,
    "upgrade": upgrade_cmd.upgrade_command,
    "check": check_cmd.check_command,
}
for _name, _command in _COMMANDS.items():
    app.command(_name, no_args_is_help=True, cls=_Command)(_command)


@functools.cache
def _click_command() -> Callable[..., Any]:
    """Built once per process: typer would rebuild it from the signatures on every call."""
    group = typer.main.get_command(app)
    _debug_anywhere(group)
    return group


def _debug_anywhere(group: Any) -> None:
    """`--debug` after the sub-command too (`statectl inspect ./sp --debug`): each command has
    a copy of the global option, which only turns debugging on (the global one has set it)."""
    (debug,) = [param for param in group.params if param.name == "debug"]
    for command in group.commands.values():
        option = copy.copy(debug)
        option.expose_value = False
        option.callback = _debug_given
        command.params.append(option)


def _debug_given(ctx: Any, param: Any, value: bool) -> bool:
    if value:
        _set_debug(True)
    return value


@contextmanager
def _notes_printed() -> Iterator[None]:
    """The library's notes (`StatectlNote` warnings) as `statectl: note:` lines, each once."""
    printed: set[str] = set()
    with warnings.catch_warnings():
        other_warnings = warnings.showwarning

        def show(message: Warning | str, category: type[Warning], *args: Any, **kw: Any) -> None:
            if not issubclass(category, StatectlNote):
                other_warnings(message, category, *args, **kw)
            elif str(message) not in printed:
                printed.add(str(message))
                print_note(str(message))

        warnings.simplefilter("always", StatectlNote)
        warnings.showwarning = show
        yield


INTERRUPTED = 130  # 128 + SIGINT, as shells report a program Ctrl-C ended


def main(argv: list[str] | None = None) -> None:
    try:
        allocator.keep_freed_buffers()
        with _notes_printed():
            _click_command()(args=argv, prog_name="statectl")
    except StatectlError as exc:
        if _debug:
            raise
        print_error(one_line(str(exc)))
        sys.exit(1)
    except KeyboardInterrupt:
        _interrupted()
    except SystemExit as exc:
        if exc.code == INTERRUPTED:  # typer's own exit for a KeyboardInterrupt, silent
            _interrupted()
        raise
    except Exception as exc:  # a bug, not bad input: still one line unless --debug
        if _debug:
            raise
        # What the machine lacks, told by a filesystem's library (no S3 credentials, no Hadoop
        # client for hdfs://) where statectl did not translate it itself.
        setup = setup_error(exc)
        if setup is not None:
            print_error(one_line(str(setup)))
        else:
            print_error(f"internal error: {type(exc).__name__}: {exc} (rerun with --debug)")
        sys.exit(1)


def _interrupted() -> NoReturn:
    """Ctrl-C: one line and exit 130. A write publishes `_metadata` last, so an interrupted
    one left no savepoint behind (its staging folder is removed on the way out)."""
    print_error("interrupted")
    sys.exit(INTERRUPTED)
