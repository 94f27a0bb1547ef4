"""A Flink 1.20 savepoint of any size for `upgrade` at size: the values job's, keys cloned.

Every byte but the synthetic keys is Flink 1.20.3's: the fixture `values/1.20.3-hashmap-
canonical` (its `_metadata`, the `window` and `opstate` operators and their files, the
serializer-proxy header of the `values` operator as written), and the `values` operator's keyed
entries, cloned: synthetic key i (`synthetic.key_string(i)`) gets every entry of the fixture's
key `origins[i % len(origins)]` (of all 57 states, timers included: a timer's key is its
timestamp then the key, the timestamp kept), the value bytes and whatever follows the key
(namespace, user key) unchanged, only the key-group prefix and the serialized key replaced;
each key sits in the key group Flink assigns it (murmur of `String.hashCode`). Runs are
written in state id order, at the fixture's parallelism and max parallelism (2, 128); files
one block at a time, so memory stays flat whatever the size.

`build(fixture=...)` clones a savepoint statectl wrote from the fixture the same way: the
upgrade of a clone is then checked against the clone of the fixture's upgrade, byte for byte.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from array import array
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bench import synthetic
from statectl.formats import java_types, keyed_blocks, state_headers
from statectl.formats.handles import KeyGroupsHandle
from statectl.savepoint.reader import open_savepoint

FIXTURE = (
    synthetic.REPO / "tests" / "fixtures" / "values" / "1.20.3-hashmap-canonical" / "savepoint"
)
OPERATOR = "values"
TIMERS = "_timer_state/"
TIMESTAMP_BYTES = 8
STRING_KEY = java_types.KEY_TYPES["org.apache.flink.api.common.typeutils.base.StringSerializer"]


@dataclass(frozen=True)
class Params:
    keys: int  # synthetic keys, each a clone of one of the fixture's keys

    @property
    def name(self) -> str:
        return f"values-1.20.3-{self.keys}-keys"


@dataclass(frozen=True)
class Built:
    path: Path
    params: Params
    origins: tuple[str, ...]  # the fixture's keys: key i clones origins[i % len(origins)]
    entries: dict[str, int]  # keyed state name → entries written
    holders: dict[str, int]  # keyed state name → keys with an entry in it
    bytes: int  # all files of the savepoint, `_metadata` included


@dataclass(frozen=True, slots=True)
class _Clone:
    """One entry of an origin key, its key split around the serialized key."""

    head: bytes  # between the key-group prefix and the key: a timer's timestamp, else nothing
    tail: bytes  # after the key: namespace, user key
    value: bytes


# origin key → state id → its entries
_Entries = dict[str, dict[int, list[_Clone]]]


def ensure(params: Params, cache: Path) -> Built:
    """The savepoint for `params` under `cache`, built unless a complete one is there."""
    target = cache / params.name
    stamp = target.with_name(target.name + synthetic.STAMP_SUFFIX)
    if target.is_dir() and stamp.is_file():
        recorded = json.loads(stamp.read_text())
        if recorded.pop("params") == dataclasses.asdict(params):
            recorded["origins"] = tuple(recorded["origins"])
            return Built(target, params, **recorded)
    shutil.rmtree(target, ignore_errors=True)
    stamp.unlink(missing_ok=True)
    built = build(params, target)
    record = {k: v for k, v in dataclasses.asdict(built).items() if k != "path"}
    stamp.write_text(json.dumps(record, indent=2))
    return built


def build(params: Params, target: Path, fixture: Path = FIXTURE) -> Built:
    """Write the savepoint into `target` (which must not exist): `fixture` (the values job's
    1.20.3 savepoint, or one statectl wrote from it) with the keys of `values` cloned."""
    op = open_savepoint(str(fixture)).find_operator(OPERATOR)
    header = synthetic.fixture_header(fixture, OPERATOR)
    names = [s.name for s in state_headers.parse_keyed_header(header).states]
    by_origin = origin_entries(fixture, names, op.max_parallelism)
    origins = tuple(sorted(by_origin))
    by_group = synthetic.keys_by_key_group(params.keys, op.max_parallelism, "String")
    prefix_bytes = java_types.key_group_prefix_bytes(op.max_parallelism)

    def block(key_group: int, keys: array[int]) -> bytes:
        prefix = java_types.key_group_prefix(key_group, prefix_bytes)
        return clone_block(prefix, [(i, by_origin[origins[i % len(origins)]]) for i in keys])

    size = synthetic.write_keyed_operator(
        fixture, OPERATOR, target, header, block, by_group, op.parallelism, seed=params.name
    )
    entries, holders = _counts(by_origin, origins, names, params.keys)
    return Built(target, params, origins, entries, holders, size)


def origin_entries(fixture: Path, names: list[str], max_parallelism: int) -> _Entries:
    """The keyed entries of the fixture's `values` operator (states `names`, by id), by key and
    state id."""
    sp = open_savepoint(str(fixture))
    prefix_bytes = java_types.key_group_prefix_bytes(max_parallelism)
    timer_ids = {n for n, name in enumerate(names) if name.startswith(TIMERS)}
    found: _Entries = defaultdict(lambda: defaultdict(list))
    for subtask in sp.find_operator(OPERATOR).subtasks or ():
        handle = subtask.managed_keyed_state
        assert isinstance(handle, KeyGroupsHandle) and handle.delegate is not None
        stream = sp.stream(handle.delegate)
        for span in keyed_blocks.block_spans(handle.start_key_group, handle.offsets, stream.size):
            block = stream.read(span.start, span.end)
            for entry in keyed_blocks.iter_entries(block, False, len(names)):
                head_end = prefix_bytes + (TIMESTAMP_BYTES if entry.state_id in timer_ids else 0)
                key, key_end = STRING_KEY.read(entry.key, head_end)
                clone = _Clone(entry.key[prefix_bytes:head_end], entry.key[key_end:], entry.value)
                found[key][entry.state_id].append(clone)
    return found


def clone_block(prefix: bytes, keys: Sequence[tuple[int, dict[int, list[_Clone]]]]) -> bytes:
    """One key group's block: each (key index, its origin's entries) under key index's key."""
    runs: dict[int, list[tuple[bytes, bytes]]] = defaultdict(list)
    for index, states in keys:
        key = synthetic.key_bytes("String", index)
        for state_id, clones in states.items():
            runs[state_id] += ((prefix + c.head + key + c.tail, c.value) for c in clones)
    return keyed_blocks.build_block(sorted(runs.items()))


def _counts(
    by_origin: _Entries, origins: tuple[str, ...], names: list[str], keys: int
) -> tuple[dict[str, int], dict[str, int]]:
    """Entries, and keys with an entry, by state name."""
    entries: dict[str, int] = defaultdict(int)
    holders: dict[str, int] = defaultdict(int)
    for n, origin in enumerate(origins):
        clones = len(range(n, keys, len(origins)))  # the keys i with i % len(origins) == n
        for state_id, found in by_origin[origin].items():
            entries[names[state_id]] += clones * len(found)
            holders[names[state_id]] += clones
    return dict(entries), dict(holders)
