"""`statectl diff` on real Flink 2.3 savepoints, their rescaled outputs and edited copies."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from statectl.cli.main import main
from statectl.execution.spark import SparkEngine
from statectl.formats import keyed_blocks
from statectl.formats.handles import KeyGroupsHandle, RelativeFileHandle
from statectl.operations.diff import DiffReport, Example, diff
from statectl.operations.rescale.job import rescale
from statectl.operations.rescale.plan import plan_rescale
from statectl.savepoint.keyed import keyed_header
from statectl.savepoint.reader import open_savepoint
from tests.conftest import fixture_names, fixture_savepoint, load_manifest

CANONICAL = [
    n
    for n in fixture_names()
    if load_manifest(n)["format"] == "CANONICAL" and load_manifest(n)["mode"] == "savepoint"
]
PARALLELISMS = [1, 3, 4]


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    out, err = capsys.readouterr()
    return int(exit_info.value.code or 0), out, err


def differing(report: DiffReport) -> dict[tuple[str, str], tuple[int, int, int]]:
    return {
        (s.operator, s.state): (s.only_in_a, s.only_in_b, s.changed)
        for s in report.states
        if not s.identical
    }


def entry_counts(report: DiffReport) -> dict[tuple[str, str], tuple[int, int]]:
    return {(s.operator, s.state): (s.entries_a, s.entries_b) for s in report.states}


# --- savepoints that hold the same state -------------------------------------------------


@pytest.mark.parametrize("name", CANONICAL)
def test_a_savepoint_equals_itself(name: str) -> None:
    sp = open_savepoint(str(fixture_savepoint(name)))
    report = diff(sp, sp)
    assert report.identical and report.engine == "local"
    manifest_counts = {
        (op["uid"], state): count
        for op in load_manifest(name)["operators"]
        for state, count in op["entry_counts"].items()
    }
    keyed = {k: v for k, v in entry_counts(report).items() if k in manifest_counts}
    assert keyed == {k: (c, c) for k, c in manifest_counts.items()}


@pytest.mark.parametrize(
    "other",
    [
        "rocksdb_canonical",
        "hashmap_canonical_inline",
        "hashmap_compressed",
        "rocksdb_native_full",
        "rocksdb_native_incremental",
    ],
)
def test_same_job_written_differently_is_identical(other: str) -> None:
    """Other backend (state and entry order), inline handles, compression, RocksDB native
    (full and incremental): the same state."""
    a = open_savepoint(str(fixture_savepoint("hashmap_canonical_files")))
    report = diff(a, open_savepoint(str(fixture_savepoint(other))))
    assert report.identical, differing(report)
    assert len(report.states) == 13 and not report.notes


def test_other_max_parallelism_compares_without_key_groups() -> None:
    a = open_savepoint(str(fixture_savepoint("hashmap_canonical_files")))
    report = diff(a, open_savepoint(str(fixture_savepoint("hashmap_maxp300"))))
    assert report.identical
    assert report.notes == (
        "keyed-str: max parallelism 128 in A, 300 in B; keyed entries compared without key groups",
        "keyed-long: max parallelism 128 in A, 300 in B; keyed entries compared without key groups",
    )


# --- savepoints that differ --------------------------------------------------------------


def test_operator_list_state_compares_as_multiset_and_union_as_set() -> None:
    """hashmap_p4 ran with 4 sources: its split/union elements differ, keyed state does not."""
    a = open_savepoint(str(fixture_savepoint("hashmap_canonical_files")))
    report = diff(a, open_savepoint(str(fixture_savepoint("hashmap_p4"))))
    assert not report.identical
    assert differing(report) == {("opstate", "split"): (0, 9, 0), ("opstate", "union"): (0, 3, 0)}
    union = next(s for s in report.states if s.state == "union")
    assert union.examples == tuple(Example("only_in_b", None, b=v) for v in (2500, 3500, 3501))


def _edit_cnt(copy: Path, key: str, new_value: int) -> int:
    """Rewrite keyed-str's `cnt` entry of `key` in place with the formats module; old value."""
    sp = open_savepoint(str(copy))
    op = sp.find_operator("keyed-str")
    encoded = b"\x04" + key.encode()  # StringValue: varint(len + 1), then the chars
    for subtask in sp.subtasks(op):
        handle = subtask.managed_keyed_state
        assert isinstance(handle, KeyGroupsHandle)
        assert isinstance(handle.delegate, RelativeFileHandle)
        header = keyed_header(sp, handle)
        assert header is not None
        cnt = header.state_names().index("cnt")
        path = copy / handle.delegate.relative_path
        data = bytearray(path.read_bytes())
        for span in keyed_blocks.block_spans(handle.start_key_group, handle.offsets, len(data)):
            block = bytes(data[span.start : span.end])
            entries = list(keyed_blocks.iter_entries(block, header.compressed))
            hits = [e for e in entries if e.state_id == cnt and e.key[1:-1] == encoded]
            if not hits:
                continue
            runs: dict[int, list[tuple[bytes, bytes]]] = {}
            for e in entries:
                value = new_value.to_bytes(8, "big") if e is hits[0] else e.value
                runs.setdefault(e.state_id, []).append((e.key, value))
            rebuilt = keyed_blocks.build_block(runs.items(), header.compressed)
            assert len(rebuilt) == span.length  # same length: offsets stay valid
            data[span.start : span.end] = rebuilt
            path.write_bytes(bytes(data))
            return int.from_bytes(hits[0].value, "big")
    raise AssertionError(f"no cnt entry for {key}")


@pytest.fixture(scope="module")
def edited(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """hashmap_canonical_files and a copy whose keyed-str cnt of k29 is 356 → 1000356."""
    original = fixture_savepoint("hashmap_canonical_files")
    copy = tmp_path_factory.mktemp("edited") / "savepoint"
    shutil.copytree(original, copy)
    assert _edit_cnt(copy, "k29", 1000356) == 356
    return original, copy


def test_an_edited_value_is_exactly_the_difference(edited: tuple[Path, Path]) -> None:
    a, b = (open_savepoint(str(p)) for p in edited)
    report = diff(a, b)
    assert differing(report) == {("keyed-str", "cnt"): (0, 0, 1)}
    cnt = next(s for s in report.states if (s.operator, s.state) == ("keyed-str", "cnt"))
    assert cnt.examples == (Example("changed", 0, "k29", None, None, 356, 1000356),)
    assert (cnt.entries_a, cnt.entries_b) == (40, 40)


def test_cli_exit_codes_and_json(
    edited: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = map(str, edited)
    code, out, err = run(["diff", a, b, "--json"], capsys)
    assert (code, err) == (1, "")
    report = json.loads(out)
    assert report["identical"] is False
    [changed] = [s for s in report["states"] if not s["identical"]]
    assert changed["examples"] == [
        {"change": "changed", "key_group": 0, "key": "k29", "a": 356, "b": 1000356}
    ]
    code, out, _ = run(["diff", a, b, "--operator", "keyed-long"], capsys)
    assert code == 0 and out.strip().endswith("identical (5 states compared)")
    code, out, _ = run(["diff", a, b], capsys)
    assert code == 1
    assert 'keyed-str/cnt: key "k29" (key group 0): A 356 → B 1000356' in out
    assert out.strip().endswith("different: 1 of 13 states")


def test_a_later_checkpoint_differs_key_by_key() -> None:
    """The retained checkpoint saw more events: every difference is what the job did since."""
    a = open_savepoint(str(fixture_savepoint("rocksdb_native_full")))
    b = open_savepoint(str(fixture_savepoint("rocksdb_retained_checkpoint")))
    report = diff(a, b, "keyed-str")
    assert report.states  # only keyed-str was compared
    assert {s.operator for s in report.states} == {"keyed-str"}
    later = load_manifest("rocksdb_retained_checkpoint")["state"]["operators"]["keyed-str"]
    before = load_manifest("rocksdb_native_full")["state"]["operators"]["keyed-str"]
    cnt_a = {k: v for s in before["subtasks"].values() for k, v in s["keyed"]["cnt"].items()}
    cnt_b = {k: v for s in later["subtasks"].values() for k, v in s["keyed"]["cnt"].items()}
    cnt = next(s for s in report.states if s.state == "cnt")
    assert (cnt.entries_a, cnt.entries_b) == (len(cnt_a), len(cnt_b))
    assert cnt.only_in_a == len(cnt_a.keys() - cnt_b.keys())
    assert cnt.only_in_b == len(cnt_b.keys() - cnt_a.keys())
    assert cnt.changed == sum(cnt_a[k] != cnt_b[k] for k in cnt_a.keys() & cnt_b.keys())
    for example in cnt.examples:
        assert (example.a, example.b) == (cnt_a.get(example.key), cnt_b.get(example.key))


# --- rescaled outputs (Spark) ------------------------------------------------------------


@pytest.fixture(scope="module")
def rescaled(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, int], Path]:
    root = tmp_path_factory.mktemp("rescaled")
    outputs = {}
    for name in CANONICAL:
        for parallelism in PARALLELISMS:
            target = root / f"{name}-{parallelism}"
            source = open_savepoint(str(fixture_savepoint(name)))
            rescale(plan_rescale(source, parallelism, {}), str(target))
            outputs[(name, parallelism)] = target
    return outputs


@pytest.mark.spark
@pytest.mark.parametrize("parallelism", PARALLELISMS)
@pytest.mark.parametrize("name", CANONICAL)
def test_rescaled_output_is_identical(
    name: str, parallelism: int, rescaled: dict[tuple[str, int], Path]
) -> None:
    a = open_savepoint(str(fixture_savepoint(name)))
    b = open_savepoint(str(rescaled[(name, parallelism)]))
    assert {op.parallelism for op in b.operators if op.uid in ("keyed-str", "opstate")} == {
        parallelism
    }
    report = diff(a, b)
    assert report.identical, differing(report)
    assert all(x == y for x, y in entry_counts(report).values())


@pytest.mark.spark
def test_spark_engine_finds_the_same(
    edited: tuple[Path, Path], rescaled: dict[tuple[str, int], Path]
) -> None:
    engine = SparkEngine()
    same = diff(
        open_savepoint(str(fixture_savepoint("rocksdb_canonical"))),
        open_savepoint(str(rescaled[("rocksdb_canonical", 3)])),
        engine=engine,
    )
    assert same.identical and same.engine == "spark"
    a, b = (open_savepoint(str(p)) for p in edited)
    local, on_spark = diff(a, b), diff(a, b, engine=engine)
    assert on_spark.states == local.states
    assert differing(on_spark) == {("keyed-str", "cnt"): (0, 0, 1)}
