"""The restore oracle of the values job (`harness.restore_values`, ValuesRestore.java) itself:
real Flink restores a savepoint of the values job with per-request overrides of the `values`
operator's states, takes a CANONICAL savepoint and dumps it. Proven here on the committed
fixtures (tests/fixtures/values/<version>-<kind>/, `truth.jsonl` = the dump of what Flink
wrote), one JVM per Flink version for all its requests:

* an unchanged restore (hashmap, and RocksDB from the NATIVE savepoint) re-savepoints exactly the
  truth: every keyed entry (key group, key, namespace, user key, value, TTL timestamp), timer,
  operator list and broadcast element on the same subtask, after one normalisation: UNION state
  (see `normalised`); and before that savepoint, in the `values` operator's open(), every key
  getKeys lists under each registered keyed state reads back through setCurrentKey (`unreachable`
  empty), in its subtask's key-group range (`misplaced` empty);
* TTL turned on for a state without (`ttl_on`) or off for a TTL state (`ttl_off`): Flink before
  2.2 refuses the restore (StateMigrationException: the TtlSerializer and the plain one are
  incompatible); Flink 2.2+ migrates the state (FLINK-36521 TtlAwareSerializer, FLINK-35780
  RocksDB, FLINK-37294 heap): the values are kept, wrapped with a last-access timestamp of the
  restore time, or unwrapped;
* a state registered under another name (`rename`) or not at all (`drop`): the keyed backends keep
  every restored state, registered or not, and write it back under its old name; the renamed
  registration starts empty (it has no entry in the new savepoint). The baseline for write-back
  tests: renaming a state is not something a restore does by itself.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.flink import harness

pytestmark = pytest.mark.flink

VALUES = harness.VALUES_FIXTURES
VERSIONS = harness.VALUES_VERSIONS
# Flink 2.2 migrates state between TTL and non-TTL serializers; older versions refuse it.
MIGRATES_TTL = {"2.3.0"}


def requests(version: str) -> dict[str, dict[str, Any]]:
    """The batch of one version: name -> request (without `out`)."""
    hashmap = VALUES / f"{version}-hashmap-canonical" / "savepoint"
    rocksdb = VALUES / f"{version}-rocksdb-native" / "savepoint"
    return {
        "hashmap": {"savepoint": hashmap, "backend": "hashmap"},
        "rocksdb": {"savepoint": rocksdb, "backend": "rocksdb"},
        "ttl_on": {"savepoint": hashmap, "ttl_on": ["string"]},
        "ttl_off": {"savepoint": hashmap, "ttl_off": ["ttl-value"]},
        "rename": {"savepoint": hashmap, "rename": {"string": "string-renamed"}},
        "drop": {"savepoint": hashmap, "drop": ["string"]},
    }


TRUTH_OF = {"hashmap": "hashmap-canonical", "rocksdb": "rocksdb-native"}


class Batch:
    def __init__(self, results: dict[str, dict[str, Any]], started_ms: int, ended_ms: int) -> None:
        self.results = results
        self.started_ms = started_ms
        self.ended_ms = ended_ms


@pytest.fixture(scope="module")
def batch(tmp_path_factory: pytest.TempPathFactory):
    """version -> its Batch, one JVM per version (run at first use)."""
    done: dict[str, Batch] = {}

    def get(version: str) -> Batch:
        if version not in done:
            root = tmp_path_factory.mktemp(f"values-restore-{version}")
            todo = {name: {**r, "out": root / name} for name, r in requests(version).items()}
            started_ms = int(time.time() * 1000)
            t0 = time.monotonic()
            results = harness.restore_values(version, list(todo.values()))
            print(f"restore_values {version}: {len(todo)} requests, {time.monotonic() - t0:.1f}s")
            done[version] = Batch(dict(zip(todo, results, strict=True)), started_ms, int(time.time() * 1000))  # fmt: skip
        return done[version]

    return get


def canonical(line: dict[str, Any]) -> str:
    return json.dumps(line, sort_keys=True, ensure_ascii=False)


def truth(version: str, kind: str) -> list[dict[str, Any]]:
    return harness.load_truth(VALUES / f"{version}-{kind}")


def normalised(lines: list[dict[str, Any]], union_subtasks: int | None = None) -> list[str]:
    """The lines as sorted canonical JSON, UNION state collapsed: Flink hands every subtask the
    union of all subtasks' elements on restore (also at the same parallelism), so each subtask of
    the new savepoint holds the full union list. With `union_subtasks` (the restored side) it is
    checked that every one of them holds the same multiset, which is kept once (subtask removed);
    the truth side keeps the concatenation of its subtasks. Nothing else is normalised: the dumper
    prints no checkpoint ids, and keyed key groups and operator list/broadcast subtasks stay where
    they were at the same parallelism."""
    out = [canonical(line) for line in lines if line["kind"] != "UNION"]
    unions: dict[tuple[str, str], dict[int, Counter]] = {}
    for line in lines:
        if line["kind"] == "UNION":
            element = canonical({k: v for k, v in line.items() if k != "subtask"})
            per = unions.setdefault((line["operator_id"], line["state"]), {})
            per.setdefault(line["subtask"], Counter())[element] += 1
    for (_, state), per in sorted(unions.items()):
        if union_subtasks is None:
            total = sum(per.values(), Counter())
        else:
            assert sorted(per) == list(range(union_subtasks)), f"{state}: subtasks {sorted(per)}"
            total = per[0]
            assert all(c == total for c in per.values()), f"{state}: subtasks differ: {per}"
        out.extend(total.elements())
    return sorted(out)


def assert_same(restored: list[dict[str, Any]], expected: list[dict[str, Any]]) -> None:
    got, want = Counter(normalised(restored, 2)), Counter(normalised(expected))
    missing, extra = want - got, got - want
    assert not missing and not extra, (
        f"missing {sum(missing.values())}: {list(missing)[:5]}\nextra {sum(extra.values())}: {list(extra)[:5]}"
    )  # fmt: skip


def ok(result: dict[str, Any]) -> dict[str, Any]:
    assert result["ok"], result["error"]
    assert result["error"] is None
    assert (Path(result["savepoint"]) / "_metadata").is_file()
    assert Path(result["dump"]).is_file()
    assert not [line for line in result["lines"] if "error" in line]
    return result


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("name", ["hashmap", "rocksdb"])
def test_unchanged_restore_savepoints_the_truth(batch, version: str, name: str) -> None:
    result = ok(batch(version).results[name])
    assert_same(result["lines"], truth(version, TRUTH_OF[name]))


def keyed_pairs(lines: list[dict[str, Any]]) -> int:
    """The (state, key) pairs of the keyed states of `values` in a dump (timers excluded). The
    operator is found by its state `ttl-value` (1.x dumps have no uids)."""
    (values,) = {line["operator_id"] for line in lines if line["state"] == "ttl-value"}
    return len(
        {
            (line["state"], json.dumps(line["key"]))
            for line in lines
            if line["operator_id"] == values and line["kind"] in KEYED_KINDS
        }
    )


KEYED_KINDS = {"VALUE", "LIST", "MAP", "REDUCING", "AGGREGATING"}


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("name", ["hashmap", "rocksdb"])
def test_unchanged_restore_reaches_every_key(batch, version: str, name: str) -> None:
    """Every (state, key) getKeys lists after the restore reads back through setCurrentKey, and
    its key group is in the subtask's range; every keyed entry of the truth is among them."""
    result = ok(batch(version).results[name])
    assert result["unreachable"] == [] and result["misplaced"] == []
    assert result["checked"] > 0
    assert result["checked"] == keyed_pairs(truth(version, TRUTH_OF[name]))


def without_ttl(lines: list[dict[str, Any]], state: str) -> list[dict[str, Any]]:
    return [
        {k: v for k, v in line.items() if not (line["state"] == state and k == "ttl_timestamp")}
        for line in lines
    ]


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("name, state", [("ttl_on", "string"), ("ttl_off", "ttl-value")])
def test_ttl_on_off(batch, version: str, name: str, state: str) -> None:
    run = batch(version)
    result = run.results[name]
    if version not in MIGRATES_TTL:
        # Flink < 2.2: the heap backend checks the new (TtlSerializer / plain) serializer against
        # the restored one and refuses the restore, e.g. 1.20.3 ttl_on:
        # "org.apache.flink.util.StateMigrationException: For heap backends, the new state
        # serializer (...TtlStateFactory$TtlSerializer@...) must not be incompatible with the old
        # state serializer (...StringSerializer@...)." (ttl_off: the other way round)
        assert not result["ok"]
        assert result["savepoint"] is None and result["lines"] is None
        assert "org.apache.flink.util.StateMigrationException" in result["error"]
        assert "must not be incompatible with the old state serializer" in result["error"]
        ttl, plain = "runtime.state.ttl.TtlStateFactory$TtlSerializer", "api.common.typeutils.base.StringSerializer"  # fmt: skip
        new, old = (ttl, plain) if name == "ttl_on" else (plain, ttl)
        assert f"new state serializer (org.apache.flink.{new}@" in result["error"]
        assert f"old state serializer (org.apache.flink.{old}@" in result["error"]
        return
    # Flink 2.2+: migrated. Every value is kept; ttl_on wraps each with a last-access timestamp of
    # the restore (wall clock), ttl_off drops the timestamps the job had written.
    ok(result)
    expected = truth(version, "hashmap-canonical")
    assert_same(without_ttl(result["lines"], state), without_ttl(expected, state))
    mine = [line for line in result["lines"] if line["state"] == state]
    assert len(mine) == len([line for line in expected if line["state"] == state]) == 16
    if name == "ttl_on":
        assert all(run.started_ms <= line["ttl_timestamp"] <= run.ended_ms for line in mine)
    else:
        assert all("ttl_timestamp" in line for line in expected if line["state"] == state)
        assert not any("ttl_timestamp" in line for line in mine)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("name", ["rename", "drop"])
def test_unregistered_restored_state_is_written_back(batch, version: str, name: str) -> None:
    """The job registers `string` as `string-renamed` (rename) or not at all (drop): the restored
    `string` is still in the new savepoint, under its old name and with every entry, and the
    renamed registration has no entry. (A renamed state is not moved by a restore.)"""
    result = ok(batch(version).results[name])
    assert_same(result["lines"], truth(version, "hashmap-canonical"))
    assert not [line for line in result["lines"] if line["state"] == "string-renamed"]
    assert len([line for line in result["lines"] if line["state"] == "string"]) == 16
