"""`statectl rescale --master spark://…` on a real Spark standalone cluster on 127.0.0.1.

A master and two one-core workers are started with `spark-class` from the installed pyspark.
The executors run the venv's interpreter WITHOUT its site hooks (`python -S`), so they see
statectl's dependencies but not statectl itself: the job works only because statectl ships
its own package to them (`spark._ship_package`), as it must on a real cluster. Real Flink
restores the cluster's output, which is byte-identical to local mode's, `_metadata` included
(its handles are relative and its file names deterministic). Every JVM is killed at teardown.
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

import pytest

from tests.conftest import fixture_savepoint, load_manifest
from tests.flink import harness
from tests.flink.harness import RestoreRequest

pytestmark = [pytest.mark.cluster, pytest.mark.spark, pytest.mark.flink]

FIXTURES = ["hashmap_canonical_files", "rocksdb_canonical"]
PARALLELISM = 3
HOST = "127.0.0.1"
WORKERS = 2
STATECTL = Path(sys.executable).with_name("statectl")
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
# The only stderr line of a run that is not statectl's: the JVM's own, for Spark 4's
# `--add-modules=jdk.incubator.vector`; log4j cannot silence it.
JVM_NOTICE = "WARNING: Using incubator modules: jdk.incubator.vector"


@dataclass(frozen=True)
class Cluster:
    master_url: str
    web_url: str
    root: Path  # every file of the cluster (and of the drivers) lives under it

    def state(self) -> dict[str, Any]:
        with urllib.request.urlopen(f"{self.web_url}/json/", timeout=5) as response:
            return json.load(response)


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


def _spark_env(root: Path) -> dict[str, str]:
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
    env = _spark_env(root)
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
        except OSError:
            pass  # the master's web UI is not up yet
        time.sleep(0.5)
    raise TimeoutError(f"{WORKERS} workers did not register in {timeout}s:\n{_log_tails(cluster.root)}")  # fmt: skip


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    root = tmp_path_factory.mktemp("spark-cluster")
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


# --- statectl runs ------------------------------------------------------------------------


def _executor_python(root: Path) -> Path:
    """The venv's interpreter without `.pth` hooks: dependencies importable, statectl not."""
    site = os.pathsep.join(dict.fromkeys(sysconfig.get_paths()[k] for k in ("purelib", "platlib")))
    script = root / "executor-python"
    script.write_text(
        "#!/bin/sh\n"
        f'PYTHONPATH="${{PYTHONPATH:+$PYTHONPATH:}}{site}" exec {sys.executable} -S "$@"\n'
    )
    script.chmod(0o755)
    return script


def _statectl(args: list[str], env: dict[str, str], timeout: float = 180) -> Run:
    """The installed `statectl` in its own process group, killed with its JVM on timeout."""
    process = subprocess.Popen(
        [str(STATECTL), *args], env=env, stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    return Run(process.returncode, stdout, stderr)


def _rescale(fixture: str, output: Path, env: dict[str, str], *extra: str) -> Run:
    source = str(fixture_savepoint(fixture))
    return _statectl(["rescale", source, "-o", str(output), "-p", str(PARALLELISM), *extra], env)


@pytest.fixture(scope="module")
def outcome(cluster: Cluster) -> dict[str, Any]:
    root = cluster.root
    executor_python = _executor_python(root)
    tmp = root / "driver-tmp"  # statectl's TMPDIR: what it leaves behind
    tmp.mkdir()
    env = {**_spark_env(root), "TMPDIR": str(tmp)}
    cluster_env = {**env, "PYSPARK_PYTHON": str(executor_python)}
    timings: dict[str, float] = {}
    runs: dict[tuple[str, str], Run] = {}
    for fixture in FIXTURES:
        for mode, run_env, extra in (
            ("cluster", cluster_env, ("--master", cluster.master_url,
                                      "--conf", "spark.executor.memory=512m")),
            ("local", env, ()),
        ):  # fmt: skip
            started = time.monotonic()
            runs[fixture, mode] = _rescale(fixture, root / mode / fixture, run_env, *extra)
            timings[f"{fixture} {mode}"] = time.monotonic() - started
    restorable = [f for f in FIXTURES if runs[f, "cluster"].returncode == 0]
    requests = [
        RestoreRequest(root / "cluster" / f, PARALLELISM, backend=load_manifest(f)["backend"])
        for f in restorable
    ]
    started = time.monotonic()
    restored = dict(zip(restorable, harness.restore_check(requests), strict=True))
    timings["flink restore"] = time.monotonic() - started
    print(f"timings: { {k: round(v, 1) for k, v in timings.items()} }", file=sys.stderr)
    return {
        "root": root,
        "runs": runs,
        "restored": restored,
        "apps": cluster.state()["completedapps"],
        "left_in_tmp": sorted(p.name for p in tmp.iterdir()),
        "statectl_importable": subprocess.run(
            [str(executor_python), "-c", "import statectl"], cwd=root, capture_output=True
        ).returncode == 0,
    }  # fmt: skip


def _assert_succeeded(run: Run) -> None:
    assert run.returncode == 0, f"exit {run.returncode}\n{run.stdout}\n{run.stderr}"


# --- tests --------------------------------------------------------------------------------


def test_executors_cannot_import_an_installed_statectl(outcome: dict[str, Any]) -> None:
    """Precondition: the cluster runs succeed only through the shipped package.

    (Run outside the checkout, as executors are: `python -c` puts the working directory first.)"""
    assert outcome["statectl_importable"] is False


@pytest.mark.parametrize("fixture", FIXTURES)
def test_cluster_output_restores_exactly_the_written_state(
    outcome: dict[str, Any], fixture: str
) -> None:
    _assert_succeeded(outcome["runs"][fixture, "cluster"])
    result = outcome["restored"][fixture]
    assert result["ok"], result["error"]
    manifest = load_manifest(fixture)
    assert harness.compare(manifest["state"], result["state"], manifest["operators"]) == []
    restored = result["state"]["operators"]
    for op in manifest["operators"]:
        if op["states"]:
            assert len(restored[op["uid"]]["subtasks"]) == PARALLELISM, op["uid"]


@pytest.mark.parametrize("fixture", FIXTURES)
def test_cluster_output_is_byte_identical_to_local_mode(
    outcome: dict[str, Any], fixture: str
) -> None:
    """`_metadata` too: its handles are relative and the file names depend only on the plan."""
    for mode in ("cluster", "local"):
        _assert_succeeded(outcome["runs"][fixture, mode])
    on_cluster, local = (outcome["root"] / mode / fixture for mode in ("cluster", "local"))
    names = sorted(p.name for p in local.iterdir())
    assert "_metadata" in names
    assert sorted(p.name for p in on_cluster.iterdir()) == names
    for name in names:
        assert (on_cluster / name).read_bytes() == (local / name).read_bytes(), name


def test_every_run_was_an_application_on_both_workers(outcome: dict[str, Any]) -> None:
    apps = outcome["apps"]
    assert [(a["name"], a["state"]) for a in apps] == [("statectl", "FINISHED")] * len(FIXTURES)
    work = outcome["root"] / "work"
    for app in apps:
        # A worker makes an app directory when it launches an executor for that app.
        assert sorted(p.parent.name for p in work.glob(f"worker*/{app['id']}")) == [
            f"worker{i}" for i in range(WORKERS)
        ]


@pytest.mark.parametrize("mode", ["cluster", "local"])
def test_stderr_holds_only_statectl_lines(outcome: dict[str, Any], mode: str) -> None:
    """No Spark log noise: Spark warns through statectl's log4j config only when it matters."""
    for fixture in FIXTURES:
        run = outcome["runs"][fixture, mode]
        _assert_succeeded(run)
        noise = [
            line
            for line in run.stderr.splitlines()
            if line != JVM_NOTICE and not line.startswith("statectl: ")
        ]
        assert noise == [], run.stderr


def test_runs_leave_no_temporary_files(outcome: dict[str, Any]) -> None:
    """Not even the zip of the package shipped to the executors."""
    assert outcome["left_in_tmp"] == []
