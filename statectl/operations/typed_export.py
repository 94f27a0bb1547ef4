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

import contextlib
import re
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import quote

import pyarrow as pa
import pyarrow.parquet as pq

from statectl.errors import StatectlError
from statectl.execution.engine import Engine, LocalEngine, start_named
from statectl.formats.handles import DistributionMode
from statectl.operations import parquet_files
from statectl.operations.export import ExportReport, RawCount, read_bytes
from statectl.progress import ProgressCallback, begun
from statectl.savepoint import entries, tables, writer
from statectl.savepoint.entries import KeyedSource, OperatorFile
from statectl.savepoint.model import Savepoint
from statectl.savepoint.storage import Location, locate

CHUNK_BYTES = 128 << 20  # key-group blocks per part file


@dataclass(frozen=True)
class TypedTask:
    """The rows of some states from one subtask's file (a key-group range of a keyed one: every
    state of it from one pass; an operator-state file: one state)."""

    states: tuple[TypedOutput, ...]
    keyed: KeyedSource | None = None
    key_groups: tuple[int, int] | None = None
    operator: OperatorFile | None = None


@dataclass(frozen=True)
class TypedOutput:
    """Where one state's rows of a task go."""

    state: str
    folder: str  # `<operator>/<state>` inside the output, percent-encoded
    part: str = ""


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
    """A task per keyed file chunk (all its states) and per operator state of a file; parts are
    numbered per state in savepoint order."""
    ops = [sp.find_operator(operator)] if operator else list(sp.operators)
    tasks: list[TypedTask] = []
    for op in ops:
        for keyed in entries.keyed_files(sp, op):
            names = [s.name for s in keyed.header().states if state is None or s.name == state]
            if names:
                outputs = tuple(TypedOutput(n, folder_name(keyed.operator, n)) for n in names)
                tasks += [TypedTask(outputs, keyed, chunk) for chunk in keyed.chunks(CHUNK_BYTES)]
        broadcast_read: set[str] = set()
        for file in entries.operator_files(sp, op):
            for meta in file.handle.states:
                name = meta.name
                if (state is not None and name != state) or name in broadcast_read:
                    continue
                if meta.mode == DistributionMode.BROADCAST:  # every subtask holds the same map
                    broadcast_read.add(name)
                output = TypedOutput(name, folder_name(file.operator, name))
                tasks.append(TypedTask((output,), operator=file))
    if state is not None and not tasks:
        raise StatectlError(f"unknown state {state!r}", sp.directory.url)
    counts: dict[str, int] = {}
    numbered = []
    for task in tasks:
        parts = []
        for output in task.states:
            n = counts[output.folder] = counts.get(output.folder, -1) + 1
            parts.append(replace(output, part=f"part-{n:05d}.parquet"))
        numbered.append(replace(task, states=tuple(parts)))
    return numbered


def task_batches(
    task: TypedTask, raws: dict[str, tables.RawTally]
) -> tuple[dict[str, pa.Schema], Iterator[tuple[str, pa.Table | pa.RecordBatch]]]:
    """Each state's schema and the task's (state, record batch) pairs (streamed)."""
    if isinstance(task.keyed, (entries.KeyedFile, entries.NativeKeyedFile)):
        all_codecs = entries.codecs_for(task.keyed.header(), task.keyed.flink_major)
        codecs = {o.state: all_codecs[o.state] for o in task.states}
        batches = tables.keyed_state_batches(task.keyed, codecs, task.key_groups, raws)
        return {n: c.arrow_schema() for n, c in codecs.items()}, batches
    if task.keyed is not None:  # the hashmap backend's own format: a pass per state
        return _per_state_batches(task, task.keyed, raws)
    assert task.operator is not None
    (output,) = task.states
    codec = tables.operator_state_codec(task.operator, output.state)
    raw = raws.setdefault(output.state, tables.RawTally())
    batches = tables.operator_batches(task.operator, output.state, codec, raw)
    return {output.state: codec.arrow_schema()}, ((output.state, b) for b in batches)


def _per_state_batches(
    task: TypedTask, source: KeyedSource, raws: dict[str, tables.RawTally]
) -> tuple[dict[str, pa.Schema], Iterator[tuple[str, pa.Table | pa.RecordBatch]]]:
    codecs = entries.codecs_for(source.header(), source.flink_major)
    names = [o.state for o in task.states]

    def batches() -> Iterator[tuple[str, pa.Table | pa.RecordBatch]]:
        for name in names:
            raw = raws.setdefault(name, tables.RawTally())
            for b in tables.keyed_batches(source, name, codecs[name], task.key_groups, raw):
                yield name, b

    return {n: codecs[n].arrow_schema() for n in names}, batches()


def write_typed_part(
    task: TypedTask, folder_url: str, storage_options: dict[str, Any] | None
) -> list[TypedPart]:
    """The task's part file of every state (an empty state's part still has its schema)."""
    raws: dict[str, tables.RawTally] = {}
    schemas, batches = task_batches(task, raws)
    root = locate(folder_url, storage_options)
    outputs = {o.state: o for o in task.states}
    rows = dict.fromkeys(outputs, 0)
    with contextlib.ExitStack() as stack:
        writers: dict[str, pq.ParquetWriter] = {}

        def writer_of(name: str, first: pa.Table | pa.RecordBatch) -> pq.ParquetWriter:
            if name not in writers:
                folder = root.child(outputs[name].folder)
                folder.fs.makedirs(folder.path, exist_ok=True)
                target = folder.child(outputs[name].part)
                sink = stack.enter_context(target.fs.open(target.path, "wb"))
                parquet = parquet_files.writer(sink, schemas[name], first)
                writers[name] = stack.enter_context(parquet)
            return writers[name]

        for name, batch in batches:
            if isinstance(batch, pa.Table):
                writer_of(name, batch).write_table(batch)
            else:
                writer_of(name, batch).write_batch(batch)
            rows[name] += batch.num_rows
        for name in outputs:
            if rows[name] == 0:
                empty = pa.Table.from_batches([], schema=schemas[name])  # no pandas
                writer_of(name, empty).write_table(empty)
    return [
        TypedPart(
            outputs[name].folder,
            rows[name],
            raws[name].rows if name in raws else 0,
            raws[name].first_reason if name in raws else None,
        )
        for name in outputs
    ]


def export_typed(
    sp: Savepoint,
    output: str,
    *,
    operator: str | None = None,
    state: str | None = None,
    engine: Engine | None = None,
    overwrite: bool = False,
    storage_options: dict[str, Any] | None = None,
    progress: ProgressCallback | None = None,
) -> ExportReport:
    """Every state (or one) of a savepoint into `output`/<operator>/<state>/ part files.
    `progress`: the tasks done (files and their state bytes), each phase named."""
    writer.ensure_not_inside(sp.directory, output, storage_options)
    tasks = plan_typed(sp, operator, state)
    engine = engine or LocalEngine()
    staged = writer.stage(output.rstrip("/"), overwrite, storage_options, TYPED_FOLDER)
    with writer.discarded_on_failure(staged, name_os_errors=True):
        url = staged.staging_url
        start_named(engine, progress)
        if progress is not None:
            count = len({output.folder for task in tasks for output in task.states})
            progress(begun(f"exporting {count} states"))
        results = engine.run(
            tasks, lambda task: write_typed_part(task, url, storage_options), _work, progress
        )
        parts = [part for result in results for part in result]
        writer.publish_folder(staged)
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


def _work(task: TypedTask) -> tuple[int, int]:
    """A task's share of the progress: one part (or a part per state), the bytes it reads."""
    return 1, read_bytes(task.keyed, task.key_groups, task.operator)


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
