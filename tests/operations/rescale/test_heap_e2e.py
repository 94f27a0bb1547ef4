"""The hashmap backend's own snapshot format (retained checkpoints, NATIVE savepoints) rescaled,
converted and re-hashed, restored by real Flink 2.3.

From every kind of `harness.heap_snapshots()` (checkpoints with and without snapshot
compression, max parallelism 128 and 300, a NATIVE savepoint): rescale to 1 and 3, `convert` to
canonical and to RocksDB native (`--format native`), and a new max parallelism (256). From every
kind of `KEY_GROUP_ZERO_KINDS` (subtasks holding key group 0 alone: parallelism 2 at max
parallelism 2, and max parallelism 1): rescale to 1, both conversions, and max parallelism 256
at the same parallelism and at 3. Flink
restores each output with exactly the state the job wrote (keys, values, lists in order, maps,
timers, operator and broadcast state; no key unreachable or in a key group its subtask does not
own), on the hashmap backend and on RocksDB, which cannot restore the heap checkpoint itself.
The outputs are self-contained savepoints. One RestoreCheck JVM for everything.
"""

from __future__ import annotations

import copy
import shutil
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import statectl
from statectl.cli.main import main
from statectl.formats.handles import (
    ByteStreamHandle,
    IncrementalKeyedHandle,
    KeyGroupsHandle,
    RelativeFileHandle,
)
from statectl.formats.metadata import snapshot_kind
from statectl.operations.rescale.job import rescale
from statectl.operations.rescale.plan import plan_rescale
from statectl.savepoint.keyed import is_heap_snapshot
from statectl.savepoint.reader import open_savepoint
from tests.conftest import run_cli
from tests.flink import harness
from tests.flink.harness import RestoreRequest

pytestmark = [pytest.mark.flink, pytest.mark.spark]

KINDS = [*harness.HEAP_SNAPSHOT_KINDS, *harness.KEY_GROUP_ZERO_KINDS]
KEYED_UIDS = ("keyed-str", "keyed-long")
CLI_KIND = "checkpoint"  # its `convert --format native` and re-hash go through the CLI

# How each output is made (plan_rescale's arguments) and which backends restore it.
ROUTES: dict[str, dict[str, Any]] = {
    "p1": {"parallelism": 1},
    "p3": {"parallelism": 3},
    "convert": {"parallelism": None, "keyed_format": "canonical"},
    "native": {"parallelism": None, "keyed_format": "native"},
    "max256": {"parallelism": None, "max_parallelism": 256},
    "max256-p3": {"parallelism": 3, "max_parallelism": 256},
}
BACKENDS = {
    "p1": ("hashmap",),
    "p3": ("rocksdb",),
    "convert": ("hashmap", "rocksdb"),
    "native": ("rocksdb",),
    "max256": ("hashmap", "rocksdb"),
}
# Key group 0 alone: no rescale to 3 within max parallelism 2 or 1; one backend a route.
KEY_GROUP_ZERO_BACKENDS = {
    "p1": ("hashmap",),
    "convert": ("rocksdb",),
    "native": ("rocksdb",),
    "max256": ("hashmap",),
    "max256-p3": ("rocksdb",),
}
CLI_ARGS = {
    "native": ["convert", "--format", "native"],
    "max256": ["rescale", "--max-parallelism", "256"],
}


@dataclass(frozen=True)
class Case:
    kind: str
    route: str
    backend: str

    @property
    def id(self) -> str:
        return f"{self.kind}-{self.route}-{self.backend}"

    @property
    def output(self) -> str:
        return f"{self.kind}-{self.route}"


def _backends(kind: str) -> dict[str, tuple[str, ...]]:
    return KEY_GROUP_ZERO_BACKENDS if kind in harness.KEY_GROUP_ZERO_KINDS else BACKENDS


CASES = [Case(k, r, b) for k in KINDS for r, bs in _backends(k).items() for b in bs]
OUTPUTS = sorted({(c.kind, c.route) for c in CASES})


def _write(source: Path, route: str, destination: Path, through_cli: bool) -> dict[str, Any]:
    """Write one output; returns what the rescale report says of keyed-str."""
    if through_cli:
        argv = CLI_ARGS[route]
        with pytest.raises(SystemExit) as done:
            main([argv[0], str(source), *argv[1:], "-o", str(destination), "--json"])
        assert done.value.code in (0, None)
        return {}
    report = rescale(plan_rescale(open_savepoint(str(source)), **ROUTES[route]), str(destination))
    op = next(o for o in report.operators if o.uid == "keyed-str")
    return {"old": op.old_keyed_format, "new": op.new_keyed_format}


@pytest.fixture(scope="module")
def outcome(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("heap")
    fixtures = {**harness.heap_snapshots(), **harness.heap_snapshots(harness.KEY_GROUP_ZERO_KINDS)}
    sources = {kind: harness.snapshot_path(fixtures[kind]) for kind in KINDS}
    paths, formats = {}, {}
    for kind, route in OUTPUTS:
        paths[kind, route] = root / f"{kind}-{route}"
        through_cli = kind == CLI_KIND and route in CLI_ARGS
        formats[kind, route] = _write(sources[kind], route, paths[kind, route], through_cli)
    manifests = {kind: harness.load_manifest(fixtures[kind]) for kind in KINDS}
    requests = [
        RestoreRequest(
            paths[c.kind, c.route],
            _parallelism(c, manifests[c.kind]),
            _max_parallelism(c, manifests[c.kind]),
            backend=c.backend,
        )
        for c in CASES
    ]
    # What makes `convert` needed: RocksDB cannot restore the heap checkpoint itself.
    in_place = harness.checkpoint_in_place(fixtures["checkpoint"])
    requests.append(RestoreRequest(in_place, 2, backend="rocksdb"))
    replaced, expected = _replace_values(sources["checkpoint"], manifests["checkpoint"], root)
    requests.append(RestoreRequest(replaced, 2, backend="hashmap"))
    *results, rocksdb_on_heap, replaced_restore = harness.restore_check(requests)
    return {
        "sources": sources,
        "manifests": manifests,
        "paths": paths,
        "formats": formats,
        "restored": {c.id: r for c, r in zip(CASES, results, strict=True)},
        "rocksdb_on_heap": rocksdb_on_heap,
        "replaced": (replaced, expected, replaced_restore),
    }


ADDED_KEY = "added-by-statectl"


def _replace_values(
    source: Path, manifest: dict[str, Any], root: Path
) -> tuple[Path, dict[str, Any]]:
    """`State.replace` on keyed-str's `cnt` of the heap checkpoint (every value + 1, one key
    removed, one added), written with `Savepoint.write`; and the state Flink must restore."""
    sp = statectl.open(str(source))
    state = sp.operator("keyed-str").state("cnt")
    table = state.to_arrow()
    rows = table.to_pylist()
    removed = rows[0]["key"]
    edited = [{**row, "value": row["value"] + 1} for row in rows[1:]]
    edited.append({"key": ADDED_KEY, "namespace": None, "value": 7})
    state.replace(pa.Table.from_pylist(edited, schema=table.schema))
    destination = root / "checkpoint-replaced"
    sp.write(str(destination))
    expected = copy.deepcopy(manifest["state"])
    subtasks = expected["operators"]["keyed-str"]["subtasks"]
    for sub in subtasks.values():
        counts = sub["keyed"]["cnt"]
        counts.pop(removed, None)
        for key in counts:
            counts[key] += 1
    next(iter(subtasks.values()))["keyed"]["cnt"][ADDED_KEY] = 7
    return destination, expected


def _parallelism(case: Case, manifest: dict[str, Any]) -> int:
    wanted = ROUTES[case.route]["parallelism"]
    return int(wanted or manifest["parallelism"])


def _max_parallelism(case: Case, manifest: dict[str, Any]) -> int:
    return int(ROUTES[case.route].get("max_parallelism") or manifest["max_parallelism"])


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_flink_restores_exactly_the_written_state(outcome: dict[str, Any], case: Case) -> None:
    result = outcome["restored"][case.id]
    assert result["ok"], result["error"]
    manifest = outcome["manifests"][case.kind]
    assert harness.compare(manifest["state"], result["state"], manifest["operators"]) == []
    for uid in KEYED_UIDS:
        restored = result["state"]["operators"][uid]
        assert len(restored["subtasks"]) == _parallelism(case, manifest)
        assert restored["max_parallelism"] == _max_parallelism(case, manifest)
        written = harness.keyed_union(manifest["state"], uid)
        assert sum(len(keys) for keys in written.values()) > 0
        assert harness.keyed_union(result["state"], uid) == written
        timers = harness.keyed_union(manifest["state"], uid, "timers")
        assert timers and harness.keyed_union(result["state"], uid, "timers") == timers
    assert result["backend"] == case.backend


@pytest.mark.parametrize(("kind", "route"), OUTPUTS, ids=[f"{k}-{r}" for k, r in OUTPUTS])
def test_outputs_are_self_contained_savepoints(
    outcome: dict[str, Any], kind: str, route: str
) -> None:
    """Canonical blocks (code 7), or RocksDB instances with `--format native`, every file
    relative and inside the output; the format type says which (a checkpoint's properties, not
    a savepoint's, are kept as for RocksDB checkpoints)."""
    path = outcome["paths"][kind, route]
    sp = open_savepoint(str(path))
    native_out = route == "native"
    keyed = 0
    for op in sp.operators:
        for subtask in sp.subtasks(op):
            handle = subtask.managed_keyed_state
            if handle is not None:
                keyed += 1
                if native_out:
                    assert isinstance(handle, IncrementalKeyedHandle)
                    files = [handle.meta, *(f.handle for f in handle.shared + handle.private)]
                else:
                    assert isinstance(handle, KeyGroupsHandle) and handle.code == 7
                    files = [handle.delegate]
            else:
                files = []
            if subtask.managed_operator_state is not None:
                files.append(subtask.managed_operator_state.delegate)
            for file in files:
                assert isinstance(file, RelativeFileHandle | ByteStreamHandle), file
                if isinstance(file, RelativeFileHandle):
                    assert (path / file.relative_path).is_file()
    assert keyed > 0
    kind_of = snapshot_kind(sp.metadata.properties)
    assert kind_of is not None
    if outcome["manifests"][kind]["mode"] == "checkpoint":
        assert not kind_of.savepoint
    else:
        assert kind_of.format == ("NATIVE" if native_out else "CANONICAL")
    formats = outcome["formats"][kind, route]
    if formats:  # written through the API: the report names the formats
        assert formats == {"old": "heap", "new": "native" if native_out else "canonical"}


@pytest.mark.parametrize(("kind", "route"), OUTPUTS, ids=[f"{k}-{r}" for k, r in OUTPUTS])
def test_outputs_verify_deep(outcome: dict[str, Any], kind: str, route: str) -> None:
    code, out, err = run_cli("verify", "--deep", str(outcome["paths"][kind, route]))
    assert code == 0, out + err


def test_rocksdb_cannot_restore_the_heap_checkpoint_itself(outcome: dict[str, Any]) -> None:
    result = outcome["rocksdb_on_heap"]
    assert not result["ok"]
    assert "Could not restore keyed state backend" in result["error"]


def _corrupt_copy(source: Path, tmp_path: Path) -> tuple[Path, Path, int]:
    """A copy of the snapshot, one of keyed-str's files and the offset of the entry count of
    the first state of a key group with entries."""
    copy = tmp_path / "snapshot"
    shutil.copytree(source, copy)
    sp = open_savepoint(str(copy))
    handle = next(iter(sp.subtasks(sp.find_operator("keyed-str")))).managed_keyed_state
    assert isinstance(handle, KeyGroupsHandle) and handle.delegate is not None
    (file,) = [p for p in copy.iterdir() if p.name in str(handle.delegate)]
    data = file.read_bytes()
    for offset in handle.offsets[1:]:
        if struct.unpack_from(">i", data, offset + 6)[0] > 0:  # keyGroupId, stateId, count
            return copy, file, offset + 6
    raise AssertionError("no key group with entries")


@pytest.mark.parametrize("damage", ["truncated", "flipped"])
@pytest.mark.parametrize("argv", [*CLI_ARGS.values(), ["rescale", "-p", "3"]], ids=" ".join)
def test_a_damaged_file_is_refused_and_nothing_is_written(
    spark: Any, tmp_path: Path, argv: list[str], damage: str
) -> None:
    """A truncated file and a flipped byte in a key group: one line naming the file, never a
    savepoint with fewer entries."""
    source = harness.snapshot_path(harness.heap_snapshots()["checkpoint"])
    copy, file, count_at = _corrupt_copy(source, tmp_path)
    data = bytearray(file.read_bytes())
    if damage == "truncated":
        del data[-7:]
    else:
        data[count_at + 2] ^= 0x40
    file.write_bytes(bytes(data))
    out_dir = tmp_path / "out"
    code, out, err = run_cli(argv[0], str(copy), *argv[1:], "-o", str(out_dir))
    assert code == 1, out + err
    problems = [line for line in err.strip().splitlines() if file.name in line]
    assert len(problems) == 1, err
    if damage == "truncated":
        assert "shorter than its handle says" in problems[0]
    else:
        assert "(key group " in problems[0] and "offset" in problems[0]
    assert not out_dir.exists()


def test_flink_restores_a_replaced_state_of_the_heap_checkpoint(outcome: dict[str, Any]) -> None:
    """`State.replace` (what `transform` ends in) on a heap checkpoint: the edited subtasks are
    written as canonical blocks, the rest carried over in the heap format, restored by Flink."""
    path, expected, result = outcome["replaced"]
    assert result["ok"], result["error"]
    manifest = outcome["manifests"]["checkpoint"]
    assert harness.compare(expected, result["state"], manifest["operators"]) == []
    restored = harness.keyed_union(result["state"], "keyed-str")["cnt"]
    assert restored[ADDED_KEY] == 7
    written = harness.keyed_union(manifest["state"], "keyed-str")["cnt"]
    assert len(restored) == len(written)  # one key removed, one added
    sp = open_savepoint(str(path))
    for uid, heap in (("keyed-str", False), ("keyed-long", True)):
        for subtask in sp.subtasks(sp.find_operator(uid)):
            handle = subtask.managed_keyed_state
            assert isinstance(handle, KeyGroupsHandle) and handle.delegate is not None
            assert is_heap_snapshot(sp, handle) == heap, uid
