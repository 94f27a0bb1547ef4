"""Running plan tasks as a PySpark job: one Spark task per new subtask file (or carried file).

`local[*]` starts an embedded session; any other `--master` is a cluster, to which the
`statectl` package is shipped as a zip (workers need its dependencies, see README).
Spark's console progress is off and its log level WARN; progress is reported through a
callback fed by Spark's status tracker.
"""

from __future__ import annotations

import atexit
import logging
import os
import shutil
import sys
import tempfile
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from statectl import errors
from statectl.rescale.execute import Result, Task, run_task

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[*]"
ProgressCallback = Callable[[int, int], None]  # (completed tasks, total tasks)

_QUIET_CONF = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "8",
}


def spark_session(
    master: str = DEFAULT_MASTER, conf: Mapping[str, str] | None = None
) -> SparkSession:
    """The active SparkSession, or a new one; flags win over spark-defaults.conf."""
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    builder = SparkSession.builder.master(master).appName("statectl")
    log_config = Path(__file__).with_name("log4j2.properties")
    settings = {
        **_QUIET_CONF,
        "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile={log_config.as_uri()}",
        **(conf or {}),
    }
    if master.startswith("local"):
        # An embedded session talks to nothing but itself, and its Python workers must see
        # the driver's packages: PySpark otherwise starts whatever `python3` is on PATH.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        settings.setdefault("spark.driver.host", "127.0.0.1")
        settings.setdefault("spark.driver.bindAddress", "127.0.0.1")
    for key, value in settings.items():
        builder = builder.config(key, value)
    logging.getLogger("py4j").setLevel(logging.WARNING)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    if not master.startswith("local"):
        _ship_package(session)
    return session


def _ship_package(session: SparkSession) -> None:
    """Put `statectl` on the executors' Python path (its dependencies must be installed there)."""
    package_dir = Path(__file__).resolve().parents[1]
    scratch = Path(tempfile.mkdtemp(prefix="statectl-pyfiles-"))
    # The driver serves the zip from here for as long as the session lives: remove it at exit.
    atexit.register(shutil.rmtree, scratch, ignore_errors=True)
    archive_base = scratch / "statectl"
    archive = shutil.make_archive(str(archive_base), "zip", package_dir.parent, package_dir.name)
    session.sparkContext.addPyFile(archive)


def run_tasks(
    session: SparkSession,
    tasks: Sequence[Task],
    output_url: str,
    storage_options: dict[str, Any] | None,
    progress: ProgressCallback | None = None,
) -> list[Result]:
    """Run every task once, in parallel; results come back in task order."""
    if not tasks:
        return []
    context = session.sparkContext
    rdd = context.parallelize(list(tasks), numSlices=len(tasks))
    job = rdd.map(guarded(lambda task: run_task(task, output_url, storage_options)))
    group = f"statectl-{uuid.uuid4().hex}"
    context.setJobGroup(group, f"statectl: {len(tasks)} files", interruptOnCancel=True)
    stop = threading.Event()
    watcher = None
    if progress is not None:
        watcher = threading.Thread(
            target=_watch, args=(context, group, len(tasks), progress, stop), daemon=True
        )
        watcher.start()
    try:
        results = raise_failures(job.collect())
    finally:
        stop.set()
        if watcher is not None:
            watcher.join()
    if progress is not None:  # only a job that succeeded has written every file
        progress(len(tasks), len(tasks))
    return results


def _watch(
    context: Any, group: str, total: int, progress: ProgressCallback, stop: threading.Event
) -> None:
    tracker = context.statusTracker()
    while not stop.wait(0.25):
        done = 0
        for job_id in tracker.getJobIdsForGroup(group):
            job = tracker.getJobInfo(job_id)
            for stage_id in job.stageIds if job else ():
                stage = tracker.getStageInfo(stage_id)
                done += stage.numCompletedTasks if stage else 0
        progress(min(done, total), total)


# --- errors inside tasks -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TaskFailure:
    """A task's bad-input error, returned as a value: raised inside a Spark task it would reach
    the driver as a Java exception carrying the worker's traceback instead of one clear line."""

    kind: str  # the StatectlError subclass name
    message: str
    source: str | None

    def error(self) -> errors.StatectlError:
        error_class = getattr(errors, self.kind, errors.StatectlError)
        return error_class(self.message, self.source)


T = TypeVar("T")
R = TypeVar("R")


def guarded(fn: Callable[[T], R]) -> Callable[[T], R | TaskFailure]:
    """`fn` for a Spark task: statectl's own errors and I/O errors come back as TaskFailure."""

    def run(item: T) -> R | TaskFailure:
        try:
            return fn(item)
        except errors.StatectlError as exc:
            return TaskFailure(type(exc).__name__, exc.message, exc.source)
        except OSError as exc:
            source = None if exc.filename is None else str(exc.filename)
            return TaskFailure("SavepointError", exc.strerror or str(exc), source)

    return run


def raise_failures(results: list[Any]) -> list[Any]:
    """The results, after raising the first TaskFailure among them on the driver."""
    for result in results:
        if isinstance(result, TaskFailure):
            raise result.error()
    return results
