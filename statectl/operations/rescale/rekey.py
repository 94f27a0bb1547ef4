"""Changing max parallelism: every key moves to the key group the new max parallelism gives it.

Flink fixes the number of key groups for the life of keyed state (flink-savepoint-format.md §6),
so a new max parallelism re-hashes every key: decode it with the key serializer named in the
header, Java `hashCode`, `MathUtils.murmurHash`, modulo the new max parallelism. The key-group
prefix is rewritten (1 byte up to 128 key groups, else 2) and entries are regrouped into new
blocks with flags and end marks recomputed. Namespaces, user keys and values stay bytes.

This module is the per-entry work, without Spark; `job.rekey` shuffles the entries
by (new subtask, key group, state, key) and `execute.write_rekeyed` writes each new file.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from statectl.errors import StatectlError
from statectl.formats import keyed_blocks, state_headers
from statectl.formats.java_types import (
    KeyType,
    assign_to_key_group,
    key_group_prefix_bytes,
    with_key_group,
)
from statectl.formats.key_groups import key_group_range, operator_index_for_key_group
from statectl.savepoint import native
from statectl.savepoint.model import StateStream
from statectl.savepoint.native_writer import NativeOutput

TIMER_TIMESTAMP_BYTES = 8  # TimerSerializer writes the timestamp before the key

# (key group, state id, key, value): one entry of the new savepoint.
RekeyedEntry = tuple[int, int, bytes, bytes]


@dataclass(frozen=True, slots=True)
class KeyRegrouper:
    """Moves one operator's composite keys to the key groups of a new max parallelism."""

    key_type: KeyType
    old_max_parallelism: int
    max_parallelism: int
    timer_states: frozenset[int]  # state ids whose keys start with a timer's timestamp

    def regroup(self, state_id: int, key: bytes) -> tuple[int, bytes]:
        """(new key group, the key with its new key-group prefix)."""
        old_prefix = key_group_prefix_bytes(self.old_max_parallelism)
        offset = old_prefix + (TIMER_TIMESTAMP_BYTES if state_id in self.timer_states else 0)
        value, _ = self.key_type.read(key, offset)
        key_group = assign_to_key_group(self.key_type.hash_code(value), self.max_parallelism)
        new_prefix = key_group_prefix_bytes(self.max_parallelism)
        return key_group, with_key_group(key, old_prefix, key_group, new_prefix)


@dataclass(frozen=True, slots=True)
class CanonicalSource:
    """Key-group blocks of one old canonical file (a slice of it, to spread the work)."""

    stream: StateStream
    spans: tuple[keyed_blocks.BlockSpan, ...]
    compressed: bool
    num_states: int
    state_id_map: tuple[tuple[int, int], ...] | None  # old id → id in the new header

    @property
    def size(self) -> int:
        return sum(span.length for span in self.spans)


@dataclass(frozen=True, slots=True)
class NativeSource:
    """One RocksDB instance; `states` maps its column families to ids of the new header."""

    instance: native.NativeInstance
    states: tuple[tuple[str, int], ...]

    @property
    def size(self) -> int:
        return self.instance.size


RekeySource = CanonicalSource | NativeSource


@dataclass(frozen=True, slots=True)
class RekeyOperator:
    """One operator's keyed state, re-hashed for a new max parallelism and parallelism."""

    operator_id: str
    parallelism: int
    regrouper: KeyRegrouper
    header: bytes  # compression flag cleared: new blocks are written uncompressed
    sources: tuple[RekeySource, ...]
    native: NativeOutput | None = None  # set: new subtasks are written as RocksDB instances

    @property
    def max_parallelism(self) -> int:
        return self.regrouper.max_parallelism

    def key_groups(self, index: int) -> tuple[int, int]:
        return key_group_range(self.max_parallelism, self.parallelism, index)

    def file_name(self, index: int) -> str:
        return f"{self.operator_id}-{index:05d}-keyed"


# --- reading and re-hashing --------------------------------------------------------------


def source_entries(
    source: RekeySource, old_max_parallelism: int
) -> Iterator[tuple[int, bytes, bytes]]:
    """(new-header state id, key, value) of every entry of a source; keys without the flag."""
    if isinstance(source, NativeSource):
        yield from _native_entries(source, old_max_parallelism)
        return
    mapping = dict(source.state_id_map or ())
    for span in source.spans:
        block = source.stream.read(span.start, span.end)
        try:
            for entry in keyed_blocks.iter_entries(block, source.compressed, source.num_states):
                yield mapping.get(entry.state_id, entry.state_id), entry.key, entry.value
        except StatectlError as exc:
            raise exc.with_source(
                f"{source.stream.description} (key group {span.key_group})"
            ) from None


def _native_entries(
    source: NativeSource, old_max_parallelism: int
) -> Iterator[tuple[int, bytes, bytes]]:
    owned = source.instance.key_groups
    if owned is None:
        return
    prefix_bytes = key_group_prefix_bytes(old_max_parallelism)
    with native.opened(source.instance) as db:
        for name, state_id in source.states:
            for key, value in db.rows(name, owned[0], owned[1], prefix_bytes):
                yield state_id, bytes(key), bytes(value)


def shuffle_records(
    operator: RekeyOperator, source: RekeySource, old_max_parallelism: int
) -> Iterator[tuple[tuple[int, int, int, bytes], bytes]]:
    """((new subtask, new key group, state id, key), value) for the shuffle of every entry."""
    regroup = operator.regrouper.regroup
    max_parallelism, parallelism = operator.max_parallelism, operator.parallelism
    for state_id, key, value in source_entries(source, old_max_parallelism):
        try:
            key_group, new_key = regroup(state_id, key)
        except StatectlError as exc:
            raise exc.with_source(_description(source)) from None
        subtask = operator_index_for_key_group(max_parallelism, parallelism, key_group)
        yield (subtask, key_group, state_id, new_key), value


def _description(source: RekeySource) -> str:
    if isinstance(source, CanonicalSource):
        return source.stream.description
    return source.instance.description


# --- planning helpers ---------------------------------------------------------------------


def new_header(header: bytes) -> bytes:
    """The header of the new files: the old one with compression off."""
    return state_headers.set_keyed_header_compression(header, False)


def describe(operator: RekeyOperator) -> dict[str, Any]:
    """What `--dry-run` shows of a re-hash."""
    return {
        "key_type": operator.regrouper.key_type.name,
        "old_max_parallelism": operator.regrouper.old_max_parallelism,
        "max_parallelism": operator.max_parallelism,
        "sources": len(operator.sources),
        "source_bytes": sum(s.size for s in operator.sources),
    }
