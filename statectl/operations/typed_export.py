"""`statectl export --typed`: one Parquet dataset per (operator, state), in real Arrow types.

Each state's table has the columns of docs/values.md (`key`, `namespace`, `value`, …), typed by
the state's codecs (`savepoint.tables`): structs with the real field names, lists, maps,
timestamps, decimals; binary only for what stays raw. DuckDB, pandas and Spark then read fields
without parsing JSON. The output folder holds `<operator>/<state>/part-NNNNN.parquet`, one part
per subtask file (a key-group range of it for large keyed files; a broadcast state's map once, from
the first subtask: Flink gives every subtask the same); operator and state names are
percent-encoded, so `_timer_state/event_user-timers` is one folder. Like the other outputs, the
folder is staged and moved into place at the end, and an existing one is replaced only with
`overwrite` and only when it is a typed export.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import quote

import pyarrow as pa
import pyarrow.parquet as pq

from statectl.errors import StatectlError
from statectl.execution.engine import Engine, LocalEngine
from statectl.formats.handles import DistributionMode
from statectl.operations.export import ExportReport, RawCount
from statectl.savepoint import entries, tables, writer
from statectl.savepoint.entries import KeyedSource, OperatorFile
from statectl.savepoint.model import Savepoint
from statectl.savepoint.storage import Location, locate

CHUNK_BYTES = 128 << 20  # key-group blocks per part file


@dataclass(frozen=True)
class TypedTask:
    """One state's rows from one subtask's file (a key-group range of a keyed one)."""

    state: str
    folder: str  # `<operator>/<state>` inside the output, percent-encoded
    part: str
    keyed: KeyedSource | None = None
    key_groups: tuple[int, int] | None = None
    operator: OperatorFile | None = None


@dataclass(frozen=True)
class TypedPart:
    folder: str
    rows: int
    raw_rows: int
    first_raw_reason: str | None


def folder_name(operator: str, state: str) -> str:
    """Where a state's dataset lies inside the output: `<operator>/<state>`, each encoded."""
    return f"{quote(operator, safe='')}/{quote(state, safe='')}"


def plan_typed(sp: Savepoint, operator: str | None, state: str | None) -> list[TypedTask]:
    ops = [sp.find_operator(operator)] if operator else list(sp.operators)
    tasks: list[TypedTask] = []
    for op in ops:
        for keyed in entries.keyed_files(sp, op):
            for name in (s.name for s in keyed.header().states):
                if state is None or name == state:
                    tasks += [
                        TypedTask(name, folder_name(keyed.operator, name), "", keyed, chunk)
                        for chunk in keyed.chunks(CHUNK_BYTES)
                    ]
        broadcast_read: set[str] = set()
        for file in entries.operator_files(sp, op):
            for meta in file.handle.states:
                name = meta.name
                if (state is not None and name != state) or name in broadcast_read:
                    continue
                if meta.mode == DistributionMode.BROADCAST:  # every subtask holds the same map
                    broadcast_read.add(name)
                folder = folder_name(file.operator, name)
                tasks.append(TypedTask(name, folder, "", operator=file))
    if state is not None and not tasks:
        raise StatectlError(f"unknown state {state!r}", sp.directory.url)
    counts: dict[str, int] = {}
    numbered = []
    for task in tasks:
        n = counts[task.folder] = counts.get(task.folder, -1) + 1
        numbered.append(replace(task, part=f"part-{n:05d}.parquet"))
    return numbered


def task_batches(
    task: TypedTask, raw: tables.RawTally
) -> tuple[pa.Schema, Iterator[pa.RecordBatch]]:
    """The task's state schema and its record batches (streamed)."""
    if task.keyed is not None:
        header = task.keyed.header()
        codec = entries.codecs_for(header, task.keyed.flink_major)[task.state]
        batches = tables.keyed_batches(task.keyed, task.state, codec, task.key_groups, raw)
        return codec.arrow_schema(), batches
    assert task.operator is not None
    codec = tables.operator_state_codec(task.operator, task.state)
    return codec.arrow_schema(), tables.operator_batches(task.operator, task.state, codec, raw)


def write_typed_part(
    task: TypedTask, folder_url: str, storage_options: dict[str, Any] | None
) -> TypedPart:
    raw = tables.RawTally()
    schema, batches = task_batches(task, raw)
    folder = locate(folder_url, storage_options).child(task.folder)
    folder.fs.makedirs(folder.path, exist_ok=True)
    target = folder.child(task.part)
    rows = 0
    with (
        target.fs.open(target.path, "wb") as sink,
        pq.ParquetWriter(sink, schema, compression="zstd") as parquet,
    ):
        for batch in batches:
            parquet.write_batch(batch)
            rows += batch.num_rows
        if rows == 0:  # an empty state still has its schema
            parquet.write_table(schema.empty_table())
    return TypedPart(task.folder, rows, raw.rows, raw.first_reason)


def export_typed(
    sp: Savepoint,
    output: str,
    *,
    operator: str | None = None,
    state: str | None = None,
    engine: Engine | None = None,
    overwrite: bool = False,
    storage_options: dict[str, Any] | None = None,
) -> ExportReport:
    """Every state (or one) of a savepoint into `output`/<operator>/<state>/ part files."""
    writer.ensure_not_inside(sp.directory, output, storage_options)
    tasks = plan_typed(sp, operator, state)
    engine = engine or LocalEngine()
    staged = writer.stage(output.rstrip("/"), overwrite, storage_options, TYPED_FOLDER)
    try:
        url = staged.staging_url
        parts = engine.run(tasks, lambda task: write_typed_part(task, url, storage_options))
        writer.publish_folder(staged)
    except BaseException:
        writer.discard(staged)
        raise
    states: dict[str, int] = {}
    raw: dict[str, tables.RawTally] = {}
    for part in parts:
        states[part.folder] = states.get(part.folder, 0) + part.rows
        if part.raw_rows:
            tally = raw.setdefault(part.folder, tables.RawTally())
            tally.rows += part.raw_rows
            tally.first_reason = tally.first_reason or part.first_raw_reason
    raw_counts = {name: RawCount(t.rows, t.first_reason or "") for name, t in raw.items()}
    total = sum(states.values())
    return ExportReport(staged.destination.url, total, len(parts), engine.name, states, raw_counts)


# --- what --overwrite may replace --------------------------------------------------------------

_TYPED_PART = re.compile(r"[^/]+/[^/]+/part-\d{5}\.parquet")


def _typed_refusal(target: Location) -> str | None:
    """Only a folder holding nothing but `<operator>/<state>/part-NNNNN.parquet` files."""
    if not writer.is_folder(target):
        return "is not a folder written by statectl export --typed"
    root = target.path.rstrip("/") + "/"
    files = target.fs.find(target.path)
    if not all(_TYPED_PART.fullmatch(f[len(root) :]) for f in files if f.startswith(root)):
        return "is not a folder written by statectl export --typed"
    return None


TYPED_FOLDER = writer.OutputKind(_typed_refusal, "output exists; pass --overwrite to replace it")
