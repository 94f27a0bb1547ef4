"""Seeded mutations of the committed fixtures, for the fuzz test (tests/reliability/test_fuzz.py).

Where `corpus.py` hand-writes one damaged savepoint per known problem, this draws many at
random: truncations, byte flips, huge counts and lengths written over `_metadata` fields and
state-file bytes, handles crafted to point outside the savepoint, Snappy chunks that declare
4 GiB, and missing files. `mutants(seed, per_kind)` is deterministic for a seed.
"""

from __future__ import annotations

import dataclasses
import random
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from statectl.formats.handles import RelativeFileHandle
from tests.conftest import fixture_savepoint
from tests.reliability.corpus import field_boundaries, load, save

FIXTURES = (
    "hashmap_canonical_files",
    "hashmap_canonical_inline",
    "hashmap_compressed",
    "hashmap_maxp300",
    "rocksdb_canonical",
    "rocksdb_native_full",
)
HUGE_I32 = b"\x7f\xff\xff\xf0"
SNAPPY_STREAM_ID = b"\xff\x06\x00\x00sNaPpY"
FOUR_GIB_VARINT = b"\xff\xff\xff\xff\x0f"  # a Snappy preamble: 4 GiB uncompressed
OUTSIDE = "outside"  # a sibling of the savepoint, inside the test's input folder


@dataclass(frozen=True)
class Mutant:
    """One damaged copy of `fixture`: `apply(savepoint copy, rng)` damages it in place."""

    fixture: str
    kind: str
    seed: int

    @property
    def id(self) -> str:
        return f"{self.fixture}-{self.kind}-{self.seed}"

    def build(self, parent: Path) -> Path:
        savepoint = parent / self.fixture
        shutil.copytree(fixture_savepoint(self.fixture), savepoint)
        MUTATORS[self.kind](savepoint, random.Random(self.seed))
        return savepoint


def mutants(seed: int, per_kind: int) -> list[Mutant]:
    """`per_kind` mutants of every kind for every fixture, drawn from `seed`."""
    rng = random.Random(seed)
    return [
        Mutant(fixture, kind, rng.randrange(1 << 32))
        for fixture in FIXTURES
        for kind in MUTATORS
        for _ in range(per_kind)
        if kind != "snappy-bomb" or _compressed_files(fixture_savepoint(fixture))
    ]


# --- mutators ---------------------------------------------------------------------------


def _files(savepoint: Path) -> list[Path]:
    return sorted(p for p in savepoint.rglob("*") if p.is_file())


def _state_files(savepoint: Path) -> list[Path]:
    return [p for p in _files(savepoint) if p.name != "_metadata"]


def _any_file(savepoint: Path, rng: random.Random) -> Path:
    """`_metadata` half of the time (it is where most structure is), else a state file."""
    state = _state_files(savepoint)
    return savepoint / "_metadata" if not state or rng.random() < 0.5 else rng.choice(state)


def _truncate(savepoint: Path, rng: random.Random) -> None:
    path = _any_file(savepoint, rng)
    data = path.read_bytes()
    path.write_bytes(data[: rng.randrange(len(data))] if data else b"")


def _flip(savepoint: Path, rng: random.Random) -> None:
    path = _any_file(savepoint, rng)
    data = bytearray(path.read_bytes())
    for _ in range(rng.randint(1, 3)):
        if data:
            data[rng.randrange(len(data))] ^= rng.randint(1, 255)
    path.write_bytes(bytes(data))


def _huge(savepoint: Path, rng: random.Random) -> None:
    """A huge i32 where a count or length is read: at a `_metadata` field, else anywhere."""
    path = _any_file(savepoint, rng)
    data = bytearray(path.read_bytes())
    if path.name == "_metadata":
        ends = [pos for pos, _ in field_boundaries(bytes(data)) if pos + 4 <= len(data)]
        position = rng.choice(ends)
    else:
        position = rng.randrange(max(1, len(data) - 4))
    data[position : position + 4] = HUGE_I32
    path.write_bytes(bytes(data))


def _escape(savepoint: Path, rng: random.Random) -> None:
    """A relative handle pointing outside: at a system file, or at a real state file moved out."""
    md = load(savepoint)
    handles = _relative_handles(md)
    if not handles:  # inline state only: a handle cannot escape, so damage a field instead
        _huge(savepoint, rng)
        return
    victim = rng.choice(handles)
    if rng.random() < 0.5:
        target = "../../../../../../../../etc/passwd"
    else:
        outside = savepoint.parent / OUTSIDE
        outside.mkdir(exist_ok=True)
        shutil.move(savepoint / victim.relative_path, outside / victim.relative_path)
        target = f"../{OUTSIDE}/{victim.relative_path}"
    renamed = dataclasses.replace(victim, relative_path=target)
    save(savepoint, _replace_everywhere(md, victim, renamed))


def _snappy_bomb(savepoint: Path, rng: random.Random) -> None:
    """A compressed Snappy chunk whose preamble declares 4 GiB (the chunk keeps its size)."""
    path, chunks = rng.choice(_compressed_files(savepoint))
    payload = rng.choice(chunks)
    data = bytearray(path.read_bytes())
    data[payload : payload + len(FOUR_GIB_VARINT)] = FOUR_GIB_VARINT
    path.write_bytes(bytes(data))


def _missing(savepoint: Path, rng: random.Random) -> None:
    state = _state_files(savepoint)
    if state:
        rng.choice(state).unlink()
    else:
        _truncate(savepoint, rng)


MUTATORS: dict[str, Callable[[Path, random.Random], None]] = {
    "truncate": _truncate,
    "flip": _flip,
    "huge": _huge,
    "escape": _escape,
    "snappy-bomb": _snappy_bomb,
    "missing": _missing,
}


# --- helpers ----------------------------------------------------------------------------


def _compressed_files(savepoint: Path) -> list[tuple[Path, list[int]]]:
    """Files holding framed Snappy, with the payload offsets of their compressed chunks that
    are long enough to take a 5-byte preamble."""
    found = []
    for path in _state_files(savepoint):
        data = path.read_bytes()
        payloads = []
        start = data.find(SNAPPY_STREAM_ID)
        while start != -1:
            chunk = start + len(SNAPPY_STREAM_ID)
            if chunk + 4 <= len(data) and data[chunk] == 0x00:
                length = int.from_bytes(data[chunk + 1 : chunk + 4], "little")
                if length >= 4 + len(FOUR_GIB_VARINT):
                    payloads.append(chunk + 4 + 4)  # past the type, length and masked CRC
            start = data.find(SNAPPY_STREAM_ID, start + 1)
        if payloads:
            found.append((path, payloads))
    return found


def _relative_handles(node: Any) -> list[RelativeFileHandle]:
    found: set[RelativeFileHandle] = set()

    def visit(value: Any) -> None:
        if isinstance(value, RelativeFileHandle):
            found.add(value)

    _walk(node, visit)
    return sorted(found, key=lambda h: h.relative_path)


def _walk(node: Any, visit: Callable[[Any], None]) -> None:
    visit(node)
    if dataclasses.is_dataclass(node) and not isinstance(node, type):
        for field in dataclasses.fields(node):
            _walk(getattr(node, field.name), visit)
    elif isinstance(node, tuple | list):
        for item in node:
            _walk(item, visit)
    elif isinstance(node, dict):
        for key, value in node.items():
            _walk(key, visit)
            _walk(value, visit)


def _replace_everywhere(node: Any, old: Any, new: Any) -> Any:
    """`node` with every value equal to `old` (dataclasses, tuples, dicts) replaced by `new`."""
    if node == old and type(node) is type(old):
        return new
    if dataclasses.is_dataclass(node) and not isinstance(node, type):
        changes = {
            f.name: _replace_everywhere(getattr(node, f.name), old, new)
            for f in dataclasses.fields(node)
            if f.init
        }
        return dataclasses.replace(node, **changes)
    if isinstance(node, tuple):
        return tuple(_replace_everywhere(item, old, new) for item in node)
    if isinstance(node, list):
        return [_replace_everywhere(item, old, new) for item in node]
    if isinstance(node, dict):
        return {
            _replace_everywhere(k, old, new): _replace_everywhere(v, old, new)
            for k, v in node.items()
        }
    return node
