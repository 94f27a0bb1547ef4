"""How `statectl positions` looks: one JSON document, or one rich table per source."""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING, Any

from statectl.api import reports  # with the splits and enumerators of each kind of source

if TYPE_CHECKING:  # rich draws the tables only: `positions --json` needs none of it
    from statectl.api.reports import PositionsReport, ReaderSplit, SourcePositions


# --- JSON ------------------------------------------------------------------------------------


def positions_json(report: PositionsReport) -> dict[str, Any]:
    return {"location": report.location, "sources": [_source_json(s) for s in report.sources]}


def _source_json(source: SourcePositions) -> dict[str, Any]:
    return {
        "id": source.operator_id,
        "uid": source.uid,
        "name": source.name,
        "parallelism": source.parallelism,
        "kind": source.kind,
        "evidence": source.evidence,
        "splits": [{"subtask": s.subtask, **split_json(s.split)} for s in source.splits],
        "enumerator": enumerator_json(source.enumerator),
    }


def split_json(split: reports.Split | reports.LegacyKafkaOffset) -> dict[str, Any]:
    """One split's fields by name, its markers named; raw bytes as base64."""
    match split:
        case reports.FileSplit():
            return {"type": "file", **_fields(split)}
        case reports.KafkaSplit():
            return {
                "type": "kafka",
                "split_id": split.split_id,
                "topic": split.topic,
                "partition": split.partition,
                "starting_offset": split.starting_offset,
                "starting_marker": split.starting_marker,
                "stopping_offset": split.stopping_offset,
                "stopping_marker": split.stopping_marker,
            }
        case reports.NumberSequenceSplit():
            return {"type": "number-sequence", **_fields(split)}
        case reports.LegacyKafkaOffset():
            return {"type": "legacy-kafka", **_fields(split), "marker": split.marker}
    return {
        "type": "unrecognised",
        "version": split.version,
        "bytes": base64.b64encode(split.data).decode("ascii"),
        "reason": split.reason,
    }


def enumerator_json(state: reports.Enumerator | None) -> dict[str, Any] | None:
    match state:
        case None:
            return None
        case reports.FileEnumerator():
            return {
                "type": "file",
                "pending_splits": [split_json(s) for s in state.pending],
                "processed_paths": list(state.processed_paths),
            }
        case reports.KafkaEnumerator():
            return {
                "type": "kafka",
                "version": state.version,
                "partitions": [_fields(p) for p in state.partitions],
                "initial_discovery_finished": state.initial_discovery_finished,
            }
        case reports.NumberSequenceEnumerator():
            return {
                "type": "number-sequence",
                "remaining": [split_json(s) for s in state.remaining],
            }
    return {
        "type": "unrecognised",
        "version": state.version,
        "bytes": base64.b64encode(state.data).decode("ascii"),
        "reason": state.reason,
    }


def _fields(value: Any) -> dict[str, Any]:
    return {
        name: list(v) if isinstance(v := getattr(value, name), tuple) else v
        for name in value.__slots__
    }


# --- tables ----------------------------------------------------------------------------------


def print_positions(report: PositionsReport) -> None:
    """A table per source, fitted to the terminal: split ids and paths (what `migrate
    --file-position` and `--kafka-offset` take) whole, the rows stacked if need be."""
    from statectl.cli.console import print_line, print_table
    from statectl.cli.tables import Column

    columns = [
        Column("subtask", key=True, justify="right"),
        Column("split", "id", key=True),
        Column("topic / path", "id"),
        Column("partition", "number"),
        Column("position"),
        Column("stop / range"),
    ]
    if not report.sources:
        print_line(f"{report.location}: no source operators with state")
    for source in report.sources:
        label = source.uid or source.name or source.operator_id
        kind = source.kind or "unrecognised"
        rows = [list(_row(held)) for held in source.splits]
        rows += [["pending", *_row_cells(split)] for split in _pending(source.enumerator)]
        print_table(columns, rows, title=f"{label}: {kind} source ({source.evidence})")
        for line in _enumerator_lines(source.enumerator):
            print_line(f"  {line}")


def _row(held: ReaderSplit) -> tuple[str, ...]:
    return (str(held.subtask), *_row_cells(held.split))


def _row_cells(split: reports.Split | reports.LegacyKafkaOffset) -> tuple[str, ...]:
    """split id, topic or path, partition, position, stop or range."""
    match split:
        case reports.FileSplit():
            return (split.split_id, split.path or "-", "", _file_position(split), _range(split))
        case reports.KafkaSplit():
            start = split.starting_marker or f"next {split.starting_offset}"
            stop = split.stopping_marker or f"stop {split.stopping_offset}"
            return (split.split_id, split.topic, str(split.partition), start, stop)
        case reports.NumberSequenceSplit():
            return (split.split_id, "", "", f"next {split.first}", f"to {split.last}")
        case reports.LegacyKafkaOffset():
            done = split.marker or f"last {split.offset}"
            return (f"{split.topic}-{split.partition}", split.topic, str(split.partition), done, "")
    return ("?", f"unrecognised split (v{split.version}, {len(split.data)} bytes)", "", "", "")


def _file_position(split: reports.FileSplit) -> str:
    if split.reader_offset is None:
        return "not started"
    at = "start" if split.reader_offset == reports.FILE_NO_OFFSET else f"byte {split.reader_offset}"
    return f"{at} + skip {split.records_to_skip}"


def _range(split: reports.FileSplit) -> str:
    return f"bytes {split.offset}..{split.offset + split.length} of {split.file_size}"


def _pending(state: reports.Enumerator | None) -> tuple[reports.Split, ...]:
    match state:
        case reports.FileEnumerator():
            return state.pending
        case reports.NumberSequenceEnumerator():
            return state.remaining
    return ()


def _enumerator_lines(state: reports.Enumerator | None) -> list[str]:
    match state:
        case reports.FileEnumerator():
            return [f"processed path: {p}" for p in state.processed_paths]
        case reports.KafkaEnumerator():
            finished = state.initial_discovery_finished
            head = f"enumerator (v{state.version}): {len(state.partitions)} partitions" + (
                "" if finished is None else f", initial discovery finished: {finished}"
            )
            return [head] + [
                f"{p.topic}-{p.partition}: {p.status or 'ASSIGNED'}" for p in state.partitions
            ]
        case reports.UnrecognisedEnumerator():
            return [f"enumerator: unrecognised (v{state.version}, {len(state.data)} bytes)"]
    return []
