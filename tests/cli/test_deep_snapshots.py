"""Serializer snapshots nested hundreds deep in a state file's header (a List of List of …,
a Map, a POJO whose field is a POJO …, and the key serializer): every command refuses them in
one line naming the file, never "internal error: RecursionError"."""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Callable
from pathlib import Path

import pytest

from statectl.cli.main import main
from statectl.formats.serializer_snapshots import (
    COMPOSITE_MAGIC,
    MAX_SNAPSHOT_DEPTH,
    NESTED_MAGIC,
    OPTIONAL_MAP_HEADER,
    SerializerSnapshot,
)
from statectl.formats.state_headers import KeyedStateHeader, parse_keyed_header, write_keyed_header
from tests.reliability.corpus import (
    copy_fixture,
    keyed_handle,
    load,
    save,
    state_file,
    with_subtask,
)

FIXTURE = "values/2.3.0-hashmap-canonical"
BASE = "org.apache.flink.api.common.typeutils.base."
LONG = BASE + "LongSerializer$LongSerializerSnapshot"
LIST = BASE + "ListSerializerSnapshot"
MAP = BASE + "MapSerializerSnapshot"
POJO = "org.apache.flink.api.java.typeutils.runtime.PojoSerializerSnapshot"
DEPTH = 300


def utf(text: str) -> bytes:
    data = text.encode()
    return struct.pack(">H", len(data)) + data


def composite(class_name: str, *nested: bytes) -> bytes:
    """A `CompositeTypeSerializerSnapshot` (version 1, outer version 1, no outer payload)."""
    return (
        utf(class_name)
        + struct.pack(">iiiiii", 1, COMPOSITE_MAGIC, 1, NESTED_MAGIC, 1, len(nested))
        + b"".join(nested)
    )


def pojo(field: bytes) -> bytes:
    """`PojoSerializerSnapshot` v2 of `demo.P` with one field `f` of this snapshot."""

    def frame(data: bytes) -> bytes:
        return b"\x01" + struct.pack(">i", len(data)) + data

    empty_map = struct.pack(">qi", OPTIONAL_MAP_HEADER, 0)
    fields = struct.pack(">qi", OPTIONAL_MAP_HEADER, 1) + utf("f") + frame(utf("demo.P"))
    return utf(POJO) + struct.pack(">i", 2) + utf("demo.P") + fields + frame(field) + empty_map * 2


LEVELS: dict[str, Callable[[bytes], bytes]] = {
    "list": lambda inner: composite(LIST, inner),
    "map": lambda inner: composite(MAP, utf(LONG) + struct.pack(">i", 3), inner),
    "pojo": pojo,
}


def nested(kind: str, depth: int) -> bytes:
    """A versioned snapshot: `depth` levels of `kind` around a Long."""
    data = utf(LONG) + struct.pack(">i", 3)
    for _ in range(depth):
        data = LEVELS[kind](data)
    return data


def with_keyed_header(
    sp: Path, uid: str, index: int, change: Callable[[KeyedStateHeader], KeyedStateHeader]
) -> Path:
    """Rewrite subtask `index`'s keyed state header (key groups moved after it); its file."""
    md = load(sp)
    handle = keyed_handle(md, uid, index)
    path = state_file(sp, uid, index)
    data = path.read_bytes()
    end = min(o for o in handle.offsets if o)
    header = write_keyed_header(change(parse_keyed_header(data[:end])))
    path.write_bytes(header + data[end:])
    shift = len(header) - end
    assert handle.delegate is not None
    delegate = dataclasses.replace(handle.delegate, size=handle.delegate.size + shift)  # type: ignore[call-arg]
    offsets = tuple(o + shift if o else 0 for o in handle.offsets)
    moved = dataclasses.replace(handle, offsets=offsets, delegate=delegate)
    save(sp, with_subtask(md, uid, index, managed_keyed_state=moved))
    return path


def deep_savepoint(tmp_path: Path, kind: str, where: str, depth: int = DEPTH) -> tuple[Path, Path]:
    """The values savepoint with subtask 0's state `long` (or the key) `depth` levels deep."""
    sp = copy_fixture(FIXTURE, tmp_path)
    snapshot = SerializerSnapshot("hostile", 1, raw=nested(kind, depth))

    def change(header: KeyedStateHeader) -> KeyedStateHeader:
        if where == "key":
            return dataclasses.replace(header, key_serializer_snapshot=snapshot)
        states = tuple(
            dataclasses.replace(s, serializers={**s.serializers, "VALUE_SERIALIZER": snapshot})
            if s.name == "long"
            else s
            for s in header.states
        )
        return dataclasses.replace(header, states=states)

    return sp, with_keyed_header(sp, "values", 0, change)


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    try:
        main(argv)
        code = 0
    except SystemExit as exit_info:
        code = int(exit_info.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


TOO_DEEP = f"serializer snapshots nested more than {MAX_SNAPSHOT_DEPTH} deep"


@pytest.mark.parametrize("kind", sorted(LEVELS))
def test_a_state_nested_hundreds_deep_is_one_line(
    tmp_path: Path, kind: str, capsys: pytest.CaptureFixture[str]
) -> None:
    sp, path = deep_savepoint(tmp_path, kind, "value")
    problem = (
        f"{path}: operator values, subtask 0: keyed state header: state 'long': "
        f"VALUE_SERIALIZER: {TOO_DEEP}"
    )
    out_dir = str(tmp_path / "out")
    for argv in (
        ["inspect", str(sp)],
        ["export", "--typed", str(sp), "--operator", "values", "--state", "string", "-o", out_dir],
    ):
        assert run(argv, capsys) == (1, "", f"statectl: error: {problem}\n"), argv
    code, out, err = run(["verify", "--deep", str(sp)], capsys)
    assert (code, out) == (1, f"{problem}\n")
    assert all(line.startswith("statectl: note: ") for line in err.splitlines()), err  # unchecked
    # to the limit, the snapshots are read and the values left raw (the codecs read 48 deep)
    sp, _ = deep_savepoint(tmp_path / "at-limit", kind, "value", MAX_SNAPSHOT_DEPTH - 1)
    code, stdout, err = run(
        ["export", "--typed", str(sp), "--operator", "values", "--state", "long", "-o", out_dir],
        capsys,
    )
    assert (code, err) == (0, "")
    assert "(10 left raw: value: serializers nested more than 48 deep)" in stdout


def test_a_key_serializer_nested_hundreds_deep_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sp, path = deep_savepoint(tmp_path, "list", "key")
    problem = f"{path}: operator values, subtask 0: keyed state header: key serializer: {TOO_DEEP}"
    assert run(["inspect", str(sp)], capsys) == (1, "", f"statectl: error: {problem}\n")
