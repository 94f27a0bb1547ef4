"""`operations/set_positions.py`: moving source positions in a savepoint.

* FileSource: the savepoint Flink 2.3.0 wrote (tests/flink/sources/fixture, state inline in
  `_metadata`), read back with `operations.positions`; marked `flink`, fresh savepoints (one
  with its state in Snappy-compressed files) are edited and restored by Flink
  (`harness.restore_file_source`), which must read exactly the lines from the new positions on.
* KafkaSource and FlinkKafkaConsumer: the Kafka connector is not in the Flink wheels, so their
  state is built from flink-state-values.md §10 (the byte builders of
  tests/formats/test_source_state.py) into the FileSource savepoint's operator, in place of its
  splits; the edits are asserted on the exact new bytes.
"""

from __future__ import annotations

import dataclasses
import json
import struct
from pathlib import Path

import pytest

from statectl.errors import StatectlError
from statectl.formats import operator_state
from statectl.formats import source_state as ss
from statectl.formats.handles import (
    ByteStreamHandle,
    DistributionMode,
    OperatorStateHandle,
    OperatorStateOffsets,
)
from statectl.formats.metadata import write_metadata
from statectl.formats.state_headers import parse_operator_header, write_operator_header
from statectl.operations import set_positions as P
from statectl.operations.migrate import plan_migration
from statectl.operations.positions import positions
from statectl.savepoint.entries import operator_files
from statectl.savepoint.model import Savepoint
from statectl.savepoint.reader import open_savepoint
from tests.formats.test_source_state import FLINK_1_19_ELEMENTS, element, kafka_split

FIXTURE = Path(__file__).resolve().parents[1] / "flink" / "sources" / "fixture"
LONG_MIN = -(1 << 63)


def reader_splits(path: Path | str) -> dict[str, tuple[int, int | None, int | None]]:
    """split id → (subtask, reader offset, records to skip); subtask -1: the enumerator's."""
    (source,) = positions(open_savepoint(str(path))).sources
    found: dict[str, tuple[int, int | None, int | None]] = {}
    for held in source.splits:
        split = held.split
        assert isinstance(split, ss.FileSplit)
        found[split.split_id] = (held.subtask, split.reader_offset, split.records_to_skip)
    assert isinstance(source.enumerator, ss.FileEnumerator)
    for split in source.enumerator.pending:
        found[split.split_id] = (-1, split.reader_offset, split.records_to_skip)
    return found


# --- FileSource (the committed savepoint) ----------------------------------------------------


def test_file_positions_moved_and_read_back(tmp_path: Path) -> None:
    sp = open_savepoint(str(FIXTURE / "savepoint"))
    before = reader_splits(FIXTURE / "savepoint")
    assert before == {
        "0000000004": (0, -1, 80),
        "0000000001": (1, -1, 81),
        "0000000002": (-1, None, None),
        "0000000003": (-1, None, None),
    }
    (held_by_1,) = (h.split for h in positions(sp).sources[0].splits if h.subtask == 1)
    assert isinstance(held_by_1, ss.FileSplit)
    path_of_1 = held_by_1.path
    assert isinstance(path_of_1, str) and path_of_1.startswith("file:/")
    edits = [
        P.FilePositionEdit("file-src", "0000000004", None),
        P.FilePositionEdit("file-src", path_of_1.removeprefix("file:"), (-1, 10)),  # by path
        P.FilePositionEdit("e97ab7bb6d1630f0b59b2daf9b8faaa7", "0000000002", (120, 3)),
    ]
    report = P.set_positions(sp, edits, str(tmp_path / "out"))
    assert [(c.state, c.subtask, c.split_id, c.old, c.new) for c in report.changes] == [
        (ss.READER_STATE, 0, "0000000004", (-1, 80), None),
        (ss.READER_STATE, 1, "0000000001", (-1, 81), (-1, 10)),
        (P.ENUMERATOR, None, "0000000002", None, (120, 3)),
    ]
    assert [(c.old_text, c.new_text) for c in report.changes] == [
        ("80 records", "start"),
        ("81 records", "10 records"),
        ("start", "offset 120 + 3 records"),
    ]
    assert reader_splits(tmp_path / "out") == {
        **before,
        "0000000004": (0, None, None),
        "0000000001": (1, -1, 10),
        "0000000002": (-1, 120, 3),
    }
    assert report.new_files == ()  # the state was inline: it stays inline
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["_metadata"]
    # everything but the positions is as it was
    old, new = sp.metadata, open_savepoint(str(tmp_path / "out")).metadata
    assert [(o.operator_id, o.uid, o.parallelism) for o in old.operators] == [
        (o.operator_id, o.uid, o.parallelism) for o in new.operators
    ]
    assert (old.checkpoint_id, old.properties) == (new.checkpoint_id, new.properties)


def test_later_edits_win_and_the_input_is_untouched(tmp_path: Path) -> None:
    metadata = (FIXTURE / "savepoint" / "_metadata").read_bytes()
    sp = open_savepoint(str(FIXTURE / "savepoint"))
    edits = [
        P.FilePositionEdit("file-src", "0000000001", None),
        P.FilePositionEdit("file-src", "0000000001", (-1, 2)),
    ]
    report = P.set_positions(sp, edits, str(tmp_path / "out"))
    assert [(c.old, c.new) for c in report.changes] == [((-1, 81), (-1, 2))]
    assert (FIXTURE / "savepoint" / "_metadata").read_bytes() == metadata
    with pytest.raises(StatectlError, match="destination exists"):
        P.set_positions(sp, edits, str(tmp_path / "out"))
    P.set_positions(sp, edits[:1], str(tmp_path / "out"), overwrite=True)
    assert reader_splits(tmp_path / "out")["0000000001"] == (1, None, None)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (P.FilePositionEdit("file-src", "nope.txt", None), "no split of operator .* matches"),
        (P.FilePositionEdit("file-src", "0000000001", (-5, 0)), "the offset is -1"),
        (P.FilePositionEdit("file-src", "0000000001", (99999, 0)), "outside split 0000000001"),
        (P.KafkaOffsetEdit("file-src", "t", None, 5), "is file source, not a KafkaSource"),
        (P.KafkaOffsetEdit("file-src", "t", None, "newest"), "an offset is a number"),
        (P.FilePositionEdit("slow", "0000000001", None), "is no recognised source"),
        (P.FilePositionEdit("missing", "0000000001", None), "unknown operator 'missing'"),
    ],
)
def test_edit_errors_write_nothing(tmp_path: Path, edit: P.PositionEdit, message: str) -> None:
    sp = open_savepoint(str(FIXTURE / "savepoint"))
    with pytest.raises(StatectlError, match=message) as caught:
        P.set_positions(sp, [edit], str(tmp_path / "out"))
    assert "\n" not in str(caught.value)
    assert caught.value.source == sp.directory.url
    assert not (tmp_path / "out").exists()


def test_with_a_migration_plan(tmp_path: Path) -> None:
    sp = open_savepoint(str(FIXTURE / "savepoint"))
    migration = plan_migration(sp, renames=[("file-src", "files-v2")], drops=["slow"])
    edits = [P.FilePositionEdit("file-src", "0000000004", (-1, 1))]
    plan = P.plan_positions(sp, edits, migration=migration)
    report = P.write_positions(plan, str(tmp_path / "out"))
    assert report.changes[0].uid == "files-v2"
    out = open_savepoint(str(tmp_path / "out"))
    assert [o.uid for o in out.operators] == ["sink", "files-v2"]
    assert reader_splits(tmp_path / "out")["0000000004"] == (0, -1, 1)
    dropped = plan_migration(sp, drops=["file-src"])
    with pytest.raises(StatectlError, match="is dropped"):
        P.plan_positions(sp, edits, migration=dropped)


# --- Kafka state built from the reference, in the FileSource savepoint's operator -------------


def with_source_state(
    tmp_path: Path,
    state: str,
    mode: DistributionMode,
    elements: dict[int, list[bytes]],
    coordinator: bytes | None,
) -> Savepoint:
    """The committed FileSource savepoint with `file-src`'s splits replaced by `elements` (per
    subtask, in a list state `state`) and its coordinator state by `coordinator`."""
    sp = open_savepoint(str(FIXTURE / "savepoint"))
    op = sp.find_operator("file-src")
    subtasks = []
    for subtask in op.subtasks or ():
        handle = subtask.managed_operator_state
        assert handle is not None and isinstance(handle.delegate, ByteStreamHandle)
        # The header renamed to `state`, so the input is consistent (as `verify` checks it).
        parsed = parse_operator_header(handle.delegate.data[: handle.states[0].offsets[0]])
        (meta,) = parsed.list_states
        renamed = dataclasses.replace(parsed, list_states=(dataclasses.replace(meta, name=state),))
        offsets, data = [], bytearray(write_operator_header(renamed))
        for value in elements.get(subtask.index, []):
            offsets.append(len(data))
            data += value
        new = OperatorStateHandle(
            handle.code,
            (OperatorStateOffsets(state, mode, tuple(offsets)),),
            ByteStreamHandle(handle.delegate.name, bytes(data)),
        )
        subtasks.append(dataclasses.replace(subtask, managed_operator_state=new))
    assert op.coordinator_state is not None
    coordinator_handle = (
        None if coordinator is None else ByteStreamHandle(op.coordinator_state.name, coordinator)
    )
    op = dataclasses.replace(op, subtasks=tuple(subtasks), coordinator_state=coordinator_handle)
    operators = tuple(op if o.operator_id == op.operator_id else o for o in sp.operators)
    folder = tmp_path / "kafka-in"
    folder.mkdir()
    (folder / "_metadata").write_bytes(write_metadata(dataclasses.replace(sp.metadata, operators=operators)))  # fmt: skip
    return open_savepoint(str(folder))


def elements_of(path: Path, state: str) -> dict[int, list[bytes]]:
    sp = open_savepoint(str(path))
    found: dict[int, list[bytes]] = {}
    for file in operator_files(sp, sp.find_operator("file-src")):
        data = file.stream.read()
        layout = operator_state.file_layout(file.handle.states, file.stream.size, data)
        found[file.subtask] = [data[a:b] for a, b in layout.elements.get(state, ())]
    return found


def coordinator_of(path: Path) -> bytes:
    op = open_savepoint(str(path)).find_operator("file-src")
    assert op.coordinator_state is not None
    return op.coordinator_state.data


def v3_coordinator(*splits: tuple[bytes, int]) -> bytes:
    body = struct.pack(">ii", len(splits), 0)
    for split, status in splits:
        body += struct.pack(">i", len(split)) + split + struct.pack(">i", status)
    body += b"\x01"
    return struct.pack(">iii", 1, 3, len(body)) + body


def test_kafka_source_offsets_exact_bytes(tmp_path: Path) -> None:
    readers = {
        0: [element(0, kafka_split("orders", 0, 42, LONG_MIN))],
        1: [
            element(0, kafka_split("orders", 1, 7, LONG_MIN)),
            element(0, kafka_split("clicks", 0, 9, LONG_MIN)),
        ],
    }
    # connector 5.0 (v3): the enumerator keeps a split per partition; orders-2 is unassigned
    coordinator = v3_coordinator(
        (kafka_split("orders", 0, LONG_MIN, LONG_MIN), 0),
        (kafka_split("orders", 1, LONG_MIN, LONG_MIN), 0),
        (kafka_split("orders", 2, -2, LONG_MIN), 1),
        (kafka_split("clicks", 0, LONG_MIN, LONG_MIN), 0),
    )
    sp = with_source_state(tmp_path, ss.READER_STATE, DistributionMode.SPLIT_DISTRIBUTE, readers, coordinator)  # fmt: skip
    assert positions(sp).sources[0].kind == ss.KAFKA
    edits = [
        P.KafkaOffsetEdit("file-src", "orders", None, "earliest"),
        P.KafkaOffsetEdit("file-src", "orders", 1, 1000),
        P.KafkaOffsetEdit("file-src", None, 2, "committed"),
    ]
    report = P.set_positions(sp, edits, str(tmp_path / "out"))
    assert [(c.state, c.subtask, c.split_id, c.old, c.new) for c in report.changes] == [
        (ss.READER_STATE, 0, "orders-0", 42, -2),
        (ss.READER_STATE, 1, "orders-1", 7, 1000),
        (P.ENUMERATOR, None, "orders-0", LONG_MIN, -2),
        (P.ENUMERATOR, None, "orders-1", LONG_MIN, 1000),
        (P.ENUMERATOR, None, "orders-2", -2, -3),
    ]
    assert report.changes[0].new_text == "EARLIEST"
    assert elements_of(tmp_path / "out", ss.READER_STATE) == {
        0: [element(0, kafka_split("orders", 0, -2, LONG_MIN))],
        1: [element(0, kafka_split("orders", 1, 1000, LONG_MIN)), readers[1][1]],
    }
    assert coordinator_of(tmp_path / "out") == v3_coordinator(
        (kafka_split("orders", 0, -2, LONG_MIN), 0),
        (kafka_split("orders", 1, 1000, LONG_MIN), 0),
        (kafka_split("orders", 2, -3, LONG_MIN), 1),
        (kafka_split("clicks", 0, LONG_MIN, LONG_MIN), 0),
    )
    doc = "00000024 00000000 0000001C 00066F7264657273 00000000 FFFFFFFFFFFFFFFE 8000000000000000"
    assert elements_of(tmp_path / "out", ss.READER_STATE)[0][0] == bytes.fromhex(doc)


def test_kafka_source_v2_enumerator_is_left_alone(tmp_path: Path) -> None:
    readers = {0: [element(0, kafka_split("orders", 3, 42, LONG_MIN))]}
    body = struct.pack(">i", 1) + kafka_split("orders", 3, 0, 0)[:-16] + struct.pack(">i?", 0, True)
    coordinator = struct.pack(">iii", 1, 2, len(body)) + body
    sp = with_source_state(tmp_path, ss.READER_STATE, DistributionMode.SPLIT_DISTRIBUTE, readers, coordinator)  # fmt: skip
    report = P.set_positions(sp, [P.KafkaOffsetEdit("file-src", "orders", 3, 0)], str(tmp_path / "out"))  # fmt: skip
    assert [(c.state, c.old, c.new) for c in report.changes] == [(ss.READER_STATE, 42, 0)]
    assert coordinator_of(tmp_path / "out") == coordinator
    with pytest.raises(StatectlError, match=r"no split .* matches \(its splits: orders-3\)"):
        P.set_positions(sp, [P.KafkaOffsetEdit("file-src", "nope", None, 0)], str(tmp_path / "o2"))  # fmt: skip


def test_legacy_kafka_consumer_exact_bytes(tmp_path: Path) -> None:
    """Flink 1.19's two union-state elements, ("abc", 13) → 16768 and ("def", 7) → 987654321,
    one per subtask: "abc" moved to the next offset 500 (stored 499), "def" to committed."""
    abc, def_ = (bytes.fromhex(h) for h, _ in FLINK_1_19_ELEMENTS)
    sp = with_source_state(tmp_path, ss.LEGACY_KAFKA_STATE, DistributionMode.UNION, {0: [abc], 1: [def_]}, None)  # fmt: skip
    edits = [
        P.KafkaOffsetEdit("file-src", "abc", 13, 500),
        P.KafkaOffsetEdit("file-src", "def", None, "committed"),
    ]
    report = P.set_positions(sp, edits, str(tmp_path / "out"))
    assert [(c.kind, c.state, c.subtask, c.split_id, c.old, c.new) for c in report.changes] == [
        ("legacy-kafka", ss.LEGACY_KAFKA_STATE, 0, "abc-13", 16768, 499),
        ("legacy-kafka", ss.LEGACY_KAFKA_STATE, 1, "def-7", 987654321, -915623761773),
    ]
    assert [(c.old_text, c.new_text) for c in report.changes] == [
        ("16769 (stored 16768)", "500 (stored 499)"),
        ("987654322 (stored 987654321)", "GROUP_OFFSET"),
    ]
    assert elements_of(tmp_path / "out", ss.LEGACY_KAFKA_STATE) == {
        0: [bytes.fromhex("5701d6cfec021a016162e3 00000000000001F3")],
        1: [bytes.fromhex("5701c4f2f7020e016465e6 FFFFFF2AD0922893")],
    }
    earliest = P.set_positions(sp, [P.KafkaOffsetEdit("file-src", None, None, "earliest")], str(tmp_path / "o2"))  # fmt: skip
    assert [c.new for c in earliest.changes] == [-915623761775, -915623761775]


# --- real Flink: fresh savepoints, moved and restored -------------------------------------------

LINES = 400  # FileSourceJob: 400 lines per file, "file <i> line <n>"


def line_offset(file: int, line: int) -> int:
    return sum(len(f"file {file} line {n}\n") for n in range(line))


def file_index(path: str | None) -> str:
    assert path is not None
    return path.rsplit("part-", 1)[1].removesuffix(".txt")


def expected_lines(path: Path) -> dict[str, list[int]]:
    """What a restore of `path` must read: per file, the lines from its split's position on."""
    (source,) = positions(open_savepoint(str(path))).sources
    assert isinstance(source.enumerator, ss.FileEnumerator)
    splits = [h.split for h in source.splits] + list(source.enumerator.pending)
    expected: dict[str, list[int]] = {}
    for split in splits:
        assert isinstance(split, ss.FileSplit)
        first = 0
        if split.reader_offset is not None and split.records_to_skip is not None:
            index = int(file_index(split.path))
            if split.reader_offset != ss.FILE_NO_OFFSET:
                first = next(n for n in range(LINES + 1) if line_offset(index, n) == split.reader_offset)  # fmt: skip
            first += split.records_to_skip
        expected[file_index(split.path)] = list(range(first, LINES))
    return expected


@pytest.mark.flink
@pytest.mark.parametrize("name", ["savepoint", "savepoint-files"])
def test_restored_job_reads_from_the_new_positions(tmp_path: Path, name: str) -> None:
    from tests.flink import harness

    root = harness.file_source_savepoint()
    original = root / name
    truth = json.loads((root / ("truth.json" if name == "savepoint" else "truth-files.json")).read_text())  # fmt: skip
    (operator,) = truth["operators"].values()
    held = [s for splits in operator["subtasks"].values() for s in splits]
    pending = operator["enumerator"]["pending_splits"]
    assert len(held) == 2 and len(pending) == 2
    first, second = held
    assert first["records_to_skip"] > 50 and second["records_to_skip"] > 50
    second_file = int(file_index(second["path"]))

    sp = open_savepoint(str(original))
    moved = {
        "start": [P.FilePositionEdit("file-src", first["split_id"], None)],
        "back": [
            P.FilePositionEdit("file-src", first["split_id"], (-1, 10)),
            # by byte offset: line 20's start, then 3 records skipped → line 23
            P.FilePositionEdit("file-src", second["path"], (line_offset(second_file, 20), 3)),
            P.FilePositionEdit("file-src", pending[0]["split_id"], (-1, 390)),
        ],
    }
    outputs = {}
    for case, edits in moved.items():
        outputs[case] = tmp_path / case
        report = P.set_positions(sp, edits, str(outputs[case]))
        assert len(report.changes) == len(edits)
        if name == "savepoint-files":  # one subtask's file or both, rewritten uncompressed
            assert report.new_files and all((outputs[case] / f).is_file() for f in report.new_files)

    results = harness.restore_file_source([original, *outputs.values()])
    assert all(r["ok"] for r in results), [r["error"] for r in results]
    unmodified, start, back = (r["lines"] for r in results)
    assert unmodified == expected_lines(original)
    assert start == expected_lines(outputs["start"])
    assert back == expected_lines(outputs["back"])
    # and in figures: what moved reads again, what did not reads as before
    index = file_index(first["path"])
    assert start[index] == list(range(LINES))
    assert back[index] == list(range(10, LINES))
    assert back[str(second_file)] == list(range(23, LINES))
    assert back[file_index(pending[0]["path"])] == list(range(390, LINES))
    assert start[str(second_file)] == unmodified[str(second_file)]


@pytest.mark.flink
def test_fresh_savepoints_read_back(tmp_path: Path) -> None:
    from tests.flink import harness

    for name in ("savepoint", "savepoint-files"):
        path = harness.file_source_savepoint() / name
        before = reader_splits(path)
        split_id = next(k for k, v in before.items() if v[0] == 0)
        out = tmp_path / name
        P.set_positions(open_savepoint(str(path)), [P.FilePositionEdit("file-src", split_id, (-1, 1))], str(out))  # fmt: skip
        assert reader_splits(out) == {**before, split_id: (0, -1, 1)}
