"""Running plan tasks in the driver process, for storage that Spark's workers cannot see.

An fsspec `memory://` filesystem lives in one Python process: Spark's Python workers are other
processes and would find it empty. Such savepoints are in memory already, so the tasks run here
one after the other, and re-hashed entries are sorted in memory instead of by a shuffle.
"""

from __future__ import annotations

import operator as op
from collections.abc import Sequence
from typing import Any

from statectl.progress import Progress, ProgressCallback
from statectl.rescale import rekey
from statectl.rescale.execute import (
    Result,
    Task,
    run_task,
    task_bytes,
    task_files,
    tasks_work,
    write_rekeyed,
)
from statectl.rescale.rekey import RekeyOperator


def run_tasks(
    tasks: Sequence[Task],
    output_url: str,
    storage_options: dict[str, Any] | None,
    progress: ProgressCallback | None = None,
) -> list[Result]:
    """Every task once, in order; the same results as `spark_job.run_tasks`."""
    results = []
    total_files, total_bytes = tasks_work(tasks)
    files, size = 0, 0
    for task in tasks:
        results.append(run_task(task, output_url, storage_options))
        files, size = files + task_files(task), size + task_bytes(task)
        if progress is not None:
            progress(Progress(files, total_files, size, total_bytes))
    return results


def run_rekey(
    operators: Sequence[RekeyOperator], output_url: str, storage_options: dict[str, Any] | None
) -> list[Result]:
    """The results of `spark_job.run_rekey`: one keyed file per new subtask of each operator."""
    results: list[Result] = []
    for operator in operators:
        old_max = operator.regrouper.old_max_parallelism
        records = sorted(
            (
                record
                for source in operator.sources
                for record in rekey.shuffle_records(operator, source, old_max)
            ),
            key=op.itemgetter(0),  # (new subtask, key group, state id, key), as the shuffle sorts
        )
        by_subtask: list[list[rekey.RekeyedEntry]] = [[] for _ in range(operator.parallelism)]
        for (subtask, key_group, state_id, key), value in records:
            by_subtask[subtask].append((key_group, state_id, key, value))
        results += [
            write_rekeyed(operator, index, entries, output_url, storage_options)
            for index, entries in enumerate(by_subtask)
        ]
    return results
