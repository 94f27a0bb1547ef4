"""RocksDB instances with levels below L0, written by Flink: rescaled by files, converted and
re-hashed, and every output restored by Flink with exactly the state the job wrote.

The inputs (`harness.level_snapshots`, cached): the fixture job at parallelism 4 with
`harness.LEVEL_BULK_KEYS` more keys per keyed operator, on RocksDB with 64 KiB memtables,
32 KiB target files and a 32 KiB level base (`harness.SMALL_ROCKSDB`), so that compaction has
moved files to L2 (L1 too, in most instances) while fresh flushes sit in L0: a NATIVE savepoint
(Snappy, RocksDB's default), one with `state.backend.rocksdb.compression.per.level:
NO_COMPRESSION`, and a retained incremental checkpoint (Snappy; its second checkpoint shares the
first one's files). The option keys are checked by what they did: the MANIFEST's levels and each
SST file's `rocksdb.compression` table property.

Per input: `statectl rescale -p 3 --json` (by files: `sst_files` counted), a conversion to
canonical key-group blocks and a re-hash to max parallelism 256 (RocksDB instances kept). Two
JVMs at most: FixtureJob when the cache is cold, and one RestoreCheck batch for the nine outputs.
"""

from __future__ import annotations

import collections
import contextlib
import io
import json
import re
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cramjam
import pytest

from statectl.cli.main import main
from statectl.cli.rescale_view import rescale_report_to_json
from statectl.formats import rocksdb_manifest
from statectl.formats.handles import IncrementalKeyedHandle, KeyGroupsHandle
from statectl.operations.rescale.job import rescale
from statectl.operations.rescale.plan import plan_rescale
from statectl.savepoint import native
from statectl.savepoint.model import Savepoint
from statectl.savepoint.native import NativeInstance
from statectl.savepoint.reader import open_savepoint
from tests.flink import harness
from tests.flink.harness import RestoreRequest

pytestmark = [pytest.mark.flink, pytest.mark.spark]

KINDS = ("native-savepoint", "native-savepoint-uncompressed", "checkpoint")
KEYED_UIDS = ("keyed-str", "keyed-long")
COMPRESSION = {
    "native-savepoint": "Snappy",
    "native-savepoint-uncompressed": "NoCompression",
    "checkpoint": "Snappy",
}


@dataclass(frozen=True)
class Case:
    kind: str
    how: str  # "p3": rescale by files; "convert": canonical; "maxp256": re-hash, native kept
    parallelism: int
    max_parallelism: int
    backend: str  # the backend Flink restores the output with

    @property
    def id(self) -> str:
        return f"{self.kind}-{self.how}"


HOWS = {
    "p3": (3, 128, "rocksdb"),
    "convert": (4, 128, "hashmap"),
    "maxp256": (4, 256, "rocksdb"),
}
CASES = [Case(kind, how, *HOWS[how]) for kind in KINDS for how in HOWS]


def _write(source: Path, case: Case, destination: Path) -> dict[str, Any]:
    """The output's report as `--json` renders it: `statectl rescale -p 3 --json` itself, the
    others through the operations (the shared SparkSession runs their tasks)."""
    if case.how == "p3":
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed), pytest.raises(SystemExit) as done:
            main(["rescale", str(source), "-p", "3", "-o", str(destination), "--json"])
        assert done.value.code in (0, None)
        return json.loads(printed.getvalue())
    sp = open_savepoint(str(source))
    if case.how == "convert":
        plan = plan_rescale(sp, None, keyed_format="canonical")
    else:
        plan = plan_rescale(sp, None, max_parallelism=256)
    return rescale_report_to_json(rescale(plan, str(destination)))


@pytest.fixture(scope="module")
def outcome(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("levels")
    dirs = harness.level_snapshots()
    sources = {kind: harness.checkpoint_in_place(dirs[kind]) for kind in KINDS}
    reports = {case.id: _write(sources[case.kind], case, root / case.id) for case in CASES}
    results = harness.restore_check(
        [
            RestoreRequest(
                root / case.id, case.parallelism, max_parallelism=case.max_parallelism,
                backend=case.backend,
            )
            for case in CASES
        ]
    )  # fmt: skip
    return {
        "dirs": dirs,
        "sources": sources,
        "root": root,
        "reports": reports,
        "restored": dict(zip([c.id for c in CASES], results, strict=True)),
    }


def _instances(sp: Savepoint, uid: str) -> list[NativeInstance]:
    instances = []
    for subtask in sp.subtasks(sp.find_operator(uid)):
        handle = subtask.managed_keyed_state
        assert isinstance(handle, IncrementalKeyedHandle), handle
        instances.append(native.native_instance(sp, handle, f"{uid}[{subtask.index}]"))
    return instances


def _manifest(instance: NativeInstance) -> rocksdb_manifest.Manifest:
    (current,) = [f for f in instance.files if f.kind == "CURRENT"]
    name = current.stream.read().decode().strip()
    (manifest,) = [f for f in instance.files if f.local_path == name]
    return rocksdb_manifest.read(manifest.stream.read())


def _levels(instance: NativeInstance) -> collections.Counter[int]:
    manifest = _manifest(instance)
    return collections.Counter(sst.level for ssts in manifest.families.values() for sst in ssts)


# The metaindex block names the properties block: key "rocksdb.properties" written whole (the
# first entry after a restart, or the only one), its value the block's offset and size.
_PROPERTIES_HANDLE = re.compile(rb"\x00\x12(.)rocksdb\.properties", re.DOTALL)


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[pos]
        value |= (byte & 0x7F) << shift
        pos, shift = pos + 1, shift + 7
        if byte < 0x80:
            return value, pos


def _block_entries(block: bytes) -> dict[bytes, bytes]:
    """A block's entries: (shared, non-shared, value length) varints, the key's new bytes, the
    value; the restart offsets and their count (uint32 LE) at the end."""
    (restarts,) = struct.unpack_from("<I", block, len(block) - 4)
    end, pos, key, entries = len(block) - 4 - 4 * restarts, 0, b"", {}
    while pos < end:
        shared, pos = _varint(block, pos)
        fresh, pos = _varint(block, pos)
        length, pos = _varint(block, pos)
        key = key[:shared] + block[pos : pos + fresh]
        entries[key] = block[pos + fresh : pos + fresh + length]
        pos += fresh + length
    return entries


def _sst_compression(data: bytes) -> str:
    """An SST file's `rocksdb.compression` table property: the compression of its data blocks."""
    (handle,) = list(_PROPERTIES_HANDLE.finditer(data))
    offset, pos = _varint(data, handle.end())
    size, _ = _varint(data, pos)
    block = data[offset : offset + size]
    if data[offset + size] == 1:  # the block trailer's compression type
        block = bytes(cramjam.snappy.decompress_raw(block))
    return _block_entries(block)[b"rocksdb.compression"].decode()


@pytest.mark.parametrize("kind", KINDS)
def test_flinks_instances_have_files_below_l0(outcome: dict[str, Any], kind: str) -> None:
    """The RocksDB options took effect: every instance has L0 files, and the instances have
    files below L0 (L1, and L2 in most runs: how deep each instance got depends on when
    Flink's compactions ran), and the SST files are compressed as configured."""
    sp = open_savepoint(str(outcome["sources"][kind]))
    manifest = harness.load_manifest(outcome["dirs"][kind])
    assert manifest["bulk_keys"] == harness.LEVEL_BULK_KEYS and manifest["parallelism"] == 4
    for uid in KEYED_UIDS:
        instances = _instances(sp, uid)
        assert len(instances) == 4
        below_l0 = 0
        for instance in instances:
            levels = _levels(instance)
            assert levels[0] > 0, (instance.description, levels)
            below_l0 += sum(n for level, n in levels.items() if level > 0)
            ssts = [f for f in instance.files if f.kind == "SST"]
            assert sum(levels.values()) == len(ssts)
            found = {_sst_compression(f.stream.read()) for f in ssts}
            assert found == {COMPRESSION[kind]}, (instance.description, found)
        assert below_l0 > 0, uid
    if kind == "checkpoint":  # incremental: the second checkpoint shares the first one's files
        handles = [s.managed_keyed_state for s in sp.subtasks(sp.find_operator("keyed-str"))]
        assert all(isinstance(h, IncrementalKeyedHandle) and h.shared for h in handles)


@pytest.mark.parametrize("kind", KINDS)
def test_rescale_assembles_instances_by_files(outcome: dict[str, Any], kind: str) -> None:
    """4 → 3: most files lie inside one new subtask's key groups and are carried whole, those
    straddling a boundary are rewritten; levels below L0 stay in the new instances."""
    report = outcome["reports"][f"{kind}-p3"]
    by_uid = {op["uid"]: op for op in report["operators"]}
    output = open_savepoint(str(outcome["root"] / f"{kind}-p3"))
    for uid in KEYED_UIDS:
        op = by_uid[uid]
        assert op["rescaled"] and op["new_parallelism"] == 3
        assert op["new_keyed_format"] == "native"
        files = op.get("sst_files")
        assert files is not None, f"{uid}: not assembled by files"
        assert files["carried"] > 0 and files["carried_bytes"] > 0, files
        assert files["rewritten"] > 0 and files["written"] > 0, files
        for instance in _instances(output, uid):
            assert sum(n for level, n in _levels(instance).items() if level > 0) > 0


@pytest.mark.parametrize("kind", KINDS)
def test_convert_and_rehash_write_what_they_say(outcome: dict[str, Any], kind: str) -> None:
    converted = open_savepoint(str(outcome["root"] / f"{kind}-convert"))
    for uid in KEYED_UIDS:
        for subtask in converted.subtasks(converted.find_operator(uid)):
            assert isinstance(subtask.managed_keyed_state, KeyGroupsHandle)
    rehashed = open_savepoint(str(outcome["root"] / f"{kind}-maxp256"))
    for uid in KEYED_UIDS:
        op = rehashed.find_operator(uid)
        assert (op.parallelism, op.max_parallelism) == (4, 256)
        for instance in _instances(rehashed, uid):
            assert instance.key_groups is not None and instance.key_groups[1] < 256


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_flink_restores_exactly_the_written_state(outcome: dict[str, Any], case: Case) -> None:
    result = outcome["restored"][case.id]
    assert result["ok"], result["error"]
    assert result["backend"] == case.backend
    manifest = harness.load_manifest(outcome["dirs"][case.kind])
    assert harness.compare(manifest["state"], result["state"], manifest["operators"]) == []
    for uid in KEYED_UIDS:
        restored = result["state"]["operators"][uid]
        assert (restored["parallelism"], restored["max_parallelism"]) == (
            case.parallelism, case.max_parallelism,
        )  # fmt: skip
        assert len(restored["subtasks"]) == case.parallelism
        keys = harness.keyed_union(result["state"], uid)["cnt"]
        assert len(keys) > harness.LEVEL_BULK_KEYS
