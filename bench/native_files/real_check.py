"""Prototype check (issue 36): approach (c) on a real Flink 2.3 NATIVE savepoint written at 4.

Usage: PYTHONPATH=. python bench/native_files/real_check.py [WORK]

FixtureJob (tests/flink) writes a RocksDB NATIVE savepoint at parallelism 4; `statectl rescale
-p 3` writes the row-by-row reference; `native_files.rescale_by_manifest` (with L0 of one source
per target) rescales both keyed operators; their instances are compared entry by entry with the
reference; the prototype's instances are put in a copy of the reference savepoint in place of
statectl's, and Flink 2.3 restores both: the keyed state dumps must be equal.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

from bench.native_files import prototype as nf
from statectl.formats.handles import LocalFile, RelativeFileHandle
from statectl.formats.metadata import write_metadata
from statectl.savepoint.native_writer import instance_files
from statectl.savepoint.reader import open_savepoint
from tests.flink import harness
from tests.flink.harness import RestoreRequest

KEYED = ("keyed-str", "keyed-long")


def main() -> int:
    work = Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/statectl-native-files-real")
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    harness.write_fixture(work / "fx", backend="rocksdb", format="NATIVE", parallelism=4)
    source = next(p.parent for p in (work / "fx").rglob("_metadata"))
    rows = work / "rows"
    subprocess.run([sys.executable, "-m", "statectl", "rescale", str(source), "-o", str(rows),
                    "-p", "3"], check=True, stdout=subprocess.DEVNULL)  # fmt: skip
    for uid in KEYED:
        out = work / f"manifest-{uid}"
        report = nf.rescale_by_manifest(str(source), uid, 3, str(out), one_l0_source=True)
        print(uid, json.dumps(report["targets"]))
        compared = nf.compare_with_savepoint(str(out), str(rows), uid)["subtasks"]
        print(uid, "entries, mismatches, outside, range tombstones:",
              [(s["entries"], s["mismatches"], s["outside"], s["range_deletions"])
               for s in compared])  # fmt: skip
    # The reference savepoint with the prototype's instances in place of statectl's.
    target = work / "manifest-sp"
    shutil.copytree(rows, target)
    sp = open_savepoint(str(rows))
    operators = list(sp.metadata.operators)
    for uid in KEYED:
        view = sp.find_operator(uid)
        subtasks = []
        for s in view.subtasks:
            handle = s.managed_keyed_state
            for old in handle.private:
                (target / old.handle.relative_path).unlink(missing_ok=True)
            db = work / f"manifest-{uid}" / str(s.index) / "db"
            files = []
            for local in instance_files(str(db)):
                name = str(uuid.uuid4())
                shutil.copyfile(db / local, target / name)
                files.append(
                    LocalFile(local, RelativeFileHandle(name, (db / local).stat().st_size))
                )
            new = dataclasses.replace(handle, private=tuple(files), shared=())
            subtasks.append(dataclasses.replace(s, managed_keyed_state=new))
        operators = [
            dataclasses.replace(o, subtasks=tuple(subtasks)) if o is view else o for o in operators
        ]
    (target / "_metadata").write_bytes(
        write_metadata(dataclasses.replace(sp.metadata, operators=tuple(operators)))
    )
    ours, theirs = harness.restore_check(
        [RestoreRequest(target, 3, backend="rocksdb"), RestoreRequest(rows, 3, backend="rocksdb")]
    )
    print("restored:", ours["ok"], ours["error"], "| reference restored:", theirs["ok"])
    for uid in KEYED:
        same = ours["state"]["operators"][uid] == theirs["state"]["operators"][uid]
        print(uid, "keyed state equal to the reference's restore:", same)
    return 0


if __name__ == "__main__":
    sys.exit(main())
