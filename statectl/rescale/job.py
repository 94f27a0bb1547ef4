"""The rescale driver: plan, run the Spark job (or, for `memory://`, the same tasks in this
process), assemble `_metadata`, publish.

The output is self-contained: rescaled operators get new files, operators carried over get
copies of theirs, and every file is referenced by a relative handle (code 6), so the new
savepoint can be moved anywhere. The metadata version and tail are the input's.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from statectl.errors import UnsupportedError
from statectl.formats.handles import (
    ByteStreamHandle,
    IncrementalKeyedHandle,
    KeyedHandle,
    KeyGroupsHandle,
    LocalFile,
    OperatorStateHandle,
    RelativeFileHandle,
    StreamHandle,
)
from statectl.formats.metadata import CheckpointMetadata, OperatorState, SubtaskState
from statectl.progress import Progress, ProgressCallback, finished
from statectl.rescale import in_process
from statectl.rescale.execute import (
    CopyResult,
    CopyTask,
    Result,
    SubtaskResult,
    Task,
    tasks_work,
)
from statectl.rescale.plan import RescalePlan, has_native_keyed_state
from statectl.savepoint import native, writer
from statectl.savepoint.model import Savepoint, describe_operator


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


@dataclass(frozen=True)
class RescaleReport:
    destination: str
    operators: tuple[OperatorReport, ...]
    timings: tuple[tuple[str, float], ...] = ()  # (phase, seconds) of the driver, for benchmarks

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
    if any(p.rescaled and has_native_keyed_state(p.operator) for p in plan.operators):
        # Native keyed state was converted: the output is a CANONICAL savepoint.
        properties = native.canonical_savepoint_properties(metadata.properties)
        metadata = dataclasses.replace(metadata, properties=properties)
    return dataclasses.replace(metadata, operators=tuple(operators))


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
    keyed = operator = None
    if result.keyed is not None:
        file = RelativeFileHandle(result.keyed.name, result.keyed.size)
        keyed = KeyGroupsHandle(7, result.keyed.start_key_group, result.keyed.offsets, file)
    if result.operator is not None:
        file = RelativeFileHandle(result.operator.name, result.operator.size)
        operator = OperatorStateHandle(4, result.operator.states, file)
    return SubtaskState(result.index, managed_operator_state=operator, managed_keyed_state=keyed)


def report(plan: RescalePlan, results: list[Result], destination: str) -> RescaleReport:
    sizes: dict[str, list[int]] = {}
    for result in results:
        if isinstance(result, SubtaskResult):
            files = [f.size for f in (result.keyed, result.operator) if f is not None]
            sizes.setdefault(result.operator_id, []).extend(files)
        elif isinstance(result, CopyResult):
            sizes.setdefault(result.name.split("-", 1)[0], []).append(result.size)
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
            )
            for p in plan.operators
        ),
    )


def rescale(
    plan: RescalePlan,
    destination: str,
    *,
    overwrite: bool = False,
    master: str = "local[*]",
    spark_conf: Mapping[str, str] | None = None,
    storage_options: dict[str, Any] | None = None,
    progress: ProgressCallback | None = None,
) -> RescaleReport:
    """Execute `plan` into `destination`; nothing is published unless everything succeeded.

    The plan runs as a Spark job, unless the source or destination is storage that only this
    process sees (`memory://`): then it runs here (`in_process`), whatever `master` says.
    """
    writer.ensure_not_inside(plan.source.directory, destination, storage_options)
    tasks, carried = build_tasks(plan)
    staged = writer.stage(destination, overwrite, storage_options)
    clock = [time.monotonic()]
    try:
        in_this_process = (
            plan.source.directory.is_process_local or staged.destination.is_process_local
        )
        runner = _runner(in_this_process, master, spark_conf)
        clock.append(time.monotonic())
        rekeyed = [p.rekey for p in plan.operators if p.rekey is not None]
        rekey_files = sum(r.parallelism for r in rekeyed)
        rekey_bytes = sum(source.size for r in rekeyed for source in r.sources)
        task_progress = progress
        if progress is not None and rekeyed:  # re-hashed files are only done after the shuffle

            def task_progress(done: Progress) -> None:
                progress(done.plus_pending(rekey_files, rekey_bytes))

        results = runner.run_tasks(tasks, staged.staging_url, storage_options, task_progress)
        if rekeyed:
            results += runner.run_rekey(rekeyed, staged.staging_url, storage_options)
            if progress is not None:
                files, size = tasks_work(tasks)
                progress(finished(files + rekey_files, size + rekey_bytes))
        clock.append(time.monotonic())
        writer.publish(staged, assemble(plan, carried, results))
        clock.append(time.monotonic())
    except BaseException:
        writer.discard(staged)
        raise
    phases = ("spark_start", "spark_job", "publish")
    timings = tuple(
        (p, round(b - a, 3)) for p, a, b in zip(phases, clock[:-1], clock[1:], strict=True)
    )
    return dataclasses.replace(report(plan, results, staged.destination.url), timings=timings)


@dataclass(frozen=True)
class _Runner:
    """Where the plan's tasks run: `spark_job`'s functions, or `in_process`'s with the same
    signatures (without the Spark context) for storage Spark's workers cannot see."""

    run_tasks: Callable[..., list[Result]]  # (tasks, output_url, storage_options, progress)
    run_rekey: Callable[..., list[Result]]  # (operators, output_url, storage_options)


def _runner(in_this_process: bool, master: str, spark_conf: Mapping[str, str] | None) -> _Runner:
    if in_this_process:
        return _Runner(in_process.run_tasks, in_process.run_rekey)
    from statectl.rescale import spark_job  # lazy: pyspark is heavy

    context = spark_job.spark_context(master, spark_conf)
    return _Runner(
        functools.partial(spark_job.run_tasks, context),
        functools.partial(spark_job.run_rekey, context),
    )


# --- carrying operators over unchanged ---------------------------------------------------


class CopyNames:
    """Names for copied files: one copy per distinct source stream (a file, or one
    file-merging segment of a file)."""

    def __init__(self, source: Savepoint) -> None:
        self.source = source
        self.tasks: list[CopyTask] = []
        self._by_source: dict[tuple[str, int, int], RelativeFileHandle] = {}

    def relocate(self, handle: StreamHandle | None, prefix: str) -> StreamHandle | None:
        if handle is None or isinstance(handle, ByteStreamHandle):
            return handle  # inline state travels inside _metadata
        if isinstance(handle, KeyGroupsHandle):
            return dataclasses.replace(handle, delegate=self.relocate(handle.delegate, prefix))
        stream = self.source.stream(handle)
        key = (stream.description, stream.start, stream.size)
        if key not in self._by_source:
            name = f"{prefix}-{len(self.tasks):05d}"
            self.tasks.append(CopyTask(stream, name))
            self._by_source[key] = RelativeFileHandle(name, stream.size)
        return self._by_source[key]


def carry_over(op: OperatorState, names: CopyNames) -> OperatorState:
    if op.subtasks is None:
        return op
    prefix = op.operator_id_hex
    subtasks = tuple(
        _relocate_subtask(s, names, prefix, describe_operator(op)) for s in op.subtasks
    )
    return dataclasses.replace(op, subtasks=subtasks)


def _relocate_subtask(
    subtask: SubtaskState, names: CopyNames, prefix: str, where: str
) -> SubtaskState:
    if subtask.finished:
        return subtask
    if subtask.input_channel_states or subtask.output_channel_states:
        raise UnsupportedError(
            f"operator {where} has unaligned channel state; take a savepoint instead"
        )
    return dataclasses.replace(
        subtask,
        managed_operator_state=_relocate_operator_handle(
            subtask.managed_operator_state, names, prefix
        ),
        raw_operator_state=_relocate_operator_handle(subtask.raw_operator_state, names, prefix),
        managed_keyed_state=_relocate_keyed(subtask.managed_keyed_state, names, prefix, where),
        raw_keyed_state=_relocate_keyed(subtask.raw_keyed_state, names, prefix, where),
    )


def _relocate_operator_handle(
    handle: OperatorStateHandle | None, names: CopyNames, prefix: str
) -> OperatorStateHandle | None:
    if handle is None:
        return None
    # File-merging handles (code 17) become plain ones (code 4) over a copied file.
    return OperatorStateHandle(4, handle.states, names.relocate(handle.delegate, prefix))


def _relocate_keyed(
    handle: KeyedHandle | None, names: CopyNames, prefix: str, where: str
) -> KeyedHandle | None:
    if handle is None:
        return None
    if isinstance(handle, KeyGroupsHandle):
        return dataclasses.replace(handle, delegate=names.relocate(handle.delegate, prefix))
    if isinstance(handle, IncrementalKeyedHandle):
        return dataclasses.replace(
            handle,
            meta=names.relocate(handle.meta, prefix),
            shared=tuple(
                LocalFile(f.local_path, names.relocate(f.handle, prefix)) for f in handle.shared
            ),
            private=tuple(
                LocalFile(f.local_path, names.relocate(f.handle, prefix)) for f in handle.private
            ),
        )
    raise UnsupportedError(
        f"operator {where} has changelog state, which statectl cannot read; "
        "take a CANONICAL savepoint instead"
    )
