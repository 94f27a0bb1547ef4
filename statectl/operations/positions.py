"""Where every source of a savepoint resumes: the model behind `statectl positions`.

Per source operator: the splits each subtask's reader holds (`SourceReaderState`, FLIP-27), the
enumerator's view (the operator's coordinator state: splits not yet assigned, known
partitions), or the legacy FlinkKafkaConsumer's `topic-partition-offset-states` union list.
Layouts and recognition are in `formats/source_state.py`.
"""

from __future__ import annotations

from dataclasses import dataclass

from statectl.errors import StatectlError
from statectl.formats import source_state as ss
from statectl.formats.metadata import OperatorState
from statectl.savepoint import entries as state_entries
from statectl.savepoint.model import Savepoint, describe_operator

LEGACY_KAFKA = "legacy-kafka"  # FlinkKafkaConsumer (Flink 1.x), not a FLIP-27 source


@dataclass(frozen=True)
class ReaderSplit:
    """A split held by one subtask's reader (or, for the legacy consumer, one partition)."""

    subtask: int
    split: ss.Split | ss.LegacyKafkaOffset


@dataclass(frozen=True)
class SourcePositions:
    operator_id: str
    uid: str | None
    name: str | None
    parallelism: int
    kind: str | None  # file | kafka | number-sequence | legacy-kafka | None (unrecognised)
    evidence: str  # what told the kind, or why it was not told
    splits: tuple[ReaderSplit, ...]
    enumerator: ss.Enumerator | None  # None: no coordinator state (or the legacy consumer)
    coordinator_serde_version: int | None = None


@dataclass(frozen=True)
class PositionsReport:
    location: str
    sources: tuple[SourcePositions, ...]


def positions(sp: Savepoint, operator: str | None = None) -> PositionsReport:
    """Every source operator's positions; with `operator`, that one (an error if it keeps no
    source state)."""
    if operator:
        op = sp.find_operator(operator)
        found = source_positions(sp, op)
        if found is None:
            raise StatectlError(
                f"operator {describe_operator(op)} keeps no source state "
                f"({ss.READER_STATE}, {ss.LEGACY_KAFKA_STATE} or a source coordinator's)"
            )
        return PositionsReport(sp.directory.url, (found,))
    found_all = (source_positions(sp, op) for op in sp.operators)
    return PositionsReport(sp.directory.url, tuple(p for p in found_all if p is not None))


@dataclass(frozen=True)
class _Element:
    subtask: int
    index: int
    value: bytes
    source: str  # the file it came from, for errors


def source_positions(sp: Savepoint, op: OperatorState) -> SourcePositions | None:
    """The positions of `op`, or None when it keeps no source state."""
    elements = _elements(sp, op)
    if elements.get(ss.LEGACY_KAFKA_STATE):
        return _legacy(op, elements[ss.LEGACY_KAFKA_STATE])
    coordinator = _coordinator(sp, op)
    readers = elements.get(ss.READER_STATE, [])
    splits = [_framed(e) for e in readers]
    enumerator = coordinator.enumerator if coordinator else None
    declared = _declares_reader_state(op)
    if not declared and not readers and not _is_source_coordinator(enumerator):
        return None
    found = ss.recognise([s for s, _ in splits], enumerator, op.name)
    held = tuple(ReaderSplit(e.subtask, _split(found.kind, split, e)) for split, e in splits)
    return SourcePositions(
        op.operator_id_hex,
        op.uid,
        op.name,
        op.parallelism,
        found.kind,
        found.evidence,
        held,
        _enumerator(sp, op, found.kind, enumerator),
        coordinator.serde_version if coordinator else None,
    )


def _elements(sp: Savepoint, op: OperatorState) -> dict[str, list[_Element]]:
    wanted = {ss.READER_STATE, ss.LEGACY_KAFKA_STATE}
    found: dict[str, list[_Element]] = {}
    for file in state_entries.operator_files(sp, op):
        if not wanted & {s.name for s in file.handle.states}:
            continue
        for element in file.elements():
            if element.state in wanted:
                of_state = found.setdefault(element.state, [])
                index = sum(1 for e in of_state if e.subtask == element.subtask)
                of_state.append(_Element(element.subtask, index, element.value, element.source))
    return found


def _declares_reader_state(op: OperatorState) -> bool:
    """A FLIP-27 source registers SourceReaderState even when its readers hold no split."""
    handles = (s.managed_operator_state for s in op.subtasks or ())
    return any(st.name == ss.READER_STATE for h in handles if h for st in h.states)


def _where(element: _Element, state: str) -> str:
    return f"{element.source} (state {state}, subtask {element.subtask}, element {element.index})"


def _framed(element: _Element) -> tuple[ss.Versioned, _Element]:
    try:
        return ss.read_reader_state_element(element.value), element
    except StatectlError as exc:
        raise exc.with_source(_where(element, ss.READER_STATE)) from None


def _split(kind: str | None, split: ss.Versioned, element: _Element) -> ss.Split:
    if kind is None:
        return ss.UnrecognisedSplit(split.version, split.data, "source kind not recognised")
    try:
        return ss.read_split(kind, split)
    except StatectlError as exc:
        raise exc.with_source(_where(element, ss.READER_STATE)) from None


def _coordinator(sp: Savepoint, op: OperatorState) -> ss.CoordinatorState | None:
    """The coordinator state as a SourceCoordinator frames it, or None (absent, or another
    coordinator's bytes)."""
    if op.coordinator_state is None:
        return None
    data = sp.stream(op.coordinator_state).read()
    try:
        return ss.read_coordinator_state(data)
    except StatectlError:
        return None


def _is_source_coordinator(enumerator: ss.Versioned | None) -> bool:
    return enumerator is not None and bool(ss.enumerator_kinds(enumerator))


def _enumerator(
    sp: Savepoint, op: OperatorState, kind: str | None, state: ss.Versioned | None
) -> ss.Enumerator | None:
    if state is None:
        return None
    if kind is None:
        return ss.UnrecognisedEnumerator(state.version, state.data, "source kind not recognised")
    try:
        return ss.read_enumerator(kind, state)
    except StatectlError as exc:
        where = f"{sp.metadata_location.url} (coordinator state of {describe_operator(op)})"
        raise exc.with_source(where) from None


def _legacy(op: OperatorState, elements: list[_Element]) -> SourcePositions:
    held = []
    for element in elements:
        try:
            offset = ss.read_legacy_kafka_element(element.value)
        except StatectlError as exc:
            raise exc.with_source(_where(element, ss.LEGACY_KAFKA_STATE)) from None
        held.append(ReaderSplit(element.subtask, offset))
    return SourcePositions(
        op.operator_id_hex,
        op.uid,
        op.name,
        op.parallelism,
        LEGACY_KAFKA,
        f"state {ss.LEGACY_KAFKA_STATE}",
        tuple(held),
        None,
    )
