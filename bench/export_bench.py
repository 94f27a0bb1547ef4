"""Export throughput: entries per second per core and peak RSS of `statectl export` (JSON and
`--typed`) beside the JVM reading the same savepoint with Flink's own serializers.

Usage: python -m bench.export_bench [--entries 10000000] [--kind pojo,rowdata] [--no-jvm]

The savepoints are real Flink savepoints in their layout, built once into `.cache/bench/`:
`BenchJob` (bench/java, on a Flink MiniCluster) writes a tiny CANONICAL savepoint whose keyed
operators `pojo` (a ValueState of a POJO of 6 fields, 2 of them strings) and `rowdata` (a
ValueState of a SQL row BIGINT, INT, DOUBLE, VARCHAR, VARCHAR, DECIMAL(10, 2)) hold one Long key
each. Each benchmark savepoint keeps that operator's keyed-file header (Flink's serializer
snapshots) and gets `--entries` entries in 2 subtask files, encoded by statectl's own codecs
(`Codec.encode`) into blocks of `keyed_blocks.build_block`, every key in the key group Flink
assigns it. `BenchReader` (the JVM peer, a lean `StateDumper` that deserializes every key,
namespace and value with the serializers restored from the snapshots but prints nothing) proves
the bytes: it must read every entry without an error.

Measured in the same run, one command at a time: `statectl export SP -o out.parquet`, `statectl
export --typed SP -o out/`, the state read by the library (`State.read()`, decoding only: the
peer's work), the state read into a Spark DataFrame through the `flink-state` data source
(local[*]) and counted, and `java BenchReader SP`, buffered (the decoding peer) and as
Flink's restore opens a local file (unbuffered): wall and CPU seconds (`wait4`: the process and
its children), peak RSS (`wait4`'s maxrss, and the process tree's sampled sum), entries per CPU-
second and per second per core (wall × the cores the command kept busy, CPU / wall, at least
one). Before that, Flink's StateDumper reads a 20 000-entry savepoint of the same generator and
must agree with `statectl export` on every value. Prints a table and ratios to the JVM and
writes `.cache/bench/export.json`.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np

from bench import run
from statectl.formats import java_types, key_hashing, keyed_blocks, state_headers
from statectl.formats.handles import KeyGroupsHandle, RelativeFileHandle
from statectl.formats.key_groups import key_group_range
from statectl.formats.metadata import SubtaskState, write_metadata
from statectl.savepoint import entries
from statectl.savepoint.reader import open_savepoint

REPO = Path(__file__).resolve().parents[1]
CACHE = REPO / ".cache" / "bench"
JAVA_SOURCES = REPO / "bench" / "java"
STATES = {"pojo": "pojo", "rowdata": "row"}  # operator uid → its VALUE state
PARALLELISM = 2
LONG_KEYS = java_types.KEY_TYPES["org.apache.flink.api.common.typeutils.base.LongSerializer"]
CITIES = ["Berlin", "Paris", "Lisbon", "Oslo", "Quebec", "Rome", "Madrid", "Vienna"]
RARE_CITY = "Kraków"  # one value in 1000 is not ASCII


# --- the JVM side ----------------------------------------------------------------------------


def _java(main: str, args: list[str], options: list[str] | None = None) -> list[str]:
    """The command running `main` of bench/java (compiled with the values source set)."""
    from tests.flink import harness

    version = harness.FLINK_VERSION
    classes = harness._compile(
        JAVA_SOURCES,
        version,
        "bench-classes-",
        (harness.VALUES_SOURCES,),
        tuple(harness.table_jars(version)),
    )
    jars = [classes, *harness.classpath_jars(version), *harness.table_jars(version)]
    flags = options if options is not None else harness.JVM_OPTIONS
    return [
        harness._tool("java"),
        *flags,
        "-Duser.timezone=UTC",
        f"-Dlog4j.configurationFile={harness.LOG4J_CONFIG}",
        "-Dlog4j2.disable.jmx=true",
        "-cp",
        os.pathsep.join(map(str, jars)),
        f"statectl.values.{main}",
        *args,
    ]


def peer_options() -> list[str]:
    """The harness's JVM flags without C1-only compilation: the peer runs as a JVM would in
    production (tiered C2), with a 1 GiB heap."""
    from tests.flink import harness

    keep = [o for o in harness.JVM_OPTIONS if not o.startswith(("-XX:TieredStopAtLevel", "-Xmx"))]
    return ["-Xmx1g", *keep]


def seed() -> Path:
    """The tiny savepoint Flink writes (BenchJob), cached."""
    target = CACHE / "export-seed"
    if (target / "_metadata").is_file():
        return target
    work = Path(tempfile.mkdtemp(prefix="export-seed-", dir=CACHE))
    try:
        out = subprocess.run(_java("BenchJob", [str(work)]), capture_output=True, text=True)
        if out.returncode:
            raise SystemExit(f"bench: BenchJob failed:\n{out.stderr[-4000:]}")
        pointer = out.stdout.strip().splitlines()[-1].removeprefix("file:")
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(pointer, target)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return target


# --- the savepoints --------------------------------------------------------------------------


def value_of(kind: str, index: int) -> dict[str, Any]:
    """Entry `index`'s value, as the state's codec takes it."""
    count = index % 1000
    name = f"user-{index:09d}"
    city = CITIES[index % len(CITIES)] + ("-" + "x" * (index % 23) if index % 5 else "")
    city = RARE_CITY if index % 1000 == 7 else city
    if kind == "pojo":
        return {
            "city": city,
            "count": count,
            "flag": index % 2 == 0,
            "id": index,
            "name": name,
            "score": index / 7.0,
        }
    return {
        "__row_kind": 0,
        "f0": index,
        "f1": count,
        "f2": index / 7.0,
        "f3": name,
        "f4": city,
        "f5": Decimal(index % 10_000_000).scaleb(-2),
    }


def key_of(index: int) -> int:
    """Long keys spread over the whole range, negative ones included."""
    return (index * 0x9E3779B97F4A7C15 & 0xFFFFFFFFFFFFFFFF) - (1 << 63)


@dataclass(frozen=True)
class Built:
    path: Path
    kind: str
    entries: int
    bytes: int


def ensure(kind: str, count: int) -> Built:
    """The benchmark savepoint of `kind` with `count` entries, built unless cached."""
    target = CACHE / f"export-{kind}-{count}-p{PARALLELISM}"
    stamp = target.with_name(target.name + ".json")
    if target.is_dir() and stamp.is_file():
        return Built(target, kind, count, json.loads(stamp.read_text())["bytes"])
    shutil.rmtree(target, ignore_errors=True)
    staging = target.with_name(target.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    _build(seed(), kind, count, staging)
    staging.rename(target)
    size = sum(p.stat().st_size for p in target.iterdir())
    stamp.write_text(json.dumps({"kind": kind, "entries": count, "bytes": size}))
    return Built(target, kind, count, size)


def _build(source: Path, kind: str, count: int, staging: Path) -> None:
    """The seed with `kind`'s operator at `PARALLELISM` subtasks of `count` entries, and the other
    keyed operator removed; `_metadata` last."""
    sp = open_savepoint(str(source))
    op = sp.find_operator(kind)
    other = sp.find_operator("rowdata" if kind == "pojo" else "pojo")
    (keyed,) = entries.keyed_files(sp, op)
    assert isinstance(keyed, entries.KeyedFile)
    header = keyed.stream.read(
        0, keyed_blocks.header_length(keyed.handle.offsets, keyed.stream.size)
    )
    staging.mkdir(parents=True)
    kept = {f.name for f in source.iterdir()} - _files(op) - _files(other)
    for name in kept:
        shutil.copy2(source / name, staging / name)
    jobs = [
        (str(staging), header, kind, count, op.max_parallelism, index)
        for index in range(PARALLELISM)
    ]
    with ProcessPoolExecutor(PARALLELISM) as pool:
        subtasks = list(pool.map(_write_subtask, *zip(*jobs, strict=True)))
    new_op = dataclasses.replace(op, parallelism=PARALLELISM, subtasks=tuple(subtasks))
    operators = tuple(new_op if o is op else o for o in sp.metadata.operators if o is not other)
    metadata = dataclasses.replace(sp.metadata, operators=operators)
    (staging / "_metadata").write_bytes(write_metadata(metadata))


def _files(op: Any) -> set[str]:
    names = set()
    for subtask in op.subtasks or ():
        handle = subtask.managed_keyed_state
        if isinstance(handle, KeyGroupsHandle) and isinstance(handle.delegate, RelativeFileHandle):
            names.add(handle.delegate.relative_path)
    return names


def _write_subtask(
    folder: str, header: bytes, kind: str, count: int, max_parallelism: int, index: int
) -> SubtaskState:
    """One subtask's keyed file: the seed's header, then a block per key group."""
    meta = state_headers.parse_keyed_header(header)
    state_id = next(i for i, s in enumerate(meta.states) if s.name == STATES[kind])
    codec = entries.codecs_for(meta)[STATES[kind]].value
    assert codec is not None
    first, last = key_group_range(max_parallelism, PARALLELISM, index)
    prefix_bytes = java_types.key_group_prefix_bytes(max_parallelism)
    groups = _key_groups(count, max_parallelism)
    offsets = [0] * (last - first + 1)
    path = Path(folder) / str(uuid.UUID(int=index + 1, version=4))
    with path.open("wb") as out:
        out.write(header)
        for key_group in range(first, last + 1):
            members = np.flatnonzero(groups == key_group)
            if not len(members):
                continue
            prefix = java_types.key_group_prefix(key_group, prefix_bytes)
            run_entries = [
                (prefix + LONG_KEYS.write(key_of(i)) + b"\x00", codec.encode(value_of(kind, i)))
                for i in members.tolist()
            ]
            offsets[key_group - first] = out.tell()
            out.write(keyed_blocks.build_block([(state_id, run_entries)]))
        size = out.tell()
    handle = KeyGroupsHandle(7, first, tuple(offsets), RelativeFileHandle(path.name, size))
    return SubtaskState(index, managed_keyed_state=handle)


def _key_groups(count: int, max_parallelism: int) -> np.ndarray:
    """The key group Flink assigns each entry's Long key (murmur of `Long.hashCode`)."""
    spread = np.arange(count, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    keys = (spread ^ np.uint64(1 << 63)).astype(">u8")  # `key_of`'s two's complement
    starts = np.arange(count, dtype=np.int64) * 8
    return key_hashing.key_groups(LONG_KEYS, keys.tobytes(), starts, starts + 8, 0, max_parallelism)


# --- measuring -------------------------------------------------------------------------------


@dataclass
class Measured:
    wall: float
    cpu: float
    rss_mib: float  # wait4's maxrss: the largest process
    tree_rss_mib: float  # the process tree's sampled sum
    stdout: str


def measure(cmd: list[str]) -> Measured:
    """Wall and CPU seconds and peak RSS of `cmd` (run to its end)."""
    peak, seen = run.PeakRss(), set[int]()
    with tempfile.TemporaryFile("w+") as stdout, tempfile.TemporaryFile("w+") as stderr:
        started = time.perf_counter()
        process = subprocess.Popen(cmd, stdout=stdout, stderr=stderr, text=True)
        tree = 0
        while process.poll() is None:
            sample = run.sample_tree(process.pid, seen)
            tree = max(tree, sum(sum(v) for v in sample.values()))
            peak.add(sample)
            time.sleep(0.05)
            if _exited(process):
                break
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - started
        process.returncode = os.waitstatus_to_exitcode(status)
        stdout.seek(0)
        stderr.seek(0)
        if process.returncode:
            raise SystemExit(f"bench: {' '.join(cmd[:3])}… failed:\n{stderr.read()[-4000:]}")
        return Measured(
            wall,
            usage.ru_utime + usage.ru_stime,
            usage.ru_maxrss / 1024,
            tree / run.MIB,
            stdout.read(),
        )


def _exited(process: subprocess.Popen[str]) -> bool:
    """Whether the child is a zombie (exited, not yet reaped): `poll` would reap it and lose its
    rusage, so the sampling loop stops here and `wait4` reaps it."""
    try:
        with open(f"/proc/{process.pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def figures(measured: Measured, count: int, cores: float | None = None) -> dict[str, Any]:
    """Entries per second per core: by wall time × the cores the command kept busy
    (CPU seconds / wall, at least one), i.e. entries / max(wall, CPU seconds). `cores`: when
    the CPU seconds miss processes the command does not wait for (Spark's JVM and its Python
    workers), the cores it was given, and no per-CPU-second figure."""
    cpu_measured = cores is None
    cores = max(1.0, measured.cpu / measured.wall) if cores is None else cores
    return {
        "wall_seconds": round(measured.wall, 2),
        "cpu_seconds": round(measured.cpu, 2) if cpu_measured else None,
        "cores_used": round(cores, 2),
        "entries_per_second_per_core": round(count / measured.wall / cores),
        "entries_per_cpu_second": round(count / measured.cpu) if cpu_measured else None,
        "peak_rss_mib": round(measured.rss_mib),
        "peak_tree_rss_mib": round(measured.tree_rss_mib),
    }


# The state read into a Spark DataFrame (local[*], the `flink-state` data source) and counted.
SPARK_COUNT = """
import os, sys
from pyspark.sql import SparkSession
import statectl.spark
os.environ["PYSPARK_PYTHON"] = sys.executable  # the workers: this venv's interpreter
path, operator, state, expected = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
spark = SparkSession.builder.master("local[*]").getOrCreate()
statectl.spark.register(spark)
frame = spark.read.format("flink-state").option("operator", operator).option("state", state)
rows = frame.load(path).count()
spark.stop()
if rows != expected:
    raise SystemExit(f"Spark counted {rows} rows of {expected}")
"""

LIBRARY_READ = """
import sys
import statectl
path, operator, state, expected = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
batches = statectl.open(path).operator(operator).state(state).read()
rows = sum(batch.num_rows for batch in batches)
if rows != expected:
    raise SystemExit(f"the library read {rows} rows of {expected}")
"""
"""The state decoded into Arrow record batches and counted: the JVM peer's work (every key,
namespace and value decoded, nothing written)."""

PEERS = {"jvm": [], "jvm_json": ["json={out}/entries.jsonl"], "jvm_unbuffered": ["unbuffered"]}
"""BenchReader through a 1 MiB buffer (the decoding peer), the same writing each entry's key and
value as a JSON line by the dumper's rules (the JSON export's peer), and through Flink's
unbuffered local file stream as its restore opens it (an int per system call)."""


def bench_one(built: Built, jvm: bool) -> dict[str, Any]:
    statectl = str(REPO / ".venv" / "bin" / "statectl")
    out = CACHE / "export-out"
    result: dict[str, Any] = {"kind": built.kind, "entries": built.entries, "bytes": built.bytes}
    commands = {
        "json": [statectl, "export", str(built.path), "-o", str(out / "all.parquet")],
        "typed": [statectl, "export", "--typed", str(built.path), "-o", str(out / "typed")],
        "library_read": [
            sys.executable, "-c", LIBRARY_READ, str(built.path), built.kind, STATES[built.kind],
            str(built.entries),
        ],
        "spark_count": [
            sys.executable, "-c", SPARK_COUNT, str(built.path), built.kind, STATES[built.kind],
            str(built.entries),
        ],
    }  # fmt: skip
    for name, cmd in commands.items():
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
        # Spark's local[*] takes every core; its JVM and workers escape wait4's accounting.
        cores = float(os.cpu_count() or 1) if name == "spark_count" else None
        result[name] = figures(measure(cmd), built.entries, cores)
    shutil.rmtree(out, ignore_errors=True)
    if not jvm:
        return result
    out.mkdir(parents=True)
    for peer, options in PEERS.items():
        options = [o.replace("{out}", str(out)) for o in options]
        measured = measure(_java("BenchReader", [str(built.path), *options], peer_options()))
        report = json.loads(measured.stdout.strip().splitlines()[-1])
        if report["errors"] or report["entries"] != built.entries:
            raise SystemExit(f"bench: the JVM read {report} of {built.entries} entries")
        result[peer] = figures(measured, built.entries)
        result[peer]["read_loop_seconds"] = report["seconds"]
    shutil.rmtree(out, ignore_errors=True)
    for name in commands:
        for key in ("entries_per_second_per_core", "entries_per_cpu_second"):
            if result[name][key] is None:
                continue
            for peer in ("jvm", "jvm_json") if name == "json" else ("jvm",):
                ratio = result[name][key] / result[peer][key]
                result[name][f"{key}_vs_{peer}"] = round(ratio, 2)
    return result


PROOF_ENTRIES = 20_000


def prove(kind: str) -> dict[str, Any]:
    """Flink's StateDumper reads a small savepoint of the same generator without an error, every
    entry, each value equal to the one `statectl export` gives (by key)."""
    import pyarrow.parquet as pq

    built = ensure(kind, PROOF_ENTRIES)
    with tempfile.TemporaryDirectory(dir=CACHE) as tmp:
        dump = Path(tmp) / "dump.jsonl"
        out = subprocess.run(
            _java("StateDumper", [str(dump), str(built.path)]), capture_output=True
        )
        if out.returncode:
            raise SystemExit(f"bench: StateDumper failed:\n{out.stderr.decode()[-4000:]}")
        lines = [json.loads(line) for line in dump.read_text().splitlines()]
        exported = Path(tmp) / "export.parquet"
        statectl = str(REPO / ".venv" / "bin" / "statectl")
        export = [statectl, "export", str(built.path), "-o", str(exported)]
        subprocess.run(export, check=True, capture_output=True)
        table = pq.read_table(exported, columns=["state", "key_json", "value_json"]).to_pylist()
    ours = {r["key_json"]: json.loads(r["value_json"]) for r in table if r["state"] == STATES[kind]}
    theirs = {json.dumps(x["key"]): x.get("value") for x in lines if x.get("state") == STATES[kind]}
    errors = sum("error" in x for x in lines)
    if errors or len(theirs) != PROOF_ENTRIES or ours != theirs:
        differ = sum(ours.get(k) != v for k, v in theirs.items())
        raise SystemExit(f"bench: {kind}: {errors} errors, {len(theirs)} entries, {differ} differ")
    return {"entries": len(theirs), "errors": 0, "values_equal": True}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entries", type=int, default=10_000_000)
    parser.add_argument("--kind", default="pojo,rowdata")
    parser.add_argument("--no-jvm", action="store_true", help="statectl's figures only")
    args = parser.parse_args(argv)
    CACHE.mkdir(parents=True, exist_ok=True)
    results = []
    for kind in args.kind.split(","):
        proof = None if args.no_jvm else prove(kind)
        built = ensure(kind, args.entries)
        result = {"load_average": os.getloadavg()[0], **bench_one(built, not args.no_jvm)}
        result["flink_dumper_proof"] = proof
        results.append(result)
        print(json.dumps(result), file=sys.stderr)
    (CACHE / "export.json").write_text(json.dumps(results, indent=2) + "\n")
    print(_table(results))
    return 0


def _table(results: list[dict[str, Any]]) -> str:
    head = f"{'values':>8} {'entries':>11} {'how':>15} {'wall':>7} {'cpu':>7} {'/s/core':>10} "
    head += f"{'/cpu-s':>10} {'RSS':>7} {'÷ JVM':>6} {'÷ JVM JSON':>10}"
    lines = [head, "-" * len(head)]
    for r in results:
        for how in ("json", "typed", "library_read", "spark_count", *PEERS):
            if how not in r:
                continue
            f = r[how]
            ratio = f.get("entries_per_second_per_core_vs_jvm", "")
            json_ratio = f.get("entries_per_second_per_core_vs_jvm_json", "")
            lines.append(
                f"{r['kind']:>8} {r['entries']:>11,} {how:>15} {f['wall_seconds']:6.1f}s "
                f"{_or_dash(f['cpu_seconds'], '6.1f')}{'s' if f['cpu_seconds'] else ' '} "
                f"{f['entries_per_second_per_core']:>10,} "
                f"{_or_dash(f['entries_per_cpu_second'], '>10,')} {f['peak_rss_mib']:>4} Mi "
                f"{ratio:>6} {json_ratio:>10}"
            )
    lines += [
        "",
        "json: `statectl export SP -o out.parquet`; typed: `export --typed`; library_read:",
        "`State.read()`'s record batches counted (decoding only, as the JVM peer); spark_count:",
        "the state read into a DataFrame (`flink-state`, local[*]) and counted; jvm: BenchReader",
        "(Flink's serializers on every entry, files behind a 1 MiB buffer); jvm_json: the same",
        "writing each entry as a JSON line by the dumper's rules; jvm_unbuffered: the",
        "same through Flink's unbuffered local file stream. /s/core: entries / (wall × cores",
        "kept busy, at least 1); /cpu-s: per CPU-second of the process and its children; RSS:",
        "the process's peak (wait4); ÷ JVM: /s/core over the buffered JVM's; ÷ JVM JSON: the",
        "JSON export's over jvm_json's. Whole commands:",
        "interpreter or JVM start included (spark_count: Spark's start too, and per core over",
        "every core local[*] takes; the CPU of Spark's JVM and workers is not measured: -).",
    ]
    return "\n".join(lines)


def _or_dash(value: float | None, spec: str) -> str:
    """A figure, or a dash the width of the column where it was not measured."""
    if value is None:
        width = int("".join(c for c in spec.split(".")[0] if c.isdigit()) or 1)
        return "-".rjust(width)
    return format(value, spec)


if __name__ == "__main__":
    sys.exit(main())
