"""Re-hash throughput: entries per second per core of `rescale --max-parallelism`.

Usage: python -m bench.rehash [--entries 10000000] [--key String,Long] [--to 256] [--no-spark]

Builds (once, into `.cache/bench/`) a synthetic canonical savepoint of at least `--entries`
entries per key type with small values (`bench.synthetic`, one long per list), then times
(1) the re-hash shuffle of its keyed operator on the `LocalEngine` in this process: one core,
reading, hashing, sorting and writing every entry, CPU seconds; and (2) the whole
`statectl rescale --max-parallelism` (the CLI on Spark, `local[*]`), wall seconds, with the
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


def time_cli(built: synthetic.Built, max_parallelism: int, parallelism: int) -> dict:
    """The CLI's re-hash on Spark: wall seconds, entries per second per core, phases."""
    out = CACHE / "rehash-cli-out"
    shutil.rmtree(out, ignore_errors=True)
    cmd = [str(REPO / ".venv" / "bin" / "statectl"), "rescale", str(built.path), "-o", str(out)]
    cmd += ["-p", str(parallelism), "--max-parallelism", str(max_parallelism), "--json"]
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
        timings = json.loads(stdout.read())["timings"]
    shutil.rmtree(out, ignore_errors=True)
    entries = sum(built.entries.values())
    return {
        "spark_wall_seconds": round(wall, 2),
        "spark_cpu_seconds": round(sum(cpu.values()), 2),
        "spark_entries_per_cpu_second": round(entries / sum(cpu.values())),
        "spark_timings": timings,
        "spark_peak_rss_mib": rss.mib(),
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
            result.update(time_cli(built, args.to, args.parallelism))
        results.append(result)
        print(json.dumps(result), file=sys.stderr)
    (CACHE / "rehash.json").write_text(json.dumps(results, indent=2) + "\n")
    print(
        f"{'key':>7} {'entries':>11} {'cpu':>7} {'entries/s/core':>15} {'RSS':>7} "
        f"{'spark wall':>11} {'spark cpu':>10} {'entries/s/core':>15}"
    )
    for r in results:
        line = (
            f"{r['key_type']:>7} {r['entries']:>11,} {r['cpu_seconds']:6.1f}s "
            f"{r['entries_per_cpu_second']:>15,} {r['peak_rss_mib']:>4} Mi"
        )
        if "spark_wall_seconds" in r:
            line += (
                f" {r['spark_wall_seconds']:10.1f}s {r['spark_cpu_seconds']:9.1f}s "
                f"{r['spark_entries_per_cpu_second']:>15,}"
            )
        print(line)
    print(
        "in-process: the LocalEngine re-hash on one core; spark: the whole CLI rescale on "
        "local[*], CPU seconds of its process tree (driver, JVM, Python workers)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
