"""Benchmark: converting and rescaling a RocksDB NATIVE savepoint of ≥ 1 GiB.

Usage: python -m bench.native_bench [--gib 1.0] [--work DIR] [--keep]

The savepoint is built from the committed Flink 2.3 fixture `rocksdb_native_full`: its
`_metadata`, meta files and operator state are Flink's; the two RocksDB instances of `keyed-str`
are replaced by larger ones written with rocksdict in Flink's layout (column families named by
the states, rows keyed by key-group prefix ‖ StringSerializer key ‖ VoidNamespace, list values
`,`-joined longs), each key in the key group Flink assigns it. Reported: wall time of
`statectl convert` and `statectl rescale -p 3` as a ratio to `cp -r` of the same savepoint, and
peak RSS of the statectl process tree (driver, Spark JVM and Python workers together, sampled).

With `--restore KEYS`: a native savepoint of KEYS keys (small lists) is restored by real Flink
2.3 with the RocksDB backend, at its own parallelism, at `--q` (Flink rescales), and as
statectl's native and canonical outputs at `--q`; the time from job submission until every
subtask has restored (keys not enumerated), and statectl's own time for both outputs.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from statectl.formats import java_types
from statectl.formats.handles import IncrementalKeyedHandle, LocalFile, RelativeFileHandle
from statectl.formats.key_groups import key_group_range
from statectl.formats.metadata import write_metadata
from statectl.savepoint.reader import open_savepoint

REPO = Path(__file__).resolve().parents[1]
FIXTURE = REPO / "tests" / "fixtures" / "rocksdb_native_full" / "savepoint"
ELEMENTS_PER_LIST = 120  # one `lst` row ≈ 1 KiB
RESTORE_ELEMENTS = 4  # the restore benchmark's lists: many keys, a modest size
_NOT_UPLOADED = ("LOCK", "rocksdict-config.json")


def _key_bytes(key: str, max_parallelism: int) -> tuple[int, bytes]:
    key_type = java_types.key_type_for_serializer(
        "org.apache.flink.api.common.typeutils.base.StringSerializer"
    )
    assert key_type is not None
    group = key_type.key_group(key, max_parallelism)
    return group, bytes([group]) + key_type.write(key) + b"\x00"  # VoidNamespace


def _write_instance(
    folder: Path, keys: list[tuple[int, bytes]], seed: int, elements: int = ELEMENTS_PER_LIST
) -> None:
    from rocksdict import AccessType, Options, Rdict, WriteOptions

    options = Options(raw_mode=True)
    options.create_if_missing(True)
    options.create_missing_column_families(True)
    # Every state of the meta file has its column family (Flink opens them all); timers empty.
    timers = ("_timer_state/processing_user-timers", "_timer_state/event_user-timers")
    names = ("cnt", "lst", "mp", *timers)
    families = {name: Options(raw_mode=True) for name in names}
    db = Rdict(str(folder), options=options, column_families=families,
               access_type=AccessType.read_write())  # fmt: skip
    no_wal = WriteOptions()
    no_wal.disable_wal = True
    db.set_write_options(no_wal)
    rng = random.Random(seed)
    cnt, lst, mp = (db.get_column_family(n) for n in ("cnt", "lst", "mp"))
    for cf in (cnt, lst, mp):
        cf.set_write_options(no_wal)
    for _, key in keys:
        cnt[key] = rng.getrandbits(64).to_bytes(8, "big")
        lst[key] = b",".join(rng.randbytes(8) for _ in range(elements))
        mp[key + b"\x03u0"] = b"\x00" + rng.randbytes(8)
    db.flush()
    db.close()
    for junk in folder.iterdir():  # what Flink never uploads
        if junk.name in _NOT_UPLOADED or junk.name.startswith("LOG") or junk.suffix == ".log":
            junk.unlink()


def build(
    target: Path, gib: float, keys_wanted: int | None = None, elements: int = ELEMENTS_PER_LIST
) -> Path:
    """A NATIVE savepoint of about `gib` GiB at `target` (or of `keys_wanted` keys)."""
    sp = open_savepoint(str(FIXTURE))
    op = sp.find_operator("keyed-str")
    row_bytes = elements * 9 + 8 + 9 + 3 * 12
    total_keys = keys_wanted or int(gib * (1 << 30) / row_bytes)
    keys = sorted(_key_bytes(f"key-{i:09d}", op.max_parallelism) for i in range(total_keys))
    shutil.copytree(FIXTURE, target)
    subtasks = []
    for subtask in op.subtasks or ():
        handle = subtask.managed_keyed_state
        assert isinstance(handle, IncrementalKeyedHandle) and handle.key_groups
        first, last = key_group_range(op.max_parallelism, op.parallelism, subtask.index)
        mine = [k for k in keys if first <= k[0] <= last]
        with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
            _write_instance(Path(tmp) / "db", mine, subtask.index, elements)
            files = []
            for path in sorted((Path(tmp) / "db").iterdir()):
                name, size = str(uuid.uuid4()), path.stat().st_size
                shutil.move(path, target / name)
                files.append(LocalFile(path.name, RelativeFileHandle(name, size)))
        for old in handle.private:
            assert isinstance(old.handle, RelativeFileHandle)
            (target / old.handle.relative_path).unlink()
        new = dataclasses.replace(handle, private=tuple(files), shared=())
        subtasks.append(dataclasses.replace(subtask, managed_keyed_state=new))
    operators = tuple(
        dataclasses.replace(o, subtasks=tuple(subtasks)) if o is op else o for o in sp.operators
    )
    metadata = dataclasses.replace(sp.metadata, operators=operators)
    (target / "_metadata").write_bytes(write_metadata(metadata))
    return target


def _du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _tree_rss(root: int) -> int:
    """Resident bytes of `root` and all its descendants now (Linux /proc)."""
    parents: dict[int, int] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(entry)] = int(fields[1])
        rss[int(entry)] = int(fields[21]) * resource.getpagesize()
    tree, frontier = {root}, [root]
    while frontier:
        parent = frontier.pop()
        children = [pid for pid, ppid in parents.items() if ppid == parent and pid not in tree]
        tree.update(children)
        frontier.extend(children)
    return sum(rss.get(pid, 0) for pid in tree)


def _timed(cmd: list[str]) -> tuple[float, int]:
    """Wall seconds, and the peak resident bytes of the whole process tree (sampled)."""
    started = time.monotonic()
    process = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
    peak = 0
    while process.poll() is None:
        peak = max(peak, _tree_rss(process.pid))
        time.sleep(0.2)
    if process.returncode:
        raise subprocess.CalledProcessError(process.returncode, cmd)
    return time.monotonic() - started, peak


def _statectl_rescale(source: Path, out: Path, q: int, master: str, *extra: str) -> dict[str, Any]:
    """`statectl rescale -p q` as a subprocess: wall seconds and the driver's phase timings."""
    cmd = [sys.executable, "-m", "statectl", "rescale", str(source), "-o", str(out), "-p", str(q)]
    started = time.monotonic()
    done = subprocess.run(
        [*cmd, *extra, "--master", master, "--json"], check=True, capture_output=True
    )
    wall = time.monotonic() - started
    return {"seconds": round(wall, 2), **dict(json.loads(done.stdout).get("timings", {}))}


def restore_bench(work: Path, keys: int, q: int, master: str) -> dict[str, Any]:
    """Flink 2.3's restore time (RocksDB backend, one JVM, keys not dumped) of (a) the original
    at its own parallelism, (b) the original at `q` (Flink's restore-time rescale), (c)
    statectl's native output at `q`, (d) statectl's canonical output at `q`; and statectl's
    own time for (c) and (d)."""
    from tests.flink import harness
    from tests.flink.harness import RestoreRequest

    started = time.monotonic()
    source = build(work / "native", 0, keys_wanted=keys, elements=RESTORE_ELEMENTS)
    print(f"built {keys} keys in {time.monotonic() - started:.0f}s", file=sys.stderr)
    p = open_savepoint(str(source)).find_operator("keyed-str").parallelism
    entries = 3 * keys  # keyed-str: cnt, lst, mp rows (the fixture's other state is tiny)
    native = _statectl_rescale(source, work / "native-q", q, master)
    canonical = _statectl_rescale(source, work / "canonical-q", q, master, "--format", "canonical")
    cores = int(master.split("[")[1].rstrip("]")) if master.startswith("local[") else os.cpu_count()
    outputs = [
        (f"(a) original at {p}", source, p),
        (f"(b) original at {q} (Flink rescales)", source, q),
        (f"(c) statectl native at {q}", work / "native-q", q),
        (f"(d) statectl canonical at {q}", work / "canonical-q", q),
    ]
    warm_up = RestoreRequest(FIXTURE, 2, backend="rocksdb", dump=False)
    restores = {}
    for label, path, n in outputs:  # one JVM each (after a small warm-up restore in it)
        request = RestoreRequest(path, n, backend="rocksdb", dump=False)
        _, result = harness.restore_check([warm_up, request])
        if not result["ok"]:
            raise RuntimeError(f"{label}: {result['error']}")
        restores[label] = result["restore_seconds"]
        print(f"{label}: restored in {restores[label]} s", file=sys.stderr)
    return {
        "keys": keys,
        "entries": entries,
        "native_bytes": _du(source),
        "flink_restore_seconds": restores,
        "statectl_native": {
            **native,
            "entries_per_second_per_core": round(entries / native["seconds"] / (cores or 1)),
            "job_entries_per_second_per_core": round(entries / native["tasks"] / (cores or 1)),
        },
        "statectl_canonical": canonical,
        "cores": cores,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gib", type=float, default=1.0)
    parser.add_argument("--work", default=None, help="work folder (default: a temp folder)")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--keep", action="store_true")
    parser.add_argument(
        "--restore", type=int, default=0, metavar="KEYS",
        help="instead: the Flink restore benchmark on a native savepoint of KEYS keys",
    )  # fmt: skip
    parser.add_argument("--q", type=int, default=3, help="parallelism of the restore benchmark")
    args = parser.parse_args(argv)
    if args.restore:
        work = Path(args.work or tempfile.mkdtemp(prefix="statectl-restore-bench-"))
        work.mkdir(parents=True, exist_ok=True)
        try:
            report = restore_bench(work, args.restore, args.q, args.master)
        finally:
            if not args.keep:
                shutil.rmtree(work, ignore_errors=True)
        print(json.dumps(report, indent=2))
        result = REPO / ".cache" / "bench" / "restore_result.json"
        result.parent.mkdir(parents=True, exist_ok=True)
        result.write_text(json.dumps(report, indent=2) + "\n")
        return 0
    work = Path(args.work or tempfile.mkdtemp(prefix="statectl-native-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        started = time.monotonic()
        source = build(work / "native", args.gib)
        size = _du(source)
        built = time.monotonic() - started
        print(f"built {size / (1 << 30):.2f} GiB in {built:.0f}s", file=sys.stderr)
        statectl = [sys.executable, "-m", "statectl"]
        spark = ["--master", args.master]
        cp, _ = _timed(["cp", "-r", str(source), str(work / "copy")])
        convert, convert_rss = _timed(
            [*statectl, "convert", str(source), "-o", str(work / "canonical"), *spark]
        )
        rescale, rescale_rss = _timed(
            [*statectl, "rescale", str(source), "-o", str(work / "p3"), "-p", "3", *spark]
        )
        report = {
            "native_bytes": size,
            "cp_seconds": round(cp, 2),
            "convert_seconds": round(convert, 2),
            "convert_ratio_to_cp": round(convert / cp, 1),
            "rescale_p3_seconds": round(rescale, 2),
            "rescale_ratio_to_cp": round(rescale / cp, 1),
            "peak_rss_mib": round(max(convert_rss, rescale_rss) / (1 << 20)),
            "canonical_bytes": _du(work / "canonical"),
        }
        print(json.dumps(report, indent=2))
        result = REPO / ".cache" / "bench" / "native_result.json"
        result.parent.mkdir(parents=True, exist_ok=True)
        result.write_text(json.dumps(report, indent=2) + "\n")
        print(f"wrote {result}")
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
