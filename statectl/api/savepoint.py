"""Savepoints, operators and states as Python objects: the library's reading side.

`statectl.open(url)` gives a `Savepoint`; its `operators` hold their `states`, and a `State`
reads as Arrow record batches with the columns of its table (docs/values.md): keyed VALUE,
LIST, REDUCING and AGGREGATING `key`, `namespace`, `value`; MAP adds `user_key`; timers `key`,
`namespace`, `timestamp`; TTL adds `ttl_timestamp`; operator list and union state `subtask`,
`value`; broadcast state `key`, `value`. Reading is streamed, one subtask file (or key-group
range of it) at a time, so memory stays flat with state size; `splits()` lists those pieces
for readers that spread them over workers (the Spark data source).

Arrow (`savepoint/tables.py`) is loaded when a state is read, not with this module: the
commands that never read a state as a table load none of it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from statectl.errors import StatectlError
from statectl.formats.handles import DistributionMode
from statectl.formats.metadata import OperatorState
from statectl.formats.state_values import StateCodec
from statectl.operations import verify as checks  # with the reader: the clock of `timings`
from statectl.savepoint import entries
from statectl.savepoint import model as savepoint_model
from statectl.savepoint.entries import KeyedSource, OperatorFile
from statectl.savepoint.reader import open_savepoint

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

    from statectl.execution.engine import Engine
    from statectl.operations.check import CheckReport
    from statectl.operations.migrate import MigrationReport
    from statectl.operations.positions import PositionsReport
    from statectl.operations.state_edits import StateEdit
    from statectl.operations.summary import SavepointSummary
    from statectl.operations.transform import RunsWriter, TaskRuns
    from statectl.operations.upgrade import UpgradeCheck
    from statectl.operations.verify import Verification
    from statectl.progress import ProgressCallback

SPLIT_BYTES = 128 << 20  # key-group blocks of one canonical file read as one split


def open(
    url: str, storage_options: dict[str, Any] | None = None, *, allow_external_files: bool = False
) -> Savepoint:
    """The savepoint (or retained checkpoint) at `url`: a folder or its `_metadata`, local or on
    any fsspec filesystem (`s3://`, `gs://`, `memory://`, …), `storage_options` passed to it.
    State files outside it are read only in a checkpoint's own folders (`chk-N`, `shared`,
    `taskowned`), anywhere else only with `allow_external_files`. A retained checkpoint copied
    from where Flink wrote it, with its job folder's layout (`<copy>/chk-N`, `shared/` and
    `taskowned/` beside it), is read from the copy: `moved_from` names the original job folder,
    and a `statectl.StatectlNote` warning says so.

    >>> sp = statectl.open("s3://bucket/savepoints/savepoint-1a2b3c")
    >>> sp.operator("orders").state("totals").to_pandas()
    """
    return Savepoint(open_savepoint(url, storage_options, allow_external_files))


@dataclass(frozen=True)
class Savepoint:
    """A parsed savepoint: its metadata, its operators, the operations on it."""

    parsed: savepoint_model.Savepoint = field(repr=False)
    # (operator id or None for all, copies_only) of the consistency checks passed
    _consistent: set[tuple[str | None, bool]] = field(
        default_factory=set, init=False, repr=False, compare=False
    )
    # State edits made (`State.replace`, `drop`, `rename`), written by `write`
    _edits: list[StateEdit] = field(default_factory=list, init=False, repr=False, compare=False)

    @property
    def location(self) -> str:
        return self.parsed.directory.url

    @property
    def moved_from(self) -> str | None:
        """The job folder a retained checkpoint's `_metadata` names, when it is read from a copy
        of it (the folder holding `location`); else None."""
        moved = self.parsed.moved
        return moved.original if moved and moved.mapped else None

    @property
    def metadata_version(self) -> int:
        return self.parsed.metadata.version

    @property
    def checkpoint_id(self) -> int:
        return self.parsed.metadata.checkpoint_id

    @cached_property
    def operators(self) -> tuple[Operator, ...]:
        """Every operator in `_metadata`, stateful or not."""
        return tuple(Operator(self, op) for op in self.parsed.operators)

    def operator(self, name: str) -> Operator:
        """The operator with this uid, 32-hex id or (Flink 2.x) name; an unknown or ambiguous
        name raises `StatectlError` listing the candidates."""
        return Operator(self, self.parsed.find_operator(name))

    def ensure_consistent(
        self,
        operator: str | None = None,
        *,
        copies_only: bool = False,
        progress: ProgressCallback | None = None,
    ) -> None:
        """Raise `SavepointError` with the first problem `verify`'s shallow checks find, in
        `operator` (uid, id or name) or in every operator: what an operation checks before it
        reads or writes state. `copies_only`: for operations that copy state files as bytes
        (`migrate`), state in a layout statectl does not parse is no problem. A check passed is
        remembered, so the operations after it do not repeat it. `progress`: the subtasks
        checked."""
        checked = None if operator is None else [self.parsed.find_operator(operator)]
        key = (None if checked is None else checked[0].operator_id_hex, copies_only)
        if self._consistent & _covering(key):
            return
        checks.ensure_consistent(self.parsed, checked, copies_only=copies_only, progress=progress)
        self._consistent.add(key)

    def inspect(
        self,
        operator: str | None = None,
        deep: bool = False,
        *,
        progress: ProgressCallback | None = None,
    ) -> SavepointSummary:
        """What `statectl inspect` shows: operators, states and their types, subtasks.
        `progress`: with `deep`, the files whose entries are counted, operator by operator."""
        from statectl.operations.summary import summarize

        return summarize(self.parsed, operator, deep, progress)

    def verify(
        self, deep: bool = False, *, progress: ProgressCallback | None = None
    ) -> Verification:
        """What `statectl verify` checks; `deep` walks every entry. `progress`: the subtasks
        checked, operator by operator."""
        return checks.verify(self.parsed, deep, progress=progress)

    def check_upgrade(self, target: str = "2.3", classpath: Sequence[str] = ()) -> UpgradeCheck:
        """Whether Flink `target` (2.x) restores each state (`statectl upgrade --check`);
        `classpath`: the job's jars or class folders, for Kryo values of user classes."""
        from statectl.operations.upgrade import check_upgrade
        from statectl.savepoint.classpath import ClassPath

        with ClassPath(classpath) as classes:
            return check_upgrade(self.parsed, target, classes)

    def check(
        self, classpath: Sequence[str] = (), types: Mapping[str, str] | None = None
    ) -> CheckReport:
        """What Flink does restoring each state with the new version of the job (`statectl
        check`): `as-is`, `migrates`, `loses`, `refused` or `unknown`, with the reason
        (`CheckReport.ok`: every state as-is or migrates). `classpath`: the new job's jars or
        class folders (POJOs, enums, Avro records, Kryo classes, read without a JVM); `types`:
        {"OPERATOR/STATE": type} in `inspect`'s syntax for types the job declares in code
        (`ROW{id STRING, qty INT}`, `TUPLE2{f0 STRING, f1 BIGINT}`), else assumed unchanged."""
        from statectl.operations.check import check
        from statectl.savepoint.classpath import ClassPath

        with ClassPath(classpath) as classes:
            names = tuple(str(entry) for entry in classes.entries)
            return check(self.parsed, classes, types, names)

    def positions(self, operator: str | None = None) -> PositionsReport:
        """Where every source resumes (`statectl positions`)."""
        from statectl.operations.positions import positions

        return positions(self.parsed, operator)

    def write(
        self,
        destination: str,
        *,
        overwrite: bool = False,
        progress: ProgressCallback | None = None,
        storage_options: dict[str, Any] | None = None,
    ) -> MigrationReport:
        """This savepoint with the state edits made on it (`State.replace`, `State.drop`,
        `State.rename`) as a new savepoint at `destination`: the edited operators' keyed state
        written anew in its format (canonical or RocksDB native), everything else carried over
        as bytes, `_metadata` published last; the input is never modified."""
        from statectl.operations.migrate import migrate, plan_migration
        from statectl.savepoint.storage import options_for

        if not self._edits:
            raise StatectlError("no state was edited: nothing to write", self.location)
        self.ensure_consistent()
        plan = plan_migration(self.parsed, (), (), self._edits)
        source_options = self.parsed.storage_options
        return migrate(
            plan,
            destination,
            overwrite=overwrite,
            storage_options=options_for(
                destination, self.location, storage_options, source_options
            ),
            progress=progress,
            engine=_frames_engine(self._edits),
        )

    def __repr__(self) -> str:
        operators = len(self.operators)
        return f"<Savepoint {self.location} v{self.metadata_version}, {operators} operators>"


def _covering(check: tuple[str | None, bool]) -> set[tuple[str | None, bool]]:
    """The checks whose passing implies `check` passes: of every operator, or of this one, and
    without `copies_only` (which only forgives)."""
    operator, copies_only = check
    return {(None, False), (operator, False), (None, copies_only), (operator, copies_only)}


@dataclass(frozen=True)
class Operator:
    """One operator of a savepoint and its states."""

    savepoint: Savepoint = field(repr=False)
    state_of: OperatorState = field(repr=False)

    @property
    def id(self) -> str:
        return self.state_of.operator_id_hex

    @property
    def uid(self) -> str | None:
        return self.state_of.uid

    @property
    def name(self) -> str | None:
        return self.state_of.name

    @property
    def parallelism(self) -> int:
        return self.state_of.parallelism

    @property
    def max_parallelism(self) -> int:
        return self.state_of.max_parallelism

    @cached_property
    def states(self) -> tuple[State, ...]:
        """Keyed states (and timers) first, then operator list, union and broadcast state."""
        from statectl.operations.summary import summarize_operator

        summary = summarize_operator(self.savepoint.parsed, self.state_of, deep=False)
        return tuple(
            State(self, s.name, s.scope, s.kind, s.mode, s.type, s.type_tree)
            for s in summary.states
        )

    def state(self, name: str) -> State:
        for state in self.states:
            if state.name == name:
                return state
        known = ", ".join(s.name for s in self.states) or "none"
        raise StatectlError(f"unknown state {name!r}; known states: {known}", self.label)

    @property
    def label(self) -> str:
        return entries.operator_label(self.state_of)

    def __repr__(self) -> str:
        return f"<Operator {self.label} p={self.parallelism} maxp={self.max_parallelism}>"


@dataclass(frozen=True)
class ReadSplit:
    """A piece of one state that reads on its own: one subtask's file, or a key-group range of
    it (picklable: it travels to Spark executors)."""

    state: str
    subtask: int
    keyed: KeyedSource | None = None
    key_groups: tuple[int, int] | None = None
    operator: OperatorFile | None = None


@dataclass(frozen=True)
class State:
    """One state of an operator: what it holds, and its entries as Arrow."""

    operator: Operator = field(repr=False)
    name: str
    scope: str  # keyed | operator
    kind: str  # VALUE, LIST, MAP, REDUCING, AGGREGATING, TIMERS; LIST (operator), BROADCAST
    mode: str | None  # operator state: SPLIT_DISTRIBUTE, UNION, BROADCAST
    type: str | None  # one line, e.g. `MAP<STRING, BIGINT>, TTL`
    type_tree: dict[str, Any] | None = field(default=None, repr=False)

    @property
    def schema(self) -> pa.Schema:
        """The columns of this state's table."""
        return self._codec.arrow_schema()

    def splits(self, split_bytes: int = SPLIT_BYTES) -> list[ReadSplit]:
        """The pieces the state reads in: a keyed state by subtask file and key-group ranges of
        about `split_bytes`; operator state by subtask (a broadcast map once: every subtask
        holds the same)."""
        sp, op = self.operator.savepoint.parsed, self.operator.state_of
        if self.scope == "keyed":
            return [
                ReadSplit(self.name, file.subtask, keyed=file, key_groups=chunk)
                for file in entries.keyed_files(sp, op)
                for chunk in file.chunks(split_bytes)
            ]
        files = [f for f in entries.operator_files(sp, op) if _holds(f, self.name)]
        if self.mode == DistributionMode.BROADCAST.name:
            files = files[:1]
        return [ReadSplit(self.name, f.subtask, operator=f) for f in files]

    def read(self) -> pa.RecordBatchReader:
        """Every entry, streamed as record batches of the state's table."""
        import pyarrow as pa

        batches = (b for split in self.splits() for b in read_split(split, self._codec))
        return pa.RecordBatchReader.from_batches(self.schema, batches)

    def to_arrow(self) -> pa.Table:
        return self.read().read_all()

    def to_pandas(self) -> pd.DataFrame:
        return self.to_arrow().to_pandas()

    def replace(
        self,
        rows: pa.Table | pa.RecordBatchReader | Iterable[pa.RecordBatch | pa.Table] | Any,
        classpath: Sequence[str] = (),
    ) -> tuple[str, ...]:
        """Make `rows` (this state's columns, as `to_arrow()` gives them) the state's entries
        when the savepoint is written (`Savepoint.write`): rows left out are removed, new keys
        land in the key group (and subtask) Flink assigns them. `rows` is a table, or batches
        (a `pyarrow.RecordBatchReader`, or any iterable of record batches or tables, read
        once): keyed state's rows are encoded batch by batch and spilled to local disk sorted
        by key group (`$STATECTL_LOCAL_DIR`, else the temp dir), so memory stays bounded
        whatever their number. Or, for keyed state, a Spark DataFrame: its own tasks encode
        the rows, Spark's shuffle takes them to the tasks writing each subtask's file when the
        savepoint is written (in that DataFrame's session), and no row reaches this process.
        Rows that do not fit the state raise `StatectlError` naming the column or row, and
        nothing is recorded; so does a null in a POJO field that the job's class (`classpath`:
        its jars or class folders) declares primitive. Returns the warnings: nulls in POJO
        fields of classes not read (the report of `Savepoint.write` lists them too; a
        DataFrame's are known once written)."""
        from statectl.operations.transform import frame_edit, replacement
        from statectl.savepoint.classpath import ClassPath

        sp = self.operator.savepoint.parsed
        with ClassPath(classpath) as classes:
            job_classes = classes if classes.entries else None
            if _is_spark_frame(rows):
                edit = frame_edit(sp, self.operator.id, self.name, rows, job_classes)
            else:
                edit = replacement(sp, self.operator.id, self.name, rows, job_classes)
        self._edit(edit)
        return edit.warnings

    def runs_writer(self) -> RunsWriter | None:
        """For the Spark writer: what its tasks encode new rows with, into sorted runs of
        entries per target subtask (None for operator state, whose rows the commit takes)."""
        from statectl.operations.transform import runs_writer

        return runs_writer(self.operator.savepoint.parsed, self.operator.id, self.name)

    def replace_from_runs(self, tasks: Sequence[TaskRuns]) -> None:
        """Make the rows that `runs_writer`'s tasks wrote the state's entries when the
        savepoint is written: each subtask's file merges its runs, as bytes."""
        from statectl.operations.transform import runs_edit

        self._edit(runs_edit(self.operator.savepoint.parsed, self.operator.id, self.name, tasks))

    def drop(self) -> None:
        """Leave this state out of the written savepoint."""
        from statectl.operations.state_edits import DROP, StateEdit

        self._edit(StateEdit(self.operator.id, self.name, DROP))

    def rename(self, new_name: str) -> None:
        """Give this state a new name in the written savepoint."""
        from statectl.operations.state_edits import RENAME, StateEdit

        self._edit(StateEdit(self.operator.id, self.name, RENAME, new_name=new_name))

    def _edit(self, edit: StateEdit) -> None:
        self.operator.savepoint._edits.append(edit)

    @cached_property
    def _codec(self) -> StateCodec:
        sp, op = self.operator.savepoint.parsed, self.operator.state_of
        if self.scope == "keyed":
            for file in entries.keyed_files(sp, op):
                codecs = entries.codecs_for(file.header(), file.flink_major)
                if self.name in codecs:
                    return codecs[self.name]
        else:
            for holder in entries.operator_files(sp, op):
                if _holds(holder, self.name):
                    from statectl.savepoint import tables

                    return tables.operator_state_codec(holder, self.name)
        raise StatectlError(f"no subtask holds state {self.name!r}", self.operator.label)


def read_split(split: ReadSplit, codec: StateCodec | None = None) -> Iterator[pa.RecordBatch]:
    """One split's record batches (`codec`: the state's, else read from the split's header)."""
    from statectl.savepoint import tables

    if split.keyed is not None:
        if codec is None:
            header = split.keyed.header()
            codec = entries.codecs_for(header, split.keyed.flink_major)[split.state]
        yield from tables.split_batches(split.keyed, split.state, codec, split.key_groups)
    elif split.operator is not None:
        codec = codec or tables.operator_state_codec(split.operator, split.state)
        yield from tables.operator_batches(split.operator, split.state, codec)


def _holds(file: OperatorFile, state: str) -> bool:
    return any(s.name == state for s in file.handle.states)


def _is_spark_frame(rows: object) -> bool:
    """Whether `rows` is a PySpark DataFrame (without importing pyspark for other rows)."""
    return type(rows).__module__.startswith("pyspark.sql") and hasattr(rows, "mapInArrow")


def _frames_engine(edits: Sequence[StateEdit]) -> Engine | None:
    """The Spark of the DataFrames that replace states, whose shuffle writes them (the active
    context, theirs); None without such a state: this process's engine."""
    frames = [e.feed.frame for e in edits if e.feed is not None and e.feed.frame is not None]
    if not frames:
        return None
    from statectl.execution.spark import SparkEngine

    return SparkEngine(frames[0].sparkSession.sparkContext.master)
