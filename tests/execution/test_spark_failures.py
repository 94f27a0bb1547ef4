"""What a dead JVM's exit code and last words, and a failed job's Java exception, say in one
line (the CLI runs of tests/cli/test_spark_failures.py make each happen for real)."""

from __future__ import annotations

import os
import signal

import pytest

from statectl.errors import SparkError
from statectl.execution.spark_failures import death_message, doubled, java_message


@pytest.mark.parametrize(
    ("size", "twice"),
    [("512m", "1g"), ("1g", "2g"), ("1536M", "3g"), ("700m", "1400m"), ("2t", "4t")],
)
def test_doubled(size: str, twice: str) -> None:
    assert doubled(size) == twice


def test_doubled_names_what_it_cannot_read() -> None:
    assert doubled("lots") == "more than lots"
    assert doubled("1024") == "more than 1024"  # bytes: no unit to say it in


def test_an_out_of_memory_exit_says_to_give_more() -> None:
    words = ["Terminating due to java.lang.OutOfMemoryError: Java heap space"]
    message = death_message(3, words, "512m")
    assert message == (
        "Spark's JVM ran out of memory (java.lang.OutOfMemoryError: Java heap space); "
        "give it more: --conf spark.driver.memory=1g (it had 512m)"
    )


def test_a_kill_and_an_exit_say_which() -> None:
    killed = death_message(-signal.SIGKILL, [], "1g")
    assert killed.startswith("Spark's JVM was killed by SIGKILL (by the kernel's OOM killer")
    assert death_message(-signal.SIGTERM, [], "1g") == "Spark's JVM was killed by SIGTERM"
    exited = death_message(1, ["spark: ERROR Foo: first", "the last words"], "1g")
    assert exited == "Spark's JVM exited with code 1: the last words"


def test_a_failed_job_is_its_message_without_the_stack() -> None:
    text = (
        "org.apache.spark.SparkException: Job aborted due to stage failure: Lost task 0.0 "
        "(executor 1): java.lang.OutOfMemoryError: Java heap space\n"
        "\tat org.apache.spark.scheduler.DAGScheduler.failJobAndIndependentStages(X.scala:1)\n"
        "Caused by: java.lang.OutOfMemoryError: Java heap space\n"
    )
    assert java_message(text) == (
        "Job aborted due to stage failure: Lost task 0.0 (executor 1): "
        "java.lang.OutOfMemoryError: Java heap space "
        "(give Spark more memory: --conf spark.executor.memory=... on a cluster, "
        "spark.driver.memory=... embedded)"
    )


def _crash(task: int) -> int:
    os._exit(3)  # the Python worker dies, as one killed for its memory would


@pytest.mark.spark
def test_a_job_whose_worker_dies_fails_in_one_line(spark: object) -> None:
    from statectl.execution.spark import SparkEngine

    with pytest.raises(SparkError) as failed:
        SparkEngine("local[2]").run([0, 1], _crash)
    message = str(failed.value)
    assert message.startswith("the Spark job failed: Job aborted due to stage failure"), message
    assert "Python worker exited unexpectedly" in message, message
    assert "\n" not in message and "\tat " not in message
    assert SparkEngine("local[2]").run([1, 2], abs) == [1, 2]  # the session lives on
