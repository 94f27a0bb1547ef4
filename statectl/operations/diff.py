"""`statectl diff`: a logical comparison of two savepoints, independent of parallelism and files.

Operators are matched by id. Keyed state entries are identified by (state, key group, composite
key without its key-group prefix) and compared by value bytes (a LIST value is its delimited
element bytes, a timer is its key); operator list state compares as a multiset of element bytes,
union state as a set, broadcast state as a map.

Keyed state is compared through digests (flink-savepoint-format.md §4.4, §4.6): a first pass
computes, per (operator, state, bucket) and side, the entry count and the sum of 128-bit entry
hashes (order-independent, duplicates count); a second pass reads again only the buckets whose
digests differ and compares their entries. A bucket is the key group when both savepoints have
the same max parallelism, else a hash of the key (key groups then differ by design). Both passes
run on an `Engine`: in-process for small savepoints, as a Spark job for large ones.
"""

from __future__ import annotations

import hashlib
import struct
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from statectl.errors import StatectlError
from statectl.execution.engine import Engine, LocalEngine, start_named
from statectl.formats.java_types import key_group_prefix_bytes
from statectl.formats.metadata import OperatorState
from statectl.formats.state_headers import StateMetaInfo
from statectl.formats.state_values import StateCodec, flink_major, keyed_codec
from statectl.formats.values import Raw
from statectl.progress import ProgressCallback, begun
from statectl.savepoint import entries
from statectl.savepoint.entries import KeyedEntry, KeyedSource, operator_label
from statectl.savepoint.keyed import keyed_handle_bytes
from statectl.savepoint.model import Savepoint, has_state

MAX_EXAMPLES = 5
HASH_BUCKETS = 4096  # buckets when max parallelism differs
CHUNK_BYTES = 64 << 20  # key-group blocks per task
_MASK = (1 << 128) - 1
_LEN = struct.Struct(">I")

BucketKey = tuple[str, str, int]  # operator id, state name, bucket


# --- the report ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Example:
    """One differing entry, decoded where the serializers are known."""

    change: str  # "only_in_a" | "only_in_b" | "changed"
    key_group: int | None
    key: Any = None
    user_key: Any = None
    timestamp: int | None = None
    a: Any = None  # value in A (None when only in B)
    b: Any = None


@dataclass(frozen=True)
class StateDiff:
    operator: str
    operator_id: str
    state: str
    scope: str  # "keyed" | "operator"
    kind: str  # as in A (or B when only there)
    entries_a: int
    entries_b: int
    only_in_a: int = 0
    only_in_b: int = 0
    changed: int = 0
    examples: tuple[Example, ...] = ()
    note: str | None = None  # a difference beyond entries, e.g. the kind

    @property
    def identical(self) -> bool:
        return not (self.only_in_a or self.only_in_b or self.changed or self.note)


@dataclass(frozen=True)
class OperatorRef:
    operator: str
    operator_id: str


@dataclass(frozen=True)
class DiffReport:
    a: str
    b: str
    engine: str
    states: tuple[StateDiff, ...]
    operators_only_in_a: tuple[OperatorRef, ...] = ()
    operators_only_in_b: tuple[OperatorRef, ...] = ()
    notes: tuple[str, ...] = field(default=())  # informational, not differences

    @property
    def identical(self) -> bool:
        return (
            not self.operators_only_in_a
            and not self.operators_only_in_b
            and all(s.identical for s in self.states)
        )


# --- the driver ------------------------------------------------------------------------------


def diff(
    a: Savepoint,
    b: Savepoint,
    operator: str | None = None,
    engine: Engine | None = None,
    max_examples: int = MAX_EXAMPLES,
    *,
    progress: ProgressCallback | None = None,
) -> DiffReport:
    """`progress`: the keyed files (key-group ranges) hashed, then each later pass named."""
    engine = engine or LocalEngine()
    pairs, only_a, only_b = match_operators(a, b, operator)
    contexts = [_OperatorPair.read(a, b, op_a, op_b) for op_a, op_b in pairs]
    notes = tuple(n for c in contexts for n in c.notes())
    keyed = _compare_keyed(contexts, engine, max_examples, progress)
    states: list[StateDiff] = []
    for context in contexts:
        states += context.keyed_diffs(keyed)
        if progress is not None and _has_operator_state(context):
            progress(begun(f"comparing operator state (operator {context.label})"))
        states += _compare_operator_state(a, b, context, max_examples)
    return DiffReport(
        a.directory.url,
        b.directory.url,
        engine.name,
        tuple(states),
        tuple(OperatorRef(operator_label(op), op.operator_id_hex) for op in only_a),
        tuple(OperatorRef(operator_label(op), op.operator_id_hex) for op in only_b),
        notes,
    )


def match_operators(
    a: Savepoint, b: Savepoint, operator: str | None
) -> tuple[list[tuple[OperatorState, OperatorState]], list[OperatorState], list[OperatorState]]:
    """Operators in both (by id), and those with state only in A or only in B."""
    by_id_b = {op.operator_id: op for op in b.operators}
    ids_a = {op.operator_id for op in a.operators}
    if operator is not None:
        wanted = _find_either(a, b, operator).operator_id
        ops_a = [op for op in a.operators if op.operator_id == wanted]
        ops_b = [op for op in b.operators if op.operator_id == wanted]
    else:
        ops_a, ops_b = list(a.operators), list(b.operators)
    pairs = [(op, by_id_b[op.operator_id]) for op in ops_a if op.operator_id in by_id_b]
    only_a = [op for op in ops_a if op.operator_id not in by_id_b and has_state(op)]
    only_b = [op for op in ops_b if op.operator_id not in ids_a and has_state(op)]
    return pairs, only_a, only_b


def _find_either(a: Savepoint, b: Savepoint, name: str) -> OperatorState:
    try:
        return a.find_operator(name)
    except StatectlError:
        try:
            return b.find_operator(name)
        except StatectlError:
            pass
        raise


@dataclass(frozen=True)
class _Side:
    """One savepoint's view of an operator: its keyed files and their states."""

    op: OperatorState
    files: tuple[KeyedSource, ...]
    states: dict[str, StateMetaInfo]
    codecs: dict[str, StateCodec]

    @staticmethod
    def read(sp: Savepoint, op: OperatorState) -> _Side:
        files = tuple(entries.keyed_files(sp, op))
        states: dict[str, StateMetaInfo] = {}
        codecs: dict[str, StateCodec] = {}
        flink = flink_major(sp.metadata.version)
        for file in files:
            header = file.header()
            for state in header.states:
                states.setdefault(state.name, state)
                if state.name not in codecs:
                    codecs[state.name] = keyed_codec(state, header.key_serializer_snapshot, flink)
        return _Side(op, files, states, codecs)


@dataclass(frozen=True)
class _OperatorPair:
    a: _Side
    b: _Side

    @staticmethod
    def read(
        sa: Savepoint, sb: Savepoint, op_a: OperatorState, op_b: OperatorState
    ) -> _OperatorPair:
        return _OperatorPair(_Side.read(sa, op_a), _Side.read(sb, op_b))

    @property
    def operator_id(self) -> str:
        return self.a.op.operator_id_hex

    @property
    def label(self) -> str:
        return operator_label(self.a.op)

    @property
    def by_key_group(self) -> bool:
        return self.a.op.max_parallelism == self.b.op.max_parallelism

    def notes(self) -> list[str]:
        if self.by_key_group or not (self.a.files or self.b.files):
            return []
        return [
            f"{self.label}: max parallelism {self.a.op.max_parallelism} in A, "
            f"{self.b.op.max_parallelism} in B; keyed entries compared without key groups"
        ]

    def keyed_diffs(self, keyed: _KeyedResults) -> list[StateDiff]:
        diffs = []
        for name in [*self.a.states, *(n for n in self.b.states if n not in self.a.states)]:
            meta_a, meta_b = self.a.states.get(name), self.b.states.get(name)
            kind = (meta_a or self.b.states[name]).kind
            note = None
            if meta_a and meta_b and meta_a.kind != meta_b.kind:
                note = f"kind {meta_a.kind} in A, {meta_b.kind} in B"
            key = (self.operator_id, name)
            found = keyed.buckets.get(key, _Found())
            diffs.append(
                StateDiff(
                    self.label,
                    self.operator_id,
                    name,
                    "keyed",
                    kind,
                    keyed.counts.get((*key, 0), 0),
                    keyed.counts.get((*key, 1), 0),
                    found.only_a,
                    found.only_b,
                    found.changed,
                    tuple(self._example(e, name) for e in found.examples),
                    note,
                )
            )
        return diffs

    def _example(self, record: _RawExample, name: str) -> Example:
        side = self.a if record.side == 0 else self.b
        codec = side.codecs.get(name) or self.a.codecs.get(name) or self.b.codecs[name]
        meta = side.states.get(name) or self.a.states.get(name) or self.b.states[name]
        entry = KeyedEntry(meta, record.key_group, record.key, b"")
        parts = entries.split_key(entry, side.op.max_parallelism, codec)
        user_key = None
        if parts.user_key is not None:
            user_key = _shown(codec, "user_key", codec.decode_user_key(parts.user_key))
        value_codec_a = self.a.codecs.get(name, codec)
        value_codec_b = self.b.codecs.get(name, codec)
        return Example(
            record.change,
            record.key_group,
            _shown(codec, "key", codec.decode_key(parts.key)),
            user_key,
            parts.timestamp,
            _value(value_codec_a, record.value_a),
            _value(value_codec_b, record.value_b),
        )


def _value(codec: StateCodec, data: bytes | None) -> Any:
    if data is None:
        return None
    if codec.kind == "TIMERS":
        return None  # a timer is all key
    return _shown(codec, "value", codec.decode_value(data).value)


def _shown(codec: StateCodec, part: str, value: Any) -> Any:
    """A decoded part in its JSON form, or its bytes as hex when it does not decode."""
    if isinstance(value, Raw):
        return f"hex:{value.data.hex()}"
    return codec.json(part, value)


# --- keyed state: digests, then the differing buckets ---------------------------------------


@dataclass(frozen=True)
class DigestTask:
    """A range of key groups of one keyed file, on side 0 (A) or 1 (B)."""

    side: int
    file: KeyedSource
    key_groups: tuple[int, int]
    by_key_group: bool


@dataclass(frozen=True)
class EntriesTask:
    digest: DigestTask
    wanted: frozenset[BucketKey]


@dataclass(frozen=True)
class _RawExample:
    change: str
    side: int  # whose key bytes these are
    key_group: int
    key: bytes
    value_a: bytes | None
    value_b: bytes | None


@dataclass(frozen=True)
class _Found:
    only_a: int = 0
    only_b: int = 0
    changed: int = 0
    examples: tuple[_RawExample, ...] = ()


@dataclass(frozen=True)
class _KeyedResults:
    counts: dict[tuple[str, str, int], int]  # (operator id, state, side) -> entries
    buckets: dict[tuple[str, str], _Found]  # (operator id, state) -> differences


def _compare_keyed(
    pairs: list[_OperatorPair],
    engine: Engine,
    max_examples: int,
    progress: ProgressCallback | None = None,
) -> _KeyedResults:
    tasks = [t for pair in pairs for t in _digest_tasks(pair)]
    digests: dict[BucketKey, list[tuple[int, int]]] = {}
    counts: Counter[tuple[str, str, int]] = Counter()
    if tasks:
        start_named(engine, progress)
        if progress is not None:
            progress(begun("hashing keyed entries"))
    digested = engine.run(tasks, digest, _digest_work, progress)
    for key, side, count, total in (found for result in digested for found in result):
        pair_digest = digests.setdefault(key, [(0, 0), (0, 0)])
        old_count, old_total = pair_digest[side]
        pair_digest[side] = (old_count + count, (old_total + total) & _MASK)
        counts[(key[0], key[1], side)] += count
    wanted = frozenset(k for k, (da, db) in digests.items() if da != db)
    found: dict[tuple[str, str], _Found] = {}
    if wanted:
        if progress is not None:
            progress(begun(f"comparing the entries of {len(wanted)} differing buckets"))
        second = [EntriesTask(t, wanted) for t in tasks if _may_hold(t, wanted)]
        for key, differences in engine.group_reduce(second, bucket_entries, compare_bucket):
            state = key[:2]
            found[state] = _merge(found.get(state, _Found()), differences, max_examples)
    return _KeyedResults(dict(counts), found)


def _digest_tasks(pair: _OperatorPair) -> list[DigestTask]:
    tasks = []
    for side, files in ((0, pair.a.files), (1, pair.b.files)):
        for file in files:
            for key_groups in file.chunks(CHUNK_BYTES):
                tasks.append(DigestTask(side, file, key_groups, pair.by_key_group))
    return tasks


def _digest_work(task: DigestTask) -> tuple[int, int]:
    """A digest task's share of the progress: one file's key-group range, its bytes."""
    return 1, entries.source_bytes(task.file, task.key_groups)


def _may_hold(task: DigestTask, wanted: frozenset[BucketKey]) -> bool:
    if not task.by_key_group:
        return True
    first, last = task.key_groups
    return any(op == task.file.operator_id and first <= bucket <= last for op, _, bucket in wanted)


def _identity(entry: KeyedEntry, task: DigestTask) -> tuple[int, bytes]:
    """(bucket, key bytes after the key-group prefix)."""
    rest = entry.key[key_group_prefix_bytes(task.file.max_parallelism) :]
    if task.by_key_group:
        return entry.key_group, rest
    bucket = int.from_bytes(hashlib.blake2b(rest, digest_size=4).digest(), "big") % HASH_BUCKETS
    return bucket, rest


def _entry_hash(state: str, ident: bytes, value: bytes) -> int:
    h = hashlib.blake2b(digest_size=16)
    for part in (state.encode("utf-8"), ident, value):
        h.update(_LEN.pack(len(part)))
        h.update(part)
    return int.from_bytes(h.digest(), "big")


def digest(task: DigestTask) -> list[tuple[BucketKey, int, int, int]]:
    """(bucket key, side, entry count, sum of entry hashes) for every bucket in the task."""
    sums: dict[tuple[str, int], list[int]] = {}
    for entry in task.file.entries(task.key_groups):
        bucket, ident = _identity(entry, task)
        acc = sums.setdefault((entry.state.name, bucket), [0, 0])
        acc[0] += 1
        acc[1] = (acc[1] + _entry_hash(entry.state.name, ident, entry.value)) & _MASK
    op = task.file.operator_id
    return [((op, s, b), task.side, c, t) for (s, b), (c, t) in sums.items()]


class _Record(NamedTuple):
    """One entry in a wanted bucket, as the shuffle carries it."""

    side: int
    key_group: int
    identity: bytes  # the key without its key-group prefix
    key: bytes
    value: bytes


def bucket_entries(task: EntriesTask) -> list[tuple[BucketKey, _Record]]:
    """Every entry of the task that lies in a wanted bucket."""
    found = []
    op = task.digest.file.operator_id
    for entry in task.digest.file.entries(task.digest.key_groups):
        bucket, ident = _identity(entry, task.digest)
        key = (op, entry.state.name, bucket)
        if key in task.wanted:
            record = _Record(task.digest.side, entry.key_group, ident, entry.key, entry.value)
            found.append((key, record))
    return found


def compare_bucket(key: BucketKey, records: list[_Record]) -> tuple[BucketKey, _Found]:
    """Entries of one bucket: identities only in A, only in B, or with other values."""
    sides: list[dict[bytes, list[_Record]]] = [{}, {}]
    for record in records:
        sides[record.side].setdefault(record.identity, []).append(record)
    a, b = sides
    only_a = sorted(set(a) - set(b))
    only_b = sorted(set(b) - set(a))
    changed = sorted(i for i in set(a) & set(b) if _values(a[i]) != _values(b[i]))
    examples = [_raw("only_in_a", a[i][0], a[i][0].value, None) for i in only_a[:MAX_EXAMPLES]]
    examples += [_raw("only_in_b", b[i][0], None, b[i][0].value) for i in only_b[:MAX_EXAMPLES]]
    examples += [
        _raw("changed", a[i][0], a[i][0].value, b[i][0].value) for i in changed[:MAX_EXAMPLES]
    ]
    return key, _Found(len(only_a), len(only_b), len(changed), tuple(examples))


def _values(records: list[_Record]) -> Counter[bytes]:
    return Counter(r.value for r in records)


def _raw(change: str, shown: _Record, value_a: bytes | None, value_b: bytes | None) -> _RawExample:
    """An example shown with `shown`'s key."""
    return _RawExample(change, shown.side, shown.key_group, shown.key, value_a, value_b)


def _merge(old: _Found, new: _Found, max_examples: int) -> _Found:
    examples = sorted((*old.examples, *new.examples), key=lambda e: (e.key_group, e.key, e.change))
    return _Found(
        old.only_a + new.only_a,
        old.only_b + new.only_b,
        old.changed + new.changed,
        tuple(examples[:max_examples]),
    )


# --- operator state --------------------------------------------------------------------------


def _compare_operator_state(
    a: Savepoint, b: Savepoint, pair: _OperatorPair, max_examples: int
) -> list[StateDiff]:
    elements_a = _group(entries.iter_operator_elements(a, pair.a.op))
    elements_b = _group(entries.iter_operator_elements(b, pair.b.op))
    diffs = []
    for name in [*elements_a, *(n for n in elements_b if n not in elements_a)]:
        in_a, in_b = elements_a.get(name, []), elements_b.get(name, [])
        kind = (in_a or in_b)[0].kind
        codec = entries.element_codec((in_a or in_b)[0])
        if kind == "BROADCAST":
            found = _compare_broadcast(in_a, in_b, codec)
        else:
            found = _compare_list(in_a, in_b, codec, as_sets=kind == "UNION")
        note = None
        if in_a and in_b and in_a[0].kind != in_b[0].kind:
            note = f"kind {in_a[0].kind} in A, {in_b[0].kind} in B"
        diffs.append(
            StateDiff(
                pair.label,
                pair.operator_id,
                name,
                "operator",
                kind,
                found.entries_a,
                found.entries_b,
                found.only_in_a,
                found.only_in_b,
                found.changed,
                tuple(found.examples[:max_examples]),
                note,
            )
        )
    return diffs


def _has_operator_state(pair: _OperatorPair) -> bool:
    return any(
        s.managed_operator_state is not None or s.raw_operator_state is not None
        for op in (pair.a.op, pair.b.op)
        for s in op.subtasks or ()
    )


def _group(elements: Iterable[entries.OperatorElement]) -> dict[str, list[entries.OperatorElement]]:
    grouped: dict[str, list[entries.OperatorElement]] = {}
    for element in elements:
        grouped.setdefault(element.state, []).append(element)
    return grouped


@dataclass(frozen=True)
class _Compared:
    """One operator state compared: its size on each side, and how they differ."""

    entries_a: int
    entries_b: int
    only_in_a: int
    only_in_b: int
    changed: int
    examples: list[Example]


def _compare_list(
    in_a: list[entries.OperatorElement],
    in_b: list[entries.OperatorElement],
    codec: StateCodec,
    *,
    as_sets: bool,
) -> _Compared:
    """Split list state: multisets of element bytes; union state (`as_sets`): sets."""
    count_a = Counter(e.value for e in in_a)
    count_b = Counter(e.value for e in in_b)
    if as_sets:
        count_a, count_b = Counter(set(count_a)), Counter(set(count_b))
    extra_a, extra_b = count_a - count_b, count_b - count_a
    examples = [Example("only_in_a", None, a=_value(codec, v)) for v in sorted(extra_a)] + [
        Example("only_in_b", None, b=_value(codec, v)) for v in sorted(extra_b)
    ]
    entries_a, entries_b = sum(count_a.values()), sum(count_b.values())
    return _Compared(
        entries_a, entries_b, sum(extra_a.values()), sum(extra_b.values()), 0, examples
    )


def _compare_broadcast(
    in_a: list[entries.OperatorElement],
    in_b: list[entries.OperatorElement],
    codec: StateCodec,
) -> _Compared:
    """Broadcast state: the map (all copies merged); undecodable maps compare as whole bytes."""
    map_a, map_b = _broadcast_map(in_a), _broadcast_map(in_b)
    only_a = sorted(set(map_a) - set(map_b))
    only_b = sorted(set(map_b) - set(map_a))
    changed = sorted(k for k in set(map_a) & set(map_b) if map_a[k] != map_b[k])

    def example(change: str, key: bytes) -> Example:
        shown_key = _shown(codec, "key", codec.decode_key(key))
        a = map_a.get(key)
        b = map_b.get(key)
        return Example(
            change,
            None,
            shown_key,
            a=_value(codec, a),
            b=_value(codec, b),
        )

    examples = [example("only_in_a", k) for k in only_a]
    examples += [example("only_in_b", k) for k in only_b]
    examples += [example("changed", k) for k in changed]
    return _Compared(len(map_a), len(map_b), len(only_a), len(only_b), len(changed), examples)


def _broadcast_map(elements: list[entries.OperatorElement]) -> dict[bytes, bytes]:
    merged: dict[bytes, bytes] = {}
    for element in elements:
        pairs = entries.broadcast_entries(element)
        if pairs is None:  # unknown serializers: the whole map's bytes stand for it
            pairs = [(element.value, b"")]
        merged.update(pairs)
    return merged


# --- choosing where to run --------------------------------------------------------------------

SPARK_AUTO_BYTES = 64 << 20  # ~5 s of in-process hashing of small entries ≈ a Spark start


def keyed_bytes(sp: Savepoint, operator: str | None) -> int:
    """Bytes of keyed state the comparison would read from `sp`."""
    ops = [op for op in sp.operators if operator is None or _is(op, sp, operator)]
    return sum(keyed_handle_bytes(s.managed_keyed_state) for op in ops for s in sp.subtasks(op))


def _is(op: OperatorState, sp: Savepoint, name: str) -> bool:
    try:
        return sp.find_operator(name).operator_id == op.operator_id
    except StatectlError:
        return False


def wants_spark(a: Savepoint, b: Savepoint, operator: str | None, spark: bool | None) -> bool:
    """Spark when asked, else when the keyed state read exceeds SPARK_AUTO_BYTES."""
    if spark is not None:
        return spark
    return keyed_bytes(a, operator) + keyed_bytes(b, operator) > SPARK_AUTO_BYTES
