"""`statectl uid-hash` against the operator ids Flink itself wrote into every fixture."""

from __future__ import annotations

import json

import pytest

from statectl.cli.main import main
from statectl.savepoint.reader import open_savepoint
from tests.conftest import fixture_names, fixture_savepoint, load_manifest


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    out, err = capsys.readouterr()
    return int(exit_info.value.code or 0), out, err


@pytest.mark.parametrize("name", fixture_names())
def test_json_ids_equal_the_ids_flink_wrote(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    operators = load_manifest(name)["operators"]
    code, out, err = run(["uid-hash", "--json", *(op["uid"] for op in operators)], capsys)
    assert (code, err) == (0, ""), err
    assert json.loads(out) == [{"uid": op["uid"], "id": op["id"]} for op in operators]
    # The manifest's ids are those in the fixture's `_metadata`, written by Flink.
    in_metadata = {
        op.uid: op.operator_id_hex
        for op in open_savepoint(str(fixture_savepoint(name))).metadata.operators
    }
    assert in_metadata == {op["uid"]: op["id"] for op in operators}


def test_text_output_is_one_aligned_line_per_uid(capsys: pytest.CaptureFixture[str]) -> None:
    ids = {op["uid"]: op["id"] for op in load_manifest("hashmap_canonical_files")["operators"]}
    code, out, err = run(["uid-hash", "src", "keyed-str", "sink"], capsys)
    assert (code, err) == (0, "")
    assert out == (
        f"src        {ids['src']}\nkeyed-str  {ids['keyed-str']}\nsink       {ids['sink']}\n"
    )


def test_reference_values_and_non_ascii(capsys: pytest.CaptureFixture[str]) -> None:
    """flink-savepoint-format.md §6.6; the last computed by Flink 2.3 itself (its shaded Guava
    `Hashing.murmur3_128(0)` over `putString(uid, UTF_8)`, printed by `OperatorID.toString`):
    Cyrillic and a non-BMP character (a surrogate pair in Java)."""
    uids = ["keyed-str", "opstate-map", "src", "sink", "ключ-𝄞"]
    code, out, _ = run(["uid-hash", "--json", *uids], capsys)
    assert code == 0
    assert [entry["id"] for entry in json.loads(out)] == [
        "0cad1b1f959e0cc01a89a8ec2be0100c",
        "df8326f405c4bae1d4a7b5e6df202e05",
        "f362c87ffabe89c8a91fa7d0a523ba6c",
        "2e588ce1c86a9d46e2e85186773ce4fd",
        "c1aba0503e5edd6d336d4d456dfa3b04",
    ]


@pytest.mark.parametrize("argv", [["uid-hash", ""], ["uid-hash", "--json"]])
def test_usage_errors_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(argv, capsys)
    assert (code, out) == (2, "")
