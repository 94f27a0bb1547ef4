"""`statectl verify`: every consistency check a CI step can run on a savepoint before deploying.

Checks (flink-savepoint-format.md §2–§4): every referenced file exists with the size its handle
declares; per keyed operator the subtasks' key-group ranges cover [0, maxParallelism) exactly
once; key-group offsets lie inside their files and strictly ascend (§4.3: 0 = empty key group);
serializer-proxy headers parse (§3.1, §4.2); operator-state offsets lie inside their files
(§3.4). With `deep`: every key-group block walks to its end mark (§4.4, Snappy checksums
verified for compressed blocks, §4.5), every key splits into its parts (§4.6), carries the key
group of the block it is in and, for key types statectl knows (§7), the key group its Java hash
gives (§6.1); the subtasks' keyed headers merge into one (what rescale writes); operator-state
elements and broadcast maps read as the readers read them. Values, map user keys, list elements
and broadcast entries decode with the codecs `export` decodes them with: where the type is one
statectl reads completely (Flink's own serializers), a value or serializer snapshot that does not
decode is corruption, a finding (`Raw.corrupt`); a type it cannot decode (a custom serializer,
Kryo without the job's classes) leaves its values unchecked, counted in a note.

The format rules are not repeated here: offsets, headers, blocks, entries and operator-state
elements are read by the functions `inspect`, `diff`, `export` and `rescale` read them with
(`keyed.block_spans`, `keyed.canonical_header`, `keyed.read_header`, `keyed.iter_blocks`,
`keyed.merge_keyed_headers`, `native.meta_header`, `native.read_blocks`, `entries.block_entries`,
`entries.split_key`, `entries.operator_file_layout`, `entries.OperatorFile`), so a savepoint
`verify --deep` passes is one they read. Verify adds only cross-checks: sizes, key-group coverage,
key prefixes and hashes, Snappy checksums, operator-state offsets and header names.

The checks read files but never print: they return `Finding`s. `ensure_consistent` raises the
first one, so other commands refuse inconsistent input before writing anything.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections import Counter
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from statectl.errors import SavepointError, StatectlError, UnsupportedError, one_line
from statectl.formats import heap_snapshot, operator_state, snappy_framed, state_headers
from statectl.formats.handles import (
    ChangelogByteIncrementHandle,
    ChangelogFileIncrementHandle,
    ChangelogHandle,
    IncrementalKeyedHandle,
    KeyedHandle,
    KeyGroupsHandle,
    OperatorStateHandle,
    SegmentFileHandle,
    StreamHandle,
)
from statectl.formats.java_types import (
    COMPOSITE_KEY_KINDS,
    KeyType,
    key_group_prefix_bytes,
    key_type_for_snapshot,
)
from statectl.formats.key_groups import check_max_parallelism, key_group_range
from statectl.formats.metadata import (
    CheckpointMetadata,
    OperatorState,
    SubtaskState,
    read_metadata,
    write_metadata,
)
from statectl.formats.state_values import StateCodec, flink_major
from statectl.formats.values import Raw, RawCodec, registered
from statectl.progress import ProgressCallback, Steps, begun
from statectl.savepoint import entries, writer
from statectl.savepoint.keyed import (
    block_spans,
    canonical_header,
    is_heap_snapshot,
    iter_blocks,
    keyed_handle_bytes,
    merge_keyed_headers,
    operator_handle_bytes,
    read_header,
)
from statectl.savepoint.model import Savepoint, StateStream, describe_operator
from statectl.savepoint.reader import open_savepoint

_JAVA_SERIALIZATION_MAGIC = b"\xac\xed\x00\x05"


@dataclass(frozen=True, slots=True)
class Finding:
    """One problem: where (operator, subtask, file) and what is wrong."""

    operator: str | None  # uid, or the 32-hex id when the operator has no uid
    operator_id: str | None
    subtask: int | None
    file: str | None
    problem: str
    # Intact state in a layout statectl does not parse: commands that only copy bytes go on.
    unreadable: bool = False

    @property
    def message(self) -> str:
        """`operator <op>, subtask <n>: <problem>` (as much of the context as there is)."""
        where = []
        if self.operator is not None:
            where.append(f"operator {self.operator}")
        if self.subtask is not None:
            where.append(f"subtask {self.subtask}")
        return (", ".join(where) + ": " if where else "") + self.problem

    def line(self, location: str) -> str:
        """`<file>: operator <op>, subtask <n>: <problem>` on one line."""
        return one_line(f"{self.file or location}: {self.message}")


@dataclass(frozen=True)
class Verification:
    location: str
    deep: bool
    findings: tuple[Finding, ...]
    notes: tuple[str, ...] = ()
    operators: int = 0
    subtasks: int = 0
    files: int = 0
    key_groups: int = 0  # non-empty key groups seen (their blocks walked with `deep`)
    entries: int = 0  # keyed entries walked (deep)
    # The key groups of the operators whose key groups were counted (each one's max
    # parallelism): `key_groups` of them hold data.
    key_groups_of: int = 0
    unread_instances: int = 0  # RocksDB instances whose key groups were not read (not deep)

    @property
    def ok(self) -> bool:
        return not self.findings


def verify_location(
    url: str,
    storage_options: dict[str, Any] | None = None,
    deep: bool = False,
    allow_external_files: bool = False,
    progress: ProgressCallback | None = None,
) -> Verification:
    """Open and verify; a savepoint that cannot be opened is one finding, not an exception."""
    if progress is not None:
        progress(begun("reading metadata"))
    try:
        sp = open_savepoint(url, storage_options, allow_external_files)
    except StatectlError as exc:
        return Verification(url, deep, (Finding(None, None, None, exc.source or url, exc.message),))
    return verify(sp, deep, progress=progress)


def verify(
    sp: Savepoint,
    deep: bool = False,
    operators: Sequence[OperatorState] | None = None,
    progress: ProgressCallback | None = None,
) -> Verification:
    """All checks over `operators` (default: every operator of the savepoint); `progress`
    hears of each subtask checked, operator by operator (with `deep`, its blocks walked)."""
    checker = _Checker(sp, deep, progress=progress)
    checker.run(sp.operators if operators is None else operators)
    return checker.result()


# Written files' first and last blocks are walked entry by entry up to this size (a larger one
# is checked by the other rules alone): a few reads per file, whatever the state's size.
_EDGE_BLOCK_BYTES = 8 << 20
# Edge blocks up to this size are walked entry by entry (milliseconds), larger ones located by
# numpy (`entries.located_entries`), which a small command's output check does not load.
_WALKED_EDGE_BYTES = 256 << 10
_EDGE_KEYS = 512  # keys of an edge block whose key groups an output's check recomputes


def check_written(
    staged: writer.StagedSavepoint,
    metadata: CheckpointMetadata,
    rewritten: Collection[bytes] | None = None,
) -> None:
    """Before `_metadata` is published: what a command wrote, checked structurally (`_metadata`
    parses back; every handle's file is there with its size; key-group ranges cover the max
    parallelism; offsets and headers read) and the keyed files of the operators it wrote anew
    (`rewritten`, by operator id; None: all) walked in their first and last blocks in the
    layout the readers take (so a file in one layout handed out as the other fails). Files
    carried over as bytes are the input's, blocks and all. The per-entry walk of everything
    stays `verify --deep`'s. A finding is statectl's own bug: raised in one line, and the
    caller discards the staging."""
    try:
        written = read_metadata(write_metadata(metadata))
    except StatectlError as exc:
        raise _not_published(exc.message, staged.staging_url) from None
    sp = Savepoint(staged.staging, written, staged.storage_options, allow_external_files=True)
    every = (op.operator_id for op in sp.operators)
    checker = _Checker(sp, deep=False, edges=frozenset(every if rewritten is None else rewritten))
    checker.run(sp.operators)
    for finding in checker.findings:
        if not finding.unreadable:  # carried-over state statectl does not parse is not its bug
            raise _not_published(finding.message, finding.file or staged.staging_url)


def _not_published(problem: str, source: str) -> StatectlError:
    return StatectlError(
        f"statectl wrote output that fails its own check, so nothing was published (a bug: "
        f"please report it): {problem}",
        source,
    )


def ensure_consistent(
    sp: Savepoint,
    operators: Sequence[OperatorState] | None = None,
    *,
    copies_only: bool = False,
    progress: ProgressCallback | None = None,
) -> None:
    """Raise the first problem the shallow checks find (for commands that read or write state).

    `copies_only`: the command copies state files without parsing them (migrate), so state in
    a layout statectl does not read is no obstacle.
    """
    for finding in verify(sp, deep=False, operators=operators, progress=progress).findings:
        if not (copies_only and finding.unreadable):
            raise SavepointError(finding.message, finding.file or sp.directory.url)


# --- the checker --------------------------------------------------------------------------


@dataclass
class _Where:
    op: OperatorState | None = None
    subtask: int | None = None
    file: str | None = None


@dataclass
class _Checker:
    sp: Savepoint
    deep: bool
    # Operators (by id) whose keyed files' first and last blocks are walked (`check_written`).
    edges: frozenset[bytes] = frozenset()
    progress: ProgressCallback | None = None  # subtask by subtask
    findings: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    sizes: dict[str, int | str] = field(default_factory=dict)  # url → size, or why none
    inline_streams: int = 0
    stats: Counter[str] = field(default_factory=Counter)
    # Operators (by id) whose non-empty key groups `stats["key_groups"]` counts: their max
    # parallelism.
    counted_operators: dict[bytes, int] = field(default_factory=dict)
    # The current operator's keyed headers: (subtask, file, header).
    headers: list[tuple[int | None, str, state_headers.KeyedStateHeader]] = field(
        default_factory=list
    )
    # The current operator's values of types statectl cannot decode, per state, and why (deep).
    unchecked: Counter[str] = field(default_factory=Counter)
    unchecked_reasons: dict[str, str] = field(default_factory=dict)

    @property
    def flink(self) -> int:
        """Which Flink wrote the savepoint (Kryo 2 or 5), as the readers take it."""
        return flink_major(self.sp.metadata.version)

    def run(self, operators: Sequence[OperatorState]) -> None:
        self._check_properties()
        seen: dict[bytes, int] = Counter()
        for op in operators:
            seen[op.operator_id] += 1
            if seen[op.operator_id] == 2:
                self.add(_Where(op), "operator id appears more than once in _metadata")
            self.stats["operators"] += 1
            try:
                self._operator(op)
            except StatectlError as exc:  # a check that could not finish is a finding too
                self.add(_Where(op, file=exc.source), exc.message)

    def result(self) -> Verification:
        unique = tuple(dict.fromkeys(self.findings))
        return Verification(
            self.sp.directory.url,
            self.deep,
            unique,
            tuple(dict.fromkeys(self.notes)),
            self.stats["operators"],
            self.stats["subtasks"],
            len(self.sizes) + self.inline_streams,
            self.stats["key_groups"],
            self.stats["entries"],
            sum(self.counted_operators.values()),
            self.stats["unread_instances"],
        )

    def add(self, where: _Where, problem: str, *, unreadable: bool = False) -> None:
        op = where.op
        self.findings.append(
            Finding(
                (op.uid or op.operator_id_hex) if op else None,
                op.operator_id_hex if op else None,
                where.subtask,
                where.file or self.sp.metadata_location.url,  # else `_metadata` says it
                problem,
                unreadable,
            )
        )

    def note(self, text: str) -> None:
        self.notes.append(text)

    def _check_properties(self) -> None:
        md = self.sp.metadata
        if md.version >= 4 and not md.properties.startswith(_JAVA_SERIALIZATION_MAGIC):
            where = _Where(file=self.sp.metadata_location.url)
            self.add(where, "checkpoint properties are missing or not a Java serialization stream")

    # --- operators -----------------------------------------------------------------------

    def _operator(self, op: OperatorState) -> None:
        where = _Where(op)
        try:
            check_max_parallelism(op.max_parallelism)
        except StatectlError as exc:
            self.add(where, exc.message)
            return
        if not 0 < op.parallelism <= op.max_parallelism:
            self.add(
                where,
                f"parallelism {op.parallelism} is outside 1..{op.max_parallelism} "
                "(its max parallelism)",
            )
            return
        subtasks = self._subtask_indexes(op)
        ranges: list[tuple[int, int, int]] = []
        self.headers = []
        self.unchecked, self.unchecked_reasons = Counter(), {}
        doing = "walking key groups" if self.deep else "checking files"
        steps = Steps(
            self.progress,
            f"{doing} (operator {entries.operator_label(op)})",
            len(subtasks),
            sum(_subtask_bytes(s) for s in subtasks),
        )
        for subtask in subtasks:
            self.stats["subtasks"] += 1
            ranges += self._subtask(op, subtask)
            steps.step(_subtask_bytes(subtask))
        if ranges:
            self._coverage(op, subtasks, ranges)
        if self.deep and len(self.headers) > 1:
            self._headers_merge(op)
        for state, count in self.unchecked.items():
            self.note(
                f"operator {op.uid or op.operator_id_hex}, state {state!r}: {count} values not "
                f"checked ({self.unchecked_reasons[state]})"
            )

    def not_checked(self, state: str, raw: Raw) -> None:
        """A value of a type statectl cannot decode: counted for the operator's note."""
        self.unchecked[state] += 1
        self.unchecked_reasons.setdefault(state, raw.reason)

    def _headers_merge(self, op: OperatorState) -> None:
        """The subtasks' keyed headers merge into the one rescale writes to every new file."""
        where = describe_operator(op)
        subtasks, sources, headers = zip(*self.headers, strict=True)
        try:
            merge_keyed_headers(headers, where, sources)
        except StatectlError as exc:
            subtask = subtasks[sources.index(exc.source)] if exc.source in sources else None
            problem = exc.message.removeprefix(f"operator {where}: ")
            self.add(_Where(op, subtask, exc.source), problem)

    def _subtask_indexes(self, op: OperatorState) -> list[SubtaskState]:
        seen: set[int] = set()
        result = []
        for subtask in op.subtasks or ():
            where = _Where(op, subtask.index)
            if subtask.index >= op.parallelism:
                self.add(where, f"subtask index is not below the parallelism {op.parallelism}")
            elif subtask.index in seen:
                self.add(where, "subtask appears more than once")
            else:
                seen.add(subtask.index)
                if not subtask.finished:
                    result.append(subtask)
        return result

    def _subtask(self, op: OperatorState, subtask: SubtaskState) -> list[tuple[int, int, int]]:
        where = _Where(op, subtask.index)
        ranges = []
        for keyed, managed in (
            (subtask.managed_keyed_state, True),
            (subtask.raw_keyed_state, False),
        ):
            if keyed is None:
                continue
            key_groups = self._keyed(where, keyed, managed)
            if key_groups is not None and managed:
                ranges.append((key_groups[0], key_groups[1], subtask.index))
        for handle, managed in (
            (subtask.managed_operator_state, True),
            (subtask.raw_operator_state, False),
        ):
            if handle is not None:
                self._operator_handle(where, handle, managed)
        for channel in subtask.input_channel_states + subtask.output_channel_states:
            self.stream(where, channel.delegate)
        return ranges

    # --- key-group coverage ----------------------------------------------------------------

    def _coverage(
        self, op: OperatorState, subtasks: list[SubtaskState], ranges: list[tuple[int, int, int]]
    ) -> None:
        max_p = op.max_parallelism
        owners: list[list[int]] = [[] for _ in range(max_p)]
        for first, last, index in ranges:
            if first < 0 or last >= max_p:
                self.add(
                    _Where(op, index),
                    f"key groups {first}–{last} are outside 0–{max_p - 1} (max parallelism)",
                )
            for key_group in range(max(first, 0), min(last, max_p - 1) + 1):
                owners[key_group].append(index)
        # A subtask whose backend registered no state has no keyed handle: its key groups are
        # empty, not missing (Flink writes no handle for an empty backend).
        with_keyed = {index for _, _, index in ranges}
        stateless = [
            i for i in range(op.parallelism) if i not in with_keyed and self._no_keyed(subtasks, i)
        ]
        excused: set[int] = set()
        for index in stateless:
            first, last = key_group_range(max_p, op.parallelism, index)
            excused.update(range(first, last + 1))
        for first, last, claimants in _runs(owners):
            if len(claimants) > 1:
                names = " and ".join(str(i) for i in sorted(set(claimants)))
                self.add(
                    _Where(op),
                    f"key groups {first}–{last} are claimed by more than one subtask ({names})",
                )
            elif not claimants and not all(kg in excused for kg in range(first, last + 1)):
                self.add(_Where(op), f"key groups {first}–{last} belong to no subtask")

    @staticmethod
    def _no_keyed(subtasks: list[SubtaskState], index: int) -> bool:
        return all(s.managed_keyed_state is None for s in subtasks if s.index == index)

    # --- files -----------------------------------------------------------------------------

    def stream(self, where: _Where, handle: StreamHandle | None) -> StateStream | None:
        """The stream behind a handle if its file exists with the declared size, else None."""
        if handle is None:
            return None
        try:
            stream = self.sp.stream(handle)
        except StatectlError as exc:
            self.add(_Where(where.op, where.subtask, exc.source), exc.message)
            return None
        if stream.location is None:
            self.inline_streams += 1
            return stream
        url = stream.location.url
        if url not in self.sizes:
            try:
                self.sizes[url] = stream.location.size()
            except StatectlError as exc:
                self.sizes[url] = exc.message  # "file not found", …
        actual = self.sizes[url]
        at = _Where(where.op, where.subtask, url)
        if isinstance(actual, str):
            self.add(at, actual)
            return None
        if isinstance(handle, SegmentFileHandle):
            if stream.start + stream.size > actual:
                self.add(
                    at,
                    f"segment [{stream.start}, {stream.start + stream.size}) runs past the end "
                    f"of the file ({actual} bytes)",
                )
                return None
        elif actual != stream.size:
            shorter = "shorter" if actual < stream.size else "longer"
            self.add(
                at, f"file is {shorter} than its handle says ({actual} bytes, not {stream.size})"
            )
            return None
        return stream

    # --- keyed state -----------------------------------------------------------------------

    def _keyed(self, where: _Where, handle: KeyedHandle, managed: bool) -> tuple[int, int] | None:
        """Check one keyed handle; its key-group range for the coverage check."""
        if isinstance(handle, KeyGroupsHandle):
            self._key_groups_handle(where, handle, managed)
            return handle.key_groups
        if isinstance(handle, IncrementalKeyedHandle):
            self._native(where, handle)
            return handle.key_groups
        self._changelog(where, handle)
        first, count = handle.start_key_group, handle.num_key_groups
        return (first, first + count - 1) if count > 0 else None

    def _key_groups_handle(self, where: _Where, handle: KeyGroupsHandle, managed: bool) -> None:
        if handle.delegate is None:
            if any(handle.offsets):
                self.add(where, "key-group offsets without a state file")
            return
        stream = self.stream(where, handle.delegate)
        if stream is None:
            return
        at = _Where(where.op, where.subtask, stream.description)
        if not managed:  # raw keyed state is written by user code: its bytes have no known layout
            self._raw_offsets(at, handle, stream.size)
            return
        try:  # the readers' rule: inside the file, strictly ascending (§4.3)
            spans = block_spans(stream, handle)
        except StatectlError as exc:
            self.add(at, exc.message)
            return
        self.stats["key_groups"] += len(spans)
        self._key_groups_counted(where.op)
        try:  # the hashmap backend's own format (§4.8), or canonical blocks
            heap = is_heap_snapshot(self.sp, handle)
        except StatectlError as exc:
            self.add(at, exc.message)
            return
        op = where.op
        header = self._keyed_header(
            at, lambda: canonical_header(stream, handle), stream.description
        )
        if op is None or header is None:  # keyed handles are only checked within an operator
            return
        self.headers.append((where.subtask, stream.description, header))
        if not self.deep:  # only the edges of rewritten files (`check_written`), if any
            walked = spans and op.operator_id in self.edges
            edges = dict.fromkeys((spans[0], spans[-1])) if walked else {}
            spans = [span for span in edges if span.length <= _EDGE_BLOCK_BYTES]
        if spans:
            blocks = ((span.key_group, bytes(block)) for span, block in iter_blocks(stream, spans))
            walker = _BlockWalker(self, at, op.max_parallelism, header, heap, self.flink)
            walker.walk(blocks, stream.description)

    def _raw_offsets(self, at: _Where, handle: KeyGroupsHandle, size: int) -> None:
        """Raw keyed state (`KeyedStateCheckpointOutputStream`): no reader parses it, and a key
        group started but left empty by user code shares the next one's offset, so offsets
        only must not decrease."""
        present = [(handle.start_key_group + i, o) for i, o in enumerate(handle.offsets) if o]
        for key_group, offset in present:
            if not 0 < offset < size:
                self.add(
                    at, f"key group {key_group}: offset {offset} is outside the file ({size} bytes)"
                )
                return
        for (kg_a, a), (kg_b, b) in itertools.pairwise(present):
            if b < a:
                self.add(
                    at,
                    f"key group {kg_b}: offset {b} is below the offset {a} of key group {kg_a} "
                    "(offsets must ascend with the key group)",
                )
                return
        self.stats["key_groups"] += len({o for _, o in present})
        self._key_groups_counted(at.op)

    def _key_groups_counted(self, op: OperatorState | None) -> None:
        if op is not None:
            self.counted_operators[op.operator_id] = op.max_parallelism

    def _keyed_header(
        self,
        at: _Where,
        read: Callable[[], state_headers.KeyedStateHeader],
        description: str,
    ) -> state_headers.KeyedStateHeader | None:
        """The header as the readers read it (`keyed.canonical_header`, `keyed.read_header`)."""
        try:
            header = read()
        except StatectlError as exc:
            said = exc.message.startswith("keyed state header")  # the parser's own words
            self.add(at, exc.message if said else f"keyed state header: {exc.message}")
            return None
        problem = state_headers.state_list_problem(header, "keyed state")
        if self.deep and problem is not None:  # the readers of entries refuse it (§4.2)
            self.add(at, problem)
            return None
        if not header.complete:
            self.note(
                f"{description}: keyed state header read in part "
                f"({state_headers.read_in_part(header)})"
            )
        return header

    def _native(self, where: _Where, handle: IncrementalKeyedHandle) -> None:
        meta = self.stream(where, handle.meta)
        files_ok = all(
            self.stream(where, local.handle) is not None for local in handle.shared + handle.private
        )
        if meta is None:
            return
        at = _Where(where.op, where.subtask, meta.description)
        header = self._keyed_header(at, lambda: read_header(meta)[1], meta.description)
        op, key_groups = where.op, handle.key_groups
        if not self.deep:
            self.stats["unread_instances"] += 1
        if not self.deep or header is None or not files_ok or op is None or key_groups is None:
            return
        # Outside the key groups a coverage finding; rows there cannot be read by key group.
        if key_groups[0] >= 0 and key_groups[1] < op.max_parallelism:
            self._native_deep(where, op, handle, key_groups)

    def _native_deep(
        self,
        where: _Where,
        op: OperatorState,
        handle: IncrementalKeyedHandle,
        key_groups: tuple[int, int],
    ) -> None:
        """Rows of the RocksDB instance, as canonical blocks, through the same key checks."""
        try:
            from statectl.savepoint import native
        except ImportError:
            self.note("RocksDB native state: files and headers checked; rows not read")
            return
        max_parallelism = op.max_parallelism
        try:
            instance = native.native_instance(self.sp, handle, op.uid or "")
            _, header = native.meta_header(instance)  # the readers' rules for the meta file
            states = [(s.name, i) for i, s in enumerate(header.states)]
            blocks = native.read_blocks(
                instance, states, *key_groups, key_group_prefix_bytes(max_parallelism)
            )
            uncompressed = dataclasses.replace(header, compressed=False)
            at = _Where(where.op, where.subtask, instance.meta.description)  # the states' file
            walker = _BlockWalker(self, at, max_parallelism, uncompressed)
            self._key_groups_counted(op)
            walker.walk(self._counted(blocks), instance.description)
            outside = native.rows_outside(instance, key_group_prefix_bytes(max_parallelism))
            if outside:
                first, last = key_groups
                self.note(
                    f"{instance.description}: {outside} rows outside its key groups "
                    f"{first}–{last} (left by a rescale in Flink, which skips them on restore)"
                )
        except StatectlError as exc:
            self.add(_Where(where.op, where.subtask, exc.source), exc.message)

    def _counted(self, blocks: Iterator[tuple[int, bytes]]) -> Iterator[tuple[int, bytes]]:
        for block in blocks:
            self.stats["key_groups"] += 1
            yield block

    def _changelog(self, where: _Where, handle: KeyedHandle) -> None:
        if isinstance(handle, ChangelogHandle):
            for part in handle.materialized + handle.non_materialized:
                if part is not None:
                    self._keyed(where, part, managed=False)
        elif isinstance(handle, ChangelogFileIncrementHandle):
            for stream_handle, _ in handle.handles_and_offsets:
                self.stream(where, stream_handle)
        elif not isinstance(handle, ChangelogByteIncrementHandle):
            return
        self.note("changelog state: only its files are checked")

    # --- operator state --------------------------------------------------------------------

    def _operator_handle(self, where: _Where, handle: OperatorStateHandle, managed: bool) -> None:
        stream = self.stream(where, handle.delegate)
        if stream is None:
            if handle.delegate is None and any(s.offsets for s in handle.states):
                self.add(where, "operator-state offsets without a state file")
            return
        at = _Where(where.op, where.subtask, stream.description)
        try:
            self._operator_file(at, handle, stream, managed)
        except StatectlError as exc:
            self.add(at, exc.message)

    def _operator_file(
        self, at: _Where, handle: OperatorStateHandle, stream: StateStream, managed: bool
    ) -> None:
        for state in handle.states:
            if list(state.offsets) != sorted(state.offsets):
                self.add(at, f"operator state {state.name!r}: offsets do not ascend")
                return
        layout, head = entries.operator_file_layout(stream, handle)
        if not managed:
            return
        header = state_headers.parse_operator_header(head[: layout.header_length])
        problem = state_headers.state_list_problem(header, "operator state")
        if self.deep and problem is not None:  # the readers of elements refuse it (§3.1)
            self.add(at, problem)
            return
        if not header.complete:
            self.note(
                f"{stream.description}: operator state header read in part "
                f"({state_headers.read_in_part(header)})"
            )
        else:
            known = {s.name for s in header.states}
            for state in handle.states:
                if state.name not in known:
                    self.add(at, f"operator state {state.name!r} is not in the file's header")
        if self.deep:
            self._operator_elements(at, handle, stream, layout)

    def _operator_elements(
        self,
        at: _Where,
        handle: OperatorStateHandle,
        stream: StateStream,
        layout: operator_state.OperatorFileLayout,
    ) -> None:
        """Elements as `export`, `diff` and `rescale` read them (`entries.OperatorFile`), after
        verify's own checksum pass over compressed elements (§3.5)."""
        if layout.compressed and not self._operator_checksums(at, stream, layout):
            return
        elements = entries.OperatorFile("", "", 0, handle, stream, self.flink).elements()
        counts: Counter[str] = Counter()
        while True:
            try:
                element = next(elements, None)
            except StatectlError as exc:
                self.add(at, exc.message)
                return
            if element is None:
                return
            counts[element.state] += 1
            if counts[element.state] == 1:
                problem = _snapshot_problem(entries.element_codec(element))
                if problem:
                    self.add(at, f"operator state {element.state!r}: {problem}")
                    return
            try:
                raws = _element_raws(element)
            except StatectlError as exc:
                number = counts[element.state]
                self.add(at, f"operator state {element.state!r}, element {number}: {exc.message}")
                return
            corrupt = [raw for raw in raws if raw.corrupt]
            if corrupt:
                number = counts[element.state]
                problem = f"{len(corrupt)} values do not decode ({corrupt[0].reason})"
                self.add(at, f"operator state {element.state!r}, element {number}: {problem}")
                return
            for raw in raws:
                self.not_checked(element.state, raw)

    def _operator_checksums(
        self, at: _Where, stream: StateStream, layout: operator_state.OperatorFileLayout
    ) -> bool:
        for state in layout.states:
            for start, end in state.spans:
                try:
                    snappy_framed.decompress_chunks(stream.read(start, end), verify=True)
                except StatectlError as exc:
                    self.add(
                        at,
                        f"operator state {state.name!r}, element at offset {start}: {exc.message}",
                    )
                    return False
        return True


def _subtask_bytes(subtask: SubtaskState) -> int:
    """A subtask's state bytes: its share of a check's progress."""
    keyed = (subtask.managed_keyed_state, subtask.raw_keyed_state)
    operator = (subtask.managed_operator_state, subtask.raw_operator_state)
    return sum(map(keyed_handle_bytes, keyed)) + sum(map(operator_handle_bytes, operator))


# --- deep walk of key-group blocks ----------------------------------------------------------


@dataclass
class _BlockWalker:
    checker: _Checker
    at: _Where
    max_parallelism: int
    header: state_headers.KeyedStateHeader
    heap: bool = False  # key groups in the hashmap backend's own snapshot format
    flink: int | None = None
    _heap_states: tuple[heap_snapshot.HeapState, ...] | None = None
    _damaged: set[str] = field(default_factory=set)  # states reported for their header entry
    # Values waiting to be decoded together, per state: (key group, map user key, value).
    _pending: dict[str, list[tuple[int, bytes | None, bytes]]] = field(default_factory=dict)
    _pending_bytes: int = 0

    def walk(self, blocks: Iterator[tuple[int, bytes]], description: str) -> None:
        """Walk each (key group, block) as the readers do, then check every key's key group."""
        prefix_bytes = key_group_prefix_bytes(self.max_parallelism)
        key_type = key_type_for_snapshot(self.header.key_serializer_snapshot)
        codecs = entries.codecs_for(self.header, self.checker.flink)
        self._damaged = self._damaged_states(codecs)
        for key_group, block in blocks:
            try:
                count, found = self._entries(key_group, block, prefix_bytes)
            except UnsupportedError as exc:  # a state whose entries cannot be told apart
                self.checker.add(self.at, f"key group {key_group}: {exc.message}", unreadable=True)
                return
            except StatectlError as exc:
                self.checker.add(self.at, f"key group {key_group}: {exc.message}")
                continue
            self.checker.stats["entries"] += count
            self._keys(key_group, found, prefix_bytes, key_type, codecs)
            if self._pending_bytes >= _VALUE_BATCH_BYTES:
                self._decode_values(codecs)
        self._decode_values(codecs)
        if key_type is None:
            self.checker.note(
                f"{description}: key type {self.header.key_serializer} is not one statectl "
                "hashes; keys were checked against their key-group prefix only"
            )

    def _damaged_states(self, codecs: dict[str, StateCodec]) -> set[str]:
        """States whose header entry contradicts what Flink writes: a finding each, once per
        file (their values would all stay raw)."""
        damaged = set()
        for state in self.header.states:
            problem = (
                _state_type_problem(state)
                or _unread_snapshot(state)
                or _snapshot_problem(codecs[state.name])
            )
            if problem:
                self.checker.add(self.at, f"state {state.name!r}: {problem}")
                damaged.add(state.name)
        return damaged

    def _entries(
        self, key_group: int, block: bytes, prefix_bytes: int
    ) -> tuple[int, list[entries.KeyedEntry]]:
        """The block's entry count and its entries by the readers' rule
        (`entries.block_entries`); Snappy checksums are verify's own cross-check (§4.5). An
        output's check (not deep) takes the first `_EDGE_KEYS` entries of a canonical block
        only, the block's layout checked whole by `entry_scan`: hashing every key, or taking
        every entry in Python, would cost more than the write that made them."""
        if self.heap:  # `entries.HeapKeyedFile`'s rule, checksums verified too
            if self._heap_states is None:
                self._heap_states = heap_snapshot.heap_states(self.header, self.flink)
            found = entries.heap_entries(
                key_group, block, self.header, self._heap_states, self.max_parallelism, True
            )
            return len(found), found if self.checker.deep else found[:_EDGE_KEYS]
        compressed = self.header.compressed
        data = snappy_framed.decompress_stream(block, verify=True) if compressed else block
        if not self.checker.deep and len(data) > _WALKED_EDGE_BYTES:
            return entries.located_entries(key_group, data, self.header, prefix_bytes, _EDGE_KEYS)
        found = list(entries.block_entries(key_group, data, self.header, False))
        return len(found), found if self.checker.deep else found[:_EDGE_KEYS]

    def _keys(
        self,
        key_group: int,
        found: list[entries.KeyedEntry],
        prefix_bytes: int,
        key_type: KeyType | None,
        codecs: dict[str, StateCodec],
    ) -> None:
        bad_prefix: list[int] = []
        bad_hash: list[str] = []
        unsplit: list[str] = []
        for entry in found:
            prefix = int.from_bytes(entry.key[:prefix_bytes], "big")
            if prefix != key_group:
                bad_prefix.append(prefix)
                continue
            state = entry.state
            codec = codecs[state.name]
            try:  # the split `export` makes of every key (§4.6)
                parts = entries.split_key(entry, self.max_parallelism, codec)
            except StatectlError as exc:
                unsplit.append(f"state {state.name!r}: {exc.message}")
                continue
            # Values are decoded by the deep walk only; the output check is of structure.
            if self.checker.deep and state.name not in self._damaged and state.kind != "TIMERS":
                rows = self._pending.setdefault(state.name, [])
                rows.append((key_group, parts.user_key, entry.value))
                self._pending_bytes += len(entry.value) + len(parts.user_key or b"")
            if key_type is None or state.kind not in COMPOSITE_KEY_KINDS:
                continue
            start = prefix_bytes + (8 if state.kind == "TIMERS" else 0)
            problem = _hash_problem(key_type, entry.key, start, self.max_parallelism, key_group)
            if problem:
                bad_hash.append(f"state {state.name!r}: {problem}")
        if bad_prefix:
            self.checker.add(
                self.at,
                f"key group {key_group}: {len(bad_prefix)} of {len(found)} keys carry another "
                f"key-group prefix (first: {bad_prefix[0]})",
            )
        if bad_hash:
            self.checker.add(
                self.at,
                f"key group {key_group}: {len(bad_hash)} keys do not hash to it ({bad_hash[0]})",
            )
        if unsplit:
            self.checker.add(
                self.at,
                f"key group {key_group}: {len(unsplit)} keys do not split into their parts "
                f"({unsplit[0]})",
            )

    def _decode_values(self, codecs: dict[str, StateCodec]) -> None:
        """Decode the pending values as `export` does, state by state: in batches where the
        state's types allow (`tables`), the others one by one. Corrupt values are a finding
        per key group and state; values of types statectl cannot decode are counted."""
        if not self._pending:  # nothing queued (the output check queues none): no Arrow
            return
        from statectl.savepoint import tables  # Arrow and numpy: for the deep walk only

        for state, rows in self._pending.items():
            codec = codecs[state]
            key_groups, user_keys, values = zip(*rows, strict=True)
            taken = [False] * len(rows)  # a few values: one by one costs less than a batch
            if len(rows) >= _MIN_BATCH_ROWS:
                in_batch = tables.stored_values_taken(codec, values)
                if codec.kind == "MAP":
                    in_batch &= tables.parts_taken(codec.user_key, [k or b"" for k in user_keys])
                taken = in_batch.tolist()
            corrupt: dict[int, list[Raw]] = {}
            for i, decoded in enumerate(taken):
                if decoded:
                    continue
                for raw in _value_raws(codec, user_keys[i], values[i]):
                    if raw.corrupt:
                        corrupt.setdefault(key_groups[i], []).append(raw)
                    else:
                        self.checker.not_checked(state, raw)
            for key_group, raws in sorted(corrupt.items()):
                self.checker.add(
                    self.at,
                    f"key group {key_group}: {len(raws)} values of state {state!r} do not "
                    f"decode ({raws[0].reason})",
                )
        self._pending, self._pending_bytes = {}, 0


def _hash_problem(
    key_type: KeyType, key: bytes, start: int, max_parallelism: int, key_group: int
) -> str | None:
    try:
        value, _ = key_type.read(key, start)
        actual = key_type.key_group(value, max_parallelism)
    except StatectlError as exc:
        return exc.message
    if actual == key_group:
        return None
    return f"key {value!r} hashes to key group {actual}"


_VALUE_BATCH_BYTES = 8 << 20  # stored values of a file decoded together
_MIN_BATCH_ROWS = 64  # below, a state's values decode faster one by one (numpy's fixed costs)
_KEYED_STATE_TYPES = ("VALUE", "LIST", "REDUCING", "FOLDING", "AGGREGATING", "MAP")  # Flink's


def _state_type_problem(state: state_headers.StateMetaInfo) -> str | None:
    """A keyed state type Flink does not have (`StateDescriptor.Type`): a damaged option."""
    kind = state.options.get("KEYED_STATE_TYPE")
    if kind is None or kind in _KEYED_STATE_TYPES:
        return None
    return f"unknown keyed state type {kind!r}"


def _unread_snapshot(state: state_headers.StateMetaInfo) -> str | None:
    """A snapshot of a class whose payload statectl reads that did not read (`parsed=False`):
    its bytes were skipped, so they are damaged, even where its nested snapshots were found."""
    for key, snapshot in state.serializers.items():
        unread = [s for s in snapshot.snapshots() if not s.parsed and registered(s.class_name)]
        if unread:
            part = key.removesuffix("_SERIALIZER").lower().replace("_", " ")
            name = unread[0].class_name.rsplit(".", 1)[-1]
            return f"{part} serializer: snapshot of {name} not understood"
    return None


_PARTS = (("key", "key"), ("namespace", "namespace"), ("user_key", "map key"), ("value", "value"))


def _snapshot_problem(codec: StateCodec) -> str | None:
    """The first of a state's serializer snapshots that is corrupt (`RawCodec.corrupt`)."""
    for part, name in _PARTS:
        part_codec = getattr(codec, part)
        if isinstance(part_codec, RawCodec) and part_codec.corrupt:
            return f"{name} serializer: {part_codec.reason}"
    return None


def _value_raws(codec: StateCodec, user_key: bytes | None, value: bytes) -> list[Raw]:
    """The parts of a keyed entry beyond its key that stay raw as `export` decodes them: the
    value (each element of a LIST) and a MAP's user key."""
    raws = [codec.decode_value(value).value]
    if user_key is not None:
        raws.append(codec.decode_user_key(user_key))
    return [raw for raw in raws if isinstance(raw, Raw)]


def _element_raws(element: entries.OperatorElement) -> list[Raw]:
    """The parts of an operator-state element that stay raw as `export` decodes them: a list
    element, or each key and value of a broadcast map (split as `export` splits it, after
    checking its entry count)."""
    codec = entries.element_codec(element)
    if element.kind != "BROADCAST":
        decoded = [codec.decode_value(element.value).value] if element.value else []
    else:
        count = operator_state.broadcast_entry_count(element.value)
        pairs = entries.broadcast_entries(element)
        if pairs is None:  # a key or value serializer statectl cannot decode
            reason = "broadcast map of a type statectl cannot decode"
            return [Raw(b"", codec.value_type, reason)] * count
        decoded = []
        for key, value in pairs:
            decoded += [codec.decode_key(key), codec.decode_value(value).value]
    return [part for part in decoded if isinstance(part, Raw)]


def _runs(owners: list[list[int]]) -> Iterator[tuple[int, int, list[int]]]:
    """Maximal runs of key groups with the same owners."""
    start = 0
    for key_group in range(1, len(owners) + 1):
        if key_group == len(owners) or owners[key_group] != owners[start]:
            yield start, key_group - 1, owners[start]
            start = key_group
