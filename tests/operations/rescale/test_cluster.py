"""`statectl rescale --master spark://…` on a real Spark standalone cluster on 127.0.0.1.

A master and two one-core workers are started with `spark-class` from the installed pyspark.
The executors run the venv's interpreter WITHOUT its site hooks (`python -S`), so they see
statectl's dependencies but not statectl itself: the job works only because statectl ships
its own package to them (`spark._ship_package`), as it must on a real cluster. Real Flink
restores the cluster's output, which is byte-identical to local mode's, `_metadata` included
(its handles are relative and its file names deterministic). Every JVM is killed at teardown.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import fixture_savepoint, load_manifest
from tests.flink import harness
from tests.flink.harness import RestoreRequest
from tests.spark_cluster import (
    WORKERS,
    Cluster,
    Run,
    executor_python,
    run_in_own_group,
    spark_env,
    standalone_cluster,
    statectl_importable,
)

pytestmark = [pytest.mark.cluster, pytest.mark.spark, pytest.mark.flink]

# RocksDB's canonical savepoint rescaled; the hashmap backend's is the transform's source.
FIXTURES = ["rocksdb_canonical"]
PARALLELISM = 3
STATECTL = Path(sys.executable).with_name("statectl")
# The only stderr line of a run that is not statectl's: the JVM's own, for Spark 4's
# `--add-modules=jdk.incubator.vector`; log4j cannot silence it.
JVM_NOTICE = "WARNING: Using incubator modules: jdk.incubator.vector"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with standalone_cluster(tmp_path_factory.mktemp("spark-cluster")) as running:
        yield running


# --- statectl runs ------------------------------------------------------------------------


def _statectl(args: list[str], env: dict[str, str], timeout: float = 180) -> Run:
    """The installed `statectl` in its own process group, killed with its JVM on timeout."""
    return run_in_own_group([str(STATECTL), *args], env, timeout)


def _rescale(fixture: str, output: Path, env: dict[str, str], *extra: str) -> Run:
    source = str(fixture_savepoint(fixture))
    return _statectl(["rescale", source, "-o", str(output), "-p", str(PARALLELISM), *extra], env)


@pytest.fixture(scope="module")
def outcome(cluster: Cluster) -> dict[str, Any]:
    root = cluster.root
    python = executor_python(root)
    tmp = root / "driver-tmp"  # statectl's TMPDIR: what it leaves behind
    tmp.mkdir()
    env = {**spark_env(root), "TMPDIR": str(tmp)}
    cluster_env = {**env, "PYSPARK_PYTHON": str(python)}
    timings: dict[str, float] = {}
    runs: dict[tuple[str, str], Run] = {}
    modes = (
        ("cluster", cluster_env, ("--master", cluster.master_url,
                                  "--conf", "spark.executor.memory=512m")),
        ("local", env, ()),
    )  # fmt: skip
    for mode, run_env, extra in modes:
        for fixture in FIXTURES:
            started = time.monotonic()
            runs[fixture, mode] = _rescale(fixture, root / mode / fixture, run_env, *extra)
            timings[f"{fixture} {mode}"] = time.monotonic() - started
        started = time.monotonic()
        runs[TRANSFORM, mode] = _transform(TRANSFORMED, root / mode / TRANSFORM, run_env, *extra)
        timings[f"transform {mode}"] = time.monotonic() - started
    restorable = [f for f in (*FIXTURES, TRANSFORM) if runs[f, "cluster"].returncode == 0]
    requests = [
        RestoreRequest(
            root / "cluster" / f,
            PARALLELISM if f != TRANSFORM else load_manifest(TRANSFORMED)["parallelism"],
            backend=load_manifest(TRANSFORMED if f == TRANSFORM else f)["backend"],
        )
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
        "statectl_importable": statectl_importable(python, cwd=root),
    }  # fmt: skip


TRANSFORMED, TRANSFORM = "hashmap_canonical_files", "transform"


def _transform(fixture: str, output: Path, env: dict[str, str], *extra: str) -> Run:
    source = str(fixture_savepoint(fixture))
    query = "SELECT key, namespace, value + 1 AS value FROM state"
    args = ["transform", source, "-o", str(output), "--operator", "keyed-str", "--state", "cnt"]
    return _statectl([*args, "--sql", query, *extra], env)


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


def test_a_transform_on_the_cluster_writes_what_local_mode_writes_and_flink_restores(
    outcome: dict[str, Any],
) -> None:
    """The query ran in Spark's tasks, its rows were encoded and shuffled there, each subtask
    file written by one task: the same bytes as in local mode; Flink restores it, and its
    `cnt` holds every value plus one."""
    import pyarrow.compute as pc

    import statectl

    for mode in ("cluster", "local"):
        _assert_succeeded(outcome["runs"][TRANSFORM, mode])
    on_cluster, local = (outcome["root"] / mode / TRANSFORM for mode in ("cluster", "local"))
    names = sorted(p.name for p in local.iterdir())
    assert sorted(p.name for p in on_cluster.iterdir()) == names
    for name in names:
        assert (on_cluster / name).read_bytes() == (local / name).read_bytes(), name
    result = outcome["restored"][TRANSFORM]
    assert result["ok"], result["error"]
    before = statectl.open(str(fixture_savepoint(TRANSFORMED))).operator("keyed-str")
    after = statectl.open(str(on_cluster)).operator("keyed-str")
    old, new = (op.state("cnt").to_arrow().sort_by("key") for op in (before, after))
    assert new.column("key").equals(old.column("key"))
    assert new.column("value").equals(pc.add(old.column("value"), 1))


def test_every_run_was_an_application_on_both_workers(outcome: dict[str, Any]) -> None:
    apps = outcome["apps"]
    runs = len(FIXTURES) + 1  # the rescales and the transform
    assert [(a["name"], a["state"]) for a in apps] == [("statectl", "FINISHED")] * runs
    work = outcome["root"] / "work"
    for app in apps:
        # A worker makes an app directory when it launches an executor for that app.
        assert sorted(p.parent.name for p in work.glob(f"worker*/{app['id']}")) == [
            f"worker{i}" for i in range(WORKERS)
        ]


WAITING_FOR_EXECUTORS = (
    "spark: WARN TaskSchedulerImpl: Initial job has not accepted any resources; check your "
    "cluster UI to ensure that workers are registered and have sufficient resources"
)


@pytest.mark.parametrize("mode", ["cluster", "local"])
def test_stderr_holds_only_statectl_lines(outcome: dict[str, Any], mode: str) -> None:
    """No Spark log noise: Spark warns through statectl's log4j config only when it matters,
    as when a loaded machine's executors register late (a cluster's job waits for them)."""
    for fixture in (*FIXTURES, TRANSFORM):
        run = outcome["runs"][fixture, mode]
        _assert_succeeded(run)
        noise = [
            line
            for line in run.stderr.splitlines()
            if line not in (JVM_NOTICE, WAITING_FOR_EXECUTORS) and not line.startswith("statectl: ")
        ]
        assert noise == [], run.stderr


def test_runs_leave_no_temporary_files(outcome: dict[str, Any]) -> None:
    """Not even the zip of the package shipped to the executors."""
    assert outcome["left_in_tmp"] == []
