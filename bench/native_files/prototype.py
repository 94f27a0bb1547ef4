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
from dataclasses import dataclass
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
        others = [(instances[i], lo, hi) for i, lo, hi in overlaps if i != base]
        rows = add_rows(db_folder, others, folder, width)
        t2 = time.monotonic()
        report["targets"].append({
            "key_groups": [a, b], "base": base, "base_files": len(before), **gathered,
            "carried_whole": len(before & after), "dropped": len(before - after - set()),
            "written_by_compaction": len(after - before),
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
                mism = sum(x != y for x, y in zip(ours, ref, strict=False)) + abs(
                    len(ours) - len(ref)
                )
                entry["mismatches"] += mism
                entry["entries"] += len(ours)
                entry["families"][name] = [len(ours), len(ref)]
        entry["range_deletions"] += _range_deletions(mine, "default")
        mine.close()
        result.append(entry)
    return {"subtasks": result}


# --------------------------------------------------------------------------- (c) a MANIFEST
# Approach (c) of docs/design/native-by-files.md, experimental: one instance assembled from the
# live files of several clipped instances, by a MANIFEST written here.

_BLOCK = 32768
_COMPARATOR, _LOG_NUMBER, _NEXT_FILE, _LAST_SEQUENCE, _COMPACT_CURSOR = 1, 2, 3, 4, 5
_DELETED_FILE, _PREV_LOG, _MIN_LOG_TO_KEEP, _NEW_FILE4 = 6, 9, 10, 103
_CF, _CF_ADD, _CF_DROP, _MAX_CF, _ATOMIC_GROUP = 200, 201, 202, 203, 300
_SAFE_IGNORE = 1 << 13


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7


def _lp(data: bytes, pos: int) -> tuple[bytes, int]:
    n, pos = _varint(data, pos)
    return data[pos : pos + n], pos + n


def _put_varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _put_lp(value: bytes) -> bytes:
    return _put_varint(len(value)) + value


def _records(data: bytes) -> list[bytes]:
    """The records of a RocksDB log file (MANIFEST): 32 KiB blocks, 7-byte headers."""
    out, partial, pos = [], b"", 0
    while pos + 7 <= len(data):
        left = _BLOCK - pos % _BLOCK
        if left < 7:
            pos += left
            continue
        length = int.from_bytes(data[pos + 4 : pos + 6], "little")
        kind = data[pos + 6]
        if kind == 0 and length == 0:
            pos += left
            continue
        payload = data[pos + 7 : pos + 7 + length]
        pos += 7 + length
        if kind == 1:
            out.append(payload)
        elif kind == 2:
            partial = payload
        elif kind == 3:
            partial += payload
        elif kind == 4:
            out.append(partial + payload)
        else:
            raise ValueError(f"MANIFEST record type {kind} (recyclable log?) not handled")
    return out


@dataclass
class SstMeta:
    level: int
    number: int
    size: int
    smallest: bytes  # internal keys
    largest: bytes
    smallest_seqno: int
    largest_seqno: int
    folder: str


def read_manifest(folder: str) -> tuple[dict[str, list[SstMeta]], int, str]:
    """Live files per column family name, the last sequence number, the comparator."""
    with open(os.path.join(folder, "CURRENT")) as current:
        name = current.read().strip()
    with open(os.path.join(folder, name), "rb") as manifest:
        data = manifest.read()
    names: dict[int, str] = {0: "default"}
    files: dict[int, dict[int, SstMeta]] = {0: {}}
    last_sequence, comparator = 0, ""
    for record in _records(data):
        pos, cf, adds, deletes, add_name, drop = 0, 0, [], [], None, False
        while pos < len(record):
            tag, pos = _varint(record, pos)
            if tag == _COMPARATOR:
                value, pos = _lp(record, pos)
                comparator = value.decode()
            elif tag in (_LOG_NUMBER, _NEXT_FILE, _PREV_LOG, _MIN_LOG_TO_KEEP):
                _, pos = _varint(record, pos)
            elif tag == _LAST_SEQUENCE:
                last_sequence, pos = _varint(record, pos)
            elif tag == _COMPACT_CURSOR:
                _, pos = _varint(record, pos)
                _, pos = _lp(record, pos)
            elif tag == _DELETED_FILE:
                level, pos = _varint(record, pos)
                number, pos = _varint(record, pos)
                deletes.append(number)
            elif tag == _NEW_FILE4:
                level, pos = _varint(record, pos)
                number, pos = _varint(record, pos)
                size, pos = _varint(record, pos)
                smallest, pos = _lp(record, pos)
                largest, pos = _lp(record, pos)
                s_seq, pos = _varint(record, pos)
                l_seq, pos = _varint(record, pos)
                while True:
                    custom, pos = _varint(record, pos)
                    if custom == 1:  # kTerminate
                        break
                    _, pos = _lp(record, pos)
                    if custom == 65:  # kPathId: another db_path
                        raise ValueError("SST in another db_path: not handled")
                    if custom & 64:
                        raise ValueError(f"NewFile4 field {custom} must not be ignored")
                adds.append(SstMeta(level, number, size, smallest, largest, s_seq, l_seq, folder))
            elif tag == _CF:
                cf, pos = _varint(record, pos)
            elif tag == _CF_ADD:
                value, pos = _lp(record, pos)
                add_name = value.decode()
            elif tag == _CF_DROP:
                drop = True
            elif tag in (_MAX_CF, _ATOMIC_GROUP):
                _, pos = _varint(record, pos)
            elif tag & _SAFE_IGNORE:
                _, pos = _lp(record, pos)
            else:
                raise ValueError(f"VersionEdit tag {tag} not handled (blob files?)")
        if add_name is not None:
            names[cf] = add_name
            files[cf] = {}
        if drop:
            names.pop(cf, None)
            files.pop(cf, None)
            continue
        for number in deletes:
            files[cf].pop(number, None)
        for meta in adds:
            files[cf][meta.number] = meta
    return {names[cf]: list(f.values()) for cf, f in files.items()}, last_sequence, comparator


def _write_records(path: str, records: list[bytes]) -> None:
    from statectl.formats.snappy_framed import masked_crc32c

    out = bytearray()
    for record in records:
        first = True
        while True:
            left = _BLOCK - len(out) % _BLOCK
            if left < 7:
                out += b"\x00" * left
                left = _BLOCK
            chunk, record = record[: left - 7], record[left - 7 :]
            kind = (1 if not record else 2) if first else (4 if not record else 3)
            crc = masked_crc32c(bytes([kind]) + chunk)
            out += crc.to_bytes(4, "little") + len(chunk).to_bytes(2, "little") + bytes([kind])
            out += chunk
            first = False
            if not record:
                break
    with open(path, "wb") as manifest:
        manifest.write(out)


def union_instance(clipped: list[str], target: str, options_from: str) -> dict[str, Any]:
    """A RocksDB instance in `target` holding every live SST of the `clipped` instances (whose
    key ranges must be disjoint), linked under new numbers, with a MANIFEST written here."""
    os.makedirs(target)
    per_family: dict[str, list[SstMeta]] = {}
    last_sequence, comparator = 0, ""
    for folder in clipped:
        families, sequence, comparator = read_manifest(folder)
        last_sequence = max(last_sequence, sequence)
        for name, metas in families.items():
            per_family.setdefault(name, []).extend(metas)
    names = ["default", *sorted(n for n in per_family if n != "default")]
    number = 10
    edits = [
        _put_varint(_COMPARATOR) + _put_lp(comparator.encode())
        + _put_varint(_LOG_NUMBER) + _put_varint(0)
        + _put_varint(_NEXT_FILE) + _put_varint(0)  # patched below
        + _put_varint(_LAST_SEQUENCE) + _put_varint(last_sequence)
        + _put_varint(_MAX_CF) + _put_varint(len(names) - 1)
    ]  # fmt: skip
    for cf, name in enumerate(names):
        edit = b""
        if cf:
            edit += _put_varint(_CF) + _put_varint(cf)
            edit += _put_varint(_CF_ADD) + _put_lp(name.encode())
            edit += _put_varint(_COMPARATOR) + _put_lp(comparator.encode())
            edits.append(edit)
            edit = _put_varint(_CF) + _put_varint(cf)
        edit += _put_varint(_LOG_NUMBER) + _put_varint(0)
        for meta in per_family.get(name, []):
            os.link(
                os.path.join(meta.folder, f"{meta.number:06d}.sst"),
                os.path.join(target, f"{number:06d}.sst"),
            )
            edit += (
                _put_varint(_NEW_FILE4) + _put_varint(meta.level) + _put_varint(number)
                + _put_varint(meta.size) + _put_lp(meta.smallest) + _put_lp(meta.largest)
                + _put_varint(meta.smallest_seqno) + _put_varint(meta.largest_seqno)
                + _put_varint(1)  # kTerminate: no optional field
            )  # fmt: skip
            number += 1
        edits.append(edit)
    manifest_number = number
    edits[0] = edits[0].replace(
        _put_varint(_NEXT_FILE) + _put_varint(0), _put_varint(_NEXT_FILE) + _put_varint(number + 1)
    )
    _write_records(os.path.join(target, f"MANIFEST-{manifest_number:06d}"), edits)
    with open(os.path.join(target, "CURRENT"), "w") as current:
        current.write(f"MANIFEST-{manifest_number:06d}\n")
    options = max(
        (n for n in os.listdir(options_from) if n.startswith("OPTIONS-")),
        key=lambda n: int(n.rsplit("-", 1)[1]),
    )
    shutil.copyfile(os.path.join(options_from, options), os.path.join(target, options))
    return {"files": number - 10, "last_sequence": last_sequence}


def _group(internal_key: bytes, width: int) -> int:
    return int.from_bytes(internal_key[:-8][:width].ljust(width, b"\x00"), "big")


def union_instance_ranged(
    sources: list[tuple[str, int, int]], target: str, width: int
) -> dict[str, Any]:
    """Like `union_instance`, but from unclipped sources (folder, first, last): a file whose key
    groups lie wholly outside its source's first..last is left out (never read), every other
    file linked; straddlers are clipped afterwards by `clip`."""
    os.makedirs(target)
    per_family: dict[str, list[SstMeta]] = {}
    last_sequence, comparator, skipped = 0, "", 0
    for folder, first, last in sources:
        families, sequence, comparator = read_manifest(folder)
        last_sequence = max(last_sequence, sequence)
        for name, metas in families.items():
            keep = [
                m for m in metas
                if _group(m.smallest, width) <= last and _group(m.largest, width) >= first
            ]  # fmt: skip
            skipped += len(metas) - len(keep)
            per_family.setdefault(name, []).extend(keep)
    return _write_union(per_family, last_sequence, comparator, target, sources[0][0]) | {
        "left_out": skipped
    }


def _write_union(
    per_family: dict[str, list[SstMeta]], last_sequence: int, comparator: str, target: str,
    options_from: str,
) -> dict[str, Any]:  # fmt: skip
    names = ["default", *sorted(n for n in per_family if n != "default")]
    number = 10
    head = (
        _put_varint(_COMPARATOR) + _put_lp(comparator.encode())
        + _put_varint(_LOG_NUMBER) + _put_varint(0)
        + _put_varint(_LAST_SEQUENCE) + _put_varint(last_sequence)
        + _put_varint(_MAX_CF) + _put_varint(len(names) - 1)
    )  # fmt: skip
    edits = []
    for cf, name in enumerate(names):
        edit = b""
        if cf:
            edits.append(
                _put_varint(_CF) + _put_varint(cf) + _put_varint(_CF_ADD) + _put_lp(name.encode())
                + _put_varint(_COMPARATOR) + _put_lp(comparator.encode())
            )  # fmt: skip
            edit = _put_varint(_CF) + _put_varint(cf)
        edit += _put_varint(_LOG_NUMBER) + _put_varint(0)
        for meta in per_family.get(name, []):
            os.link(
                os.path.join(meta.folder, f"{meta.number:06d}.sst"),
                os.path.join(target, f"{number:06d}.sst"),
            )
            edit += (
                _put_varint(_NEW_FILE4) + _put_varint(meta.level) + _put_varint(number)
                + _put_varint(meta.size) + _put_lp(meta.smallest) + _put_lp(meta.largest)
                + _put_varint(meta.smallest_seqno) + _put_varint(meta.largest_seqno)
                + _put_varint(1)  # kTerminate: no optional field
            )  # fmt: skip
            number += 1
        edits.append(edit)
    manifest = f"MANIFEST-{number:06d}"
    head += _put_varint(_NEXT_FILE) + _put_varint(number + 1)
    _write_records(os.path.join(target, manifest), [head, *edits])
    with open(os.path.join(target, "CURRENT"), "w") as current:
        current.write(manifest + "\n")
    options = max(
        (n for n in os.listdir(options_from) if n.startswith("OPTIONS-")),
        key=lambda n: int(n.rsplit("-", 1)[1]),
    )
    shutil.copyfile(os.path.join(options_from, options), os.path.join(target, options))
    return {"files": number - 10, "last_sequence": last_sequence}


def rescale_by_manifest(
    savepoint: str, uid: str, q: int, out: str, one_l0_source: bool = False
) -> dict[str, Any]:
    """(c): per target, a MANIFEST over the overlapping sources' files (files wholly outside
    left out), then RocksDB clips the straddlers. out/<subtask>/db, as `rescale_instances`."""
    sp = open_savepoint(savepoint)
    op = sp.find_operator(uid)
    maxp, width = op.max_parallelism, _prefix_bytes(op.max_parallelism)
    instances = [
        native_instance(sp, s.managed_keyed_state, f"subtask {s.index}") for s in op.subtasks
    ]
    ranges = [key_group_range(maxp, op.parallelism, i) for i in range(op.parallelism)]
    report: dict[str, Any] = {"targets": []}
    os.makedirs(out, exist_ok=True)
    gathered = []
    for i, instance in enumerate(instances):
        folder = os.path.join(out, f"source-{i}")
        os.makedirs(folder)
        gather_linked(instance, folder)
        gathered.append(folder)
    for target in range(q):
        started = time.monotonic()
        a, b = key_group_range(maxp, q, target)
        overlaps = [
            (gathered[i], max(a, s0), min(b, s1)) for i, (s0, s1) in enumerate(ranges)
            if max(a, s0) <= min(b, s1)
        ]  # fmt: skip
        db_folder = os.path.join(out, str(target), "db")
        os.makedirs(os.path.dirname(db_folder))
        pushed = 0
        if one_l0_source:  # Flink 1.x: L0 files of the first overlapping source only
            for n, (folder, lo, hi) in enumerate(overlaps[1:], start=1):
                index = gathered.index(folder)
                copy = os.path.join(out, f"{target}-l0-{index}")
                os.makedirs(copy)
                gather_linked(instances[index], copy)
                pushed += push_down_l0(copy, instances[index])
                overlaps[n] = (copy, lo, hi)
        union = union_instance_ranged(overlaps, db_folder, width) | {"l0_pushed_down": pushed}
        before = _sst_names(db_folder)
        sizes = {n: os.stat(os.path.join(db_folder, n)).st_size for n in before}
        t0 = time.monotonic()
        owner = next(i for i, (s0, s1) in enumerate(ranges) if s0 <= a <= s1)
        clip(db_folder, instances[owner], a, b, width)  # options (merge operator) of a source
        after = _sst_names(db_folder)
        report["targets"].append({
            "key_groups": [a, b], **union, "carried_whole": len(before & after),
            "carried_bytes": sum(sizes[n] for n in before & after),
            "rewritten_inputs": len(before - after),
            "written_by_compaction": len(after - before),
            "written_bytes": sum(
                os.stat(os.path.join(db_folder, n)).st_size for n in after - before
            ),
            "seconds": {
                "manifest": round(t0 - started, 2),
                "clip": round(time.monotonic() - t0, 2),
            },
        })  # fmt: skip
    for folder in gathered:
        shutil.rmtree(folder)
    return report


def push_down_l0(db_folder: str, instance: NativeInstance, timeout: float = 600) -> int:
    """Compact the instance's L0 files into the level below and nothing else (RocksDB's own
    L0 trigger at 1, level sizes too large to trigger anything more); how many L0 files it had.
    For FRocksDB 6.20.3 (Flink 1.x), which rejects L0 files of two sources whose seqno ranges
    overlap: only one source per target may bring L0 files."""
    from rocksdict import Rdict

    families, _, _ = read_manifest(db_folder)
    l0 = sum(1 for metas in families.values() for m in metas if m.level == 0)
    if not l0:
        return 0
    options = _options()
    cf_options = _families(db_folder, instance)
    for each in (options, *cf_options.values()):
        each.set_level_zero_file_num_compaction_trigger(1)
        each.set_level_compaction_dynamic_level_bytes(False)
        each.set_max_bytes_for_level_base(1 << 50)
        each.set_max_bytes_for_level_multiplier(10.0)
    db = Rdict(db_folder, options=options, column_families=cf_options)
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            busy = any(
                int(db.get_column_family(n).property_value("rocksdb.compaction-pending") or 0)
                or int(db.get_column_family(n).property_value("rocksdb.num-files-at-level0") or 0)
                for n in Rdict.list_cf(db_folder)
            ) or int(db.property_value("rocksdb.num-running-compactions") or 0)
            if not busy:
                break
            time.sleep(0.02)
        else:
            raise TimeoutError("L0 compaction did not finish")
    finally:
        db.close()
    return l0
