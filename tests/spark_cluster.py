"""A real Spark standalone cluster on 127.0.0.1 for tests: a master and two one-core workers
started with `spark-class` from the installed pyspark, every file under one root folder.

Executors run `executor_python(root)`: the venv's interpreter WITHOUT its site hooks
(`python -S`), so they see statectl's dependencies but not statectl itself, as on a real
cluster; work reaches them only through the package statectl ships. Drivers run as child
processes (`run_in_own_group`): a test process holds one SparkSession, in local mode. Every
JVM is killed when the cluster stops.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import sysconfig
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HOST = "127.0.0.1"
WORKERS = 2
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"


@dataclass(frozen=True)
class Cluster:
    master_url: str
    web_url: str
    root: Path  # every file of the cluster (and of the drivers) lives under it

    def state(self) -> dict[str, Any]:
        with urllib.request.urlopen(f"{self.web_url}/json/", timeout=5) as response:
            state: dict[str, Any] = json.load(response)
        return state

    def workers_of(self, app_id: str) -> list[str]:
        """The workers (`worker0`, …) that launched an executor for the application: a worker
        makes an app directory when it does."""
        return sorted(p.parent.name for p in (self.root / "work").glob(f"worker*/{app_id}"))

    def executors_on(self, app_id: str) -> dict[str, str]:
        """Executor id → the worker that ran it (its directory in the app's)."""
        work = self.root / "work"
        return {p.name: p.parent.parent.name for p in work.glob(f"worker*/{app_id}/*")}


@dataclass(frozen=True)
class Run:
    returncode: int
    stdout: str
    stderr: str


# --- the cluster --------------------------------------------------------------------------


def _spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def _free_ports(count: int) -> list[int]:
    """Distinct free ports (sockets held open together so none is handed out twice)."""
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind((HOST, 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def spark_env(root: Path) -> dict[str, str]:
    """Environment of every JVM: small heaps, files under `root`, no user configuration."""
    drop = ("SPARK_", "PYSPARK_", "PYTHONPATH")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    dirs = {name: root / name for name in ("conf", "logs", "work", "local")}
    for path in dirs.values():
        path.mkdir(parents=True, exist_ok=True)
    env.update(
        SPARK_HOME=str(_spark_home()),
        SPARK_CONF_DIR=str(dirs["conf"]),  # empty: no spark-defaults.conf of the machine
        SPARK_LOG_DIR=str(dirs["logs"]),
        SPARK_WORKER_DIR=str(dirs["work"]),
        SPARK_LOCAL_DIRS=str(dirs["local"]),
        SPARK_LOCAL_IP=HOST,
        SPARK_DAEMON_MEMORY="256m",
    )
    return env


def _start(root: Path, log_name: str, *args: str) -> subprocess.Popen[bytes]:
    """`spark-class ARGS` in its own process group (its executors join that group)."""
    env = spark_env(root)
    spark_class = _spark_home() / "bin" / "spark-class"
    with (root / "logs" / log_name).open("wb") as log:
        return subprocess.Popen(
            [str(spark_class), *args],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def _stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM the process group, then SIGKILL whatever is left of it."""
    for sig, wait in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            break
        try:
            process.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            continue


def _processes_under(root: Path) -> dict[int, str]:
    """pid → command line of running processes that mention `root` (cluster and driver JVMs)."""
    found = {}
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue
        if any(str(root).encode() in a for a in args):
            found[int(cmdline.parent.name)] = b" ".join(args).decode(errors="replace")[:200]
    return found


def _log_tails(root: Path) -> str:
    return "\n".join(
        f"--- {log.name}\n" + "\n".join(log.read_text(errors="replace").splitlines()[-15:])
        for log in sorted((root / "logs").glob("*.log"))
    )


def _wait_for_workers(
    cluster: Cluster, processes: list[subprocess.Popen[bytes]], timeout: float
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(p.poll() is not None for p in processes):
            raise RuntimeError(f"a Spark daemon exited early:\n{_log_tails(cluster.root)}")
        try:
            if cluster.state().get("aliveworkers", 0) >= WORKERS:
                return
        except (OSError, ValueError):
            pass  # the master's web UI is not up yet (or serves HTML, not yet its JSON)
        time.sleep(0.5)
    raise TimeoutError(f"{WORKERS} workers did not register in {timeout}s:\n{_log_tails(cluster.root)}")  # fmt: skip


@contextlib.contextmanager
def standalone_cluster(root: Path) -> Iterator[Cluster]:
    """A master and WORKERS one-core workers, up until the block ends; then every process
    is killed, and a process left running under `root` fails the block."""
    port, web_port, *worker_web_ports = _free_ports(2 + WORKERS)
    cluster = Cluster(f"spark://{HOST}:{port}", f"http://{HOST}:{web_port}", root)
    processes: list[subprocess.Popen[bytes]] = []
    try:
        processes.append(
            _start(root, "master.log", MASTER_CLASS, "--host", HOST, "--port", str(port),
                   "--webui-port", str(web_port))
        )  # fmt: skip
        for i, web in enumerate(worker_web_ports):
            processes.append(
                _start(root, f"worker{i}.log", WORKER_CLASS, cluster.master_url, "--host", HOST,
                       "--cores", "1", "--memory", "1g", "--webui-port", str(web),
                       "--work-dir", str(root / "work" / f"worker{i}"))
            )  # fmt: skip
        _wait_for_workers(cluster, processes, timeout=60)
        yield cluster
    finally:
        for process in reversed(processes):
            _stop(process)
        left = _processes_under(root)
        for pid in left:  # kill, then fail: the process groups should have held them
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        assert not left, f"Spark processes were left running: {list(left.values())}"


# --- drivers and executors ----------------------------------------------------------------


def executor_python(root: Path) -> Path:
    """The venv's interpreter without `.pth` hooks: dependencies importable, statectl not."""
    site = os.pathsep.join(dict.fromkeys(sysconfig.get_paths()[k] for k in ("purelib", "platlib")))
    script = root / "executor-python"
    script.write_text(
        "#!/bin/sh\n"
        f'PYTHONPATH="${{PYTHONPATH:+$PYTHONPATH:}}{site}" exec {sys.executable} -S "$@"\n'
    )
    script.chmod(0o755)
    return script


def statectl_importable(python: Path, cwd: Path) -> bool:
    """Whether `python` imports statectl (run outside the checkout, as executors are:
    `python -c` puts the working directory first)."""
    run = subprocess.run([str(python), "-c", "import statectl"], cwd=cwd, capture_output=True)
    return run.returncode == 0


def run_in_own_group(
    argv: list[str], env: dict[str, str], timeout: float = 180, cwd: Path | None = None
) -> Run:
    """`argv` in its own process group, killed with its JVM on timeout."""
    process = subprocess.Popen(
        argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    return Run(process.returncode, stdout, stderr)
