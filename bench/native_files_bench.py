"""Prototype benchmark for issue 36 (files, not rows): rescale 4 -> 3 of a NATIVE savepoint.

Usage: python -m bench.native_files_bench [--mib 250] [--work DIR]

The source: the Flink 2.3 fixture `rocksdb_native_full` rescaled by statectl to parallelism 4
(Flink's `_metadata` layout, meta files and operator state), its four RocksDB instances replaced
by multi-file, multi-level ones written with rocksdict in Flink's layout (bench/native_bench's
`build_levelled`, but with small memtables and target file sizes so the instances have L0 and
several levels, as a long-running job's have). Measured on the same savepoint: `cp -r`, the current
`statectl rescale -p 3`, and the prototypes of bench/native_files/prototype.py: (a)
`rescale_instances` (clip a linked base, other sources' rows ingested) and (c)
`rescale_by_manifest` (a MANIFEST over every source's files, RocksDB clips the straddlers); both
prototypes' instances are then compared entry by entry with statectl's output.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.native_bench import build_levelled

ELEMENTS = 120
SIZES = {  # small memtables and files: instances with L0 and several levels at a few MiB
    "write_buffer": 4 << 20, "target_file": 4 << 20, "level_base": 16 << 20,
}  # fmt: skip


def build_p4(work: Path, mib: float) -> Path:
    """`native_bench.build_levelled`'s savepoint at `work/p4`, of about `mib` MiB, with
    `SIZES`."""
    return build_levelled(work, mib / 1024, sizes=SIZES, elements=ELEMENTS, parallelism=4)


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
        shutil.rmtree(work / "small", ignore_errors=True)
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
