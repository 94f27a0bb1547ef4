"""Flink savepoints as Spark tables: the data sources `flink-state` and
`flink-savepoint-metadata` (Spark 4's Python data source API), built on the public API.

>>> statectl.spark.register(spark)
>>> spark.read.format("flink-state").option("operator", "orders").option("state", "totals") \\
...     .load("s3://bucket/savepoints/savepoint-1a2b3c")
>>> spark.read.format("flink-savepoint-metadata").load("s3://bucket/savepoints/savepoint-1a2b3c")

`flink-state` reads one state as the table of docs/values.md (its columns typed by the state's
serializers), plus a `subtask` column where the table has none: one input partition per subtask
file, or per key-group range of a large canonical file, so a savepoint of many files reads in
parallel; rows are exchanged as Arrow batches. Filters on `subtask` are pushed down: partitions
of other subtasks are not read. Spark keeps timestamps and times in microseconds: nanosecond
values (`LocalDateTime`, SQL TIMESTAMP(9)) are cut to microseconds there (`State.read()` keeps
them). Options: `operator` (uid, name or id) and `state` (required), and `storage.KEY` for the
filesystem's storage options (e.g. `storage.endpoint_url`).

`flink-state` also writes: a DataFrame with a keyed state's columns (a `subtask` column is
ignored) becomes that state's entries in a new savepoint at the path saved to, the rest of
the `source` savepoint carried over (`State.replace`, `Savepoint.write`):

>>> df.write.format("flink-state").option("source", src).option("operator", "orders") \\
...     .option("state", "totals").mode("append").save("s3://bucket/savepoints/fixed")

Each task encodes its rows of a keyed state into sorted runs of entries, one per target
subtask, in a folder beside the destination (`.statectl-rows-NAME-…`); the driver's commit
merges each subtask's runs into its file as bytes, carries the rest over and publishes
`_metadata` last (operator state, small by nature, goes as Arrow IPC files the commit
encodes), then removes the folder (as does an abort). Spark's Python data sources take only the
modes `append` (an existing destination is refused, as the library refuses it) and
`overwrite` (statectl's `overwrite`: only a savepoint is replaced).

`flink-savepoint-metadata` has one row per (operator, state, subtask): the operator's ids and
parallelism, the state's kind and type, the subtask's key-group range and bytes.

On a cluster (any master but `local…`), `register` ships the `statectl` package to the
executors, as statectl's own Spark jobs do; its dependencies must be installed there.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceWriter,
    InputPartition,
    WriterCommitMessage,
)

from statectl.execution.spark import spark_arrow_schema, spark_arrow_type  # noqa: F401 - public

if TYPE_CHECKING:
    from pyspark import SparkContext
    from pyspark.sql import SparkSession
    from pyspark.sql.datasource import Filter
    from pyspark.sql.types import StructType

    from statectl.api import ReadSplit, State
    from statectl.operations.transform import RunsWriter, TaskRuns
    from statectl.savepoint.storage import Location

try:  # Spark 4: tasks get Arrow batches
    from pyspark.sql.datasource import DataSourceArrowWriter as _WriterBase

    _ARROW_WRITER = True
except ImportError:  # pragma: no cover - pyspark without it: Rows
    _WriterBase = DataSourceWriter  # type: ignore[misc,assignment]
    _ARROW_WRITER = False

STATE_FORMAT = "flink-state"
METADATA_FORMAT = "flink-savepoint-metadata"
_STORAGE_PREFIX = "storage."
_PACKAGE_ZIP = "statectl.zip"  # the name `_ship_package` gives the package's archive
# The folder of a write's staged rows, beside the destination: not the savepoint writer's
# `.statectl-staging-` (whose stale-staging checks must not take it for a savepoint's).
ROWS_MARK = ".statectl-rows-"


def register(spark: SparkSession) -> None:
    """Make `flink-state` and `flink-savepoint-metadata` readable in this Spark session (and
    let Python data sources take filters: `flink-state` prunes subtasks with them). On a
    cluster, statectl's package is shipped to the executors first (their Python workers read
    the partitions; statectl's dependencies must be installed there). In local mode Spark's
    Python workers (which plan and read the data sources) run this interpreter, unless
    `PYSPARK_PYTHON` chose another: that one must import statectl, or a StatectlError says so.
    """
    context = spark.sparkContext
    if (context.master or "local").startswith("local"):
        _local_workers_python(context)
    elif not _shipped(context):
        from statectl.execution.spark import _ship_package

        # Before registering: a data source takes the context's Python files as it is
        # registered, and its reads run with exactly those.
        _ship_package(context)
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    spark.dataSource.register(FlinkStateDataSource)
    spark.dataSource.register(FlinkSavepointMetadataDataSource)


def _local_workers_python(context: SparkContext) -> None:
    """Spark's Python workers on this machine run this interpreter: PySpark's default is
    whatever `python3` is on PATH, which outside an activated virtualenv (a notebook's kernel,
    `venv/bin/python script.py`) lacks statectl and pyarrow. A `PYSPARK_PYTHON` of the user's
    stands, if it can import them; else a StatectlError says what to set."""
    import os
    import sys

    chosen = context.pythonExec
    if _same_file(chosen, sys.executable):
        return
    if chosen == _PYSPARK_DEFAULT_PYTHON and not os.environ.get("PYSPARK_PYTHON"):
        context.pythonExec = sys.executable  # read as each Python function is wrapped
        return
    missing = _cannot_import(chosen)
    if missing is not None:
        from statectl.errors import StatectlError

        raise StatectlError(
            f"Spark's Python workers run {chosen} (PYSPARK_PYTHON), which {missing}: set "
            f"PYSPARK_PYTHON={sys.executable} before the SparkSession starts"
        )


_PYSPARK_DEFAULT_PYTHON = "python3"  # SparkContext.pythonExec without PYSPARK_PYTHON


def _same_file(program: str, path: str) -> bool:
    """Whether `program` (a name on PATH or a path) is `path`: by path, not by the file a
    link names, which a virtualenv's `python` shares with the interpreter it was made from."""
    import os
    import shutil

    found = shutil.which(program)
    return found is not None and os.path.abspath(found) == os.path.abspath(path)


def _cannot_import(python: str) -> str | None:
    """What `python` lacks of what a worker reading a state imports (None: nothing)."""
    import subprocess

    probe = "import pyarrow, statectl"
    try:
        run = subprocess.run(
            [python, "-c", probe], capture_output=True, text=True, timeout=120, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"does not run ({exc})"
    if run.returncode == 0:
        return None
    said = [line for line in run.stderr.splitlines() if line.strip()]
    return f"cannot import statectl ({said[-1] if said else f'exit code {run.returncode}'})"


def _shipped(context: SparkContext) -> bool:
    """Whether statectl's package is among the context's files already (a context statectl
    started for a cluster has it, and so has one `register` ran on): it is shipped once."""
    return any(path.rsplit("/", 1)[-1] == _PACKAGE_ZIP for path in context.listFiles)


def _storage_options(options: Mapping[str, str]) -> dict[str, Any] | None:
    prefix = len(_STORAGE_PREFIX)
    found = {k[prefix:]: v for k, v in options.items() if k.startswith(_STORAGE_PREFIX)}
    return found or None


def _required(options: Mapping[str, str], name: str) -> str:
    value = options.get(name)
    if not value:
        from statectl.errors import StatectlError

        raise StatectlError(f"the {name!r} option is required", options.get("path"))
    return value


def _open_state(options: Mapping[str, str]) -> State:
    import statectl

    sp = statectl.open(_required(options, "path"), _storage_options(options))
    return sp.operator(_required(options, "operator")).state(_required(options, "state"))


# --- Arrow types as Spark holds them -------------------------------------------------------------


def with_subtask(schema: pa.Schema) -> pa.Schema:
    if "subtask" in schema.names:
        return schema
    return schema.append(pa.field("subtask", pa.int32(), nullable=False))


def _struct_type(schema: pa.Schema) -> StructType:
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(schema)


# --- flink-state --------------------------------------------------------------------------------


class StatePartition(InputPartition):
    """One `ReadSplit` of the state (its subtask is the partition's value)."""

    def __init__(self, split: ReadSplit) -> None:
        super().__init__(split.subtask)
        self.split = split


class FlinkStateDataSource(DataSource):
    """`spark.read.format("flink-state")`: one state of a savepoint as a typed table."""

    @classmethod
    def name(cls) -> str:
        return STATE_FORMAT

    def schema(self) -> StructType:
        return _struct_type(self._arrow_schema())

    def _arrow_schema(self) -> pa.Schema:
        return with_subtask(spark_arrow_schema(_open_state(self.options).schema))

    def reader(self, schema: StructType) -> DataSourceReader:
        from pyspark.sql.pandas.types import to_arrow_schema

        # Exactly the Arrow schema Spark checks batches against (its names and units).
        return FlinkStateReader(dict(self.options), to_arrow_schema(schema, timezone="UTC"))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        return FlinkStateWriter.prepare(dict(self.options), schema, overwrite)


class FlinkStateReader(DataSourceReader):
    def __init__(self, options: dict[str, str], arrow_schema: pa.Schema) -> None:
        self.options = options
        self.arrow_schema = arrow_schema
        self.subtasks: frozenset[int] | None = None  # pushed down: only these subtasks

    def pushFilters(self, filters: list[Filter]) -> Iterator[Filter]:  # Spark's name
        for f in filters:
            wanted = _subtasks_of(f)
            if wanted is None:
                yield f  # not ours: Spark evaluates it
            else:
                self.subtasks = wanted if self.subtasks is None else self.subtasks & wanted

    def partitions(self) -> Sequence[InputPartition]:
        splits = _open_state(self.options).splits()
        return [
            StatePartition(s) for s in splits if self.subtasks is None or s.subtask in self.subtasks
        ]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        from statectl.api import read_split

        assert isinstance(partition, StatePartition)
        split = partition.split
        for batch in read_split(split):
            if "subtask" not in batch.schema.names:
                column = pa.array([split.subtask] * batch.num_rows, pa.int32())
                batch = batch.append_column("subtask", column)
            yield batch.cast(self.arrow_schema, safe=False)  # ns → µs: cut, as documented


def _subtasks_of(f: Filter) -> frozenset[int] | None:
    """The subtasks a filter on `subtask` keeps (None: a filter on anything else)."""
    from pyspark.sql.datasource import EqualTo, In

    if getattr(f, "attribute", None) != ("subtask",):
        return None
    if isinstance(f, EqualTo):
        return frozenset({int(f.value)})
    if isinstance(f, In):
        return frozenset(int(v) for v in f.value)
    return None


# --- flink-state, writing ----------------------------------------------------------------------


class RowsFile(WriterCommitMessage):
    """A task's rows: the Arrow IPC file it wrote (None: the task had no rows)."""

    def __init__(self, path: str | None, rows: int) -> None:
        self.path = path
        self.rows = rows


class TaskRunsFile(WriterCommitMessage):
    """A task's rows of keyed state, encoded: its sorted run of entries per target subtask."""

    def __init__(self, runs: TaskRuns) -> None:
        self.runs = runs


class FlinkStateWriter(_WriterBase):
    """Tasks encode keyed state's rows into entries and write them, sorted, as one run per
    target subtask; the commit merges each subtask's runs into its file as bytes and writes
    `_metadata` (operator state, small, is staged as Arrow IPC files and encoded there).

    Made on the driver (`prepare`, which refuses what it can before any task runs: a missing
    option, a destination statectl may not replace, columns that do not fit the state) and
    shipped to the tasks by Spark."""

    def __init__(
        self,
        options: dict[str, str],
        arrow_schema: pa.Schema,
        overwrite: bool,
        rows_url: str,
        runs_writer: RunsWriter | None = None,
    ) -> None:
        self.options = options
        self.arrow_schema = arrow_schema  # Spark's, for a write without any row
        self.overwrite = overwrite
        self.rows_url = rows_url
        self.runs_writer = runs_writer  # keyed state's encoder

    @classmethod
    def prepare(
        cls, options: dict[str, str], schema: StructType, overwrite: bool
    ) -> FlinkStateWriter:
        import uuid

        from pyspark.sql.pandas.types import to_arrow_schema

        from statectl.errors import SavepointError
        from statectl.savepoint.storage import locate
        from statectl.savepoint.writer import SAVEPOINT, check_destination

        destination_url = _required(options, "path")
        storage = _storage_options(options)
        destination = locate(destination_url.rstrip("/") or destination_url, storage)
        if destination.is_process_local:
            raise SavepointError(
                "flink-state cannot write to process-local storage (memory://): Spark's tasks "
                "run in other processes",
                destination.url,
            )
        check_destination(destination, True, SAVEPOINT)  # only a savepoint may be replaced
        if not overwrite and destination.exists():
            raise SavepointError(
                'destination exists; write with mode("overwrite") to replace it', destination.url
            )
        arrow_schema = to_arrow_schema(schema, timezone="UTC")
        # The columns' names and types, checked on no rows: a mistyped column fails here.
        state = _source_state(options)
        state.replace(arrow_schema.empty_table())
        rows = destination.parent.child(f"{ROWS_MARK}{destination.name}-{uuid.uuid4().hex[:12]}")
        # A local folder by its absolute path: executors do not share the driver's directory.
        rows_url = rows.path if rows.is_local else rows.url
        return cls(options, arrow_schema, overwrite, rows_url, state.runs_writer())

    def _rows_folder(self) -> Location:
        from statectl.savepoint.storage import locate

        return locate(self.rows_url, _storage_options(self.options))

    def write(self, iterator: Iterator[Any]) -> RowsFile | TaskRunsFile:
        import uuid

        batches = iterator if _ARROW_WRITER else _batches_of_rows(iterator, self.arrow_schema)
        folder = self._rows_folder()
        if self.runs_writer is not None:
            return TaskRunsFile(self.runs_writer.write(batches, folder, uuid.uuid4().hex))
        writer = None
        rows = 0
        path = folder.child(f"part-{uuid.uuid4().hex}.arrow").path
        try:
            for batch in batches:
                if writer is None:
                    folder.fs.makedirs(folder.path, exist_ok=True)
                    sink = folder.fs.open(path, "wb")
                    writer = pa.ipc.new_file(sink, batch.schema)
                writer.write_batch(batch)
                rows += batch.num_rows
        finally:
            if writer is not None:
                writer.close()
                sink.close()
        return RowsFile(path if writer is not None else None, rows)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        import statectl

        folder = self._rows_folder()
        paths = [m.path for m in messages if isinstance(m, RowsFile) and m.path is not None]
        try:
            sp = statectl.open(_required(self.options, "source"), _storage_options(self.options))
            name = _required(self.options, "state")
            state = sp.operator(_required(self.options, "operator")).state(name)
            if self.runs_writer is not None:
                state.replace_from_runs([m.runs for m in messages if isinstance(m, TaskRunsFile)])
            else:  # operator state: the tasks' Arrow files, encoded here
                state.replace(
                    self._batches(folder, paths) if paths else self.arrow_schema.empty_table()
                )
            sp.write(_required(self.options, "path"), overwrite=self.overwrite)
        finally:
            self._remove_rows(folder)

    @staticmethod
    def _batches(folder: Location, paths: list[str]) -> Iterator[pa.RecordBatch]:
        for path in paths:
            with folder.fs.open(path, "rb") as source:
                reader = pa.ipc.open_file(source)
                for i in range(reader.num_record_batches):
                    yield reader.get_batch(i)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        self._remove_rows(self._rows_folder())

    @staticmethod
    def _remove_rows(folder: Location) -> None:
        import contextlib

        with contextlib.suppress(FileNotFoundError):
            folder.fs.rm(folder.path, recursive=True)


def _source_state(options: Mapping[str, str]) -> State:
    import statectl

    sp = statectl.open(_required(options, "source"), _storage_options(options))
    return sp.operator(_required(options, "operator")).state(_required(options, "state"))


def _batches_of_rows(rows: Iterator[Any], schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """Spark's Rows as Arrow batches of `schema` (a pyspark whose writers get no Arrow)."""
    chunk: list[dict[str, Any]] = []
    for row in rows:
        chunk.append(row.asDict(recursive=True))
        if len(chunk) == 10_000:
            yield pa.RecordBatch.from_pylist(chunk, schema=schema)
            chunk = []
    if chunk:
        yield pa.RecordBatch.from_pylist(chunk, schema=schema)


# --- flink-savepoint-metadata ---------------------------------------------------------------------

METADATA_SCHEMA = pa.schema(
    [
        pa.field("operator_id", pa.string(), nullable=False),
        pa.field("operator_uid", pa.string()),
        pa.field("operator_name", pa.string()),
        pa.field("parallelism", pa.int32(), nullable=False),
        pa.field("max_parallelism", pa.int32(), nullable=False),
        pa.field("state", pa.string()),
        pa.field("scope", pa.string()),
        pa.field("kind", pa.string()),
        pa.field("mode", pa.string()),
        pa.field("type", pa.string()),
        pa.field("subtask", pa.int32()),
        pa.field("key_group_start", pa.int32()),
        pa.field("key_group_end", pa.int32()),
        pa.field("keyed_bytes", pa.int64()),
        pa.field("operator_bytes", pa.int64()),
        pa.field("keyed_format", pa.string()),
    ]
)


def metadata_table(url: str, storage_options: dict[str, Any] | None = None) -> pa.Table:
    """One row per (operator, state, subtask) of `inspect`'s summary (an operator without
    state: one row per subtask, `state` null)."""
    import statectl

    summary = statectl.open(url, storage_options).inspect()
    rows = []
    for op in summary.operators:
        base = {
            "operator_id": op.id, "operator_uid": op.uid, "operator_name": op.name,
            "parallelism": op.parallelism, "max_parallelism": op.max_parallelism,
        }  # fmt: skip
        states = op.states or (None,)
        for state in states:
            for sub in op.subtasks:
                first, last = sub.key_groups or (None, None)
                rows.append({
                    **base,
                    "state": state and state.name, "scope": state and state.scope,
                    "kind": state and state.kind, "mode": state and state.mode,
                    "type": state and state.type, "subtask": sub.index,
                    "key_group_start": first, "key_group_end": last,
                    "keyed_bytes": sub.keyed_bytes, "operator_bytes": sub.operator_bytes,
                    "keyed_format": sub.keyed_format,
                })  # fmt: skip
    return pa.Table.from_pylist(rows, schema=METADATA_SCHEMA)


class FlinkSavepointMetadataDataSource(DataSource):
    """`spark.read.format("flink-savepoint-metadata")`: operators, states, subtasks."""

    @classmethod
    def name(cls) -> str:
        return METADATA_FORMAT

    def schema(self) -> StructType:
        return _struct_type(METADATA_SCHEMA)

    def reader(self, schema: StructType) -> DataSourceReader:
        return _MetadataReader(dict(self.options))


class _MetadataReader(DataSourceReader):
    def __init__(self, options: dict[str, str]) -> None:
        self.options = options

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        table = metadata_table(_required(self.options, "path"), _storage_options(self.options))
        yield from table.to_batches()
