"""`make bench`: rescale wall time against `cp -r`, and peak RSS, on synthetic savepoints.

Usage: python -m bench.run [--gib 2] [--small-gib 0.5] [--to 5,12] [--repeat 3]

For each size (default 2 GiB and 0.5 GiB, 8 subtasks, max parallelism 1024; built once by
`bench.synthetic` into `.cache/bench/` and reused) it times `cp -r` of the savepoint and
`statectl rescale` (the CLI, as a subprocess) to each target parallelism. Every timed command
starts with the source in the page cache and no dirty pages (`sync`), and the median of
`--repeat` runs is kept. Spark start-up is measured two ways: the driver's own timing of the
SparkContext start (`timings` in `rescale --json`), and the whole wall time of the same
rescale of a tiny savepoint of the same shape (same operators, subtasks, key groups, tasks):
everything that does not grow with state. Peak RSS is sampled from /proc every 100 ms per
process kind: the driver (python, and the JVM it starts) and Spark's Python workers.

Prints a table and writes `.cache/bench/result.json`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from bench import synthetic

REPO = Path(__file__).resolve().parents[1]
CACHE = REPO / ".cache" / "bench"
PAGE = os.sysconf("SC_PAGE_SIZE")
TINY_BYTES = 4 << 20
MIB = 1 << 20
TARGETS = {"a": 1.5, "b": 1.5, "rss_mib": 1024}
# How a rescale runs: the default (an embedded Spark with a head start in the driver, which
# starts Spark only for work longer than its start) and every task on Spark.
MODES = {"": (), "_spark": ("--no-head-start",)}


# --- process-tree sampling ----------------------------------------------------------------


@dataclass
class PeakRss:
    """Peak resident bytes per process kind, sampled from /proc."""

    driver: int = 0  # the statectl python process
    jvm: int = 0  # the Spark driver JVM (local mode: executors too)
    driver_total: int = 0  # python + JVM, at the same sample
    worker: int = 0  # the largest single Python worker (daemon or forked worker)
    workers_total: int = 0  # all Python workers together, at the same sample
    tree: int = 0  # every process of the tree together (shell wrappers too), at the same sample
    tree_pss: int = 0  # the same in proportional set size: a page shared by n processes is 1/n
    samples: int = 0

    def add(self, by_kind: dict[str, list[int]]) -> None:
        self.samples += 1
        driver, jvm, workers = (by_kind.get(k, []) for k in ("driver", "jvm", "worker"))
        self.driver = max(self.driver, *driver, 0)
        self.jvm = max(self.jvm, *jvm, 0)
        self.driver_total = max(self.driver_total, sum(driver) + sum(jvm))
        self.worker = max(self.worker, *workers, 0)
        self.workers_total = max(self.workers_total, sum(workers))
        self.tree = max(self.tree, sum(sum(rss) for rss in by_kind.values()))

    def add_pss(self, tree_pss: int) -> None:
        self.tree_pss = max(self.tree_pss, tree_pss)

    def mib(self) -> dict[str, float]:
        kinds = ("driver", "jvm", "driver_total", "worker", "workers_total", "tree", "tree_pss")
        return {k: round(getattr(self, k) / MIB, 1) for k in kinds}


def process_table() -> dict[int, int]:
    """pid → parent pid of every process we may read."""
    return {pid: ppid for pid, (ppid, _, _) in _processes().items()}


def _processes() -> dict[int, tuple[int, str, int]]:
    """pid → (parent pid, command line, resident bytes) of every process we may read."""
    table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/statm") as f:
                rss = int(f.read().split()[1]) * PAGE
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, IndexError, ValueError):
            continue
        table[int(entry)] = (ppid, cmdline, rss)
    return table


def _kind(pid: int, root: int, cmdline: str) -> str:
    if pid == root:
        return "driver"
    if "java" in cmdline.split(" ", 1)[0]:
        return "jvm"
    if "pyspark" in cmdline:  # pyspark.daemon and the workers it forks
        return "worker"
    return "other"  # spark-submit's shell wrappers


def sample_tree(root: int, seen: set[int]) -> dict[str, list[int]]:
    """Resident bytes per process kind of `root`'s tree; adds the tree's pids to `seen`."""
    table = _processes()
    tree = tree_of(root, {pid: ppid for pid, (ppid, _, _) in table.items()})
    seen.update(pid for pid in tree if pid != root)
    by_kind: dict[str, list[int]] = {}
    for pid in tree:
        if pid in table:
            by_kind.setdefault(_kind(pid, root, table[pid][1]), []).append(table[pid][2])
    return by_kind


def tree_pss(root: int) -> int:
    """The proportional set size of `root`'s tree, bytes: what its processes hold, each page
    they share counted once (Spark's Python workers share the pages of their daemon)."""
    total = 0
    for pid in tree_of(root, process_table()):
        with contextlib.suppress(OSError), open(f"/proc/{pid}/smaps_rollup") as f:
            total += sum(int(line.split()[1]) * 1024 for line in f if line.startswith("Pss:"))
    return total


def tree_of(root: int, parents: dict[int, int]) -> set[int]:
    """`root` and its descendants, by `parents` (pid → parent pid)."""
    tree, frontier = {root}, [root]
    while frontier:
        parent = frontier.pop()
        children = [p for p, ppid in parents.items() if ppid == parent and p not in tree]
        tree.update(children)
        frontier.extend(children)
    return tree


@dataclass
class Run:
    seconds: float
    stdout: str
    rss: PeakRss


def timed(cmd: list[str], sample: bool = False) -> Run:
    """Wall time of `cmd` until it exits, as `time` in a shell measures it (and its peak RSS
    per process kind when `sample`). Spark's JVM winds down for a moment after the driver
    exits: the next measurement waits until it is gone."""
    rss = PeakRss()
    seen: set[int] = set()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        started = time.perf_counter()
        process = subprocess.Popen(cmd, stdout=out, stderr=err, text=True)
        while process.poll() is None:
            if sample:
                rss.add(sample_tree(process.pid, seen))
            time.sleep(0.1 if sample else 0.01)
        seconds = time.perf_counter() - started
        _wait_gone(seen)
        out.seek(0)
        err.seek(0)
        if process.returncode:
            raise SystemExit(f"bench: {' '.join(cmd)} failed ({process.returncode}):\n{err.read()}")
        return Run(seconds, out.read(), rss)


def _wait_gone(pids: set[int], limit: float = 30.0) -> None:
    deadline = time.monotonic() + limit
    while any(os.path.exists(f"/proc/{pid}") for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)


# --- fair starting conditions -------------------------------------------------------------


def _settle(source: Path) -> None:
    """Source bytes in the page cache, no dirty pages left from earlier writes."""
    for path in source.iterdir():
        with path.open("rb") as f:
            while f.read(8 << 20):
                pass
    os.sync()


def _clear(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
    os.sync()


def time_cp(source: Path) -> float:
    target = CACHE / "cp-out"
    _clear(target)
    _settle(source)
    seconds = timed(["cp", "-r", str(source), str(target)]).seconds
    _clear(target)
    return seconds


def time_rescale(source: Path, parallelism: int, master: str, options: tuple[str, ...] = ()) -> Run:
    target = CACHE / f"rescale-out-p{parallelism}"
    cmd = [str(REPO / ".venv" / "bin" / "statectl"), "rescale", str(source), "-o", str(target)]
    cmd += ["-p", str(parallelism), "--master", master, "--json", *options]
    _clear(target)
    _settle(source)
    run = timed(cmd, sample=True)
    _clear(target)
    return run


# --- checks -------------------------------------------------------------------------------


def check_tiny(tiny: synthetic.Built, parallelism: int, master: str) -> None:
    """`statectl inspect --deep` counts exactly the entries the generator wrote, before and
    after a rescale."""
    statectl = str(REPO / ".venv" / "bin" / "statectl")
    rescaled = CACHE / "check-rescaled"
    _clear(rescaled)
    timed([statectl, "rescale", str(tiny.path), "-o", str(rescaled), "-p", str(parallelism),
           "--master", master])  # fmt: skip
    for path in (tiny.path, rescaled):
        cmd = [statectl, "inspect", "--json", "--deep", "--operator", synthetic.OPERATOR, str(path)]
        (op,) = json.loads(timed(cmd).stdout)["operators"]
        counted = {s["name"]: s["entries"] for s in op["states"]}
        if counted != tiny.entries:
            raise SystemExit(f"bench: {path}: generated {tiny.entries}, inspect counts {counted}")
    _clear(rescaled)


def check_output(report: dict, built: synthetic.Built) -> None:
    """The rescaled savepoint holds every byte of keyed state (headers aside)."""
    keyed = next(op for op in report["operators"] if op["uid"] == synthetic.OPERATOR)
    if keyed["bytes"] < built.params.size_bytes:
        raise SystemExit(f"bench: rescale wrote {keyed['bytes']} bytes of {synthetic.OPERATOR}")


# --- the benchmark ------------------------------------------------------------------------


def measure_size(
    built: synthetic.Built, tiny: synthetic.Built, targets: list[int], master: str, repeat: int
) -> dict:
    """Medians of `repeat` rounds; each round times cp -r and every rescale back to back, so
    drifting disk or page-cache conditions hit all of them alike."""
    subprocess.run(["cp", "-r", str(built.path), str(CACHE / "cp-out")], check=True)  # warm-up
    cps: list[float] = []
    cases = [(p, mode) for p in targets for mode in MODES]
    runs: dict[tuple[int, str], list[Run]] = {case: [] for case in cases}
    fixed: dict[tuple[int, str], list[Run]] = {case: [] for case in cases}
    for _ in range(repeat):
        cps.append(time_cp(built.path))
        for parallelism, mode in cases:
            options = MODES[mode]
            runs[parallelism, mode].append(time_rescale(built.path, parallelism, master, options))
            fixed[parallelism, mode].append(time_rescale(tiny.path, parallelism, master, options))
    cp = statistics.median(cps)
    result: dict = {
        "bytes": built.bytes,
        "keys": built.keys,
        "cp_seconds": round(cp, 3),
        "cp_runs_seconds": [round(c, 3) for c in cps],
    }
    for parallelism, mode in cases:
        check_output(json.loads(runs[parallelism, mode][-1].stdout), built)
        summary = _summary(runs[parallelism, mode], fixed[parallelism, mode], cp)
        result[f"p{parallelism}{mode}"] = summary
    return result


def _summary(runs: list[Run], fixed_runs: list[Run], cp: float) -> dict:
    wall = statistics.median(r.seconds for r in runs)
    fixed = statistics.median(r.seconds for r in fixed_runs)
    timings = [json.loads(r.stdout)["timings"] for r in runs]
    fixed_timings = [json.loads(r.stdout)["timings"] for r in fixed_runs]
    spark_start = statistics.median(t["spark_start"] for t in timings)
    peak = PeakRss()
    for run in runs:
        for kind in ("driver", "jvm", "driver_total", "worker", "workers_total", "tree"):
            setattr(peak, kind, max(getattr(peak, kind), getattr(run.rss, kind)))
    return {
        "rescale_seconds": round(wall, 3),
        "spark_start_seconds": round(spark_start, 3),
        "tasks_seconds": round(statistics.median(t["tasks"] for t in timings), 3),
        "tasks": json.loads(runs[-1].stdout)["tasks"],  # where they ran: driver, spark
        "fixed_cost_seconds": round(fixed, 3),
        "a_ratio": round(wall / cp, 2),
        "b_ratio": round(max(wall - fixed, 0.0) / cp, 2),
        "b_ratio_context_only": round((wall - spark_start) / cp, 2),
        "peak_rss_mib": peak.mib(),
        "phases_seconds": {k: statistics.median(t[k] for t in timings) for k in timings[0]},
        "fixed_phases_seconds": {
            k: statistics.median(t[k] for t in fixed_timings) for k in fixed_timings[0]
        },
        "runs_seconds": [round(r.seconds, 3) for r in runs],
        "fixed_runs_seconds": [round(r.seconds, 3) for r in fixed_runs],
    }


def _table(result: dict) -> str:
    head = (
        f"{'size':>9} {'to':>4} {'on':>6} {'cp -r':>7} {'rescale':>8} {'fixed':>6} {'(a)':>5} "
        f"{'(b)':>5} {'(b*)':>5} {'driver':>7} {'jvm':>6} {'worker':>7} {'workers':>8}"
    )
    lines = [head, "-" * len(head)]
    for size in result["sizes"]:
        for key, run in ((k, v) for k, v in size.items() if k.startswith("p")):
            rss = run["peak_rss_mib"]
            lines.append(
                f"{size['bytes'] / (1 << 30):7.2f}Gi {key[1:].split('_')[0]:>4} "
                f"{'spark' if key.endswith('_spark') else 'auto':>6} {size['cp_seconds']:6.2f}s "
                f"{run['rescale_seconds']:7.2f}s {run['fixed_cost_seconds']:5.2f}s "
                f"{run['a_ratio']:5.2f} {run['b_ratio']:5.2f} {run['b_ratio_context_only']:5.2f} "
                f"{rss['driver']:5.0f}Mi {rss['jvm']:4.0f}Mi {rss['worker']:5.0f}Mi "
                f"{rss['workers_total']:6.0f}Mi"
            )
    lines += [
        "",
        "(a) rescale / cp -r   (b) (rescale - fixed cost) / cp -r, fixed cost = the same rescale",
        "of a tiny savepoint of the same shape   (b*) (rescale - SparkContext start) / cp -r",
        "on: auto = the default (the driver runs tasks until an embedded Spark is up, and starts",
        "it only for work longer than its start), spark = --no-head-start (every task on Spark)",
        f"targets: (a) <= {TARGETS['a']}, (b) <= {TARGETS['b']}, "
        f"peak RSS < {TARGETS['rss_mib']} MiB",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gib", type=float, default=2.0)
    parser.add_argument("--small-gib", type=float, default=0.5)
    parser.add_argument("--parallelism", type=int, default=8)
    parser.add_argument("--max-parallelism", type=int, default=1024)
    parser.add_argument("--to", default="5,12", help="target parallelisms, comma-separated")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--master", default="local[*]")
    args = parser.parse_args(argv)
    CACHE.mkdir(parents=True, exist_ok=True)
    targets = [int(p) for p in args.to.split(",")]
    shape = {"parallelism": args.parallelism, "max_parallelism": args.max_parallelism}
    tiny = synthetic.ensure(synthetic.Params(TINY_BYTES, **shape), CACHE)
    check_tiny(tiny, targets[0], args.master)
    sizes = []
    for gib in (args.gib, args.small_gib):
        started = time.perf_counter()
        built = synthetic.ensure(synthetic.Params(int(gib * (1 << 30)), **shape), CACHE)
        print(
            f"bench: {built.path.name}: ready in {time.perf_counter() - started:.0f}s",
            file=sys.stderr,
        )
        sizes.append(measure_size(built, tiny, targets, args.master, args.repeat))
    result = {
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "master": args.master,
        "repeat": args.repeat,
        "shape": shape,
        "targets": TARGETS,
        "sizes": sizes,
    }
    (CACHE / "result.json").write_text(json.dumps(result, indent=2) + "\n")
    print(_table(result))
    print(f"\nwrote {CACHE / 'result.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
