"""A synthetic CANONICAL (hashmap) savepoint of any size, for the rescale benchmark.

Everything but the key-group blocks is Flink's own: the `_metadata` of the Flink 2.3 fixture
`hashmap_canonical_files` (every other operator, its operator-state files, the properties tail)
and the serializer-proxy header of its `keyed-str` operator (String keys; states `mp`, `cnt`,
`lst` and processing-time timers). `keyed-str` gets `parallelism` subtask files at
`max_parallelism`, whose blocks are built with `keyed_blocks.build_block` in the layout of
flink-savepoint-format.md §4.4/§4.6; every String key sits in the key group Flink assigns it.
Files are written one block at a time: memory stays flat whatever the size.

Usage: python -m bench.synthetic OUT_DIR [--gib 2] [--parallelism 8] [--max-parallelism 1024]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import shutil
import sys
import uuid
from array import array
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from statectl.formats import java_types, keyed_blocks
from statectl.formats.handles import KeyGroupsHandle, RelativeFileHandle
from statectl.formats.key_groups import key_group_range
from statectl.formats.metadata import (
    CheckpointMetadata,
    OperatorState,
    SubtaskState,
    write_metadata,
)
from statectl.savepoint.reader import open_savepoint

REPO = Path(__file__).resolve().parents[1]
FIXTURE = REPO / "tests" / "fixtures" / "hashmap_canonical_files" / "savepoint"
OPERATOR = "keyed-str"
OPERATORS = {"String": OPERATOR, "Long": "keyed-long"}
MAP_KEYS = 2  # `mp` entries per key
TIMESTAMP_BASE = 1_700_000_000_000
STAMP_SUFFIX = ".json"


@dataclass(frozen=True)
class Params:
    size_bytes: int  # keyed-state bytes to write, at least (blocks only; headers come on top)
    parallelism: int = 8
    max_parallelism: int = 1024
    list_elements: int = 128  # longs per `lst` value: about 1.2 KiB of state per key
    key_type: str = "String"  # or "Long": the fixture's `keyed-long` operator

    @property
    def name(self) -> str:
        keys = "" if self.key_type == "String" else f"-{self.key_type.lower()}"
        return (
            f"canonical-{self.size_bytes}b-p{self.parallelism}-m{self.max_parallelism}"
            f"-l{self.list_elements}{keys}"
        )

    @property
    def operator(self) -> str:
        return OPERATORS[self.key_type]


@dataclass(frozen=True)
class Built:
    path: Path
    params: Params
    keys: int
    entries: dict[str, int]  # keyed state name → entries written
    bytes: int  # all files of the savepoint, `_metadata` included


def ensure(params: Params, cache: Path) -> Built:
    """The savepoint for `params` under `cache`, built unless a complete one is there."""
    target = cache / params.name
    stamp = target.with_name(target.name + STAMP_SUFFIX)
    if target.is_dir() and stamp.is_file():
        recorded = json.loads(stamp.read_text())
        if recorded["params"] == dataclasses.asdict(params):
            return Built(target, params, recorded["keys"], recorded["entries"], recorded["bytes"])
    shutil.rmtree(target, ignore_errors=True)
    stamp.unlink(missing_ok=True)
    built = build(params, target)
    record = {k: v for k, v in dataclasses.asdict(built).items() if k not in ("path", "params")}
    stamp.write_text(json.dumps({"params": dataclasses.asdict(params), **record}, indent=2))
    return built


def build(params: Params, target: Path) -> Built:
    """Write the savepoint into `target` (which must not exist); `_metadata` last."""
    header = fixture_header(FIXTURE, params.operator)
    layout = _EntryLayout(params, header)
    total_keys = max(params.parallelism, -(-params.size_bytes // layout.bytes_per_key))
    by_group = keys_by_key_group(total_keys, params.max_parallelism, params.key_type)
    size = write_keyed_operator(
        FIXTURE, params.operator, target, header, layout.block, by_group, params.parallelism,
        seed=params.name,
    )  # fmt: skip
    return Built(target, params, total_keys, layout.entries(total_keys), size)


def write_keyed_operator(
    fixture: Path,
    operator: str,
    target: Path,
    header: bytes,
    block: Callable[[int, array], bytes],
    by_group: list[array],
    parallelism: int,
    seed: str,
) -> int:
    """`fixture` copied into `target` (which must not exist) with the keyed files of `operator`
    replaced: `parallelism` subtask files at `len(by_group)` key groups, each `header` then
    `block(key_group, key indexes)` per non-empty key group; `_metadata` last. The bytes of all
    files of the new savepoint."""
    sp = open_savepoint(str(fixture))
    op = sp.find_operator(operator)
    max_parallelism = len(by_group)
    staging = target.with_name(target.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    shutil.copytree(fixture, staging)
    for subtask in op.subtasks or ():  # the fixture's own keyed files are replaced
        assert isinstance(subtask.managed_keyed_state, KeyGroupsHandle)
        delegate = subtask.managed_keyed_state.delegate
        assert isinstance(delegate, RelativeFileHandle)
        (staging / delegate.relative_path).unlink()
    names = random.Random(seed)
    subtasks = []
    for index in range(parallelism):
        first, last = key_group_range(max_parallelism, parallelism, index)
        name = str(uuid.UUID(int=names.getrandbits(128), version=4))
        handle = _write_subtask(staging / name, header, block, by_group, first, last)
        subtasks.append(SubtaskState(index, managed_keyed_state=handle))
    new_op = dataclasses.replace(
        op,
        parallelism=parallelism,
        max_parallelism=max_parallelism,
        subtasks=tuple(subtasks),
    )
    (staging / "_metadata").write_bytes(write_metadata(_replace(sp.metadata, op, new_op)))
    staging.rename(target)
    return sum(p.stat().st_size for p in target.iterdir())


def fixture_header(fixture: Path, operator: str) -> bytes:
    """The serializer-proxy header of the first keyed file of `operator` in `fixture`."""
    sp = open_savepoint(str(fixture))
    handle = (sp.find_operator(operator).subtasks or ())[0].managed_keyed_state
    assert isinstance(handle, KeyGroupsHandle) and handle.delegate is not None
    stream = sp.stream(handle.delegate)
    return stream.read(0, keyed_blocks.header_length(handle.offsets, stream.size))


def _replace(md: CheckpointMetadata, old: OperatorState, new: OperatorState) -> CheckpointMetadata:
    operators = tuple(new if o is old else o for o in md.operators)
    return dataclasses.replace(md, operators=operators)


# --- keys ---------------------------------------------------------------------------------


def key_string(index: int) -> str:
    return f"user-{index:010d}"


def key_long(index: int) -> int:
    """Long keys spread over the whole range, negative ones included."""
    return (index * 0x9E3779B97F4A7C15 & 0xFFFFFFFFFFFFFFFF) - (1 << 63)


_SERIALIZERS = "org.apache.flink.api.common.typeutils.base."
_KEY_TYPES: dict[str, tuple[java_types.KeyType, Callable[[int], Any]]] = {
    "String": (java_types.KEY_TYPES[_SERIALIZERS + "StringSerializer"], key_string),
    "Long": (java_types.KEY_TYPES[_SERIALIZERS + "LongSerializer"], key_long),
}


def key_bytes(key_type: str, index: int) -> bytes:
    """The serialized key number `index`."""
    codec, value = _KEY_TYPES[key_type]
    return codec.write(value(index))


def small_bytes_per_entry(key_type: str) -> int:
    """State bytes per entry with one-element lists (5 entries per key), for sizing by entries."""
    return -(-bytes_per_key(1, key_type) // 5)


def bytes_per_key(list_elements: int = 1, key_type: str = "String") -> int:
    """State bytes per key: `Params(keys * bytes_per_key(…), …)` builds exactly `keys` keys."""
    layout = _EntryLayout(Params(1, list_elements=list_elements, key_type=key_type), None)
    return layout.bytes_per_key


def keys_by_key_group(total: int, max_parallelism: int, key_type: str) -> list[array]:
    """Key indexes per key group, as Flink assigns them (murmur of `hashCode`)."""
    codec, value = _KEY_TYPES[key_type]
    groups = [array("I") for _ in range(max_parallelism)]
    for index in range(total):
        groups[codec.key_group(value(index), max_parallelism)].append(index)
    return groups


# --- entries ------------------------------------------------------------------------------


class _EntryLayout:
    """Key and value bytes per state, by state id of the fixture's header (§4.6)."""

    def __init__(self, params: Params, header_bytes: bytes | None) -> None:
        from statectl.formats import state_headers

        if header_bytes is None:  # sizing only: the fixture's state order
            names = ["mp", "cnt", "lst", "_timer_state/processing_user-timers"]
        else:
            names = [s.name for s in state_headers.parse_keyed_header(header_bytes).states]
        self.key_type = params.key_type
        self.ids = {name: names.index(name) for name in names}
        self.timers = "_timer_state/processing_user-timers"
        self.prefix_bytes = java_types.key_group_prefix_bytes(params.max_parallelism)
        rng = random.Random(params.list_elements)
        elements = [rng.randbytes(8) for _ in range(params.list_elements)]
        self.list_tail = b",".join(elements)[8:]  # the first element is the key's own
        self.map_keys = [java_types.write_java_string(f"m{j}") for j in range(MAP_KEYS)]
        self.bytes_per_key = len(self.block(0, [0, 1])) - len(self.block(0, [0]))

    def entries(self, keys: int) -> dict[str, int]:
        counts = dict.fromkeys(self.ids, 0)
        counts.update({"cnt": keys, "lst": keys, "mp": MAP_KEYS * keys, self.timers: keys})
        return counts

    def block(self, key_group: int, keys: array | list[int]) -> bytes:
        """The block of one key group, state runs in the order the heap backend writes them."""
        prefix = java_types.key_group_prefix(key_group, self.prefix_bytes)
        cnt, lst, mp, timers = [], [], [], []
        for index in keys:
            serialized = key_bytes(self.key_type, index)
            key = prefix + serialized + b"\x00"  # VoidNamespace
            value = index.to_bytes(8, "big")
            cnt.append((key, value))
            lst.append((key, value + self.list_tail))
            mp.extend((key + m, b"\x00" + value) for m in self.map_keys)
            flipped = (TIMESTAMP_BASE + index) ^ java_types.TIMER_TIMESTAMP_FLIP
            timers.append((prefix + flipped.to_bytes(8, "big") + serialized + b"\x00", b""))
        runs = [(self.ids[self.timers], timers), (self.ids["cnt"], cnt)]
        runs += [(self.ids["mp"], mp), (self.ids["lst"], lst)]
        return keyed_blocks.build_block(runs)


def _write_subtask(
    path: Path,
    header: bytes,
    block: Callable[[int, array], bytes],
    by_group: list[array],
    first: int,
    last: int,
) -> KeyGroupsHandle:
    offsets = [0] * (last - first + 1)
    with path.open("wb") as out:
        out.write(header)
        for key_group in range(first, last + 1):
            if by_group[key_group]:
                offsets[key_group - first] = out.tell()
                out.write(block(key_group, by_group[key_group]))
        size = out.tell()
    return KeyGroupsHandle(7, first, tuple(offsets), RelativeFileHandle(path.name, size))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="cache folder for the savepoint")
    parser.add_argument("--gib", type=float, default=2.0)
    parser.add_argument("--parallelism", type=int, default=8)
    parser.add_argument("--max-parallelism", type=int, default=1024)
    args = parser.parse_args(argv)
    params = Params(int(args.gib * (1 << 30)), args.parallelism, args.max_parallelism)
    built = ensure(params, args.out)
    print(json.dumps({"path": str(built.path), "bytes": built.bytes, "keys": built.keys}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
