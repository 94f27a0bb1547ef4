"""A new subtask's RocksDB instance assembled from the old instances' SST files, not their rows.

Approach (c) of docs/design/native-by-files.md. Keys are sorted by key-group prefix, so for a
change of parallelism most SST files lie wholly inside one new subtask's key groups. For one new
subtask:

1. Each overlapping old instance's MANIFEST is read (`formats.rocksdb_manifest`); its files
   whose key groups lie wholly outside the new subtask are left out, never read.
2. FRocksDB 6.20.3 (Flink 1.x) orders L0 by sequence number whatever the key ranges, and
   refuses two instances' L0 files whose sequence ranges overlap: only one source may bring L0
   files, so every other source with L0 files has them compacted into the level below first,
   in a linked copy (`_push_down_l0`).
3. The kept files are hard-linked (copied where linking fails) under new numbers into a fresh
   folder, with one MANIFEST written here holding them at their levels. The sources' key
   groups are disjoint, so no two files of a level L1+ overlap; sequence numbers collide across
   sources, but they only order versions of one user key, which lives in one source.
4. RocksDB opens that instance (paranoid checks, automatic compactions off: our level sizes
   are not the source's and it would reshape the whole instance) and clips it: `delete_range`
   over the key groups outside the new subtask, then `compact_range` over those ranges only,
   forced to the bottommost level, so that only the files straddling a boundary are rewritten
   and the range tombstones leave with the rows they cover. RocksDB writes its own MANIFEST on
   that open, and that one is what Flink reads.
5. The blocks of the files carried whole are checked against their checksums (hashed by
   `formats.rocksdb_sst`; a keys-only scan in RocksDB for a layout it does not read): the row
   path reads every block, and a damaged file must fail here too (the clipping compaction
   verified the files it rewrote).

No row passes through Python. What this module cannot do (a file not on local disk, a MANIFEST
with anything `rocksdb_manifest` does not read, an instance whose files hold key groups it
does not own, column families other than the new header's) and any failure of RocksDB on the
assembled instance raise `NotByFiles`: the caller moves rows instead, and meets the same
damage, if any, naming the source's file as it always has.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import os
import shutil
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from statectl.errors import FormatError
from statectl.formats import rocksdb_manifest
from statectl.formats.rocksdb_manifest import Manifest, SstFile, UnknownManifest
from statectl.savepoint import native
from statectl.savepoint.native import NativeInstance

if TYPE_CHECKING:
    from rocksdict import Options, Rdict

_BYTEWISE = "leveldb.BytewiseComparator"
_FIRST_NUMBER = 10  # numbers of the union's files; RocksDB's own files come after them
_PUSH_DOWN_TIMEOUT = 3600.0  # seconds for a source's L0 to reach the level below


class NotByFiles(Exception):
    """This instance cannot be assembled by files here (the reason is the message)."""


@dataclass(frozen=True, slots=True)
class FileSource:
    """Key groups `first..last` of an old instance, for one new subtask."""

    instance: NativeInstance
    first: int
    last: int


@dataclass(frozen=True, slots=True)
class FileCounts:
    """What became of the sources' SST files for one new subtask (or, summed, an operator)."""

    carried: int = 0  # SST files carried whole (linked or copied)
    rewritten: int = 0  # files the clipping compaction took as input
    written: int = 0  # files it wrote (the rewritten files' kept rows)
    left_out: int = 0  # files wholly outside the new subtask: never read
    pushed_down: int = 0  # L0 files compacted into the level below (Flink 1.x's L0 rule)
    carried_bytes: int = 0

    def __add__(self, other: FileCounts) -> FileCounts:
        return FileCounts(
            self.carried + other.carried,
            self.rewritten + other.rewritten,
            self.written + other.written,
            self.left_out + other.left_out,
            self.pushed_down + other.pushed_down,
            self.carried_bytes + other.carried_bytes,
        )


@dataclass(frozen=True, slots=True)
class _Source:
    """A source's live files, found on local disk by local name."""

    source: FileSource
    manifest: Manifest
    paths: dict[str, str]  # local name → path of a local file (the instance's or a copy's)
    # SST local name → the old instance's file it is (None: a file RocksDB wrote here)
    origins: dict[str, str | None]


def assemble(
    sources: Sequence[FileSource],
    folder: str,
    key_groups: tuple[int, int],
    prefix_bytes: int,
    families: Sequence[str],
    carried: Collection[str] | None = None,
) -> FileCounts:
    """The new subtask's instance in `folder` (created), from `sources` in key-group order;
    `families` are its column families (the new header's states). With `carried`, only those
    families take the sources' files; the others are left empty, for rows ingested after."""
    work = folder + "-work"
    os.makedirs(work)
    try:
        read = [_read_source(source, prefix_bytes, families, folder) for source in sources]
        if carried is not None:
            read = [_only_families(each, carried) for each in read]
        read_total = sum(len(each.origins) for each in read)
        read, pushed, skipped = _one_l0_source(read, work, key_groups, prefix_bytes, families)
        kept, left_out = _kept_files(read, key_groups, prefix_bytes)
        left_out += skipped
        origins = _write_union(kept, read, folder, families)
        _clip(folder, read, key_groups, prefix_bytes)
        _verify_blocks(folder, read[0].source.instance, origins)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(_fetched(folder), ignore_errors=True)
    return _counts(folder, origins, read_total, left_out, pushed)


def _counts(
    folder: str, origins: dict[str, str | None], total: int, left_out: int, pushed: int
) -> FileCounts:
    """Every old file is left out, carried whole (still there: RocksDB never rewrites a file
    in place) or rewritten by a compaction (the clipping or an L0 push-down)."""
    sizes = _sst_sizes(folder)
    whole = [name for name in sizes if origins.get(name) is not None]
    return FileCounts(
        carried=len(whole),
        rewritten=total - left_out - len(whole),
        written=len(sizes) - len(whole),
        left_out=left_out,
        pushed_down=pushed,
        carried_bytes=sum(sizes[name] for name in whole),
    )


# --- the sources ----------------------------------------------------------------------------------


def _read_source(
    source: FileSource, prefix_bytes: int, families: Sequence[str], folder: str
) -> _Source:
    """The source's MANIFEST read and checked against its handle and the new header."""
    instance = source.instance
    paths = _local_paths(instance, folder)
    try:
        with open(paths["CURRENT"]) as current:
            manifest_name = current.read().strip()
        with open(paths[manifest_name], "rb") as manifest_file:
            manifest = rocksdb_manifest.read(manifest_file.read())
    except (KeyError, OSError, UnicodeDecodeError, UnknownManifest) as exc:
        raise NotByFiles(f"{instance.description}: MANIFEST: {exc}") from None
    if manifest.comparator not in ("", _BYTEWISE):
        raise NotByFiles(f"{instance.description}: comparator {manifest.comparator}")
    unknown = set(manifest.families) - {"default", *families}
    if unknown:
        raise NotByFiles(f"{instance.description}: column families {sorted(unknown)}")
    live = {_sst_name(sst.number) for ssts in manifest.families.values() for sst in ssts}
    handle = {name for name in paths if native.file_kind(name) == "SST"}
    if live != handle:  # a damaged MANIFEST or handle: the row path names the culprit
        raise NotByFiles(f"{instance.description}: live files differ from the handle's")
    _check_owned(source, manifest, prefix_bytes)
    origins: dict[str, str | None] = {
        name: path for name, path in paths.items() if native.file_kind(name) == "SST"
    }
    return _Source(source, manifest, paths, origins)


def _only_families(source: _Source, carried: Collection[str]) -> _Source:
    """The source without the files of the column families not `carried`."""
    kept = {f: ssts for f, ssts in source.manifest.families.items() if f in carried}
    names = {_sst_name(sst.number) for ssts in kept.values() for sst in ssts}
    origins = {name: path for name, path in source.origins.items() if name in names}
    manifest = dataclasses.replace(source.manifest, families=kept)
    return dataclasses.replace(source, manifest=manifest, origins=origins)


def _local_paths(instance: NativeInstance, folder: str) -> dict[str, str]:
    """Local name → path of every file of the instance on local disk, whole: a file on other
    storage (or a segment of a merged file) is fetched first, as the row path reads it, beside
    the new instance's `folder` (removed once it is assembled)."""
    scratch = os.path.join(
        _fetched(folder), hashlib.sha1(instance.description.encode()).hexdigest()
    )
    paths = {}
    for file in instance.files:
        location = file.stream.location
        if location is not None and location.is_local and not file.segment:
            paths[file.local_path] = location.path
            continue
        target = os.path.join(scratch, file.local_path)
        if not os.path.exists(target):
            os.makedirs(scratch, exist_ok=True)
            native.fetch_file(file, target)
        paths[file.local_path] = target
    return paths


def _fetched(folder: str) -> str:
    """Where the files of sources on other storage are fetched to."""
    return folder + "-sources"


def _check_owned(source: FileSource, manifest: Manifest, prefix_bytes: int) -> None:
    """Every file holds only key groups its instance owns: rows of others (an instance Flink
    rescaled keeps them until compacted away) would come back in the union."""
    owned = source.instance.key_groups
    if owned is None:
        raise NotByFiles(f"{source.instance.description}: no key-group range")
    for ssts in manifest.families.values():
        for sst in ssts:
            low, high = _key_groups(sst, prefix_bytes)
            if low < owned[0] or high > owned[1]:
                raise NotByFiles(
                    f"{source.instance.description}: {_sst_name(sst.number)} holds key groups "
                    f"{low}–{high}, outside the owned {owned[0]}–{owned[1]}"
                )


def _key_groups(sst: SstFile, prefix_bytes: int) -> tuple[int, int]:
    """The key groups of a file's smallest and largest keys (internal keys: 8 bytes follow
    the user key)."""
    return _key_group(sst.smallest, prefix_bytes), _key_group(sst.largest, prefix_bytes)


def _key_group(internal_key: bytes, prefix_bytes: int) -> int:
    prefix = internal_key[:-8][:prefix_bytes]
    return int.from_bytes(prefix.ljust(prefix_bytes, b"\x00"), "big")


def _sst_name(number: int) -> str:
    return f"{number:06d}.sst"


def _kept_files(
    read: Sequence[_Source], key_groups: tuple[int, int], prefix_bytes: int
) -> tuple[list[list[tuple[str, SstFile, str]]], int]:
    """Per source, (family, file, path) of the files that hold a key group of the new subtask
    (the others are left out: never read); how many were left out."""
    kept: list[list[tuple[str, SstFile, str]]] = []
    left_out = 0
    for each in read:
        first = max(key_groups[0], each.source.first)
        last = min(key_groups[1], each.source.last)
        mine = []
        for family, ssts in each.manifest.families.items():
            for sst in ssts:
                low, high = _key_groups(sst, prefix_bytes)
                if high < first or low > last:
                    left_out += 1
                else:
                    mine.append((family, sst, each.paths[_sst_name(sst.number)]))
        kept.append(mine)
    return kept, left_out


# --- L0 files of one source only (FRocksDB 6.20.3 of Flink 1.x refuses more; kept for all) ----


def _one_l0_source(
    read: Sequence[_Source],
    work: str,
    key_groups: tuple[int, int],
    prefix_bytes: int,
    families: Sequence[str],
) -> tuple[list[_Source], int, int]:
    """The sources, every one but one (the one with the most L0 files) with L0 files replaced
    by a copy clipped to the new subtask whose L0 RocksDB compacted into the level below; how
    many L0 files were compacted, how many files the copies left out."""
    l0 = [_level0(each.manifest) for each in read]
    keep = max(range(len(read)), key=lambda n: l0[n])
    out, pushed, left_out = [], 0, 0
    for n, each in enumerate(read):
        if n == keep or not l0[n]:
            out.append(each)
            continue
        folder = os.path.join(work, f"l0-{n}")
        copy, count, skipped = _push_down_l0(each, folder, key_groups, prefix_bytes, families)
        out.append(copy)
        pushed += count
        left_out += skipped
    return out, pushed, left_out


def _level0(manifest: Manifest) -> int:
    return sum(sst.level == 0 for ssts in manifest.families.values() for sst in ssts)


def _push_down_l0(
    each: _Source,
    folder: str,
    key_groups: tuple[int, int],
    prefix_bytes: int,
    families: Sequence[str],
) -> tuple[_Source, int, int]:
    """The source's files for the new subtask, clipped (as the union is, below), then its L0
    compacted by RocksDB into the level below and nothing else: its own trigger at one L0
    file, level sizes too large to trigger more. Clipped first, so that only the L0 files of
    the new subtask's key groups are rewritten, not the whole source's. The copy, how many L0
    files it compacted, how many files it left out."""
    overlap = (max(key_groups[0], each.source.first), min(key_groups[1], each.source.last))
    kept, left_out = _kept_files([each], overlap, prefix_bytes)
    origins = _write_union(kept, [each], folder, families)
    _clip(folder, [each], overlap, prefix_bytes)
    clipped = _folder_source(each.source, folder, origins)
    count = _level0(clipped.manifest)
    if not count:
        return clipped, 0, left_out
    instance = each.source.instance
    options = _writable_options()
    family_options = _family_options(folder, instance)
    for each_options in (options, *family_options.values()):
        each_options.set_disable_auto_compactions(False)
        each_options.set_level_zero_file_num_compaction_trigger(1)
        each_options.set_level_compaction_dynamic_level_bytes(False)
        each_options.set_max_bytes_for_level_base(1 << 50)
    with _open_writable(folder, options, family_options) as db:
        _wait_for_l0(db, list(family_options))
    pushed = _folder_source(each.source, folder, origins)
    if _level0(pushed.manifest):
        raise NotByFiles(f"{instance.description}: L0 files left after the L0 compaction")
    return pushed, count, left_out


def _folder_source(source: FileSource, folder: str, origins: dict[str, str | None]) -> _Source:
    """The instance RocksDB (10.4, this process's) wrote in `folder`, as a source; `origins`
    of the files linked there (the others RocksDB wrote)."""
    names = {name: os.path.join(folder, name) for name in os.listdir(folder)}
    try:
        with open(names["CURRENT"]) as current:
            manifest_name = current.read().strip()
        with open(names[manifest_name], "rb") as manifest_file:
            manifest = rocksdb_manifest.read(manifest_file.read())
    except (KeyError, OSError, UnknownManifest) as exc:
        raise NotByFiles(f"{source.instance.description}: a copy's MANIFEST: {exc}") from None
    ssts = [name for name in names if native.file_kind(name) == "SST"]
    return _Source(source, manifest, names, {name: origins.get(name) for name in ssts})


def _wait_for_l0(db: Rdict, families: list[str]) -> None:
    """Until no family has an L0 file or a compaction pending or running. A compaction that
    fails (a damaged block) stops RocksDB's background work with its L0 files left: that ends
    the wait at once, and the rows then go the row path, which names the file."""
    deadline = time.monotonic() + _PUSH_DOWN_TIMEOUT
    while time.monotonic() < deadline:
        if int(db.property_int_value("rocksdb.background-errors") or 0):
            raise NotByFiles("the L0 compaction failed")
        busy = int(db.property_int_value("rocksdb.num-running-compactions") or 0)
        for name in families:
            family = db.get_column_family(name)
            busy += int(family.property_int_value("rocksdb.compaction-pending") or 0)
            busy += int(family.property_int_value("rocksdb.num-files-at-level0") or 0)
        if not busy:
            return
        time.sleep(0.01)
    raise NotByFiles("the L0 compaction did not finish in time")


# --- the union ------------------------------------------------------------------------------------


def _write_union(
    kept: Sequence[Sequence[tuple[str, SstFile, str]]],
    read: Sequence[_Source],
    folder: str,
    families: Sequence[str],
) -> dict[str, str | None]:
    """The kept files linked into `folder` under new numbers, a MANIFEST over them, CURRENT and
    a source's OPTIONS; the old instance's file behind each new name (`_Source.origins`)."""
    os.makedirs(folder)
    per_family: dict[str, list[SstFile]] = {name: [] for name in ("default", *families)}
    origins: dict[str, str | None] = {}
    number = _FIRST_NUMBER
    for each, files in zip(read, kept, strict=True):
        for family, sst, path in files:
            name = _sst_name(number)
            _link_or_copy(path, os.path.join(folder, name))
            per_family[family].append(_renumbered(sst, number))
            origins[name] = each.origins[_sst_name(sst.number)]
            number += 1
    last_sequence = max(each.manifest.last_sequence for each in read)
    manifest_name = f"MANIFEST-{number:06d}"
    data = rocksdb_manifest.encode(list(per_family.items()), last_sequence, _BYTEWISE, number + 1)
    with open(os.path.join(folder, manifest_name), "wb") as out:
        out.write(data)
    with open(os.path.join(folder, "CURRENT"), "w") as current:
        current.write(manifest_name + "\n")
    # Every OPTIONS file of the first source as its handle names them (the opens below check
    # them by those names); a pushed-down copy's RocksDB may have replaced its own.
    original = _local_paths(read[0].source.instance, folder)
    for name, path in original.items():
        if native.file_kind(name) == "OPTIONS":
            shutil.copyfile(path, os.path.join(folder, name))
    return origins


def _renumbered(sst: SstFile, number: int) -> SstFile:
    return dataclasses.replace(sst, number=number)


def _link_or_copy(path: str, target: str) -> None:
    """Hard links: RocksDB never writes an SST in place, and deleting an obsolete one unlinks
    only our link. A copy where linking fails (another file system)."""
    try:
        os.link(path, target)
    except OSError:
        shutil.copyfile(path, target)


def _sst_sizes(folder: str) -> dict[str, int]:
    return {
        name: os.stat(os.path.join(folder, name)).st_size
        for name in os.listdir(folder)
        if native.file_kind(name) == "SST"
    }


# --- clipping -------------------------------------------------------------------------------------


def _clip(
    folder: str,
    read: Sequence[_Source],
    key_groups: tuple[int, int],
    prefix_bytes: int,
) -> None:
    """Delete every key group outside the new subtask, and compact only the deleted ranges."""
    from rocksdict import BottommostLevelCompaction, CompactOptions

    instance = read[0].source.instance
    options = _writable_options()
    options.set_paranoid_checks(True)  # RocksDB's consistency checks of our MANIFEST
    families = _family_options(folder, instance)
    compact = CompactOptions()
    # Forced: the deleted ranges' bottommost files are rewritten too, so the range tombstones
    # leave with the rows they cover (inputs are only the files overlapping the ranges).
    compact.set_bottommost_level_compaction(BottommostLevelCompaction.force())
    ranges = _outside(key_groups, prefix_bytes)
    with _open_writable(folder, options, families) as db:
        for name in families:
            family = db.get_column_family(name)
            # Only ranges holding a key: a tombstone over nothing could stay behind in a file
            # RocksDB moves down without rewriting it.
            doomed = [(lo, hi) for lo, hi in ranges if _any_key(family, lo, hi)]
            for lo, hi in doomed:
                family.delete_range(lo, hi)
            for lo, hi in doomed:
                family.compact_range(lo or None, hi, compact)


def _verify_blocks(folder: str, instance: NativeInstance, origins: dict[str, str | None]) -> None:
    """Check the blocks of the files carried whole, as the row path reads every block: those
    files were never read (the clipping compaction verified its inputs'). Each file's block
    checksums are hashed here (`rocksdb_sst`); a file of a layout it does not read is read in
    RocksDB instead, a keys-only scan of its key range."""
    from statectl.formats import rocksdb_sst  # numpy: a canonical rescale imports none

    carried = _carried_files(folder, origins)
    unknown: dict[str, list[SstFile]] = {}
    for family, ssts in carried.items():
        for sst in ssts:
            name = _sst_name(sst.number)
            try:
                rocksdb_sst.verify(os.path.join(folder, name))
            except rocksdb_sst.UnknownSst:
                unknown.setdefault(family, []).append(sst)
            except (rocksdb_sst.SstDamaged, OSError) as exc:  # the row path names the file
                raise NotByFiles(f"{origins[name]}: {exc}") from None
    if unknown:
        _scan_blocks(folder, instance, _key_ranges(unknown))


def _scan_blocks(
    folder: str, instance: NativeInstance, ranges: dict[str, list[tuple[bytes, bytes]]]
) -> None:
    """A keys-only scan of `ranges` per column family, blocks read in RocksDB, checksums
    verified."""
    from rocksdict import AccessType, Options, Rdict, ReadOptions

    families = _family_options(folder, instance)
    options = Options(raw_mode=True)
    options.set_paranoid_checks(True)
    try:
        db = Rdict(
            folder,
            options=options,
            column_families=families,
            access_type=AccessType.read_only(),
        )
    except Exception as exc:  # rocksdict raises plain Exception
        raise NotByFiles(native.local_text(exc, folder)) from None
    try:
        for name, spans in ranges.items():
            family = db.get_column_family(name)
            for lower, upper in spans:
                read_options = ReadOptions()
                read_options.set_verify_checksums(True)
                read_options.set_iterate_upper_bound(upper + b"\x00")  # just above `upper`
                last: Any = None
                for key in family.keys(from_key=lower, read_opt=read_options):
                    last = key
                native.check_scan_end(family, read_options, lower, last)
    except Exception as exc:  # a block failing its checksum: the row path names its file
        raise NotByFiles(native.local_text(exc, folder)) from None
    finally:
        db.close()


def _carried_files(folder: str, origins: dict[str, str | None]) -> dict[str, list[SstFile]]:
    """Per column family, the files carried whole, from the MANIFEST RocksDB wrote on
    clipping."""
    try:
        with open(os.path.join(folder, "CURRENT")) as current:
            manifest_name = current.read().strip()
        with open(os.path.join(folder, manifest_name), "rb") as manifest_file:
            manifest = rocksdb_manifest.read(manifest_file.read())
    except (OSError, UnknownManifest) as exc:
        raise NotByFiles(f"the clipped instance's MANIFEST: {exc}") from None
    carried = {
        name: [sst for sst in ssts if origins.get(_sst_name(sst.number)) is not None]
        for name, ssts in manifest.families.items()
    }
    return {name: ssts for name, ssts in carried.items() if ssts}


def _key_ranges(files: dict[str, list[SstFile]]) -> dict[str, list[tuple[bytes, bytes]]]:
    """Per column family, the user-key ranges (inclusive, merged) of `files`."""
    ranges: dict[str, list[tuple[bytes, bytes]]] = {}
    for name, ssts in files.items():
        spans = sorted((sst.smallest[:-8], sst.largest[:-8]) for sst in ssts)
        merged: list[tuple[bytes, bytes]] = []
        for lower, upper in spans:
            if merged and lower <= merged[-1][1]:
                merged[-1] = (merged[-1][0], max(merged[-1][1], upper))
            else:
                merged.append((lower, upper))
        ranges[name] = merged
    return ranges


def _outside(key_groups: tuple[int, int], prefix_bytes: int) -> list[tuple[bytes, bytes]]:
    """The key ranges below and above the key groups (above: the prefix and one byte more,
    above every key)."""
    first, last = key_groups
    ranges = []
    if first > 0:
        ranges.append((b"", first.to_bytes(prefix_bytes, "big")))
    if last + 1 < 256**prefix_bytes:
        ranges.append(((last + 1).to_bytes(prefix_bytes, "big"), b"\xff" * (prefix_bytes + 1)))
    return ranges


def _any_key(family: Rdict, begin: bytes, end: bytes) -> bool:
    iterator = family.iter()
    iterator.seek(begin)
    return bool(iterator.valid() and iterator.key() < end)


def _writable_options() -> Options:
    from statectl.savepoint.native_writer import writer_options

    options = writer_options()
    options.set_disable_auto_compactions(True)
    return options


def _family_options(folder: str, instance: NativeInstance) -> dict[str, Options]:
    """The column families' options from the OPTIONS file in `folder` (Flink's merge operator
    for list state), tables as `native_writer` writes them, automatic compactions off."""
    from statectl.savepoint.native_writer import table_settings

    try:
        families = native.column_family_options(folder, instance)
    except (FormatError, OSError) as exc:  # OSError: an OPTIONS file RocksDB replaced
        raise NotByFiles(str(exc)) from None
    for each in families.values():
        table_settings(each)
        each.set_disable_auto_compactions(True)
    return families


@contextlib.contextmanager
def _open_writable(folder: str, options: Options, families: dict[str, Options]) -> Any:
    """The instance in `folder` opened read-write. RocksDB's failures (a block failing its
    checksum in a compaction or at close, a consistency check) are `NotByFiles`: the row path
    then meets the same damage and names the source's file, or succeeds."""
    from rocksdict import Rdict

    try:
        db = Rdict(folder, options=options, column_families=families)
    except Exception as exc:  # rocksdict raises plain Exception
        raise NotByFiles(native.local_text(exc, folder)) from None
    try:
        yield db
        db.close()  # reports what failed in a compaction too
    except Exception as exc:
        with contextlib.suppress(Exception):
            db.close()
        if isinstance(exc, NotByFiles):
            raise
        raise NotByFiles(native.local_text(exc, folder)) from None
