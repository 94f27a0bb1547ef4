"""Retained checkpoints of the hashmap backend (its own snapshot format) written by Flink 1.20
and 1.15, and a NATIVE savepoint (the same format): read, verified, rescaled, converted and
re-hashed, restored by the same Flink.

`harness.compat_heap_snapshots(version)`: the compat job of tests/flink/compat on the hashmap
backend retains one checkpoint per kind (snapshot compression on and off, max parallelism 128
and 300) and takes a NATIVE savepoint, with the job's own dump of what it held in its manifest;
cached under .cache/flink, one JVM per version. statectl's library read of every keyed state equals that dump, `verify
--deep` walks every entry; `rescale -p 1|3`, `convert --format canonical` and `rescale
--max-parallelism 256` outputs are restored by the same Flink version (one JVM per version, the
compat job's restore) with exactly the written state; the converted output by RocksDB too.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from statectl.savepoint.keyed import is_heap_snapshot
from statectl.savepoint.reader import open_savepoint
from tests.conftest import run_cli as cli
from tests.flink import harness
from tests.flink.harness import RestoreRequest
from tests.savepoint.test_heap_snapshot import library_dump

pytestmark = pytest.mark.flink

VERSIONS = ["1.20.3", "1.15.4"]
KINDS = list(harness.COMPAT_HEAP_SNAPSHOT_KINDS)
KEYED = ("keyed-str", "keyed-long")
# route -> (statectl argv before the source, parallelism, max parallelism; None: the source's)
ROUTES: dict[str, tuple[list[str], int | None, int | None]] = {
    "p1": (["rescale", "-p", "1"], 1, None),
    "p3": (["rescale", "-p", "3"], 3, None),
    "convert": (["convert", "--format", "canonical"], None, None),
    "max256": (["rescale", "--max-parallelism", "256"], None, 256),
}
# RocksDB cannot restore the heap checkpoint itself: `convert` is how its state moves there.
BACKENDS = {"p1": ("hashmap",), "p3": ("hashmap",), "convert": ("hashmap", "rocksdb"), "max256": ("hashmap",)}  # fmt: skip
CASES = [(k, r, b) for k in KINDS for r in ROUTES for b in BACKENDS[r]]


@pytest.fixture(scope="module", params=VERSIONS)
def checkpoints(request: pytest.FixtureRequest) -> dict[str, Any]:
    """One version's heap snapshots (one JVM when not cached)."""
    version = request.param
    dirs = harness.compat_heap_snapshots(version)
    return {
        "version": version,
        "dirs": dirs,
        "paths": {kind: harness.snapshot_path(d) for kind, d in dirs.items()},
        "manifests": {kind: harness.load_manifest(d) for kind, d in dirs.items()},
    }


# --------------------------------------------------------------------------- reading


@pytest.mark.parametrize("kind", KINDS)
def test_flink_wrote_the_heap_format(checkpoints: dict[str, Any], kind: str) -> None:
    """Not vacuous: what the job asked for (a retained checkpoint, or a NATIVE savepoint), with
    every keyed file in the heap format."""
    manifest = checkpoints["manifests"][kind]
    params = {"compression": False, "max_parallelism": 128, "mode": "checkpoint", **harness.COMPAT_HEAP_SNAPSHOT_KINDS[kind]}  # fmt: skip
    assert manifest["flink_version"] == checkpoints["version"]
    assert (manifest["mode"], manifest["backend"]) == (params["mode"], "hashmap")
    assert manifest["path"].startswith(params["mode"])
    assert (manifest["compression"], manifest["max_parallelism"]) == (
        params["compression"],
        params["max_parallelism"],
    )
    assert manifest["backend_classes"] == ["HeapKeyedStateBackend"]
    sp = open_savepoint(str(checkpoints["paths"][kind]))
    heap = 0
    for op in sp.operators:
        assert op.max_parallelism == params["max_parallelism"]
        for subtask in sp.subtasks(op):
            handle = subtask.managed_keyed_state
            if handle is not None:
                assert is_heap_snapshot(sp, handle)
                heap += 1
    assert heap == 2 * len(KEYED)


@pytest.mark.parametrize("kind", KINDS)
def test_library_read_equals_the_jobs_dump(checkpoints: dict[str, Any], kind: str) -> None:
    manifest = checkpoints["manifests"][kind]
    for uid in KEYED:
        keyed, timers = library_dump(checkpoints["paths"][kind], uid)
        written = harness.keyed_union(manifest["state"], uid)
        assert keyed == written, uid
        assert timers == harness.keyed_union(manifest["state"], uid, "timers"), uid
        assert (len(written["cnt"]), len(written["mp"])) == (24, 12)  # not vacuous


@pytest.mark.parametrize("kind", KINDS)
def test_verify_deep_walks_every_entry(checkpoints: dict[str, Any], kind: str) -> None:
    code, out, err = cli("verify", "--deep", "--json", str(checkpoints["paths"][kind]))
    assert (code, err) == (0, ""), out
    manifest = checkpoints["manifests"][kind]
    written = sum(sum(op["entry_counts"].values()) for op in manifest["operators"])
    assert json.loads(out)["checked"]["entries"] == written > 150


# --------------------------------------------------------------------------- with Flink


@pytest.fixture(scope="module")
def outcome(
    checkpoints: dict[str, Any], spark: Any, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    """Every kind through every route (the CLI), then one JVM of the same Flink version restores
    the outputs and, as the oracle's own check, each snapshot (a checkpoint where Flink wrote
    it)."""
    version = checkpoints["version"]
    root = tmp_path_factory.mktemp(f"heap-{version}")
    written: dict[tuple[str, str], tuple[int, str, Path]] = {}
    for kind in KINDS:
        for route, (argv, _, _) in ROUTES.items():
            out = root / f"{kind}-{route}"
            code, _, err = cli(argv[0], str(checkpoints["paths"][kind]), *argv[1:], "-o", str(out))
            written[kind, route] = (code, err, out)
    labels: list[tuple[str, str, str]] = []
    requests: list[RestoreRequest] = []
    for kind, route, backend in CASES:
        code, _, out = written[kind, route]
        if code == 0:
            labels.append((kind, route, backend))
            parallelism = ROUTES[route][1] or checkpoints["manifests"][kind]["parallelism"]
            requests.append(RestoreRequest(out, parallelism, backend=backend))
    for kind in KINDS:
        labels.append((kind, "original", "hashmap"))
        in_place = harness.checkpoint_in_place(checkpoints["dirs"][kind])
        requests.append(RestoreRequest(in_place, 2, backend="hashmap"))
    results = harness.restore_compat(version, requests)
    return {
        **checkpoints,
        "written": written,
        "restored": dict(zip(labels, results, strict=True)),
    }


def _assert_exactly_the_written_state(
    result: dict[str, Any], manifest: dict[str, Any], parallelism: int, max_parallelism: int
) -> None:
    assert result["ok"], result["error"]
    assert harness.compare(manifest["state"], result["state"], manifest["operators"]) == []
    for uid in KEYED:
        restored = result["state"]["operators"][uid]
        assert len(restored["subtasks"]) == parallelism, uid
        assert restored["max_parallelism"] == max_parallelism, uid
        written = harness.keyed_union(manifest["state"], uid)
        assert harness.keyed_union(result["state"], uid) == written
        timers = harness.keyed_union(manifest["state"], uid, "timers")
        assert timers and harness.keyed_union(result["state"], uid, "timers") == timers
    for uid in ("opstate", "bcast"):
        assert len(result["state"]["operators"][uid]["subtasks"]) == parallelism, uid


@pytest.mark.spark
@pytest.mark.parametrize("kind", KINDS)
def test_flink_restores_its_own_snapshot(outcome: dict[str, Any], kind: str) -> None:
    """The oracle itself: the snapshot (a checkpoint where Flink wrote it) restored at 2."""
    manifest = outcome["manifests"][kind]
    result = outcome["restored"][kind, "original", "hashmap"]
    _assert_exactly_the_written_state(result, manifest, 2, manifest["max_parallelism"])


@pytest.mark.spark
@pytest.mark.parametrize(("kind", "route", "backend"), CASES, ids=["-".join(c) for c in CASES])
def test_flink_restores_exactly_the_written_state(
    outcome: dict[str, Any], kind: str, route: str, backend: str
) -> None:
    code, err, _ = outcome["written"][kind, route]
    assert code == 0, err
    manifest = outcome["manifests"][kind]
    _, parallelism, max_parallelism = ROUTES[route]
    result = outcome["restored"][kind, route, backend]
    _assert_exactly_the_written_state(
        result,
        manifest,
        parallelism or manifest["parallelism"],
        max_parallelism or manifest["max_parallelism"],
    )
    expected_backend = "RocksDBKeyedStateBackend" if backend == "rocksdb" else "HeapKeyedStateBackend"  # fmt: skip
    assert result["backend_classes"] == [expected_backend]


@pytest.mark.spark
@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("kind", KINDS)
def test_outputs_are_canonical_and_verify_deep(
    outcome: dict[str, Any], kind: str, route: str
) -> None:
    code, err, out = outcome["written"][kind, route]
    assert code == 0, err
    sp = open_savepoint(str(out))
    keyed = [
        (sp.stream(s.managed_keyed_state.delegate), s.managed_keyed_state)
        for op in sp.operators
        for s in sp.subtasks(op)
        if s.managed_keyed_state is not None
    ]
    assert keyed and not any(is_heap_snapshot(sp, handle) for stream, handle in keyed)
    code, report, err = cli("verify", "--deep", str(out))
    assert code == 0, report + err
