"""RocksDB instances behind native keyed handles (codes 11 and 5), read through rocksdict.

Reading mirrors Flink's `RocksDBIncrementalRestoreOperation`: a handle's shared and private files
are gathered under their local names into one folder, and the instance is opened with one column
family per state of the meta file's `KeyedBackendSerializationProxy` (named by the state).
Writing mirrors `RocksFullSnapshotStrategy` with `RocksStatesPerKeyGroupMergeIterator`: per key
group one canonical block with a run per state in kvStateId order, rows in key order, the row
bytes copied as they are (flink-savepoint-format.md §4.4, §4.6, §5.1–§5.3).

Rows are read only inside the handle's key-group range: after a rescale in Flink an instance's
files may still hold (range-deleted or not) keys of key groups it does not own.

Corrupt files fail, never shrink the state: the instance is opened with paranoid checks (MANIFEST
records and table footers, indexes and properties checksummed at open), blocks are read with
their checksums verified, and a scan that stops is checked through the iterator's status, which is
the only place RocksDB reports a block that failed its checksum mid-scan.
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import operator
import os
import re
import shutil
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from statectl.errors import FormatError, SavepointError, StatectlError, UnsupportedError
from statectl.formats import state_headers
from statectl.formats.handles import (
    EmptySegmentFileHandle,
    IncrementalKeyedHandle,
    SegmentFileHandle,
)
from statectl.formats.state_headers import KeyedStateHeader
from statectl.savepoint.keyed import read_header
from statectl.savepoint.model import Savepoint, StateStream

if TYPE_CHECKING:
    from rocksdict import Options, Rdict

    from statectl.savepoint import native_rows

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
    files: list[NativeFile] = []
    names: set[str] = set()
    for local_file, shared in [(f, True) for f in handle.shared] + [
        (f, False) for f in handle.private
    ]:
        _check_local_name(local_file.local_path, names, description)
        names.add(local_file.local_path)
        if local_file.handle is None:
            raise FormatError(f"file entry {local_file.local_path!r} has no handle", description)
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


def _check_local_name(name: str, taken: set[str], description: str) -> None:
    """A local name is where `opened` writes the file: a plain name inside the instance folder.

    Flink's `HandleAndLocalPath` holds the RocksDB file name ("000012.sst"); anything else in a
    `_metadata` (a path, "..", NUL) could write outside the working folder.
    """
    if name in ("", ".", "..") or any(c in name for c in "/\\\x00"):
        raise FormatError(f"file entry {name!r} is not a plain file name", description)
    if name in taken:
        raise FormatError(f"file entry {name!r} appears twice", description)


def meta_header(instance: NativeInstance) -> tuple[bytes, KeyedStateHeader]:
    """The meta file's header (`keyed.read_header`), usable as a canonical header: its state
    list read in full, and no state of the async state API."""
    data, header = read_header(instance.meta)
    if not header.complete and header.problem:
        raise UnsupportedError(
            f"cannot read the state list of the meta file ({header.problem})",
            instance.meta.description,
        )
    try:
        state_headers.require_state_list(header, "keyed state")
    except StatectlError as exc:
        raise exc.with_source(instance.meta.description) from None
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
    """The instance opened read-only in a local working folder. The last few opened stay open
    (`_OpenInstances`): reading an operator's states one by one would otherwise gather, open
    (with paranoid checks) and remove each instance once per state."""
    entry = _OPEN.acquire(instance)
    try:
        yield entry.instance
    finally:
        _OPEN.release(entry)


@dataclass
class _Opened:
    folder: str
    instance: OpenInstance
    users: int = 0


class _OpenInstances:
    """Instances opened read-only, kept while in use and the `keep` last ones after; an
    instance is known by its files' names, sizes and (local ones) modification times."""

    def __init__(self, keep: int) -> None:
        self.keep = keep
        self.lock = threading.Lock()
        self.entries: OrderedDict[tuple[Any, ...], _Opened] = OrderedDict()
        atexit.register(self.close_all)

    def acquire(self, instance: NativeInstance) -> _Opened:
        key = _identity(instance)
        with self.lock:
            entry = self.entries.get(key)
            if entry is not None:
                return self._use(key, entry)
        fresh = _open_in_folder(instance)  # outside the lock: it may download files
        with self.lock:
            entry = self._use(key, self.entries.setdefault(key, fresh))
        if entry is not fresh:  # another thread opened it meanwhile
            _close(fresh)
        return entry

    def _use(self, key: tuple[Any, ...], entry: _Opened) -> _Opened:
        self.entries.move_to_end(key)
        entry.users += 1
        return entry

    def release(self, entry: _Opened) -> None:
        with self.lock:
            entry.users -= 1
            idle = [key for key, e in self.entries.items() if e.users == 0]
            for key in idle[: max(0, len(self.entries) - self.keep)]:  # the least recent first
                _close(self.entries.pop(key))

    def close_all(self) -> None:
        with self.lock:
            while self.entries:
                _close(self.entries.popitem()[1])


def _identity(instance: NativeInstance) -> tuple[Any, ...]:
    files = []
    for file in (*instance.files, None):
        stream = instance.meta if file is None else file.stream
        location = stream.location
        changed = None
        if location is not None and location.is_local:
            with contextlib.suppress(OSError):
                changed = os.stat(location.path).st_mtime_ns
        name = file.local_path if file is not None else None
        files.append((name, stream.description, stream.start, stream.size, changed))
    return instance.description, instance.key_groups, tuple(files)


def _open_in_folder(instance: NativeInstance) -> _Opened:
    folder = tempfile.mkdtemp(prefix="statectl-rocksdb-", dir=work_root())
    try:
        for file in instance.files:
            _gather(file, os.path.join(folder, file.local_path))
        db = _open(folder, instance)
        try:
            _check_live_files(db, instance)
            _check_column_families(db, instance)
        except BaseException:
            db.close()
            raise
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return _Opened(folder, OpenInstance(db, instance))


def _close(entry: _Opened) -> None:
    with contextlib.suppress(Exception):
        entry.instance.db.close()
    shutil.rmtree(entry.folder, ignore_errors=True)


def _check_column_families(db: Rdict, instance: NativeInstance) -> None:
    """Flink creates a column family for every state it registers, named as in the meta: a
    column family the meta does not name (or a state without one) would be read as nothing."""
    from rocksdict import Rdict

    families = {name for name in Rdict.list_cf(db.path()) if name != "default"}
    states = {state.name for state in meta_header(instance)[1].states}
    unnamed = sorted(families - states)
    missing = sorted(states - families)
    if unnamed or missing:
        what = (
            f"column family {unnamed[0]!r} is no state of its meta"
            if unnamed
            else f"state {missing[0]!r} of its meta has no column family"
        )
        raise FormatError(
            f"{instance.description}: {what} (column families: {', '.join(sorted(families))})",
            instance.meta.description,
        )


def copy_files(instance: NativeInstance, folder: str) -> None:
    """Every file of the instance copied into `folder` under its local name (to be written)."""
    for file in instance.files:
        _gather(file, os.path.join(folder, file.local_path), link=False)


def fetch_file(file: NativeFile, target: str) -> None:
    """One file of an instance copied to the local path `target`: downloaded, written from
    its inline bytes or its segment of a merged file, or copied."""
    _gather(file, target, link=False)


def _gather(file: NativeFile, target: str, link: bool = True) -> None:
    """Local files are linked (copied unless `link`), inline ones written, remote ones
    downloaded, segments copied."""
    stream = file.stream
    location = stream.location
    if location is None or file.segment or (location.is_local and not link):
        with open(target, "wb") as out:
            for start in range(0, stream.size, _SEGMENT_CHUNK):
                out.write(stream.read(start, min(start + _SEGMENT_CHUNK, stream.size)))
        return
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


# Section lines of an OPTIONS file as RocksDB's `PersistRocksDBOptions` writes them: Flink's
# `RocksDBResourceContainer` always configures block-based tables.
_OPTIONS_SECTION = re.compile(
    r'\[(?:Version|DBOptions|(CFOptions|TableOptions/BlockBasedTable) "(.*)")\]'
)

# Flink's list state: RocksDB's StringAppendTESTOperator joining elements with ','.
_MERGE_DELIMITER = re.compile(r"merge_operator=.*delimiter=([^;}]*)")


def _check_options_file(folder: str, file: NativeFile, description: str) -> None:
    """Every section of an OPTIONS file is one RocksDB writes, every column family has its
    table options, and list state merges with Flink's delimiter.

    OPTIONS files carry no checksum, and RocksDB (through rocksdict) crashes the process on a
    column family whose table-options section lost its name to a damaged byte.
    """
    with open(os.path.join(folder, file.local_path), "rb") as handle:
        text = handle.read().decode("utf-8", errors="replace")
    sections: dict[str, set[str]] = {"CFOptions": set(), "TableOptions/BlockBasedTable": set()}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        delimiter = _MERGE_DELIMITER.match(line)
        if delimiter is not None and delimiter.group(1) != ",":
            raise FormatError(
                f"{description}: {file.local_path} line {number}: list state's merge operator "
                f"joins with {delimiter.group(1)!r}, Flink's with ','",
                file.stream.description,
            )
        if not line.startswith("["):
            continue
        match = _OPTIONS_SECTION.fullmatch(line)
        if match is None:
            raise FormatError(
                f"{description}: {file.local_path} line {number}: unknown section {line!r}",
                file.stream.description,
            )
        if match.group(1):
            sections[match.group(1)].add(match.group(2))
    for name in sorted(sections["CFOptions"] ^ sections["TableOptions/BlockBasedTable"]):
        raise FormatError(
            f"{description}: {file.local_path}: column family {name!r} lacks its CFOptions or "
            "TableOptions section",
            file.stream.description,
        )


def column_family_options(folder: str, instance: NativeInstance) -> dict[str, Options]:
    """The column families' options of the instance gathered in `folder`, from its checked
    OPTIONS file: they carry Flink's merge operator (list state), so merge operands that sit in
    different SST files (incremental checkpoints) read back merged."""
    from rocksdict import Options

    for file in instance.files:
        if file.kind == "OPTIONS":
            _check_options_file(folder, file, instance.description)
    try:
        _, column_families = Options.load_latest(folder, ignore_unknown_options=True)
    except Exception as exc:  # rocksdict raises plain Exception
        options_file = next((f for f in instance.files if f.kind == "OPTIONS"), None)
        raise FormatError(
            f"{instance.description}: RocksDB cannot read its OPTIONS file "
            f"({_local_text(exc, folder)})",
            options_file.stream.description if options_file else instance.meta.description,
        ) from None
    return column_families


def _open(folder: str, instance: NativeInstance) -> Rdict:
    from rocksdict import AccessType, Options, Rdict

    column_families = column_family_options(folder, instance)
    options = Options(raw_mode=True)
    # A corrupt MANIFEST record fails the open instead of being skipped (with the files it adds).
    options.set_paranoid_checks(True)
    try:
        return Rdict(
            folder,
            options=options,
            column_families=column_families,
            access_type=AccessType.read_only(),
        )
    except Exception as exc:  # rocksdict raises plain Exception
        corrupt = _corruption(exc, folder, instance)
        if corrupt is not None:
            raise corrupt from None
        raise UnsupportedError(
            f"{instance.description}: rocksdict cannot open this RocksDB instance "
            f"({_local_text(exc, folder)}); files of a RocksDB or ForSt version it does not "
            f"read? {_TAKE_CANONICAL}",
            instance.meta.description,
        ) from None


def _local_text(exc: Exception, folder: str) -> str:
    """RocksDB's message on one printable line, with the working folder left out of its paths
    (it may quote bytes of a damaged file)."""
    text = str(exc).replace(folder.rstrip("/") + "/", "")
    return " ".join("".join(c if c.isprintable() else "?" for c in text).split())


_MAY_BE_CORRUPTED = re.compile(r"The file (\S+) may be corrupted\.")
# What RocksDB's `log::Reader` reports of a damaged MANIFEST record.
_LOG_RECORD_ERRORS = ("checksum mismatch", "bad record length", "unknown record type")


def _culprits(text: str) -> list[str]:
    """File names RocksDB's message blames, most specific first.

    RocksDB appends "The file MANIFEST-… may be corrupted." to any failure while it recovers,
    also when a table the MANIFEST lists fails to open: the MANIFEST is at fault only when the
    failure is one of its own records.
    """
    suffix = _MAY_BE_CORRUPTED.search(text)
    reason = _MAY_BE_CORRUPTED.sub("", text).removeprefix("Corruption:").strip()
    names = re.findall(r"[^\s/:,()]+", reason)
    if suffix is not None and reason.startswith(_LOG_RECORD_ERRORS):
        names.append(suffix.group(1))
    return names


def _corruption(exc: Exception, folder: str, instance: NativeInstance) -> FormatError | None:
    """RocksDB's `Status::Corruption` as a FormatError naming the file it names (else the
    instance); None for other failures."""
    text = _local_text(exc, folder)
    if "Corruption" not in text and "checksum mismatch" not in text:
        return None
    by_name = {f.local_path: f for f in instance.files}
    named = next((by_name[m] for m in _culprits(text) if m in by_name), None)
    if named is None:
        return FormatError(f"RocksDB reports a corrupt file ({text})", instance.description)
    return FormatError(
        f"{instance.description}: file {named.local_path} is corrupt ({text})",
        named.stream.description,
    )


def rocksdb_error(exc: Exception, folder: str, instance: NativeInstance) -> FormatError:
    """What RocksDB raised on `instance` (opened in `folder`), as one line naming the file it
    blames (for writers that open a copy of an instance, see `native_writer`)."""
    corrupt = _corruption(exc, folder, instance)
    if corrupt is not None:
        return corrupt
    return FormatError(f"RocksDB: {_local_text(exc, folder)}", instance.description)


def local_text(exc: Exception, folder: str) -> str:
    """`_local_text` for writers that open a copy of an instance (`native_files`)."""
    return _local_text(exc, folder)


def culprits(text: str) -> list[str]:
    """`_culprits` for writers that open instances of their own making (`native_files`)."""
    return _culprits(text)


def check_scan_end(family: Rdict, read_options: Any, lower: bytes, last_key: bytes | None) -> None:
    """`_check_end`, for `native_files`."""
    _check_end(family, read_options, lower, last_key)


def check_live_files(db: Rdict, instance: NativeInstance) -> None:
    """`_check_live_files` for writers that open a copy of an instance."""
    _check_live_files(db, instance)


def _check_live_files(db: Rdict, instance: NativeInstance) -> None:
    """Every SST of the handle must be live in the opened instance.

    Flink uploads exactly the files of a RocksDB checkpoint, whose SSTs are all live; one the
    MANIFEST does not name (a record lost to corruption) would silently drop its rows.
    """
    live = {entry["name"].rsplit("/", 1)[-1] for entry in db.live_files()}
    for file in instance.files:
        if file.kind == "SST" and file.local_path not in live:
            manifest = next((f for f in instance.files if f.kind == "MANIFEST"), None)
            raise FormatError(
                f"{instance.description}: the MANIFEST does not list {file.local_path}, a file "
                "of the handle (corrupt MANIFEST?)",
                manifest.stream.description if manifest else instance.description,
            )


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
        scan = self._scan(state, first, last, prefix_bytes)
        if scan is None:
            return iter(())
        return self._checked(_iterate(*scan, keys_only))

    def row_batches(
        self, state: str, first: int, last: int, prefix_bytes: int
    ) -> Iterator[native_rows.Rows]:
        """The rows of `rows`, as (keys, values) Arrow arrays of about `BATCH_BYTES` each."""
        scan = self._scan(state, first, last, prefix_bytes)
        if scan is None:
            return iter(())
        return self._checked(_iterate_batches(*scan))

    def _scan(
        self, state: str, first: int, last: int, prefix_bytes: int
    ) -> tuple[Rdict, Any, bytes] | None:
        """(column family, read options, lower bound) of a scan of key groups first..last;
        None when it has no rows."""
        from rocksdict import ReadOptions

        # Key groups a prefix can hold: a corrupt handle may claim more.
        clipped = _clip(self.instance.key_groups, max(first, 0), min(last, 256**prefix_bytes - 1))
        if clipped is None:
            return None
        start, end = clipped
        try:
            family = self.db.get_column_family(state)
        except Exception:  # a state registered but never written has no column family
            return None
        read_options = ReadOptions()
        read_options.set_verify_checksums(True)
        # One pass over the rows. (rocksdict's stub leaves out the flag the method takes.)
        read_options.fill_cache(False)  # type: ignore[call-arg]
        if (end + 1) < (1 << (8 * prefix_bytes)):
            read_options.set_iterate_upper_bound((end + 1).to_bytes(prefix_bytes, "big"))
        return family, read_options, start.to_bytes(prefix_bytes, "big")

    def _checked(self, rows: Iterator[Any]) -> Iterator[Any]:
        try:
            yield from rows
        except Exception as exc:  # the scan's status: rocksdict raises plain Exception
            folder = self.db.path()
            corrupt = _corruption(exc, folder, self.instance)
            if corrupt is not None:
                raise corrupt from None
            raise FormatError(
                f"RocksDB cannot read the rows ({_local_text(exc, folder)})",
                self.instance.description,
            ) from None

    def block_pieces(
        self, states: Sequence[tuple[str, int]], first: int, last: int, prefix_bytes: int
    ) -> Iterator[tuple[int, bytearray]]:
        """(key group, piece) of every non-empty key group's canonical block, ascending
        (`native_rows.block_pieces`: a writer holds a piece, never a key group, whose size
        grows with the state's).

        `states` maps column families to state ids of the new header, in ascending id order.
        """
        from statectl.savepoint import native_rows  # Arrow: loaded when rows are

        cursors = [
            native_rows.KeyGroupCursor(
                self.row_batches(name, first, last, prefix_bytes), prefix_bytes
            )
            for name, _ in states
        ]
        try:
            yield from native_rows.block_pieces(cursors, [state_id for _, state_id in states])
        except ValueError as exc:
            raise FormatError(str(exc), self.instance.description) from None

    def count_outside(self, state: str, prefix_bytes: int) -> int:
        """Rows of one column family outside the handle's key-group range: Flink's own
        rescale leaves them in the SST files it keeps (and skips them on restore)."""
        from rocksdict import ReadOptions

        owned = self.instance.key_groups
        try:
            family = self.db.get_column_family(state)
        except Exception:  # a state registered but never written has no column family
            return 0
        if owned is None:
            return sum(1 for _ in self._checked(_iterate(family, ReadOptions(), b"", True)))
        below = ReadOptions()
        below.set_iterate_upper_bound(owned[0].to_bytes(prefix_bytes, "big"))
        count = sum(1 for _ in self._checked(_iterate(family, below, b"", True)))
        if owned[1] + 1 < 256**prefix_bytes:
            above = (owned[1] + 1).to_bytes(prefix_bytes, "big")
            count += sum(1 for _ in self._checked(_iterate(family, ReadOptions(), above, True)))
        return count

    def count(self, state: str, prefix_bytes: int) -> int:
        """Rows of one column family inside the handle's key-group range."""
        if self.instance.key_groups is None:
            return 0
        first, last = self.instance.key_groups
        return sum(1 for _ in self.rows(state, first, last, prefix_bytes, keys_only=True))

    def sst_key_groups(self, prefix_bytes: int) -> dict[int, float]:
        """Each live SST's size spread evenly over its key groups, clipped to the owned ones."""
        sizes: dict[int, float] = {}
        owned = self.instance.key_groups
        if owned is None:
            return sizes
        for file in self.db.live_files():
            first = _key_group(file["start_key"], prefix_bytes)
            last = _key_group(file["end_key"], prefix_bytes)
            share = file["size"] / (last - first + 1)
            for key_group in range(max(first, owned[0]), min(last, owned[1]) + 1):
                sizes[key_group] = sizes.get(key_group, 0.0) + share
        return sizes

    def scanned_key_groups(self, prefix_bytes: int) -> tuple[dict[int, float], dict[int, int]]:
        """Key and value bytes and entries per owned key group, over every column family."""
        sizes: dict[int, float] = {}
        entries: dict[int, int] = {}
        if self.instance.key_groups is None:
            return sizes, entries
        first, last = self.instance.key_groups
        for state in self.column_families():
            for key, value in self.rows(state, first, last, prefix_bytes):
                key_group = _key_group(key, prefix_bytes)
                sizes[key_group] = sizes.get(key_group, 0.0) + len(key) + len(value)
                entries[key_group] = entries.get(key_group, 0) + 1
        return sizes, entries


def _iterate(family: Rdict, read_options: Any, lower: bytes, keys_only: bool) -> Iterator[Any]:
    """A generator, so the column family and the read options (which own the upper bound's
    buffer) stay alive as long as the native iterator that uses them.

    rocksdict's `items()`/`keys()` end at the first invalid position without looking at the
    iterator's status, so a block that fails its checksum ends the scan as if the rows ended
    there. Once they end, `_check_end` repeats the last step with an `RdictIter` (a fraction of
    the cost of stepping through every row with one).
    """
    last: Any = None
    if keys_only:
        for last in family.keys(from_key=lower, read_opt=read_options):
            yield last
        _check_end(family, read_options, lower, last)
    else:
        for last in family.items(from_key=lower, read_opt=read_options):
            yield last
        _check_end(family, read_options, lower, None if last is None else last[0])


def _iterate_batches(family: Rdict, read_options: Any, lower: bytes) -> Iterator[native_rows.Rows]:
    """`_iterate`'s rows in batches, taken from rocksdict's iterator with no Python step per row."""
    from statectl.savepoint import native_rows  # Arrow: loaded when rows are

    last_key = None
    for keys, values in native_rows.batches(family.items(from_key=lower, read_opt=read_options)):
        last_key = keys[-1].as_py()
        yield keys, values
    _check_end(family, read_options, lower, last_key)


def _check_end(family: Rdict, read_options: Any, lower: bytes, last_key: bytes | None) -> None:
    """Raise the error that stopped a scan whose last row was `last_key` (None: no row).

    Stepping past the last row again reads the same block: a corrupt block is never cached, so
    it fails again, and `status()` raises RocksDB's error. A valid position there means the scan
    stopped early without one, which must not pass as the end of the rows either.
    """
    iterator = family.iter(read_options)
    iterator.seek(lower if last_key is None else last_key)
    if last_key is not None and iterator.valid() and iterator.key() == last_key:
        iterator.next()
    iterator.status()
    if iterator.valid():
        raise RuntimeError(f"the scan stopped before key {iterator.key()!r}")


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
    """Canonical blocks of key groups first..last (clipped to what the instance owns), each
    whole, for readers that walk it (`read_block_pieces` streams them, for writers)."""
    pieces = read_block_pieces(instance, states, first, last, prefix_bytes)
    for key_group, parts in itertools.groupby(pieces, key=operator.itemgetter(0)):
        yield key_group, b"".join(piece for _, piece in parts)


def read_block_pieces(
    instance: NativeInstance,
    states: Sequence[tuple[str, int]],
    first: int,
    last: int,
    prefix_bytes: int,
) -> Iterator[tuple[int, bytearray]]:
    """(key group, piece) of the key groups' canonical blocks (`OpenInstance.block_pieces`)."""
    with opened(instance) as db:
        yield from db.block_pieces(states, first, last, prefix_bytes)


def rows_outside(instance: NativeInstance, prefix_bytes: int) -> int:
    """Rows of all the instance's states outside its handle's key-group range."""
    _, header = meta_header(instance)
    with opened(instance) as db:
        return sum(db.count_outside(s.name, prefix_bytes) for s in header.states)


def count_entries(instance: NativeInstance, prefix_bytes: int) -> dict[str, int]:
    """Entries per state (rows per column family in the owned range), as canonical blocks count."""
    _, header = meta_header(instance)
    with opened(instance) as db:
        return {s.name: db.count(s.name, prefix_bytes) for s in header.states}


def key_group_sizes(
    instance: NativeInstance, prefix_bytes: int, deep: bool
) -> tuple[dict[int, float], dict[int, int] | None]:
    """Bytes (and with `deep`, entries) per owned key group of an instance.

    Without `deep`, each SST's size is spread evenly over the key groups between its first and
    last key (RocksDB's own file metadata: no row is read), so the bytes are an estimate. With
    `deep`, every row is read: bytes are its key and value lengths, entries are exact.
    """
    with opened(instance) as db:
        if deep:
            return db.scanned_key_groups(prefix_bytes)
        return db.sst_key_groups(prefix_bytes), None


# `SavepointFormatType.NATIVE` as Java serialization writes the enum constant's name (TC_STRING).
_NATIVE_CONSTANT = b"\x74\x00\x06NATIVE"
_CANONICAL_CONSTANT = b"\x74\x00\x09CANONICAL"


def canonical_savepoint_properties(properties: bytes) -> bytes:
    """The `_metadata` tail of a NATIVE savepoint rewritten to say CANONICAL (else unchanged).

    The format type is an enum constant, serialized by name; no length elsewhere covers it.
    """
    return _savepoint_format(properties, "NATIVE", "CANONICAL")


def native_savepoint_properties(properties: bytes) -> bytes:
    """The `_metadata` tail of a CANONICAL savepoint rewritten to say NATIVE (else unchanged)."""
    return _savepoint_format(properties, "CANONICAL", "NATIVE")


_FORMAT_CONSTANTS = {"NATIVE": _NATIVE_CONSTANT, "CANONICAL": _CANONICAL_CONSTANT}


def _savepoint_format(properties: bytes, old: str, new: str) -> bytes:
    from statectl.formats.metadata import snapshot_kind

    old_constant, new_constant = _FORMAT_CONSTANTS[old], _FORMAT_CONSTANTS[new]
    kind = snapshot_kind(properties) if properties else None
    if kind is None or kind.format != old or properties.count(old_constant) != 1:
        return properties
    patched = properties.replace(old_constant, new_constant)
    patched_kind = snapshot_kind(patched)
    converted = patched_kind is not None and patched_kind.format == new
    return patched if converted else properties


_OPEN = _OpenInstances(keep=4)


def close_opened() -> None:
    """Close the instances kept open and remove their folders (done at exit anyway)."""
    _OPEN.close_all()
