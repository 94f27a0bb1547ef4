"""What users find without reading the docs: `dir(statectl)` lists the API, `-V`, shell
completion, `--debug` wherever it is typed, and `plan --png` saying what it wrote."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

import statectl
from statectl.cli import main as cli_main
from tests.conftest import fixture_savepoint, run_cli


def test_dir_lists_the_api_and_no_module_internals() -> None:
    names = dir(statectl)
    assert {"open", "rescale", "verify", "Savepoint", "StatectlError", "__version__"} <= set(names)
    assert set(names) == set(statectl.__all__)
    assert not {"Any", "TYPE_CHECKING", "annotations"} & set(names)


@pytest.mark.parametrize("flag", ["-V", "--version"])
def test_version(flag: str) -> None:
    assert run_cli(flag) == (0, f"statectl {statectl.__version__}\n", "")


@pytest.fixture
def debug_reset() -> object:
    """`--debug` sets the process's logging: put it back after the test."""
    root = logging.getLogger().level
    yield
    cli_main._set_debug(False)
    logging.getLogger().setLevel(root)


@pytest.mark.parametrize(
    "argv",
    [
        ["--debug", "inspect", "{missing}"],
        ["inspect", "--debug", "{missing}"],
        ["inspect", "{missing}", "--debug"],
        ["inspect", "{missing}", "--json", "--debug"],
    ],
)
def test_debug_anywhere_raises_the_error_with_its_traceback(
    argv: list[str], tmp_path: Path, debug_reset: object
) -> None:
    missing = str(tmp_path / "missing")
    with pytest.raises(statectl.SavepointError, match="no such file or directory"):
        cli_main.main([missing if arg == "{missing}" else arg for arg in argv])


def test_without_debug_the_error_is_one_line(tmp_path: Path, debug_reset: object) -> None:
    with pytest.raises(statectl.SavepointError):
        cli_main.main(["inspect", str(tmp_path / "missing"), "--debug"])  # not on for the next
    code, out, err = run_cli("inspect", str(tmp_path / "missing"))
    assert (code, out) == (1, "")
    assert err == f"statectl: error: {tmp_path / 'missing'}: no such file or directory\n"


@pytest.mark.parametrize("name", ["inspect", "rescale", "upgrade"])
def test_every_command_lists_debug(name: str) -> None:
    code, out, _ = run_cli(name, "--help")
    assert code == 0
    assert "--debug" in out


def test_completion_options_are_offered() -> None:
    code, out, _ = run_cli("--help")
    assert code == 0
    assert "--install-completion" in out
    assert "--show-completion" in out


def test_completion_script_and_completions() -> None:
    """The shell's side: the bash script, then what it asks statectl for `statectl insp<TAB>`
    and `statectl rescale --max<TAB>`."""
    statectl_exe = Path(sys.executable).parent / "statectl"
    script = subprocess.run(
        [statectl_exe, "--show-completion", "bash"], capture_output=True, text=True, check=True
    ).stdout
    assert "_STATECTL_COMPLETE=complete_bash" in script
    for words, expected in (("statectl insp", "inspect"), ("statectl rescale --max", "--max-p")):
        env = {
            **os.environ,
            "_STATECTL_COMPLETE": "complete_bash",
            "COMP_WORDS": words,
            "COMP_CWORD": str(len(words.split()) - 1),
        }
        done = subprocess.run(
            [statectl_exe], capture_output=True, text=True, env=env, check=False, timeout=60
        )
        assert done.returncode == 0, done.stderr
        assert [line for line in done.stdout.split() if line.startswith(expected)], done.stdout


def test_png_says_what_it_wrote(tmp_path: Path) -> None:
    source = str(fixture_savepoint("rocksdb_native_full"))
    target = tmp_path / "plan.png"
    code, out, err = run_cli("plan", source, "-p", "3", "--png", str(target))
    assert (code, err) == (0, "")
    assert out.splitlines()[-1] == f"Wrote {target}"
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    target.unlink()
    code, out, err = run_cli("plan", source, "-p", "3", "--png", str(target), "--json")
    assert code == 0
    assert json.loads(out)["operators"]  # stdout: the JSON document alone
    assert err == f"statectl: wrote {target}\n"
    assert target.exists()
