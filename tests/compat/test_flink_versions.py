"""Savepoints of older Flink versions: read, verified, rescaled, and restored by the same version.

tests/fixtures/compat/<version>-<kind>/ hold savepoints that the last release of every Flink
minor from 1.15 to 2.2 wrote (1.x with the compat job of tests/flink/compat, 2.x with the fixture
job of tests/flink/src; regenerate with `make fixtures-compat`), each with a manifest of exactly
the state written. Without a JVM: the format versions in the bytes, `statectl inspect --json`
against the manifest, `statectl verify --deep`. With one JVM per version (the compat job, or
RestoreCheck for 2.x, on that version's jars): every `statectl rescale -p 1|3` output, the
originals and one cross-backend restore, restored by the same Flink and compared key by key;
`statectl diff` of input and output says identical.

Flink 1.18.0/1.18.1 with snapshot compression write operator-state offsets that do not locate
the elements (FLINK-34063): statectl refuses that input, and Flink 1.18.1 cannot restore it.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from statectl.formats.handles import KeyGroupsHandle
from statectl.savepoint.model import operator_id_for_uid
from statectl.savepoint.reader import open_savepoint
from tests.conftest import run_cli as cli
from tests.flink import harness
from tests.flink.harness import RestoreRequest

VERSIONS = list(harness.COMPAT_VERSIONS)
KINDS = list(harness.COMPAT_KINDS)
PARALLELISMS = [1, 3]
# From the bytes of the fixtures (and flink-savepoint-format.md §0.1): `_metadata` version and
# the version of the operator-state header (5: no compression flag; 6: with it).
METADATA_VERSION = {
    "1.15.4": 3, "1.16.3": 4, "1.17.2": 4, "1.18.1": 4, "1.19.3": 4, "1.20.3": 4,
    "2.0.1": 5, "2.1.3": 6, "2.2.1": 6,
}  # fmt: skip
OPERATOR_HEADER_VERSION = {
    "1.15.4": 5, "1.16.3": 5, "1.17.2": 5, "1.18.1": 6, "1.19.3": 6, "1.20.3": 6,
    "2.0.1": 6, "2.1.3": 6, "2.2.1": 6,
}  # fmt: skip
KEYED_HEADER_VERSION = 6
# Compressed operator state whose elements share offsets (FLINK-34063): refused.
REFUSED = {("1.18.1", "hashmap-compressed")}
CASES = [(v, k) for v in VERSIONS for k in KINDS]


def fixture_dir(version: str, kind: str) -> Path:
    return harness.COMPAT_FIXTURES / f"{version}-{kind}"


def manifest(version: str, kind: str) -> dict[str, Any]:
    return harness.load_manifest(fixture_dir(version, kind))


def savepoint(version: str, kind: str) -> Path:
    return harness.snapshot_path(fixture_dir(version, kind))


# --------------------------------------------------------------------------- without a JVM


@pytest.mark.parametrize(("version", "kind"), CASES)
def test_format_versions_in_the_bytes(version: str, kind: str) -> None:
    m = manifest(version, kind)
    assert m["flink_version"] == version
    sp_path = savepoint(version, kind)
    magic, metadata_version = struct.unpack(">ii", (sp_path / "_metadata").read_bytes()[:8])
    assert (magic, metadata_version) == (0x4960672D, METADATA_VERSION[version])
    assert m.get("metadata_version", metadata_version) == METADATA_VERSION[version]
    sp = open_savepoint(str(sp_path))
    assert sp.metadata.version == METADATA_VERSION[version]
    assert (sp.metadata.properties == b"") == (METADATA_VERSION[version] == 3)  # V3: no tail
    operator_headers, keyed_headers = set(), set()
    for op in sp.operators:
        for sub in sp.subtasks(op):
            if sub.managed_operator_state is not None:
                operator_headers.add(
                    _i32(sp.stream(sub.managed_operator_state.delegate).read(0, 4))
                )
            if isinstance(sub.managed_keyed_state, KeyGroupsHandle):
                keyed_headers.add(_i32(sp.stream(sub.managed_keyed_state.delegate).read(0, 4)))
    assert operator_headers == {OPERATOR_HEADER_VERSION[version]}
    assert keyed_headers == (set() if kind == "rocksdb-native" else {KEYED_HEADER_VERSION})


def _i32(data: bytes) -> int:
    return struct.unpack(">i", bytes(data))[0]


@pytest.mark.parametrize(("version", "kind"), CASES)
def test_inspect_json_matches_the_manifest(version: str, kind: str) -> None:
    m = manifest(version, kind)
    code, out, err = cli("inspect", "--json", "--deep", str(savepoint(version, kind)))
    if (version, kind) in REFUSED:  # refused as inconsistent; other operators can be inspected
        assert code == 1 and "FLINK-34063" in err
        m["operators"] = [op for op in m["operators"] if op["uid"] == "keyed-str"]
        only = m["operators"][0]["id"]
        code, out, err = cli("inspect", "--json", "--deep", "--operator", only, str(savepoint(version, kind)))  # fmt: skip
    assert code == 0, err
    report = json.loads(out)
    assert (report["metadata_version"], report["checkpoint_id"]) == (
        METADATA_VERSION[version],
        m["checkpoint_id"],
    )
    # V3 has no CheckpointProperties tail: savepoint or checkpoint cannot be told
    expected_kind = "unknown" if METADATA_VERSION[version] == 3 else f"savepoint ({m['format']})"
    assert report["snapshot"] == expected_kind
    seen = {op["id"]: op for op in report["operators"]}
    assert set(seen) == {op["id"] for op in m["operators"]}
    for expected in m["operators"]:
        op = seen[expected["id"]]
        assert expected["id"] == operator_id_for_uid(expected["uid"]).hex()
        if METADATA_VERSION[version] >= 5:
            assert (op["uid"], op["name"]) == (expected["uid"], expected["name"])
        else:  # V3/V4 `_metadata` has neither
            assert (op["uid"], op["name"]) == (None, None)
        assert (op["parallelism"], op["max_parallelism"]) == (
            expected["parallelism"],
            expected["max_parallelism"],
        )
        states = sorted((s["name"], s["scope"], s["kind"], s["mode"]) for s in op["states"])
        assert states == sorted(
            (s["name"], s["scope"], s["kind"], s["mode"]) for s in expected["states"]
        ), expected["uid"]
        entries = {s["name"]: s["entries"] for s in op["states"] if s["scope"] == "keyed"}
        assert entries == expected["entry_counts"], expected["uid"]
        written = m["state"]["operators"].get(expected["uid"], {}).get("subtasks", {})
        ranges = {int(i): tuple(s["key_group_range"]) for i, s in written.items() if "keyed" in s}
        assert {s["index"]: tuple(s["key_groups"]) for s in op["subtasks"] if s["key_groups"]} == (
            ranges
        ), expected["uid"]
        formats = {s["keyed_format"] for s in op["subtasks"] if s["key_groups"]}
        assert formats == ({"native" if kind == "rocksdb-native" else "canonical"} if ranges else set())  # fmt: skip


@pytest.mark.parametrize(("version", "kind"), CASES)
def test_verify_deep(version: str, kind: str) -> None:
    code, out, err = cli("verify", "--deep", str(savepoint(version, kind)))
    if (version, kind) in REFUSED:
        assert code == 1
        assert "FLINK-34063" in out + err
    else:
        assert code == 0, out + err


# --------------------------------------------------------------------------- with Flink


@dataclass
class Rescaled:
    code: int
    stderr: str
    path: Path


@pytest.fixture(scope="module", params=VERSIONS)
def outcome(request: pytest.FixtureRequest, spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:  # fmt: skip
    """For one version: every kind rescaled to 1 and 3 through the CLI, then one JVM of that
    Flink version restores the outputs, the originals (at 2) and a hashmap output into RocksDB."""
    version = request.param
    root = tmp_path_factory.mktemp(f"compat-{version}")
    rescaled: dict[tuple[str, int], Rescaled] = {}
    for kind in KINDS:
        for p in PARALLELISMS:
            out = root / f"{kind}-p{p}"
            code, _, err = cli("rescale", str(savepoint(version, kind)), "-o", str(out), "-p", str(p), "--json")  # fmt: skip
            rescaled[(kind, p)] = Rescaled(code, err, out)
    labels: list[tuple[str, str, int]] = []
    requests: list[RestoreRequest] = []
    for kind in KINDS:
        backend = harness.COMPAT_KINDS[kind]["backend"]
        labels.append(("original", kind, 2))
        requests.append(RestoreRequest(savepoint(version, kind), 2, backend=backend))
        for p in PARALLELISMS:
            if rescaled[(kind, p)].code == 0:
                labels.append(("rescaled", kind, p))
                requests.append(RestoreRequest(rescaled[(kind, p)].path, p, backend=backend))
    labels.append(("cross", "hashmap-canonical", 3))
    requests.append(RestoreRequest(rescaled[("hashmap-canonical", 3)].path, 3, backend="rocksdb"))
    results = harness.restore_compat(version, requests)
    return {
        "version": version,
        "rescaled": rescaled,
        "restored": dict(zip(labels, results, strict=True)),
    }


def _assert_exactly_the_written_state(result: dict[str, Any], m: dict[str, Any], p: int) -> None:
    assert result["ok"], result["error"]
    assert harness.compare(m["state"], result["state"], m["operators"]) == []
    for uid in ("keyed-str", "keyed-long", "opstate", "bcast"):
        assert len(result["state"]["operators"][uid]["subtasks"]) == p, uid
    written = harness.keyed_union(m["state"], "keyed-str")["cnt"]
    assert len(written) >= 24  # not vacuous: the job's keys (all restored, by compare)


@pytest.mark.flink
@pytest.mark.spark
@pytest.mark.parametrize("kind", KINDS)
def test_flink_restores_its_own_savepoint(outcome: dict[str, Any], kind: str) -> None:
    """The harness itself, per version: the original restored at 2 equals its manifest."""
    version = outcome["version"]
    result = outcome["restored"][("original", kind, 2)]
    if (version, kind) in REFUSED:  # FLINK-34063: Flink 1.18.1 fails on its own savepoint
        assert not result["ok"]
        return
    _assert_exactly_the_written_state(result, manifest(version, kind), 2)


@pytest.mark.flink
@pytest.mark.spark
@pytest.mark.parametrize("p", PARALLELISMS)
@pytest.mark.parametrize("kind", KINDS)
def test_rescaled_savepoint_restores_exactly_the_written_state(
    outcome: dict[str, Any], kind: str, p: int
) -> None:
    version = outcome["version"]
    rescaled = outcome["rescaled"][(kind, p)]
    if (version, kind) in REFUSED:
        assert rescaled.code == 1
        assert rescaled.stderr.count("\n") == 1 and "FLINK-34063" in rescaled.stderr
        assert not rescaled.path.exists()
        return
    assert rescaled.code == 0, rescaled.stderr
    output = open_savepoint(str(rescaled.path))
    assert output.metadata.version == METADATA_VERSION[version]  # written back as read
    _assert_exactly_the_written_state(
        outcome["restored"][("rescaled", kind, p)], manifest(version, kind), p
    )


@pytest.mark.flink
@pytest.mark.spark
def test_canonical_output_restores_into_rocksdb(outcome: dict[str, Any]) -> None:
    result = outcome["restored"][("cross", "hashmap-canonical", 3)]
    _assert_exactly_the_written_state(result, manifest(outcome["version"], "hashmap-canonical"), 3)


@pytest.mark.flink
@pytest.mark.spark
@pytest.mark.parametrize("p", PARALLELISMS)
@pytest.mark.parametrize("kind", KINDS)
def test_diff_of_input_and_rescaled_output_is_identical(
    outcome: dict[str, Any], kind: str, p: int
) -> None:
    source = savepoint(outcome["version"], kind)
    if (outcome["version"], kind) in REFUSED:  # refused too, rather than compare wrong elements
        code, out, err = cli("diff", str(source), str(source))
        assert code == 1 and "FLINK-34063" in err
        return
    code, out, err = cli("diff", "--json", str(source), str(outcome["rescaled"][(kind, p)].path))
    assert code == 0, out + err
    report = json.loads(out)
    assert report["identical"] is True
    # every state: five of each keyed operator, two of opstate, one of bcast
    assert len(report["states"]) == 2 * 5 + 2 + 1
