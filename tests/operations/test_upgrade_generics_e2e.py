"""`statectl upgrade --classpath` of a Kryo user class with fields of generic types, proven by
real Flink: the values job's `kryo-generic` state (`Model.Tagged`: no default constructor, so
Kryo's FieldSerializer; `List<String>`, `Map<String, Long>`, `Set<Integer>`,
`Map<String, List<Integer>>`, `List<List<String>>`, `List<Color>`, `TreeMap<String, Long>`,
`List<? extends Number>`, with null, empty, shared and null-holding values), which the job
registers only on request, so its savepoints are written here (cached, one JVM) and not
committed. Flink 1.20.3 writes them (hashmap canonical, RocksDB native), `check` finds that Kryo 5
writes these values otherwise (`wrong`), `upgrade` converts them with the job's jar, and the job
built against Flink 2.3.0, the state registered and read key by key, restores every value 1.20
wrote (its dumper's truth), all the other states too. statectl then reads the class's values in
the savepoint Flink 2.3.0 wrote (Kryo 5) as Flink 2.3.0 reads them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import statectl
from statectl.formats.state_values import keyed_codec
from statectl.savepoint.classpath import ClassPath
from statectl.savepoint.entries import keyed_files
from statectl.savepoint.reader import open_savepoint
from tests.flink import harness
from tests.operations.test_state_edits_e2e import _ok, assert_equal
from tests.operations.test_upgrade_e2e import job_jar

pytestmark = pytest.mark.flink

VERSION = "1.20.3"
KINDS = ("hashmap-canonical", "rocksdb-native")
STATE = "kryo-generic"
EXTRA = (STATE,)


@pytest.fixture(scope="module")
def written() -> dict[str, Path]:
    return harness.values_savepoints(VERSION, KINDS, extra=EXTRA)


@pytest.fixture(scope="module")
def jar(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return job_jar(VERSION, tmp_path_factory.mktemp("jar"))


@pytest.fixture(scope="module")
def restored(
    written: dict[str, Path], jar: Path, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("upgrade-generics")
    requests = []
    for kind in KINDS:
        out = root / kind
        report = statectl.upgrade(str(written[kind] / "savepoint"), str(out), classpath=[str(jar)])
        assert STATE in [s.state for s in report.converted] and not report.dropped
        requests.append({"savepoint": str(out), "out": str(root / f"restored-{kind}"), "extra": list(EXTRA)})  # fmt: skip
    return dict(zip(KINDS, harness.restore_values("2.3.0", requests), strict=True))


def generic_lines(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [line for line in lines if line["state"] == STATE]


@pytest.mark.parametrize("kind", KINDS)
def test_kryo_5_writes_the_values_otherwise(written: dict[str, Path], jar: Path, kind: str) -> None:
    source = statectl.open(str(written[kind] / "savepoint"))
    verdicts = {s.state: s for s in source.check_upgrade(classpath=[str(jar)]).states}
    assert verdicts[STATE].verdict == "wrong", verdicts[STATE]
    without = {s.state: s for s in source.check_upgrade().states}
    assert without[STATE].verdict == "unknown"


@pytest.mark.parametrize("kind", KINDS)
def test_flink_2_restores_every_value_1x_wrote(
    restored: dict[str, Any], written: dict[str, Path], kind: str
) -> None:
    lines = _ok(restored[kind])
    expected = harness.load_truth(written[kind])
    assert len(generic_lines(expected)) == 16
    assert len(generic_lines(lines)) == 16
    assert_equal(lines, expected)


@pytest.mark.parametrize("kind", KINDS)
def test_statectl_reads_what_flink_2_wrote(
    restored: dict[str, Any], written: dict[str, Path], jar: Path, kind: str
) -> None:
    """The restored job's savepoint (Kryo 5 bytes Flink 2.3.0 wrote): every value decodes with
    the job's classes to what Flink read, and encodes back to its bytes."""
    _ok(restored[kind])
    savepoint = open_savepoint(restored[kind]["savepoint"])
    operators = harness.load_manifest(written[kind])["operators"]
    values_id = next(op["id"] for op in operators if op["uid"] == "values")
    (operator,) = [o for o in savepoint.metadata.operators if o.operator_id_hex == values_id]
    decoded = []
    with ClassPath([jar]) as classes:
        for file in keyed_files(savepoint, operator):
            header = file.header()
            (meta,) = [s for s in header.states if s.name == STATE]
            codec = keyed_codec(meta, header.key_serializer_snapshot, 2, classes)
            for entry in file.entries():
                if entry.state.name == STATE:
                    value = codec.decode_value(entry.value).value
                    assert codec.encode_value(value) == entry.value
                    assert codec.value is not None
                    decoded.append(codec.value.to_json(value))
    expected = [line["value"] for line in generic_lines(harness.load_truth(written[kind]))]
    assert sorted(map(canonical, decoded)) == sorted(map(canonical, expected))


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)
