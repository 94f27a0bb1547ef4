"""Reading RocksDB native instances of real Flink 2.3 snapshots (no Spark, no JVM).

The oracle is Flink itself: `rocksdb_canonical` is a CANONICAL savepoint of the same job written
by the RocksDB backend, so its key-group blocks are what a conversion must produce, byte for byte.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from statectl.errors import UnsupportedError
from statectl.formats import keyed_blocks
from statectl.formats.handles import (
    IncrementalKeyedHandle,
    KeyGroupsHandle,
    LocalFile,
    SegmentFileHandle,
)
from statectl.formats.metadata import snapshot_kind
from statectl.operations.rescale.plan import plan_rescale
from statectl.operations.summary import summarize
from statectl.savepoint import native, native_rows
from statectl.savepoint.model import Savepoint
from statectl.savepoint.reader import open_savepoint
from tests.conftest import FIXTURES, fixture_savepoint, key_group_blocks, load_manifest
from tests.flink import harness

NATIVE_SAVEPOINTS = ["rocksdb_native_full", "rocksdb_native_incremental"]
KEYED_UIDS = ["keyed-str", "keyed-long"]
STATES = ["cnt", "lst", "mp", "_timer_state/processing_user-timers", "_timer_state/event_user-timers"]  # fmt: skip


def _instances(sp: Savepoint, uid: str) -> list[native.NativeInstance]:
    op = sp.find_operator(uid)
    handles = [s.managed_keyed_state for s in sp.subtasks(op)]
    assert all(isinstance(h, IncrementalKeyedHandle) for h in handles)
    return [native.native_instance(sp, h, uid) for h in handles]  # type: ignore[arg-type]


def _converted_blocks(instance: native.NativeInstance, first: int = 0, last: int = 127) -> dict[int, bytes]:  # fmt: skip
    _, header = native.meta_header(instance)
    states = [(s.name, i) for i, s in enumerate(header.states)]
    return dict(native.read_blocks(instance, states, first, last, 1))


@pytest.fixture(scope="module")
def checkpoint() -> Path:
    """The retained checkpoint at the absolute location its `_metadata` names."""
    return harness.checkpoint_in_place(FIXTURES / "rocksdb_retained_checkpoint")


@pytest.mark.parametrize("fixture", NATIVE_SAVEPOINTS)
@pytest.mark.parametrize("uid", KEYED_UIDS)
def test_blocks_are_byte_identical_to_flinks_canonical_savepoint(fixture: str, uid: str) -> None:
    expected = key_group_blocks(open_savepoint(str(fixture_savepoint("rocksdb_canonical"))), uid)
    converted: dict[int, bytes] = {}
    for instance in _instances(open_savepoint(str(fixture_savepoint(fixture))), uid):
        blocks = _converted_blocks(instance)
        assert not set(blocks) & set(converted)
        assert instance.key_groups is not None
        assert all(instance.key_groups[0] <= g <= instance.key_groups[1] for g in blocks)
        converted.update(blocks)
    assert len(expected) > 25
    assert converted == expected


def test_blocks_streamed_in_pieces_join_to_flinks_canonical_blocks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A writer holds one piece, not a key group: with pieces of 64 bytes, most key groups
    come in several, and joined they are still Flink's blocks, byte for byte. Rows read a
    row per batch also split each key group's runs over batches."""
    monkeypatch.setattr(native_rows, "PIECE_BYTES", 64)
    monkeypatch.setattr(native_rows, "BATCH_BYTES", 1)
    monkeypatch.setattr(native_rows, "_FIRST_ROWS", 1)
    uid = "keyed-str"
    expected = key_group_blocks(open_savepoint(str(fixture_savepoint("rocksdb_canonical"))), uid)
    pieces: dict[int, list[bytes]] = {}
    for instance in _instances(open_savepoint(str(fixture_savepoint("rocksdb_native_full"))), uid):
        _, header = native.meta_header(instance)
        states = [(s.name, i) for i, s in enumerate(header.states)]
        streamed = list(native.read_block_pieces(instance, states, 0, 127, 1))
        groups = [key_group for key_group, _ in streamed]
        assert groups == sorted(groups)  # a key group's pieces are consecutive
        for key_group, piece in streamed:
            assert len(piece) < 64 + 1024  # a piece ends once it reaches 64 bytes
            pieces.setdefault(key_group, []).append(bytes(piece))
    assert sum(len(p) > 1 for p in pieces.values()) > len(pieces) // 2
    assert {g: b"".join(p) for g, p in pieces.items()} == expected


def test_meta_file_is_the_canonical_header() -> None:
    canonical = open_savepoint(str(fixture_savepoint("rocksdb_canonical")))
    handle = next(canonical.subtasks(canonical.find_operator("keyed-str"))).managed_keyed_state
    assert isinstance(handle, KeyGroupsHandle)
    stream = canonical.stream(handle)
    header = stream.read(0, keyed_blocks.header_length(handle.offsets, stream.size))
    instance = _instances(open_savepoint(str(fixture_savepoint("rocksdb_native_full"))), "keyed-str")[0]  # fmt: skip
    data, parsed = native.meta_header(instance)
    assert data == header
    assert parsed.state_names() == STATES


def test_rows_outside_the_handles_range_are_never_read() -> None:
    """A narrower handle range (as after a rescale in Flink) clips the instance's rows."""
    sp = open_savepoint(str(fixture_savepoint("rocksdb_native_full")))
    expected = key_group_blocks(open_savepoint(str(fixture_savepoint("rocksdb_canonical"))), "keyed-str")  # fmt: skip
    instance = _instances(sp, "keyed-str")[0]
    narrowed = dataclasses.replace(instance, key_groups=(10, 40))
    blocks = _converted_blocks(narrowed)
    assert blocks == {g: b for g, b in expected.items() if 10 <= g <= 40}
    assert min(blocks) >= 10 and max(blocks) <= 40
    assert _converted_blocks(narrowed, 20, 30) == {g: b for g, b in blocks.items() if 20 <= g <= 30}


def test_a_range_beyond_what_a_prefix_holds_is_clipped_not_an_overflow() -> None:
    """A corrupt handle may claim key groups past max parallelism (here 0–400 with 1-byte
    prefixes): reading clips to what a prefix can hold instead of failing to encode the bound."""
    sp = open_savepoint(str(fixture_savepoint("rocksdb_native_full")))
    expected = key_group_blocks(open_savepoint(str(fixture_savepoint("rocksdb_canonical"))), "keyed-str")  # fmt: skip
    instance = _instances(sp, "keyed-str")[0]
    owned = instance.key_groups
    assert owned is not None
    widened = dataclasses.replace(instance, key_groups=(owned[0], 400))
    blocks = _converted_blocks(widened, owned[0], 400)
    # its files hold only the key groups it owned when Flink wrote them
    assert blocks == {g: b for g, b in expected.items() if owned[0] <= g <= owned[1]}
    beyond = dataclasses.replace(instance, key_groups=(300, 400))
    assert _converted_blocks(beyond, 0, 400) == {}


def test_retained_checkpoint_spans_two_checkpoints_and_merges_list_state(checkpoint: Path) -> None:
    sp = open_savepoint(str(checkpoint))
    manifest = load_manifest("rocksdb_retained_checkpoint")
    for uid in KEYED_UIDS:
        for instance in _instances(sp, uid):
            ssts = [f for f in instance.files if f.kind == "SST"]
            assert ssts and all(f.shared for f in ssts)
            # One flush per checkpoint and column family: more SSTs than column families means
            # SST files of both checkpoints (no compaction runs in this small job).
            assert len(ssts) > len(STATES), instance.description
    # Phase 2 appended to `lst` of k9 after checkpoint 1: its value is merged across SST files.
    written = manifest["state"]["operators"]["keyed-str"]["subtasks"]["0"]["keyed"]["lst"]["k9"]
    assert written[-1] == 1009
    instance = _instances(sp, "keyed-str")[0]
    with native.opened(instance) as db:
        rows = dict(db.rows("lst", 0, 63, 1))
    value = rows[bytes([6]) + b"\x03k9\x00"]
    assert value == b",".join(v.to_bytes(8, "big") for v in written)


@pytest.mark.parametrize("fixture", [*NATIVE_SAVEPOINTS, "rocksdb_retained_checkpoint"])
def test_deep_entry_counts_equal_manifest(fixture: str, checkpoint: Path) -> None:
    path = checkpoint if fixture == "rocksdb_retained_checkpoint" else fixture_savepoint(fixture)
    summary = summarize(open_savepoint(str(path)), deep=True)
    manifest = load_manifest(fixture)
    for op in summary.operators:
        expected = next(m for m in manifest["operators"] if m["uid"] == op.uid)["entry_counts"]
        assert {s.name: s.entries for s in op.states if s.scope == "keyed"} == expected, op.uid


def test_summary_lists_files_and_column_families() -> None:
    sp = open_savepoint(str(fixture_savepoint("rocksdb_native_full")))
    op = summarize(sp, operator="keyed-long").operators[0]
    for subtask in op.subtasks:
        assert subtask.native is not None
        assert subtask.native.column_families == tuple(STATES)
        kinds = sorted(f.kind for f in subtask.native.files)
        assert kinds == ["CURRENT", "MANIFEST", "OPTIONS", "SST", "SST", "SST", "SST", "SST"]
        assert not any(f.shared for f in subtask.native.files)  # a NATIVE savepoint: all private
        files = sum(f.bytes for f in subtask.native.files)
        assert subtask.keyed_bytes == files + subtask.native.meta_bytes


def test_working_folders_are_removed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(native.WORK_DIR_ENV, str(tmp_path))
    instance = _instances(open_savepoint(str(fixture_savepoint("rocksdb_native_full"))), "keyed-str")[0]  # fmt: skip
    native.close_opened()  # what earlier reads kept open
    blocks = native.read_blocks(instance, [("cnt", 0)], 0, 127, 1)
    next(blocks)
    (folder,) = tmp_path.iterdir()
    assert sorted(os.listdir(folder))[:2] == ["000018.sst", "000019.sst"]
    assert len(list(blocks)) > 10
    assert len(list(native.read_blocks(instance, [("lst", 0)], 0, 127, 1))) > 10
    assert list(tmp_path.iterdir()) == [folder]  # kept open for the next read, not opened again
    native.close_opened()  # as at exit
    assert list(tmp_path.iterdir()) == []


def test_native_savepoint_properties_become_canonical() -> None:
    sp = open_savepoint(str(fixture_savepoint("rocksdb_native_full")))
    assert snapshot_kind(sp.metadata.properties).format == "NATIVE"  # type: ignore[union-attr]
    converted = native.canonical_savepoint_properties(sp.metadata.properties)
    assert snapshot_kind(converted).format == "CANONICAL"  # type: ignore[union-attr]
    checkpoint = open_savepoint(str(fixture_savepoint("rocksdb_retained_checkpoint")))
    tail = checkpoint.metadata.properties
    assert native.canonical_savepoint_properties(tail) == tail


def test_plan_reads_only_instances_that_intersect(checkpoint: Path) -> None:
    plan = plan_rescale(open_savepoint(str(checkpoint)), 3)
    op = next(p for p in plan.operators if p.operator.uid == "keyed-str")
    assert op.targets is not None
    ranges = [
        [(run.first, run.last, run.instance.key_groups) for run in t.keyed.native]  # type: ignore[union-attr]
        for t in op.targets
    ]
    assert ranges == [
        [(0, 42, (0, 63))],
        [(43, 63, (0, 63)), (64, 85, (64, 127))],
        [(86, 127, (64, 127))],
    ]
    # Converting alone (no new parallelism) keeps every operator's parallelism.
    converted = plan_rescale(open_savepoint(str(checkpoint)), None)
    assert {p.operator.uid: p.new_parallelism for p in converted.operators if p.rescaled} == {
        "keyed-str": 2,
        "keyed-long": 2,
    }


# --- what cannot be read ---------------------------------------------------------------------


def _with_first_keyed(sp: Savepoint, change: Any, count: int = 1) -> Savepoint:
    """`sp` with the keyed handles of keyed-str's first `count` subtasks changed."""
    op = sp.find_operator("keyed-str")
    assert op.subtasks is not None
    subtasks = tuple(
        dataclasses.replace(s, managed_keyed_state=change(s.managed_keyed_state))
        if i < count
        else s
        for i, s in enumerate(op.subtasks)
    )
    new_op = dataclasses.replace(op, subtasks=subtasks)
    operators = tuple(new_op if o is op else o for o in sp.operators)
    return dataclasses.replace(sp, metadata=dataclasses.replace(sp.metadata, operators=operators))


def test_files_in_file_merging_segments_are_copied_out_of_their_physical_file(
    tmp_path: Path,
) -> None:
    """Every file of the instance as a segment of one physical file, after a few junk bytes
    (in the job's shared folder, where Flink keeps them: beside the checkpoint)."""
    copy = tmp_path / "chk"
    shutil.copytree(fixture_savepoint("rocksdb_native_full"), copy)
    sp = open_savepoint(str(copy))
    physical = tmp_path / "shared" / "physical"
    physical.parent.mkdir()

    def in_segments(handle: IncrementalKeyedHandle) -> IncrementalKeyedHandle:
        blob = bytearray(b"junk")
        files = []
        for f in handle.private:
            data = sp.stream(f.handle).read()
            segment = SegmentFileHandle(len(blob), len(data), 1, str(physical), f"s{len(blob)}")
            files.append(LocalFile(f.local_path, segment))
            blob += data + b"gap"
        physical.write_bytes(bytes(blob))
        return dataclasses.replace(handle, private=tuple(files))

    (original,) = _instances(sp, "keyed-str")[:1]
    (segmented,) = _instances(_with_first_keyed(sp, in_segments), "keyed-str")[:1]
    assert all(f.segment for f in segmented.files)
    assert _converted_blocks(segmented) == _converted_blocks(original)
    assert native.count_entries(segmented, 1) == native.count_entries(original, 1)


def test_an_instance_rocksdict_cannot_open_is_refused_with_advice() -> None:
    sp = open_savepoint(str(fixture_savepoint("rocksdb_native_full")))

    def without_current(handle: IncrementalKeyedHandle) -> IncrementalKeyedHandle:
        return dataclasses.replace(
            handle, private=tuple(f for f in handle.private if f.local_path != "CURRENT")
        )

    instance = _instances(_with_first_keyed(sp, without_current), "keyed-str")[0]
    with pytest.raises(UnsupportedError, match=r"rocksdict cannot open.*CANONICAL savepoint"):
        list(native.read_blocks(instance, [("cnt", 0)], 0, 127, 1))


def test_changelog_state_is_refused_with_advice() -> None:
    from statectl.formats.handles import ChangelogHandle
    from statectl.operations.rescale.job import build_tasks

    sp = open_savepoint(str(fixture_savepoint("rocksdb_native_full")))

    def changelog(handle: IncrementalKeyedHandle) -> ChangelogHandle:
        return ChangelogHandle(14, 0, 64, 0, (handle,), (), 1, 1, "id")

    with pytest.raises(UnsupportedError, match=r"changelog.*CANONICAL savepoint"):
        plan_rescale(_with_first_keyed(sp, changelog), 3)
    # Only changelog handles: a conversion would copy them, which statectl refuses too.
    plan = plan_rescale(_with_first_keyed(sp, changelog, count=2), None)
    with pytest.raises(UnsupportedError, match=r"changelog.*CANONICAL savepoint"):
        build_tasks(plan)


def test_inline_and_remote_files_are_gathered() -> None:
    """Files inlined in `_metadata` are written out; non-local ones downloaded (memory://)."""
    import fsspec

    from statectl.formats.handles import ByteStreamHandle

    local = fixture_savepoint("rocksdb_native_full")
    fs = fsspec.filesystem("memory")
    for path in local.iterdir():
        fs.pipe_file(f"/native-sp/{path.name}", path.read_bytes())
    sp = open_savepoint("memory://native-sp")

    def inline_current(handle: IncrementalKeyedHandle) -> IncrementalKeyedHandle:
        private = tuple(
            LocalFile(f.local_path, ByteStreamHandle("inline", sp.stream(f.handle).read()))  # type: ignore[arg-type]
            if f.local_path == "CURRENT"
            else f
            for f in handle.private
        )
        return dataclasses.replace(handle, private=private)

    instance = _instances(_with_first_keyed(sp, inline_current), "keyed-str")[0]
    assert any(f.stream.inline for f in instance.files)
    assert not any(f.stream.location and f.stream.location.is_local for f in instance.files)
    expected = key_group_blocks(open_savepoint(str(fixture_savepoint("rocksdb_canonical"))), "keyed-str")  # fmt: skip
    assert _converted_blocks(instance) == {g: b for g, b in expected.items() if g <= 63}
