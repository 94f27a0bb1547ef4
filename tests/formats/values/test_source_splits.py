"""Source state read as values: `export` decodes a FileSource's `SourceReaderState` to exactly
what Flink's own FileSourceSplitSerializer read from the same savepoint (SourceDumper's
truth.json beside the fixture), and the legacy Kafka consumer's offsets from its real bytes."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq

from statectl.formats.serializer_snapshots import SerializerSnapshot
from statectl.formats.state_headers import StateMetaInfo
from statectl.formats.state_values import operator_codec
from statectl.formats.values import Raw
from statectl.formats.values.source_splits import SourceSplitCodec, SourceValue
from statectl.operations.export import export
from statectl.savepoint.reader import open_savepoint

FIXTURE = Path(__file__).parents[2] / "flink" / "sources" / "fixture"


def test_export_decodes_file_source_splits_as_flink_reads_them(tmp_path: Path) -> None:
    out = tmp_path / "x.parquet"
    export(open_savepoint(str(FIXTURE / "savepoint")), str(out))
    rows = [r for r in pq.read_table(out).to_pylist() if r["state"] == "SourceReaderState"]
    truth = json.loads((FIXTURE / "truth.json").read_text())["operators"]
    expected = {
        (op, int(subtask)): [{"kind": "file", **split} for split in splits]
        for op, view in truth.items()
        for subtask, splits in view["subtasks"].items()
    }
    got: dict[tuple[str, int], list[object]] = {}
    for row in rows:
        assert row["raw_reason"] is None, row["raw_reason"]
        got.setdefault((row["operator_id"], row["subtask"]), []).append(
            json.loads(row["value_json"])
        )
    assert got == expected


def test_a_split_writes_back_its_bytes_and_garbage_stays_raw() -> None:
    codec = SourceSplitCodec()
    split = b"\x00\x010" + (5).to_bytes(8, "big") + (9).to_bytes(8, "big")  # id "0", 5..9
    number_split = (1).to_bytes(4, "big") + len(split).to_bytes(4, "big") + split
    element = len(number_split).to_bytes(4, "big") + number_split
    value = codec.decode(element)
    assert isinstance(value, SourceValue)
    assert codec.to_json(value) == {
        "kind": "number-sequence",
        "split_id": "0",
        "first": 5,
        "last": 9,
    }
    assert codec.encode(value) == element
    snapshot = SerializerSnapshot(
        "org.apache.flink.api.common.typeutils.base.array."
        "BytePrimitiveArraySerializer$BytePrimitiveArraySerializerSnapshot",
        3,
    )
    meta = StateMetaInfo("SourceReaderState", "OPERATOR", {}, {"VALUE_SERIALIZER": snapshot})
    state = operator_codec(meta, "LIST", 2)
    garbage = state.decode_value(b"\x00\x00\x00\x03abc")
    assert isinstance(garbage.value, Raw) and garbage.value.data == b"\x00\x00\x00\x03abc"


def test_legacy_kafka_offsets_are_values() -> None:
    """Real bytes Flink 1.19 wrote (the Kafka connector's migration test: ("abc", 13) → 16768)."""
    tuple_snapshot = SerializerSnapshot(
        "org.apache.flink.api.java.typeutils.runtime.TupleSerializerSnapshot", 2
    )
    meta = StateMetaInfo(
        "topic-partition-offset-states", "OPERATOR", {}, {"VALUE_SERIALIZER": tuple_snapshot}
    )
    state = operator_codec(meta, "UNION", 1)
    element = bytes.fromhex("5701d6cfec021a016162e30000000000004180")
    value = state.decode_value(element).value
    assert state.value is not None
    assert state.value.to_json(value) == {
        "kind": "legacy-kafka", "topic": "abc", "partition": 13, "offset": 16768, "marker": None,
    }  # fmt: skip
    assert state.value.encode(value) == element
