"""RocksDB instances behind native keyed handles (codes 11 and 5), read through rocksdict.

Reading mirrors Flink's `RocksDBIncrementalRestoreOperation`: a handle's shared and private files
are gathered under their local names into one folder, and the instance is opened with one column
family per state of the meta file's `KeyedBackendSerializationProxy` (named by the state).
Writing mirrors `RocksFullSnapshotStrategy` with `RocksStatesPerKeyGroupMergeIterator`: per key
group one canonical block with a run per state in kvStateId order, rows in key order, the row
bytes copied as they are (flink-savepoint-format.md §4.4, §4.6, §5.1–§5.3).

Rows are read only inside the handle's key-group range: after a rescale in Flink an instance's
files may still hold (range-deleted or not) keys of key groups it does not own.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from statectl.errors import FormatError, SavepointError, StatectlError, UnsupportedError
from statectl.formats import keyed_blocks, state_headers
from statectl.formats.handles import (
    EmptySegmentFileHandle,
    IncrementalKeyedHandle,
    SegmentFileHandle,
)
from statectl.savepoint.model import Savepoint, StateStream

if TYPE_CHECKING:
    from rocksdict import Rdict

WORK_DIR_ENV = "STATECTL_LOCAL_DIR"
_ASYNC_STATE_TYPE = "KEY_VALUE_V2"
_TAKE_CANONICAL = "take a CANONICAL savepoint with Flink instead"
_SEGMENT_CHUNK = 8 << 20  # bytes per read when copying a segment out of its physical file


@dataclass(frozen=True)
class NativeFile:
    """One file of a RocksDB instance: its name inside the instance folder and its bytes."""

    local_path: str
    stream: StateStream
    shared: bool
    segment: bool = False  # a file-merging segment: a byte range of a shared physical file

    @property
    def kind(self) -> str:
        return file_kind(self.local_path)


@dataclass(frozen=True)
class NativeInstance:
    """A RocksDB instance of one subtask, as its handle describes it."""

    description: str
    key_groups: tuple[int, int] | None
    checkpoint_id: int
    backend_id: str
    meta: StateStream
    files: tuple[NativeFile, ...]

    @property
    def size(self) -> int:
        return self.meta.size + sum(f.stream.size for f in self.files)


def file_kind(local_path: str) -> str:
    """SST, MANIFEST, CURRENT, OPTIONS (what RocksDB names its files), else OTHER."""
    name = local_path.rsplit("/", 1)[-1]
    if name.endswith(".sst"):
        return "SST"
    for kind in ("MANIFEST", "CURRENT", "OPTIONS"):
        if name.startswith(kind):
            return kind
    return "OTHER"


def native_instance(sp: Savepoint, handle: IncrementalKeyedHandle, where: str) -> NativeInstance:
    """Resolve every file of `handle`, file-merging segments included."""
    description = f"{where}: RocksDB instance {handle.backend_id}"
    if handle.meta is None:
        raise FormatError("native keyed handle without a meta file", description)
    files = []
    for local_file, shared in [(f, True) for f in handle.shared] + [
        (f, False) for f in handle.private
    ]:
        if local_file.handle is None or "/" in local_file.local_path.strip("/"):
            raise FormatError(f"unexpected file entry {local_file.local_path!r}", description)
        segment = isinstance(local_file.handle, SegmentFileHandle | EmptySegmentFileHandle)
        stream = sp.stream(local_file.handle)
        files.append(NativeFile(local_file.local_path, stream, shared, segment))
    return NativeInstance(
        description,
        handle.key_groups,
        handle.checkpoint_id,
        handle.backend_id,
        sp.stream(handle.meta),
        tuple(files),
    )


def meta_header(instance: NativeInstance) -> tuple[bytes, state_headers.KeyedStateHeader]:
    """The meta file: exactly a keyed serializer-proxy header, usable as a canonical header."""
    data = instance.meta.read()
    try:
        header = state_headers.parse_keyed_header(data)
    except StatectlError as exc:
        raise exc.with_source(instance.meta.description) from None
    if not header.complete and header.problem:
        raise UnsupportedError(
            f"cannot read the state list of the meta file ({header.problem})",
            instance.meta.description,
        )
    for state in header.states:
        if state.backend_state_type == _ASYNC_STATE_TYPE:
            raise UnsupportedError(
                f"state {state.name!r} uses the async state API (ForSt), whose native layout "
                f"statectl does not read; {_TAKE_CANONICAL}",
                instance.description,
            )
    return data, header


# --- opening an instance -----------------------------------------------------------------


def work_root() -> str:
    """Local disk for working folders: $STATECTL_LOCAL_DIR, Spark's local dir, or the temp dir."""
    explicit = os.environ.get(WORK_DIR_ENV)
    if explicit:
        return explicit
    spark_dirs = os.environ.get("SPARK_LOCAL_DIRS", "")
    first = spark_dirs.split(",")[0].strip()
    return first if first and os.path.isdir(first) else tempfile.gettempdir()


@contextlib.contextmanager
def opened(instance: NativeInstance) -> Iterator[OpenInstance]:
    """The instance opened read-only in a local working folder, removed afterwards."""
    folder = tempfile.mkdtemp(prefix="statectl-rocksdb-", dir=work_root())
    try:
        for file in instance.files:
            _gather(file, os.path.join(folder, file.local_path))
        db = _open(folder, instance)
        try:
            yield OpenInstance(db, instance)
        finally:
            db.close()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _gather(file: NativeFile, target: str) -> None:
    """Local files are linked, inline ones written, remote ones downloaded, segments copied."""
    stream = file.stream
    if stream.inline is not None or file.segment:
        with open(target, "wb") as out:
            for start in range(0, stream.size, _SEGMENT_CHUNK):
                out.write(stream.read(start, min(start + _SEGMENT_CHUNK, stream.size)))
        return
    assert stream.location is not None
    location = stream.location
    try:
        if location.is_local:
            os.symlink(os.path.abspath(location.path), target)
        else:
            location.fs.get_file(location.path, target)
        size = os.stat(target).st_size
    except FileNotFoundError:
        raise SavepointError("file not found", stream.description) from None
    if size != stream.size:
        raise SavepointError(
            f"file has {size} bytes, its handle says {stream.size}", stream.description
        )


def _open(folder: str, instance: NativeInstance) -> Rdict:
    from rocksdict import AccessType, Options, Rdict

    try:
        # The OPTIONS file carries Flink's merge operator (list state), so merge operands that
        # sit in different SST files (incremental checkpoints) read back merged.
        _, column_families = Options.load_latest(folder, ignore_unknown_options=True)
        return Rdict(
            folder,
            options=Options(raw_mode=True),
            column_families=column_families,
            access_type=AccessType.read_only(),
        )
    except Exception as exc:  # rocksdict raises plain Exception
        raise UnsupportedError(
            f"rocksdict cannot open this RocksDB instance ({exc}); files of a RocksDB or "
            f"ForSt version it does not read? {_TAKE_CANONICAL}",
            instance.description,
        ) from None


class OpenInstance:
    """Rows of an opened instance, clipped to its handle's key-group range."""

    def __init__(self, db: Rdict, instance: NativeInstance) -> None:
        self.db = db
        self.instance = instance

    def column_families(self) -> list[str]:
        from rocksdict import Rdict

        return [name for name in Rdict.list_cf(self.db.path()) if name != "default"]

    def rows(
        self, state: str, first: int, last: int, prefix_bytes: int, keys_only: bool = False
    ) -> Iterator[Any]:
        """(key, value) rows (or keys) of one column family in key groups first..last."""
        from rocksdict import ReadOptions

        # Key groups a prefix can hold: a corrupt handle may claim more.
        clipped = _clip(self.instance.key_groups, max(first, 0), min(last, 256**prefix_bytes - 1))
        if clipped is None:
            return iter(())
        start, end = clipped
        try:
            family = self.db.get_column_family(state)
        except Exception:  # a state registered but never written has no column family
            return iter(())
        read_options = ReadOptions()
        if (end + 1) < (1 << (8 * prefix_bytes)):
            read_options.set_iterate_upper_bound((end + 1).to_bytes(prefix_bytes, "big"))
        return _iterate(family, read_options, start.to_bytes(prefix_bytes, "big"), keys_only)

    def blocks(
        self, states: Sequence[tuple[str, int]], first: int, last: int, prefix_bytes: int
    ) -> Iterator[tuple[int, bytes]]:
        """(key group, canonical block) for every non-empty key group, ascending.

        `states` maps column families to state ids of the new header, in ascending id order.
        """
        iterators = [self.rows(name, first, last, prefix_bytes) for name, _ in states]
        heads = [next(it, None) for it in iterators]
        while True:
            present = [_key_group(head[0], prefix_bytes) for head in heads if head is not None]
            if not present:
                return
            key_group = min(present)
            runs = []
            for index, (_, state_id) in enumerate(states):
                entries = []
                head = heads[index]
                while head is not None and _key_group(head[0], prefix_bytes) == key_group:
                    entries.append(head)
                    head = next(iterators[index], None)
                heads[index] = head
                runs.append((state_id, entries))
            try:
                yield key_group, keyed_blocks.build_block(runs)
            except ValueError as exc:
                raise FormatError(
                    f"key group {key_group}: {exc}", self.instance.description
                ) from None

    def count(self, state: str, prefix_bytes: int) -> int:
        """Rows of one column family inside the handle's key-group range."""
        if self.instance.key_groups is None:
            return 0
        first, last = self.instance.key_groups
        return sum(1 for _ in self.rows(state, first, last, prefix_bytes, keys_only=True))


def _iterate(family: Rdict, read_options: Any, lower: bytes, keys_only: bool) -> Iterator[Any]:
    """A generator, so the column family and the read options (which own the upper bound's
    buffer) stay alive as long as the native iterator that uses them."""
    if keys_only:
        yield from family.keys(from_key=lower, read_opt=read_options)
    else:
        yield from family.items(from_key=lower, read_opt=read_options)


def _clip(owned: tuple[int, int] | None, first: int, last: int) -> tuple[int, int] | None:
    if owned is None:
        return None
    start, end = max(first, owned[0]), min(last, owned[1])
    return (start, end) if start <= end else None


def _key_group(key: bytes, prefix_bytes: int) -> int:
    return key[0] if prefix_bytes == 1 else int.from_bytes(key[:prefix_bytes], "big")


# --- what the rescale job and inspect call -------------------------------------------------


def read_blocks(
    instance: NativeInstance,
    states: Sequence[tuple[str, int]],
    first: int,
    last: int,
    prefix_bytes: int,
) -> Iterator[tuple[int, bytes]]:
    """Canonical blocks of key groups first..last (clipped to what the instance owns)."""
    with opened(instance) as db:
        yield from db.blocks(states, first, last, prefix_bytes)


def count_entries(instance: NativeInstance, prefix_bytes: int) -> dict[str, int]:
    """Entries per state (rows per column family in the owned range), as canonical blocks count."""
    _, header = meta_header(instance)
    with opened(instance) as db:
        return {s.name: db.count(s.name, prefix_bytes) for s in header.states}


# `SavepointFormatType.NATIVE` as Java serialization writes the enum constant's name (TC_STRING).
_NATIVE_CONSTANT = b"\x74\x00\x06NATIVE"
_CANONICAL_CONSTANT = b"\x74\x00\x09CANONICAL"


def canonical_savepoint_properties(properties: bytes) -> bytes:
    """The `_metadata` tail of a NATIVE savepoint rewritten to say CANONICAL (else unchanged).

    The format type is an enum constant, serialized by name; no length elsewhere covers it.
    """
    from statectl.formats.metadata import snapshot_kind

    kind = snapshot_kind(properties) if properties else None
    if kind is None or kind.format != "NATIVE" or properties.count(_NATIVE_CONSTANT) != 1:
        return properties
    patched = properties.replace(_NATIVE_CONSTANT, _CANONICAL_CONSTANT)
    patched_kind = snapshot_kind(patched)
    converted = patched_kind is not None and patched_kind.format == "CANONICAL"
    return patched if converted else properties
