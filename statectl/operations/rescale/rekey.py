"""Changing max parallelism: every key moves to the key group the new max parallelism gives it.

Flink fixes the number of key groups for the life of keyed state (flink-savepoint-format.md §6),
so a new max parallelism re-hashes every key: decode it with the key serializer named in the
header, Java `hashCode`, `MathUtils.murmurHash`, modulo the new max parallelism. The key-group
prefix is rewritten (1 byte up to 128 key groups, else 2) and entries are regrouped into new
blocks with flags and end marks recomputed. Namespaces, user keys and values stay bytes.

This module is the plan's side (what is re-hashed, and the per-key reference `regroup`);
`rekey_batches` is the work on the sources' side, in batches. `job.rekey` shuffles their
chunks by (new subtask, key group, source, batch) and `execute.write_rekeyed` writes each
new file.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from statectl.formats import keyed_blocks, state_headers
from statectl.formats.java_types import (
    KeyType,
    assign_to_key_group,
    key_group_prefix_bytes,
    with_key_group,
)
from statectl.formats.key_groups import key_group_range
from statectl.savepoint import native
from statectl.savepoint.model import StateStream
from statectl.savepoint.native_writer import NativeOutput

TIMER_TIMESTAMP_BYTES = 8  # TimerSerializer writes the timestamp before the key

# One new key group's entries from one batch: `payload` holds them as a block holds them
# (`i32 keyLen, key, i32 valueLen, value`, new prefix, no flags); `runs` is
# (state id, start, end, position of the key's first byte of the run's last entry) per state.
Chunk = tuple[bytes, tuple[tuple[int, int, int, int], ...]]


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


@dataclass(frozen=True, slots=True)
class HeapSource:
    """Key groups of one old file in the hashmap backend's own snapshot format (a slice of it),
    read through `heap_snapshot` into canonical entries; `header` is that file's header."""

    stream: StateStream
    spans: tuple[keyed_blocks.BlockSpan, ...]
    header: bytes
    flink_major: int
    state_id_map: tuple[tuple[int, int], ...] | None  # old id → id in the new header

    @property
    def size(self) -> int:
        return sum(span.length for span in self.spans)


RekeySource = CanonicalSource | NativeSource | HeapSource


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


def describe_source(source: RekeySource) -> str:
    """The file or instance a source reads, for errors."""
    if isinstance(source, NativeSource):
        return source.instance.description
    return source.stream.description


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
