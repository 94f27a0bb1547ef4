"""Re-hashing keys for a new max parallelism, without Spark or Flink: key regrouping, planning
and the refusals (bounds, key serializers)."""

from __future__ import annotations

import json
import pickle
import shutil
from pathlib import Path

import pytest

from statectl.cli.main import main
from statectl.errors import StatectlError
from statectl.formats.java_types import KEY_TYPES, key_type_for_serializer
from statectl.operations.rescale.plan import plan_rescale
from statectl.operations.rescale.rekey import CanonicalSource, KeyRegrouper
from statectl.savepoint.reader import open_savepoint
from tests.conftest import fixture_savepoint

STRING = key_type_for_serializer("org.apache.flink.api.common.typeutils.base.StringSerializer")
LONG = key_type_for_serializer("org.apache.flink.api.common.typeutils.base.LongSerializer")
KEYED_UIDS = {"keyed-str", "keyed-long"}

# --- regrouping keys ---------------------------------------------------------------------


def test_value_key_gets_the_new_prefix() -> None:
    regrouper = KeyRegrouper(STRING, 128, 4096, frozenset())
    key = bytes([STRING.key_group("k29", 128)]) + STRING.write("k29") + b"\x00"
    key_group, new_key = regrouper.regroup(0, key)
    assert key_group == STRING.key_group("k29", 4096)
    assert new_key == key_group.to_bytes(2, "big") + STRING.write("k29") + b"\x00"


def test_timer_key_is_read_after_its_timestamp() -> None:
    regrouper = KeyRegrouper(LONG, 300, 128, frozenset({3}))
    timestamp = (4102444800000 ^ (1 << 63)).to_bytes(8, "big")
    key = LONG.key_group(-7, 300).to_bytes(2, "big") + timestamp + LONG.write(-7) + b"\x00"
    key_group, new_key = regrouper.regroup(3, key)
    assert key_group == LONG.key_group(-7, 128)
    assert new_key == bytes([key_group]) + timestamp + LONG.write(-7) + b"\x00"


def test_key_types_pickle_by_name() -> None:
    for key_type in KEY_TYPES.values():
        assert pickle.loads(pickle.dumps(key_type)) is key_type


# --- planning ----------------------------------------------------------------------------


def test_plan_rehashes_keyed_operators_and_sets_max_on_every_operator() -> None:
    sp = open_savepoint(str(fixture_savepoint("hashmap_canonical_files")))
    plan = plan_rescale(sp, 3, max_parallelism=256)
    for op_plan in plan.operators:
        assert op_plan.max_parallelism == 256
        keyed = op_plan.operator.uid in KEYED_UIDS
        assert (op_plan.rekey is not None) == keyed
        if keyed:
            assert op_plan.rekey.parallelism == 3
            assert [op_plan.rekey.key_groups(i) for i in range(3)] == [
                (0, 85),
                (86, 170),
                (171, 255),
            ]
            assert all(isinstance(s, CanonicalSource) for s in op_plan.rekey.sources)
            assert all(t.keyed is None for t in op_plan.targets)


def test_same_max_parallelism_copies_blocks() -> None:
    sp = open_savepoint(str(fixture_savepoint("hashmap_canonical_files")))
    plan = plan_rescale(sp, 3, max_parallelism=128)
    assert all(p.rekey is None for p in plan.operators)


def test_stateless_operators_get_the_new_max_with_parallelism_capped() -> None:
    sp = open_savepoint(str(fixture_savepoint("hashmap_p4")))
    plan = plan_rescale(sp, None, {"keyed-str": 2, "keyed-long": 2, "opstate": 2, "bcast": 2}, 2)
    stateless = [p for p in plan.operators if p.operator.uid in {"stateless", "sink"}]
    assert stateless and all(p.new_parallelism == 2 and p.max_parallelism == 2 for p in stateless)


@pytest.mark.parametrize("bad", [0, 32769])
def test_max_parallelism_outside_flinks_bounds(bad: int) -> None:
    sp = open_savepoint(str(fixture_savepoint("hashmap_canonical_files")))
    with pytest.raises(StatectlError, match=r"outside 1\.\.32768"):
        plan_rescale(sp, None, max_parallelism=bad)


def test_max_parallelism_below_the_parallelism() -> None:
    sp = open_savepoint(str(fixture_savepoint("hashmap_canonical_files")))
    with pytest.raises(StatectlError, match=r"parallelism 3 is not within 1\.\.max parallelism 2"):
        plan_rescale(sp, 3, max_parallelism=2)


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    out, err = capsys.readouterr()
    return int(exit_info.value.code or 0), out, err


def test_unsupported_key_serializer_is_one_line_naming_operator_and_class(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Keys of a serializer statectl cannot hash (here a renamed LongSerializer): refused before
    anything is written."""
    source = tmp_path / "sp"
    shutil.copytree(fixture_savepoint("hashmap_canonical_files"), source)
    renamed = 0
    for path in source.iterdir():
        data = path.read_bytes()
        if b"base.LongSerializer$" in data:
            path.write_bytes(data.replace(b"base.LongSerializer$", b"base.LongSerializeX$"))
            renamed += 1
    assert renamed >= 2  # keyed-long's files, and files with Long values
    code, out, err = run(["rescale", str(source), "-o", str(tmp_path / "out"), "--max-parallelism", "256"], capsys)  # fmt: skip
    assert code == 1 and out == ""
    assert err.count("\n") == 1
    assert "operator keyed-long (9ffc9079ae46c8da2062fcba248ae73c)" in err
    assert "base.LongSerializeX$LongSerializerSnapshot cannot be re-hashed" in err
    assert str(source) in err
    assert not (tmp_path / "out").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["sp"]


def test_dry_run_shows_the_rehash(capsys: pytest.CaptureFixture[str]) -> None:
    source = str(fixture_savepoint("hashmap_maxp300"))
    code, out, _ = run(["rescale", source, "-o", "/nonexistent/x", "--max-parallelism", "128", "--dry-run", "--json"], capsys)  # fmt: skip
    assert code == 0
    plan = {op["uid"]: op for op in json.loads(out)["operators"]}
    assert plan["keyed-long"]["old_max_parallelism"] == 300
    assert plan["keyed-long"]["new_max_parallelism"] == 128
    assert plan["keyed-long"]["rehash"]["key_type"] == "Long"
    assert plan["keyed-str"]["rehash"]["key_type"] == "String"
    assert [s["key_groups"] for s in plan["keyed-str"]["subtasks"]] == [[0, 63], [64, 127]]
    assert "rehash" not in plan["opstate"]
