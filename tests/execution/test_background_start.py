"""SparkEngine.start_in_background: the context starts in a thread, `start` waits for it and
raises what it raised (no JVM here: the context factory is replaced)."""

from __future__ import annotations

import threading

import pytest

from statectl.errors import StatectlError
from statectl.execution import spark
from statectl.execution.engine import LocalEngine


def test_start_waits_for_the_background_start(monkeypatch: pytest.MonkeyPatch) -> None:
    release = threading.Event()
    calls: list[tuple[str, str]] = []

    def context(master: str, conf: dict[str, str]) -> None:
        calls.append((master, threading.current_thread().name))
        release.wait(5)

    monkeypatch.setattr(spark, "spark_context", context)
    monkeypatch.setattr(spark, "_context_running", lambda: False)
    engine = spark.SparkEngine("local[1]")
    engine.start_in_background()
    engine.start_in_background()  # once is enough
    release.set()
    engine.start()
    assert calls[0] == ("local[1]", "statectl-spark-start")
    assert [name for _, name in calls[1:]] == [threading.current_thread().name]


def test_an_error_of_the_background_start_is_raised_by_start(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def context(master: str, conf: dict[str, str]) -> None:
        if threading.current_thread().name == "statectl-spark-start":
            raise StatectlError("cannot start Spark", master)

    monkeypatch.setattr(spark, "spark_context", context)
    monkeypatch.setattr(spark, "_context_running", lambda: False)
    engine = spark.SparkEngine("spark://nowhere:7077")
    engine.start_in_background()
    with pytest.raises(StatectlError, match=r"^spark://nowhere:7077: cannot start Spark$"):
        engine.start()


def test_a_running_context_is_not_started_again(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(spark, "_context_running", lambda: True)
    engine = spark.SparkEngine()
    engine.start_in_background()
    assert engine._starting is None


def test_the_local_engine_has_nothing_to_start() -> None:
    LocalEngine().start_in_background()
