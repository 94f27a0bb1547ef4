"""A replaced keyed state written the way rescale writes: by the tasks, through a shuffle.

The state's new rows are made where they are (`state_edits.RowFeed`: tasks over the state's
splits, or a Spark DataFrame's own tasks) and leave them as chunks of encoded entries
(`entry_chunks`), one per batch and key group. The engine's shuffle routes each chunk to the
subtask owning its key group and sorts them by key group; the task of each subtask streams
them into its file beside the states carried over (`keyed_rewrite.write_subtask`), holding one
key group's rows at a time. The driver gets back only each file's handle and counts.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import json
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, BinaryIO

from statectl.errors import StatectlError
from statectl.execution.engine import NOTES_KEY_GROUP, Engine
from statectl.formats.entry_scan import BlockRuns, unpack_spans
from statectl.formats.handles import KeyedHandle
from statectl.operations.state_edits import RowFeed
from statectl.savepoint.entries import KeyedSource
from statectl.savepoint.entry_chunks import ShuffledRows, merged_runs, read_run
from statectl.savepoint.keyed_rewrite import SubtaskRewrite, key_groups_of, with_rows, write_subtask
from statectl.savepoint.storage import locate

NOTES = NOTES_KEY_GROUP  # a chunk's key group when it carries a source's notes (JSON)
SPANS = -1  # a chunk's number when it holds the runs of its key group's block, not entries
Key = tuple[int, int, int, int]  # subtask (the partition), key group, source, chunk number


@dataclass(frozen=True)
class FedFile:
    """What the task writing one subtask reports."""

    subtask: int  # the rewrite's position among the operator's subtasks
    handle: KeyedHandle | None
    rows: int
    # (POJO class, field) → rows that set it null, unchecked against the job's classes
    unchecked_nulls: tuple[tuple[str, str, int], ...] = ()


def notes_chunk(unchecked_nulls: Counter[tuple[str, str]]) -> tuple[int, int, bytes]:
    """A source's notes as a chunk: they travel with the entries to the first subtask."""
    notes = [[pojo, name, count] for (pojo, name), count in sorted(unchecked_nulls.items())]
    return NOTES, 0, json.dumps(notes).encode()


def owners(rewrites: Sequence[SubtaskRewrite], max_parallelism: int) -> list[int]:
    """Each key group's subtask (the position of the rewrite whose file holds it)."""
    return owners_of_files([rewrite.source for rewrite in rewrites], max_parallelism)


def owners_of_files(files: Sequence[KeyedSource], max_parallelism: int) -> list[int]:
    """Each key group's subtask (the position of the subtask's file among `files`)."""
    owner = [0] * max_parallelism
    for position, file in enumerate(files):
        key_groups = key_groups_of(file)
        if key_groups is not None:
            owner[key_groups[0] : key_groups[1] + 1] = [position] * (
                key_groups[1] - key_groups[0] + 1
            )
    return owner


def write_fed(
    engine: Engine,
    rewrites: Sequence[SubtaskRewrite],
    state: str,
    feed: RowFeed,
    names: Sequence[str],
    output_url: str,
    storage_options: dict[str, Any] | None,
    checkpoint_id: int,
) -> list[FedFile]:
    """Every subtask file of one operator whose state `state` is fed: one task per subtask
    (`names[n]`: the file of rewrite n), results in subtask order."""
    max_parallelism = rewrites[0].source.max_parallelism if rewrites else 0
    owner = owners(rewrites, max_parallelism)
    describe_key = feed.describe_key  # the tasks' closures take this, never the feed's frame

    def write(partition: int, records: Iterator[tuple[Any, bytes]]) -> FedFile:
        unchecked: Counter[tuple[str, str]] = Counter()
        stream = iter(records)
        head = next(stream, None)
        while head is not None and head[0][1] == NOTES:
            unchecked.update({(p, n): c for p, n, c in json.loads(head[1])})
            head = next(stream, None)
        rest = itertools.chain(() if head is None else (head,), stream)
        spans: dict[int, BlockRuns] = {}
        rows = ShuffledRows(_entry_chunks(rest, spans), describe_key)
        rewrite = with_rows(rewrites[partition], {state: rows}, spans)
        output = locate(output_url, storage_options)
        handle = write_subtask(rewrite, output, names[partition], checkpoint_id)
        rows.finish()
        notes = tuple((pojo, name, count) for (pojo, name), count in sorted(unchecked.items()))
        return FedFile(partition, handle, rows.count, notes)

    if feed.runs is not None:
        return _write_runs(engine, feed, write, storage_options)
    if feed.frame is not None:
        spark = getattr(engine, "spark", engine)  # a head start's Spark takes a frame's work
        if not hasattr(spark, "sort_frame"):
            raise StatectlError("rows made by Spark need a Spark engine to write them")
        return spark.sort_frame(feed.frame, owner, len(rewrites), write)  # type: ignore[no-any-return]

    chunks = feed.chunks
    assert chunks is not None, "a feed gives sources and chunks, a frame, or runs"

    def records(item: tuple[int, Any]) -> Iterable[tuple[Key, bytes]]:
        number, source = item
        for key_group, seq, chunk in chunks(source):
            subtask = 0 if key_group == NOTES else owner[key_group]
            yield (subtask, key_group, number, seq), chunk

    sources = list(enumerate(feed.sources))
    source_bytes = feed.source_bytes
    if source_bytes is None:
        return engine.sort_partitions(sources, records, len(rewrites), write)

    def work(item: tuple[int, Any]) -> tuple[int, int]:
        return 1, source_bytes(item[1])

    return engine.sort_partitions(
        sources, records, len(rewrites), write, work=work, gil_bound=lambda _: True
    )


def _entry_chunks(
    records: Iterable[tuple[Any, bytes]], spans: dict[int, BlockRuns]
) -> Iterator[tuple[int, bytes]]:
    """The (key group, chunk) of entries among `records`; the runs of blocks they hold go
    into `spans` as the stream passes them (a key group's before its rows are taken)."""
    for key, chunk in records:
        if key[-1] == SPANS:  # (subtask, key group, source, number): the number
            spans[key[1]] = unpack_spans(chunk)
        else:
            yield key[1], chunk


def _write_runs(
    engine: Engine,
    feed: RowFeed,
    write: Callable[[int, Iterator[tuple[Any, bytes]]], FedFile],
    storage_options: dict[str, Any] | None,
) -> list[FedFile]:
    """One task per subtask merges the sorted runs made for it into its file."""
    runs = [list(urls) for urls in feed.runs or ()]
    notes = feed.runs_notes

    def merge(partition: int) -> FedFile:
        with contextlib.ExitStack() as stack:
            sources = [stack.enter_context(_open(url, storage_options)) for url in runs[partition]]
            merged = merged_runs(read_run(source) for source in sources)
            written = write(partition, (((partition, kg, 0, 0), chunk) for kg, chunk in merged))
        return dataclasses.replace(written, unchecked_nulls=notes) if partition == 0 else written

    return engine.run(list(range(len(runs))), merge)


def _open(url: str, storage_options: dict[str, Any] | None) -> BinaryIO:
    location = locate(url, storage_options)
    return location.fs.open(location.path, "rb")  # type: ignore[no-any-return]


def unchecked_counts(files: Iterable[FedFile]) -> Mapping[tuple[str, str], int]:
    """The unchecked POJO nulls the tasks counted, over every file."""
    total: Counter[tuple[str, str]] = Counter()
    for file in files:
        total.update({(pojo, name): count for pojo, name, count in file.unchecked_nulls})
    return total
