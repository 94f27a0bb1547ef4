"""Prototype benchmark for issue 36 (files, not rows): rescale 4 -> 3 of a NATIVE savepoint.

Usage: python -m bench.native_files_bench [--mib 250] [--work DIR]

The source: the Flink 2.3 fixture `rocksdb_native_full` rescaled by statectl to parallelism 4
(Flink's `_metadata` layout, meta files and operator state), its four RocksDB instances replaced
by multi-file, multi-level ones written with rocksdict in Flink's layout (as bench/native_bench
does, but with small memtables and target file sizes so the instances have L0 and several
levels, as a long-running job's have). Measured on the same savepoint: `cp -r`, the current
`statectl rescale -p 3`, and the prototypes of bench/native_files/prototype.py: (a)
`rescale_instances` (clip a linked base, other sources' rows ingested) and (c)
`rescale_by_manifest` (a MANIFEST over every source's files, RocksDB clips the straddlers); both
prototypes' instances are then compared entry by entry with statectl's output.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from bench.native_bench import _key_bytes
from bench.native_bench import build as build_p2
from statectl.formats.handles import IncrementalKeyedHandle, LocalFile, RelativeFileHandle
from statectl.formats.key_groups import key_group_range
from statectl.formats.metadata import write_metadata
from statectl.savepoint.reader import open_savepoint

ELEMENTS = 120


def _write_instance(folder: Path, keys: list[tuple[int, bytes]], seed: int) -> None:
    from rocksdict import AccessType, Options, Rdict, WriteOptions

    from statectl.savepoint.native_writer import _table_settings

    def opts() -> Options:
        o = Options(raw_mode=True)
        _table_settings(o)  # tables FRocksDB 6.20.3 (Flink 1.x) reads, as Flink 1.x writes
        o.set_write_buffer_size(4 << 20)
        o.set_target_file_size_base(4 << 20)
        o.set_max_bytes_for_level_base(16 << 20)
        o.set_level_zero_file_num_compaction_trigger(4)
        return o

    options = opts()
    options.create_if_missing(True)
    options.create_missing_column_families(True)
    timers = ("_timer_state/processing_user-timers", "_timer_state/event_user-timers")
    names = ("cnt", "lst", "mp", *timers)
    db = Rdict(str(folder), options=options, column_families={n: opts() for n in names},
               access_type=AccessType.read_write())  # fmt: skip
    no_wal = WriteOptions()
    no_wal.disable_wal = True
    db.set_write_options(no_wal)
    rng = random.Random(seed)
    order = list(keys)
    rng.shuffle(order)  # a job's writes arrive in no key order: overlapping L0 files
    cnt, lst, mp = (db.get_column_family(n) for n in ("cnt", "lst", "mp"))
    for cf in (cnt, lst, mp):
        cf.set_write_options(no_wal)
    for _, key in order:
        cnt[key] = rng.getrandbits(64).to_bytes(8, "big")
        lst[key] = b",".join(rng.randbytes(8) for _ in range(ELEMENTS))
        mp[key + b"\x03u0"] = b"\x00" + rng.randbytes(8)
    db.flush()
    db.close()
    for junk in folder.iterdir():
        if junk.name in ("LOCK", "rocksdict-config.json") or junk.name.startswith("LOG") \
                or junk.suffix == ".log":  # fmt: skip
            junk.unlink()


def build_p4(work: Path, mib: float) -> Path:
    small = build_p2(work / "p2-small", 0, keys_wanted=64)
    p4_small = work / "p4-small"
    subprocess.run([sys.executable, "-m", "statectl", "rescale", str(small), "-o", str(p4_small),
                    "-p", "4"], check=True, stdout=subprocess.DEVNULL)  # fmt: skip
    target = work / "p4"
    sp = open_savepoint(str(p4_small))
    op = sp.find_operator("keyed-str")
    total = int(mib * (1 << 20) / (ELEMENTS * 9 + 53))
    keys = sorted(_key_bytes(f"key-{i:09d}", op.max_parallelism) for i in range(total))
    shutil.copytree(p4_small, target)
    subtasks = []
    for subtask in op.subtasks or ():
        handle = subtask.managed_keyed_state
        assert isinstance(handle, IncrementalKeyedHandle)
        first, last = key_group_range(op.max_parallelism, op.parallelism, subtask.index)
        mine = [k for k in keys if first <= k[0] <= last]
        with tempfile.TemporaryDirectory(dir=work) as tmp:
            _write_instance(Path(tmp) / "db", mine, subtask.index)
            files = []
            for path in sorted((Path(tmp) / "db").iterdir()):
                name, size = str(uuid.uuid4()), path.stat().st_size
                shutil.move(path, target / name)
                files.append(LocalFile(path.name, RelativeFileHandle(name, size)))
        for old in handle.private:
            (target / old.handle.relative_path).unlink()
        new = dataclasses.replace(handle, private=tuple(files), shared=())
        subtasks.append(dataclasses.replace(subtask, managed_keyed_state=new))
    operators = tuple(
        dataclasses.replace(o, subtasks=tuple(subtasks)) if o is op else o for o in sp.operators
    )
    (target / "_metadata").write_bytes(
        write_metadata(dataclasses.replace(sp.metadata, operators=operators))
    )
    return target


def main(argv: list[str] | None = None) -> int:
    from bench.native_files import prototype as native_files

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mib", type=float, default=250)
    parser.add_argument("--work", default=None)
    parser.add_argument("--q", type=int, default=3)
    parser.add_argument("--reuse", action="store_true", help="reuse WORK/p4 if present")
    args = parser.parse_args(argv)
    work = Path(args.work or tempfile.mkdtemp(prefix="statectl-files-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    source = work / "p4"
    if not (args.reuse and source.is_dir()):
        shutil.rmtree(work / "p2-small", ignore_errors=True)
        shutil.rmtree(work / "p4-small", ignore_errors=True)
        shutil.rmtree(source, ignore_errors=True)
        t = time.monotonic()
        build_p4(work, args.mib)
        print(f"built in {time.monotonic() - t:.1f}s", file=sys.stderr)
    report: dict = {"source_bytes": sum(p.stat().st_size for p in source.rglob("*"))}
    for name in ("cp", "rows", "files", "manifest"):
        shutil.rmtree(work / name, ignore_errors=True)
    subprocess.run(["sync"], check=True)
    t = time.monotonic()
    subprocess.run(["cp", "-r", str(source), str(work / "cp")], check=True)
    report["cp_r_seconds"] = round(time.monotonic() - t, 2)
    t = time.monotonic()
    subprocess.run([sys.executable, "-m", "statectl", "rescale", str(source), "-o",
                    str(work / "rows"), "-p", str(args.q)], check=True,
                   stdout=subprocess.DEVNULL)  # fmt: skip
    report["statectl_rescale_seconds"] = round(time.monotonic() - t, 2)
    t = time.monotonic()
    stats = native_files.rescale_instances(str(source), "keyed-str", args.q, str(work / "files"))
    report["prototype_seconds"] = round(time.monotonic() - t, 2)
    report["prototype"] = stats
    t = time.monotonic()
    stats = native_files.rescale_by_manifest(
        str(source), "keyed-str", args.q, str(work / "manifest")
    )
    report["manifest_prototype_seconds"] = round(time.monotonic() - t, 2)
    report["manifest_prototype"] = stats
    t = time.monotonic()
    for name in ("files", "manifest"):
        report[f"compare_{name}"] = native_files.compare_with_savepoint(
            str(work / name), str(work / "rows"), "keyed-str"
        )
    report["compare_seconds"] = round(time.monotonic() - t, 2)
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
