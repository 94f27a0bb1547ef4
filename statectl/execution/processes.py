"""Worker processes of statectl itself, for the tasks that hold the GIL, on one machine.

Some tasks move rows one by one through Python (RocksDB rows that rocksdict iterates and
`SstFileWriter` takes a call per row, heap-format entries, upgrade's trial of every value):
threads cannot share the cores for them. A pool of worker processes, one per core, takes them
instead (`head_start.HeadStartEngine`), so that this work needs no Spark, and no Java, on one
machine.

The pool starts on first use, serves every later job of the process and is shut down at exit.
Its workers are forked by a fork server (spawned where there is none), never forked from the
driver itself: the driver holds threads (the head start's, Spark's start) and may hold a JVM's
gateway, and a fork would copy their locks in whatever state they were. Functions and tasks
travel as they do to Spark, pickled with cloudpickle (closures, lambdas, modules shipped by
value); statectl's errors and I/O errors come back as `spark.TaskFailure`s and are raised here
as they were raised there. As with any multiprocessing but fork, each worker imports the main
module of a script again (as `__mp_main__`): a script that calls the library guards its entry
point with `if __name__ == "__main__":` (`python -m statectl`, the `statectl` command and
`python -c` need nothing).
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import multiprocessing
import pickle
import signal
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, TypeVar

from statectl.errors import StatectlError
from statectl.execution.engine import usable_cores
from statectl.execution.spark import TaskFailure, guarded

T = TypeVar("T")
R = TypeVar("R")

_pool: ProcessPoolExecutor | None = None
_pool_lock = threading.Lock()


def worker_pool() -> ProcessPoolExecutor:
    """The process's pool of workers, started on first use (and again after one broke)."""
    global _pool
    with _pool_lock:
        if _pool is None or getattr(_pool, "_broken", False):
            start_fork_server()
            _pool = ProcessPoolExecutor(
                usable_cores(), mp_context=_start_context(), initializer=_take_interrupts
            )
            atexit.register(_pool.shutdown, wait=True, cancel_futures=True)
        return _pool


def start_fork_server() -> None:
    """Start the fork server now, without waiting for it: it imports the tasks' modules (a
    third of a second) while the driver reads and plans, rather than once the first task is
    submitted. Where there is no fork server, nothing (spawned workers start on first use).

    It starts with Ctrl-C held back (blocked), which it otherwise ignores only once those
    modules are imported: a Ctrl-C before printed its traceback. A Ctrl-C meanwhile reaches
    this process once the server is spawned; its workers take theirs back as they start
    (`_take_interrupts`), so that an interrupted command's tasks end at once."""
    if _start_context().get_start_method() != "forkserver":
        return
    from multiprocessing import forkserver, resource_tracker

    # The server starts the resource tracker, whose start unblocks SIGINT: started first.
    resource_tracker.ensure_running()
    with _interrupts_held():
        forkserver.ensure_running()


@contextlib.contextmanager
def _interrupts_held() -> Iterator[None]:
    """SIGINT blocked in this thread meanwhile (a process started meanwhile inherits the
    mask), and delivered after if it came."""
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)


def _take_interrupts() -> None:
    """In a new worker: SIGINT no longer blocked (the fork server's mask), so that Ctrl-C
    interrupts its task as it does the driver (a worker of a driver that ignores Ctrl-C, as a
    shell's background job does, ignores it too)."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def _start_context() -> multiprocessing.context.BaseContext:
    """A fork server where the platform has one (workers forked from a clean process that has
    imported this module once), else spawn."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    # Not `__main__` (the default): the fork server must not run the CLI's entry point.
    context.set_forkserver_preload([__name__, "pyspark.cloudpickle", *TASK_MODULES])
    return context


# What rewriting tasks import, imported once by the fork server, while the driver plans, rather
# than by each worker it forks (half a second apiece: pyarrow's first conversion of Python
# objects imports pandas, which `entry_chunks` sets off).
TASK_MODULES = (
    "statectl.savepoint.entry_chunks",
    "statectl.savepoint.keyed_rewrite",
    "statectl.savepoint.tables",
)


def shipped(fn: Callable[[T], R]) -> bytes:
    """`fn` pickled for the workers, once per job: statectl's errors inside it come back as
    `TaskFailure`s."""
    return _dumps(guarded(fn))


def submit(fn: bytes, task: T) -> Future[Any]:
    """Run `fn` (from `shipped`) over `task` in a worker; `result` gives what it returned."""
    return worker_pool().submit(_call, fn, _dumps(task))


def result(future: Future[Any]) -> Any:
    """What the task of `future` returned; its error raised, statectl's as it was raised."""
    try:
        returned = pickle.loads(future.result())
    except BrokenProcessPool as exc:
        raise StatectlError(
            "a worker process of statectl ended abruptly: out of memory, or a script calling "
            'statectl without `if __name__ == "__main__":` (see its stderr)'
        ) from exc
    if isinstance(returned, TaskFailure):
        raise returned.error()
    return returned


def _call(fn: bytes, task: bytes) -> bytes:
    """In a worker: `fn` over `task`, pickled with cloudpickle (a result of any type)."""
    return _dumps(_loaded(fn)(pickle.loads(task)))


@functools.lru_cache(maxsize=4)
def _loaded(fn: bytes) -> Callable[[Any], Any]:
    """A shipped function, unpickled once per worker and job rather than once per task."""
    loaded: Callable[[Any], Any] = pickle.loads(fn)
    return loaded


def _dumps(value: object) -> bytes:
    """`value` pickled with cloudpickle: functions by value where plain pickle cannot."""
    from pyspark import cloudpickle  # the pickler Spark ships tasks with: no JVM needed

    pickled: bytes = cloudpickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)  # type: ignore[no-untyped-call]
    return pickled
