"""Benchmark: converting and rescaling a RocksDB NATIVE savepoint of ≥ 1 GiB.

Usage: python -m bench.native_bench [--gib 1.0] [--repeat 3] [--work DIR] [--keep] [--no-restore]

The savepoint is written at parallelism 4, as a running job leaves it: the committed Flink 2.3
fixture `rocksdb_native_full` rescaled to 4 by statectl (its meta files and operator state), the
four RocksDB instances of `keyed-str` replaced by larger ones written with rocksdict in Flink's
layout (column families named by the states, rows keyed by key-group prefix ‖ StringSerializer
key ‖ VoidNamespace, list values `,`-joined longs), each key in the key group Flink assigns it.
Keys arrive in no order and RocksDB keeps Flink's default sizes (64 MiB memtables and files,
256 MiB for L1, compaction from 4 L0 files), so each instance has overlapping L0 files over
levels below them. Reported: wall time of `cp -r`, `statectl rescale -p 3` (by SST files, with
what became of the files), `statectl convert` (to canonical) and `statectl rescale
--max-parallelism` (a re-hash of every row) as a ratio to `cp -r` of the same savepoint, and the
peak RSS of the statectl process tree (driver, worker processes, Spark's JVM if any; sampled).
Each runs `--repeat` times after a `sync`, and the fastest of each is compared: a `cp -r` of
the same bytes took 0.4 to 1.6 s from one run to the next on one machine (its writes land in
the page cache or wait for the disk), so one sample of either side says little.
In the same run, unless `--no-restore`: real Flink 2.3's restore (RocksDB backend, keys not
dumped) of the same savepoint at 4 and at 3 (Flink rescales), of the output of `rescale -p 3`
at 3 and of the output of `convert` at 4, and the ratio of the third to the first.

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
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import run
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
    folder: Path, keys: list[bytes], seed: int, elements: int = ELEMENTS_PER_LIST
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
    for key in keys:
        cnt[key] = rng.getrandbits(64).to_bytes(8, "big")
        lst[key] = b",".join(rng.randbytes(8) for _ in range(elements))
        mp[key + b"\x03u0"] = b"\x00" + rng.randbytes(8)
    db.flush()
    db.close()
    for junk in folder.iterdir():  # what Flink never uploads
        if junk.name in _NOT_UPLOADED or junk.name.startswith("LOG") or junk.suffix == ".log":
            junk.unlink()


def _row_bytes(elements: int) -> int:
    """About what one key takes in an instance: its `cnt`, `lst` and `mp` rows."""
    return elements * 9 + 8 + 9 + 3 * 12


def _swap_instances(
    sp_dir: Path,
    target: Path,
    total_keys: int,
    write_instance: Callable[[Path, list[bytes], int], None],
) -> Path:
    """`sp_dir` copied to `target` with each RocksDB instance of `keyed-str` replaced by the one
    `write_instance(folder, keys, seed)` writes into `folder`: of the keys `key-000000000`...
    (`total_keys` of them, as key-group prefix ‖ key ‖ VoidNamespace, ascending), those in the
    subtask's key groups; the seed is the subtask's index. Its files get uuid names beside
    `_metadata`, the old instance's files are deleted."""
    sp = open_savepoint(str(sp_dir))
    op = sp.find_operator("keyed-str")
    keys = sorted(_key_bytes(f"key-{i:09d}", op.max_parallelism) for i in range(total_keys))
    shutil.copytree(sp_dir, target)
    subtasks = []
    for subtask in op.subtasks or ():
        handle = subtask.managed_keyed_state
        assert isinstance(handle, IncrementalKeyedHandle)
        first, last = key_group_range(op.max_parallelism, op.parallelism, subtask.index)
        mine = [key for group, key in keys if first <= group <= last]
        with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
            write_instance(Path(tmp) / "db", mine, subtask.index)
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


def build(
    target: Path, gib: float, keys_wanted: int | None = None, elements: int = ELEMENTS_PER_LIST
) -> Path:
    """A NATIVE savepoint of about `gib` GiB at `target` (or of `keys_wanted` keys)."""
    total_keys = keys_wanted or int(gib * (1 << 30) / _row_bytes(elements))

    def write(folder: Path, keys: list[bytes], seed: int) -> None:
        _write_instance(folder, keys, seed, elements)

    return _swap_instances(FIXTURE, target, total_keys, write)


FAMILIES = ("cnt", "lst", "mp", "_timer_state/processing_user-timers",
            "_timer_state/event_user-timers")  # fmt: skip
FLINK_SIZES = {  # RocksDB's defaults, which Flink's predefined options keep (bytes)
    "write_buffer": 64 << 20, "target_file": 64 << 20, "level_base": 256 << 20,
}  # fmt: skip


def _write_levelled_instance(
    folder: Path, keys: list[bytes], seed: int, sizes: dict[str, int], elements: int
) -> None:
    """An instance as a running job leaves it: keys written in no order, compactions done."""
    from rocksdict import Options, Rdict, WriteOptions

    from statectl.formats import rocksdb_manifest
    from statectl.savepoint.native_writer import table_settings

    def options() -> Options:
        each = Options(raw_mode=True)
        table_settings(each)
        each.set_write_buffer_size(sizes["write_buffer"])
        each.set_target_file_size_base(sizes["target_file"])
        each.set_max_bytes_for_level_base(sizes["level_base"])
        each.set_level_zero_file_num_compaction_trigger(4)
        return each

    db_options = options()
    db_options.create_if_missing(True)
    db_options.create_missing_column_families(True)
    db = Rdict(str(folder), options=db_options, column_families={n: options() for n in FAMILIES})
    no_wal = WriteOptions()
    no_wal.disable_wal = True
    rng = random.Random(seed)
    order = list(keys)
    rng.shuffle(order)
    cnt, lst, mp = (db.get_column_family(n) for n in ("cnt", "lst", "mp"))
    for family in (cnt, lst, mp):
        family.set_write_options(no_wal)
    for key in order:
        cnt[key] = rng.getrandbits(64).to_bytes(8, "big")
        lst[key] = b",".join(rng.randbytes(8) for _ in range(elements))
        mp[key + b"\x03u0"] = b"\x00" + rng.randbytes(8)
    db.flush()
    _wait_for_compactions(db)  # rocksdict's close does not wait for them
    db.close()
    # What a checkpoint of it holds: the live files, the MANIFEST, CURRENT and OPTIONS
    manifest_name = (folder / "CURRENT").read_text().strip()
    manifest = rocksdb_manifest.read((folder / manifest_name).read_bytes())
    live = {f"{sst.number:06d}.sst" for ssts in manifest.families.values() for sst in ssts}
    newest_options = max(folder.glob("OPTIONS-*"), key=lambda p: int(p.name.rsplit("-", 1)[1]))
    for path in folder.iterdir():
        if path.name not in {*live, manifest_name, "CURRENT", newest_options.name}:
            path.unlink()


def _wait_for_compactions(db: Any, timeout: float = 600.0) -> None:
    """Until no compaction has run or been pending for a second (one is scheduled a moment
    after the flush that calls for it)."""
    deadline = time.monotonic() + timeout
    idle_since = time.monotonic()
    while time.monotonic() < deadline:
        busy = db.property_int_value("rocksdb.num-running-compactions") or 0
        busy += db.property_int_value("rocksdb.num-running-flushes") or 0
        for name in FAMILIES:
            family = db.get_column_family(name)
            busy += family.property_int_value("rocksdb.compaction-pending") or 0
        if busy:
            idle_since = time.monotonic()
        elif time.monotonic() - idle_since >= 1.0:
            return
        time.sleep(0.05)
    raise RuntimeError("RocksDB's compactions did not finish")


def build_levelled(
    work: Path,
    gib: float,
    sizes: dict[str, int] = FLINK_SIZES,
    elements: int = ELEMENTS_PER_LIST,
    parallelism: int = 4,
) -> Path:
    """A NATIVE savepoint of about `gib` GiB at `work/pN`, written at `parallelism` with
    instances of several levels (`_write_levelled_instance`)."""
    small = build(work / "small", 0, keys_wanted=64)
    rescaled = work / f"p{parallelism}-small"
    subprocess.run(
        [sys.executable, "-m", "statectl", "rescale", str(small), "-o", str(rescaled),
         "-p", str(parallelism)],
        check=True, stdout=subprocess.DEVNULL,
    )  # fmt: skip
    total_keys = int(gib * (1 << 30) / _row_bytes(elements))

    def write(folder: Path, keys: list[bytes], seed: int) -> None:
        _write_levelled_instance(folder, keys, seed, sizes, elements)

    target = _swap_instances(rescaled, work / f"p{parallelism}", total_keys, write)
    shutil.rmtree(small)
    shutil.rmtree(rescaled)
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
    return sum(rss.get(pid, 0) for pid in run.tree_of(root, parents))


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


def _flink_restores(outputs: list[tuple[str, Path, int]]) -> dict[str, float]:
    """Flink 2.3's restore seconds of each (label, savepoint, parallelism), by label: RocksDB
    backend, keys not dumped, one JVM each after a small warm-up restore in it; the time from
    job submission until every subtask has restored."""
    from tests.flink import harness
    from tests.flink.harness import RestoreRequest

    warm_up = RestoreRequest(FIXTURE, 2, backend="rocksdb", dump=False)
    restores = {}
    for label, path, n in outputs:
        request = RestoreRequest(path, n, backend="rocksdb", dump=False)
        _, result = harness.restore_check([warm_up, request])
        if not result["ok"]:
            raise RuntimeError(f"{label}: {result['error']}")
        restores[label] = result["restore_seconds"]
        print(f"{label}: restored in {restores[label]} s", file=sys.stderr)
    return restores


def restore_bench(work: Path, keys: int, q: int, master: str) -> dict[str, Any]:
    """Flink 2.3's restore time (RocksDB backend, one JVM, keys not dumped) of (a) the original
    at its own parallelism, (b) the original at `q` (Flink's restore-time rescale), (c)
    statectl's native output at `q`, (d) statectl's canonical output at `q`; and statectl's
    own time for (c) and (d)."""
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
    restores = _flink_restores(outputs)
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


def _layout(source: Path) -> dict[str, int]:
    """SST files per level over `keyed-str`'s instances."""
    from statectl.formats import rocksdb_manifest

    levels: dict[str, int] = {}
    op = open_savepoint(str(source)).find_operator("keyed-str")
    for subtask in op.subtasks or ():
        handle = subtask.managed_keyed_state
        assert isinstance(handle, IncrementalKeyedHandle)
        for file in handle.private:
            if file.local_path.startswith("MANIFEST"):
                assert isinstance(file.handle, RelativeFileHandle)
                manifest = rocksdb_manifest.read((source / file.handle.relative_path).read_bytes())
                for ssts in manifest.families.values():
                    for sst in ssts:
                        levels[f"L{sst.level}"] = levels.get(f"L{sst.level}", 0) + 1
    return dict(sorted(levels.items()))


def _runs(
    source: Path, work: Path, master: str, keep: tuple[str, ...] = (), repeat: int = 1
) -> dict[str, Any]:
    """cp -r, then each statectl command on the same savepoint, each `repeat` times: the
    fastest's seconds (and every run's), its ratio to the fastest cp -r, the largest peak RSS
    of the process tree, and rescale's count of SST files. The outputs of the commands named in
    `keep` stay at `work/<name>`; the others are deleted once timed."""
    statectl = [sys.executable, "-m", "statectl"]
    commands = {
        "rescale_p3": ["rescale", "-p", "3"],
        "convert": ["convert"],
        "rehash_max_parallelism_256": ["rescale", "--max-parallelism", "256"],
    }
    copies = []
    for _ in range(repeat):
        subprocess.run(["sync"], check=True)  # no dirty pages of an earlier run written back
        copies.append(_timed(["cp", "-r", str(source), str(work / "copy")])[0])
        shutil.rmtree(work / "copy")
    cp = min(copies)
    report: dict[str, Any] = {"cp_seconds": round(cp, 2), "cp_runs": _rounded(copies)}
    for name, args in commands.items():
        out = work / name
        runs = []
        for n in range(repeat):
            subprocess.run(["sync"], check=True)
            runs.append(_timed_json(
                [*statectl, args[0], str(source), "-o", str(out), *args[1:], "--master", master]
            ))  # fmt: skip
            if n + 1 < repeat or name not in keep:
                shutil.rmtree(out, ignore_errors=True)
        seconds, _, summary = min(runs, key=lambda run: run[0])
        report[name] = {
            "seconds": round(seconds, 2),
            "runs": _rounded([run[0] for run in runs]),
            "ratio_to_cp": round(seconds / cp, 1),
            "peak_rss_mib": round(max(run[1] for run in runs) / (1 << 20)),
            "tasks_run": summary.get("tasks"),
            "timings": summary.get("timings"),
        }
        if name == "rescale_p3":
            keyed = [op for op in summary["operators"] if op.get("uid") == "keyed-str"]
            report[name]["sst_files"] = keyed[0].get("sst_files")
    return report


def _rounded(seconds: list[float]) -> list[float]:
    return [round(s, 2) for s in seconds]


def _restores_of_runs(source: Path, work: Path) -> dict[str, Any]:
    """Flink's restore (`_flink_restores`) of (a) `source` at its parallelism, (b) `source` at 3
    (Flink rescales), (c) `_runs`' `rescale_p3` output at 3, (d) its `convert` output at its
    parallelism; then deletes both outputs."""
    outputs = [work / "rescale_p3", work / "convert"]
    try:
        p = open_savepoint(str(source)).find_operator("keyed-str").parallelism
        converted = open_savepoint(str(outputs[1])).find_operator("keyed-str").parallelism
        labels = [
            (f"(a) original at {p}", source, p),
            ("(b) original at 3 (Flink rescales)", source, 3),
            ("(c) statectl rescale -p 3 (native) at 3", outputs[0], 3),
            (f"(d) statectl convert (canonical) at {converted}", outputs[1], converted),
        ]
        restores = _flink_restores(labels)
    finally:
        for out in outputs:
            shutil.rmtree(out, ignore_errors=True)
    seconds = list(restores.values())
    return {
        "flink_restore_seconds": restores,
        "restore_ratio_rescaled_to_original": round(seconds[2] / seconds[0], 2),
    }


def _timed_json(cmd: list[str]) -> tuple[float, int, dict[str, Any]]:
    """`_timed` of a statectl command run with --json, and the JSON it printed."""
    with tempfile.TemporaryFile() as stdout:
        started = time.monotonic()
        process = subprocess.Popen([*cmd, "--json"], stdout=stdout)
        peak = 0
        while process.poll() is None:
            peak = max(peak, _tree_rss(process.pid))
            time.sleep(0.1)
        seconds = time.monotonic() - started
        if process.returncode:
            raise subprocess.CalledProcessError(process.returncode, cmd)
        stdout.seek(0)
        return seconds, peak, json.loads(stdout.read())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gib", type=float, default=1.0)
    parser.add_argument("--work", default=None, help="work folder (default: a temp folder)")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--keep", action="store_true")
    parser.add_argument(
        "--repeat", type=int, default=3,
        help="runs of cp -r and of each command (the fastest of each is compared)",
    )  # fmt: skip
    parser.add_argument(
        "--restore", type=int, default=0, metavar="KEYS",
        help="instead: the Flink restore benchmark on a native savepoint of KEYS keys",
    )  # fmt: skip
    parser.add_argument("--q", type=int, default=3, help="parallelism of the restore benchmark")
    parser.add_argument(
        "--no-restore", action="store_true",
        help="skip Flink's restores of the default run (a machine without the Flink jars)",
    )  # fmt: skip
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
        source = build_levelled(work, args.gib)
        size = _du(source)
        print(f"built {size / (1 << 30):.2f} GiB in {time.monotonic() - started:.0f}s",
              file=sys.stderr)  # fmt: skip
        report = {"native_bytes": size, "layout": _layout(source)}
        keep = () if args.no_restore else ("rescale_p3", "convert")
        report.update(_runs(source, work, args.master, keep, args.repeat))
        if not args.no_restore:
            report.update(_restores_of_runs(source, work))
        print(json.dumps(report, indent=2))
        result = REPO / ".cache" / "bench" / f"native_result-{args.gib:g}gib.json"
        result.parent.mkdir(parents=True, exist_ok=True)
        result.write_text(json.dumps(report, indent=2) + "\n")
        print(f"wrote {result}")
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
