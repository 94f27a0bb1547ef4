"""Re-hash throughput: entries per second per core of `rescale --max-parallelism`.

Usage: python -m bench.rehash [--entries 10000000] [--key String,Long] [--to 256] [--no-spark]

Builds (once, into `.cache/bench/`) a synthetic canonical savepoint of at least `--entries`
entries per key type with small values (`bench.synthetic`, one long per list), then times
(1) the re-hash shuffle of its keyed operator on the `LocalEngine` in this process: one core,
reading, hashing, sorting and writing every entry, CPU seconds; and (2) the whole
`statectl rescale --max-parallelism` as a subprocess, by default and with `--no-head-start`
(every task on Spark, `local[*]`): wall and CPU seconds of the process tree, peak RSS, the
driver's phase timings. Prints a table and writes `.cache/bench/rehash.json`.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import run, synthetic
from statectl.execution.engine import LocalEngine
from statectl.operations.rescale.job import rekey
from statectl.operations.rescale.plan import plan_rescale
from statectl.savepoint.reader import open_savepoint

REPO = Path(__file__).resolve().parents[1]
CACHE = REPO / ".cache" / "bench"


def savepoint_for(entries: int, key_type: str) -> synthetic.Built:
    """A savepoint of about `entries` entries (5 per key) of one key type, small values."""
    params = synthetic.Params(
        entries * synthetic.small_bytes_per_entry(key_type),
        parallelism=8,
        max_parallelism=1024,
        list_elements=1,
        key_type=key_type,
    )
    return synthetic.ensure(params, CACHE)


def time_rehash(built: synthetic.Built, max_parallelism: int, parallelism: int) -> dict:
    sp = open_savepoint(str(built.path))
    plan = plan_rescale(sp, parallelism, max_parallelism=max_parallelism)
    (rekeyed,) = [p.rekey for p in plan.operators if p.operator.uid == built.params.operator]
    assert rekeyed is not None
    out = Path(tempfile.mkdtemp(prefix="rehash-", dir=CACHE))
    try:
        started_cpu, started = time.process_time(), time.perf_counter()
        rekey(LocalEngine(), [rekeyed], str(out), None)
        cpu, wall = time.process_time() - started_cpu, time.perf_counter() - started
    finally:
        shutil.rmtree(out, ignore_errors=True)
    entries = sum(built.entries.values())
    return {
        "key_type": built.params.key_type,
        "entries": entries,
        "state_bytes": built.bytes,
        "wall_seconds": round(wall, 2),
        "cpu_seconds": round(cpu, 2),
        "entries_per_cpu_second": round(entries / cpu),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
    }


MODES = {"cli": (), "spark": ("--no-head-start",)}
"""The CLI as it runs by default (the driver re-hashes until an embedded Spark is up, and starts
Spark only for work longer than its start) and with every task on Spark."""


def time_cli(
    built: synthetic.Built, max_parallelism: int, parallelism: int, options: tuple[str, ...]
) -> dict:
    """The CLI's re-hash: wall and CPU seconds of its process tree, entries per second per core
    (wall time × cores) and per CPU-second, peak RSS, phases and where the tasks ran."""
    out = CACHE / "rehash-cli-out"
    shutil.rmtree(out, ignore_errors=True)
    cmd = [str(REPO / ".venv" / "bin" / "statectl"), "rescale", str(built.path), "-o", str(out)]
    cmd += ["-p", str(parallelism), "--max-parallelism", str(max_parallelism), "--json", *options]
    cpu: dict[int, float] = {}
    rss, seen = run.PeakRss(), set[int]()
    with tempfile.TemporaryFile("w+") as stdout, tempfile.TemporaryFile("w+") as stderr:
        started = time.perf_counter()
        process = subprocess.Popen(cmd, stdout=stdout, stderr=stderr, text=True)
        while process.poll() is None:
            cpu.update(_tree_cpu_seconds(process.pid))
            rss.add(run.sample_tree(process.pid, seen))
            time.sleep(0.1)
        wall = time.perf_counter() - started
        stdout.seek(0)
        stderr.seek(0)
        if process.returncode:
            raise SystemExit(f"bench: {' '.join(cmd)} failed:\n{stderr.read()}")
        report = json.loads(stdout.read())
    shutil.rmtree(out, ignore_errors=True)
    entries = sum(built.entries.values())
    cores = os.cpu_count() or 1
    return {
        "wall_seconds": round(wall, 2),
        "cpu_seconds": round(sum(cpu.values()), 2),
        "entries_per_second_per_core": round(entries / wall / cores),
        "entries_per_cpu_second": round(entries / sum(cpu.values())),
        "timings": report["timings"],
        "tasks": report["tasks"],
        "peak_rss_mib": rss.mib(),
        "peak_tree_rss_mib": round((rss.driver_total + rss.workers_total) / run.MIB),
    }


_TICK = os.sysconf("SC_CLK_TCK")


def _tree_cpu_seconds(root: int) -> dict[int, float]:
    """CPU seconds (user + system) so far of every process under `root` (JVM, Python
    workers), sampled from /proc: the last sample of a process is its total, near enough."""
    table = run.process_table()
    found, frontier = {}, [root]
    while frontier:
        pid = frontier.pop()
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            found[pid] = (int(fields[11]) + int(fields[12])) / _TICK
        except (OSError, IndexError, ValueError):
            continue
        frontier += [child for child, parent in table.items() if parent == pid]
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entries", type=int, default=10_000_000)
    parser.add_argument("--key", default="String,Long")
    parser.add_argument("--to", type=int, default=256, help="the new max parallelism")
    parser.add_argument("--parallelism", type=int, default=4)
    parser.add_argument("--no-spark", action="store_true", help="the in-process figure only")
    args = parser.parse_args(argv)
    CACHE.mkdir(parents=True, exist_ok=True)
    results = []
    for key_type in args.key.split(","):
        built = savepoint_for(args.entries, key_type)
        result = time_rehash(built, args.to, args.parallelism)
        if not args.no_spark:
            for mode, options in MODES.items():
                result[mode] = time_cli(built, args.to, args.parallelism, options)
        results.append(result)
        print(json.dumps(result), file=sys.stderr)
    (CACHE / "rehash.json").write_text(json.dumps(results, indent=2) + "\n")
    print(_table(results))
    return 0


def _table(results: list[dict]) -> str:
    head = f"{'key':>7} {'entries':>11} {'how':>10} {'wall':>7} {'cpu':>7} {'/s/core':>10} "
    head += f"{'/cpu-s':>10} {'RSS':>8}"
    lines = [head, "-" * len(head)]
    for r in results:
        lead = f"{r['key_type']:>7} {r['entries']:>11,}"
        lines.append(
            f"{lead} {'in-process':>10} {r['wall_seconds']:6.1f}s {r['cpu_seconds']:6.1f}s "
            f"{'':>10} {r['entries_per_cpu_second']:>10,} {r['peak_rss_mib']:>5} Mi"
        )
        for mode in (m for m in MODES if m in r):
            c = r[mode]
            lines.append(
                f"{lead} {mode:>10} {c['wall_seconds']:6.1f}s {c['cpu_seconds']:6.1f}s "
                f"{c['entries_per_second_per_core']:>10,} {c['entries_per_cpu_second']:>10,} "
                f"{c['peak_tree_rss_mib']:>5} Mi"
            )
    lines += [
        "",
        "in-process: the re-hash shuffle alone on the LocalEngine, one core; cli: the whole",
        "`statectl rescale --max-parallelism` as it runs by default (the driver re-hashes while an",
        "embedded Spark would start); spark: the same with --no-head-start (every task on Spark).",
        "/s/core: entries / wall seconds / cores; /cpu-s: entries per CPU-second of the process",
        "tree (driver, JVM, Python workers); RSS: the process tree's peak, all processes together.",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
