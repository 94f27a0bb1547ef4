"""Real Flink end to end: FixtureJob writes snapshots, RestoreCheck restores them, state compared.

Two JVMs for the whole module: one FixtureJob run (a hashmap savepoint and a retained RocksDB
incremental checkpoint) and one RestoreCheck batch.
"""

from __future__ import annotations

import shutil
import struct
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.flink import harness
from tests.flink.harness import RestoreRequest

pytestmark = pytest.mark.flink

STATEFUL = ["keyed-str", "keyed-long", "opstate", "bcast"]


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("flink-fixtures")
    specs = {
        "savepoint": harness.fixture_spec(root / "hashmap_p2", parallelism=2, max_parallelism=128),
        "checkpoint": harness.fixture_spec(
            root / "rocksdb_checkpoint",
            backend="rocksdb",
            incremental=True,
            mode="checkpoint",
            checkpoint_base=str(root / "checkpoint-original"),
        ),
    }
    manifests = harness.write_fixtures(list(specs.values()))
    return {name: manifest.parent for name, manifest in zip(specs, manifests, strict=True)}


@pytest.fixture(scope="module")
def restored(written: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One RestoreCheck batch; a missing path and a refused restore sit between good requests."""
    savepoint = harness.snapshot_path(written["savepoint"])
    corrupted = tmp_path_factory.mktemp("corrupted") / "savepoint"
    shutil.copytree(savepoint, corrupted)
    moved_key = move_first_key_to_next_key_group(corrupted, "keyed-str")
    checkpoint = harness.checkpoint_in_place(written["checkpoint"])
    requests = {
        "p1": RestoreRequest(savepoint, 1),
        "missing": RestoreRequest(corrupted.parent / "does-not-exist", 2),
        "p3": RestoreRequest(savepoint, 3),
        "maxp_mismatch": RestoreRequest(savepoint, 2, max_parallelism=256),
        "corrupted": RestoreRequest(corrupted, 1),
        "checkpoint_p3": RestoreRequest(checkpoint, 3),
        "dropped": RestoreRequest(savepoint, 2, drop=["opstate"], allow_non_restored=True),
    }
    results = harness.restore_check(list(requests.values()))
    return {"moved_key": moved_key, **dict(zip(requests, results, strict=True))}


# ------------------------------------------------------------------------------------ writing


def test_manifest_describes_the_savepoint(written: dict[str, Path]) -> None:
    manifest = harness.load_manifest(written["savepoint"])
    savepoint = written["savepoint"] / manifest["path"]
    metadata = (savepoint / "_metadata").read_bytes()
    assert metadata[:8] == bytes.fromhex("4960672d00000006")  # magic, version 6
    assert struct.unpack(">q", metadata[8:16])[0] == manifest["checkpoint_id"]
    assert manifest["path"] == "savepoint"
    assert (manifest["flink_version"], manifest["backend"], manifest["format"]) == ("2.3.0", "hashmap", "CANONICAL")  # fmt: skip

    operators = {op["uid"]: op for op in manifest["operators"]}
    assert list(operators) == ["src", "keyed-str", "keyed-long", "opstate", "bcast", "stateless", "sink"]  # fmt: skip
    mmh3 = pytest.importorskip("mmh3")
    for uid, op in operators.items():
        assert op["id"] == mmh3.hash_bytes(uid.encode(), 0, x64arch=True).hex()
        assert bytes.fromhex(op["id"]) in metadata
        assert op["name"] and op["name"].encode() in metadata
    # the value the format reference (§6.6) gives
    assert operators["keyed-str"]["id"] == "0cad1b1f959e0cc01a89a8ec2be0100c"

    state = manifest["state"]["operators"]
    assert sorted(state) == sorted(STATEFUL)
    for uid in ("keyed-str", "keyed-long"):
        subtasks = state[uid]["subtasks"]
        assert [subtasks[i]["key_group_range"] for i in ("0", "1")] == [[0, 63], [64, 127]]
        keys = [k for sub in subtasks.values() for k in sub["keyed"]["cnt"]]
        assert len(keys) == len(set(keys)) == 40
        counts = operators[uid]["entry_counts"]
        assert counts["cnt"] == counts["lst"] == 40
        assert counts["mp"] == sum(len(m) for s in subtasks.values() for m in s["keyed"]["mp"].values())  # fmt: skip
        assert counts["_timer_state/processing_user-timers"] == 54  # values 0..159 divisible by 3
        assert counts["_timer_state/event_user-timers"] == 32  # ... by 5
    assert "é-ключ" in state["keyed-str"]["subtasks"]["0"]["keyed"]["cnt"] or "é-ключ" in state["keyed-str"]["subtasks"]["1"]["keyed"]["cnt"]  # fmt: skip
    opstate = state["opstate"]["subtasks"]
    assert opstate["0"]["operator"] == {"split": [0, 1], "union": [500]}
    assert opstate["1"]["operator"] == {"split": [1000, 1001, 1002], "union": [1500, 1501]}
    maps = [sub["broadcast"]["bcast"] for sub in state["bcast"]["subtasks"].values()]
    assert maps[0] == maps[1] and len(maps[0]) == 5

    # files mode: every state stream is a file beside _metadata, named in it
    files = [p for p in savepoint.iterdir() if p.name != "_metadata"]
    assert len(files) == 8  # 2 keyed operators + opstate + bcast, 2 subtasks each
    assert all(p.name.encode() in metadata for p in files)


def test_retained_checkpoint_layout(written: dict[str, Path]) -> None:
    manifest = harness.load_manifest(written["checkpoint"])
    origin = manifest["checkpoint"]
    assert manifest["mode"] == "checkpoint" and manifest["path"] == f"checkpoint/chk-{manifest['checkpoint_id']}"  # fmt: skip
    assert manifest["checkpoint_id"] >= 2
    assert {"shared/", "taskowned/"} <= set(origin["files"])
    metadata = (written["checkpoint"] / manifest["path"] / "_metadata").read_bytes()
    # RocksDB files are referenced by absolute path into shared/ of the original location
    assert (origin["original_uri"] + "/shared/").encode() in metadata
    # phase 2 cleared the keyed state of 3 keys and updated 10
    cnt = harness.keyed_union(manifest["state"], "keyed-str")["cnt"]
    assert len(cnt) == 37 and "k10" not in cnt and cnt["k0"] == 0 + 40 + 80 + 120 + 1000


# ------------------------------------------------------------------------------------ restoring


@pytest.mark.parametrize("label,parallelism", [("p1", 1), ("p3", 3)])
def test_restored_state_equals_manifest(written: dict[str, Path], restored: dict[str, Any], label: str, parallelism: int) -> None:  # fmt: skip
    manifest = harness.load_manifest(written["savepoint"])
    result = restored[label]
    assert result["ok"], result["error"]
    assert result["restored_flags"] == dict.fromkeys(sorted(STATEFUL), True)
    assert harness.compare(manifest["state"], result["state"], manifest["operators"]) == []

    # the same, spelled out
    ops = result["state"]["operators"]
    for uid in STATEFUL:
        assert ops[uid]["parallelism"] == parallelism
        assert sorted(ops[uid]["subtasks"], key=int) == [str(i) for i in range(parallelism)]
        for sub in ops[uid]["subtasks"].values():
            assert sub["unreachable"] == [] and sub["misplaced"] == []
    for uid in ("keyed-str", "keyed-long"):
        assert harness.keyed_union(result["state"], uid) == harness.keyed_union(manifest["state"], uid)  # fmt: skip
        assert harness.keyed_union(result["state"], uid, "timers") == harness.keyed_union(manifest["state"], uid, "timers")  # fmt: skip
    written_ops = manifest["state"]["operators"]
    assert _split_elements(ops) == _split_elements(written_ops)
    union = sorted(e for s in written_ops["opstate"]["subtasks"].values() for e in s["operator"]["union"])  # fmt: skip
    assert all(sorted(s["operator"]["union"]) == union for s in ops["opstate"]["subtasks"].values())
    bcast = written_ops["bcast"]["subtasks"]["0"]["broadcast"]
    assert all(s["broadcast"] == bcast for s in ops["bcast"]["subtasks"].values())


def test_retained_checkpoint_restores(written: dict[str, Path], restored: dict[str, Any]) -> None:
    manifest = harness.load_manifest(written["checkpoint"])
    result = restored["checkpoint_p3"]
    assert result["ok"], result["error"]
    assert result["backend"] == "rocksdb" and result["backend_classes"] == ["RocksDBKeyedStateBackend"]  # fmt: skip
    assert harness.compare(manifest["state"], result["state"], manifest["operators"]) == []


def test_key_in_the_wrong_key_group_is_reported_unreachable(restored: dict[str, Any]) -> None:
    result = restored["corrupted"]
    assert result["ok"], result["error"]
    state, key = restored["moved_key"]
    subtasks = result["state"]["operators"]["keyed-str"]["subtasks"]
    assert subtasks["0"]["unreachable"] == [[state, key]]
    assert subtasks["0"]["misplaced"] == []
    assert key not in subtasks["0"]["keyed"][state]


def test_failed_restores_are_results_and_the_batch_goes_on(restored: dict[str, Any]) -> None:
    missing = restored["missing"]
    assert not missing["ok"] and missing["state"] is None
    assert "does-not-exist" in missing["error"]
    mismatch = restored["maxp_mismatch"]
    assert not mismatch["ok"]
    assert "Max parallelism mismatch" in mismatch["error"]
    assert restored["p3"]["ok"] and restored["corrupted"]["ok"]


def test_dropped_operator(restored: dict[str, Any]) -> None:
    result = restored["dropped"]
    assert result["ok"], result["error"]
    assert sorted(result["state"]["operators"]) == ["bcast", "keyed-long", "keyed-str"]


# ------------------------------------------------------------------------------------ helpers


def _split_elements(operators: dict[str, Any]) -> Counter:
    subtasks = operators["opstate"]["subtasks"].values()
    return Counter(e for s in subtasks for e in s["operator"]["split"])


def move_first_key_to_next_key_group(savepoint: Path, uid: str) -> tuple[str, str]:
    """Rewrites the key-group prefix of the first "cnt" entry in subtask 0's first non-empty key
    group to the next key group (canonical, uncompressed, maxParallelism <= 128, relative file);
    returns ("cnt", key) as RestoreCheck should report it."""
    data = (savepoint / "_metadata").read_bytes()
    marker = struct.pack(">H", len(uid)) + uid.encode()
    # name and uid, operator id, parallelism, max parallelism, no coordinator state
    pos = data.index(marker + marker) + 2 * len(marker) + 16 + 4 + 4 + 1
    (subtasks,) = struct.unpack_from(">i", data, pos)
    assert subtasks >= 1
    pos += 4 + 4 + 4 + 4  # index 0, no managed/raw operator state
    assert data[pos] == 7  # canonical savepoint key groups handle
    start, count = struct.unpack_from(">ii", data, pos + 1)
    offsets = struct.unpack_from(f">{count}q", data, pos + 9)
    pos += 9 + 8 * count
    assert data[pos] == 6  # relative file
    (length,) = struct.unpack_from(">H", data, pos + 1)
    state_file = savepoint / data[pos + 3 : pos + 3 + length].decode()

    block = bytearray(state_file.read_bytes())
    names = _state_names(bytes(block[: min(o for o in offsets if o)]))
    for index, offset in enumerate(offsets):
        if not offset:
            continue
        key_group = start + index
        (state_id,) = struct.unpack_from(">h", block, offset)
        at = offset + 2
        while True:
            (key_length,) = struct.unpack_from(">i", block, at)
            key_at = at + 4
            key = bytes(block[key_at : key_at + key_length])
            (value_length,) = struct.unpack_from(">i", block, key_at + key_length)
            at = key_at + key_length + 4 + value_length
            if names[state_id] == "cnt" and key_group + 1 < start + count:
                block[key_at] = (key[0] & 0x80) | (key_group + 1)
                state_file.write_bytes(block)
                assert key[1] < 0x80 and key[2:-1].isascii()  # 1-byte length varint, ASCII key
                return "cnt", key[2:-1].decode()  # prefix, length varint, chars, VoidNamespace 00
            if key[0] & 0x80:
                (state_id,) = struct.unpack_from(">H", block, at)
                at += 2
                if state_id == 0xFFFF:
                    break
    raise AssertionError("no cnt entry found")


def _state_names(header: bytes) -> list[str]:
    """State names of a keyed header, in kvStateId order (the order they are written in)."""
    candidates = ("cnt", "lst", "mp", "_timer_state/processing_user-timers", "_timer_state/event_user-timers")  # fmt: skip
    found = sorted((header.find(struct.pack(">H", len(n)) + n.encode()), n) for n in candidates)
    assert all(at > 0 for at, _ in found)
    return [name for _, name in found]
