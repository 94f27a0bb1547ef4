"""A shuffle's records spilled to local disk by the driver, read back sorted per partition.

The driver's half of a shuffle (`head_start.HeadStartEngine.sort_partitions`): every source's
records are pickled into a file of their own as they come (one writer per source, so sources
can be spilled by several threads), and only an index of (key, file, offset, length) stays in
memory, so memory does not grow with the state. A partition's records are read back in key
order, in this process or by a Spark worker of the same machine (local mode), which merges
them with the records Spark shuffled.
"""

from __future__ import annotations

import contextlib
import heapq
import operator
import os
import pickle
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

IndexEntry = tuple[tuple[Any, ...], int, int, int]
"""A spilled record: its key (first item: the partition), file number, offset, length."""


@dataclass(frozen=True)
class SpilledPartition:
    """One partition's spilled records: where they are, in key order (picklable)."""

    directory: str
    index: tuple[IndexEntry, ...]

    def records(self) -> Iterator[tuple[tuple[Any, ...], Any]]:
        files: dict[int, Any] = {}
        try:
            for key, number, offset, length in self.index:
                if number not in files:
                    files[number] = open(_file(self.directory, number), "rb")  # noqa: SIM115
                spill = files[number]
                spill.seek(offset)
                yield key, pickle.loads(spill.read(length))
        finally:
            for spill in files.values():
                spill.close()

    def merged(self, records: Iterable[tuple[Any, Any]]) -> Iterator[tuple[Any, Any]]:
        """These records and `records` (sorted by key too), in key order."""
        return heapq.merge(self.records(), records, key=operator.itemgetter(0))


class Spill:
    """A folder of spill files, removed on `close` (or leaving a `with` block)."""

    def __init__(self) -> None:
        self.directory = tempfile.mkdtemp(
            prefix="statectl-shuffle-", dir=os.environ.get("STATECTL_LOCAL_DIR")
        )

    def write(
        self, number: int, records: Iterable[tuple[tuple[Any, ...], Any]]
    ) -> list[IndexEntry]:
        """Spill one source's records into file `number`; their index entries."""
        index: list[IndexEntry] = []
        with open(_file(self.directory, number), "wb") as spill:
            offset = 0
            for key, value in records:
                data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
                spill.write(data)
                index.append((key, number, offset, len(data)))
                offset += len(data)
        return index

    def partitions(self, indexes: Iterable[list[IndexEntry]], count: int) -> list[SpilledPartition]:
        """The spilled records of every partition, each in key order."""
        by_partition: list[list[IndexEntry]] = [[] for _ in range(count)]
        for index in indexes:
            for entry in index:
                by_partition[entry[0][0]].append(entry)
        return [
            SpilledPartition(self.directory, tuple(sorted(entries, key=operator.itemgetter(0))))
            for entries in by_partition
        ]

    def close(self) -> None:
        with contextlib.suppress(OSError):
            shutil.rmtree(self.directory)

    def __enter__(self) -> Spill:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _file(directory: str, number: int) -> Path:
    return Path(directory) / f"source-{number}"
