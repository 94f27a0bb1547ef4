"""`statectl positions`: the JSON shape, the table, and its errors (one line, no traceback)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from statectl.cli.main import main

FIXTURE = Path(__file__).resolve().parents[1] / "flink" / "sources" / "fixture"


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    out, err = capsys.readouterr()
    return int(exit_info.value.code or 0), out, err


def savepoint() -> str:
    return str(FIXTURE / "savepoint")


def test_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["positions", savepoint(), "--json"], capsys)
    assert (code, err) == (0, "")
    doc = json.loads(out)
    (source,) = doc["sources"]
    assert set(source) == {"id", "uid", "name", "parallelism", "kind", "evidence", "splits", "enumerator"}  # fmt: skip
    assert (source["uid"], source["kind"], source["parallelism"]) == ("file-src", "file", 2)
    assert [s["subtask"] for s in source["splits"]] == [0, 1]
    split = source["splits"][0]
    assert split["type"] == "file" and split["reader_offset"] == -1
    assert split["path"].startswith("file:/") and split["path"].endswith(".txt")
    assert source["enumerator"]["type"] == "file"
    assert len(source["enumerator"]["pending_splits"]) == 2


def test_table(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["positions", savepoint(), "--operator", "file-src"], capsys)
    assert (code, err) == (0, "")
    assert "file-src: file source" in out
    assert out.count("pending") == 2 and "skip" in out and "part-" in out


def test_unknown_operator(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["positions", savepoint(), "--operator", "nope"], capsys)
    assert code == 1 and out == ""
    assert err.startswith("statectl: error: ") and "unknown operator 'nope'" in err
    assert len(err.strip().splitlines()) == 1


def test_corrupt_split(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The reader state is inline in _metadata: break the first split's reader-position flag.
    target = tmp_path / "sp"
    shutil.copytree(FIXTURE / "savepoint", target)
    metadata = target / "_metadata"
    data = metadata.read_bytes()
    truth = json.loads((FIXTURE / "truth.json").read_text())
    (operator,) = truth["operators"].values()
    split_id = operator["subtasks"]["0"][0]["split_id"].encode()
    at = data.index(b"\x00\x0a" + split_id)
    hosts_at = data.index(b"\x00\x00\x00\x00\x01", at)  # no hostnames, a position follows
    metadata.write_bytes(data[: hosts_at + 4] + b"\x07" + data[hosts_at + 5 :])
    code, out, err = run(["positions", str(target)], capsys)
    assert code == 1 and out == ""
    assert len(err.strip().splitlines()) == 1, err
    assert "_metadata" in err and "SourceReaderState" in err and "subtask 0" in err
    assert "boolean byte 7" in err and "Traceback" not in err
