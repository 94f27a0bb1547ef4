"""The state-file formats against real Flink savepoints (tests/fixtures/<name>/, §3, §4, §6, §7).

Every keyed file: the header parses completely, every block walks to its end mark, and every key
(String or Long keys) sits in the key group Flink's hash assigns and splits into key group,
timestamp, key and namespace. Every operator file: elements decode with their serializer.
"""

from __future__ import annotations

import os
import subprocess
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from statectl.formats import java_types as jt
from statectl.formats import keyed_blocks as kb
from statectl.formats import operator_state as ops
from statectl.formats import state_headers as sh
from statectl.formats.handles import (
    ByteStreamHandle,
    DistributionMode,
    FileHandle,
    IncrementalKeyedHandle,
    KeyGroupsHandle,
    OperatorStateHandle,
    RelativeFileHandle,
)
from statectl.formats.metadata import read_metadata
from tests.conftest import fixture_names, fixture_savepoint, load_manifest

ORACLES = Path(__file__).parent / "oracles"


@dataclass
class Findings:
    keyed_files: int = 0
    entries: Counter[str] = field(default_factory=Counter)
    keys_checked: int = 0
    operator_files: int = 0
    native_headers: int = 0
    elements: Counter[str] = field(default_factory=Counter)


def stream_bytes(directory: Path, handle: object) -> bytes:
    if isinstance(handle, ByteStreamHandle):
        return handle.data
    if isinstance(handle, RelativeFileHandle):
        return (directory / handle.relative_path).read_bytes()
    if isinstance(handle, FileHandle):
        return Path(handle.path.removeprefix("file:")).read_bytes()
    raise AssertionError(f"unexpected stream handle {handle!r}")


def check_keyed_file(
    data: bytes, handle: KeyGroupsHandle, max_parallelism: int, found: Findings
) -> None:
    header = sh.parse_keyed_header(data[: kb.header_length(handle.offsets, len(data))])
    assert header.complete, header.problem
    assert header.compressed == sh.keyed_header_compressed(data)
    key_type = jt.key_type_for_serializer(header.key_serializer)
    names = header.state_names()
    for span in kb.block_spans(handle.start_key_group, handle.offsets, len(data)):
        block = memoryview(data)[span.start : span.end]
        counts = kb.count_entries(block, header.compressed, len(names))
        assert sum(counts.values()) > 0
        per_state: Counter[int] = Counter()
        for entry in kb.iter_entries(block, header.compressed, len(names)):
            per_state[entry.state_id] += 1
            found.entries[names[entry.state_id]] += 1
            if key_type is not None:
                check_key(
                    entry, header.states[entry.state_id], key_type, span.key_group, max_parallelism
                )
                found.keys_checked += 1
        assert per_state == counts
    found.keyed_files += 1


def check_key(
    entry: kb.Entry,
    state: sh.StateMetaInfo,
    key_type: jt.KeyType,
    key_group: int,
    max_parallelism: int,
) -> None:
    namespace = state.namespace_serializer
    if state.kind == "TIMERS":
        timer = state.value_serializer
        assert timer is not None and len(timer.nested) == 2
        namespace = timer.nested[1]
    kind = state.kind if state.kind in ("MAP", "TIMERS") else "VALUE"
    length = jt.namespace_length_for_serializer(namespace.class_name if namespace else None)
    key = jt.split_composite_key(entry.key, max_parallelism, key_type, length, kind)
    assert key.key_group == key_group
    assert key_type.key_group(key.key, max_parallelism) == key_group, key
    assert key_type.write(key.key) == key.key_bytes
    if kind == "MAP":
        assert entry.value[:1] in (b"\x00", b"\x01") and key.user_key_bytes


def check_operator_file(data: bytes, handle: OperatorStateHandle, found: Findings) -> None:
    layout = ops.file_layout(handle.states, len(data), data)
    header = sh.parse_operator_header(data[: layout.header_length])
    assert header.complete, header.problem
    assert header.compressed == layout.compressed
    serializers = {s.name: s for s in header.states}
    for state in layout.states:
        meta = serializers[state.name]
        for start, end in state.spans:
            element = ops.element_bytes(data[start:end], layout.compressed)
            if state.mode is DistributionMode.BROADCAST:
                key_type = jt.key_type_for_serializer(meta.key_serializer.class_name)  # type: ignore[union-attr]
                value_type = jt.key_type_for_serializer(meta.value_serializer.class_name)  # type: ignore[union-attr]
                if key_type and value_type:
                    entries = ops.split_broadcast_entries(element, key_type, value_type)
                    assert len(entries) == ops.broadcast_entry_count(element)
            else:
                value_type = jt.key_type_for_serializer(meta.value_serializer.class_name)  # type: ignore[union-attr]
                if value_type is not None:
                    assert value_type.read(element)[1] == len(element)
            found.elements[state.name] += 1
    found.operator_files += 1


def check_savepoint(directory: Path) -> Findings:
    metadata = read_metadata((directory / "_metadata").read_bytes())
    found = Findings()
    for operator in metadata.operators:
        for subtask in operator.subtasks or ():
            keyed = subtask.managed_keyed_state
            if isinstance(keyed, KeyGroupsHandle) and keyed.delegate is not None:
                data = stream_bytes(directory, keyed.delegate)
                check_keyed_file(data, keyed, operator.max_parallelism, found)
            elif isinstance(keyed, IncrementalKeyedHandle) and keyed.meta is not None:
                # RocksDB native: the meta file is exactly a keyed serializer-proxy header
                header = sh.parse_keyed_header(stream_bytes(directory, keyed.meta))
                assert header.complete and header.key_serializer, header.problem
                found.native_headers += 1
            handle = subtask.managed_operator_state
            if handle is not None and handle.delegate is not None:
                check_operator_file(stream_bytes(directory, handle.delegate), handle, found)
    return found


@pytest.mark.parametrize("name", fixture_names())
def test_real_savepoint_state_files(name: str) -> None:
    found = check_savepoint(fixture_savepoint(name))
    assert found.keyed_files or found.native_headers
    assert found.operator_files


@pytest.mark.flink
@pytest.mark.parametrize(
    ("backend", "compression", "max_parallelism"),
    [("hashmap", "true", 300), ("rocksdb", "false", 128)],
)
def test_savepoints_written_by_flink(
    flink_dist: Path, tmp_path: Path, backend: str, compression: str, max_parallelism: int
) -> None:
    classpath = os.pathsep.join([str(tmp_path), *map(str, flink_dist.parent.glob("*.jar"))])
    javac = ["javac", "-nowarn", "-cp", classpath, "-d", str(tmp_path)]
    subprocess.run([*javac, str(ORACLES / "SavepointJob.java")], check=True, capture_output=True)
    job = [backend, compression, str(max_parallelism), "2000", str(tmp_path / "sp")]
    run = subprocess.run(
        ["java", "-cp", classpath, "SavepointJob", *job],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    directory = Path(run.stdout.split("SAVEPOINT ")[-1].split()[0].removeprefix("file:"))
    found = check_savepoint(directory)
    # 2 keyed operators x 2 subtasks; 2000 String and 1987 Long keys, each with one value, one
    # list, three map entries and one timer; operator state in the 3 stateful operators
    keys = 2000 + 1987
    assert found.keyed_files == 4
    assert found.entries == {
        "cnt": keys, "lst": keys, "mp": 3 * keys, "_timer_state/processing_user-timers": keys
    }  # fmt: skip
    assert found.keys_checked == 6 * keys
    assert found.elements == {"split": 6, "union": 2, "bc": 2, "SourceReaderState": 2}


# --- contents against the fixtures' manifests ---------------------------------------------

TIMER_STATES = {
    "_timer_state/processing_user-timers": "processing",
    "_timer_state/event_user-timers": "event",
}
LONG = jt.KEY_TYPES["org.apache.flink.api.common.typeutils.base.LongSerializer"]


def decode_keyed(data: bytes, handle: KeyGroupsHandle, max_parallelism: int) -> dict[str, dict]:
    """{"keyed": {state: {key: value}}, "timers": {kind: {key: [timestamps]}}} of one file."""
    header = sh.parse_keyed_header(data[: kb.header_length(handle.offsets, len(data))])
    key_type = jt.key_type_for_serializer(header.key_serializer)
    assert key_type is not None
    keyed: dict[str, dict] = {}
    timers: dict[str, dict] = {}
    for span in kb.block_spans(handle.start_key_group, handle.offsets, len(data)):
        block = data[span.start : span.end]
        for entry in kb.iter_entries(block, header.compressed, len(header.states)):
            state = header.states[entry.state_id]
            if state.name in TIMER_STATES:
                key = jt.split_composite_key(entry.key, max_parallelism, key_type, 1, "TIMERS")
                assert entry.value == b""
                timers.setdefault(TIMER_STATES[state.name], {}).setdefault(str(key.key), []).append(
                    key.timestamp
                )
                continue
            key = jt.split_composite_key(entry.key, max_parallelism, key_type, 1, state.kind)
            values = keyed.setdefault(state.name, {})
            if state.kind == "LIST":  # elements joined by a single ',' byte, no trailing one
                assert all(entry.value[i] == 0x2C for i in range(8, len(entry.value), 9))
                values[str(key.key)] = [
                    LONG.read(entry.value, i)[0] for i in range(0, len(entry.value), 9)
                ]
            elif state.kind == "MAP":
                user_key, _ = jt.read_java_string(key.user_key_bytes)
                assert entry.value[:1] == b"\x00"  # not null
                values.setdefault(str(key.key), {})[user_key] = LONG.read(entry.value, 1)[0]
            else:
                values[str(key.key)] = LONG.read(entry.value)[0]
    for per_key in timers.values():
        for timestamps in per_key.values():
            timestamps.sort()
    return {"keyed": keyed, "timers": timers}


def decode_operator(data: bytes, handle: OperatorStateHandle) -> dict[str, dict]:
    layout = ops.file_layout(handle.states, len(data), data)
    header = {s.name: s for s in sh.parse_operator_header(data[: layout.header_length]).states}
    result: dict[str, dict] = {"operator": {}, "broadcast": {}}
    for state in layout.states:
        meta = header[state.name]
        elements = [ops.element_bytes(data[a:b], layout.compressed) for a, b in state.spans]
        if state.mode is DistributionMode.BROADCAST:
            key_type = jt.key_type_for_serializer(meta.key_serializer.class_name)  # type: ignore[union-attr]
            value_type = jt.key_type_for_serializer(meta.value_serializer.class_name)  # type: ignore[union-attr]
            assert key_type is not None and value_type is not None and len(elements) == 1
            entries = ops.split_broadcast_entries(elements[0], key_type, value_type)
            result["broadcast"][state.name] = {
                key_type.read(k)[0]: value_type.read(v)[0] for k, v in entries
            }
        else:
            value_type = jt.key_type_for_serializer(meta.value_serializer.class_name)  # type: ignore[union-attr]
            if value_type is not None:
                result["operator"][state.name] = [value_type.read(e)[0] for e in elements]
    return result


@pytest.mark.parametrize("name", fixture_names())
def test_real_savepoint_contents_match_the_manifest(name: str) -> None:
    manifest = load_manifest(name)
    directory = fixture_savepoint(name)
    metadata = read_metadata((directory / "_metadata").read_bytes())
    by_uid = {op.uid: op for op in metadata.operators}
    compared = 0
    for uid, expected_operator in manifest.get("state", {}).get("operators", {}).items():
        operator = by_uid[uid]
        subtasks = {s.index: s for s in operator.subtasks or ()}
        for index, expected in expected_operator["subtasks"].items():
            subtask = subtasks[int(index)]
            keyed = subtask.managed_keyed_state
            if "keyed" in expected and isinstance(keyed, KeyGroupsHandle) and keyed.code == 7:
                data = stream_bytes(directory, keyed.delegate)
                decoded = decode_keyed(data, keyed, operator.max_parallelism)
                assert decoded["keyed"] == expected["keyed"], (uid, index)
                assert decoded["timers"] == expected.get("timers", {}), (uid, index)
                compared += 1
            handle = subtask.managed_operator_state
            if ("operator" in expected or "broadcast" in expected) and handle is not None:
                decoded = decode_operator(stream_bytes(directory, handle.delegate), handle)
                for kind in ("operator", "broadcast"):
                    if kind in expected:
                        assert decoded[kind] == expected[kind], (uid, index, kind)
                compared += 1
    assert compared
