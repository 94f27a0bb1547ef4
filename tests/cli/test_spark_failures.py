"""A command whose Spark fails ends at once with one line on stderr and exit 1, writes nothing
and leaves no process behind: its JVM does not start, runs out of heap, or is killed mid-job.
A query that fails is one line too (PySpark's JSON log and the Java stack trace stay off
stderr).

Each runs the CLI as a user does, as a subprocess in a session of its own (its processes, the
JVM and the Python workers, are that session's): its JVM dies, which the test session's shared
SparkSession must not.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import REPO, fixture_savepoint

pytestmark = pytest.mark.spark

SOURCE = "values/2.3.0-hashmap-canonical"
KEEP_ALL = "SELECT key, namespace, value FROM state"
START_BUDGET = 240  # the JVM's start on a loaded 2-core machine, and reading the savepoint
ENDS_WITHIN = 30  # once Spark failed


def _transform(destination: Path, sql: str, *conf: str) -> subprocess.Popen[str]:
    argv = ["transform", str(fixture_savepoint(SOURCE)), "-o", str(destination)]
    argv += ["--operator", "values", "--state", "long", "--sql", sql]
    argv += [arg for setting in conf for arg in ("--conf", setting)]
    return subprocess.Popen(
        [sys.executable, "-m", "statectl", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        start_new_session=True,  # its session: the JVM and the Python workers are in it
    )


def _ended(process: subprocess.Popen[str], timeout: float) -> tuple[int, str]:
    """The exit code and stderr once the CLI ended, and nothing of its session runs."""
    _, stderr = process.communicate(timeout=timeout)
    assert _left_running(process.pid) == [], "a process of the command outlived it"
    return process.returncode, stderr


def _left_running(session: int) -> list[str]:
    """The processes of `session` still running (zombies excluded: they hold nothing)."""
    found = subprocess.run(
        ["ps", "-s", str(session), "-o", "pid=,stat=,args="], capture_output=True, text=True
    )
    return [line for line in found.stdout.splitlines() if line.split()[1][0] != "Z"]


def _assert_one_error_line(stderr: str, *words: str) -> None:
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("statectl: error: "), stderr
    for word in words:
        assert word in lines[0], stderr


def _assert_nothing_written(destination: Path) -> None:
    assert not destination.exists()
    assert list(destination.parent.iterdir()) == [], "a staging folder was left behind"


@pytest.mark.parametrize(
    ("memory", "words"),
    [
        ("1m", ("Spark's JVM did not start", "Too small")),  # the JVM refuses that heap
        ("200m", ("Spark did not start", "spark.driver.memory")),  # Spark refuses it
    ],
)
def test_a_jvm_that_does_not_start(tmp_path: Path, memory: str, words: tuple[str, ...]) -> None:
    destination = tmp_path / "out" / "edited"
    destination.parent.mkdir()
    cli = _transform(destination, KEEP_ALL, f"spark.driver.memory={memory}")
    code, stderr = _ended(cli, START_BUDGET)
    assert code == 1
    _assert_one_error_line(stderr, *words)
    _assert_nothing_written(destination)


def test_a_jvm_out_of_heap_ends_the_command(tmp_path: Path) -> None:
    """A query that needs more heap than the JVM has (a 1.5 GB string in a 512 MiB heap): the
    JVM exits, and the command says to give it more, at once (it used to wait forever for the
    answer of a JVM that had lost the thread that would give it)."""
    destination = tmp_path / "out" / "edited"
    destination.parent.mkdir()
    sql = f"{KEEP_ALL} WHERE length(repeat('x', 1500000000)) > 0"
    cli = _transform(destination, sql, "spark.driver.memory=512m")
    code, stderr = _ended(cli, START_BUDGET + ENDS_WITHIN)
    assert code == 1
    _assert_one_error_line(stderr, "ran out of memory", "--conf spark.driver.memory=1g")
    _assert_nothing_written(destination)


def test_a_jvm_killed_mid_job_ends_the_command(tmp_path: Path) -> None:
    """The JVM is killed (as the kernel's OOM killer would) while the query runs: a task marks
    that it started (a file in the JVM's temporary folder), then sleeps."""
    destination = tmp_path / "out" / "edited"
    destination.parent.mkdir()
    jvm_tmp = tmp_path / "jvm-tmp"
    jvm_tmp.mkdir()
    started = "reflect('java.io.File', 'createTempFile', 'job-', '.started') IS NOT NULL"
    sleeps = "reflect('java.lang.Thread', 'sleep', 600000L) IS NULL"
    cli = _transform(
        destination,
        f"{KEEP_ALL} WHERE {started} AND {sleeps}",
        f"spark.driver.extraJavaOptions=-Djava.io.tmpdir={jvm_tmp}",
    )
    deadline = time.monotonic() + START_BUDGET
    while not list(jvm_tmp.glob("job-*.started")):
        assert cli.poll() is None, cli.communicate()
        assert time.monotonic() < deadline, "the query never started"
        time.sleep(0.1)
    os.kill(_jvm_of(cli.pid), signal.SIGKILL)
    killed = time.monotonic()
    code, stderr = _ended(cli, ENDS_WITHIN)
    assert time.monotonic() - killed < ENDS_WITHIN
    assert code == 1
    _assert_one_error_line(stderr, "Spark's JVM was killed by SIGKILL")
    _assert_nothing_written(destination)


def _jvm_of(pid: int) -> int:
    found = subprocess.run(["pgrep", "-P", str(pid), "java"], capture_output=True, text=True)
    (jvm,) = found.stdout.split()
    return int(jvm)


def test_a_failing_query_is_one_line(tmp_path: Path) -> None:
    destination = tmp_path / "out" / "edited"
    destination.parent.mkdir()
    cli = _transform(destination, "SELECT key, namespace, no_such_column AS value FROM state")
    code, stderr = _ended(cli, START_BUDGET)
    assert code == 1
    _assert_one_error_line(stderr, "the SQL query failed", "no_such_column")
    _assert_nothing_written(destination)
