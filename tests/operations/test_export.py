"""`statectl export` of real Flink 2.3 savepoints holds exactly the state the job wrote."""

from __future__ import annotations

import json
import shutil
from collections import defaultdict
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from statectl.cli.main import main
from statectl.errors import StatectlError
from statectl.execution.spark import SparkEngine
from statectl.operations.export import SCHEMA, export
from statectl.savepoint.reader import open_savepoint
from tests.conftest import fixture_names, fixture_savepoint, load_manifest

TIMER_KINDS = {
    "_timer_state/event_user-timers": "event",
    "_timer_state/processing_user-timers": "processing",
}


def as_manifest_state(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Exported rows in the manifest's shape: operators → subtasks → keyed/timers/operator/…."""
    ops: dict[str, Any] = defaultdict(lambda: {"subtasks": defaultdict(dict)})
    for row in rows:
        sub = ops[row["operator"]]["subtasks"][str(row["subtask"])]
        state = row["state"]
        if row["scope"] == "keyed":
            key = str(json.loads(row["key_json"]))
            if row["kind"] == "TIMERS":
                timers = sub.setdefault("timers", {}).setdefault(TIMER_KINDS[state], {})
                timers.setdefault(key, []).append(row["timestamp"])
            elif row["kind"] == "MAP":
                entries = sub.setdefault("keyed", {}).setdefault(state, {}).setdefault(key, {})
                entries[json.loads(row["user_key_json"])] = json.loads(row["value_json"])
            else:
                sub.setdefault("keyed", {}).setdefault(state, {})[key] = json.loads(
                    row["value_json"]
                )
        elif row["kind"] == "BROADCAST":
            maps = sub.setdefault("broadcast", {}).setdefault(state, {})
            maps[json.loads(row["key_json"])] = json.loads(row["value_json"])
        else:
            sub.setdefault("operator", {}).setdefault(state, []).append(
                json.loads(row["value_json"])
            )
    return ops


def written_state(manifest: dict[str, Any]) -> dict[str, Any]:
    """The manifest's state without key-group ranges, timers sorted; a broadcast state's map
    once, in the first subtask holding a copy (every subtask holds the same: docs/counts.md)."""
    result: dict[str, Any] = {}
    for uid, op in manifest["state"]["operators"].items():
        subtasks = {}
        copies: dict[str, Any] = {}
        for index, sub in sorted(op["subtasks"].items(), key=lambda item: int(item[0])):
            sub = {k: v for k, v in sub.items() if k != "key_group_range"}
            if "broadcast" in sub:
                maps = {}
                for name, entries in sub["broadcast"].items():
                    assert copies.setdefault(name, entries) == entries  # the same map
                    if copies[name] is entries:
                        maps[name] = entries
                sub = {k: v for k, v in sub.items() if k != "broadcast"}
                if maps:
                    sub["broadcast"] = maps
            if "timers" in sub:
                sub["timers"] = {
                    kind: {key: sorted(ts) for key, ts in keys.items()}
                    for kind, keys in sub["timers"].items()
                }
            if any(sub.values()):
                subtasks[index] = sub
        if subtasks:
            result[uid] = subtasks
    return result


def exported_state(rows: list[dict[str, Any]]) -> dict[str, Any]:
    result = {}
    for uid, op in as_manifest_state(rows).items():
        subtasks = {}
        for index, sub in op["subtasks"].items():
            if "timers" in sub:
                sub["timers"] = {
                    kind: {key: sorted(ts) for key, ts in keys.items()}
                    for kind, keys in sub["timers"].items()
                }
            subtasks[index] = sub
        result[uid] = subtasks
    return result


@pytest.mark.parametrize("name", fixture_names())
def test_export_holds_exactly_the_written_state(name: str, tmp_path: Path) -> None:
    out = tmp_path / "state.parquet"
    report = export(open_savepoint(str(fixture_savepoint(name))), str(out))
    table = pq.read_table(out)
    assert table.schema == SCHEMA
    rows = table.to_pylist()
    assert report.rows == len(rows)
    assert exported_state(rows) == written_state(load_manifest(name))
    _assert_key_groups_in_range(rows, load_manifest(name))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.parquet"]  # no temp left


def _assert_key_groups_in_range(rows: list[dict[str, Any]], manifest: dict[str, Any]) -> None:
    ops = manifest["state"]["operators"]
    for row in rows:
        if row["scope"] == "keyed":
            first, last = ops[row["operator"]]["subtasks"][str(row["subtask"])]["key_group_range"]
            assert first <= row["key_group"] <= last


def test_raw_and_decoded_columns(tmp_path: Path) -> None:
    out = tmp_path / "cnt.parquet"
    sp = open_savepoint(str(fixture_savepoint("hashmap_maxp300")))
    export(sp, str(out), operator="keyed-str", state="mp")
    rows = pq.read_table(out).to_pylist()
    assert {(r["operator"], r["state"], r["kind"]) for r in rows} == {("keyed-str", "mp", "MAP")}
    k18_u1 = next(r for r in rows if r["key_json"] == '"k18"' and r["user_key_json"] == '"u1"')
    assert k18_u1["key"] == b"\x04k18"  # StringValue: varint(len + 1), chars
    assert k18_u1["namespace"] == b"\x00"  # VoidNamespace
    assert k18_u1["user_key"] == b"\x03u1"
    assert k18_u1["value"] == b"\x00" + (58).to_bytes(8, "big")  # null flag, Long
    assert k18_u1["value_json"] == "58"


def test_folder_output_equals_file_output(tmp_path: Path) -> None:
    sp = open_savepoint(str(fixture_savepoint("hashmap_compressed")))
    export(sp, str(tmp_path / "one.parquet"))
    report = export(sp, str(tmp_path / "parts") + "/")
    single = pq.read_table(tmp_path / "one.parquet").to_pylist()
    folder = ds.dataset(tmp_path / "parts", format="parquet").to_table().to_pylist()
    assert report.files > 1 and report.rows == len(folder)
    assert sorted(map(_row_key, folder)) == sorted(map(_row_key, single))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["one.parquet", "parts"]


def _row_key(row: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(row[f.name] for f in SCHEMA)


@pytest.mark.spark
@pytest.mark.parametrize("name", ["rocksdb_canonical", "rocksdb_native_incremental"])
def test_spark_writes_the_same_rows(name: str, spark: Any, tmp_path: Path) -> None:
    sp = open_savepoint(str(fixture_savepoint(name)))
    report = export(sp, str(tmp_path / "spark"), folder=True, engine=SparkEngine())
    assert report.engine == "spark"
    rows = ds.dataset(tmp_path / "spark", format="parquet").to_table().to_pylist()
    assert exported_state(rows) == written_state(load_manifest(name))


def test_refuses_to_overwrite_unless_asked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "state.parquet"
    path = str(fixture_savepoint("hashmap_canonical_inline"))
    export(open_savepoint(path), str(out), state="cnt")
    before = out.read_bytes()
    with pytest.raises(SystemExit) as exit_info:
        main(["export", path, "-o", str(out)])
    _, err = capsys.readouterr()
    assert exit_info.value.code == 1
    assert err.strip().splitlines() == [
        f"statectl: error: {out}: output exists; pass --overwrite to replace it"
    ]
    assert out.read_bytes() == before
    with pytest.raises(SystemExit) as exit_info:
        main(["export", path, "-o", str(out), "--overwrite", "--state", "union", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert exit_info.value.code in (0, None)
    assert report["rows"] == 3 and report["states"] == {"opstate/union": 3}
    assert [r["value_json"] for r in pq.read_table(out).to_pylist()] == ["500", "1500", "1501"]


def test_unknown_state_lists_the_known_ones(tmp_path: Path) -> None:
    sp = open_savepoint(str(fixture_savepoint("hashmap_canonical_files")))
    with pytest.raises(StatectlError, match=r"unknown state 'nope'; known states: .*cnt"):
        export(sp, str(tmp_path / "x.parquet"), operator="keyed-str", state="nope")
    assert list(tmp_path.iterdir()) == []


def test_output_inside_the_savepoint_is_refused(tmp_path: Path) -> None:
    copy = tmp_path / "sp"
    shutil.copytree(fixture_savepoint("hashmap_canonical_files"), copy)
    before = sorted(p.name for p in copy.iterdir())
    with pytest.raises(StatectlError, match="must not be the source savepoint"):
        export(open_savepoint(str(copy)), str(copy / "state.parquet"))
    assert sorted(p.name for p in copy.iterdir()) == before


def test_lone_surrogates_of_java_strings_stay_valid_json() -> None:
    """Java strings may hold unpaired surrogates, which UTF-8 (and Parquet) cannot: the JSON
    column escapes them, and reads back as the same string."""
    from statectl.operations.export import json_text as _json

    text = _json("a\ud800é")
    assert text == '"a\\ud800\\u00e9"'
    assert json.loads(text) == "a\ud800é"
    assert _json("é-ключ") == '"é-ключ"'
