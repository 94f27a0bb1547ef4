"""PROTOTYPE (issue 36): rescaling RocksDB native instances by files, not rows.

Not wired into `statectl rescale`; `bench/native_files_bench.py` drives it. Per target subtask:

1. Base: the source instance whose key groups overlap the target's most. Its SST files are
   hard-linked into a fresh folder (copied if linking fails); MANIFEST, CURRENT, OPTIONS copied.
   RocksDB never writes an SST file in place, and deleting an obsolete file only unlinks our
   link, so the source stays intact.
2. Clip: `delete_range` over the key groups outside the target, in every column family, and
   `compact_range` over those deleted ranges only. RocksDB compacts just the files overlapping
   the deleted ranges: files wholly outside the target are dropped, files straddling a boundary
   are rewritten (their kept rows only), files wholly inside are not touched (same file number).
   The compaction reaches the bottommost level, so the range tombstones are dropped with the
   rows they cover: a clean instance.
3. Others: rows of the other overlapping sources' key groups are written with `SstFileWriter`
   (one file per column family) and ingested. This is the part that still goes row by row;
   see docs/design/native-by-files.md for carrying these files whole (a MANIFEST of our own).

The result is a RocksDB instance folder per target; building the savepoint around it (meta file,
`_metadata`) is what `NativeInstanceWriter.finish` already does and is left out here.
"""

from __future__ import annotations

import os
import shutil
import time
from typing import Any

from statectl.formats.key_groups import key_group_range
from statectl.savepoint.native import (
    NativeInstance,
    column_family_options,
    native_instance,
    opened,
)
from statectl.savepoint.native_writer import _options, _table_settings
from statectl.savepoint.reader import open_savepoint


def _prefix_bytes(max_parallelism: int) -> int:
    return 1 if max_parallelism <= 128 else 2


def _sst_names(folder: str) -> set[str]:
    return {n for n in os.listdir(folder) if n.endswith(".sst")}


def gather_linked(instance: NativeInstance, folder: str) -> dict[str, int]:
    """The instance's files in `folder`: SSTs hard-linked (copied when linking fails: remote
    or another file system), the small files copied."""
    linked = copied = 0
    for file in instance.files:
        target = os.path.join(folder, file.local_path)
        location = file.stream.location
        if file.kind == "SST" and location is not None and location.is_local and not file.segment:
            try:
                os.link(location.path, target)
                linked += 1
                continue
            except OSError:
                pass
        if location is not None and location.is_local and not file.segment:
            shutil.copyfile(location.path, target)
        else:
            with open(target, "wb") as out:
                out.write(file.stream.read(0, file.stream.size))
        copied += 1
    return {"linked": linked, "copied": copied}


def _families(db_folder: str, instance: NativeInstance) -> dict[str, Any]:
    families = column_family_options(db_folder, instance)
    for each in families.values():
        _table_settings(each)  # tables RocksDB rewrites: settings FRocksDB 6.20.3 reads
    return families


def clip(db_folder: str, instance: NativeInstance, first: int, last: int, width: int) -> None:
    """Delete every key group outside first..last and compact only the deleted ranges."""
    from rocksdict import BottommostLevelCompaction, CompactOptions, Rdict

    options = _options()
    options.set_paranoid_checks(True)
    # No automatic compaction: our options' level sizes are not the source's, and RocksDB
    # would otherwise rewrite most of the instance to its own shape.
    options.set_disable_auto_compactions(True)
    families = _families(db_folder, instance)
    for each in families.values():
        each.set_disable_auto_compactions(True)
    compact = CompactOptions()
    # Force: the deleted ranges' bottommost files are compacted too, so the range tombstones
    # go with the rows they cover (only files overlapping the deleted ranges are inputs).
    compact.set_bottommost_level_compaction(BottommostLevelCompaction.force())
    db = Rdict(db_folder, options=options, column_families=families)
    try:
        ranges = []
        if first > 0:
            ranges.append((b"", first.to_bytes(width, "big")))
        if last + 1 < 256**width:
            ranges.append(((last + 1).to_bytes(width, "big"), b"\xff" * (width + 1)))
        for name in Rdict.list_cf(db_folder):
            family = db.get_column_family(name)
            # Only ranges holding a key: a tombstone over nothing could stay in a file that
            # RocksDB moves down without rewriting.
            doomed = [(begin, end) for begin, end in ranges if _any_key(family, begin, end)]
            for begin, end in doomed:
                family.delete_range(begin, end)
            for begin, end in doomed:
                family.compact_range(begin or None, end, compact)
    finally:
        db.close()


def _any_key(family: Any, begin: bytes, end: bytes) -> bool:
    it = family.iter()
    it.seek(begin)
    return bool(it.valid() and it.key() < end)


def add_rows(
    db_folder: str, sources: list[tuple[NativeInstance, int, int]], work: str, width: int
) -> int:
    """Rows of (instance, first, last) written per column family with SstFileWriter, ingested."""
    from rocksdict import IngestExternalFileOptions, Options, Rdict, SstFileWriter

    _, families = Options.load_latest(db_folder, ignore_unknown_options=True)
    db = Rdict(db_folder, options=_options(), column_families=families)
    rows = 0
    try:
        for index, (instance, first, last) in enumerate(sources):
            with opened(instance) as source:
                for name in source.column_families():
                    path = os.path.join(work, f"rows-{index}-{len(os.listdir(work))}.sst")
                    writer = SstFileWriter(_options())
                    writer.open(path)
                    wrote = 0
                    for key, value in source.rows(name, first, last, width):
                        writer[key] = value
                        wrote += 1
                    if not wrote:
                        del writer
                        os.path.exists(path) and os.remove(path)
                        continue
                    writer.finish()
                    rows += wrote
                    ingest = IngestExternalFileOptions()
                    ingest.set_move_files(True)
                    db.get_column_family(name).ingest_external_file([path], ingest)
    finally:
        db.close()
    return rows


def rescale_instances(savepoint: str, uid: str, q: int, out: str) -> dict[str, Any]:
    """Every target instance of operator `uid` at parallelism q, in out/<subtask>/db."""
    sp = open_savepoint(savepoint)
    op = sp.find_operator(uid)
    maxp, width = op.max_parallelism, _prefix_bytes(op.max_parallelism)
    instances = [
        native_instance(sp, s.managed_keyed_state, f"subtask {s.index}") for s in op.subtasks
    ]
    ranges = [key_group_range(maxp, op.parallelism, i) for i in range(op.parallelism)]
    report: dict[str, Any] = {"targets": []}
    os.makedirs(out, exist_ok=True)
    for target in range(q):
        started = time.monotonic()
        a, b = key_group_range(maxp, q, target)
        overlaps = [
            (i, max(a, s0), min(b, s1)) for i, (s0, s1) in enumerate(ranges)
            if max(a, s0) <= min(b, s1)
        ]  # fmt: skip
        base = max(overlaps, key=lambda o: o[2] - o[1])[0]
        folder = os.path.join(out, str(target))
        db_folder = os.path.join(folder, "db")
        os.makedirs(db_folder)
        gathered = gather_linked(instances[base], db_folder)
        before = _sst_names(db_folder)
        base_sizes = {n: os.stat(os.path.join(db_folder, n)).st_size for n in before}
        t0 = time.monotonic()
        clip(db_folder, instances[base], a, b, width)
        t1 = time.monotonic()
        after = _sst_names(db_folder)
        base_bytes = sum(base_sizes.values())
        carried_bytes = sum(base_sizes[n] for n in before & after)
        compacted_bytes = sum(os.stat(os.path.join(db_folder, n)).st_size for n in after - before)
        others = [(instances[i], f, l) for i, f, l in overlaps if i != base]
        rows = add_rows(db_folder, others, folder, width)
        t2 = time.monotonic()
        report["targets"].append({
            "key_groups": [a, b], "base": base, "base_files": len(before), **gathered,
            "carried_whole": len(before & after), "dropped": len(before - after - set()),
            "written_by_compaction": len((after - before)),
            "rows_from_other_sources": rows, "base_bytes": base_bytes,
            "carried_bytes": carried_bytes, "written_by_compaction_bytes": compacted_bytes,
            "ingested_bytes": sum(
                os.stat(os.path.join(db_folder, n)).st_size
                for n in _sst_names(db_folder) - after
            ),
            "seconds": {"gather": round(t0 - started, 2), "clip": round(t1 - t0, 2),
                        "other_rows": round(t2 - t1, 2)},
        })  # fmt: skip
    return report


def _range_deletions(db: Any, name: str) -> int:
    text = db.get_column_family(name).property_value("rocksdb.aggregated-table-properties") or ""
    for part in text.split(";"):
        if "range deletions" in part:
            return int(part.split("=")[1])
    return 0


def compare_with_savepoint(files_out: str, rows_savepoint: str, uid: str) -> dict[str, Any]:
    """Each prototype instance against statectl's row-by-row output, entry by entry, and
    checks that it is clean: no key outside its range, no range tombstone left."""
    from rocksdict import AccessType, Options, Rdict

    sp = open_savepoint(rows_savepoint)
    op = sp.find_operator(uid)
    width = _prefix_bytes(op.max_parallelism)
    result = []
    for s in op.subtasks:
        a, b = key_group_range(op.max_parallelism, op.parallelism, s.index)
        folder = os.path.join(files_out, str(s.index), "db")
        _, families = Options.load_latest(folder, ignore_unknown_options=True)
        mine = Rdict(folder, options=Options(raw_mode=True), column_families=families,
                     access_type=AccessType.read_only())  # fmt: skip
        entry = {"subtask": s.index, "entries": 0, "mismatches": 0, "outside": 0,
                 "range_deletions": 0, "families": {}}  # fmt: skip
        with opened(native_instance(sp, s.managed_keyed_state, "rows")) as theirs:
            names = set(theirs.column_families()) | {
                n for n in Rdict.list_cf(folder) if n != "default"
            }
            for name in sorted(names):
                ours = list(mine.get_column_family(name).items())
                ref = list(theirs.rows(name, 0, 256**width - 1, width))
                entry["outside"] += sum(
                    not a <= int.from_bytes(k[:width], "big") <= b for k, _ in ours
                )
                entry["range_deletions"] += _range_deletions(mine, name)
                mism = sum(x != y for x, y in zip(ours, ref, strict=False)) + abs(len(ours) - len(ref))
                entry["mismatches"] += mism
                entry["entries"] += len(ours)
                entry["families"][name] = [len(ours), len(ref)]
        entry["range_deletions"] += _range_deletions(mine, "default")
        mine.close()
        result.append(entry)
    return {"subtasks": result}
