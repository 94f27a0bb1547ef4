"""The stored values of some states read by an engine's tasks before a rewrite (`upgrade`'s and
`migrate --classpath`'s trials): one task per subtask file (a keyed-state file or an
operator-state file) covering every named state of its operator and scope, so that they run
where the rewrite's own tasks run (this process, the head start or Spark). Results come back in
task order, operator by operator and subtask by subtask, whichever task ended first: what a
caller reports first is the same on every engine.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from statectl.execution.engine import Engine
from statectl.formats.metadata import OperatorState
from statectl.progress import ProgressCallback, begun
from statectl.savepoint import entries
from statectl.savepoint.model import Savepoint

ValueSource = entries.KeyedSource | entries.OperatorFile
P = TypeVar("P")  # what a task needs of one state (its codecs, its converter)
R = TypeVar("R")  # a task's result
S = TypeVar("S", bound="StateRef")


class StateRef(Protocol):
    """A state named by a check's verdict (`StateCheck`, `StateVerdict`)."""

    @property
    def operator_id(self) -> str: ...  # 32 hex

    @property
    def scope(self) -> str: ...  # keyed | operator

    @property
    def state(self) -> str: ...


@dataclass(frozen=True)
class FileValues(Generic[P]):
    """One task: the values of `states` (name → what the task needs of it) in one subtask's
    file."""

    source: ValueSource
    states: Mapping[str, P]


def run_per_file(
    sp: Savepoint,
    engine: Engine,
    states: Mapping[S, P],
    fn: Callable[[FileValues[P]], R],
    progress: ProgressCallback | None = None,
    phase: str = "reading values",
) -> list[tuple[dict[str, S], R]]:
    """`fn` over every subtask file holding `states`, a task each; per task in task order, its
    states by name and its result."""
    groups: dict[tuple[str, str], list[S]] = {}
    for ref in states:
        groups.setdefault((ref.operator_id, ref.scope), []).append(ref)
    tasks: list[FileValues[P]] = []
    owners: list[dict[str, S]] = []
    for (operator_id, scope), refs in groups.items():
        mine = {ref.state: states[ref] for ref in refs}
        for source in value_sources(sp, sp.find_operator(operator_id), scope):
            tasks.append(FileValues(source, mine))
            owners.append({ref.state: ref for ref in refs})
    if progress is not None and tasks:
        progress(begun(phase))
    # Values decoded one by one hold the GIL: a head start gives them to worker processes.
    results = engine.run(tasks, fn, _file_work, progress, gil_bound=lambda _: True)
    return list(zip(owners, results, strict=True))


def value_sources(sp: Savepoint, op: OperatorState, scope: str) -> list[ValueSource]:
    """The operator's subtask files of `scope` (keyed | operator), in subtask order."""
    if scope == "keyed":
        return list(entries.keyed_files(sp, op))
    return list(entries.operator_files(sp, op))


def source_values(source: ValueSource, states: Collection[str]) -> Iterator[tuple[str, bytes]]:
    """(state, stored value) of `states` in one subtask's file: of keyed state, the runs of
    the other states skipped unread."""
    if isinstance(source, entries.OperatorFile):
        for element in source.elements():
            if element.state in states:
                yield element.state, element.value
    else:
        for entry in source.entries(states=states):
            yield entry.state.name, entry.value


def _file_work(task: FileValues[P]) -> tuple[int, int]:
    source = task.source
    if isinstance(source, entries.OperatorFile):
        return 1, source.stream.size
    return 1, entries.source_bytes(source)
