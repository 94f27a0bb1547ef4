"""Ground truth for `statectl upgrade --check`: what real Flink 2.3.0 does, state by state, when
the values job built against 2.3.0 restores the savepoints Flink 1.20.3 and 1.15.4 wrote
(tests/fixtures/values/<version>-{hashmap-canonical,rocksdb-native}/). The findings are committed
in tests/fixtures/values/upgrade-2.3.0.json (its "how" explains the method); this test re-derives
them in one restore JVM (+ one dumper JVM) per source version and checks the file against them.
Regenerate: `python -m tests.flink.test_upgrade_truth` (writes the file).

Headline (both versions, both kinds): the unchanged savepoint is refused (the operator state
backend of `opstate` fails on `op-list`: a 1.x POJO whose List/Map/Set fields were Kryo-written
read by 2.3's PojoSerializer); without `opstate` in the job, the keyed states `pojo`, `pojo-list`,
`pojo-map` are refused (heap: the same deserialization error at restore, for every state whether
registered or not; RocksDB: StateMigrationException at registration, each alone); with those
three unregistered too, RocksDB restores, and `kryo-arraylist` / `kryo-hashmap` come back wrong
(Kryo 5 reads the Kryo 2 collections short) while every other state equals the 1.x truth.
"""

from __future__ import annotations

import json
import re
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest

from tests.flink import harness

pytestmark = pytest.mark.flink

VALUES = harness.VALUES_FIXTURES
TARGET = "2.3.0"
SOURCES = ("1.20.3", "1.15.4")
KINDS = ("hashmap-canonical", "rocksdb-native")
OUTPUT = VALUES / f"upgrade-{TARGET}.json"
# The keyed states of `values` a 2.3 restore refuses (found by iterating, see HOW); the batch
# re-proves it: each alone registered is refused, all three unregistered the restore succeeds.
REFUSED_KEYED = ("pojo", "pojo-list", "pojo-map")
WITHOUT_OPSTATE = {"drop_operators": ["opstate"], "allow_non_restored": True}

HOW = (
    "Flink 2.3.0 restores each 1.x fixture into the values job built against 2.3.0 "
    "(harness.restore_values, one JVM per source version, parallelism 2 / max parallelism 128, "
    "the fixture's own backend unless said otherwise), then the new CANONICAL savepoint is "
    "dumped by 2.3's StateDumper and compared per (operator, state) with the fixture's "
    "truth.jsonl (1.x's dump), entry by entry, as the JSON the dumpers print (uid ignored: 1.x "
    "metadata has none). Iteration: (1) the unchanged restore fails in the operator state backend "
    "of `opstate` (stack: OperatorStateRestoreOperation.deserializeOperatorStateValues, i.e. a "
    "list state: op-list; that backend deserializes every operator state at restore, registered "
    "or not, so no job-side option isolates op-broadcast / op-union: their outcomes are what "
    "2.3's restore serializers (the ones that backend uses) read from the savepoint, via "
    "harness.dump_states('2.3.0', ...) on the 1.x savepoint: observed='restore-serializer'); "
    "(2) the job without `opstate` (new request option drop_operators=['opstate'] + "
    "allow_non_restored): the keyed backend of `values` fails. Heap: HeapRestoreOperation "
    "deserializes every restored keyed state with its restore serializer whether registered or "
    "not, so `drop` does not isolate (the request with pojo/pojo-list/pojo-map dropped fails the "
    "same way) and the error is attributed by the dumper (those three states, and only those, "
    "fail to deserialize). RocksDB (native savepoint, and the canonical savepoint restored into "
    "RocksDB, which copies the bytes without deserializing): an unregistered state is never "
    "read, so `drop` isolates: registering each of the three alone is refused with "
    "StateMigrationException; (3) with the three dropped, the RocksDB restores succeed and every "
    "other state of values/window is compared (for a hashmap-canonical fixture through the "
    "canonical-into-RocksDB restore: with the heap backend the values operator cannot be "
    "restored at all while the POJO states are in the savepoint; 2.3's restore serializers, "
    "which the heap restore would use, read the same values). 'refused' = fails the restore "
    "(error: root cause, hash codes as @…); 'wrong' = restored, dump differs (example: one "
    "truth entry and the restored entry of the same key); 'ok' = equal entry by entry."
)


def _requests(version: str) -> dict[str, dict[str, Any]]:
    hashmap = VALUES / f"{version}-hashmap-canonical" / "savepoint"
    rocksdb = VALUES / f"{version}-rocksdb-native" / "savepoint"
    out: dict[str, dict[str, Any]] = {
        "hashmap": {"savepoint": hashmap, "backend": "hashmap"},
        "rocksdb": {"savepoint": rocksdb, "backend": "rocksdb"},
        "hashmap-no-opstate": {"savepoint": hashmap, "backend": "hashmap", **WITHOUT_OPSTATE},
        "rocksdb-no-opstate": {"savepoint": rocksdb, "backend": "rocksdb", **WITHOUT_OPSTATE},
        "hashmap-no-opstate-drop": {
            "savepoint": hashmap,
            "backend": "hashmap",
            "drop": list(REFUSED_KEYED),
            **WITHOUT_OPSTATE,
        },
        "rocksdb-no-opstate-drop": {
            "savepoint": rocksdb,
            "backend": "rocksdb",
            "drop": list(REFUSED_KEYED),
            **WITHOUT_OPSTATE,
        },
        "canonical-into-rocksdb-drop": {
            "savepoint": hashmap,
            "backend": "rocksdb",
            "drop": list(REFUSED_KEYED),
            **WITHOUT_OPSTATE,
        },
    }
    for state in REFUSED_KEYED:
        others = [s for s in REFUSED_KEYED if s != state]
        out[f"rocksdb-only-{state}"] = {
            "savepoint": rocksdb, "backend": "rocksdb", "drop": others, **WITHOUT_OPSTATE,
        }  # fmt: skip
    return out


def run_batch(version: str, root: Path) -> dict[str, Any]:
    """One restore JVM (Flink 2.3.0) for the source version's requests, one dumper JVM (2.3.0's
    restore serializers over both 1.x savepoints)."""
    todo = {name: {**r, "out": root / version / name} for name, r in _requests(version).items()}
    t0 = time.monotonic()
    results = harness.restore_values(TARGET, list(todo.values()))
    t1 = time.monotonic()
    dumps = harness.dump_states(TARGET, [VALUES / f"{version}-{kind}" for kind in KINDS])
    t2 = time.monotonic()
    print(
        f"{version}: restore JVM {t1 - t0:.1f}s ({len(todo)} requests), dumper JVM {t2 - t1:.1f}s"
    )
    return {
        "results": dict(zip(todo, results, strict=True)),
        "dumps": dict(zip(KINDS, dumps, strict=True)),
        "seconds": {"restore": round(t1 - t0, 1), "dump": round(t2 - t1, 1)},
    }


def root_cause(error: str) -> str:
    """The last "Class: message" of an exception chain, identity hash codes as @…."""
    return re.sub(r"@[0-9a-f]+\b", "@…", error.split(" | caused by ")[-1])


def _canonical(line: dict[str, Any]) -> str:
    return json.dumps({k: v for k, v in line.items() if k != "uid"}, sort_keys=True, ensure_ascii=False)  # fmt: skip


def _uid_of(truth: list[dict[str, Any]]) -> dict[str, str]:
    """operator id -> uid (1.x dumps have no uids)."""
    ids = {}
    for uid in ("values", "window", "opstate"):
        ids[_operator_id(truth, uid)] = uid
    return ids


def _operator_id(truth: list[dict[str, Any]], uid: str) -> str:
    names = {name for name, _, _ in _states()[uid]}
    (op,) = {line["operator_id"] for line in truth if line["state"] in names}
    return op


def _states() -> dict[str, list[tuple[str, str, str]]]:
    """uid -> [(state, kind, type)], from the fixture manifests' view of States.ALL."""
    manifest = json.loads((VALUES / f"{TARGET}-hashmap-canonical" / "manifest.json").read_text())
    out: dict[str, list[tuple[str, str, str]]] = {}
    for op in manifest["operators"]:
        if op.get("states"):
            out[op["uid"]] = [(s["name"], s["kind"], s.get("type", "")) for s in op["states"]]
    return out


def _by_state(lines: list[dict[str, Any]]) -> dict[tuple[str, str], list[dict[str, Any]]]:
    by: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for line in lines:
        by[(line["operator_id"], line["state"])].append(line)
    return by


def _entry_key(line: dict[str, Any]) -> str:
    return json.dumps([line.get(k) for k in ("subtask", "key_group", "key", "namespace", "user_key")])  # fmt: skip


def compare_state(want: list[dict[str, Any]], got: list[dict[str, Any]], union: bool = False) -> dict[str, Any]:  # fmt: skip
    """ok, or wrong with an example (a truth entry and the restored entry of the same key)."""
    if union:  # UNION: every restored subtask holds the union; compare it once
        got = [{k: v for k, v in line.items() if k != "subtask"} for line in got if line.get("subtask") == 0]  # fmt: skip
        want = [{k: v for k, v in line.items() if k != "subtask"} for line in want]
    a, b = Counter(map(_canonical, want)), Counter(map(_canonical, got))
    if a == b and not any("error" in line for line in got):
        return {"outcome": "ok"}
    missing = [json.loads(s) for s in a - b]
    extra = {_entry_key(line): line for line in map(json.loads, b - a)}
    before = missing[0] if missing else None
    after = extra.get(_entry_key(before)) if before else next(iter(extra.values()), None)

    def strip(line: dict[str, Any] | None) -> dict[str, Any] | None:
        return (
            None
            if line is None
            else {k: v for k, v in line.items() if k not in ("uid", "operator_id")}
        )

    return {
        "outcome": "wrong",
        "entries": {"truth": len(want), "restored": len(got), "differing": sum((a - b).values())},
        "example": {"before": strip(before), "after": strip(after)},
    }


def derive(version: str, batch: dict[str, Any]) -> dict[str, Any]:
    """The per-fixture, per-operator, per-state outcomes of the source version from its batch."""
    res = batch["results"]
    out: dict[str, Any] = {}
    for kind in KINDS:
        fixture = f"{version}-{kind}"
        truth = harness.load_truth(VALUES / fixture)
        uids = _uid_of(truth)
        ids = {uid: op for op, uid in uids.items()}
        want = _by_state(truth)
        backend = "hashmap" if kind.startswith("hashmap") else "rocksdb"
        unchanged = res[backend]
        assert not unchanged["ok"]
        # the restore that isolates the keyed states (RocksDB: unregistered states are never read)
        good = res[
            "canonical-into-rocksdb-drop" if backend == "hashmap" else "rocksdb-no-opstate-drop"
        ]
        assert good["ok"], good["error"]
        got = _by_state(good["lines"])
        dumped = _by_state(batch["dumps"][kind])
        fx: dict[str, Any] = {
            "restore": {
                "unchanged": {"ok": False, "error": root_cause(unchanged["error"])},
                "without_opstate": _summary(res[f"{backend}-no-opstate"]),
                "without_opstate_and_refused_keyed": _summary(
                    res["hashmap-no-opstate-drop"] if backend == "hashmap" else good
                ),
            }
        }
        for uid, states in _states().items():
            if uid not in ids:
                continue
            op = ids[uid]
            entry: dict[str, Any] = {}
            for name, state_kind, _ in states:
                key = (op, name)
                if uid == "opstate":
                    restore_error = unchanged["error"]
                    errors = [line["error"] for line in dumped.get(key, []) if "error" in line]
                    errors += [
                        line["error"] for line in batch["dumps"][kind]
                        if line["operator_id"] == op and line.get("state") is None and "error" in line
                        and state_kind == "BROADCAST"
                    ]  # fmt: skip
                    if name == "op-list":
                        entry[name] = {
                            "outcome": "refused", "observed": "restore",
                            "error": root_cause(restore_error),
                        }  # fmt: skip
                    elif errors:
                        entry[name] = {
                            "outcome": "refused", "observed": "restore-serializer",
                            "error": root_cause(errors[0]),
                        }  # fmt: skip
                    else:
                        r = compare_state(want.get(key, []), dumped.get(key, []))
                        entry[name] = {**r, "observed": "restore-serializer"}
                elif uid == "values" and name in REFUSED_KEYED:
                    if backend == "rocksdb":
                        err = res[f"rocksdb-only-{name}"]
                        assert not err["ok"]
                        entry[name] = {"outcome": "refused", "observed": "restore", "error": root_cause(err["error"])}  # fmt: skip
                    else:
                        errors = [line["error"] for line in dumped.get(key, []) if "error" in line]
                        assert errors, name
                        entry[name] = {
                            "outcome": "refused", "observed": "restore+restore-serializer",
                            "error": root_cause(res["hashmap-no-opstate"]["error"]),
                            "attributed_by": root_cause(errors[0]),
                        }  # fmt: skip
                else:
                    r = compare_state(
                        want.get(key, []), got.get(key, []), union=state_kind == "UNION"
                    )
                    entry[name] = {**r, "observed": "restore" if backend == "rocksdb" else "restore (canonical savepoint into RocksDB)"}  # fmt: skip
            out.setdefault(fixture, fx)[uid] = entry
    return out


def _summary(result: dict[str, Any]) -> dict[str, Any]:
    if result["ok"]:
        return {"ok": True, "unreachable": result["unreachable"], "misplaced": result["misplaced"], "checked": result["checked"]}  # fmt: skip
    return {"ok": False, "error": root_cause(result["error"])}


def build(root: Path) -> dict[str, Any]:
    doc: dict[str, Any] = {"how": HOW, "target": TARGET, "jvm_seconds": {}}
    for version in SOURCES:
        batch = run_batch(version, root)
        doc["jvm_seconds"][version] = batch["seconds"]
        doc.update(derive(version, batch))
    return doc


# --------------------------------------------------------------------------- the test


@pytest.fixture(scope="module")
def batches(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    root = tmp_path_factory.mktemp("upgrade-truth")
    return {version: run_batch(version, root) for version in SOURCES}


def _committed() -> dict[str, Any]:
    return json.loads(OUTPUT.read_text(encoding="utf-8"))


def _without_volatile(doc: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in doc.items() if k not in ("jvm_seconds", "how")}


@pytest.mark.parametrize("version", SOURCES)
def test_headline(batches, version: str) -> None:
    res = batches[version]["results"]
    # the unchanged savepoints: refused, in the operator state backend of `opstate` (op-list)
    for name in ("hashmap", "rocksdb"):
        assert not res[name]["ok"]
        assert "Could not restore operator state backend for OpStateOperator" in res[name]["error"]
        assert root_cause(res[name]["error"]) == (
            "java.lang.IllegalArgumentException: Can not set int field statectl.values.Model$Pojo.count to null value"
        )  # fmt: skip
    # heap: drop does not isolate (every restored keyed state is deserialized at restore)
    for name in ("hashmap-no-opstate", "hashmap-no-opstate-drop"):
        assert "Failed when trying to restore heap backend" in res[name]["error"], res[name][
            "error"
        ]
        assert "Can not set int field statectl.values.Model$Pojo.count" in res[name]["error"]
    # RocksDB: each POJO state alone is refused at registration
    for state, serializer in zip(REFUSED_KEYED, ("PojoSerializer", "ListSerializer", "MapSerializer"), strict=True):  # fmt: skip
        error = res[f"rocksdb-only-{state}"]["error"]
        assert "org.apache.flink.util.StateMigrationException: The new state serializer" in error
        assert f"{serializer}@" in error and "must not be incompatible with the old state serializer" in error  # fmt: skip
    # without them: restored, every key reachable
    for name in ("rocksdb-no-opstate-drop", "canonical-into-rocksdb-drop"):
        assert res[name]["ok"], res[name]["error"]
        assert res[name]["unreachable"] == [] and res[name]["misplaced"] == []


@pytest.mark.parametrize("version", SOURCES)
def test_committed_outcomes_are_rederived(batches, version: str) -> None:
    """Every fixture of the source version in upgrade-2.3.0.json equals what this run derives:
    states recorded "wrong" differ from the truth (with the same example), "ok" equal it,
    "refused" fail with the recorded exception."""
    derived = json.loads(json.dumps(derive(version, batches[version]), ensure_ascii=False))
    committed = _committed()
    for fixture, outcomes in derived.items():
        assert committed[fixture] == outcomes, fixture
    wrong = {
        (fixture, uid, state)
        for fixture, ops in derived.items()
        for uid, states in ops.items() if uid != "restore"
        for state, o in states.items() if o["outcome"] == "wrong"
    }  # fmt: skip
    assert {s for _, _, s in wrong} == {"kryo-arraylist", "kryo-hashmap"}


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="statectl-upgrade-truth-") as tmp:
        doc = build(Path(tmp))
    OUTPUT.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {OUTPUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
