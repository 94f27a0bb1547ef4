"""Write-back is exact: every entry of every committed fixture savepoint, decoded by its state's
`StateCodec` and encoded again, gives the very bytes Flink wrote, part by part (key, namespace,
map user key, stored value; operator list elements; broadcast keys, values and whole maps).
And through Arrow: every state of the values fixtures read as its typed table, turned back with
`column_from_arrow` and encoded, gives the bytes of the entry each row was read from.

A part statectl cannot decode is `Raw` and passes through as its bytes. Through Arrow, a part
that did not decode is null in its typed column (it cannot come back from there: skipped and
counted, the count checked against the table's raw tally), and a Kryo value is JSON text that
does not say its Java classes (counted apart, checked to be Kryo's alone).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from statectl.errors import UnsupportedError
from statectl.formats.operator_state import build_broadcast_element
from statectl.formats.state_headers import KeyedStateHeader
from statectl.formats.state_values import MAP_NULL_VALUE, StateCodec
from statectl.formats.values import Raw, RawCodec, Undecodable
from statectl.savepoint import tables
from statectl.savepoint.entries import (
    KeyedEntry,
    KeyedFile,
    KeyedSource,
    OperatorElement,
    broadcast_entries,
    codecs_for,
    element_codec,
    keyed_files,
    operator_files,
    split_key,
)
from statectl.savepoint.model import Savepoint
from statectl.savepoint.reader import open_savepoint
from tests.flink import harness

TESTS = Path(__file__).parents[2]
# Every committed fixture savepoint (or retained checkpoint): its folder below tests/.
SAVEPOINTS = sorted(
    {str(m.parent.relative_to(TESTS)) for m in TESTS.glob("fixtures/**/manifest.json")}
    | {
        str(m.parents[1].relative_to(TESTS))
        for m in TESTS.glob("flink/*/fixture/savepoint/_metadata")
    }
)
VALUES = sorted(p for p in SAVEPOINTS if p.startswith("fixtures/values/"))
# Operator state Flink 1.18.1 compressed with shared offsets (FLINK-34063): refused, not read.
UNREADABLE_OPERATOR_STATE = {"fixtures/compat/1.18.1-hashmap-compressed": "FLINK-34063"}


def open_fixture(folder: str) -> Savepoint:
    """A fixture's savepoint; a retained checkpoint first put where its `_metadata` points."""
    path = TESTS / folder
    if (path / "manifest.json").is_file():
        return open_savepoint(str(harness.checkpoint_in_place(path)))
    return open_savepoint(str(path / "savepoint"))


def heap_null_map_value(codec: StateCodec, stored: bytes) -> bool:
    """A MAP's null value in the heap backend's form: the flag, then the serializer's null."""
    return codec.kind == "MAP" and len(stored) > 1 and stored[0] == MAP_NULL_VALUE


@dataclass
class Tally:
    """What one savepoint's round trip saw: entries by kind, parts compared, raw parts."""

    entries: Counter[str] = field(default_factory=Counter)
    parts: int = 0
    raw: Counter[str] = field(default_factory=Counter)
    skipped: Counter[str] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)  # files statectl refuses to read

    def check(self, where: str, part: str, again: bytes, original: bytes, decoded: Any) -> None:
        self.parts += 1
        if isinstance(decoded, Raw):
            self.raw[f"{where} {part}: {decoded.reason}"[:160]] += 1
        if again != original and len(self.failures) < 20:
            self.failures.append(
                f"{where} {part}: {original.hex()} decoded as {decoded!r:.200} "
                f"encodes to {again.hex()}"
            )

    def summary(self) -> str:
        return (
            f"{sum(self.entries.values())} entries {dict(self.entries)}, {self.parts} parts, "
            f"{sum(self.raw.values())} raw, {sum(self.skipped.values())} skipped"
        )


# --- bytes → values → bytes ----------------------------------------------------------------------


def keyed_entries(sp: Savepoint) -> Iterator[tuple[str, int, StateCodec, KeyedEntry]]:
    for op in sp.operators:
        for file in keyed_files(sp, op):
            header = file.header()
            codecs = codecs_for(header, file.flink_major)
            for entry in file.entries(header=header):
                where = f"{file.operator}/{entry.state.name}"
                yield where, op.max_parallelism, codecs[entry.state.name], entry


def roundtrip_keyed(sp: Savepoint, tally: Tally) -> None:
    for where, max_parallelism, codec, entry in keyed_entries(sp):
        tally.entries[f"keyed {codec.kind}"] += 1
        parts = split_key(entry, max_parallelism, codec)
        key = codec.decode_key(parts.key)
        tally.check(where, "key", codec.encode_key(key), parts.key, key)
        if parts.namespace is not None:
            namespace = codec.decode_namespace(parts.namespace)
            again = codec.encode_namespace(namespace)
            tally.check(where, "namespace", again, parts.namespace, namespace)
        if parts.user_key is not None:
            user_key = codec.decode_user_key(parts.user_key)
            tally.check(
                where, "user key", codec.encode_user_key(user_key), parts.user_key, user_key
            )
        decoded = codec.decode_value(entry.value)
        heap = heap_null_map_value(codec, entry.value)
        again = codec.encode_value(decoded.value, decoded.ttl_timestamp, heap_null_map_value=heap)
        tally.check(where, "value", again, entry.value, decoded.value)


def roundtrip_operator(sp: Savepoint, tally: Tally) -> None:
    for op in sp.operators:
        for file in operator_files(sp, op):
            try:
                elements = list(file.elements())
            except UnsupportedError as exc:
                tally.unreadable.append(exc.message)
                continue
            for element in elements:
                codec = element_codec(element)
                where = f"{file.operator}/{element.state}[{file.subtask}]"
                tally.entries[f"operator {element.kind}"] += 1
                if element.kind == "BROADCAST":
                    roundtrip_broadcast(where, codec, element, tally)
                    continue
                decoded = codec.decode_value(element.value)
                tally.check(
                    where,
                    "element",
                    codec.encode_value(decoded.value),
                    element.value,
                    decoded.value,
                )


def roundtrip_broadcast(
    where: str, codec: StateCodec, element: OperatorElement, tally: Tally
) -> None:
    pairs = broadcast_entries(element)
    if pairs is None:  # serializers statectl cannot read: the map stays its bytes
        tally.raw[f"{where} map: {codec.describe()}"] += 1
        return
    again = []
    for key_bytes, value_bytes in pairs:
        key = codec.decode_key(key_bytes)
        value = codec.decode_value(value_bytes).value
        encoded = (codec.encode_key(key), codec.encode_value(value))
        tally.check(where, "broadcast key", encoded[0], key_bytes, key)
        tally.check(where, "broadcast value", encoded[1], value_bytes, value)
        again.append(encoded)
    tally.check(where, "broadcast map", build_broadcast_element(again), element.value, None)


@pytest.mark.parametrize("path", SAVEPOINTS)
def test_every_entry_encodes_back_to_its_bytes(path: str) -> None:
    sp = open_fixture(path)
    tally = Tally()
    roundtrip_keyed(sp, tally)
    roundtrip_operator(sp, tally)
    assert not tally.failures, f"{path}: {tally.summary()}\n" + "\n".join(tally.failures)
    refused = UNREADABLE_OPERATOR_STATE.get(path)
    assert all(refused and refused in reason for reason in tally.unreadable), tally.unreadable
    assert sum(tally.entries.values()), f"{path} holds no keyed or operator state"
    print(f"{path}: {tally.summary()}")


# --- bytes → typed table → values → bytes --------------------------------------------------------

NOT_BACK = object()  # a value whose Arrow form does not hold what its bytes need (Kryo's JSON)


def columns_of(codec: StateCodec, table: pa.Table) -> dict[str, list[Any]]:
    """Each column back to values; a value that cannot come back is `NOT_BACK`."""
    return {name: column_of(codec, name, table[name]) for name in table.column_names}


def column_of(codec: StateCodec, name: str, column: pa.ChunkedArray) -> list[Any]:
    try:
        return codec.column_from_arrow(name, column)
    except Undecodable:  # row by row, to tell which
        return [value_of(codec, name, column.slice(i, 1)) for i in range(len(column))]


def value_of(codec: StateCodec, name: str, cell: pa.ChunkedArray) -> Any:
    try:
        return codec.column_from_arrow(name, cell)[0]
    except Undecodable:
        return NOT_BACK


@dataclass
class ArrowTally(Tally):
    """A `Tally` that also counts the parts the table could not carry back."""

    raw_in_binary: int = 0  # raw parts of a binary column: they come back as their bytes
    not_back: Counter[str] = field(default_factory=Counter)  # by the part's type
    scale_lost: Counter[str] = field(default_factory=Counter)  # BigDecimals of negative scale

    def part(
        self,
        where: str,
        part: str,
        codec: Any,
        original: Any,
        back: Any,
        encode: Any,
        data: bytes,
    ) -> None:
        """`back` (the part from the table) encodes to `data`, unless it could not come back."""
        if back is NOT_BACK:
            self.not_back[codec.describe()] += 1
        elif isinstance(original, Raw) and (codec is None or isinstance(codec, RawCodec)):
            self.raw_in_binary += 1
            self.check(where, part, encode(back), data, back)
        elif original is not None and back is None:  # null in its typed column: did not decode
            self.skipped[where] += 1
        elif self.lost_scale(codec, original, back, encode(back), data):
            self.scale_lost[where] += 1
        else:
            self.check(where, part, encode(back), data, back)

    @staticmethod
    def lost_scale(codec: Any, original: Any, back: Any, again: bytes, data: bytes) -> bool:
        """A BigDecimal of negative scale: its Arrow string is plain digits (docs/values.md),
        which keep its value (Decimal equality is numeric) but not its scale."""
        return again != data and "BIG_DECIMAL" in codec.describe() and back == original


@dataclass
class ReadOnce:
    """A keyed source read once, for `tables.keyed_batches` to read state by state (a RocksDB
    instance takes long to open)."""

    max_parallelism: int
    description: str
    read_header: KeyedStateHeader
    read_entries: list[KeyedEntry]

    @classmethod
    def of(cls, file: KeyedSource) -> ReadOnce:
        header = file.header()
        return cls(file.max_parallelism, file.description, header, list(file.entries(None, header)))

    def header(self) -> KeyedStateHeader:
        return self.read_header

    def entries(
        self, key_groups: Any = None, header: Any = None, states: Any = None
    ) -> Iterator[KeyedEntry]:
        return (e for e in self.read_entries if states is None or e.state.name in states)


def arrow_roundtrip_keyed(sp: Savepoint, tally: ArrowTally) -> None:
    for op in sp.operators:
        for file in keyed_files(sp, op):
            source = ReadOnce.of(file)
            codecs = codecs_for(source.read_header, file.flink_major)
            for state, table, raw in keyed_tables(file, source, codecs):
                codec = codecs[state]
                rows = [e for e in source.read_entries if e.state.name == state]
                where = f"{file.operator}/{state}[{file.subtask}]"
                assert table.num_rows == len(rows), where
                raw_before = sum(tally.skipped.values()) + tally.raw_in_binary
                for row, entry in zip(table_rows(codec, table), rows, strict=True):
                    tally.entries[f"keyed {codec.kind}"] += 1
                    keyed_row(where, op.max_parallelism, codec, entry, row, tally)
                raw_here = sum(tally.skipped.values()) + tally.raw_in_binary - raw_before
                assert raw_here == raw.rows, (where, raw_here, raw.rows, raw.first_reason)


def keyed_tables(
    file: KeyedSource, source: ReadOnce, codecs: dict[str, StateCodec]
) -> Iterator[tuple[str, pa.Table, tables.RawTally]]:
    """Each state's table as the library reads it (`keyed_batches`, entry by entry) and, from a
    canonical file, as `export --typed` does (`keyed_state_batches`, in batches)."""
    for state, codec in codecs.items():
        raw = tables.RawTally()
        batches = list(tables.keyed_batches(source, state, codec, raw=raw))  # type: ignore[arg-type]
        yield state, pa.Table.from_batches(batches, schema=codec.arrow_schema()), raw
    if isinstance(file, KeyedFile):
        raws: dict[str, tables.RawTally] = {}
        parts: dict[str, list[pa.Table]] = {state: [] for state in codecs}
        for state, table in tables.keyed_state_batches(file, codecs, raws=raws):
            parts[state].append(table)
        for state, codec in codecs.items():
            table = (
                pa.concat_tables(parts[state])
                if parts[state]
                else codec.arrow_schema().empty_table()
            )
            yield state, table, raws.get(state, tables.RawTally())


def table_rows(codec: StateCodec, table: pa.Table) -> list[dict[str, Any]]:
    columns = columns_of(codec, table)
    return [{name: values[i] for name, values in columns.items()} for i in range(table.num_rows)]


def keyed_row(
    where: str,
    max_parallelism: int,
    codec: StateCodec,
    entry: KeyedEntry,
    row: dict[str, Any],
    tally: ArrowTally,
) -> None:
    parts = split_key(entry, max_parallelism, codec)
    key = codec.decode_key(parts.key)
    tally.part(where, "key", codec.key, key, row["key"], codec.encode_key, parts.key)
    if parts.namespace is not None:
        namespace = codec.decode_namespace(parts.namespace)
        back = row["namespace"]
        tally.part(
            where, "namespace", codec.namespace, namespace, back, codec.encode_namespace,
            parts.namespace,
        )  # fmt: skip
    if codec.kind == "TIMERS":
        assert row["timestamp"] == parts.timestamp, where
        return
    if parts.user_key is not None:
        user_key = codec.decode_user_key(parts.user_key)
        tally.part(
            where, "user key", codec.user_key, user_key, row["user_key"], codec.encode_user_key,
            parts.user_key,
        )  # fmt: skip
    value_part(where, codec, codec.decode_value(entry.value).value, row, entry.value, tally)


def value_part(
    where: str,
    codec: StateCodec,
    original: Any,
    row: dict[str, Any],
    data: bytes,
    tally: ArrowTally,
) -> None:
    heap = heap_null_map_value(codec, data)

    def encode(value: Any) -> bytes:
        return codec.encode_value(value, row.get("ttl_timestamp"), heap_null_map_value=heap)

    tally.part(where, "value", codec.user_value_codec(), original, row["value"], encode, data)


def arrow_roundtrip_operator(sp: Savepoint, tally: ArrowTally) -> None:
    for op in sp.operators:
        for file in operator_files(sp, op):
            elements = list(file.elements())
            for state in {s.name for s in file.handle.states}:
                codec = tables.operator_state_codec(file, state)
                raw = tables.RawTally()
                batches = list(tables.operator_batches(file, state, codec, raw=raw))
                table = pa.Table.from_batches(batches, schema=codec.arrow_schema())
                where = f"{file.operator}/{state}[{file.subtask}]"
                stored = stored_rows(codec, [e for e in elements if e.state == state])
                assert table.num_rows == len(stored), where
                raw_before = sum(tally.skipped.values()) + tally.raw_in_binary
                for row, parts in zip(table_rows(codec, table), stored, strict=True):
                    tally.entries[f"operator {codec.kind}"] += 1
                    operator_row(where, codec, parts, row, tally)
                raw_here = sum(tally.skipped.values()) + tally.raw_in_binary - raw_before
                assert raw_here == raw.rows, (where, raw_here, raw.rows, raw.first_reason)


def operator_row(
    where: str,
    codec: StateCodec,
    parts: tuple[bytes | None, bytes],
    row: dict[str, Any],
    tally: ArrowTally,
) -> None:
    key_bytes, value_bytes = parts
    if key_bytes is not None:  # a broadcast entry
        key = codec.decode_key(key_bytes)
        tally.part(where, "key", codec.key, key, row["key"], codec.encode_key, key_bytes)
    value = codec.decode_value(value_bytes).value
    value_part(where, codec, value, row, value_bytes, tally)


def stored_rows(
    codec: StateCodec, elements: list[OperatorElement]
) -> list[tuple[bytes | None, bytes]]:
    """The (key, value) bytes of each row of an operator state's table, in its order."""
    if codec.kind != "BROADCAST":
        return [(None, e.value) for e in elements]
    return [pair for e in elements for pair in broadcast_entries(e) or ()]


@pytest.mark.parametrize("path", VALUES)
def test_every_typed_row_encodes_back_to_its_entry(path: str) -> None:
    sp = open_fixture(path)
    tally = ArrowTally()
    arrow_roundtrip_keyed(sp, tally)
    arrow_roundtrip_operator(sp, tally)
    summary = (
        f"{tally.summary()}, {tally.raw_in_binary} raw in binary columns, "
        f"{sum(tally.not_back.values())} holding Kryo values (JSON only), "
        f"{sum(tally.scale_lost.values())} BigDecimals of negative scale"
    )
    assert not tally.failures, f"{path}: {summary}\n" + "\n".join(tally.failures)
    assert all("KRYO(" in codec for codec in tally.not_back), tally.not_back
    assert {w.split("/")[-1].split("[")[0] for w in tally.scale_lost} <= {"bigdecimal"}, tally
    print(f"{path}: {summary}")
