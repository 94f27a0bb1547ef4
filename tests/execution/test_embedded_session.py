"""What statectl sets up for an embedded Spark session (local masters), beside the caller's."""

from __future__ import annotations

from typing import Any

import pytest

from statectl.execution.spark import _gc_chosen, _local_cores


@pytest.mark.parametrize(
    ("master", "cores"),
    [("local", 1), ("local[3]", 3), ("local[4,2]", 4), ("local[*]", None)],
)
def test_the_cores_of_a_local_master(master: str, cores: int | None) -> None:
    import os

    assert _local_cores(master) == (cores or len(os.sched_getaffinity(0)))


def test_the_sessions_idle_python_workers_are_one_per_core_and_its_jvm_collects_serially(
    spark: Any,
) -> None:
    """The suite's session (`local[2]`): Spark would keep every idle worker it started."""
    conf = spark.sparkContext.getConf()
    assert conf.get("spark.python.factory.idleWorkerMaxPoolSize") == "2"
    assert "-XX:+UseSerialGC" in conf.get("spark.driver.extraJavaOptions")


def test_a_collector_the_caller_or_the_environment_chose_is_kept(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two collectors are an error the JVM does not start with: statectl then picks none."""
    assert _gc_chosen("-Xss4m -XX:+UseG1GC")
    assert not _gc_chosen("-Xss4m")
    monkeypatch.setenv("JAVA_TOOL_OPTIONS", "-XX:+UseParallelGC")
    assert _gc_chosen(None)
