"""A corpus of corrupted savepoints, each derived from a real Flink fixture copied to a temp dir.

`corrupted_cases()` lists them; `case.build(tmp)` copies the fixture under `tmp` and corrupts
the copy, returning the savepoint and the file at fault. Commands are described in `COMMANDS`
(argv templates), so a new command is covered by adding one line there.

Cases: `_metadata` truncated at the end of each distinct field (every field kind the reader
reads, in three fixtures), wrong magic, unknown versions, unknown handle codes, offsets past the
end of files, offsets out of order, missing, shortened and longer state files (canonical and
RocksDB native), overlapping, missing and out-of-range key-group ranges, bad subtask indexes,
broken headers, and flipped bytes inside key-group blocks and operator-state elements (found
only by commands that read those bytes: `detected_by`).
"""

from __future__ import annotations

import dataclasses
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from statectl.formats import java_types
from statectl.formats.handles import KeyGroupsHandle, OperatorStateHandle, RelativeFileHandle
from statectl.formats.java_io import DataReader
from statectl.formats.metadata import (
    CheckpointMetadata,
    OperatorState,
    SubtaskState,
    _MetadataReader,
    read_metadata,
    write_metadata,
)
from tests.conftest import fixture_savepoint

FILES = "hashmap_canonical_files"
INLINE = "hashmap_canonical_inline"
COMPRESSED = "hashmap_compressed"
MAXP300 = "hashmap_maxp300"
NATIVE = "rocksdb_native_full"

# --- commands --------------------------------------------------------------------------


@dataclass(frozen=True)
class Command:
    """How to run one command on a savepoint: `argv(savepoint, pristine, out)`.

    `pristine` is an intact copy of the same fixture (for two-input commands), `out` an empty
    folder for outputs; `spark` says the command may start a Spark job.
    """

    id: str
    name: str  # the typer command it needs
    argv: Callable[[Path, Path, Path], list[str]]
    spark: bool = False


MIGRATION = ["--rename-uid", "keyed-str=ks", "--drop", "sink"]  # uids of every fixture

COMMANDS: tuple[Command, ...] = (
    Command("inspect", "inspect", lambda sp, _, __: ["inspect", str(sp)]),
    Command("inspect --deep", "inspect", lambda sp, _, __: ["inspect", "--deep", str(sp)]),
    Command("plan", "plan", lambda sp, _, __: ["plan", str(sp)]),
    Command("plan --deep", "plan", lambda sp, _, __: ["plan", "--deep", str(sp)]),
    Command("verify", "verify", lambda sp, _, __: ["verify", str(sp)]),
    Command("verify --deep", "verify", lambda sp, _, __: ["verify", "--deep", str(sp)]),
    Command(
        "rescale",
        "rescale",
        lambda sp, _, out: ["rescale", str(sp), "-o", str(out / "result"), "-p", "3"],
        spark=True,
    ),
    Command(
        "convert",
        "convert",
        lambda sp, _, out: ["convert", str(sp), "-o", str(out / "result")],
        spark=True,
    ),
    Command("diff", "diff", lambda sp, p, _: ["diff", "--no-spark", str(sp), str(p)]),
    Command("diff (as B)", "diff", lambda sp, p, _: ["diff", "--no-spark", str(p), str(sp)]),
    Command(
        "export", "export", lambda sp, _, out: ["export", str(sp), "-o", str(out / "out.parquet")]
    ),
    Command(
        "migrate",
        "migrate",
        lambda sp, _, out: ["migrate", str(sp), "-o", str(out / "result"), *MIGRATION],
    ),
)

# Commands that read every key-group block, so they must fail on a block that does not walk.
BLOCK_WALKERS = frozenset(
    {"inspect --deep", "plan --deep", "verify --deep", "diff", "diff (as B)", "export"}
)


# --- cases -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Built:
    savepoint: Path
    culprit: Path  # the file the error must name


@dataclass(frozen=True)
class Case:
    """One corrupted savepoint: `corrupt(savepoint copy)` damages it, returns the file at fault.

    `problems`: one of these must appear in the error (or the verify finding).
    `detected_by`: command ids that must fail; None means every command.
    `reaches_spark`: rescale/convert get past planning and fail inside the Spark job.
    """

    name: str
    fixture: str
    corrupt: Callable[[Path], Path]
    problems: tuple[str, ...]
    detected_by: frozenset[str] | None = None
    reaches_spark: bool = False

    def build(self, tmp: Path) -> Built:
        savepoint = copy_fixture(self.fixture, tmp / "input")
        return Built(savepoint, self.corrupt(savepoint))

    def must_fail(self, command_id: str) -> bool:
        return self.detected_by is None or command_id in self.detected_by


def copy_fixture(name: str, parent: Path) -> Path:
    target = parent / name
    shutil.copytree(fixture_savepoint(name), target)
    return target


def corrupted_cases() -> list[Case]:
    return [
        *_truncations(),
        *_envelope_cases(),
        *_handle_code_cases(),
        *_offset_cases(),
        *_file_cases(),
        *_native_cases(),
        *_range_cases(),
        *_header_cases(),
        *_block_cases(),
    ]


# --- helpers over `_metadata` ----------------------------------------------------------


def load(sp: Path) -> CheckpointMetadata:
    return read_metadata((sp / "_metadata").read_bytes())


def save(sp: Path, md: CheckpointMetadata) -> Path:
    (sp / "_metadata").write_bytes(write_metadata(md))
    return sp / "_metadata"


def operator(md: CheckpointMetadata, uid: str) -> OperatorState:
    return next(op for op in md.operators if op.uid == uid)


def subtask(md: CheckpointMetadata, uid: str, index: int) -> SubtaskState:
    return next(s for s in operator(md, uid).subtasks or () if s.index == index)


def with_operator(md: CheckpointMetadata, uid: str, **changes: object) -> CheckpointMetadata:
    ops = tuple(dataclasses.replace(op, **changes) if op.uid == uid else op for op in md.operators)
    return dataclasses.replace(md, operators=ops)


def with_subtask(
    md: CheckpointMetadata, uid: str, which: int, /, **changes: object
) -> CheckpointMetadata:
    subtasks = tuple(
        dataclasses.replace(s, **changes) if s.index == which else s
        for s in operator(md, uid).subtasks or ()
    )
    return with_operator(md, uid, subtasks=subtasks)


def keyed_handle(md: CheckpointMetadata, uid: str, index: int) -> KeyGroupsHandle:
    handle = subtask(md, uid, index).managed_keyed_state
    assert isinstance(handle, KeyGroupsHandle)
    return handle


def state_file(sp: Path, uid: str, index: int, kind: str = "keyed") -> Path:
    st = subtask(load(sp), uid, index)
    handle = st.managed_keyed_state if kind == "keyed" else st.managed_operator_state
    assert handle is not None and isinstance(handle.delegate, RelativeFileHandle)
    return sp / handle.delegate.relative_path


def patch(path: Path, position: int, data: bytes) -> Path:
    content = bytearray(path.read_bytes())
    content[position : position + len(data)] = data
    path.write_bytes(bytes(content))
    return path


# --- `_metadata` truncated at the end of each distinct field ----------------------------


class _RecordingReader(DataReader):
    """Records, for each primitive read, where it ended and which metadata field read it."""

    def __init__(self, data: bytes) -> None:
        super().__init__(data)
        self.fields: list[tuple[int, str]] = []

    def _take(self, count: int) -> memoryview:
        view = super()._take(count)
        primitive = sys._getframe(1).f_code.co_name
        frame = sys._getframe(1)
        while frame is not None and not frame.f_code.co_filename.endswith("metadata.py"):
            frame = frame.f_back
        name = frame.f_code.co_name.replace("<genexpr>", "array") if frame else "envelope"
        field = f"{name}:{frame.f_lineno}" if frame else name
        self.fields.append((self.pos, f"{field}.{primitive}"))
        return view


def field_boundaries(data: bytes) -> list[tuple[int, str]]:
    """(position, field) for the first end of every distinct field, before the end of the file."""
    reader = _RecordingReader(data)
    reader.read_i32()
    version = reader.read_i32()
    _MetadataReader(reader, version).read()
    first: dict[str, int] = {"start": 0, "magic": 4, "version": 8}
    for position, field in reader.fields:
        if position < len(data) and not field.startswith("envelope"):
            first.setdefault(field, position)
    return sorted((position, field) for field, position in first.items())


def _truncate_to(position: int) -> Callable[[Path], Path]:
    def corrupt(sp: Path) -> Path:
        path = sp / "_metadata"
        path.write_bytes(path.read_bytes()[:position])
        return path

    return corrupt


TRUNCATED = ("truncated", "exceeds the file size", "checkpoint properties")


def _truncations() -> list[Case]:
    cases = []
    seen: set[str] = set()
    for fixture in (FILES, NATIVE, INLINE):
        data = (fixture_savepoint(fixture) / "_metadata").read_bytes()
        for position, field in field_boundaries(data):
            kind = field.split(":")[0] + "." + field.rsplit(".", 1)[-1]
            if field in seen:
                continue
            seen.add(field)
            cases.append(
                Case(
                    f"{fixture}/_metadata-truncated-at-{position}-{kind}",
                    fixture,
                    _truncate_to(position),
                    TRUNCATED,
                )
            )
    return cases


# --- envelope and handle codes --------------------------------------------------------


def _envelope_cases() -> list[Case]:
    def metadata_missing(sp: Path) -> Path:
        (sp / "_metadata").unlink()
        return sp

    return [
        Case(
            "wrong-magic",
            FILES,
            lambda sp: patch(sp / "_metadata", 0, b"\xca\xfe\xba\xbe"),
            ("bad magic number 0xCAFEBABE",),
        ),
        Case(
            "version-2",
            FILES,
            lambda sp: patch(sp / "_metadata", 4, b"\x00\x00\x00\x02"),
            ("unsupported metadata version 2",),
        ),
        Case(
            "version-99",
            FILES,
            lambda sp: patch(sp / "_metadata", 4, b"\x00\x00\x00\x63"),
            ("unsupported metadata version 99",),
        ),
        Case("no-metadata", FILES, metadata_missing, ("not a savepoint: no _metadata file",)),
        Case(
            "properties-tail-cut",
            FILES,
            lambda sp: _truncate_to(len((sp / "_metadata").read_bytes()) - 20)(sp),
            ("checkpoint properties",),
        ),
    ]


class _HandleRecorder(_MetadataReader):
    """Positions of the code byte of every non-null keyed, operator and stream handle."""

    def __init__(self, reader: DataReader, version: int) -> None:
        super().__init__(reader, version)
        self.codes: dict[str, list[int]] = {"keyed": [], "operator": [], "stream": []}

    def _record(self, kind: str) -> None:
        if self.r._data[self.r.pos] != 0:
            self.codes[kind].append(self.r.pos)

    def keyed_handle(self):  # type: ignore[no-untyped-def]
        self._record("keyed")
        return super().keyed_handle()

    def operator_handle(self):  # type: ignore[no-untyped-def]
        self._record("operator")
        return super().operator_handle()

    def stream_handle(self):  # type: ignore[no-untyped-def]
        self._record("stream")
        return super().stream_handle()


def handle_positions(data: bytes) -> dict[str, list[int]]:
    reader = DataReader(data)
    reader.read_i32()
    recorder = _HandleRecorder(reader, reader.read_i32())
    recorder.read()
    return recorder.codes


def _set_code(kind: str, code: int) -> Callable[[Path], Path]:
    def corrupt(sp: Path) -> Path:
        position = handle_positions((sp / "_metadata").read_bytes())[kind][0]
        return patch(sp / "_metadata", position, bytes((code,)))

    return corrupt


def _handle_code_cases() -> list[Case]:
    return [
        Case(
            "unknown-keyed-handle-code",
            FILES,
            _set_code("keyed", 42),
            ("unknown keyed state handle code 42",),
        ),
        Case(
            "unknown-operator-handle-code",
            FILES,
            _set_code("operator", 50),
            ("unknown operator state handle code 50",),
        ),
        Case(
            "unknown-stream-handle-code",
            FILES,
            _set_code("stream", 99),
            ("unknown stream state handle code 99",),
        ),
        Case(
            "unknown-keyed-handle-code-native",
            NATIVE,
            _set_code("keyed", 13 + 100),
            ("unknown keyed state handle code 113",),
        ),
    ]


# --- offsets ----------------------------------------------------------------------------


def _keyed_offset(uid: str, index: int, pick: int, value: Callable[[int], int]) -> Callable:
    """Set the `pick`-th non-zero key-group offset to `value(file size)`."""

    def corrupt(sp: Path) -> Path:
        md = load(sp)
        handle = keyed_handle(md, uid, index)
        offsets = list(handle.offsets)
        slot = [i for i, o in enumerate(offsets) if o][pick]
        offsets[slot] = value(handle.delegate.size)  # type: ignore[union-attr]
        save(
            sp,
            with_subtask(
                md,
                uid,
                index,
                managed_keyed_state=dataclasses.replace(handle, offsets=tuple(offsets)),
            ),
        )
        return _culprit(sp, handle)

    return corrupt


def _culprit(sp: Path, handle: KeyGroupsHandle | OperatorStateHandle) -> Path:
    if isinstance(handle.delegate, RelativeFileHandle):
        return sp / handle.delegate.relative_path
    return sp / "_metadata"  # inline state lives in `_metadata`


def _swap_offsets(sp: Path) -> Path:
    md = load(sp)
    handle = keyed_handle(md, "keyed-str", 0)
    offsets = list(handle.offsets)
    a, b = [i for i, o in enumerate(offsets) if o][1:3]
    offsets[a], offsets[b] = offsets[b], offsets[a]
    save(
        sp,
        with_subtask(
            md,
            "keyed-str",
            0,
            managed_keyed_state=dataclasses.replace(handle, offsets=tuple(offsets)),
        ),
    )
    return _culprit(sp, handle)


def _operator_offset(sp: Path) -> Path:
    md = load(sp)
    handle = subtask(md, "opstate", 1).managed_operator_state
    assert handle is not None
    first, *rest = handle.states
    moved = dataclasses.replace(first, offsets=(*first.offsets[:-1], handle.delegate.size + 8))  # type: ignore[union-attr]
    new = dataclasses.replace(handle, states=(moved, *rest))
    save(sp, with_subtask(md, "opstate", 1, managed_operator_state=new))
    return _culprit(sp, handle)


OUTSIDE = ("is outside the file",)


def _offset_cases() -> list[Case]:
    return [
        Case("keyed-offset-past-end", FILES, _keyed_offset("keyed-str", 1, -1, lambda n: n + 100), OUTSIDE),
        Case("keyed-offset-at-end", FILES, _keyed_offset("keyed-long", 0, -1, lambda n: n), OUTSIDE),
        Case("keyed-first-offset-past-end", FILES, _keyed_offset("keyed-long", 1, 0, lambda n: n + 1), OUTSIDE),
        Case("keyed-offset-negative", FILES, _keyed_offset("keyed-str", 0, 2, lambda n: -7), OUTSIDE),
        Case("inline-offset-past-end", INLINE, _keyed_offset("keyed-str", 0, -1, lambda n: n + 5), OUTSIDE),
        Case("keyed-offsets-out-of-order", FILES, _swap_offsets, ("offsets must ascend", "is not below")),
        Case("operator-offset-past-end", FILES, _operator_offset, OUTSIDE),
    ]  # fmt: skip


# --- state files ----------------------------------------------------------------------


def _remove(uid: str, index: int, kind: str) -> Callable[[Path], Path]:
    def corrupt(sp: Path) -> Path:
        path = state_file(sp, uid, index, kind)
        path.unlink()
        return path

    return corrupt


def _resize(uid: str, index: int, kind: str, delta: int) -> Callable[[Path], Path]:
    def corrupt(sp: Path) -> Path:
        path = state_file(sp, uid, index, kind)
        data = path.read_bytes()
        path.write_bytes(data[:delta] if delta < 0 else data + b"\x00" * delta)
        return path

    return corrupt


MISSING = ("file not found",)
SHORTER = ("shorter than its handle says",)


def _file_cases() -> list[Case]:
    return [
        Case("keyed-file-missing", FILES, _remove("keyed-str", 0, "keyed"), MISSING),
        Case("keyed-file-missing-p300", MAXP300, _remove("keyed-long", 1, "keyed"), MISSING),
        Case("operator-file-missing", FILES, _remove("opstate", 1, "operator"), MISSING),
        Case("broadcast-file-missing", FILES, _remove("bcast", 0, "operator"), MISSING),
        Case("keyed-file-shortened", FILES, _resize("keyed-long", 1, "keyed", -10), SHORTER),
        Case("keyed-file-shortened-by-1", COMPRESSED, _resize("keyed-str", 0, "keyed", -1), SHORTER),
        Case("keyed-file-emptied", FILES, _resize("keyed-str", 1, "keyed", -100000), SHORTER),
        Case("operator-file-shortened", FILES, _resize("opstate", 0, "operator", -3), SHORTER),
        Case("file-name-with-nul", FILES, _nul_in_name, ("not a valid file name",)),
        Case("keyed-file-longer", FILES, _resize("keyed-str", 0, "keyed", 16), ("longer than its handle says",)),
    ]  # fmt: skip


def _nul_in_name(sp: Path) -> Path:
    """A relative file name with a NUL byte: no filesystem accepts it."""
    md = load(sp)
    handle = keyed_handle(md, "keyed-str", 0)
    assert isinstance(handle.delegate, RelativeFileHandle)
    name = handle.delegate.relative_path + "\x00x"
    delegate = dataclasses.replace(handle.delegate, relative_path=name)
    new = dataclasses.replace(handle, delegate=delegate)
    save(sp, with_subtask(md, "keyed-str", 0, managed_keyed_state=new))
    return sp / name


def _native_file(pick: Callable[[list[tuple[str, str]]], str], action: str) -> Callable:
    """Remove or shorten one file of keyed-str subtask 0's RocksDB instance."""

    def corrupt(sp: Path) -> Path:
        handle = subtask(load(sp), "keyed-str", 0).managed_keyed_state
        files = [(f.local_path, f.handle.relative_path) for f in handle.shared + handle.private]  # type: ignore[union-attr]
        meta = ("<meta>", handle.meta.relative_path)  # type: ignore[union-attr]
        name = pick([meta, *files])
        path = sp / name
        if action == "remove":
            path.unlink()
        else:
            path.write_bytes(path.read_bytes()[:-5])
        return path

    return corrupt


def _by_kind(prefix: str) -> Callable[[list[tuple[str, str]]], str]:
    return lambda files: next(
        name for local, name in files if local.startswith(prefix) or local.endswith(prefix)
    )


def _native_cases() -> list[Case]:
    return [
        Case("native-sst-missing", NATIVE, _native_file(_by_kind(".sst"), "remove"), MISSING),
        Case("native-manifest-missing", NATIVE, _native_file(_by_kind("MANIFEST"), "remove"), MISSING),
        Case("native-meta-missing", NATIVE, _native_file(_by_kind("<meta>"), "remove"), MISSING),
        Case("native-sst-shortened", NATIVE, _native_file(_by_kind(".sst"), "shorten"), SHORTER),
        Case("native-current-shortened", NATIVE, _native_file(_by_kind("CURRENT"), "shorten"), SHORTER),
    ]  # fmt: skip


# --- key-group ranges and subtasks -------------------------------------------------------


def _shift_range(uid: str, index: int, start_delta: int) -> Callable[[Path], Path]:
    """Move the start of a subtask's range: -1 overlaps its left neighbour, +1 leaves a gap."""

    def corrupt(sp: Path) -> Path:
        md = load(sp)
        handle = keyed_handle(md, uid, index)
        offsets = (0,) * -start_delta + handle.offsets[max(start_delta, 0) :]
        # A gap drops only empty key groups, so the only problem is the gap itself.
        assert not any(handle.offsets[: max(start_delta, 0)])
        new = dataclasses.replace(
            handle, start_key_group=handle.start_key_group + start_delta, offsets=offsets
        )
        return save(sp, with_subtask(md, uid, index, managed_keyed_state=new))

    return corrupt


def _extend_range(sp: Path) -> Path:
    md = load(sp)
    handle = keyed_handle(md, "keyed-str", 1)
    new = dataclasses.replace(handle, offsets=(*handle.offsets, 0, 0))
    return save(sp, with_subtask(md, "keyed-str", 1, managed_keyed_state=new))


def _duplicate_subtask(sp: Path) -> Path:
    md = load(sp)
    op = operator(md, "opstate")
    first = op.subtasks[0]  # type: ignore[index]
    return save(sp, with_operator(md, "opstate", subtasks=(first, first)))


def _subtask_index(sp: Path) -> Path:
    return save(sp, with_subtask(load(sp), "keyed-long", 1, index=2))


def _parallelism(sp: Path) -> Path:
    md = load(sp)
    return save(sp, with_operator(md, "keyed-long", max_parallelism=1))


def _range_cases() -> list[Case]:
    return [
        Case("key-groups-overlap", FILES, _shift_range("keyed-str", 1, -1), ("claimed by more than one subtask",)),
        Case("key-groups-missing", FILES, _shift_range("keyed-long", 1, 1), ("belong to no subtask",)),
        Case("key-groups-missing-p300", MAXP300, _shift_range("keyed-str", 1, 3), ("belong to no subtask",)),
        Case("key-groups-past-max-parallelism", FILES, _extend_range, ("outside 0–127",)),
        Case("subtask-twice", FILES, _duplicate_subtask, ("appears more than once",)),
        Case("subtask-index-past-parallelism", FILES, _subtask_index, ("not below the parallelism 2",)),
        Case("parallelism-above-max-parallelism", FILES, _parallelism, ("is outside 1..1",)),
    ]  # fmt: skip


# --- headers ----------------------------------------------------------------------------


def _header_version(uid: str, index: int, kind: str) -> Callable[[Path], Path]:
    return lambda sp: patch(state_file(sp, uid, index, kind), 0, b"\x00\x00\x00\x63")


def _header_cases() -> list[Case]:
    return [
        Case("keyed-header-version", FILES, _header_version("keyed-str", 0, "keyed"), ("unsupported keyed state header version 99",)),
        Case("operator-header-version", FILES, _header_version("opstate", 1, "operator"), ("unsupported operator state header version 99",)),
        Case("keyed-header-state-count", FILES, lambda sp: _state_count(sp), ("negative number of states", "keyed state header")),
    ]  # fmt: skip


def _state_count(sp: Path) -> Path:
    """Break the i16 state count after the key serializer snapshot (a negative count)."""
    from statectl.formats.state_headers import parse_keyed_header

    path = state_file(sp, "keyed-long", 0)
    data = path.read_bytes()
    handle = keyed_handle(load(sp), "keyed-long", 0)
    header = data[: min(o for o in handle.offsets if o)]
    snapshot_end = header.index(b"LongSerializerSnapshot") + len(b"LongSerializerSnapshot") + 4
    assert parse_keyed_header(header).states  # the count sits right after the snapshot version
    return patch(path, snapshot_end, b"\xff\xf0")


# --- bytes inside key-group blocks and operator-state elements (deep) -------------------


def _first_block(sp: Path, uid: str, index: int) -> tuple[Path, int, int]:
    """The state file, the key group and the offset of the first non-empty key group."""
    handle = keyed_handle(load(sp), uid, index)
    slot = next(i for i, o in enumerate(handle.offsets) if o)
    return state_file(sp, uid, index), handle.start_key_group + slot, handle.offsets[slot]


def _flip_key_length(sp: Path) -> Path:
    path, _, offset = _first_block(sp, "keyed-str", 0)
    return patch(path, offset + 2, b"\x7f")  # the first key's i32 length: now ~2 GB


def _flip_compressed(sp: Path) -> Path:
    path, _, offset = _first_block(sp, "keyed-str", 1)
    position = offset + 10 + 8 + 3  # inside the first chunk's payload
    data = path.read_bytes()
    return patch(path, position, bytes((data[position] ^ 0x01,)))


def _flip_prefix(sp: Path) -> Path:
    path, key_group, offset = _first_block(sp, "keyed-long", 0)
    data = path.read_bytes()
    position = offset + 2 + 4  # first byte of the first key: flag bit + key-group prefix
    return patch(path, position, bytes(((data[position] & 0x80) | (key_group + 1),)))


def _flip_key(sp: Path) -> Path:
    """Change the last byte of the first Long key so that it hashes to another key group."""
    md = load(sp)
    path, key_group, offset = _first_block(sp, "keyed-long", 1)
    max_parallelism = operator(md, "keyed-long").max_parallelism
    prefix = java_types.key_group_prefix_bytes(max_parallelism)
    data = path.read_bytes()
    key_end = offset + 2 + 4 + prefix + 8
    long_type = java_types.KEY_TYPES["org.apache.flink.api.common.typeutils.base.LongSerializer"]
    for candidate in range(256):
        key = bytearray(data[key_end - 8 : key_end])
        key[-1] = candidate
        value, _ = long_type.read(bytes(key))
        if long_type.key_group(value, max_parallelism) != key_group:
            return patch(path, key_end - 1, bytes((candidate,)))
    raise AssertionError("no byte moves the key to another key group")


def _flip_operator_chunk(sp: Path) -> Path:
    """A compressed list element's Snappy chunk claims more bytes than the element has."""
    md = load(sp)
    handle = subtask(md, "opstate", 0).managed_operator_state
    assert handle is not None
    offset = handle.states[0].offsets[0]
    return patch(state_file(sp, "opstate", 0, "operator"), offset + 1, b"\x7f")


def _block_cases() -> list[Case]:
    walkers = BLOCK_WALKERS
    return [
        Case("block-key-length-flipped", FILES, _flip_key_length, ("runs past the end of the key-group block",), walkers),
        Case("block-key-length-flipped-p300", MAXP300, _flip_key_length, ("runs past the end of the key-group block",), walkers),
        Case("compressed-block-byte-flipped", COMPRESSED, _flip_compressed, ("checksum", "Snappy", "snappy", "CRC", "key-group block"), walkers),
        Case("block-key-group-prefix-flipped", FILES, _flip_prefix, ("carry another key-group prefix",), frozenset({"verify --deep"})),
        Case("block-key-hashes-elsewhere", FILES, _flip_key, ("do not hash to it",), frozenset({"verify --deep"})),
        Case("block-key-hashes-elsewhere-p300", MAXP300, _flip_key, ("do not hash to it",), frozenset({"verify --deep"})),
        Case("operator-chunk-length-flipped", COMPRESSED, _flip_operator_chunk, ("Snappy chunk",), frozenset({"verify --deep", "rescale"}), reaches_spark=True),
    ]  # fmt: skip
