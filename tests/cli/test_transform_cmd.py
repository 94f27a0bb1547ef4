"""`statectl transform` and the state options of `statectl migrate`, read back by statectl:
the result holds exactly the edit, bad results are refused in one line with nothing written.
(Flink restores such outputs in tests/operations/test_state_edits_e2e.py.)"""

from __future__ import annotations

import importlib
import json
import sys
import textwrap
from pathlib import Path

import pyarrow as pa
import pytest

import statectl
from statectl.cli.main import main
from tests.formats.test_class_files import NEEDS_JAVAC, values_classes

SOURCE = str(
    Path(__file__).parents[1] / "fixtures" / "values" / "2.3.0-hashmap-canonical" / "savepoint"
)


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    try:
        main(argv)
        code = 0
    except SystemExit as exit_info:
        code = int(exit_info.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def keys(path: Path, state: str) -> list[str]:
    return sorted(
        statectl.open(str(path)).operator("values").state(state).to_arrow()["key"].to_pylist()
    )


@pytest.fixture
def module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    (tmp_path / "edits.py").write_text(
        textwrap.dedent(
            """
            import pyarrow as pa
            import pyarrow.compute as pc

            def without_k03(batch):
                return batch.filter(pc.not_equal(batch.column("key"), "k03"))

            def unchanged(batch):
                return batch

            def keys_rebuilt(batch):  # the same keys in new buffers: hashed again
                keys = pa.array(batch.column("key").to_pylist(), batch.schema.field("key").type)
                return batch.set_column(0, "key", keys)

            def wrong_type(batch):
                return batch.set_column(2, "value", batch.column("key"))

            def int_keys_in_batch_2(batch):  # the batch of the second subtask's rows
                if "k07" not in batch.column("key").to_pylist():
                    return batch
                keys = pa.array(range(batch.num_rows), pa.int64())
                return batch.set_column(0, "key", keys)

            def null_count(batch):
                return _set_field(batch, "count")

            def null_score(batch):
                return _set_field(batch, "score")

            def _set_field(batch, name):
                value = batch.column("value")
                fields = [
                    pa.nulls(len(value), f.type) if f.name == name else value.field(f.name)
                    for f in value.type
                ]
                nulled = pa.StructArray.from_arrays(fields, fields=list(value.type))
                return batch.set_column(2, "value", nulled)
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "edits"
    sys.modules.pop("edits", None)


def test_python_function_removes_a_key(
    tmp_path: Path, module: str, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    code, stdout, _ = run(
        ["transform", SOURCE, "-o", str(out), "--operator", "values", "--state", "pojo",
         "--python", f"{module}:without_k03", "--json"], capsys,
    )  # fmt: skip
    assert code == 0
    assert json.loads(stdout)["states"] == [
        {
            "operator": "values",
            "state": "pojo",
            "action": "replace",
            "new_name": None,
            "rows": 15,
            "nulls": None,
        }
    ]
    assert keys(out, "pojo") == [k for k in keys(Path(SOURCE), "pojo") if k != "k03"]
    assert keys(out, "string") == keys(Path(SOURCE), "string")  # the rest carried over


def test_keys_passed_through_keep_their_key_groups_as_keys_hashed_again_do(
    tmp_path: Path, module: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A function that leaves the key column alone: its rows' key groups are the ones read
    (not hashed again); the same keys in new buffers are hashed. Both outputs read back the
    same, row for row in file order (key group by key group), and hold the original rows."""
    from statectl.operations.transform import same_keys

    outputs = {}
    for function in ("unchanged", "keys_rebuilt"):
        out = tmp_path / function
        code, _, err = run(
            ["transform", SOURCE, "-o", str(out), "--operator", "values", "--state", "string",
             "--python", f"{module}:{function}"], capsys,
        )  # fmt: skip
        assert code == 0, err
        outputs[function] = statectl.open(str(out)).operator("values").state("string").to_arrow()
    original = statectl.open(SOURCE).operator("values").state("string").to_arrow()
    assert outputs["unchanged"].equals(outputs["keys_rebuilt"])
    assert outputs["unchanged"].sort_by("key").equals(original.sort_by("key"))

    batch = original.to_batches()[0]
    edits = importlib.import_module(module)
    assert same_keys(batch, pa.Table.from_batches([edits.unchanged(batch)]))
    assert not same_keys(batch, pa.Table.from_batches([edits.keys_rebuilt(batch)]))
    assert not same_keys(batch, pa.Table.from_batches([batch.slice(1)]))


def test_a_mistyped_column_is_refused_and_nothing_written(
    tmp_path: Path, module: str, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    code, _, err = run(
        ["transform", SOURCE, "-o", str(out), "--operator", "values", "--state", "pojo",
         "--python", f"{module}:wrong_type"], capsys,
    )  # fmt: skip
    assert code == 1
    assert len(err.strip().splitlines()) == 1
    assert "column 'value': expected struct<" in err and "found string" in err
    assert not out.exists()


@pytest.mark.spark
def test_sql_updates_and_deletes(
    tmp_path: Path, spark: object, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    query = "SELECT key, namespace, concat(value, '!') AS value FROM state WHERE key <> 'k05'"
    code, _, err = run(
        ["transform", SOURCE, "-o", str(out), "--operator", "values", "--state", "string",
         "--sql", query], capsys,
    )  # fmt: skip
    assert code == 0, err
    before = statectl.open(SOURCE).operator("values").state("string").to_arrow().to_pylist()
    after = statectl.open(str(out)).operator("values").state("string").to_arrow().to_pylist()
    expected = {r["key"]: r["value"] + "!" for r in before if r["key"] != "k05"}
    assert {r["key"]: r["value"] for r in after} == expected


def test_migrate_state_options(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    code, _, err = run(
        ["migrate", SOURCE, "-o", str(out), "--ttl", "values/string=7d", "--no-ttl",
         "values/ttl-value", "--drop-state", "values/enum", "--rename-state", "values/long=long2"],
        capsys,
    )  # fmt: skip
    assert code == 0, err
    states = {s.name: s.type for s in statectl.open(str(out)).operator("values").states}
    assert states["string"] == "STRING, TTL" and states["ttl-value"] == "STRING"
    assert "enum" not in states and "long" not in states and states["long2"] == "BIGINT"


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (["--drop-state", "values/nope"], "has no state 'nope'"),
        (["--no-ttl", "values/string"], "has no TTL"),
        (["--ttl", "values/ttl-value=1h"], "has TTL already"),
        (["--ttl", "values/string=soon"], "expected a duration"),
        (["--rename-state", "values/long=string"], "would be named 'string'"),
    ],
)
def test_migrate_state_options_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], option: list[str], message: str
) -> None:
    out = tmp_path / "out"
    code, _, err = run(["migrate", SOURCE, "-o", str(out), *option], capsys)
    assert code != 0
    assert message in err
    assert not out.exists()


@pytest.mark.spark
def test_a_failing_query_is_one_line(
    tmp_path: Path, spark: object, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    code, _, err = run(
        ["transform", SOURCE, "-o", str(out), "--operator", "values", "--state", "string",
         "--sql", "SELECT nope FROM state"], capsys,
    )  # fmt: skip
    assert code == 1
    assert "the SQL query failed" in err and "internal error" not in err
    assert not out.exists()


FILE_SOURCE = str(Path(__file__).parents[1] / "flink" / "sources" / "fixture" / "savepoint")


def test_migrate_moves_a_file_split(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    code, stdout, err = run(
        ["migrate", FILE_SOURCE, "-o", str(out), "--file-position", "file-src:0000000004=start",
         "--file-position", "file-src:0000000002=records:7", "--json"], capsys,
    )  # fmt: skip
    assert code == 0, err
    moved = {c["split_id"]: (c["old"], c["new"]) for c in json.loads(stdout)["changes"]}
    assert moved == {"0000000004": ("80 records", "start"), "0000000002": ("start", "7 records")}
    splits = {
        held.split.split_id: held.split
        for source in statectl.open(str(out)).positions().sources
        for held in source.splits
    }
    assert splits["0000000004"].reader_offset is None  # from the start
    assert (splits["0000000001"].reader_offset, splits["0000000001"].records_to_skip) == (-1, 81)


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (["--kafka-offset", "file-src:t=earliest"], "file-src"),
        (["--file-position", "file-src:nope=start"], "no split"),
        (["--kafka-offset", "file-src=5"], "expected OP:TOPIC[:PARTITION]=OFFSET"),
        (["--file-position", "file-src:0000000004=start", "--drop-state", "file-src/x"],
         "separate runs"),
    ],
)  # fmt: skip
def test_migrate_position_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], option: list[str], message: str
) -> None:
    out = tmp_path / "out"
    code, _, err = run(["migrate", FILE_SOURCE, "-o", str(out), *option], capsys)
    assert code != 0
    assert message in err
    assert not out.exists()


def test_an_operator_dropped_and_edited_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    for edit in (["--drop-state", "opstate/op-union"], ["--drop-state", "values/enum"]):
        operator = edit[1].split("/")[0]
        code, _, err = run(["migrate", SOURCE, "-o", str(out), "--drop", operator, *edit], capsys)
        assert code == 1 and "is dropped and has its states edited" in err
        assert not out.exists()


def test_a_key_of_another_type_in_one_batch_only_is_the_function_s_error(
    tmp_path: Path, module: str, capsys: pytest.CaptureFixture[str]
) -> None:
    batches = statectl.open(SOURCE).operator("values").state("pojo").read()
    assert len(list(batches)) >= 2  # the state reads in a batch per subtask
    out = tmp_path / "out"
    code, stdout, err = run(
        ["transform", SOURCE, "-o", str(out), "--operator", "values", "--state", "pojo",
         "--python", f"{module}:int_keys_in_batch_2"], capsys,
    )  # fmt: skip
    assert (code, stdout) == (1, "")
    # Each batch's result is encoded where it was made: the first that does not fit the
    # state is refused, naming its column.
    assert err == (
        "statectl: error: values: state 'pojo': column 'key': expected string, found int64\n"
    )
    assert not out.exists()


def job_classes(tmp_path: Path) -> Path:
    """The values job's POJO classes as javac lays them out (`count` is an `int`, `score` a
    `Double`): a jar for --classpath."""
    from tests.formats.test_class_files import class_bytes, field, write_jar

    pojo_fields = [
        field("id", "J"), field("count", "I"), field("name", "Ljava/lang/String;"),
        field("score", "Ljava/lang/Double;"), field("inner", "Lstatectl/values/Model$Inner;"),
    ]  # fmt: skip
    classes = {
        "statectl.values.Model$Pojo": class_bytes("statectl.values.Model$Pojo", fields=pojo_fields),
        "statectl.values.Model$Inner": class_bytes(
            "statectl.values.Model$Inner",
            fields=[field("label", "Ljava/lang/String;"), field("n", "I")],
        ),
    }
    return write_jar(tmp_path / "job.jar", classes)


@pytest.mark.parametrize(
    "classes", ["built", pytest.param("javac", marks=NEEDS_JAVAC)]
)  # fmt: skip
def test_a_null_into_a_primitive_field_is_refused_with_the_job_s_classes(
    tmp_path: Path, module: str, capsys: pytest.CaptureFixture[str], classes: str
) -> None:
    """Flink's restore fails on it ("Can not set int field ...count to null value"); the
    snapshot alone cannot tell `int` from `Integer` (IntSerializer writes both). The classes:
    built here as javac lays them out, or the values job's compiled by javac (a folder)."""
    out = tmp_path / "out"
    jar = job_classes(tmp_path) if classes == "built" else values_classes()
    code, stdout, err = run(
        ["transform", SOURCE, "-o", str(out), "--operator", "values", "--state", "pojo",
         "--python", f"{module}:null_count", "--classpath", str(jar)], capsys,
    )  # fmt: skip
    assert (code, stdout) == (1, "")
    assert err == (
        "statectl: error: values: state 'pojo': row 0: field 'count' of "
        "statectl.values.Model$Pojo is null, but the job's class declares it a primitive int: "
        "Flink cannot restore that\n"
    )
    assert not out.exists()
    code, _, err = run(
        ["transform", SOURCE, "-o", str(out), "--operator", "values", "--state", "pojo",
         "--python", f"{module}:null_score", "--classpath", str(jar), "--json"], capsys,
    )  # fmt: skip
    assert (code, err) == (0, "")  # a Double field takes a null
    assert {r["value"]["score"] for r in read_rows(out, "pojo")} == {None}


def test_a_null_into_a_field_of_a_class_not_read_is_a_warning(
    tmp_path: Path, module: str, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    code, _, err = run(
        ["transform", SOURCE, "-o", str(out), "--operator", "values", "--state", "pojo",
         "--python", f"{module}:null_count", "--json"], capsys,
    )  # fmt: skip
    assert code == 0
    assert err == (
        "statectl: warning: values: state 'pojo': 16 rows set field 'count' of "
        "statectl.values.Model$Pojo to null; statectl has not read that class: if the job "
        "declares the field a primitive, Flink cannot restore it (give the job's classes with "
        "--classpath to check)\n"
    )
    assert {r["value"]["count"] for r in read_rows(out, "pojo")} == {None}
    # the library says the same: `State.replace` returns the warning
    state = statectl.open(SOURCE).operator("values").state("pojo")
    edits = sys.modules[module]
    table = pa.Table.from_batches([edits.null_count(b) for b in state.read()])
    assert state.replace(table) == (err.removeprefix("statectl: warning: ").strip(),)


def read_rows(path: Path, state: str) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = (
        statectl.open(str(path)).operator("values").state(state).to_arrow().to_pylist()
    )
    return rows
