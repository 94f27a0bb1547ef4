"""The operations as functions: each takes a `Savepoint` (or its URL) and returns the frozen
dataclass the CLI renders (`statectl.api.reports`). Each refuses an inconsistent savepoint
(`Savepoint.ensure_consistent`) before it reads or writes state. Writing operations stage their
output and publish `_metadata` last; an existing destination is refused unless `overwrite`.

`rescale`, `convert` and `migrate` come in two steps as well: `plan_rescale` (the `--dry-run`
plan) then `write_rescale`, `plan_migration` then `write_migration`. `rescale`, `convert`,
`diff` and `export` run on Spark when asked (`master`, `spark`); `progress` callbacks get
`statectl.progress.Progress` (the phase, files and bytes done of the total).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from statectl.api.savepoint import Savepoint, open
from statectl.errors import StatectlError

if TYPE_CHECKING:
    from statectl.execution.engine import Engine
    from statectl.operations.check import CheckReport
    from statectl.operations.diff import DiffReport
    from statectl.operations.export import ExportReport
    from statectl.operations.migrate import MigrationPlan, MigrationReport
    from statectl.operations.plan import ParallelismPlan
    from statectl.operations.rescale.job import RescaleReport
    from statectl.operations.rescale.load import SubtaskLoads
    from statectl.operations.rescale.plan import RescalePlan
    from statectl.operations.set_positions import PositionsReport as PositionsEditReport
    from statectl.operations.upgrade import UpgradeReport
    from statectl.operations.verify import Verification
    from statectl.progress import ProgressCallback

Source = Savepoint | str
LOCAL_MASTER = "local[*]"
SQL_VIEW = "state"  # the state's table in `transform`'s SQL


def _opened(source: Source, storage_options: dict[str, Any] | None = None) -> Savepoint:
    return source if isinstance(source, Savepoint) else open(source, storage_options)


def _options(
    source: Any, destination: str, storage_options: dict[str, Any] | None
) -> dict[str, Any] | None:
    """The storage options of a write to `destination`: those given, else those the source
    (a Savepoint or its parsed model) was opened with, when the destination is on the same
    store: `statectl.open(url, opts)`, then a write beside it needs none."""
    from statectl.savepoint.storage import options_for

    parsed = source.parsed if isinstance(source, Savepoint) else source
    return options_for(destination, parsed.directory.url, storage_options, parsed.storage_options)


# --- reading ---------------------------------------------------------------------------------


def verify(
    source: Source,
    deep: bool = False,
    storage_options: dict[str, Any] | None = None,
    *,
    allow_external_files: bool = False,
    progress: ProgressCallback | None = None,
) -> Verification:
    """Every cross-check of `statectl verify`; `deep` walks every entry. Findings are in the
    report (`ok` is false when there is one); a URL whose `_metadata` cannot be read is one
    finding too. `progress`: the subtasks checked, operator by operator."""
    if isinstance(source, Savepoint):
        return source.verify(deep, progress=progress)
    from statectl.operations.verify import verify_location

    return verify_location(source, storage_options, deep, allow_external_files, progress)


def check(
    source: Source,
    classpath: Sequence[str] = (),
    types: Mapping[str, str] | None = None,
    *,
    storage_options: dict[str, Any] | None = None,
) -> CheckReport:
    """What Flink does when the new version of the job (its jars or class folders:
    `classpath`) restores each state (`statectl check`): `as-is`, `migrates` (Flink converts
    on restore, nothing lost), `loses` (Flink restores, but values are lost: a renamed POJO
    field), `refused` (Flink refuses the restore) or `unknown`, each with its reason. `types`:
    {"OPERATOR/STATE": type} in `inspect`'s syntax for the types the job declares in code
    (Row, Tuple, basic types), which are otherwise assumed unchanged."""
    return _opened(source, storage_options).check(classpath, types)


def plan(
    source: Source,
    operator: str | None = None,
    parallelisms: Sequence[int] | None = None,
    deep: bool = False,
    *,
    storage_options: dict[str, Any] | None = None,
    progress: ProgressCallback | None = None,
) -> ParallelismPlan:
    """Bytes per key group and per subtask for candidate parallelisms (`statectl plan`); by
    default 1 to twice the current parallelism (at least 16) and the max parallelism's divisors.
    `deep` reads every entry: entries per key group, exact RocksDB native bytes. `progress`:
    the keyed files read, operator by operator."""
    from statectl.operations.plan import plan_parallelism

    sp = _opened(source, storage_options)
    sp.ensure_consistent(operator, progress=progress)
    return plan_parallelism(sp.parsed, operator, parallelisms, deep, progress)


def diff(
    a: Source,
    b: Source,
    operator: str | None = None,
    *,
    spark: bool | None = None,
    master: str | None = None,
    spark_conf: Mapping[str, str] | None = None,
    storage_options: dict[str, Any] | None = None,
    progress: ProgressCallback | None = None,
) -> DiffReport:
    """What differs between two savepoints, state by state, with decoded examples (`statectl
    diff`). Keyed state is compared on Spark with `spark`, or when `master` is given; by default
    only above 64 MiB of it. `progress`: the files compared, each pass named."""
    from statectl.execution.factory import choose_engine
    from statectl.operations.diff import diff as run_diff
    from statectl.operations.diff import wants_spark

    sp_a, sp_b = _opened(a, storage_options), _opened(b, storage_options)
    sp_a.ensure_consistent(progress=progress)
    sp_b.ensure_consistent(progress=progress)
    use_spark = wants_spark(sp_a.parsed, sp_b.parsed, operator, True if master else spark)
    directories = (sp_a.parsed.directory, sp_b.parsed.directory)
    engine = choose_engine(use_spark, master, spark_conf, *directories)
    return run_diff(sp_a.parsed, sp_b.parsed, operator, engine, progress=progress)


def export(
    source: Source,
    output: str,
    *,
    operator: str | None = None,
    state: str | None = None,
    typed: bool = False,
    spark: bool = False,
    master: str | None = None,
    spark_conf: Mapping[str, str] | None = None,
    overwrite: bool = False,
    storage_options: dict[str, Any] | None = None,
    progress: ProgressCallback | None = None,
) -> ExportReport:
    """Entries as Parquet (`statectl export`): one row per entry with JSON columns, or with
    `typed` one dataset per state in typed columns (OUT/<operator>/<state>/). With `spark` (or
    a `master`) a Spark job writes it, as a folder of part files. `progress`: the files (or
    part files) done, each phase named."""
    from statectl.execution.factory import choose_engine
    from statectl.savepoint.storage import locate

    sp = _opened(source, storage_options)
    sp.ensure_consistent(operator, progress=progress)
    storage_options = _options(sp, output, storage_options)
    use_spark = spark or master is not None
    locations = (sp.parsed.directory, locate(output, storage_options))
    engine = choose_engine(use_spark, master, spark_conf, *locations)
    if typed:
        from statectl.operations.typed_export import export_typed

        return export_typed(
            sp.parsed, output, operator=operator, state=state, engine=engine,
            overwrite=overwrite, storage_options=storage_options, progress=progress,
        )  # fmt: skip
    from statectl.operations.export import export as run_export  # pyarrow: for export only

    return run_export(
        sp.parsed, output, operator=operator, state=state, folder=use_spark, engine=engine,
        overwrite=overwrite, storage_options=storage_options, progress=progress,
    )  # fmt: skip


# --- rescale and convert ---------------------------------------------------------------------


def plan_rescale(
    source: Source,
    parallelism: int | None = None,
    *,
    operators: Mapping[str, int] | None = None,
    max_parallelism: int | None = None,
    keyed_format: str | None = None,
    storage_options: dict[str, Any] | None = None,
) -> RescalePlan:
    """What `rescale` (or `convert`) would write, file range by file range (`--dry-run`): every
    stateful operator at `parallelism`, or per operator (`operators`: uid, id or name → N), at
    `max_parallelism` (keys re-hashed), keyed state as `keyed_format` ("native" or "canonical";
    None keeps each operator's). Nothing given: the same savepoint, `keyed_format` applied."""
    from statectl.operations.rescale.plan import plan_rescale as plan_operators

    sp = _opened(source, storage_options)
    sp.ensure_consistent()
    return plan_operators(sp.parsed, parallelism, operators, max_parallelism, keyed_format)


def predicted_loads(plan: RescalePlan) -> dict[str, SubtaskLoads]:
    """Keyed bytes per new subtask that `plan` predicts, by operator id (as `statectl plan`
    does): canonical keyed state at an unchanged max parallelism only, read from `_metadata`."""
    from statectl.operations.plan import predicted_keyed_loads

    return predicted_keyed_loads(plan)


def prepare_engine(
    source: str,
    destination: str,
    *,
    master: str = LOCAL_MASTER,
    spark_conf: Mapping[str, str] | None = None,
    storage_options: dict[str, Any] | None = None,
    head_start: bool = True,
) -> Engine | None:
    """The engine for `write_rescale(plan, destination, engine=…)` (and for `plan_migration`
    and `write_migration` of a schema migration), made before `source` is read: a Spark
    cluster's starts in the background now, so that its start overlaps reading and planning;
    an embedded one (local master) with `head_start` starts when the work calls for it. None
    when a location cannot be opened (reading it then says why)."""
    from statectl.operations.rescale import job

    conf = spark_conf or {}
    return job.prepare_engine(source, destination, master, conf, storage_options, head_start)


def write_rescale(
    plan: RescalePlan,
    destination: str,
    *,
    overwrite: bool = False,
    master: str = LOCAL_MASTER,
    spark_conf: Mapping[str, str] | None = None,
    head_start: bool = True,
    engine: Engine | None = None,
    progress: ProgressCallback | None = None,
    storage_options: dict[str, Any] | None = None,
) -> RescaleReport:
    """Write `plan` (from `plan_rescale`) to `destination` as a Spark job on `master`; with
    `head_start` an embedded Spark's first tasks run in this process while it starts. Storage
    only this process sees (`memory://`) is written here. `engine`: from `prepare_engine`. The
    report's `timings` are the seconds of each phase, `tasks_run` where the tasks ran."""
    from statectl.operations.rescale import job

    storage_options = _options(plan.source, destination, storage_options)
    return job.rescale(
        plan, destination, overwrite=overwrite, master=master, spark_conf=spark_conf,
        storage_options=storage_options, progress=progress, engine=engine, head_start=head_start,
    )  # fmt: skip


def rescale(
    source: Source,
    destination: str,
    parallelism: int | None = None,
    *,
    operators: Mapping[str, int] | None = None,
    max_parallelism: int | None = None,
    keyed_format: str | None = None,
    overwrite: bool = False,
    master: str = LOCAL_MASTER,
    spark_conf: Mapping[str, str] | None = None,
    head_start: bool = True,
    progress: ProgressCallback | None = None,
    storage_options: dict[str, Any] | None = None,
) -> RescaleReport:
    """A savepoint at a new parallelism (every operator, or per operator) and/or max
    parallelism, written to `destination` (`statectl rescale`): `plan_rescale`, then
    `write_rescale`."""
    planned = plan_rescale(
        source, parallelism, operators=operators, max_parallelism=max_parallelism,
        keyed_format=keyed_format, storage_options=storage_options,
    )  # fmt: skip
    return write_rescale(
        planned, destination, overwrite=overwrite, master=master, spark_conf=spark_conf,
        head_start=head_start, progress=progress, storage_options=storage_options,
    )  # fmt: skip


def convert(
    source: Source,
    destination: str,
    keyed_format: str = "canonical",
    *,
    overwrite: bool = False,
    master: str = LOCAL_MASTER,
    spark_conf: Mapping[str, str] | None = None,
    head_start: bool = True,
    progress: ProgressCallback | None = None,
    storage_options: dict[str, Any] | None = None,
) -> RescaleReport:
    """The same savepoint with its keyed state in `keyed_format` ("canonical" or "native"),
    at the same parallelism (`statectl convert`)."""
    return rescale(
        source, destination, keyed_format=keyed_format, overwrite=overwrite, master=master,
        spark_conf=spark_conf, head_start=head_start, progress=progress,
        storage_options=storage_options,
    )  # fmt: skip


# --- migrate ---------------------------------------------------------------------------------


def plan_migration(
    source: Source,
    renames: Sequence[tuple[str, str]] = (),
    drops: Sequence[str] = (),
    *,
    drop_states: Sequence[tuple[str, str]] = (),
    rename_states: Sequence[tuple[str, str, str]] = (),
    ttl: Sequence[tuple[str, str, int]] = (),
    no_ttl: Sequence[tuple[str, str]] = (),
    classpath: Sequence[str] = (),
    types: Mapping[str, str] | None = None,
    rename_fields: Mapping[str, Mapping[str, str]] | None = None,
    narrow: bool = False,
    on_error: str = "fail",
    storage_options: dict[str, Any] | None = None,
    engine: Engine | None = None,
    progress: ProgressCallback | None = None,
) -> MigrationPlan:
    """What `migrate` would do to each operator: `renames` (OLD uid or id → NEW uid) and
    `drops` (uid or id) resolved; unknown, twice-named or colliding operators raise. State
    edits name the operator (uid, id or name) and the keyed state: `drop_states` (operator,
    state), `rename_states` (operator, old, new), `ttl` (operator, state, time-to-live in ms:
    every value gets the last-access time of now) and `no_ttl` (operator, state).

    With `classpath` (the new version of the job's jars or class folders) every state whose
    type that version changed is rewritten into its layout (`statectl check` says which):
    `types` ({"OPERATOR/STATE": type} in `inspect`'s syntax) for types declared in code,
    `rename_fields` ({"OPERATOR/STATE": {old field: new}}) for renamed POJO fields; numbers
    widen, and narrow only with `narrow` (each value checked to fit). A value that cannot be
    converted raises a StatectlError naming the state, the key and the field, unless
    `on_error="null"` makes it null where the new field is nullable (the report counts them).
    Every value is converted once before that by `engine`'s tasks (from `prepare_engine`; in this
    process if none), which `write_migration` is then given."""
    from statectl.operations.migrate import plan_migration as plan_operators
    from statectl.operations.state_edits import DROP, RENAME, TTL_OFF, TTL_ON, StateEdit

    edits = [
        *(StateEdit(op, state, DROP) for op, state in drop_states),
        *(StateEdit(op, old, RENAME, new_name=new) for op, old, new in rename_states),
        *(StateEdit(op, state, TTL_ON, ttl_ms=ms) for op, state, ms in ttl),
        *(StateEdit(op, state, TTL_OFF) for op, state in no_ttl),
    ]
    sp = _opened(source, storage_options)
    # The files are copied, not parsed, unless states are edited.
    sp.ensure_consistent(copies_only=not edits and not classpath)
    if classpath:
        schema = _SchemaOptions(classpath, types, rename_fields, narrow, on_error)
        edits += _schema_edits(sp, edits, drops, schema, engine, progress)
    elif types or rename_fields:
        raise StatectlError("types and field renames need the new job's classpath")
    return plan_operators(sp.parsed, renames, drops, edits)


@dataclass(frozen=True)
class _SchemaOptions:
    """`plan_migration`'s options of a schema migration (`migrate --classpath`)."""

    classpath: Sequence[str]
    types: Mapping[str, str] | None
    rename_fields: Mapping[str, Mapping[str, str]] | None
    narrow: bool
    on_error: str


def _schema_edits(
    sp: Savepoint,
    edits: Sequence[Any],
    drops: Sequence[str],
    options: _SchemaOptions,
    engine: Engine | None,
    progress: ProgressCallback | None,
) -> list[Any]:
    """The edits rewriting every state the new job's types change, its values tried by
    `engine`'s tasks; the states other edits drop, rename or re-wrap, and those of dropped
    operators, are left to them."""
    from statectl.operations.schema_migration import plan_schema_migration
    from statectl.operations.upgrade import each_state
    from statectl.savepoint.classpath import ClassPath

    if options.on_error not in ("fail", "null"):
        raise StatectlError(f"on_error={options.on_error!r}: expected 'fail' or 'null'")
    parsed = sp.parsed
    untouched = [(parsed.find_operator(e.operator).operator_id_hex, e.state) for e in edits]
    for name in drops:
        op = parsed.find_operator(name)
        untouched += [(op.operator_id_hex, meta.name) for _, meta, _ in each_state(parsed, op)]
    with ClassPath(options.classpath) as classes:
        return list(
            plan_schema_migration(
                parsed, classes, options.types, options.rename_fields, narrow=options.narrow,
                nulls_on_error=options.on_error == "null", untouched=untouched, engine=engine,
                progress=progress,
            )
        )  # fmt: skip


def write_migration(
    plan: MigrationPlan,
    destination: str,
    *,
    overwrite: bool = False,
    progress: ProgressCallback | None = None,
    storage_options: dict[str, Any] | None = None,
    master: str = LOCAL_MASTER,
    spark_conf: Mapping[str, str] | None = None,
    head_start: bool = True,
    engine: Engine | None = None,
) -> MigrationReport:
    """Write `plan` (from `plan_migration`) to `destination`, every state file copied as bytes
    and referenced relatively; nothing is published unless every copy succeeded. Files and
    rewritten subtasks (TTL on or off) are tasks, run as rescale runs them: an embedded Spark
    of `master` (a cluster's with `spark://…`) whose first tasks, with `head_start`, run in
    this process while it starts, and which starts only for long work. `engine`: the one
    `plan_migration` was given (from `prepare_engine`), instead of one of these options."""
    from statectl.operations.migrate import migrate as run_migration

    storage_options = _options(plan.source, destination, storage_options)
    rewrites = plan.states is not None and plan.states.rewrites
    if engine is None and rewrites:  # values rewritten: as rescale runs
        engine = _write_engine(
            plan.source, destination, storage_options, master, spark_conf, head_start
        )
    return run_migration(
        plan, destination, overwrite=overwrite, storage_options=storage_options, progress=progress,
        engine=engine,
    )  # fmt: skip


def _write_engine(
    source: Any,
    destination: str,
    storage_options: dict[str, Any] | None,
    master: str,
    spark_conf: Mapping[str, str] | None,
    head_start: bool,
) -> Any:
    """The engine of a write from the parsed savepoint `source` to `destination`."""
    from statectl.execution.factory import choose_engine
    from statectl.savepoint.storage import locate

    locations = (
        source.directory,
        locate(destination, _options(source, destination, storage_options)),
    )
    return choose_engine(True, master, spark_conf, *locations, head_start=head_start)


def migrate(
    source: Source,
    destination: str,
    *,
    renames: Sequence[tuple[str, str]] = (),
    drops: Sequence[str] = (),
    overwrite: bool = False,
    progress: ProgressCallback | None = None,
    storage_options: dict[str, Any] | None = None,
    master: str = LOCAL_MASTER,
    spark_conf: Mapping[str, str] | None = None,
    head_start: bool = True,
    classpath: Sequence[str] = (),
    types: Mapping[str, str] | None = None,
    rename_fields: Mapping[str, Mapping[str, str]] | None = None,
    narrow: bool = False,
    on_error: str = "fail",
) -> MigrationReport:
    """Operators renamed (uid OLD → NEW) or dropped, every state file carried over as bytes
    (`statectl migrate`): `plan_migration`, then `write_migration`. With `classpath` (the new
    job's jars), every state whose type it changed is rewritten into its layout (`types`,
    `rename_fields`, `narrow`, `on_error` as `plan_migration` takes them), its values tried
    and written by the same engine's tasks."""
    engine = None
    if classpath:
        source = _opened(source, storage_options)
        options = _options(source, destination, storage_options)
        engine = _write_engine(source.parsed, destination, options, master, spark_conf, head_start)
    migration = plan_migration(
        source, renames, drops, classpath=classpath, types=types, rename_fields=rename_fields,
        narrow=narrow, on_error=on_error, storage_options=storage_options, engine=engine,
        progress=progress,
    )  # fmt: skip
    return write_migration(
        migration, destination, overwrite=overwrite, progress=progress,
        storage_options=storage_options, master=master, spark_conf=spark_conf,
        head_start=head_start, engine=engine,
    )  # fmt: skip


# --- transform -------------------------------------------------------------------------------


def transform(
    source: Source,
    destination: str,
    operator: str,
    state: str,
    *,
    sql: str | None = None,
    python: str | Callable[[Any], Any] | None = None,
    master: str = LOCAL_MASTER,
    spark_conf: Mapping[str, str] | None = None,
    overwrite: bool = False,
    progress: ProgressCallback | None = None,
    storage_options: dict[str, Any] | None = None,
    classpath: Sequence[str] = (),
) -> MigrationReport:
    """Keyed state `state` of `operator` edited as its table (`State.to_arrow()`'s columns)
    and written back (`statectl transform`): by Spark SQL over the view `state` (`sql`, in the
    active SparkSession or one of `master` and `spark_conf`; the table is read here and handed
    to Spark), or by
    a Python function over its Arrow record batches (`python`: a callable or
    `"module:function"` returning a batch, a table or None). The result's rows are the
    state's entries: rows left out are removed, new keys land in their key group. The rest of
    the savepoint is carried over as `migrate` carries it. `classpath`: the job's jars or class
    folders; a null in a POJO field its class declares primitive is refused (Flink cannot
    restore it), one in a field of a class not read is a warning in the report."""
    if (sql is None) == (python is None):
        raise StatectlError("give exactly one of sql and python")
    from statectl.operations import transform as edits
    from statectl.operations.migrate import migrate, plan_migration
    from statectl.progress import begun
    from statectl.savepoint.classpath import ClassPath

    sp = _opened(source, storage_options)
    sp.ensure_consistent()
    options = _options(sp, destination, storage_options)
    # SQL needs Spark; a function's batches take a head start in this process.
    engine = _write_engine(sp.parsed, destination, options, master, spark_conf, sql is None)
    with ClassPath(classpath) as classes:
        job_classes = classes if classes.entries else None
        if sql is not None:
            if progress is not None:  # seconds of a JVM's start, before any work is counted
                progress(begun("starting Spark"))
            edit = _sql_edit(sp, operator, state, sql, engine, master, spark_conf, job_classes)
        else:
            function = edits.load_function(python) if isinstance(python, str) else python
            assert function is not None
            if engine.name != "local":  # its tasks may run on Spark
                from statectl.execution.spark import ship_by_value

                ship_by_value(function)
            edit = edits.function_edit(sp.parsed, operator, state, function, job_classes)
        plan = plan_migration(sp.parsed, state_edits=[edit])
        return migrate(
            plan, destination, overwrite=overwrite, storage_options=options, progress=progress,
            engine=engine,
        )  # fmt: skip


def _sql_edit(
    sp: Savepoint,
    operator: str,
    state: str,
    sql: str,
    engine: Any,
    master: str,
    spark_conf: Mapping[str, str] | None,
    classpath: Any,
) -> Any:
    """The SQL edit, run by Spark's tasks; in this process where Spark's could not read the
    savepoint (`memory://`), or for operator state (small: its table is queried whole)."""
    from statectl.execution.spark import spark_session, sql_over_table
    from statectl.operations import transform as edits

    if engine.name != "local":
        spark = spark_session(master, spark_conf)
        edit = edits.sql_edit(sp.parsed, operator, state, sql, SQL_VIEW, spark, classpath)
        if edit is not None:
            return edit
    target = sp.operator(operator).state(state)
    table = sql_over_table(target.to_arrow(), sql, SQL_VIEW, master, spark_conf)
    return edits.replacement(sp.parsed, operator, state, table, classpath)


# --- source positions --------------------------------------------------------------------------


def set_positions(
    source: Source,
    destination: str,
    *,
    kafka_offsets: Sequence[tuple[str, str | None, int | None, int | str]] = (),
    file_positions: Sequence[tuple[str, str, tuple[int, int] | None]] = (),
    renames: Sequence[tuple[str, str]] = (),
    drops: Sequence[str] = (),
    overwrite: bool = False,
    progress: ProgressCallback | None = None,
    storage_options: dict[str, Any] | None = None,
) -> PositionsEditReport:
    """Sources moved (`statectl migrate --kafka-offset/--file-position`), with the operator
    renames and drops of `migrate` in the same run. `kafka_offsets`: (operator, topic or None
    for all, partition or None for all, the next offset to read or "earliest" | "latest" |
    "committed"), for KafkaSource and the legacy FlinkKafkaConsumer. `file_positions`:
    (operator, split id or path, (offset, records to skip) or None for the split's start)."""
    from statectl.operations.migrate import plan_migration as plan_operators
    from statectl.operations.set_positions import (
        FilePositionEdit,
        KafkaOffsetEdit,
        plan_positions,
        write_positions,
    )

    sp = _opened(source, storage_options)
    sp.ensure_consistent(copies_only=True)
    edits: list[KafkaOffsetEdit | FilePositionEdit] = [KafkaOffsetEdit(*k) for k in kafka_offsets]
    edits += [FilePositionEdit(*f) for f in file_positions]
    migration = plan_operators(sp.parsed, renames, drops) if renames or drops else None
    plan = plan_positions(sp.parsed, edits, migration=migration)
    options = _options(sp, destination, storage_options)
    return write_positions(
        plan, destination, overwrite=overwrite, storage_options=options, progress=progress
    )


# --- upgrade -----------------------------------------------------------------------------------


def upgrade(
    source: Source,
    destination: str,
    *,
    to: str = "2.3",
    drop_unconvertible: bool = False,
    classpath: Sequence[str] = (),
    overwrite: bool = False,
    progress: ProgressCallback | None = None,
    storage_options: dict[str, Any] | None = None,
    master: str = LOCAL_MASTER,
    spark_conf: Mapping[str, str] | None = None,
    head_start: bool = True,
) -> UpgradeReport:
    """A Flink 1.x savepoint rewritten so that Flink 2.x (`to`) restores it (`statectl
    upgrade -o`): every state `Savepoint.check_upgrade` flags converted (Kryo 2 values as Kryo
    5, POJO List, Map and Set fields as 2.x's collection serializers write them, snapshots and
    `_metadata` as 2.x writes them). `classpath`: the job's jars or class folders, read for
    user classes Kryo wrote field by field. A state that cannot be converted raises
    StatectlError naming it, and nothing is written, unless `drop_unconvertible` drops exactly
    those. Values are read, checked and converted subtask file by subtask file, as
    `write_migration` runs its tasks (`master`, `spark_conf`, `head_start`)."""
    from statectl.operations.upgrade import upgrade as upgrade_savepoint
    from statectl.savepoint.classpath import ClassPath

    sp = _opened(source, storage_options)
    sp.ensure_consistent()
    storage_options = _options(sp, destination, storage_options)
    engine = _write_engine(sp.parsed, destination, storage_options, master, spark_conf, head_start)
    with ClassPath(classpath) as classes:
        return upgrade_savepoint(
            sp.parsed, destination, to, drop_unconvertible=drop_unconvertible,
            classpath=classes, overwrite=overwrite, storage_options=storage_options,
            engine=engine, progress=progress,
        )  # fmt: skip


def stale_staging(destination: str, storage_options: dict[str, Any] | None = None) -> list[str]:
    """Staging folders beside `destination` that a write leaves alone: their owner may still
    be writing, or was killed on another host (abandoned ones are removed by the next write)."""
    from statectl.savepoint.writer import stale_staging as staging_folders

    return staging_folders(destination, storage_options)
