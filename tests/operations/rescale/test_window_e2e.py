"""Window operators — the keyed state most production jobs hold — through statectl and back.

tests/flink/src/statectl/flinkjobs/WindowJob.java: tumbling event-time windows with
AggregatingState (String keys), ReducingState (Long keys) and the ListState of a
ProcessWindowFunction (String keys), all under a TimeWindow namespace with event-time timers,
saved before any window fired (a CANONICAL savepoint of the hashmap backend, a NATIVE one of
RocksDB, and a retained checkpoint of the hashmap backend, in its own snapshot format). Every
output is restored by Flink 2.3, the final watermark fires every window, and the results must be
exactly those of the records the job read.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from tests.conftest import run_cli as cli
from tests.flink import harness
from tests.flink.harness import RestoreRequest

pytestmark = [pytest.mark.flink, pytest.mark.spark]

# (source, statectl arguments after SRC -o DST, restore parallelism, backend, max parallelism)
RUNS = {
    "hashmap-p1": ("hashmap", ["rescale", "-p", "1"], 1, "hashmap", None),
    "hashmap-p3": ("hashmap", ["rescale", "-p", "3"], 3, "rocksdb", None),
    "hashmap-m256": ("hashmap", ["rescale", "--max-parallelism", "256", "-p", "3"], 3, "hashmap", 256),
    "native-convert": ("native", ["convert"], 2, "hashmap", None),
    "native-p3": ("native", ["rescale", "-p", "3"], 3, "rocksdb", None),
    "native-m4096": ("native", ["rescale", "--max-parallelism", "4096", "-p", "2"], 2, "rocksdb", 4096),
    "checkpoint-p1": ("checkpoint", ["rescale", "-p", "1"], 1, "hashmap", None),
    "checkpoint-p3": ("checkpoint", ["rescale", "-p", "3"], 3, "hashmap", None),
}  # fmt: skip


@pytest.fixture(scope="module")
def outcome(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("windows")
    sources = {
        "hashmap": harness.write_window_savepoint(root / "hashmap"),
        "native": harness.write_window_savepoint(
            root / "native", backend="rocksdb", format="NATIVE"
        ),
        "checkpoint": harness.write_window_savepoint(root / "checkpoint", retained_checkpoint=True),
    }
    manifests = {name: json.loads(path.read_text()) for name, path in sources.items()}
    savepoints = {name: path.parent / manifests[name]["path"] for name, path in sources.items()}
    runs = {}
    for run, (source, argv, *_) in RUNS.items():
        command, *options = argv
        runs[run] = cli(command, str(savepoints[source]), "-o", str(root / run), *options, "--json")
    requests = [
        RestoreRequest(root / run, parallelism, backend=backend, max_parallelism=max_parallelism)
        for run, (_, _, parallelism, backend, max_parallelism) in RUNS.items()
    ]
    restored = harness.restore_windows(requests)
    return {
        "root": root,
        "savepoints": savepoints,
        "manifests": manifests,
        "runs": runs,
        "restored": dict(zip(RUNS, restored, strict=True)),
    }


@pytest.mark.parametrize("run", list(RUNS))
def test_every_window_fires_with_exactly_the_results_of_the_records_read(
    outcome: dict[str, Any], run: str
) -> None:
    code, _, err = outcome["runs"][run]
    assert code == 0, err
    result = outcome["restored"][run]
    assert result["ok"], result["error"]
    expected = outcome["manifests"][RUNS[run][0]]["expected"]
    assert len(expected) == 411  # 150 win-agg + 111 win-reduce + 150 win-list windows
    assert result["results"] == expected


@pytest.mark.parametrize("run", list(RUNS))
def test_outputs_verify_deep_with_every_key_in_its_hashed_key_group(
    outcome: dict[str, Any], run: str
) -> None:
    code, out, err = cli("verify", "--deep", str(outcome["root"] / run))
    assert (code, err) == (0, ""), out
    assert "822 entries walked" in out  # 150 + 150 (win-agg) + 111 + 111 + 150 + 150


def test_window_state_kinds_and_diff_after_rescale(outcome: dict[str, Any]) -> None:
    code, out, _ = cli("inspect", "--json", str(outcome["savepoints"]["hashmap"]))
    assert code == 0
    kinds = {
        op["uid"]: sorted(s["kind"] for s in op["states"])
        for op in json.loads(out)["operators"]
        if op["states"]
    }
    assert kinds == {
        "win-agg": ["AGGREGATING", "TIMERS", "TIMERS"],
        "win-reduce": ["REDUCING", "TIMERS", "TIMERS"],
        "win-list": ["LIST", "TIMERS", "TIMERS"],
    }
    code, out, _ = cli(
        "diff", str(outcome["savepoints"]["hashmap"]), str(outcome["root"] / "hashmap-p3")
    )
    assert code == 0 and out.strip().endswith("identical (9 states compared)")


def test_export_decodes_the_aggregates_under_their_windows(
    outcome: dict[str, Any], tmp_path: Path
) -> None:
    target = tmp_path / "agg.parquet"
    argv = [
        "export",
        str(outcome["root"] / "hashmap-p3"),
        "-o",
        str(target),
        "--operator",
        "win-agg",
    ]
    assert cli(*argv, "--state", "window-contents")[0] == 0
    exported = {
        f"win-agg|{json.loads(row['key_json'])}|{struct.unpack('>q', row['namespace'][:8])[0]}|{row['value_json']}"
        for row in pq.read_table(target).to_pylist()
    }
    expected = {
        line for line in outcome["manifests"]["hashmap"]["expected"] if line.startswith("win-agg|")
    }
    assert exported == expected


def test_the_checkpoint_source_is_in_the_hashmap_backends_own_format(
    outcome: dict[str, Any],
) -> None:
    from statectl.formats.handles import KeyGroupsHandle
    from statectl.formats.metadata import snapshot_kind
    from statectl.savepoint.keyed import is_heap_snapshot
    from statectl.savepoint.reader import open_savepoint

    path = outcome["savepoints"]["checkpoint"]
    assert path.name.startswith("chk-")
    sp = open_savepoint(str(path))
    kind = snapshot_kind(sp.metadata.properties)
    assert kind is not None and not kind.savepoint
    heap = []
    for uid in ("win-agg", "win-reduce", "win-list"):
        for subtask in sp.subtasks(sp.find_operator(uid)):
            handle = subtask.managed_keyed_state
            assert isinstance(handle, KeyGroupsHandle) and handle.delegate is not None
            heap.append(is_heap_snapshot(sp, handle))
    assert heap == [True] * 6
    code, out, err = cli("verify", "--deep", str(path))
    assert (code, err) == (0, ""), out
    assert "822 entries walked" in out
