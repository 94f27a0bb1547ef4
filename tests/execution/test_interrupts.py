"""A Ctrl-C during a Spark call stays a KeyboardInterrupt (the CLI's one line, exit 130), and
py4j's log of the connections it cut stays off stderr. tests/reliability/test_any_machine.py
presses Ctrl-C on real runs."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from py4j.protocol import Py4JNetworkError

from statectl.execution.spark_failures import JOB_FAILED, interrupted, quiet_py4j, reports_failures


def _cleanup_failing_after_ctrl_c() -> None:
    """What py4j does when Ctrl-C cuts a call: its clean-up writes to the socket that Spark's
    JVM, stopped by the same Ctrl-C, has closed."""
    try:
        raise KeyboardInterrupt
    except KeyboardInterrupt:
        raise Py4JNetworkError("Answer from Java side is empty") from None


def test_an_error_raised_while_a_ctrl_c_was_handled_is_the_ctrl_c() -> None:
    with pytest.raises(Py4JNetworkError) as raised:
        _cleanup_failing_after_ctrl_c()
    assert raised.value.__cause__ is None  # `from None` keeps the context all the same
    assert interrupted(raised.value)
    assert not interrupted(Py4JNetworkError("Answer from Java side is empty"))


def test_a_spark_call_cut_by_ctrl_c_raises_keyboard_interrupt() -> None:
    """Not `lost the connection to Spark's JVM` (exit 1): the user pressed Ctrl-C."""
    with pytest.raises(KeyboardInterrupt):
        reports_failures(JOB_FAILED)(_cleanup_failing_after_ctrl_c)()


@pytest.fixture
def levels() -> Iterator[None]:
    root, py4j = logging.getLogger(), logging.getLogger("py4j")
    saved = root.level, py4j.level
    yield
    root.setLevel(saved[0])
    py4j.setLevel(saved[1])


def test_py4j_stays_as_quiet_as_the_cli_has_logging(levels: None) -> None:
    logging.getLogger().setLevel(logging.CRITICAL)  # the CLI without --debug
    logging.getLogger("py4j").setLevel(logging.NOTSET)
    quiet_py4j()
    assert not logging.getLogger("py4j.clientserver").isEnabledFor(logging.ERROR)


def test_py4j_chatter_is_cut_to_warnings(levels: None) -> None:
    logging.getLogger().setLevel(logging.DEBUG)  # a library user's verbose logging
    logging.getLogger("py4j").setLevel(logging.NOTSET)
    quiet_py4j()
    assert logging.getLogger("py4j").level == logging.WARNING


def test_ctrl_c_is_noted_as_it_comes_and_quiets_the_jvm_output(
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """What Spark warns of after a Ctrl-C (the broadcasts the cut call's clean-up removes) is
    not copied; at exit the JVM is stopped rather than left to its tasks."""
    import os
    import signal
    import threading
    import time
    from types import SimpleNamespace

    from statectl.execution import spark_failures

    read_end, write_end = os.pipe()
    stderr = spark_failures.JvmStderr(read_end)
    jvm = SimpleNamespace(interrupted=threading.Event(), stderr=stderr)
    monkeypatch.setattr(spark_failures, "_launched", jvm)
    monkeypatch.setattr(signal, "getsignal", lambda _: signal.default_int_handler)
    installed: list[object] = []
    monkeypatch.setattr(signal, "signal", lambda _, handler: installed.append(handler))
    spark_failures.watch_interrupts()
    assert installed == [spark_failures._interrupt]
    os.write(write_end, b"spark: WARN Before: copied\n")
    copied = ""
    deadline = time.monotonic() + 10
    while not copied and time.monotonic() < deadline:
        time.sleep(0.01)
        copied = capfd.readouterr().err
    assert copied == "spark: WARN Before: copied\n"
    with pytest.raises(KeyboardInterrupt):
        spark_failures._interrupt(signal.SIGINT, None)
    assert jvm.interrupted.is_set()
    os.write(write_end, b"spark: WARN BlockManager: Asked to remove block broadcast_0\n")
    os.close(write_end)
    stderr.last_words()  # the copy has ended
    assert capfd.readouterr().err == ""
