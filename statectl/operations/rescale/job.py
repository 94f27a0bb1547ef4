"""The rescale driver: plan, run the tasks on an engine (Spark, or this process for
`memory://`), assemble `_metadata`, publish.

An embedded Spark (`local[...]`) gets a head start: the driver runs the tasks itself, starts
Spark only once the work left would outlast Spark's start, and Spark takes what is not yet begun
when it is up (`execution.head_start`); tasks that move RocksDB rows run in statectl's own
worker processes (no Spark, no Java) unless they are few (`head_start.GIL_BOUND_DRIVER_BYTES`).

The output is self-contained: rescaled operators get new files, operators carried over get
copies of theirs, and every file is referenced by a relative handle (code 6), so the new
savepoint can be moved anywhere. The metadata version and tail are the input's.
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
import itertools
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from statectl.errors import StatectlError
from statectl.execution.engine import Engine, total_work
from statectl.execution.factory import choose_engine
from statectl.execution.head_start import HeadStartEngine
from statectl.formats.handles import IncrementalKeyedHandle, KeyGroupsHandle, stream_size
from statectl.formats.metadata import (
    CheckpointMetadata,
    OperatorState,
    SubtaskState,
    snapshot_kind,
)
from statectl.operations.publish import publish
from statectl.operations.rescale.execute import (
    Result,
    SubtaskResult,
    Task,
    moves_rows,
    run_task,
    task_work,
    write_rekeyed,
)
from statectl.operations.rescale.load import CanonicalFile, SubtaskLoads, block_loads
from statectl.operations.rescale.plan import OperatorPlan, RescalePlan, has_native_keyed_state
from statectl.operations.rescale.rekey import (
    HeapSource,
    NativeSource,
    RekeyOperator,
    RekeySource,
)
from statectl.progress import Progress, ProgressCallback, finished
from statectl.savepoint import native, writer
from statectl.savepoint.keyed import keyed_handle_bytes, operator_handle_bytes
from statectl.savepoint.native_files import FileCounts
from statectl.savepoint.relocate import CopyNames, carry_over
from statectl.savepoint.storage import locate


@dataclass(frozen=True)
class OperatorReport:
    id: str
    uid: str | None
    old_parallelism: int
    new_parallelism: int
    rescaled: bool
    files: int
    bytes: int
    old_max_parallelism: int
    new_max_parallelism: int
    old_keyed_format: str | None = None  # "native", "canonical" or "heap"; None: no keyed state
    new_keyed_format: str | None = None
    keyed_bytes: tuple[int, ...] = ()  # per new subtask, when keyed state was written
    # Canonical keyed state written: its key-group blocks' bytes per new subtask, measured as
    # `rescale --dry-run` predicts them (`load.block_loads`).
    keyed_loads: SubtaskLoads | None = None
    # RocksDB instances assembled from the old instances' SST files: what became of the files
    sst_files: FileCounts | None = None

    @property
    def keyed_skew(self) -> float | None:
        """max/mean of the keyed bytes written per new subtask (None: none written): of the
        key-group blocks written (as `--dry-run` and `plan` say), else of the files (RocksDB
        instances)."""
        if self.keyed_loads is not None:
            return self.keyed_loads.max_over_mean
        total = sum(self.keyed_bytes)
        return max(self.keyed_bytes) * len(self.keyed_bytes) / total if total else None


@dataclass(frozen=True)
class RescaleReport:
    destination: str
    operators: tuple[OperatorReport, ...]
    timings: tuple[tuple[str, float], ...] = ()  # (phase, seconds) of the driver, for benchmarks
    tasks_run: tuple[tuple[str, int], ...] = ()  # ("driver" | "processes" | "spark", tasks)
    format: str | None = None  # CANONICAL or NATIVE (`output_format`)

    @property
    def bytes(self) -> int:
        return sum(op.bytes for op in self.operators)


def build_tasks(plan: RescalePlan) -> tuple[list[Task], dict[bytes, OperatorState]]:
    """Spark tasks for the whole plan, and the carried-over operators with renamed handles."""
    tasks: list[Task] = []
    carried: dict[bytes, OperatorState] = {}
    names = CopyNames(plan.source)
    for op_plan in plan.operators:
        if op_plan.targets is not None:
            tasks.extend(op_plan.targets)
        else:
            carried[op_plan.operator.operator_id] = carry_over(op_plan.operator, names)
    tasks.extend(names.tasks)
    return tasks, carried


def assemble(
    plan: RescalePlan, carried: Mapping[bytes, OperatorState], results: list[Result]
) -> CheckpointMetadata:
    written = _by_subtask(results)
    operators = []
    for op_plan in plan.operators:
        op = op_plan.operator
        if op_plan.targets is None:
            operator = carried.get(op.operator_id, op)
            if op_plan.new_max_parallelism is not None:  # stateless: no subtask holds anything
                kept = tuple(
                    s for s in operator.subtasks or () if s.index < op_plan.new_parallelism
                )
                operator = dataclasses.replace(
                    operator,
                    parallelism=op_plan.new_parallelism,
                    max_parallelism=op_plan.max_parallelism,
                    subtasks=kept if operator.subtasks is not None else None,
                )
            operators.append(operator)
        else:
            mine = sorted(written[op.operator_id_hex].values(), key=lambda r: r.index)
            operators.append(
                dataclasses.replace(
                    op,
                    parallelism=op_plan.new_parallelism,
                    max_parallelism=op_plan.max_parallelism,
                    subtasks=tuple(_subtask_state(r) for r in mine),
                )
            )
    metadata = plan.source.metadata
    properties = _properties(plan, metadata.properties)
    return dataclasses.replace(metadata, operators=tuple(operators), properties=properties)


def _properties(plan: RescalePlan, properties: bytes) -> bytes:
    """The savepoint's format type says what its keyed state now is: CANONICAL once native
    state (RocksDB instances, or the hashmap backend's own snapshot format) was written as
    blocks, NATIVE once all of it is RocksDB instances. A checkpoint's properties are kept."""
    written = [(p, p.writes_native) for p in plan.operators if p.rescaled and p.has_keyed_state]
    native_in = [has_native_keyed_state(p.operator) or p.reads_heap for p, _ in written]
    if any(not out and was for (_, out), was in zip(written, native_in, strict=True)):
        return native.canonical_savepoint_properties(properties)
    if written and all(out for _, out in written):
        return native.native_savepoint_properties(properties)
    return properties


def output_format(plan: RescalePlan, properties: bytes) -> str | None:
    """The output's format: the format type its `_metadata` names (a savepoint's); a checkpoint
    names none: then the format its rescaled keyed state was written in, if one (else None)."""
    kind = snapshot_kind(properties)
    if kind is not None and kind.savepoint:
        return kind.format
    written = {
        "NATIVE" if p.writes_native else "CANONICAL"
        for p in plan.operators
        if p.rescaled and p.has_keyed_state
    }
    return written.pop() if len(written) == 1 else None


def _by_subtask(results: list[Result]) -> dict[str, dict[int, SubtaskResult]]:
    """Each new subtask's files; a re-hashed keyed file joins the subtask's operator-state file."""
    by_operator: dict[str, dict[int, SubtaskResult]] = {}
    for result in results:
        if not isinstance(result, SubtaskResult):
            continue
        subtasks = by_operator.setdefault(result.operator_id, {})
        known = subtasks.get(result.index)
        if known is not None:
            result = dataclasses.replace(
                known,
                keyed=known.keyed or result.keyed,
                operator=known.operator or result.operator,
            )
        subtasks[result.index] = result
    return by_operator


def _subtask_state(result: SubtaskResult) -> SubtaskState:
    return SubtaskState(
        result.index, managed_operator_state=result.operator, managed_keyed_state=result.keyed
    )


def report(plan: RescalePlan, results: list[Result], destination: str) -> RescaleReport:
    sizes: dict[str, list[int]] = {}
    keyed_sizes: dict[str, dict[int, int]] = {}
    blocks: dict[str, list[CanonicalFile | None]] = {}  # None: keyed state not in blocks
    sst_files: dict[str, FileCounts] = {}
    for result in results:
        if isinstance(result, SubtaskResult) and result.sst_files is not None:
            counted = sst_files.get(result.operator_id, FileCounts())
            sst_files[result.operator_id] = counted + result.sst_files
        if isinstance(result, SubtaskResult):
            keyed, operator = result.keyed, result.operator
            if keyed:
                written = keyed_sizes.setdefault(result.operator_id, {})
                written[result.index] = keyed_handle_bytes(keyed)
                blocks.setdefault(result.operator_id, []).append(_canonical_file(keyed))
            files = [keyed_handle_bytes(keyed)] if keyed else []
            files += [operator_handle_bytes(operator)] if operator else []
            sizes.setdefault(result.operator_id, []).extend(files)
        else:  # a copy, named after its operator
            sizes.setdefault(result.relative_path.split("-", 1)[0], []).append(result.size)
    return RescaleReport(
        destination,
        tuple(
            OperatorReport(
                p.operator.operator_id_hex,
                p.operator.uid,
                p.operator.parallelism,
                p.new_parallelism,
                p.rescaled,
                len(sizes.get(p.operator.operator_id_hex, ())),
                sum(sizes.get(p.operator.operator_id_hex, ())),
                p.operator.max_parallelism,
                p.max_parallelism,
                *_keyed_formats(p),
                _per_subtask(keyed_sizes.get(p.operator.operator_id_hex), p.new_parallelism),
                _block_loads(blocks.get(p.operator.operator_id_hex), p),
                sst_files.get(p.operator.operator_id_hex),
            )
            for p in plan.operators
        ),
    )


def _canonical_file(handle: KeyGroupsHandle | IncrementalKeyedHandle) -> CanonicalFile | None:
    if not isinstance(handle, KeyGroupsHandle) or handle.delegate is None:
        return None
    size = stream_size(handle.delegate)
    return CanonicalFile(handle.start_key_group, handle.offsets, size, "written keyed state")


def _block_loads(
    files: list[CanonicalFile | None] | None, plan: OperatorPlan
) -> SubtaskLoads | None:
    if not files or any(f is None for f in files):
        return None
    return block_loads((f for f in files if f), plan.max_parallelism, plan.new_parallelism)


def _per_subtask(sizes: dict[int, int] | None, parallelism: int) -> tuple[int, ...]:
    return tuple(sizes.get(i, 0) for i in range(parallelism)) if sizes else ()


def prepare_engine(
    source: str,
    destination: str,
    master: str = "local[*]",
    spark_conf: Mapping[str, str] | None = None,
    storage_options: dict[str, Any] | None = None,
    head_start: bool = True,
) -> Engine | None:
    """The engine a rescale from `source` to `destination` runs on. A Spark cluster's is
    already starting in the background, so that its start overlaps reading `_metadata` and
    planning; an embedded one with `head_start` starts when the work calls for it
    (`HeadStartEngine`). None for locations that cannot be opened (the reader reports them, as
    without this)."""
    try:
        locations = (locate(source, storage_options), locate(destination, storage_options))
    except StatectlError:
        return None
    engine = choose_engine(True, master, spark_conf, *locations, head_start=head_start)
    if not isinstance(engine, HeadStartEngine):
        engine.start_in_background()
    return engine


def _keyed_formats(plan: OperatorPlan) -> tuple[str | None, str | None]:
    """The operator's keyed format before and after (None, None: no keyed state written)."""
    if not plan.rescaled or not plan.has_keyed_state:
        return None, None
    if has_native_keyed_state(plan.operator):
        old = "native"
    else:
        old = "heap" if plan.reads_heap else "canonical"
    return old, "native" if plan.writes_native else "canonical"


def rescale(
    plan: RescalePlan,
    destination: str,
    *,
    overwrite: bool = False,
    master: str = "local[*]",
    spark_conf: Mapping[str, str] | None = None,
    storage_options: dict[str, Any] | None = None,
    progress: ProgressCallback | None = None,
    engine: Engine | None = None,
    head_start: bool = True,
) -> RescaleReport:
    """Execute `plan` into `destination`; nothing is published unless everything succeeded.

    The plan runs as a Spark job (an embedded one with `head_start` in this process), unless
    the source or destination is storage that only this process sees (`memory://`): then it
    runs here, whatever `master` says. `engine`, from `prepare_engine`, is one already starting.
    """
    writer.ensure_not_inside(plan.source.directory, destination, storage_options)
    tasks, carried = build_tasks(plan)
    staged = writer.stage(destination, overwrite, storage_options)
    clock = [time.monotonic()]
    try:
        if engine is None:
            engine = choose_engine(
                True,
                master,
                spark_conf,
                plan.source.directory,
                staged.destination,
                head_start=head_start,
            )
        engine.start()  # here, so that the timings show its cost (what is left of it) apart
        clock.append(time.monotonic())
        results = _run(engine, plan, tasks, staged.staging_url, storage_options, progress)
        clock.append(time.monotonic())
        metadata = assemble(plan, carried, results)
        rewritten = {o.operator.operator_id for o in plan.operators if o.targets is not None}
        publish(staged, metadata, rewritten)
        clock.append(time.monotonic())
    except BaseException:
        writer.discard(staged)
        raise
    phases = ("spark_start", "tasks", "publish")
    timings = tuple(
        (p, round(b - a, 3)) for p, a, b in zip(phases, clock[:-1], clock[1:], strict=True)
    )
    done = report(plan, results, staged.destination.url)
    return dataclasses.replace(
        done,
        timings=timings,
        tasks_run=tuple(engine.tasks_run.items()),
        format=output_format(plan, metadata.properties),
    )


def _run(
    engine: Engine,
    plan: RescalePlan,
    tasks: list[Task],
    output_url: str,
    storage_options: dict[str, Any] | None,
    progress: ProgressCallback | None,
) -> list[Result]:
    """The copy and write tasks, then the re-hash shuffle of operators whose max parallelism
    changes; re-hashed files count in the progress only once the shuffle has written them."""
    rekeyed = [p.rekey for p in plan.operators if p.rekey is not None]
    rekey_files = sum(r.parallelism for r in rekeyed)
    rekey_bytes = sum(source.size for r in rekeyed for source in r.sources)
    task_progress = progress
    if progress is not None and rekeyed:

        def task_progress(done: Progress) -> None:
            progress(done.plus_pending(rekey_files, rekey_bytes))

    write = functools.partial(run_task, output_url=output_url, storage_options=storage_options)
    results = engine.run(tasks, write, task_work, task_progress, gil_bound=moves_rows)
    if rekeyed:
        results += rekey(engine, rekeyed, output_url, storage_options)
        if progress is not None:
            files, size = total_work(tasks, task_work)
            progress(finished(files + rekey_files, size + rekey_bytes))
    return results


def rekey(
    engine: Engine,
    operators: Sequence[RekeyOperator],
    output_url: str,
    storage_options: dict[str, Any] | None,
) -> list[Result]:
    """Re-hash every entry of `operators` and write one keyed file per new subtask.

    The engine's shuffle: each source (an old file slice or RocksDB instance) emits chunks of
    entries keyed by (new subtask, key group, source, batch); partitions are the new subtasks
    of all operators, and each is streamed, sorted, into its file. The key orders chunks of a
    key group by source and batch, so both engines write the same bytes.
    """
    from statectl.operations.rescale.rekey_batches import shuffle_chunks  # numpy: re-hash only

    bases = list(itertools.accumulate((op.parallelism for op in operators), initial=0))
    sources = [
        (bases[n], number, op, source)
        for n, op in enumerate(operators)
        for number, source in enumerate(op.sources)
    ]

    def records(item: tuple[int, int, RekeyOperator, RekeySource]) -> Iterator[Any]:
        base, number, operator, source = item
        old_max = operator.regrouper.old_max_parallelism
        for (subtask, key_group, batch), chunk in shuffle_chunks(operator, source, old_max):
            yield (base + subtask, key_group, number, batch), chunk

    def write(partition: int, records: Iterator[Any]) -> Result:
        n = bisect.bisect_right(bases, partition) - 1
        chunks = ((key_group, chunk) for (_, key_group, _, _), chunk in records)
        return write_rekeyed(
            operators[n], partition - bases[n], chunks, output_url, storage_options
        )

    def source_work(item: tuple[int, int, RekeyOperator, RekeySource]) -> tuple[int, int]:
        return 0, item[3].size

    def reads_rows(item: tuple[int, int, RekeyOperator, RekeySource]) -> bool:
        # RocksDB rows, heap-format entries one by one: GIL-bound
        return isinstance(item[3], NativeSource | HeapSource)

    return engine.sort_partitions(
        sources, records, bases[-1], write, work=source_work, gil_bound=reads_rows
    )
