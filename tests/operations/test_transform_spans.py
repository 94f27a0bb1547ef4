"""A transform's writers carry the other states' runs by the runs its readers found in the
same blocks (sent with the rows), not by scanning each block again: the output is byte for
byte what the scan gives, and a run list that does not fit the block is not used."""

from __future__ import annotations

import uuid
from pathlib import Path

import fsspec
import pytest

import statectl
from statectl.formats import entry_scan
from statectl.savepoint import keyed_rewrite

SOURCE = str(
    Path(__file__).parents[1] / "fixtures" / "values" / "2.3.0-hashmap-canonical" / "savepoint"
)


def _transformed(
    monkeypatch: pytest.MonkeyPatch, by_spans: bool
) -> tuple[dict[str, bytes], list[bool]]:
    """The output's files (name → bytes) of an identity transform of `string`, in this process
    (memory://: the local engine), with the spans used or not; whether each block took them."""
    taken: list[bool] = []
    real = keyed_rewrite._copy_by_spans

    def recorded(*args: object) -> bool:
        done = by_spans and real(*args)  # type: ignore[arg-type]
        taken.append(done)
        return done

    monkeypatch.setattr(keyed_rewrite, "_copy_by_spans", recorded)
    out = f"memory://statectl-tests/{uuid.uuid4().hex}/out"
    statectl.transform(SOURCE, out, "values", "string", python=lambda batch: batch)
    fs = fsspec.filesystem("memory")
    root = out.removeprefix("memory://")
    files = {path.rsplit("/", 1)[1]: fs.cat_file(path) for path in fs.find(root)}
    fs.rm(root, recursive=True)
    return files, taken


def test_the_runs_found_by_the_readers_give_the_bytes_a_scan_gives(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    by_spans, taken = _transformed(monkeypatch, by_spans=True)
    assert taken and all(taken)  # every block of every subtask, not one scanned again
    scanned, _ = _transformed(monkeypatch, by_spans=False)
    assert by_spans.keys() == scanned.keys()
    assert by_spans == scanned


def test_runs_that_do_not_tile_the_block_are_not_used() -> None:
    block = bytes.fromhex("0000") + b"a" * 10 + bytes.fromhex("0001") + b"b" * 6 + b"\xff\xff"
    assert entry_scan.spans_tile(block, ((0, 2, 12), (1, 14, 20)))
    assert not entry_scan.spans_tile(block, ((0, 2, 12), (1, 14, 19)))  # short of the end mark
    assert not entry_scan.spans_tile(block, ((0, 2, 12), (2, 14, 20)))  # another state's id
    assert not entry_scan.spans_tile(block, ((0, 2, 11), (1, 13, 20)))  # a boundary moved
    assert not entry_scan.spans_tile(block, ())
    packed = entry_scan.pack_spans(len(block), ((0, 2, 12), (1, 14, 20)))
    assert entry_scan.unpack_spans(packed) == (len(block), ((0, 2, 12), (1, 14, 20)))
