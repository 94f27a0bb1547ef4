"""The hashmap backend's own snapshot format, written by real Flink 2.3.0: retained checkpoints
(with and without snapshot compression, max parallelism 128 and 300) and NATIVE savepoints, also
with subtasks that hold key group 0 alone (parallelism equal to max parallelism, and max
parallelism 1), whose first bytes read as canonical blocks too.

statectl reads them as Flink does: the library read and `export` of every keyed state equal the
job's own dump of what it held (the manifest's `state`: keys, values, lists in order, maps,
timers), `verify --deep` walks every entry and `inspect --deep` counts them; a truncated file and
a corrupt key group are refused in one line naming the file, never read as fewer entries.
"""

from __future__ import annotations

import json
import shutil
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import statectl
from statectl.errors import FormatError
from statectl.formats import heap_snapshot
from statectl.formats.handles import KeyGroupsHandle
from statectl.formats.metadata import read_metadata
from statectl.savepoint.keyed import block_spans, canonical_header
from statectl.savepoint.model import StateStream
from statectl.savepoint.reader import open_savepoint
from tests.conftest import run_cli as cli
from tests.flink import harness

pytestmark = pytest.mark.flink

KINDS = [*harness.HEAP_SNAPSHOT_KINDS, *harness.KEY_GROUP_ZERO_KINDS]
KEYED = ("keyed-str", "keyed-long")


@pytest.fixture(scope="module")
def fixtures() -> dict[str, Path]:
    return {**harness.heap_snapshots(), **harness.heap_snapshots(harness.KEY_GROUP_ZERO_KINDS)}


def _path(fixtures: dict[str, Path], kind: str) -> Path:
    return harness.snapshot_path(fixtures[kind])


def library_dump(path: Path, uid: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(keyed, timers) of one operator in the manifest's dump schema, from `State.to_arrow`."""
    op = statectl.open(str(path)).operator(uid)
    keyed: dict[str, dict[str, Any]] = {}
    timers: dict[str, dict[str, list[int]]] = {}
    for state in op.states:
        if state.scope != "keyed":
            continue
        rows = state.to_arrow().to_pylist()
        if state.kind == "TIMERS":
            kind = "processing" if "processing" in state.name else "event"
            for row in rows:
                timers.setdefault(kind, {}).setdefault(str(row["key"]), []).append(row["timestamp"])
            continue
        values = keyed.setdefault(state.name, {})
        for row in rows:
            key = str(row["key"])
            if state.kind == "MAP":
                values.setdefault(key, {})[row["user_key"]] = row["value"]
            else:
                assert key not in values, (state.name, key)
                values[key] = row["value"]
    return keyed, {kind: {k: sorted(v) for k, v in d.items()} for kind, d in timers.items()}


def _handles(path: Path, uid: str) -> Iterator[tuple[StateStream, KeyGroupsHandle]]:
    sp = open_savepoint(str(path))
    op = next(o for o in sp.operators if o.uid == uid)
    for subtask in sp.subtasks(op):
        handle = subtask.managed_keyed_state
        assert isinstance(handle, KeyGroupsHandle) and handle.delegate is not None
        yield sp.stream(handle.delegate), handle


@pytest.mark.parametrize("kind", KINDS)
def test_flink_wrote_the_heap_format(fixtures: dict[str, Path], kind: str) -> None:
    """Not vacuous: code-12 handles (NATIVE savepoints too), an offset for every key group, and
    at each its own id (compressed: then a Snappy stream per state)."""
    manifest = harness.load_manifest(fixtures[kind])
    for stream, handle in _handles(_path(fixtures, kind), "keyed-str"):
        assert handle.code == 12
        assert all(handle.offsets)
        data = stream.read()
        for span in block_spans(stream, handle):
            assert struct.unpack_from(">i", data, span.start)[0] == span.key_group
            head = data[span.start + 4 : span.start + 8]
            assert (head == b"\xff\x06\x00\x00") is manifest["compression"]


@pytest.mark.parametrize("kind", KINDS)
def test_library_read_equals_the_jobs_dump(fixtures: dict[str, Path], kind: str) -> None:
    manifest = harness.load_manifest(fixtures[kind])
    for uid in KEYED:
        keyed, timers = library_dump(_path(fixtures, kind), uid)
        written = harness.keyed_union(manifest["state"], uid)
        assert keyed == written, uid
        assert timers == harness.keyed_union(manifest["state"], uid, "timers"), uid
        assert len(written["cnt"]) >= 37 and len(written["mp"]) >= 15  # not vacuous


@pytest.mark.parametrize(
    "kind",
    [
        "checkpoint-compressed",
        "checkpoint-maxp300",
        "checkpoint-maxp1",
        "native-savepoint-p2-maxp2",
    ],
)
def test_export_equals_the_jobs_dump(fixtures: dict[str, Path], kind: str, tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    code, _, err = cli("export", str(_path(fixtures, kind)), "-o", str(tmp_path / "out"))
    assert (code, err) == (0, ""), err
    rows = pq.read_table(tmp_path / "out").to_pylist()
    manifest = harness.load_manifest(fixtures[kind])
    for uid in KEYED:
        exported: dict[str, dict[str, Any]] = {}
        for row in rows:
            if row["operator"] != uid or row["kind"] == "TIMERS" or row["scope"] != "keyed":
                continue
            key, value = str(json.loads(row["key_json"])), json.loads(row["value_json"])
            values = exported.setdefault(row["state"], {})
            if row["kind"] == "MAP":
                values.setdefault(key, {})[json.loads(row["user_key_json"])] = value
            else:
                values[key] = value
        assert exported == harness.keyed_union(manifest["state"], uid), uid
        timers = sum(r["operator"] == uid and r["kind"] == "TIMERS" for r in rows)
        written = harness.keyed_union(manifest["state"], uid, "timers")
        assert timers == sum(len(t) for d in written.values() for t in d.values())


@pytest.mark.parametrize("kind", KINDS)
def test_verify_deep_walks_every_entry(fixtures: dict[str, Path], kind: str) -> None:
    code, out, err = cli("verify", "--deep", "--json", str(_path(fixtures, kind)))
    assert (code, err) == (0, ""), out
    manifest = harness.load_manifest(fixtures[kind])
    written = sum(sum(op["entry_counts"].values()) for op in manifest["operators"])
    assert json.loads(out)["checked"]["entries"] == written > 400


@pytest.mark.parametrize(
    "kind",
    ["checkpoint", "native-savepoint", "checkpoint-p2-maxp2", "native-savepoint-maxp1-compressed"],
)
def test_inspect_deep_counts_every_state(fixtures: dict[str, Path], kind: str) -> None:
    code, out, err = cli("inspect", "--deep", "--json", str(_path(fixtures, kind)))
    assert code == 0, err
    report = json.loads(out)
    manifest = harness.load_manifest(fixtures[kind])
    for written in manifest["operators"]:
        if not written["entry_counts"]:
            continue
        (op,) = [o for o in report["operators"] if o["uid"] == written["uid"]]
        assert {s["name"]: s["entries"] for s in op["states"]} == written["entry_counts"]
        assert {s["keyed_format"] for s in op["subtasks"]} == {"heap"}


@pytest.mark.parametrize("kind", ["checkpoint", "checkpoint-compressed"])
def test_a_cut_key_group_never_reads_as_fewer_entries(fixtures: dict[str, Path], kind: str) -> None:
    """Every key group of a file cut at many places: a FormatError, never a shorter list."""
    for stream, handle in _handles(_path(fixtures, kind), "keyed-long"):
        header = canonical_header(stream, handle)
        states = heap_snapshot.heap_states(header, 2)
        data = stream.read()
        for span in block_spans(stream, handle)[:40]:
            block = data[span.start : span.end]
            args = (span.key_group, states, header.compressed, 128)
            whole = heap_snapshot.read_key_group(block, *args)
            for cut in range(0, len(block), max(1, len(block) // 25)):
                with pytest.raises(FormatError):
                    heap_snapshot.read_key_group(block[:cut], *args)
            assert len(heap_snapshot.read_key_group(block, *args)) == len(whole)


def _copy(fixtures: dict[str, Path], kind: str, tmp_path: Path) -> tuple[Path, Path, int]:
    """A copy of the snapshot, one of keyed-str's files and the offset of a key group with
    entries in it (its first state's count)."""
    copy = tmp_path / "snapshot"
    shutil.copytree(_path(fixtures, kind), copy)
    md = read_metadata((copy / "_metadata").read_bytes())
    op = next(o for o in md.operators if o.uid == "keyed-str")
    handle = op.subtasks[0].managed_keyed_state  # type: ignore[index]
    assert isinstance(handle, KeyGroupsHandle)
    (file,) = [p for p in copy.iterdir() if p.name in str(handle.delegate)]
    data = file.read_bytes()
    for offset in handle.offsets[1:]:
        if struct.unpack_from(">i", data, offset + 6)[0] > 0:  # keyGroupId, stateId, count
            return copy, file, offset + 6
    raise AssertionError("no key group with entries")


def _refused(command: list[str], copy: Path, file: Path, tmp_path: Path) -> str:
    out_dir = tmp_path / "out"
    target = ["-o", str(out_dir)] if command[0] == "export" else []
    code, out, err = cli(*command, str(copy), *target)
    assert code == 1
    lines = (out if command[0] == "verify" else err).strip().splitlines()
    problems = [line for line in lines if file.name in line]
    assert len(problems) == 1, lines
    assert not out_dir.exists()
    return problems[0]


@pytest.mark.parametrize("command", [["verify", "--deep"], ["export"]], ids=lambda c: c[0])
def test_a_truncated_file_is_refused(
    fixtures: dict[str, Path], tmp_path: Path, command: list[str]
) -> None:
    copy, file, _ = _copy(fixtures, "checkpoint", tmp_path)
    file.write_bytes(file.read_bytes()[:-7])
    assert "shorter than its handle says" in _refused(command, copy, file, tmp_path)


@pytest.mark.parametrize("command", [["verify", "--deep"], ["export"]], ids=lambda c: c[0])
def test_a_flipped_byte_in_a_key_group_is_refused(
    fixtures: dict[str, Path], tmp_path: Path, command: list[str]
) -> None:
    copy, file, count_at = _copy(fixtures, "checkpoint", tmp_path)
    data = bytearray(file.read_bytes())
    data[count_at + 2] ^= 0x40  # the entry count of the key group's first state
    file.write_bytes(bytes(data))
    line = _refused(command, copy, file, tmp_path)
    assert "key group" in line and "offset" in line, line


@pytest.mark.parametrize(
    "kind", ["checkpoint", "checkpoint-compressed", "checkpoint-maxp1", "native-savepoint-p2-maxp2"]
)
def test_diff_reads_a_heap_checkpoint(fixtures: dict[str, Path], kind: str, tmp_path: Path) -> None:
    """`diff` compares a heap checkpoint entry by entry: none with its canonical conversion, and
    exactly the edited entry with a copy one value of which was changed."""
    path = _path(fixtures, kind)
    converted = tmp_path / "canonical"
    statectl.convert(str(path), str(converted), keyed_format="canonical")
    assert statectl.diff(str(path), str(converted)).identical
    edited = statectl.open(str(path))
    state = edited.operator("keyed-str").state("cnt")
    rows = state.to_arrow().to_pylist()
    rows[0]["value"] += 1
    state.replace(pa.Table.from_pylist(rows, schema=state.schema))
    edited.write(str(tmp_path / "edited"))
    report = statectl.diff(str(path), str(tmp_path / "edited"))
    changed = [s for s in report.states if not s.identical]
    assert [(s.state, s.changed) for s in changed] == [("cnt", 1)]
