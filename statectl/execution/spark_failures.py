"""When Spark fails, the command ends at once with one line saying what failed and what to
change; nothing of Spark outlives it.

Spark tells of a failure in its own ways: on the JVM's stderr (log records with stack traces,
the JVM's last words), in PySpark's JSON log of a failed query, in py4j's log of a broken
connection and, once the JVM is gone, with a ConnectionRefusedError from the next call. Here:

- the JVM's stderr is copied to ours but for errors, stack traces and the JVM's own messages,
  which are kept for the error's line instead (with DEBUG logging, `statectl --debug`, every
  line is copied);
- the exceptions become one `SparkError`; a JVM out of heap exits (`JVM_OPTIONS`) rather than
  live on without the thread that died, leaving the caller waiting for an answer forever;
- at exit, the JVM is stopped and waited for, and whatever it started that still runs (Python
  workers, whose daemon outlives a killed JVM by a moment) is killed: every process launched
  from it carries this launch's token in its environment.
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import functools
import logging
import os
import re
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from statectl.errors import SparkError, StatectlError, one_line
from statectl.execution import java

if TYPE_CHECKING:
    from py4j.java_gateway import JavaGateway
    from pyspark import SparkConf

F = TypeVar("F", bound=Callable[..., Any])

LOGGER = logging.getLogger("statectl.spark")
JVM_OPTIONS = "-XX:+ExitOnOutOfMemoryError"
DID_NOT_START = "Spark did not start"
JOB_FAILED = "the Spark job failed"

# Printed by the JVM itself at start-up (so no logging setting hides it): Spark's launcher
# always adds `--add-modules=jdk.incubator.vector` (JavaModuleOptions, Spark 4).
_INCUBATOR_WARNING = b"WARNING: Using incubator modules: jdk.incubator.vector"
_WARNING_RECORD = b"spark: WARN "  # log4j2.properties' pattern, at level WARN
_OWNER_VARIABLE = "STATECTL_SPARK_OWNER"
_DEFAULT_DRIVER_MEMORY = "1g"  # Spark's


class JvmStderr:
    """The JVM's stderr (its Python workers' too), read by a daemon thread: Spark's warnings
    are copied to ours, a line each; the other lines (errors and their stack traces, the
    JVM's own messages) are kept, the last of them, for the error that tells of a failure."""

    def __init__(self, read_end: int) -> None:
        self.kept: collections.deque[str] = collections.deque(maxlen=200)
        self.quiet = threading.Event()  # after a Ctrl-C: the user was told, copy no more
        self._reader = threading.Thread(
            target=self._copy, args=(read_end,), name="statectl-jvm-stderr", daemon=True
        )
        self._reader.start()

    def _copy(self, read_end: int) -> None:
        with os.fdopen(read_end, "rb") as jvm, os.fdopen(os.dup(2), "wb") as stderr:
            for line in jvm:
                if line.rstrip(b"\r\n") == _INCUBATOR_WARNING:
                    continue
                warning = line.startswith(_WARNING_RECORD)
                if not warning:
                    self.kept.append(line.decode(errors="replace").rstrip())
                if (warning and not self.quiet.is_set()) or LOGGER.isEnabledFor(logging.DEBUG):
                    stderr.write(line)
                    stderr.flush()

    def last_words(self, timeout: float = 2.0) -> list[str]:
        """The kept lines, once everything holding the JVM's stderr has closed it (it exited),
        or after `timeout`."""
        self._reader.join(timeout)
        return [line for line in self.kept if line.strip()]


@dataclass(frozen=True)
class Jvm:
    """The JVM this process launched, and what tells how it ended."""

    process: subprocess.Popen[bytes]
    stderr: JvmStderr
    token: str  # in the environment of the JVM and of every process it starts
    driver_memory: str
    failed: threading.Event = field(default_factory=threading.Event)  # a SparkError was raised
    interrupted: threading.Event = field(default_factory=threading.Event)  # a Ctrl-C cut a call


_launched: Jvm | None = None


def launch_jvm(conf: SparkConf) -> JavaGateway:
    """pyspark's gateway JVM, its output copied to our stderr as `JvmStderr` does (HotSpot
    writes its own errors to stdout, which is ours to write JSON to); stopped at exit. A JVM
    that fails to start raises a SparkError with its last words."""
    from pyspark.errors import PySparkRuntimeError
    from pyspark.java_gateway import launch_gateway

    global _launched
    # spark-submit's own JVM (PYSPARK_GATEWAY_PORT) is up already; else find a Java first.
    home = None if "PYSPARK_GATEWAY_PORT" in os.environ else java.java_home()
    read_end, write_end = os.pipe()
    stderr = JvmStderr(read_end)  # read before the launch: a JVM that fails to start says why
    token = uuid.uuid4().hex
    try:
        try:
            with _environment(_OWNER_VARIABLE, token), _environment("JAVA_HOME", home):
                output = {"stdout": write_end, "stderr": write_end}  # the JVM's errors: stdout
                gateway = launch_gateway(conf, popen_kwargs=output)  # type: ignore[no-untyped-call]
        finally:
            os.close(write_end)  # the JVM holds its own copy; the copy ends when it exits
    except PySparkRuntimeError as exc:  # JAVA_GATEWAY_EXITED: it ended before it listened
        last_words = stderr.last_words()
        said = java.advice(last_words) or "; ".join(last_words[-3:]) or "it exited at once"
        raise SparkError(f"Spark's JVM did not start: {said}") from exc
    if gateway.proc is not None:  # None: a JVM of spark-submit's (PYSPARK_GATEWAY_PORT)
        memory = conf.get("spark.driver.memory") or _DEFAULT_DRIVER_MEMORY
        _launched = Jvm(gateway.proc, stderr, token, memory)
        atexit.register(_end, _launched)
    return gateway


@contextlib.contextmanager
def _environment(name: str, value: str | None) -> Iterator[None]:
    """`name` set to `value` meanwhile (None: left as it is)."""
    if value is None:
        yield
        return
    previous = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if previous is None:
            del os.environ[name]
        else:
            os.environ[name] = previous


# --- exceptions --------------------------------------------------------------------------


def reports_failures(doing: str) -> Callable[[F], F]:
    """`fn`, its Spark failures raised as SparkErrors (`spark_error`)."""

    def decorate(fn: F) -> F:
        @functools.wraps(fn)
        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                return fn(*args, **kwargs)
            except KeyboardInterrupt:
                _note_interrupt()
                raise
            except Exception as exc:
                if interrupted(exc):
                    _note_interrupt()
                    raise KeyboardInterrupt from None
                error = spark_error(exc, doing)
                if error is None or error is exc:
                    raise
                raise error from exc

        return call  # type: ignore[return-value]

    return decorate


def interrupted(exc: BaseException) -> bool:
    """Whether `exc` was raised while a KeyboardInterrupt was being handled: py4j, cleaning
    up a connection the interrupt cut, fails on the socket the JVM (which got the same Ctrl-C)
    closed, and its error would hide the interrupt."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, KeyboardInterrupt):
            return True
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return False


def _note_interrupt() -> None:
    """A Ctrl-C cut a call into Spark: the JVM is stopped at exit. It would not stop on the
    Ctrl-C itself, as PySpark launches it ignoring SIGINT (it ends once our end closes its
    stdin, but only after its tasks: a stalled one holds it, and its workers, up)."""
    if _launched is not None:
        _launched.interrupted.set()
        _launched.stderr.quiet.set()  # what Spark warns of on its way out is no news


def watch_interrupts() -> None:
    """Note a Ctrl-C as it comes (`_note_interrupt`), before the calls it cuts clean up (and
    Spark warns of what they cleaned), where SIGINT is Python's own KeyboardInterrupt; in the
    main thread only, where Python runs signal handlers."""
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _interrupt)


def _interrupt(signum: int, frame: object) -> None:
    _note_interrupt()
    raise KeyboardInterrupt


def spark_error(exc: BaseException, doing: str) -> SparkError | None:
    """The SparkError telling what `exc`, from a call into Spark, means (`doing`: what failed,
    DID_NOT_START or JOB_FAILED, unless the JVM died), or None for an error that is not Spark's
    (statectl's own, raised by a task)."""
    if isinstance(exc, StatectlError) and not isinstance(exc, SparkError):
        return None
    error = exc if isinstance(exc, SparkError) else _spark_error(exc, doing)
    if error is not None and _launched is not None:
        _launched.failed.set()
    return error


def _spark_error(exc: BaseException, doing: str) -> SparkError | None:
    from py4j.protocol import Py4JError, Py4JJavaError
    from pyspark.errors import PySparkException

    answered = isinstance(exc, Py4JJavaError | PySparkException)  # the JVM lives
    connection_lost = isinstance(exc, Py4JError | ConnectionError) and not answered
    died = jvm_death(wait=2.0 if connection_lost else 0.0)
    if died is not None:
        return died
    if isinstance(exc, Py4JJavaError):
        return SparkError(f"{doing}: {java_message(str(exc.java_exception.toString()))}")
    if isinstance(exc, PySparkException):
        return SparkError(f"{doing}: {one_line(str(exc).strip())}")
    if connection_lost:
        return SparkError(f"lost the connection to Spark's JVM: {one_line(str(exc))}")
    return None


def jvm_death(wait: float = 0.0) -> SparkError | None:
    """How the JVM this process launched ended, if it did. `wait`: how long to give it to
    exit (its broken connection may be seen first)."""
    jvm = _launched
    if jvm is None:
        return None
    try:
        code = jvm.process.wait(timeout=wait) if wait else jvm.process.poll()
    except subprocess.TimeoutExpired:
        return None
    if code is None:
        return None
    return SparkError(death_message(code, jvm.stderr.last_words(), jvm.driver_memory))


def death_message(code: int, last_words: list[str], driver_memory: str) -> str:
    """What a JVM's exit code (negative: the signal that killed it) and last words tell."""
    out_of_memory = next((w for w in reversed(last_words) if "OutOfMemoryError" in w), None)
    if out_of_memory is not None or code == 3:  # 3: -XX:+ExitOnOutOfMemoryError's exit
        what = re.search(r"java\.lang\.OutOfMemoryError.*", out_of_memory or "")
        reason = what[0] if what else "java.lang.OutOfMemoryError"
        return (
            f"Spark's JVM ran out of memory ({reason}); give it more: --conf "
            f"spark.driver.memory={doubled(driver_memory)} (it had {driver_memory})"
        )
    if code < 0:
        name = signal.Signals(-code).name
        advice = ""
        if -code == signal.SIGKILL:
            advice = (
                " (by the kernel's OOM killer if the machine ran out of memory: lower --conf "
                "spark.driver.memory, or use fewer cores: --master local[2])"
            )
        return f"Spark's JVM was killed by {name}{advice}"
    said = f": {last_words[-1]}" if last_words else ""
    return f"Spark's JVM exited with code {code}{said}"


def java_message(text: str) -> str:
    """A Java exception's `toString` up to its first stack frame, as one line, without the
    class name when it is one of Spark's (its messages name their error class)."""
    lines = []
    for line in text.splitlines():
        if line.lstrip().startswith("at ") or line.startswith(("\tat ", "Caused by:")):
            break
        lines.append(line.strip())
    message = re.sub(r"^org\.apache\.spark\.\w+Exception: ", "", " ".join(lines))
    if "OutOfMemoryError" in message:
        message += (
            " (give Spark more memory: --conf spark.executor.memory=... on a cluster, "
            "spark.driver.memory=... embedded)"
        )
    return one_line(message)


_SIZE = re.compile(r"(\d+)\s*([kmgt]?)b?", re.IGNORECASE)
_UNITS = "kmgt"


def doubled(size: str) -> str:
    """Twice a JVM memory size ("512m" → "1g"), or "more than <size>" if it is not one."""
    parsed = _SIZE.fullmatch(size.strip())
    if parsed is None or not parsed[2]:
        return f"more than {size}"
    number, unit = int(parsed[1]) * 2, _UNITS.index(parsed[2].lower())
    while number % 1024 == 0 and unit < len(_UNITS) - 1:
        number, unit = number // 1024, unit + 1
    return f"{number}{_UNITS[unit]}"


def quiet_py4j() -> None:
    """py4j's INFO records are chatter: at most its warnings, unless logging is quieter already
    (the CLI's is, but with `--debug`): a Ctrl-C would otherwise print py4j's ERROR records of
    the connections it cut, tracebacks and all (py4j's `logging.exception` gives the root
    logger a handler that prints them)."""
    py4j = logging.getLogger("py4j")
    if py4j.getEffectiveLevel() < logging.WARNING:
        py4j.setLevel(logging.WARNING)


def quiet_query_logs() -> None:
    """PySpark logs a failed query's error as JSON with the Java stack trace on stderr before
    raising it; the error raised says it (as one line, or with `--debug` its traceback)."""
    for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
        logging.getLogger(name).setLevel(logging.CRITICAL)


# --- at exit -----------------------------------------------------------------------------


def _end(jvm: Jvm) -> None:
    """At exit after a Spark failure or a Ctrl-C: stop the context and the JVM and wait for
    them, then kill what the JVM started that still runs; a JVM that died is reaped (no zombie
    left). Otherwise the JVM stops on its own once we exited (its stdin closes), as Spark has
    it: a command that succeeded does not wait for that."""
    interrupted = jvm.interrupted.is_set()
    if not (jvm.failed.is_set() or interrupted):
        return
    if jvm.process.poll() is None:
        # After a Ctrl-C the JVM may be stuck in a task: no call into it, which could hang.
        if interrupted:
            _stop_accumulator_server()
        else:
            _stop_context()
        jvm.process.terminate()  # its shutdown hooks stop Spark and its Python workers
        try:  # a user who pressed Ctrl-C waits less
            jvm.process.wait(timeout=3 if interrupted else 10)
        except subprocess.TimeoutExpired:
            jvm.process.kill()
            jvm.process.wait()
    _kill(_processes_with(jvm.token))


def _stop_context() -> None:
    """The active SparkContext stopped: its accumulator server (a thread here) first, which
    would print the traceback of the connection the JVM's stop breaks."""
    from pyspark import SparkContext

    context = SparkContext._active_spark_context
    if context is not None:
        with contextlib.suppress(Exception):
            context.stop()


def _stop_accumulator_server() -> None:
    """The accumulator server's thread stopped, without a call into the JVM (`_stop_context`
    makes one): it would print the traceback of the connection the JVM's end breaks."""
    from pyspark import SparkContext

    context = SparkContext._active_spark_context
    server = getattr(context, "_accumulatorServer", None)
    if server is not None:
        with contextlib.suppress(Exception):
            server.shutdown()


def _processes_with(token: str) -> list[int]:
    """The processes (but this one) whose environment holds `token`."""
    marker = f"{_OWNER_VARIABLE}={token}".encode()
    found = []
    for environ in Path("/proc").glob("[0-9]*/environ"):
        with contextlib.suppress(OSError):
            if marker in environ.read_bytes().split(b"\0"):
                found.append(int(environ.parent.name))
    return [pid for pid in found if pid != os.getpid()]


def _kill(pids: list[int], timeout: float = 5.0) -> None:
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + timeout
    while pids and time.monotonic() < deadline:
        pids = [pid for pid in pids if _running(pid)]
        time.sleep(0.02)


def _running(pid: int) -> bool:
    """Whether `pid` exists and is not a zombie (its parent, init, reaps it)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"
