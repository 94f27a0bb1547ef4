"""Writing one new keyed subtask as a RocksDB instance, the way Flink's RocksDB backend keeps it.

The layout is that of `RocksDBKeyedStateBackend` (flink-savepoint-format.md §5.2): one column
family per registered state (timer queues included), named by the state, rows keyed by
key-group prefix, key and namespace, values as Flink writes them (list values in their merged,
`,`-joined form). Rows arrive in key order per column family; each column family is written
by rocksdict's `SstFileWriter` into one SST file and ingested into a fresh instance on local
disk, so memory stays flat whatever the state size. The instance's files (SSTs, MANIFEST,
CURRENT, OPTIONS) and a meta file holding exactly the `KeyedBackendSerializationProxy` header
are uploaded next to `_metadata`, and described as Flink's `RocksNativeFullSnapshotStrategy`
describes a NATIVE savepoint: an `IncrementalRemoteKeyedStateHandle` (code 11) with every file
private and relative.

Table settings are ones the oldest FRocksDB Flink bundles reads (6.20.3, Flink 1.15–1.20):
block-based table format version 4, CRC32C checksums, Snappy compression.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING

from statectl.errors import FormatError
from statectl.formats.handles import (
    HandleCode,
    IncrementalKeyedHandle,
    LocalFile,
    RelativeFileHandle,
)
from statectl.savepoint.native import (
    NativeInstance,
    check_live_files,
    column_family_options,
    copy_files,
    file_kind,
    rocksdb_error,
    work_root,
)
from statectl.savepoint.storage import Location

if TYPE_CHECKING:
    from rocksdict import Options, SstFileWriter


@dataclass(frozen=True, slots=True)
class NativeOutput:
    """How an operator's new subtasks are written as RocksDB instances."""

    families: tuple[str, ...]  # column families: the header's state names, by state id
    prefix_bytes: int  # key-group prefix of every key (1 up to 128 key groups, else 2)
    checkpoint_id: int  # of the savepoint the handles belong to
    # Instances made of old instances only are assembled from their SST files
    # (`native_files`); False: from their rows (the reference the tests compare with)
    by_files: bool = True


TABLE_FORMAT_VERSION = 4  # FRocksDB 6.20.3 reads up to 5; 4 is RocksDB's long-standing default
_UPLOAD_CHUNK = 8 << 20
# An SST file is closed, and the next begun, once it holds this much: RocksDB keeps a file's
# index in memory until the file is finished, so one file per state would grow with it.
# Flink's own files have this target size too (RocksDB's `target_file_size_base`).
SST_FILE_BYTES = 64 << 20
_SIZE_CHECK_ROWS = 1024  # rows between looks at the open file's size


def writer_options() -> Options:
    """Options of an instance this module (or `native_files`) writes."""
    return _options()


def table_settings(options: Options) -> None:
    """`_table_settings` for `native_files`."""
    _table_settings(options)


def _options() -> Options:
    from rocksdict import Options

    options = Options(raw_mode=True)
    _table_settings(options)
    return options


def _table_settings(options: Options) -> None:
    """Tables every supported FRocksDB reads."""
    from rocksdict import BlockBasedOptions, ChecksumType, DBCompressionType

    table = BlockBasedOptions()
    table.set_format_version(TABLE_FORMAT_VERSION)
    table.set_checksum_type(ChecksumType.crc32c())
    options.set_block_based_table_factory(table)
    options.set_compression_type(DBCompressionType.snappy())


class InstanceWriter:
    """One new RocksDB instance: `put` rows (ascending per column family), then `finish`.

    `families` are the column families in the header's state order; `key_groups` the
    subtask's inclusive range, which every key's prefix must lie in.
    """

    def __init__(
        self, families: Sequence[str], key_groups: tuple[int, int], prefix_bytes: int
    ) -> None:
        self.families = tuple(families)
        self.key_groups = key_groups
        self.prefix_bytes = prefix_bytes
        self.folder = tempfile.mkdtemp(prefix="statectl-native-out-", dir=work_root())
        self._writers: dict[int, SstFileWriter] = {}  # the open file of each column family
        self._files: dict[int, list[str]] = {}  # each column family's files, in key order
        self._rows = [0] * len(self.families)
        self._last: list[bytes | None] = [None] * len(self.families)
        self._adopted = ""  # the folder of an adopted instance

    def __enter__(self) -> InstanceWriter:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        self._writers.clear()
        self._files.clear()
        shutil.rmtree(self.folder, ignore_errors=True)

    def put(self, family: int, key: bytes, value: bytes) -> None:
        """Add a row of column family `family` (index into `families`)."""
        self.put_rows(family, ((key, value),))

    def put_rows(self, family: int, rows: Iterable[tuple[bytes, bytes]]) -> None:
        """Add rows of column family `family`, ascending and above any added before.

        Checked at both ends of the run (the keys between lie between them); `SstFileWriter`
        itself refuses a key that is not above the one before it.
        """
        iterator = iter(rows)
        head = next(iterator, None)
        if head is None:  # no SST file then: RocksDB writes none without entries
            return
        self._check(family, head[0])
        writer = self._writers.get(family)
        count, key, rolled_after = 0, head[0], b""
        for key, value in itertools.chain((head,), iterator):
            if writer is None:
                if count:  # the previous file ended inside this run: the files must not overlap
                    self._last[family] = rolled_after
                    self._check(family, key)
                writer = self._open_sst(family)
            try:
                writer[key] = value
            except Exception as exc:  # rocksdict raises plain Exception
                raise FormatError(f"state {self.families[family]!r}: {exc}") from None
            count += 1
            if count % _SIZE_CHECK_ROWS == 0 and writer.file_size() >= SST_FILE_BYTES:
                writer.finish()
                del self._writers[family]
                writer = None
                rolled_after = key
        self._check(family, key)
        self._last[family] = key
        self._rows[family] += count

    def _check(self, family: int, key: bytes) -> None:
        """`key` lies above the last key added and in the subtask's key groups."""
        last = self._last[family]
        if last is not None and key <= last:
            raise FormatError(
                f"state {self.families[family]!r}: key {key[:32].hex()} comes after "
                f"{last[:32].hex()} (keys must ascend; duplicated key?)"
            )
        first, end = self.key_groups
        key_group = int.from_bytes(key[: self.prefix_bytes], "big")
        if not first <= key_group <= end:
            raise FormatError(
                f"state {self.families[family]!r}: key group {key_group} is outside the "
                f"subtask's range {first}–{end}"
            )

    def _open_sst(self, family: int) -> SstFileWriter:
        from rocksdict import SstFileWriter

        files = self._files.setdefault(family, [])
        files.append(os.path.join(self.folder, f"ingest-{family}-{len(files)}.sst"))
        writer = self._writers[family] = SstFileWriter(_options())
        writer.open(files[-1])
        return writer

    @property
    def rows(self) -> int:
        return sum(self._rows)

    def adopt(self, instance: NativeInstance, first: int, last: int) -> None:
        """Start from a copy of `instance` clipped to key groups `first..last` (inside the
        subtask's, and the ones the instance owns: an instance Flink rescaled holds others' rows
        too), instead of rows:
        RocksDB deletes the other key groups' ranges and compacts each column family (as
        Flink clips a base instance on restore, but without keeping any row outside), rewriting
        every table with this module's settings; no row passes through Python."""
        from rocksdict import BottommostLevelCompaction, CompactOptions, Rdict

        if self._files or self._adopted:
            raise ValueError("adopt() comes before any row")
        db_folder = os.path.join(self.folder, "db")
        os.mkdir(db_folder)
        copy_files(instance, db_folder)
        # The column families' options carry Flink's merge operator (list state: merge
        # operands of incremental checkpoints meet in the compaction); the DB options are this
        # module's: Flink's name its own working folders (WAL and log dirs).
        families = column_family_options(db_folder, instance)
        for each in families.values():
            _table_settings(each)
        for name in self.families:
            families.setdefault(name, _options())
        options = _options()
        options.create_missing_column_families(True)
        options.set_paranoid_checks(True)  # a corrupt MANIFEST record fails, as when reading
        compact = CompactOptions()
        compact.set_bottommost_level_compaction(BottommostLevelCompaction.force())
        if not self.key_groups[0] <= first <= last <= self.key_groups[1]:
            raise FormatError(f"key groups {first}–{last} lie outside the subtask's")
        width = self.prefix_bytes
        try:
            db = Rdict(db_folder, options=options, column_families=families)
        except Exception as exc:  # rocksdict raises plain Exception
            raise rocksdb_error(exc, db_folder, instance) from None
        try:
            check_live_files(db, instance)
            for name in self.families:
                family = db.get_column_family(name)
                if first > 0:
                    family.delete_range(b"", first.to_bytes(width, "big"))
                if last + 1 < 256**width:  # above every key: the prefix and one byte more
                    family.delete_range((last + 1).to_bytes(width, "big"), b"\xff" * (width + 1))
                family.compact_range(None, None, compact)
            db.close()  # reports what failed in the compaction too
        except Exception as exc:  # a block failing its checksum, in the compaction or at close
            with contextlib.suppress(Exception):
                db.close()
            if isinstance(exc, FormatError):
                raise
            raise rocksdb_error(exc, db_folder, instance) from None
        self._adopted = db_folder

    def use_instance(self, db_folder: str) -> None:
        """Take the instance in `db_folder` (inside `folder`, made by `native_files`) as it
        is; rows may still be added in other key groups, as after `adopt`."""
        if self._files or self._adopted:
            raise ValueError("use_instance() comes before any row")
        self._adopted = db_folder

    def build(self) -> str:
        """Ingest every column family's SST files into a new instance (or the adopted one,
        whose rows lie in other key groups); its folder."""
        from rocksdict import IngestExternalFileOptions, Options, Rdict

        if self._adopted:
            if not self._files:
                return self._adopted
            db_folder = self._adopted
            _, families = Options.load_latest(db_folder, ignore_unknown_options=True)
            db = Rdict(db_folder, options=_options(), column_families=families)
        else:
            db_folder = os.path.join(self.folder, "db")
            options = _options()
            options.create_if_missing(True)
            db = Rdict(db_folder, options=options)
        try:
            if not self._adopted:
                for name in self.families:  # in the header's order, as Flink registers them
                    db.create_column_family(name, _options())
            for writer in self._writers.values():
                writer.finish()
            self._writers.clear()
            for index, files in sorted(self._files.items()):
                ingest = IngestExternalFileOptions()
                ingest.set_move_files(True)
                family = db.get_column_family(self.families[index])
                family.ingest_external_file(files, ingest)  # in key order, none overlapping
            self._files.clear()
        finally:
            db.close()
        return db_folder

    def finish(
        self,
        meta: bytes,
        output: Location,
        name_prefix: str,
        checkpoint_id: int,
    ) -> IncrementalKeyedHandle:
        """Build the instance, upload its files as `<name_prefix>-<local name>`, and describe it."""
        db_folder = self.build()
        files = instance_files(db_folder)
        private = []
        total = len(meta)
        meta_name = f"{name_prefix}-meta"
        _upload_bytes(meta, output.child(meta_name))
        for local_name in files:
            name = f"{name_prefix}-{local_name}"
            size = _upload(os.path.join(db_folder, local_name), output.child(name))
            private.append(LocalFile(local_name, RelativeFileHandle(name, size)))
            total += size
        first, last = self.key_groups
        return IncrementalKeyedHandle(
            code=HandleCode.INCREMENTAL_KEY_GROUPS_V2,
            checkpoint_id=checkpoint_id,
            backend_id=str(uuid.uuid4()),
            start_key_group=first,
            num_key_groups=last - first + 1,
            checkpointed_size=total,
            meta=RelativeFileHandle(meta_name, len(meta)),
            shared=(),
            private=tuple(private),
            handle_id=str(uuid.uuid4()),
        )


def instance_files(folder: str) -> list[str]:
    """The files a RocksDB checkpoint of the instance holds: SSTs, CURRENT, the MANIFEST it
    names and the newest OPTIONS file (no WAL: ingestion writes none)."""
    names = os.listdir(folder)
    with open(os.path.join(folder, "CURRENT")) as current:
        manifest = current.read().strip()
    options = [n for n in names if file_kind(n) == "OPTIONS" and not n.endswith(".dbtmp")]
    newest = max(options, key=lambda n: int(n.rsplit("-", 1)[-1]))
    ssts = sorted(n for n in names if file_kind(n) == "SST")
    return [*ssts, manifest, "CURRENT", newest]


def _upload(path: str, target: Location) -> int:
    if target.is_local:
        try:  # SSTs are never written in place: a link is as good as a copy, and free
            os.link(path, target.path)
        except OSError:
            shutil.copyfile(path, target.path)
    else:
        target.fs.put_file(path, target.path)
    return os.stat(path).st_size


def _upload_bytes(data: bytes, target: Location) -> None:
    with target.fs.open(target.path, "wb") as out:
        for start in range(0, len(data), _UPLOAD_CHUNK):
            out.write(data[start : start + _UPLOAD_CHUNK])
