"""Re-hash throughput: entries per second per core of `rescale --max-parallelism`, in-process.

Usage: python -m bench.rehash [--entries 10000000] [--key String,Long] [--to 256]

Builds (once, into `.cache/bench/`) a synthetic canonical savepoint of at least `--entries`
entries per key type with small values (`bench.synthetic`, one long per list), then times the
re-hash shuffle of its keyed operator on the `LocalEngine` in this process: one core, reading,
hashing, sorting and writing every entry, Spark left out. Prints and returns the figures.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

from bench import synthetic
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entries", type=int, default=10_000_000)
    parser.add_argument("--key", default="String,Long")
    parser.add_argument("--to", type=int, default=256, help="the new max parallelism")
    parser.add_argument("--parallelism", type=int, default=4)
    args = parser.parse_args(argv)
    CACHE.mkdir(parents=True, exist_ok=True)
    results = []
    for key_type in args.key.split(","):
        built = savepoint_for(args.entries, key_type)
        results.append(time_rehash(built, args.to, args.parallelism))
        print(json.dumps(results[-1]), file=sys.stderr)
    (CACHE / "rehash.json").write_text(json.dumps(results, indent=2) + "\n")
    print(f"{'key':>7} {'entries':>11} {'cpu':>8} {'entries/s/core':>15} {'peak RSS':>9}")
    for r in results:
        print(
            f"{r['key_type']:>7} {r['entries']:>11,} {r['cpu_seconds']:7.1f}s "
            f"{r['entries_per_cpu_second']:>15,} {r['peak_rss_mib']:>6} Mi"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
