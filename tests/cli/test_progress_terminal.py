"""Long work names its phase on a terminal's stderr (a rich bar), and says nothing in a CI log.

Each command runs as `python -m statectl` with stderr on a pseudo-terminal (stdout a pipe, as
in `statectl verify --deep | tee`), then again with both piped.
"""

from __future__ import annotations

import fcntl
import os
import re
import select
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

from tests.conftest import fixture_savepoint

_ESCAPE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _on_terminal(*argv: str) -> tuple[int, str, str]:
    """Exit code, stdout, and stderr as the terminal got it (escape sequences removed)."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 160, 0, 0))
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "160"}
    for name in ("NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE"):
        env.pop(name, None)
    process = subprocess.Popen(
        [sys.executable, "-m", "statectl", *argv],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=slave,
        env=env,
    )
    os.close(slave)
    err = bytearray()
    try:
        while True:
            ready, _, _ = select.select([master], [], [], 60)
            if not ready:
                break
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: every writer of the terminal has closed it
                break
            if not chunk:
                break
            err += chunk
        assert process.stdout is not None
        out = process.stdout.read().decode()
        code = process.wait(timeout=60)
    finally:
        os.close(master)
        if process.poll() is None:
            process.kill()
    return code, out, _ESCAPE.sub("", err.decode(errors="replace"))


def _piped(*argv: str) -> tuple[int, str, str]:
    done = subprocess.run(
        [sys.executable, "-m", "statectl", *argv],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return done.returncode, done.stdout, done.stderr


def _commands(tmp_path: Path) -> dict[str, tuple[list[str], list[str]]]:
    """Command → (argv, phases its stderr names on a terminal)."""
    source = str(fixture_savepoint("hashmap_canonical_files"))
    return {
        "export": (
            ["export", source, "-o", str(tmp_path / "out.parquet"), "--overwrite"],
            ["export: reading metadata", "export: exporting operator keyed-str"],
        ),
        "inspect --deep": (
            ["inspect", source, "--deep"],
            [
                "inspect: reading metadata",
                "inspect: counting entries (operator keyed-str)",
                "inspect: decoding entries (operator keyed-str)",
            ],
        ),
        "verify --deep": (
            ["verify", source, "--deep"],
            ["verify: reading metadata", "verify: walking key groups (operator keyed-str)"],
        ),
        "diff": (
            ["diff", source, source, "--no-spark"],
            ["diff: reading metadata", "diff: hashing keyed entries"],
        ),
        "plan --deep": (
            ["plan", source, "--deep", "-p", "2,3"],
            ["plan: reading metadata", "plan: walking key groups (operator keyed-str)"],
        ),
    }


COMMANDS = ["export", "inspect --deep", "verify --deep", "diff", "plan --deep"]


@pytest.mark.parametrize("command", COMMANDS)
def test_a_terminal_shows_each_phase_by_name(tmp_path: Path, command: str) -> None:
    argv, phases = _commands(tmp_path)[command]
    code, out, err = _on_terminal(*argv)
    assert code == 0, err
    for phase in phases:
        assert phase in err, err
    assert "0/?" not in err
    assert out  # the result on stdout, not drawn into the terminal's stderr
    assert "reading metadata" not in out


@pytest.mark.parametrize("command", COMMANDS)
def test_without_a_terminal_stderr_stays_quiet(tmp_path: Path, command: str) -> None:
    argv, _ = _commands(tmp_path)[command]
    code, out, err = _piped(*argv)
    assert code == 0, err
    assert err == ""
    assert out


def test_json_on_a_terminal_shows_no_progress() -> None:
    source = str(fixture_savepoint("hashmap_canonical_files"))
    code, out, err = _on_terminal("verify", source, "--deep", "--json")
    assert code == 0, err
    assert err.strip() == ""
    assert out.lstrip().startswith("{")
