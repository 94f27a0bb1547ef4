"""`statectl migrate --classpath`, proven by real Flink 2.3.0 on the evolution job
(tests/flink/evolution): v1's savepoints (hashmap canonical, RocksDB native) migrated to v2's
types (its jar, `--type` for the Row and the Tuple, `--rename-field` for the renamed POJO field)
are restored by v2 with every operator at once and non-restored state not allowed, and every
value v2 reads is v1's carried into v2's schema, entry by entry, for every key. `check` of the
output against v2 says `as-is` for every state, and the serializer snapshots written are
byte-equal to those v2 writes in a savepoint of what it restored.

The three states v2 changed in ways statectl does not convert (an enum constant removed, a
class no longer a POJO, a String field become an int whose values do not parse) are refused,
one line each, and the test drops their operators.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

import statectl
from statectl.operations.upgrade import each_state
from tests.flink import harness
from tests.operations.test_check_e2e import EXPECTED

pytestmark = pytest.mark.flink

V2_TYPES = {
    "op-row-added/row-added": "ROW{id STRING, qty INT, comment STRING}",
    "op-tuple-retyped/tuple-retyped": "TUPLE2{f0 STRING, f1 BIGINT}",
}
RENAMES = {"op-pojo-renamed/pojo-renamed": {"name": "title"}}
DROPPED = ("op-enum-removed", "op-pojo-to-kryo", "op-map-pojo-retyped")
STATES = [state for state in EXPECTED if f"op-{state}" not in DROPPED]
FORMATS = {"hashmap-canonical": "CANONICAL", "rocksdb-native": "NATIVE"}


def _migrate(source: Path, destination: Path, **options: Any) -> statectl.MigrationReport:
    return statectl.migrate(
        str(source), str(destination), classpath=[str(harness.evolution_jar("v2"))],
        types=V2_TYPES, rename_fields=RENAMES, **options,
    )  # fmt: skip


@pytest.fixture(scope="module")
def migrated(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("schema-migrated")
    savepoints = harness.evolution_savepoints()
    for kind in harness.EVOLUTION_KINDS:
        _migrate(savepoints[kind], out / kind, drops=DROPPED)
    return {kind: out / kind for kind in harness.EVOLUTION_KINDS}


@pytest.fixture(scope="module")
def restored(
    migrated: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
) -> dict[tuple[str, str], dict[str, Any]]:
    """(job version, kind) → what v1 read of its own savepoint (the truth) and what v2 read of
    the migrated one, every operator restored at once and nothing left unclaimed; v2 then takes
    a savepoint ("savepoint_out") of what it restored."""
    savepoints = harness.evolution_savepoints()
    taken = tmp_path_factory.mktemp("v2-savepoints")
    kinds = harness.EVOLUTION_KINDS
    results: dict[tuple[str, str], dict[str, Any]] = {}
    for version, sources, states in (
        ("v1", savepoints, list(EXPECTED)),
        ("v2", migrated, STATES),
    ):
        requests = [
            {"savepoint": str(sources[kind]), "states": states, "backend": kind.split("-")[0]}
            for kind in kinds
        ]
        if version == "v2":
            for request, kind in zip(requests, kinds, strict=True):
                request.update(savepoint_out=str(taken / kind), format=FORMATS[kind])
        restores = harness.restore_evolution(version, requests)
        for kind, result in zip(kinds, restores, strict=True):
            result["taken"] = taken / kind
            results[(version, kind)] = result
    return results


def carried(state: str, value: Any) -> Any:
    """A v1 value (the dump's JSON) as v2's schema holds it after the migration."""
    if state == "pojo-added":
        return {**value, "extra": None}
    if state == "pojo-removed":
        return {k: v for k, v in value.items() if k != "b"}
    if state == "pojo-renamed":
        return {"title": value["name"], "qty": value["qty"]}
    if state == "row-added":
        return [*value, None]
    if state in ("list-pojo-added", "oplist-pojo-added"):
        return [{**item, "note": None} for item in value]
    return value  # int → long, the tuple's f1 too: the same numbers


@pytest.mark.parametrize("kind", harness.EVOLUTION_KINDS)
def test_v2_restores_every_value_carried_into_its_schema(
    kind: str, restored: dict[tuple[str, str], dict[str, Any]]
) -> None:
    truth, after = restored[("v1", kind)], restored[("v2", kind)]
    assert truth["ok"], truth.get("error")
    assert after["ok"], after.get("error")
    compared = 0
    for state in STATES:
        before, now = truth["values"][state], after["values"][state]
        if state.startswith("oplist-"):
            assert now == carried(state, before)
            compared += len(now)
            continue
        assert now.keys() == before.keys()
        for key in before:
            assert now[key] == carried(state, before[key]), (state, key)
            compared += 1
    assert compared == 10 * 4 + 12  # 10 keyed states of 4 keys, 12 operator list elements


@pytest.mark.parametrize("kind", harness.EVOLUTION_KINDS)
def test_check_of_the_output_says_as_is(kind: str, migrated: dict[str, Path]) -> None:
    report = statectl.check(str(migrated[kind]), [str(harness.evolution_jar("v2"))], V2_TYPES)
    assert {s.state: s.verdict for s in report.states} == dict.fromkeys(STATES, "as-is")


@pytest.mark.parametrize("kind", harness.EVOLUTION_KINDS)
def test_snapshots_are_those_v2_writes(
    kind: str, migrated: dict[str, Path], restored: dict[tuple[str, str], dict[str, Any]]
) -> None:
    (v2_savepoint,) = restored[("v2", kind)]["taken"].glob("savepoint-*")
    ours, theirs = _snapshots(migrated[kind]), _snapshots(v2_savepoint)
    changed = [s for s in STATES if s not in ("enum-added", "pojo-same", "control")]
    assert {s: ours[s] for s in changed} == {s: theirs[s] for s in changed}


def _snapshots(path: Path) -> dict[str, dict[str, bytes]]:
    """Each state's serializer snapshots (bytes), by state name."""
    sp = statectl.open(str(path)).parsed
    return {
        meta.name: {slot: s.raw for slot, s in meta.serializers.items() if s is not None}
        for op in sp.operators
        for _, meta, _ in each_state(sp, op)
    }


def test_conversions_statectl_cannot_make_are_one_line(tmp_path: Path) -> None:
    source = harness.evolution_savepoints()["hashmap-canonical"]
    with pytest.raises(statectl.StatectlError) as refused:
        _migrate(source, tmp_path / "out", drops=DROPPED[:2])
    message = str(refused.value)
    assert re.fullmatch(
        r"op-map-pojo-retyped: state 'map-pojo-retyped', key 'k\d', user_key 'm\d': field "
        r"label: 'label\d+' does not parse as INT",
        message,
    ), message
    assert not (tmp_path / "out").exists()
    with pytest.raises(statectl.StatectlError, match="no longer a POJO"):
        _migrate(source, tmp_path / "out", drops=DROPPED[::2])
    with pytest.raises(statectl.StatectlError, match=r"pojo-renamed.*--rename-field"):
        statectl.migrate(
            str(source), str(tmp_path / "out"), classpath=[str(harness.evolution_jar("v2"))],
            types=V2_TYPES, drops=DROPPED,
        )  # fmt: skip


def test_ttl_wrapped_values_migrate_with_their_last_access_times(tmp_path: Path) -> None:
    """TTL turned on (`--ttl`) for a value and a list state of v1's savepoint, then migrated:
    each value (each element) carried into v2's schema, its last-access time kept, and
    `check` says as-is. (The evolution job declares no TTL: read back by statectl.)"""
    source = harness.evolution_savepoints()["rocksdb-native"]
    states = ("pojo-added", "list-pojo-added")
    day = 86_400_000
    plan = statectl.plan_migration(str(source), ttl=[(f"op-{s}", s, day) for s in states])
    statectl.write_migration(plan, str(tmp_path / "ttl"))
    _migrate(tmp_path / "ttl", tmp_path / "out", drops=DROPPED)
    for state in states:
        before = _rows(tmp_path / "ttl", state)
        after = _rows(tmp_path / "out", state)
        assert after.keys() == before.keys() and len(after) == 4
        for key, (value, ttl) in before.items():
            assert after[key] == (carried(state, value), ttl)
    report = statectl.check(str(tmp_path / "out"), [str(harness.evolution_jar("v2"))], V2_TYPES)
    verdicts = {s.state: (s.verdict, s.type.endswith(", TTL")) for s in report.states}
    assert all(verdicts[s] == ("as-is", True) for s in states)


def _rows(path: Path, state: str) -> dict[str, tuple[Any, Any]]:
    table = statectl.open(str(path)).operator(f"op-{state}").state(state).to_arrow()
    return {r["key"]: (r["value"], r.get("ttl_timestamp")) for r in table.to_pylist()}


def test_back_to_v1_narrows_only_when_asked(
    migrated: dict[str, Path],
    restored: dict[tuple[str, str], dict[str, Any]],
    tmp_path: Path,
) -> None:
    """v2's migrated savepoint carried back to v1's types: `count` BIGINT → INT and the
    Tuple's f1 narrow, refused (naming the key) unless asked; then v1 restores every state
    (strictly) with its own values back, but the field v2 had removed, now null."""
    v1_types = {"op-tuple-retyped/tuple-retyped": "TUPLE2{f0 STRING, f1 INT}"}
    options: dict[str, Any] = {
        "classpath": [str(harness.evolution_jar("v1"))], "types": v1_types,
        "rename_fields": {"op-pojo-renamed/pojo-renamed": {"title": "name"}},
        "drops": ["op-row-added"],  # a Row losing a field: not converted
    }  # fmt: skip
    source = str(migrated["hashmap-canonical"])
    with pytest.raises(statectl.StatectlError, match=r"key 'k\d'.*BIGINT → INT narrows"):
        statectl.migrate(source, str(tmp_path / "out"), **options)
    statectl.migrate(source, str(tmp_path / "out"), narrow=True, **options)
    counts = {v["count"] for v, _ in _rows(tmp_path / "out", "pojo-retyped").values()}
    assert counts == {8, 9, 10, 11}  # the last record of each of the 4 keys
    report = statectl.check(str(tmp_path / "out"), [str(harness.evolution_jar("v1"))], v1_types)
    assert {s.verdict for s in report.states} == {"as-is"}
    states = [s for s in STATES if s != "row-added"]
    request = {"savepoint": str(tmp_path / "out"), "states": states, "backend": "hashmap"}
    (back,) = harness.restore_evolution("v1", [request])
    assert back["ok"], back.get("error")
    truth = restored[("v1", "hashmap-canonical")]["values"]
    removed = {key: {**value, "b": None} for key, value in truth["pojo-removed"].items()}
    assert back["values"] == {**{s: truth[s] for s in states}, "pojo-removed": removed}
