"""`statectl` and `python -m statectl`: worker processes started before the command line.

Rewriting a RocksDB instance (`rescale`, `convert`) runs in statectl's worker processes, forked
by a fork server that first imports the tasks' modules: a third of a second, which the first
task would wait for. Started here, before the command line is imported and parsed (a sixth of a
second) and the savepoint read, that start overlaps them. Which command runs and on which
savepoint is a guess from the arguments (`typer` has not parsed them yet); a wrong one costs
only the server's start, which then serves nothing and ends with this process.

At the end, the objects still alive are frozen out of the cycle collector's reach
(`gc.freeze`): the interpreter's exit then skips walking them.
"""

from __future__ import annotations

import gc
import os
import sys
from collections.abc import Sequence

_ROCKSDB_REWRITES = {"rescale", "convert"}
# With these the tasks run on Spark (or none run): no worker process would be forked.
_NO_WORKERS = {"--no-head-start", "--dry-run", "--help", "-h"}
_SNIFFED_BYTES = 16 << 20  # of `_metadata`: its RocksDB handles name their MANIFEST early


def main() -> None:
    """The command: a RocksDB rewrite's fork server started, then the command line run."""
    try:
        if _rewrites_rocksdb(sys.argv[1:]):
            from statectl.execution import processes

            processes.start_fork_server()
        from statectl.cli.main import main as command_line
    except KeyboardInterrupt:  # a Ctrl-C before the command line would report it: one line too
        sys.stderr.write("statectl: error: interrupted\n")
        sys.exit(130)  # 128 + SIGINT, as the command line exits

    try:
        command_line()
    finally:
        # Whatever is alive now lives until exit: frozen, it is not walked again by the
        # collections the interpreter makes as it exits (a tenth of a second after a rescale).
        gc.freeze()


def _rewrites_rocksdb(args: Sequence[str]) -> bool:
    """Whether `args` seem to rewrite a local savepoint holding RocksDB instances."""
    if not args or args[0] not in _ROCKSDB_REWRITES:
        return False
    if any(arg.split("=")[0] in _NO_WORKERS for arg in args):
        return False
    if not (_option_value(args, "--master") or "local").startswith("local"):
        return False  # a cluster's executors take every task
    if args[0] == "convert" and _option_value(args, "--format") == "native":
        return True  # the instances are written by worker processes
    return any(_names_rocksdb_files(arg) for arg in args[1:] if not arg.startswith("-"))


def _option_value(args: Sequence[str], option: str) -> str | None:
    """The value of `option` given as `--option value` or `--option=value`; None if absent."""
    for arg, following in zip(args, [*args[1:], None], strict=True):
        if arg == option:
            return following
        if arg.startswith(option + "="):
            return arg.partition("=")[2]
    return None


def _names_rocksdb_files(path: str) -> bool:
    """Whether `path` is a local savepoint (or its `_metadata`) whose `_metadata` names a
    RocksDB MANIFEST."""
    metadata = path if os.path.basename(path) == "_metadata" else os.path.join(path, "_metadata")
    try:
        with open(metadata, "rb") as file:
            return b"MANIFEST-" in file.read(_SNIFFED_BYTES)
    except OSError:  # not a local savepoint (or another argument): reading it says why
        return False


if __name__ == "__main__":
    main()
