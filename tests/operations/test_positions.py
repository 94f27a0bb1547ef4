"""`operations/positions.py` against what Flink's own serializers read.

* tests/flink/sources/fixture: a FileSource savepoint written by Flink 2.3.0 (FileSourceJob) and
  `truth.json`, what SourceDumper read from it with FileSourceSplitSerializer and
  PendingSplitsCheckpointSerializer; the `flink` test regenerates both and compares again.
* tests/fixtures/values: a custom FLIP-27 source (ValuesSource): unrecognised, bytes kept.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from statectl.cli.positions_view import split_json
from statectl.formats import source_state as ss
from statectl.operations.positions import PositionsReport, positions
from statectl.savepoint.reader import open_savepoint

FIXTURE = Path(__file__).resolve().parents[1] / "flink" / "sources" / "fixture"
VALUES = Path(__file__).resolve().parents[1] / "fixtures" / "values" / "2.3.0-hashmap-canonical"
SPLIT_FIELDS = ("split_id", "path", "offset", "length", "modification_time", "file_size",
                "hostnames", "reader_offset", "records_to_skip")  # fmt: skip


def as_truth(report: PositionsReport) -> dict[str, Any]:
    """statectl's reading in the dumper's schema."""
    operators: dict[str, Any] = {}
    for source in report.sources:
        subtasks: dict[str, list[Any]] = {}
        for held in source.splits:
            subtasks.setdefault(str(held.subtask), []).append(_split(held.split))
        enum = source.enumerator
        assert isinstance(enum, ss.FileEnumerator)
        operators[source.operator_id] = {
            "subtasks": subtasks,
            "enumerator": {
                "coordinator_serde_version": source.coordinator_serde_version,
                "serializer_version": 1,
                "pending_splits": [_split(s) for s in enum.pending],
                "processed_paths": list(enum.processed_paths),
            },
        }
    return {"operators": operators}


def _split(split: Any) -> dict[str, Any]:
    fields = split_json(split)
    return {name: fields[name] for name in SPLIT_FIELDS}


def check_against_truth(directory: Path) -> PositionsReport:
    report = positions(open_savepoint(str(directory / "savepoint")))
    assert as_truth(report) == json.loads((directory / "truth.json").read_text())
    (source,) = report.sources
    assert (source.uid, source.kind, source.evidence) == ("file-src", "file", "enumerator and splits")  # fmt: skip
    return report


def test_file_source_equals_flinks_reading() -> None:
    report = check_against_truth(FIXTURE)
    started = [h.split for h in report.sources[0].splits]
    assert all(isinstance(s, ss.FileSplit) and s.records_to_skip for s in started)


@pytest.mark.flink
def test_file_source_fresh_savepoint_equals_flinks_reading() -> None:
    from tests.flink import harness

    check_against_truth(harness.file_source_savepoint())


def test_custom_source_is_unrecognised_with_its_bytes() -> None:
    report = positions(open_savepoint(str(VALUES / "savepoint")))
    (source,) = report.sources
    assert (source.uid, source.kind) == ("src", None)
    assert isinstance(source.enumerator, ss.UnrecognisedEnumerator)
    assert all(isinstance(h.split, ss.UnrecognisedSplit) for h in source.splits)


def test_operator_filter() -> None:
    sp = open_savepoint(str(FIXTURE / "savepoint"))
    assert [s.uid for s in positions(sp, "file-src").sources] == ["file-src"]
    with pytest.raises(Exception, match="keeps no source state"):
        positions(sp, "slow")
