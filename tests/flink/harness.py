"""Real Apache Flink for tests: install the jars, compile the test jobs, write and restore savepoints.

Stdlib only. Everything heavy lives in the git-ignored ``<repo>/.cache/flink/``:

* ``<version>/pyflink/lib/*.jar`` — ``pip install --no-deps --target`` of ``apache-flink-libraries``;
* ``classes-<hash>/`` — the Java programs of ``tests/flink/src`` compiled with ``javac``; the hash
  covers the sources and the Flink version, so they recompile only when those change.

Two Java programs run Flink in-process on a MiniCluster (see tests/flink/README.md):

* ``FixtureJob`` writes a savepoint (or retains a checkpoint) of a deterministic job and a
  ``manifest.json`` with exactly the state in it;
* ``RestoreCheck`` restores any number of savepoints into the same topology in one JVM and dumps
  what every operator restored, in the manifest's dump schema.

CLI: ``python -m tests.flink.harness regenerate [--out tests/fixtures] [--only NAME ...]``
regenerates every committed fixture in one JVM; ``verify`` restores them and compares;
``ensure`` installs the jars and compiles; ``restore PATH=P[,maxp=M] ...`` prints a summary.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
CACHE = REPO / ".cache" / "flink"
SOURCES = HERE / "src"
COMPAT_SOURCES = HERE / "compat" / "src"
SQL_SOURCES = HERE / "sql" / "src"
LOG4J_CONFIG = HERE / "log4j2.properties"
FIXTURES = REPO / "tests" / "fixtures"
FLINK_VERSION = "2.3.0"
MAIN_PACKAGE = "statectl.flinkjobs"

# Where the retained-checkpoint fixture is generated: `_metadata` of a checkpoint holds absolute
# paths, so the fixture is generated into a fixed directory (recorded in its manifest) and
# `checkpoint_in_place` puts a copy back there before Flink restores it.
CHECKPOINT_BASE = Path(tempfile.gettempdir()) / "statectl-flink-checkpoints"
CHECKPOINT_JOB_ID = "5374617465637463686b707400000001"

# Flink on Java 17 needs these (same set as Flink's own launch scripts).
JVM_OPTIONS = [
    "-Xmx2g",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "--add-exports=java.base/sun.net.util=ALL-UNNAMED",
    "--add-exports=java.rmi/sun.rmi.registry=ALL-UNNAMED",
    "--add-exports=java.security.jgss/sun.security.krb5=ALL-UNNAMED",
    "--add-opens=java.base/java.lang=ALL-UNNAMED",
    "--add-opens=java.base/java.net=ALL-UNNAMED",
    "--add-opens=java.base/java.io=ALL-UNNAMED",
    "--add-opens=java.base/java.nio=ALL-UNNAMED",
    "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens=java.base/java.lang.reflect=ALL-UNNAMED",
    "--add-opens=java.base/java.text=ALL-UNNAMED",
    "--add-opens=java.base/java.time=ALL-UNNAMED",
    "--add-opens=java.base/java.util=ALL-UNNAMED",
    "--add-opens=java.base/java.util.concurrent=ALL-UNNAMED",
    "--add-opens=java.base/java.util.concurrent.atomic=ALL-UNNAMED",
    "--add-opens=java.base/java.util.concurrent.locks=ALL-UNNAMED",
]

# The committed fixtures (tests/fixtures/<name>/): FixtureJob parameters on top of DEFAULTS.
DEFAULTS: dict[str, Any] = {
    "backend": "hashmap",
    "format": "CANONICAL",
    "parallelism": 2,
    "max_parallelism": 128,
    "compression": False,
    "inline": False,
    "incremental": False,
    "mode": "savepoint",
}
FIXTURE_PARAMS: dict[str, dict[str, Any]] = {
    "hashmap_canonical_files": {},
    "hashmap_canonical_inline": {"inline": True},
    "rocksdb_canonical": {"backend": "rocksdb"},
    "hashmap_compressed": {"compression": True},
    "hashmap_maxp300": {"max_parallelism": 300},
    "hashmap_p4": {"parallelism": 4},
    "rocksdb_native_full": {"backend": "rocksdb", "format": "NATIVE", "incremental": False},
    "rocksdb_native_incremental": {"backend": "rocksdb", "format": "NATIVE", "incremental": True},
    # ForSt (Flink 2.x) writes only NATIVE savepoints, RocksDB's layout under another backend.
    "forst_native": {"backend": "forst", "format": "NATIVE"},
    "rocksdb_retained_checkpoint": {
        "backend": "rocksdb",
        "incremental": True,
        "mode": "checkpoint",
        "checkpoint_base": str(CHECKPOINT_BASE / "rocksdb_retained_checkpoint"),
        "job_id": CHECKPOINT_JOB_ID,
    },
}


class FlinkError(RuntimeError):
    """A Java program of the harness failed (not: a restore failed — that is a result entry)."""


# --------------------------------------------------------------------------- jars and classes


@contextlib.contextmanager
def _lock(name: str):
    """An exclusive file lock under the cache, so parallel test workers install/compile once."""
    CACHE.mkdir(parents=True, exist_ok=True)
    path = CACHE / f".{name}.lock"
    with open(path, "w") as handle:
        try:
            import fcntl

            fcntl.flock(handle, fcntl.LOCK_EX)
        except ImportError:  # pragma: no cover - not POSIX
            pass
        yield


def flink_lib(version: str = FLINK_VERSION) -> Path:
    return CACHE / version / "pyflink" / "lib"


def ensure_flink(version: str = FLINK_VERSION) -> Path:
    """The folder with flink-dist-<version>.jar, pip-installed into the cache when missing."""
    lib = flink_lib(version)
    if (lib / f"flink-dist-{version}.jar").is_file():
        return lib
    with _lock(f"install-{version}"):
        if (lib / f"flink-dist-{version}.jar").is_file():
            return lib
        target = CACHE / version
        staging = CACHE / f".install-{version}-{os.getpid()}"
        shutil.rmtree(staging, ignore_errors=True)
        cmd = [
            sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
            "--no-deps", "--target", str(staging), f"apache-flink-libraries=={version}",
        ]  # fmt: skip
        print(f"installing Flink {version} jars: {' '.join(cmd)}", file=sys.stderr)
        subprocess.run(cmd, check=True)
        if not (staging / "pyflink" / "lib" / f"flink-dist-{version}.jar").is_file():
            raise FlinkError(f"apache-flink-libraries=={version} has no flink-dist jar")
        shutil.rmtree(target, ignore_errors=True)
        os.replace(staging, target)
    return lib


def classpath_jars(version: str = FLINK_VERSION) -> list[Path]:
    lib = ensure_flink(version)
    jars = [lib / f"flink-dist-{version}.jar"]
    # flink-shaded-zookeeper: Flink 1.15 ships it beside flink-dist, which needs its shaded Guava.
    prefixes = ("log4j-api-", "log4j-core-", "log4j-slf4j-impl-", "log4j-1.2-api-", "flink-shaded-zookeeper-")  # fmt: skip
    for prefix in prefixes:
        jars.extend(sorted(lib.glob(f"{prefix}*.jar")))
    return jars


def _tool(name: str) -> str:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / name).exists():
        return str(Path(home) / "bin" / name)
    found = shutil.which(name)
    if not found:
        raise FlinkError(f"`{name}` not found: install a JDK (17) or set JAVA_HOME")
    return found


def _sources(root: Path = SOURCES) -> list[Path]:
    return sorted(root.rglob("*.java"))


def table_jars(version: str = FLINK_VERSION) -> list[Path]:
    """The Table API / SQL jars the wheel puts beside flink-dist (lib/): API, runtime, the
    planner loader (it unpacks the planner into java.io.tmpdir at first use) and flink-cep."""
    lib = ensure_flink(version)
    names = ("flink-table-api-java-uber", "flink-table-runtime", "flink-table-planner-loader", "flink-cep")  # fmt: skip
    return [lib / f"{name}-{version}.jar" for name in names]


def _compile(
    root: Path, version: str, prefix: str, extra_roots: tuple[Path, ...] = (),
    extra_jars: tuple[Path, ...] = (),
) -> Path:  # fmt: skip
    """javac of every source under `root` (and `extra_roots`) against Flink `version` (and
    `extra_jars`), into .cache/flink/<prefix><hash of the sources and the version>; recompiled
    only when those change."""
    jars = [*classpath_jars(version), *extra_jars]
    digest = hashlib.sha256(version.encode())
    sources = [(r, source) for r in (root, *extra_roots) for source in _sources(r)]
    for base, source in sources:
        digest.update(str(source.relative_to(base)).encode() + b"\0")
        digest.update(source.read_bytes() + b"\0")
    out = CACHE / f"{prefix}{digest.hexdigest()[:16]}"
    if (out / ".complete").exists():
        return out
    with _lock("compile"):
        if (out / ".complete").exists():
            return out
        staging = CACHE / f".classes-{os.getpid()}"
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        cmd = [
            _tool("javac"), "-encoding", "UTF-8", "-nowarn", "-Xlint:none", "-d", str(staging),
            "-cp", os.pathsep.join(map(str, jars)), *(str(source) for _, source in sources),
        ]  # fmt: skip
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            shutil.rmtree(staging, ignore_errors=True)
            raise FlinkError(f"javac failed:\n{proc.stdout}\n{proc.stderr}")
        (staging / ".complete").touch()
        shutil.rmtree(out, ignore_errors=True)
        os.replace(staging, out)
    return out


def compile_jobs(version: str = FLINK_VERSION) -> Path:
    """The compiled test programs: .cache/flink/classes-<hash of sources and Flink version>."""
    return _compile(SOURCES, version, "classes-")


def compile_sql(version: str = FLINK_VERSION) -> Path:
    """The test programs plus the SQL jobs (tests/flink/sql/src), compiled against the Table API
    jars too: .cache/flink/sql-classes-<hash>."""
    return _compile(SOURCES, version, "sql-classes-", (SQL_SOURCES,), tuple(table_jars(version)))


def compile_compat(version: str) -> Path:
    """The compat job (tests/flink/compat/src, Flink 1.x APIs) compiled against `version`:
    .cache/flink/compat-classes-<version>-<hash>."""
    return _compile(COMPAT_SOURCES, version, f"compat-classes-{version}-")


def _mtime(path: Path) -> float:
    """0 for a file gone since it was listed (another worker pruned it)."""
    try:
        return path.stat().st_mtime
    except FileNotFoundError:
        return 0.0


def _log_file(main: str) -> Path:
    """A fresh log file for one JVM run under .cache/flink/logs/ (the newest 30 are kept)."""
    logs = CACHE / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    for old in sorted(logs.glob("*.log"), key=_mtime)[:-30]:
        old.unlink(missing_ok=True)
    return logs / f"{main}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log"


def _run_java(
    main: str,
    args: list[str],
    *,
    timeout: float,
    echo: bool = False,
    version: str = FLINK_VERSION,
    classes: Path | None = None,
    extra_jars: list[Path] | None = None,
) -> str:
    """Runs `main` (a class of MAIN_PACKAGE, or fully qualified) on Flink `version`'s jars."""
    classes = classes or compile_jobs(version)
    main_class = main if "." in main else f"{MAIN_PACKAGE}.{main}"
    log = _log_file(main_class.rsplit(".", 1)[-1])
    cmd = [
        _tool("java"), *JVM_OPTIONS, f"-Dlog4j.configurationFile={LOG4J_CONFIG}",
        f"-Dstatectl.flink.log={log}", "-Dlog4j2.disable.jmx=true",
        "-cp", os.pathsep.join([str(classes), *map(str, classpath_jars(version) + (extra_jars or []))]),
        main_class, *args,
    ]  # fmt: skip
    proc = subprocess.run(
        cmd, stdout=subprocess.PIPE, stderr=None if echo else subprocess.PIPE, text=True,
        timeout=timeout,
    )  # fmt: skip
    if proc.returncode != 0:
        tail = "" if echo else "\n".join((proc.stderr or "").splitlines()[-60:])
        raise FlinkError(f"{main} exited with {proc.returncode} (Flink log: {log}):\n{tail}")
    return proc.stdout


# --------------------------------------------------------------------------- writing fixtures


def fixture_spec(out_dir: str | Path, **params: Any) -> dict[str, Any]:
    unknown = set(params) - set(DEFAULTS) - {
        "checkpoint_base", "job_id", "file_merging", "bulk_keys", "flink_config",
    }  # fmt: skip
    if unknown:
        raise TypeError(f"unknown FixtureJob parameters: {sorted(unknown)}")
    spec = {**DEFAULTS, **params, "out": str(Path(out_dir).resolve())}
    spec["format"] = str(spec["format"]).upper()
    if spec["mode"] == "checkpoint" and not spec.get("checkpoint_base"):
        # The checkpoint's `_metadata` points at files under checkpoint_base: keep it outside
        # the (deleted) JVM work dir so checkpoint_in_place finds it.
        digest = hashlib.sha256(spec["out"].encode()).hexdigest()[:12]
        spec["checkpoint_base"] = str(CHECKPOINT_BASE / f"adhoc-{digest}")
    return spec


def write_fixtures(
    specs: list[dict[str, Any]], *, echo: bool = False, version: str = FLINK_VERSION
) -> list[Path]:
    """Runs FixtureJob for every spec (see `fixture_spec`) in one JVM of Flink `version` (2.x);
    returns manifest paths."""
    if not specs:
        return []
    with tempfile.TemporaryDirectory(prefix="statectl-fixturejob-") as tmp:
        spec_file = Path(tmp) / "specs.json"
        spec_file.write_text(json.dumps(specs, indent=1))
        _run_java(
            "FixtureJob", [str(spec_file)], timeout=300 + 120 * len(specs), echo=echo,
            version=version,
        )  # fmt: skip
    manifests = [Path(spec["out"]) / "manifest.json" for spec in specs]
    for manifest in manifests:
        if not manifest.is_file():
            raise FlinkError(f"FixtureJob wrote no {manifest}")
    return manifests


# The hashmap backend's own snapshot format (retained checkpoints, NATIVE savepoints): FixtureJob
# parameters per kind of `heap_snapshots`.
HEAP_SNAPSHOT_KINDS: dict[str, dict[str, Any]] = {
    "checkpoint": {"mode": "checkpoint"},
    "checkpoint-compressed": {"mode": "checkpoint", "compression": True},
    "checkpoint-maxp300": {"mode": "checkpoint", "max_parallelism": 300},
    "checkpoint-maxp300-compressed": {
        "mode": "checkpoint", "max_parallelism": 300, "compression": True,
    },
    "native-savepoint": {"format": "NATIVE"},
}  # fmt: skip


# Heap snapshots whose subtasks hold key group 0 alone (or with max parallelism 1, only it): a
# key group 0 block in the heap format starts with four zero bytes, as a canonical block of state
# 0 can, so the layout must be told from more than one block's first bytes.
KEY_GROUP_ZERO_KINDS: dict[str, dict[str, Any]] = {
    "checkpoint-p2-maxp2": {"mode": "checkpoint", "parallelism": 2, "max_parallelism": 2},
    "checkpoint-p2-maxp2-compressed": {
        "mode": "checkpoint", "parallelism": 2, "max_parallelism": 2, "compression": True,
    },
    "native-savepoint-p2-maxp2": {"format": "NATIVE", "parallelism": 2, "max_parallelism": 2},
    "checkpoint-maxp1": {"mode": "checkpoint", "parallelism": 1, "max_parallelism": 1},
    "native-savepoint-maxp1": {"format": "NATIVE", "parallelism": 1, "max_parallelism": 1},
    "native-savepoint-maxp1-compressed": {
        "format": "NATIVE", "parallelism": 1, "max_parallelism": 1, "compression": True,
    },
}  # fmt: skip


def heap_snapshots(kinds: dict[str, dict[str, Any]] | None = None) -> dict[str, Path]:
    """FixtureJob on the hashmap backend, one fixture directory per kind (by default
    `HEAP_SNAPSHOT_KINDS`; `KEY_GROUP_ZERO_KINDS` has its own cache), cached under
    .cache/flink/heap-snapshots-<hash of the sources and kinds>/<kind>/ (one JVM for all when
    missing). A checkpoint's original location (its `_metadata`'s absolute paths) is
    `originals/<kind>/` there, so `checkpoint_in_place` finds it in place."""
    kinds = HEAP_SNAPSHOT_KINDS if kinds is None else kinds
    digest = hashlib.sha256(json.dumps(kinds, sort_keys=True).encode()).hexdigest()[:8]
    name = compile_jobs().name.replace("classes-", "heap-snapshots-")
    return _cached_fixtures(
        CACHE / (name if kinds is HEAP_SNAPSHOT_KINDS else f"{name}-{digest}"), kinds
    )


# RocksDB instances with levels below L0 from a few MB of keyed state: tiny memtables, files and
# level sizes (RocksDBConfigurableOptions; a misspelt key is ignored, so tests check the MANIFEST).
SMALL_ROCKSDB: dict[str, str] = {
    "state.backend.rocksdb.writebuffer.size": "64kb",
    "state.backend.rocksdb.compaction.level.target-file-size-base": "32kb",
    "state.backend.rocksdb.compaction.level.max-size-level-base": "32kb",
}
LEVEL_BULK_KEYS = 16000
_LEVELS: dict[str, Any] = {
    "backend": "rocksdb", "parallelism": 4, "bulk_keys": LEVEL_BULK_KEYS, "flink_config": SMALL_ROCKSDB,
}  # fmt: skip
# `level_snapshots`: FixtureJob parameters per kind.
LEVEL_SNAPSHOT_KINDS: dict[str, dict[str, Any]] = {
    "native-savepoint": {**_LEVELS, "format": "NATIVE"},
    "native-savepoint-uncompressed": {
        **_LEVELS, "format": "NATIVE",
        "flink_config": {**SMALL_ROCKSDB, "state.backend.rocksdb.compression.per.level": "NO_COMPRESSION"},
    },
    "checkpoint": {**_LEVELS, "mode": "checkpoint", "incremental": True},
}  # fmt: skip


def level_snapshots() -> dict[str, Path]:
    """FixtureJob on RocksDB (`LEVEL_SNAPSHOT_KINDS`, parallelism 4, `LEVEL_BULK_KEYS` more keys
    per keyed operator, `SMALL_ROCKSDB`): instances whose SST files reach L1 and below, as a
    long-running job's do. Cached like `heap_snapshots` under
    .cache/flink/level-snapshots-<hash of the sources and kinds>/<kind>/ (one JVM)."""
    digest = hashlib.sha256(json.dumps(LEVEL_SNAPSHOT_KINDS, sort_keys=True).encode()).hexdigest()[
        :8
    ]
    name = compile_jobs().name.replace("classes-", "level-snapshots-")
    return _cached_fixtures(CACHE / f"{name}-{digest}", LEVEL_SNAPSHOT_KINDS)


def _cached_fixtures(root: Path, kinds: dict[str, dict[str, Any]]) -> dict[str, Path]:
    """One FixtureJob JVM writes every kind missing under root/<kind>/; a checkpoint's original
    location is root/originals/<kind>/."""
    dirs = {kind: root / kind for kind in kinds}
    if all((d / "manifest.json").is_file() for d in dirs.values()):
        return dirs
    with _lock(root.name):
        if not all((d / "manifest.json").is_file() for d in dirs.values()):
            shutil.rmtree(root, ignore_errors=True)
            staging = root / ".staging"
            specs = [
                fixture_spec(
                    staging / kind, checkpoint_base=str(root / "originals" / kind), **params
                )
                for kind, params in kinds.items()
            ]
            write_fixtures(specs)
            for kind in kinds:
                os.replace(staging / kind, dirs[kind])
            shutil.rmtree(staging, ignore_errors=True)
    return dirs


def write_fixture(out_dir: str | Path, **params: Any) -> Path:
    """Runs the fixture job once into out_dir and returns its manifest.json path.

    params: backend (hashmap|rocksdb), format (CANONICAL|NATIVE), parallelism, max_parallelism,
    compression, inline, incremental, mode (savepoint|checkpoint), checkpoint_base, job_id.
    """
    return write_fixtures([fixture_spec(out_dir, **params)])[0]


# --------------------------------------------------------------------------- restoring


@dataclasses.dataclass
class RestoreRequest:
    """Restore `path` (savepoint dir, its _metadata, or a chk-N dir) at `parallelism`.

    backend None: rocksdb if the snapshot has RocksDB native handles, else hashmap.
    rename: uid in the snapshot -> uid in the restoring job; drop: uids left out of the job
    (then set allow_non_restored if their state is still in the snapshot).
    """

    path: str | Path
    parallelism: int
    max_parallelism: int | None = None
    backend: str | None = None
    rename: dict[str, str] = dataclasses.field(default_factory=dict)
    drop: list[str] = dataclasses.field(default_factory=list)
    allow_non_restored: bool = False
    # Optional: once restored, take a savepoint (NATIVE or CANONICAL) of the restored job into
    # this directory; the result's "savepoint" is its path (e.g. a savepoint Flink rescaled).
    savepoint_dir: str | Path | None = None
    savepoint_format: str = "NATIVE"
    # False: keyed operators dump no keys (restore timing of large savepoints, benchmarks)
    dump: bool = True

    def to_json(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["path"] = str(Path(self.path).resolve())
        if self.savepoint_dir is not None:
            data["savepoint_dir"] = str(Path(self.savepoint_dir).resolve())
        return data


def restore_check(
    items: list[RestoreRequest], *, echo: bool = False, version: str = FLINK_VERSION
) -> list[dict[str, Any]]:
    """Restores every request in one JVM (Flink `version`, 2.x); one result per request, in order.

    A result: {"request", "ok", "error" (message chain or None), "error_chain", "state" (the dump
    schema, None on error), "restored_flags" {uid: bool}, "backend", "backend_classes", "seconds"
    (the whole request), "restore_seconds" (on success: from the job's submission until every
    stateful subtask has restored)}.
    """
    if not items:
        return []
    with tempfile.TemporaryDirectory(prefix="statectl-restorecheck-") as tmp:
        requests = Path(tmp) / "requests.json"
        requests.write_text(json.dumps([item.to_json() for item in items], indent=1))
        out = Path(tmp) / "results.json"
        _run_java(
            "RestoreCheck", [str(out), f"@{requests}"], timeout=300 + 120 * len(items),
            echo=echo, version=version,
        )  # fmt: skip
        results = json.loads(out.read_text())
    if len(results) != len(items):
        raise FlinkError(f"RestoreCheck returned {len(results)} results for {len(items)} requests")
    return results


# --------------------------------------------------------------------------- window operators


def write_window_savepoint(
    out: str | Path, *, backend: str = "hashmap", format: str = "CANONICAL",
    parallelism: int = 2, max_parallelism: int = 128, retained_checkpoint: bool = False,
) -> Path:  # fmt: skip
    """WindowJob's savepoint (three window operators, no window fired yet) into out/savepoint;
    returns out/manifest.json, whose `expected` lists the results every window must emit.
    `retained_checkpoint`: a checkpoint retained on cancellation instead of a savepoint (`format`
    ignored), its job directory in out/checkpoint, the manifest's `path` checkpoint/chk-N (its
    hashmap files are relative handles: readable where it is)."""
    out = Path(out).resolve()
    kind = "CHECKPOINT" if retained_checkpoint else format.upper()
    args = ["write", str(out), backend, kind, str(parallelism), str(max_parallelism)]
    _run_java("WindowJob", args, timeout=300)
    return out / "manifest.json"


def restore_windows(requests: list[RestoreRequest]) -> list[dict[str, Any]]:
    """Restores each request into WindowJob (one JVM), fires every window and returns per
    request {"ok", "error", "results"}: the emitted "uid|key|windowStart|result" lines."""
    items = [
        {"path": str(Path(r.path).resolve()), "parallelism": r.parallelism,
         "backend": r.backend or "hashmap", "max_parallelism": r.max_parallelism or -1}
        for r in requests
    ]  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="statectl-windows-") as tmp:
        request_file, out = Path(tmp) / "requests.json", Path(tmp) / "results.json"
        request_file.write_text(json.dumps(items, indent=1))
        _run_java(
            "WindowJob", ["restore", str(out), str(request_file)], timeout=300 + 60 * len(items)
        )
        return json.loads(out.read_text())


# --------------------------------------------------------------------------- SQL jobs


def _run_sql(args: list[str], timeout: float) -> str:
    return _run_java(
        "SqlJob", args, timeout=timeout, classes=compile_sql(), extra_jars=table_jars()
    )


def sql_savepoints(specs: dict[str, dict[str, Any]]) -> dict[str, Path]:
    """SqlJob's savepoints (tests/flink/sql/src), one per spec name {backend, format,
    parallelism, max_parallelism}, written in one JVM and cached under
    .cache/flink/sql-savepoints-<hash of the sources>/<name>/; returns each manifest.json (with
    `before`, the rows emitted before the savepoint, and `full`, those of an uninterrupted run)."""
    root = CACHE / compile_sql().name.replace("sql-classes-", "sql-savepoints-")
    manifests = {name: root / name / "manifest.json" for name in specs}
    missing = [name for name, manifest in manifests.items() if not manifest.is_file()]
    if missing:
        with _lock("sql-savepoints"), tempfile.TemporaryDirectory(prefix="statectl-sql-") as tmp:
            staging = {name: Path(tmp) / name for name in missing}
            items = [{**specs[name], "out": str(staging[name])} for name in missing]
            (Path(tmp) / "specs.json").write_text(json.dumps(items, indent=1))
            _run_sql(["write", str(Path(tmp) / "specs.json")], timeout=300 + 120 * len(items))
            for name in missing:
                shutil.rmtree(root / name, ignore_errors=True)
                root.mkdir(parents=True, exist_ok=True)
                shutil.copytree(staging[name], root / name)
    return manifests


def restore_sql(requests: list[RestoreRequest]) -> list[dict[str, Any]]:
    """Restores each request into SqlJob (one JVM), feeds the second batch and returns per
    request {"ok", "error", "rows"}: the sorted "query|changelog row" lines it emitted."""
    items = [
        {"path": str(Path(r.path).resolve()), "parallelism": r.parallelism,
         "backend": r.backend or "hashmap", "max_parallelism": r.max_parallelism or -1}
        for r in requests
    ]  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="statectl-sql-") as tmp:
        request_file, out = Path(tmp) / "requests.json", Path(tmp) / "results.json"
        request_file.write_text(json.dumps(items, indent=1))
        _run_sql(["restore", str(out), str(request_file)], timeout=300 + 60 * len(items))
        results: list[dict[str, Any]] = json.loads(out.read_text())
        return results


# --------------------------------------------------------------------------- older Flink versions

# Flink versions the compat tests (tests/compat/) run: the last release of every minor before
# 2.3. 1.15 writes metadata V3 and operator-state header 5, 1.16/1.17 V4 and header 5, 1.18/1.19
# V4 and header 6 (compression flag), 1.20 V4 with file-merging handle codes known, 2.0 V5
# (operator names and uids), 2.1/2.2 V6. 1.x versions run the compat job (tests/flink/compat/src,
# 1.x APIs); 2.x versions FixtureJob/RestoreCheck.
COMPAT_VERSIONS = (
    "1.15.4", "1.16.3", "1.17.2", "1.18.1", "1.19.3", "1.20.3", "2.0.1", "2.1.3", "2.2.1",
)  # fmt: skip
COMPAT_MAIN = "statectl.compat.CompatJob"
# The savepoints the compat job writes per version: kind -> job parameters. NATIVE with
# incremental snapshots: Flink 1.15 writes a NATIVE savepoint of a non-incremental RocksDB backend
# as a full snapshot in the canonical block format (no RocksDB files).
COMPAT_KINDS: dict[str, dict[str, Any]] = {
    "hashmap-canonical": {"backend": "hashmap", "format": "CANONICAL"},
    "hashmap-compressed": {"backend": "hashmap", "format": "CANONICAL", "compression": True},
    "rocksdb-canonical": {"backend": "rocksdb", "format": "CANONICAL"},
    "rocksdb-native": {"backend": "rocksdb", "format": "NATIVE", "incremental": True},
}
COMPAT_FIXTURES = FIXTURES / "compat"


def runs_compat_job(version: str) -> bool:
    """Flink 1.x runs the compat job; 2.x the fixture job and restore check of tests/flink/src."""
    return int(version.split(".")[0]) < 2


def compile_for(version: str) -> Path:
    return compile_compat(version) if runs_compat_job(version) else compile_jobs(version)


def write_compat(
    version: str,
    out_root: str | Path,
    kinds: list[str] | None = None,
    *,
    parallelism: int = 2,
    max_parallelism: int = 128,
    echo: bool = False,
) -> dict[str, Path]:
    """One savepoint per kind of COMPAT_KINDS (or `kinds`) written by Flink `version` in one JVM
    (the compat job on 1.x, FixtureJob on 2.x) into out_root/<version>-<kind>/{savepoint,
    manifest.json}. Returns kind -> fixture directory."""
    kinds = list(kinds or COMPAT_KINDS)
    out_root = Path(out_root).resolve()
    dirs = {kind: out_root / f"{version}-{kind}" for kind in kinds}
    if not runs_compat_job(version):
        specs = [
            fixture_spec(
                d, parallelism=parallelism, max_parallelism=max_parallelism, **COMPAT_KINDS[kind]
            )
            for kind, d in dirs.items()
        ]
        write_fixtures(specs, echo=echo, version=version)
        return dirs
    specs = [
        {"out": str(d), "incremental": False, "compression": False, **COMPAT_KINDS[kind],
         "parallelism": parallelism, "max_parallelism": max_parallelism}
        for kind, d in dirs.items()
    ]  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="statectl-compat-") as tmp:
        spec_file = Path(tmp) / "specs.json"
        spec_file.write_text(json.dumps(specs, indent=1))
        _run_java(
            COMPAT_MAIN, ["write", str(spec_file)], timeout=300 + 60 * len(specs), echo=echo,
            version=version, classes=compile_compat(version),
        )  # fmt: skip
    for d in dirs.values():
        if not (d / "manifest.json").is_file():
            raise FlinkError(f"CompatJob wrote no {d / 'manifest.json'}")
    return dirs


def restore_compat(
    version: str, requests: list[RestoreRequest], *, echo: bool = False
) -> list[dict[str, Any]]:
    """Restores every request with the compat job on Flink `version`, in one JVM; one result per
    request: {"request", "ok", "error", "state" (dump schema), "backend_classes", "seconds"}. 1.x
    uses only path, parallelism and backend of a request (backend None: hashmap); 2.x runs
    RestoreCheck (`restore_check`)."""
    if not runs_compat_job(version):
        return restore_check(requests, echo=echo, version=version)
    if not requests:
        return []
    items = [
        {"path": str(Path(r.path).resolve()), "parallelism": r.parallelism,
         "backend": r.backend or "hashmap"}
        for r in requests
    ]  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="statectl-compat-restore-") as tmp:
        request_file, out = Path(tmp) / "requests.json", Path(tmp) / "results.json"
        request_file.write_text(json.dumps(items, indent=1))
        _run_java(
            COMPAT_MAIN, ["restore", str(out), str(request_file)],
            timeout=300 + 60 * len(items), echo=echo, version=version,
            classes=compile_compat(version),
        )  # fmt: skip
        results = json.loads(out.read_text())
    if len(results) != len(items):
        raise FlinkError(f"CompatJob returned {len(results)} results for {len(items)} requests")
    return results


# The hashmap backend's own snapshot format written by the compat job on Flink 1.x (retained
# checkpoints; a NATIVE savepoint, the same format): kind -> job parameters (parallelism 2, mode
# checkpoint unless said). Generated on request into the cache (`compat_heap_snapshots`), never
# committed.
COMPAT_HEAP_SNAPSHOT_KINDS: dict[str, dict[str, Any]] = {
    "checkpoint": {},
    "checkpoint-compressed": {"compression": True},
    "checkpoint-maxp300": {"max_parallelism": 300},
    "checkpoint-maxp300-compressed": {"max_parallelism": 300, "compression": True},
    "native-savepoint": {"mode": "savepoint", "format": "NATIVE"},
}


def compat_heap_snapshots(version: str) -> dict[str, Path]:
    """The compat job on Flink `version` (1.x) on the hashmap backend, one snapshot per
    `COMPAT_HEAP_SNAPSHOT_KINDS` kind (checkpoints: RETAIN_ON_CANCELLATION, no interval, one
    checkpoint triggered after the records), cached under .cache/flink/compat-heap-snapshots-
    <version>-<hash of the sources>/<kind>/ {checkpoint/ (the job directory) or savepoint/,
    manifest.json} (one JVM for all when missing). Flink wrote each checkpoint into
    `originals/<kind>/` there, the absolute location its `_metadata` refers to
    (`checkpoint_in_place` restores it from there)."""
    if not runs_compat_job(version):
        raise ValueError(f"Flink {version} does not run the compat job; see heap_snapshots()")
    root = CACHE / compile_compat(version).name.replace("compat-classes-", "compat-heap-snapshots-")  # fmt: skip
    dirs = {kind: root / kind for kind in COMPAT_HEAP_SNAPSHOT_KINDS}
    if all((d / "manifest.json").is_file() for d in dirs.values()):
        return dirs
    with _lock(f"compat-heap-snapshots-{version}"):
        if not all((d / "manifest.json").is_file() for d in dirs.values()):
            shutil.rmtree(root, ignore_errors=True)
            staging = root / ".staging"
            specs = [
                {"out": str(staging / kind), "backend": "hashmap", "format": "CANONICAL",
                 "incremental": False, "compression": False, "parallelism": 2,
                 "max_parallelism": 128, "mode": "checkpoint",
                 "checkpoint_base": str(root / "originals" / kind), **params}
                for kind, params in COMPAT_HEAP_SNAPSHOT_KINDS.items()
            ]  # fmt: skip
            with tempfile.TemporaryDirectory(prefix="statectl-compat-") as tmp:
                spec_file = Path(tmp) / "specs.json"
                spec_file.write_text(json.dumps(specs, indent=1))
                _run_java(
                    COMPAT_MAIN, ["write", str(spec_file)], timeout=300 + 60 * len(specs),
                    version=version, classes=compile_compat(version),
                )  # fmt: skip
            for kind in COMPAT_HEAP_SNAPSHOT_KINDS:
                if not (staging / kind / "manifest.json").is_file():
                    raise FlinkError(f"CompatJob wrote no {staging / kind / 'manifest.json'}")
                os.replace(staging / kind, dirs[kind])
            shutil.rmtree(staging, ignore_errors=True)
    return dirs


def regenerate_compat(out: str | Path = COMPAT_FIXTURES, versions: list[str] | None = None) -> list[Path]:  # fmt: skip
    """Rewrites tests/fixtures/compat/<version>-<kind>/ for every compat version (a JVM each)."""
    out = Path(out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for version in versions or COMPAT_VERSIONS:
        staging = Path(tempfile.mkdtemp(prefix=".regenerate-", dir=out))
        try:
            for d in write_compat(version, staging, echo=True).values():
                shutil.rmtree(out / d.name, ignore_errors=True)
                os.replace(d, out / d.name)
                written.append(out / d.name / "manifest.json")
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return written


# --------------------------------------------------------------------------- fixtures on disk


def load_manifest(fixture_dir: str | Path) -> dict[str, Any]:
    return json.loads((Path(fixture_dir) / "manifest.json").read_text())


def snapshot_path(fixture_dir: str | Path) -> Path:
    """The savepoint (or chk-N) directory of a fixture. For a retained checkpoint this is the copy
    inside the fixture, whose `_metadata` points at the original location; see checkpoint_in_place."""
    return Path(fixture_dir) / load_manifest(fixture_dir)["path"]


def checkpoint_in_place(fixture_dir: str | Path) -> Path:
    """For a retained-checkpoint fixture: make sure the checkpoint exists at the absolute location
    its `_metadata` refers to (copying the fixture's `checkpoint/` there if needed) and return the
    chk-N directory there, ready for Flink to restore. Other fixtures: their savepoint path."""
    manifest = load_manifest(fixture_dir)
    if manifest.get("mode") != "checkpoint":
        return snapshot_path(fixture_dir)
    original = Path(manifest["checkpoint"]["original_dir"])
    source = Path(fixture_dir) / "checkpoint"
    relative_chk = Path(manifest["path"]).relative_to("checkpoint")
    with _lock("checkpoint-in-place"):
        if not _same_tree(source, original):
            shutil.rmtree(original, ignore_errors=True)
            shutil.copytree(source, original)
            for name in manifest["checkpoint"]["files"]:
                if name.endswith("/"):  # empty directories git does not keep (taskowned/)
                    (original / name).mkdir(parents=True, exist_ok=True)
    return original / relative_chk


def _same_tree(a: Path, b: Path) -> bool:
    if not b.is_dir():
        return False
    files_a = {p.relative_to(a): p.stat().st_size for p in a.rglob("*") if p.is_file()}
    files_b = {p.relative_to(b): p.stat().st_size for p in b.rglob("*") if p.is_file()}
    return files_a == files_b


def regenerate(out: str | Path = FIXTURES, only: list[str] | None = None) -> list[Path]:
    """Rewrites tests/fixtures/<name>/ for every fixture (or `only` those), in one JVM."""
    out = Path(out).resolve()
    names = only or list(FIXTURE_PARAMS)
    unknown = set(names) - set(FIXTURE_PARAMS)
    if unknown:
        raise SystemExit(f"unknown fixtures: {sorted(unknown)}; known: {list(FIXTURE_PARAMS)}")
    out.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".regenerate-", dir=out))
    try:
        specs = [fixture_spec(staging / name, **FIXTURE_PARAMS[name]) for name in names]
        write_fixtures(specs, echo=True)
        for name in names:
            shutil.rmtree(out / name, ignore_errors=True)
            os.replace(staging / name, out / name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return [out / name / "manifest.json" for name in names]


# --------------------------------------------------------------------------- comparing


def compare(written: dict[str, Any], restored: dict[str, Any], manifest_operators: list[dict[str, Any]]) -> list[str]:  # fmt: skip
    """Differences between a manifest's state and a RestoreCheck state (empty list: equal).

    Keyed entries and timers: the union over subtasks must be equal (no key twice). SPLIT list
    elements: equal as multisets. UNION: every restored subtask holds the whole written union.
    BROADCAST: every restored subtask holds the written map. No unreachable/misplaced keys.
    """
    problems: list[str] = []
    for op in manifest_operators:
        uid, states = op["uid"], op["states"]
        if not states:
            continue
        w = written["operators"].get(uid, {}).get("subtasks", {})
        r = restored["operators"].get(uid, {}).get("subtasks", {})
        if not r:
            problems.append(f"{uid}: nothing restored")
            continue
        for index, sub in r.items():
            for check in ("unreachable", "misplaced"):
                if sub.get(check):
                    problems.append(f"{uid}[{index}] {check}: {sub[check][:5]}")
        if any(s["scope"] == "keyed" for s in states):
            for section in ("keyed", "timers"):
                mw, mr = _union(w, section, problems, uid), _union(r, section, problems, uid)
                if mw != mr:
                    problems.append(f"{uid}: {section} differ: {_diff(mw, mr)}")
        for state in states:
            name, mode = state["name"], state["mode"]
            if mode == "SPLIT_DISTRIBUTE":
                ew, er = _elements(w, name), _elements(r, name)
                if ew != er:
                    problems.append(f"{uid}/{name}: written {sorted(ew.elements())} restored {sorted(er.elements())}")  # fmt: skip
            elif mode == "UNION":
                everything = _elements(w, name)
                for index, sub in r.items():
                    seen = Counter(sub.get("operator", {}).get(name, []))
                    if seen != everything:
                        problems.append(f"{uid}[{index}]/{name}: {sorted(seen.elements())} != {sorted(everything.elements())}")  # fmt: skip
            elif mode == "BROADCAST":
                maps = [sub.get("broadcast", {}).get(name) for sub in w.values()]
                if any(m != maps[0] for m in maps):
                    problems.append(f"{uid}/{name}: written subtasks differ")
                for index, sub in r.items():
                    if sub.get("broadcast", {}).get(name) != maps[0]:
                        problems.append(f"{uid}[{index}]/{name}: {sub.get('broadcast')} != {maps[0]}")  # fmt: skip
    return problems


def keyed_union(
    dump: dict[str, Any], uid: str, section: str = "keyed"
) -> dict[str, dict[str, Any]]:
    """state (or timer kind) -> key -> value over all subtasks of `uid` in a dump."""
    problems: list[str] = []
    merged = _union(dump["operators"].get(uid, {}).get("subtasks", {}), section, problems, uid)
    if problems:
        raise AssertionError("; ".join(problems))
    return merged


def _union(subtasks: dict[str, Any], section: str, problems: list[str], uid: str) -> dict[str, Any]:
    merged: dict[str, dict[str, Any]] = {}
    for index, sub in subtasks.items():
        for state, entries in sub.get(section, {}).items():
            target = merged.setdefault(state, {})
            for key, value in entries.items():
                if key in target:
                    problems.append(f"{uid}[{index}] {section}/{state}: key {key!r} twice")
                target[key] = value
    return merged


def _elements(subtasks: dict[str, Any], name: str) -> Counter:
    found: Counter = Counter()
    for sub in subtasks.values():
        found.update(sub.get("operator", {}).get(name, []))
    return found


def _diff(a: dict[str, Any], b: dict[str, Any]) -> str:
    out = []
    for state in sorted(set(a) | set(b)):
        x, y = a.get(state, {}), b.get(state, {})
        missing = sorted(set(x) - set(y))[:5]
        extra = sorted(set(y) - set(x))[:5]
        changed = sorted(k for k in set(x) & set(y) if x[k] != y[k])[:5]
        if missing or extra or changed:
            out.append(f"{state}: missing {missing} extra {extra} changed {changed}")
    return "; ".join(out)


def verify(fixtures: str | Path = FIXTURES, parallelisms: tuple[int, ...] = (1, 3)) -> int:
    """Restores every fixture at its own parallelism and at `parallelisms`; prints differences."""
    fixtures = Path(fixtures)
    dirs = sorted(p.parent for p in fixtures.glob("*/manifest.json"))
    requests, labels = [], []
    for d in dirs:
        manifest = load_manifest(d)
        path = checkpoint_in_place(d)
        for p in sorted({manifest["parallelism"], *parallelisms}):
            requests.append(RestoreRequest(path, p, backend=manifest["backend"]))
            labels.append((d.name, p, manifest))
    started = time.monotonic()
    results = restore_check(requests, echo=True)
    bad = 0
    for (name, p, manifest), result in zip(labels, results, strict=True):
        if not result["ok"]:
            problems = [result["error"]]
        else:
            problems = compare(manifest["state"], result["state"], manifest["operators"])
        bad += bool(problems)
        status = "ok" if not problems else "MISMATCH\n    " + "\n    ".join(problems)
        print(f"{name} p={p}: {status} ({result['seconds']}s)")
    print(f"{len(results)} restores in {time.monotonic() - started:.1f}s, {bad} bad")
    return 1 if bad else 0


# --------------------------------------------------------------------------- values oracle

# The values job and the state dumper (tests/flink/values/src, see tests/flink/README.md): one
# source set compiled against each of these versions (with the Table API jars, for RowData).
VALUES_SOURCES = HERE / "values" / "src"
VALUES_VERSIONS = ("1.15.4", "1.20.3", "2.0.1", "2.3.0")
# hashmap-canonical: a job on the hashmap backend; rocksdb-canonical and rocksdb-native: one job on
# RocksDB (incremental), its CANONICAL savepoint taken right before its NATIVE one with no record in
# between (the "twin": the truth of the native savepoint is the dump of the canonical one).
VALUES_KINDS = ("hashmap-canonical", "rocksdb-native", "rocksdb-canonical")
# Retained checkpoints of the hashmap backend (its own snapshot format), without and with snapshot
# compression: one job each, a CANONICAL savepoint (`twin/`, whose dump is truth.jsonl) taken right
# before the checkpoint (`checkpoint/chk-N`) with no record in between; -readable: the job without
# the two value states whose entries have no length statectl can know in that format (manifest
# `not_registered`: kryo-custom, pojo-subclass-unregistered). Written on request only
# (`values_savepoints(kinds=...)`), never committed.
VALUES_CHECKPOINT_KINDS = (
    "hashmap-checkpoint", "hashmap-checkpoint-compressed", "hashmap-checkpoint-readable",
)  # fmt: skip
VALUES_FIXTURE_KINDS = ("hashmap-canonical", "rocksdb-native")
VALUES_FIXTURES = FIXTURES / "values"
VALUES_PARALLELISM = 2
VALUES_MAX_PARALLELISM = 128
VALUES_JOB_MAIN = "statectl.values.ValuesJob"
VALUES_DUMPER_MAIN = "statectl.values.StateDumper"


def compile_values(version: str = FLINK_VERSION) -> Path:
    """The values job and the dumper compiled against Flink `version` and its Table jars:
    .cache/flink/values-classes-<version>-<hash>."""
    return _compile(VALUES_SOURCES, version, f"values-classes-{version}-", extra_jars=tuple(table_jars(version)))  # fmt: skip


def _run_values(
    main: str, args: list[str], *, version: str, timeout: float, echo: bool = False,
    extra_classes: list[Path] | None = None,
) -> str:  # fmt: skip
    """Runs a class of the values source set on Flink `version` (dist + Table jars) in UTC."""
    classes = [compile_values(version), *(extra_classes or [])]
    log = _log_file(main.rsplit(".", 1)[-1])
    jars = [*classpath_jars(version), *table_jars(version)]
    cmd = [
        _tool("java"), *JVM_OPTIONS, "-Duser.timezone=UTC", f"-Dlog4j.configurationFile={LOG4J_CONFIG}",
        f"-Dstatectl.flink.log={log}", "-Dlog4j2.disable.jmx=true",
        "-cp", os.pathsep.join(map(str, [*classes, *jars])), main, *args,
    ]  # fmt: skip
    proc = subprocess.run(
        cmd, stdout=subprocess.PIPE, stderr=None if echo else subprocess.PIPE, text=True,
        timeout=timeout,
    )  # fmt: skip
    if proc.returncode != 0:
        tail = "" if echo else "\n".join((proc.stderr or "").splitlines()[-60:])
        raise FlinkError(f"{main} exited with {proc.returncode} (Flink log: {log}):\n{tail}")
    return proc.stdout


def truth_for(kind: str) -> str:
    """The kind whose CANONICAL dump is the truth of `kind`: a NATIVE savepoint's is its twin's."""
    return "rocksdb-canonical" if kind == "rocksdb-native" else kind


def write_values(
    version: str, out_root: str | Path, kinds: tuple[str, ...] | list[str] = VALUES_KINDS, *,
    echo: bool = False, extra: tuple[str, ...] = (),
) -> dict[str, Path]:  # fmt: skip
    """Runs the values job on Flink `version` in one JVM and writes out_root/<version>-<kind>/
    {savepoint/, truth.jsonl, manifest.json} per kind; returns kind -> that directory. `extra`:
    states of the job's `States.EXTRA` it registers too (`kryo-generic`)."""
    unknown = set(kinds) - set(VALUES_KINDS) - set(VALUES_CHECKPOINT_KINDS)
    if unknown:
        raise ValueError(f"unknown kinds {sorted(unknown)}; known: {VALUES_KINDS + VALUES_CHECKPOINT_KINDS}")  # fmt: skip
    out_root = Path(out_root).resolve()
    args = [
        "write",
        str(out_root),
        version,
        str(VALUES_PARALLELISM),
        str(VALUES_MAX_PARALLELISM),
        *(f"--extra={name}" for name in extra),
        *kinds,
    ]
    _run_values(VALUES_JOB_MAIN, args, version=version, timeout=600, echo=echo)
    dirs = {kind: out_root / f"{version}-{kind}" for kind in kinds}
    for d in dirs.values():
        if not (d / "manifest.json").is_file():
            raise FlinkError(f"ValuesJob wrote no {d / 'manifest.json'}")
    return dirs


def values_savepoints(
    version: str = FLINK_VERSION, kinds: tuple[str, ...] | list[str] = VALUES_KINDS,
    extra: tuple[str, ...] = (),
) -> dict[str, Path]:  # fmt: skip
    """The values job's savepoints written by Flink `version`, cached under
    .cache/flink/values-savepoints-<version>-<hash of the sources>/<version>-<kind>/ (one JVM for
    whatever is missing). Returns kind -> that directory: `savepoint/` (the savepoint),
    `truth.jsonl` (the dumper's output; for rocksdb-native that of its canonical twin, see
    `truth_for`) and `manifest.json`. The two RocksDB kinds are always written together. The
    VALUES_CHECKPOINT_KINDS have `checkpoint/` (a retained checkpoint; `snapshot_path` gives its
    chk-N, `checkpoint_in_place` puts it back where its `_metadata` was written) and `twin/`
    instead of `savepoint/`. `extra`: the job with these states of `States.EXTRA` too, cached
    apart (`values-savepoints-<version>-<hash>+<name>…`)."""
    root = CACHE / (
        compile_values(version).name.replace("values-classes-", "values-savepoints-")
        + "".join(f"+{name}" for name in extra)
    )
    dirs = {kind: root / f"{version}-{kind}" for kind in kinds}

    def missing() -> list[str]:
        todo = {k for k in kinds if not (root / f"{version}-{k}" / "manifest.json").is_file()}
        if todo & {"rocksdb-native", "rocksdb-canonical"}:
            todo |= {"rocksdb-native", "rocksdb-canonical"}  # a twin pair comes from one job
        return [k for k in VALUES_KINDS + VALUES_CHECKPOINT_KINDS if k in todo]

    if missing():
        with _lock(f"values-savepoints-{version}{''.join(extra)}"):
            todo = missing()
            if todo:
                root.mkdir(parents=True, exist_ok=True)
                staging = Path(tempfile.mkdtemp(prefix=".values-", dir=root))
                try:
                    for d in write_values(version, staging, todo, extra=extra).values():
                        shutil.rmtree(root / d.name, ignore_errors=True)
                        os.replace(d, root / d.name)
                finally:
                    shutil.rmtree(staging, ignore_errors=True)
    return dirs


def _savepoint_dir(path: str | Path) -> Path:
    """A savepoint directory from a savepoint dir, a fixture dir (manifest.json) or a _metadata."""
    path = Path(path).resolve()
    if path.name == "_metadata":
        return path.parent
    if (path / "_metadata").is_file():
        return path
    if (path / "manifest.json").is_file():
        return path / json.loads((path / "manifest.json").read_text())["path"]
    raise FileNotFoundError(f"no savepoint at {path}")


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def load_truth(fixture_dir: str | Path) -> list[dict[str, Any]]:
    """The truth.jsonl of a values fixture (the dumper's lines)."""
    return read_jsonl(Path(fixture_dir) / "truth.jsonl")


def dump_states(
    version: str, savepoint_dirs: list[str | Path], *, sql: bool = False, echo: bool = False
) -> list[list[dict[str, Any]]]:
    """Runs the state dumper (StateDumper, Flink `version`'s own classes) over every CANONICAL
    savepoint in one JVM; one list of JSON lines (dicts) per savepoint, in the dumper's sorted
    order. Accepts savepoint dirs, fixture dirs (manifest.json) or _metadata files. `sql`: put
    the SQL job's classes on the classpath too (2.x only; the Table jars always are). A NATIVE
    savepoint's keyed state is not read (an "error" line per handle): dump its canonical twin."""
    if not savepoint_dirs:
        return []
    dirs = [_savepoint_dir(d) for d in savepoint_dirs]
    extra = [compile_sql(version)] if sql and not runs_compat_job(version) else []
    with tempfile.TemporaryDirectory(prefix="statectl-dump-") as tmp:
        outs = [Path(tmp) / f"dump-{i}.jsonl" for i in range(len(dirs))]
        args = [str(a) for pair in zip(outs, dirs, strict=True) for a in pair]
        _run_values(
            VALUES_DUMPER_MAIN, args, version=version, timeout=300 + 60 * len(dirs), echo=echo,
            extra_classes=extra,
        )  # fmt: skip
        return [read_jsonl(out) for out in outs]


def dump_state(version: str, savepoint_dir: str | Path, sql: bool = False) -> list[dict[str, Any]]:
    """`dump_states` for one savepoint."""
    return dump_states(version, [savepoint_dir], sql=sql)[0]


def regenerate_values(
    out: str | Path = VALUES_FIXTURES, versions: list[str] | None = None
) -> list[Path]:
    """Rewrites tests/fixtures/values/<version>-<kind>/ (VALUES_FIXTURE_KINDS) for every version of
    VALUES_VERSIONS (or `versions`), one JVM per version."""
    out = Path(out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for version in versions or VALUES_VERSIONS:
        staging = Path(tempfile.mkdtemp(prefix=".regenerate-", dir=out))
        try:
            for d in write_values(version, staging, VALUES_FIXTURE_KINDS, echo=True).values():
                shutil.rmtree(out / d.name, ignore_errors=True)
                os.replace(d, out / d.name)
                written.append(out / d.name)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return written


# --------------------------------------------------------------------------- values restore oracle

# A request of `restore_values` (ValuesRestore.java): the savepoint to restore, where the new
# savepoint goes, and the overrides of the `values` operator's keyed states (by their name in the
# original job).
VALUES_RESTORE_FIELDS = (
    "savepoint", "out", "backend", "parallelism", "max_parallelism", "allow_non_restored",
    "ttl_on", "ttl_off", "rename", "drop", "drop_operators", "extra", "dump",
)  # fmt: skip


def restore_values(version: str, requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Restores each request's savepoint into the values job on Flink `version` (one JVM for the
    batch, one MiniCluster, in order) with the request's state overrides, takes a CANONICAL
    savepoint of the restored job into `out` and dumps it (StateDumper) into out/dump.jsonl.

    A request: `savepoint` (savepoint dir, fixture dir or _metadata), `out` (a directory), and
    optionally `backend` (hashmap|rocksdb; default: rocksdb when the savepoint has RocksDB native
    handles), `parallelism` (2), `max_parallelism` (128), `allow_non_restored` (False), `ttl_on`
    (states registered with TTL although the job has none), `ttl_off` (TTL states registered
    without), `rename` ({name in the savepoint: name the job registers}), `drop` (states not
    registered), `drop_operators` (`window` / `opstate`: operators left out of the job, their
    state not restored; needs allow_non_restored), `extra` (states of the job's `States.EXTRA`
    registered too, e.g. `kryo-generic`), `dump` (True; False: no savepoint is taken nor
    dumped, for a state too large to dump: the restore and its checks only). One result per
    request: {ok, error (None, or the exception chain "Class: message | caused by ..."),
    savepoint (the new savepoint dir), dump (its dump.jsonl), lines (the dump's lines, parsed;
    None when not ok or not dumped), unreachable ([[state, key], ...]: keys getKeys
    lists under a registered keyed state of `values` that read as nothing after setCurrentKey),
    misplaced ([[state, key], ...]: keys whose key group is outside their subtask's range),
    checked (the number of (state, key) pairs checked; the three are None when the job did not
    get that far), seconds}."""
    if not requests:
        return []
    todo = []
    for request in requests:
        unknown = set(request) - set(VALUES_RESTORE_FIELDS)
        if unknown:
            raise TypeError(f"unknown restore_values fields {sorted(unknown)}")
        if "savepoint" not in request or "out" not in request:
            raise TypeError(f"a restore_values request needs savepoint and out: {request}")
        todo.append(
            {
                **request,
                "savepoint": str(_savepoint_dir(request["savepoint"])),
                "out": str(Path(request["out"]).resolve()),
            }
        )
    with tempfile.TemporaryDirectory(prefix="statectl-values-restore-") as tmp:
        requests_file, results_file = Path(tmp) / "requests.json", Path(tmp) / "results.json"
        requests_file.write_text(json.dumps(todo, indent=1))
        args = ["restore", str(requests_file), str(results_file)]
        _run_values(VALUES_JOB_MAIN, args, version=version, timeout=180 + 60 * len(todo))
        results = json.loads(results_file.read_text())
    for result in results:
        result["lines"] = read_jsonl(result["dump"]) if result["ok"] and result["dump"] else None
    return results


# --------------------------------------------------------------------------- sources (positions)

# tests/flink/sources/src: FileSourceJob (a FileSource job saved mid-file) and SourceDumper (what
# Flink's FileSourceSplitSerializer / PendingSplitsCheckpointSerializer read from a savepoint).
SOURCES_JOBS = HERE / "sources" / "src"
SOURCES_MAIN = "statectl.sources.FileSourceJob"


def files_connector_jar(version: str = FLINK_VERSION) -> Path:
    """flink-connector-files (FileSource): beside flink-dist in the wheel's lib/."""
    return ensure_flink(version) / f"flink-connector-files-{version}.jar"


def compile_sources(version: str = FLINK_VERSION) -> Path:
    """tests/flink/sources/src compiled against flink-dist and flink-connector-files:
    .cache/flink/sources-classes-<hash>."""
    return _compile(SOURCES_JOBS, version, "sources-classes-", extra_jars=(files_connector_jar(version),))  # fmt: skip


def file_source_savepoint() -> Path:
    """FileSourceJob's output, cached under .cache/flink/sources-savepoint-<hash of the sources>/:
    `savepoint/` (CANONICAL, taken mid-file, state inline in `_metadata`), `savepoint-files/`
    (another run: state in files, Snappy-compressed), `truth.json` and `truth-files.json` (the
    dumper's reading of each). The files read are in `file_source_input()`, where the savepoints'
    splits name them (a restore reads them there). Returns that directory; one JVM when missing."""
    classes = compile_sources()
    root = CACHE / classes.name.replace("sources-classes-", "sources-savepoint-")
    if (root / "truth-files.json").is_file():
        return root
    with _lock("sources-savepoint"):
        if not (root / "truth-files.json").is_file():
            staging = Path(tempfile.mkdtemp(prefix=".sources-", dir=CACHE))
            try:
                args = [str(staging), str(file_source_input())]
                _run_java(SOURCES_MAIN, args, timeout=300, classes=classes, extra_jars=[files_connector_jar()])  # fmt: skip
                shutil.rmtree(root, ignore_errors=True)
                os.replace(staging, root)
            finally:
                shutil.rmtree(staging, ignore_errors=True)
    return root


def file_source_input() -> Path:
    """The text files FileSourceJob reads (`part-<i>.txt`, lines `file <i> line <n>`): a fixed
    folder per version of the sources, beside the cached savepoints."""
    return CACHE / compile_sources().name.replace("sources-classes-", "sources-input-")


def restore_file_source(savepoints: list[str | Path]) -> list[dict[str, Any]]:
    """Restores each FileSourceJob savepoint (one JVM for all) into the same job, which reads its
    bounded input to the end; per savepoint {"ok", "error", "lines"}: what the restored job read,
    {"<file index>": [line numbers, sorted]} (a line read twice is there twice)."""
    if not savepoints:
        return []
    classes = compile_sources()
    items = [{"path": str(Path(p).resolve()), "input": str(file_source_input())} for p in savepoints]  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="statectl-sources-") as tmp:
        request_file, out = Path(tmp) / "requests.json", Path(tmp) / "results.json"
        request_file.write_text(json.dumps(items, indent=1))
        args = ["restore", str(out), str(request_file)]
        _run_java(SOURCES_MAIN, args, timeout=300 + 60 * len(items), classes=classes, extra_jars=[files_connector_jar()])  # fmt: skip
        results: list[dict[str, Any]] = json.loads(out.read_text())
    return results


# --------------------------------------------------------------------------- SQL values


def sql_dumps(specs: dict[str, dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """The state dumper's lines (`dump_states`, sql=True) for SqlJob's savepoints of `specs`
    (`sql_savepoints`, CANONICAL ones), in one JVM; cached beside each savepoint as
    truth-<dumper classes>.jsonl, so they are dumped again only when the job or the dumper
    changes."""
    manifests = sql_savepoints(specs)
    tag = compile_values(FLINK_VERSION).name
    truths = {name: path.parent / f"truth-{tag}.jsonl" for name, path in manifests.items()}
    missing = [name for name, truth in truths.items() if not truth.is_file()]
    if missing:
        with _lock("sql-dumps"):
            dumps = dump_states(
                FLINK_VERSION, [manifests[n].parent / "savepoint" for n in missing], sql=True
            )
            for name, lines in zip(missing, dumps, strict=True):
                staging = truths[name].with_suffix(".tmp")
                staging.write_text("".join(json.dumps(line) + "\n" for line in lines))
                os.replace(staging, truths[name])
    return {name: read_jsonl(truth) for name, truth in truths.items()}


# --------------------------------------------------------------------------- schema evolution

EVOLUTION_SOURCES = HERE / "evolution"
EVOLUTION_MAIN = "statectl.evolution.EvolutionJob"
EVOLUTION_KINDS = ("hashmap-canonical", "rocksdb-native")


def compile_evolution(job_version: str) -> Path:
    """The schema-evolution job of `job_version` ("v1" or "v2"): evolution/common plus
    evolution/<job_version> (its Model: the state types), compiled against Flink 2.3.0 into
    .cache/flink/evolution-<job_version>-classes-<hash>."""
    roots = (EVOLUTION_SOURCES / job_version,)
    return _compile(EVOLUTION_SOURCES / "common", FLINK_VERSION, f"evolution-{job_version}-classes-", roots)  # fmt: skip


def evolution_jar(job_version: str) -> Path:
    """The compiled evolution job of `job_version` packaged as a jar beside its classes (what
    `--classpath JOB.jar` is given)."""
    import zipfile

    classes = compile_evolution(job_version)
    jar = classes.with_name(classes.name + ".jar")
    if not jar.exists():
        staging = jar.with_name(f".{jar.name}-{os.getpid()}")
        with zipfile.ZipFile(staging, "w", zipfile.ZIP_DEFLATED) as out:
            for path in sorted(classes.rglob("*.class")):
                out.write(path, path.relative_to(classes).as_posix())
        os.replace(staging, jar)
    return jar


def evolution_savepoints() -> dict[str, Path]:
    """The v1 job's savepoints, kind (EVOLUTION_KINDS) → savepoint directory, written in one JVM
    and cached under .cache/flink/evolution-savepoints-<hash of the v1 classes>/<kind>/."""
    classes = compile_evolution("v1")
    root = CACHE / classes.name.replace("evolution-v1-classes-", "evolution-savepoints-")

    def found() -> dict[str, Path]:
        dirs = {kind: sorted((root / kind).glob("savepoint-*")) for kind in EVOLUTION_KINDS}
        return {kind: paths[0] for kind, paths in dirs.items() if paths}

    if len(found()) < len(EVOLUTION_KINDS):
        with _lock("evolution-savepoints"):
            if len(found()) < len(EVOLUTION_KINDS):
                staging = Path(tempfile.mkdtemp(prefix=".evolution-", dir=CACHE))
                try:
                    _run_java(EVOLUTION_MAIN, ["write", str(staging)], timeout=300, classes=classes)
                    shutil.rmtree(root, ignore_errors=True)
                    os.replace(staging, root)
                finally:
                    shutil.rmtree(staging, ignore_errors=True)
    return found()


def restore_evolution(job_version: str, requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each request ({"savepoint", "state", "backend"}) restored by the `job_version` job in one
    JVM: the state's operator alone, the state registered with that version's type. Per request
    {"state", "ok", "error" (the exception chain), "values" ({key: value}, or the elements of
    an operator list state)}. A request with "states" (a list) instead of "state" restores
    their operators in one job without allowing non-restored state ("values": {state: values});
    with "savepoint_out" (a directory) and "format" (CANONICAL or NATIVE) that job then takes a
    savepoint of what it restored."""
    classes = compile_evolution(job_version)
    items = [{**r, "savepoint": Path(r["savepoint"]).resolve().as_uri()} for r in requests]
    for item in items:
        if "savepoint_out" in item:
            item["savepoint_out"] = str(Path(item["savepoint_out"]).resolve())
    with tempfile.TemporaryDirectory(prefix="statectl-evolution-") as tmp:
        request_file, out = Path(tmp) / "requests.json", Path(tmp) / "results.json"
        request_file.write_text(json.dumps(items, indent=1))
        args = ["restore", str(request_file), str(out)]
        _run_java(EVOLUTION_MAIN, args, timeout=120 + 30 * len(items), classes=classes)
        results: list[dict[str, Any]] = json.loads(out.read_text())
    return results


# --------------------------------------------------------------------------- CLI


def _parse_restore_arg(arg: str) -> RestoreRequest:
    if "," in arg:
        head, _, rest = arg.partition(",")
        path, _, p = head.rpartition("=")
        opts = dict(o.split("=", 1) for o in rest.split(",") if o)
    else:
        path, _, p = arg.rpartition("=")
        opts = {}
    request = RestoreRequest(path, int(p))
    if "maxp" in opts:
        request.max_parallelism = int(opts.pop("maxp"))
    if "backend" in opts:
        request.backend = opts.pop("backend")
    if opts:
        raise SystemExit(f"unknown options {sorted(opts)} in {arg}")
    return request


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.flink.harness", description=__doc__.split("\n\n")[0])  # fmt: skip
    sub = parser.add_subparsers(dest="command", required=True)
    ensure = sub.add_parser("ensure", help="install the Flink jars and compile the test programs")
    ensure.add_argument("--version", default=FLINK_VERSION)
    regen = sub.add_parser("regenerate", help="regenerate the committed fixtures (one JVM)")
    regen.add_argument("--out", default=str(FIXTURES))
    regen.add_argument("--only", nargs="*", help="fixture names (default: all)")
    ver = sub.add_parser("verify", help="restore every fixture with Flink and compare")
    ver.add_argument("--fixtures", default=str(FIXTURES))
    ver.add_argument("--parallelism", type=int, nargs="*", default=[1, 3])
    ensure_compat = sub.add_parser(
        "ensure-compat",
        help="install the older Flink versions and compile the test jobs against each",
    )
    ensure_compat.add_argument("--versions", nargs="*", default=list(COMPAT_VERSIONS))
    regen_compat = sub.add_parser(
        "regenerate-compat", help="regenerate tests/fixtures/compat (one JVM per version)"
    )
    regen_compat.add_argument("--out", default=str(COMPAT_FIXTURES))
    regen_compat.add_argument("--versions", nargs="*", default=list(COMPAT_VERSIONS))
    regen_values = sub.add_parser(
        "regenerate-values", help="regenerate tests/fixtures/values (one JVM per version)"
    )
    regen_values.add_argument("--out", default=str(VALUES_FIXTURES))
    regen_values.add_argument("--versions", nargs="*", default=list(VALUES_VERSIONS))
    dump = sub.add_parser("dump", help="StateDumper: a canonical savepoint's entries as JSON lines")
    dump.add_argument("paths", nargs="+", help="savepoint dirs, fixture dirs or _metadata files")
    dump.add_argument("--version", default=FLINK_VERSION)
    dump.add_argument("--sql", action="store_true", help="the SQL job's classes on the classpath")
    restore = sub.add_parser("restore", help="RestoreCheck: PATH=P[,maxp=M][,backend=B] ...")
    restore.add_argument("requests", nargs="+")
    restore.add_argument("--json", help="write the full results here")
    args = parser.parse_args(argv)

    started = time.monotonic()
    if args.command == "ensure":
        lib = ensure_flink(args.version)
        classes = compile_for(args.version)
        print(f"{lib}\n{classes}")
    elif args.command == "ensure-compat":
        for version in args.versions:
            print(f"{ensure_flink(version)}\n{compile_for(version)}")
    elif args.command == "regenerate-compat":
        for manifest in regenerate_compat(args.out, args.versions):
            size = sum(p.stat().st_size for p in manifest.parent.rglob("*") if p.is_file())
            print(f"{manifest.parent}: {size / 1024:.0f} KiB")
        print(f"regenerated in {time.monotonic() - started:.1f}s")
    elif args.command == "regenerate-values":
        for d in regenerate_values(args.out, args.versions):
            size = sum(p.stat().st_size for p in d.rglob("*") if p.is_file())
            print(f"{d}: {size / 1024:.0f} KiB")
        print(f"regenerated in {time.monotonic() - started:.1f}s")
    elif args.command == "dump":
        for lines in dump_states(args.version, args.paths, sql=args.sql, echo=True):
            for line in lines:
                print(json.dumps(line, ensure_ascii=False))
    elif args.command == "regenerate":
        for manifest in regenerate(args.out, args.only):
            size = sum(p.stat().st_size for p in manifest.parent.rglob("*") if p.is_file())
            print(f"{manifest.parent}: {size / 1024:.0f} KiB")
        print(f"regenerated in {time.monotonic() - started:.1f}s")
    elif args.command == "verify":
        return verify(args.fixtures, tuple(args.parallelism))
    elif args.command == "restore":
        results = restore_check([_parse_restore_arg(a) for a in args.requests], echo=True)
        if args.json:
            Path(args.json).write_text(json.dumps(results, indent=1, ensure_ascii=False))
        for result in results:
            req = result["request"]
            line = f"{req['path']} p={req['parallelism']}: "
            if result["ok"]:
                ops = result["state"]["operators"]
                bad = sum(len(s.get("unreachable", [])) + len(s.get("misplaced", [])) for o in ops.values() for s in o["subtasks"].values())  # fmt: skip
                line += f"restored ({result['backend']}), {bad} unreachable/misplaced"
            else:
                line += "FAILED: " + result["error_chain"][-1]
            print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
