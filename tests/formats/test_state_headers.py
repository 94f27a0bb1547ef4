"""Serializer-proxy headers and serializer snapshots (spec §3.1, §3.2, §4.2).

`data/*.bin` were written by Flink 2.3.0's own `KeyedBackendSerializationProxy` and
`OperatorBackendSerializationProxy` (tests/formats/oracles/StateHeaders.java).
"""

from __future__ import annotations

import contextlib
import random
import re
import subprocess
from pathlib import Path

import pytest

from statectl.errors import FormatError, UnsupportedError
from statectl.formats import state_headers as sh
from statectl.formats.java_io import DataReader, DataWriter
from statectl.formats.serializer_snapshots import (
    SerializerSnapshot,
    at_end,
    read_serializer_snapshot,
)

DATA = Path(__file__).parent / "data"
ORACLES = Path(__file__).parent / "oracles"
BASE = "org.apache.flink.api.common.typeutils.base."
STRING = BASE + "StringSerializer$StringSerializerSnapshot"
LONG = BASE + "LongSerializer$LongSerializerSnapshot"
VOID = "org.apache.flink.runtime.state.VoidNamespaceSerializer$VoidNamespaceSerializerSnapshot"
EVENT = "StateHeaders$Event"
SNAPPY_IDENTIFIER = bytes.fromhex("ff060000734e61507059")


def data(name: str) -> bytes:
    return (DATA / name).read_bytes()


# --- Flink-written headers -----------------------------------------------------------------

KEYED_STATES = [
    ("cnt", "VALUE", "Long"),
    ("lst", "LIST", "List<Long>"),
    ("mp", "MAP", "Map<String, Long>"),
    (
        "pojo",
        "VALUE",
        f"Pojo({EVENT})<count: Long, name: String, tags: Nullable<List<Nullable<String>>>>",
    ),
    ("kryo", "VALUE", "Kryo(StateHeaders$Opaque)"),
    ("ttl", "VALUE", "Ttl<Long, String>"),
    ("tuple", "VALUE", "Tuple(org.apache.flink.api.java.tuple.Tuple2)<String, Long>"),
    ("enum", "AGGREGATING", "Enum(StateHeaders$Color)"),
    ("_timer_state/processing_user-timers", "TIMERS", "Timer<String, VoidNamespace>"),
]


@pytest.mark.parametrize("name", ["keyed_string.bin", "keyed_string_compressed.bin"])
def test_keyed_header_written_by_flink(name: str) -> None:
    header = sh.parse_keyed_header(data(name))
    assert (header.version, header.compressed) == (6, name.endswith("compressed.bin"))
    assert header.complete and header.problem is None
    assert header.key_serializer == STRING
    assert header.key_serializer_snapshot == SerializerSnapshot(STRING, 3)
    assert [(s.name, s.kind, s.value_serializer.describe()) for s in header.states] == KEYED_STATES
    assert header.state_names()[0] == "cnt"
    assert sh.keyed_header_compressed(data(name)) == header.compressed


def test_keyed_header_details() -> None:
    states = {s.name: s for s in sh.parse_keyed_header(data("keyed_string.bin")).states}
    mp = states["mp"]
    assert mp.backend_state_type == "KEY_VALUE"
    assert mp.options == {"KEYED_STATE_TYPE": "MAP"}
    assert mp.namespace_serializer == SerializerSnapshot(VOID, 3)
    assert mp.value_serializer == SerializerSnapshot(
        BASE + "MapSerializerSnapshot",
        3,
        (SerializerSnapshot(STRING, 3), SerializerSnapshot(LONG, 3)),
    )
    assert mp.value_serializer.class_names() == [BASE + "MapSerializerSnapshot", STRING, LONG]
    assert states["tuple"].namespace_serializer.describe() == "TimeWindow"  # type: ignore[union-attr]
    timers = states["_timer_state/processing_user-timers"]
    assert (timers.backend_state_type, timers.options) == ("PRIORITY_QUEUE", {})
    assert list(timers.serializers) == ["VALUE_SERIALIZER"]
    pojo = states["pojo"].value_serializer
    assert pojo is not None and pojo.type_name == EVENT and pojo.version == 2
    assert pojo.field_names == ("count", "name", "tags")


def test_other_key_types() -> None:
    header = sh.parse_keyed_header(data("keyed_long.bin"))
    assert header.key_serializer == LONG and [s.name for s in header.states] == ["cnt"]
    header = sh.parse_keyed_header(data("keyed_pojo_key_no_states.bin"))
    assert header.states == () and header.complete
    assert header.key_serializer_snapshot.describe().startswith(f"Pojo({EVENT})")  # type: ignore[union-attr]


@pytest.mark.parametrize("name", ["operator.bin", "operator_compressed.bin"])
def test_operator_header_written_by_flink(name: str) -> None:
    header = sh.parse_operator_header(data(name))
    assert (header.version, header.compressed, header.complete) == (6, "compressed" in name, True)
    assert [(s.name, s.kind, s.distribution_mode) for s in header.list_states] == [
        ("split", "LIST", "SPLIT_DISTRIBUTE"),
        ("union", "LIST", "UNION"),
    ]
    (broadcast,) = header.broadcast_states
    assert (broadcast.name, broadcast.kind, broadcast.distribution_mode) == (
        "bc",
        "BROADCAST",
        "BROADCAST",
    )
    assert broadcast.key_serializer == SerializerSnapshot(STRING, 3)
    assert broadcast.value_serializer.type_name == EVENT  # type: ignore[union-attr]
    assert header.list_states[1].value_serializer.describe() == "Kryo(StateHeaders$Opaque)"  # type: ignore[union-attr]
    assert [s.name for s in header.states] == ["split", "union", "bc"]
    assert sh.operator_header_compressed(data(name)) == header.compressed
    # the data stream's Snappy identifier may trail the header bytes
    assert sh.parse_operator_header(data(name) + SNAPPY_IDENTIFIER).complete


def test_empty_operator_header() -> None:
    assert data("operator_empty.bin") == bytes.fromhex("000000060000000000")
    assert sh.parse_operator_header(data("operator_empty.bin")) == sh.OperatorStateHeader(
        6, False, (), ()
    )


def test_compression_flags_flip_only_byte_four() -> None:
    plain, compressed = data("keyed_string.bin"), data("keyed_string_compressed.bin")
    assert sh.set_keyed_header_compression(plain, True) == compressed
    assert sh.set_keyed_header_compression(compressed, False) == plain
    plain, compressed = data("operator.bin"), data("operator_compressed.bin")
    assert sh.set_operator_header_compression(plain, True) == compressed
    assert sh.set_operator_header_compression(compressed, False) == plain


def test_compression_flag_of_old_versions() -> None:
    v5 = b"\x00\x00\x00\x05\x00\x00\x00\x00"  # operator header v5 (Flink 1.15-1.17): no flag
    assert sh.set_operator_header_compression(v5, False) == v5
    with pytest.raises(UnsupportedError, match="version 5 has no compression flag"):
        sh.set_operator_header_compression(v5, True)
    assert sh.parse_operator_header(v5) == sh.OperatorStateHeader(5, False, (), ())
    with pytest.raises(FormatError, match="unsupported keyed state header version 7"):
        sh.set_keyed_header_compression(b"\x00\x00\x00\x07\x00", True)
    with pytest.raises(FormatError, match="truncated"):
        sh.set_keyed_header_compression(b"\x00\x00\x00\x06", True)


def test_old_keyed_versions_yield_a_partial_header() -> None:
    header = sh.parse_keyed_header(b"\x00\x00\x00\x05\x01rest")
    assert (header.version, header.compressed, header.states, header.complete) == (
        5,
        True,
        (),
        False,
    )
    assert "predates Flink 1.8" in (header.problem or "")


@pytest.mark.parametrize(
    ("header", "message"),
    [
        (b"", "truncated"),
        (b"\x00\x00\x00\x00", "unsupported keyed state header version 0"),
        (b"\x00\x00\x00\x07\x00", "unsupported keyed state header version 7"),
        (b"\x00\x00\x00\x06\x00", "key serializer: truncated"),
        (b"\x00\x00\x00\x06\x00\x00\x00\x00\x03", "unknown serializer snapshot proxy version 3"),
    ],
)
def test_broken_keyed_headers(header: bytes, message: str) -> None:
    with pytest.raises(FormatError, match=message):
        sh.parse_keyed_header(header)


# --- hand-built headers --------------------------------------------------------------------


def snapshot(w: DataWriter, class_name: str, payload: bytes = b"", proxy: bool = True) -> None:
    if proxy:
        w.write_i32(2)
    w.write_utf(class_name)
    w.write_i32(3)
    w.write_bytes(payload)


def state(w: DataWriter, name: str, kind: str, value: tuple[str, bytes]) -> None:
    w.write_utf(name)
    w.write_i32(0)  # KEY_VALUE
    w.write_i32(1)
    w.write_utf("KEYED_STATE_TYPE")
    w.write_utf(kind)
    w.write_i32(2)
    w.write_utf("VALUE_SERIALIZER")
    snapshot(w, *value)
    w.write_utf("NAMESPACE_SERIALIZER")
    snapshot(w, VOID)


def keyed_header(*states: tuple[str, str, tuple[str, bytes]]) -> bytes:
    w = DataWriter()
    w.write_i32(6)
    w.write_bool(False)
    snapshot(w, STRING)
    w.write_i16(len(states))
    for s in states:
        state(w, *s)
    return w.getvalue()


def test_hand_built_header() -> None:
    header = sh.parse_keyed_header(
        keyed_header(("a", "VALUE", (LONG, b"")), ("b", "LIST", (STRING, b"")))
    )
    assert header == sh.KeyedStateHeader(
        6,
        False,
        SerializerSnapshot(STRING, 3),
        (
            sh.StateMetaInfo(
                "a",
                "KEY_VALUE",
                {"KEYED_STATE_TYPE": "VALUE"},
                {
                    "VALUE_SERIALIZER": SerializerSnapshot(LONG, 3),
                    "NAMESPACE_SERIALIZER": SerializerSnapshot(VOID, 3),
                },
            ),
            sh.StateMetaInfo(
                "b",
                "KEY_VALUE",
                {"KEYED_STATE_TYPE": "LIST"},
                {
                    "VALUE_SERIALIZER": SerializerSnapshot(STRING, 3),
                    "NAMESPACE_SERIALIZER": SerializerSnapshot(VOID, 3),
                },
            ),
        ),
    )


def test_unknown_payload_is_skipped_and_marked() -> None:
    custom = "com.example.MySerializer$MySnapshot"
    header = sh.parse_keyed_header(
        keyed_header(("a", "VALUE", (custom, b"\x01\x02opaque\x00\x07")), ("b", "MAP", (LONG, b"")))
    )
    assert [s.name for s in header.states] == ["a", "b"]
    assert header.states[0].value_serializer == SerializerSnapshot(custom, 3, parsed=False)
    assert header.states[0].value_serializer.describe() == "My?"  # type: ignore[union-attr]
    assert not header.complete and header.problem is None
    assert header.states[1].complete
    assert sh.read_in_part(header) == (
        f"2 states read; the value serializer snapshot of state 'a' holds {custom}, a layout "
        "statectl does not know: its payload was skipped"
    )


def test_unknown_composite_keeps_its_nested_snapshots() -> None:
    w = DataWriter()
    w.write_utf("x.Outer")  # an outer payload we cannot read, then the nested snapshots
    w.write_i32(1333245)
    w.write_i32(1)
    w.write_i32(2)
    snapshot(w, STRING, proxy=False)
    snapshot(w, LONG, proxy=False)
    custom = "com.example.RowLike$Snapshot"
    header = sh.parse_keyed_header(keyed_header(("a", "VALUE", (custom, w.getvalue()))))
    value = header.states[0].value_serializer
    assert value == SerializerSnapshot(
        custom, 3, (SerializerSnapshot(STRING, 3), SerializerSnapshot(LONG, 3)), parsed=False
    )


def test_unknown_last_serializer_of_the_last_state_runs_to_the_end() -> None:
    w = DataWriter()
    w.write_i32(6)
    w.write_bool(True)
    snapshot(w, STRING)
    w.write_i16(1)
    w.write_utf("t")
    w.write_i32(3)  # PRIORITY_QUEUE
    w.write_i32(0)
    w.write_i32(1)
    w.write_utf("VALUE_SERIALIZER")
    snapshot(w, "com.example.Timerish", b"\x00\x00\x00\x09anything")
    header = sh.parse_keyed_header(w.getvalue())
    assert header.compressed and header.states[0].kind == "PRIORITY_QUEUE"
    assert header.states[0].value_serializer == SerializerSnapshot(
        "com.example.Timerish", 3, parsed=False
    )


def test_a_broken_state_gives_the_states_before_it() -> None:
    good = keyed_header(("a", "VALUE", (LONG, b"")), ("b", "LIST", (STRING, b"")))
    broken = good.replace(
        b"\x00\x01b\x00\x00\x00\x00", b"\x00\x01b\x00\x00\x00\x09"
    )  # type ordinal 9
    header = sh.parse_keyed_header(broken)
    assert [s.name for s in header.states] == ["a"]
    assert not header.complete
    assert re.match(
        r"state #1 at offset \d+: state 'b': unknown backend state type 9", header.problem or ""
    )
    assert sh.read_in_part(header) == f"1 state read, then stopped: {header.problem}"


def test_read_serializer_snapshot_directly() -> None:
    w = DataWriter()
    snapshot(w, STRING)
    r = DataReader(w.getvalue())
    assert read_serializer_snapshot(r, at_end) == SerializerSnapshot(STRING, 3)
    assert r.at_end()


# --- robustness ----------------------------------------------------------------------------

PARSERS = [("keyed_string.bin", sh.parse_keyed_header), ("operator.bin", sh.parse_operator_header)]


@pytest.mark.parametrize(("name", "parse"), PARSERS)
def test_unknown_snapshot_classes_never_lose_states(name: str, parse) -> None:  # type: ignore[no-untyped-def]
    original = data(name)
    names = [s.name for s in parse(original).states]
    classes = set(re.findall(rb"org\.apache\.flink[\w.$]+|StateHeaders\$\w+", original))
    for class_name in classes:
        renamed = original.replace(class_name, class_name[:-3] + b"Zzz")  # same length
        header = parse(renamed)
        assert [s.name for s in header.states] == names, class_name
        assert header.problem is None, class_name


@pytest.mark.parametrize(("name", "parse"), PARSERS)
def test_truncated_headers_give_partial_results_or_format_errors(name: str, parse) -> None:  # type: ignore[no-untyped-def]
    original = data(name)
    for cut in range(len(original)):
        try:
            header = parse(original[:cut])
        except FormatError:
            continue
        assert not header.complete, cut


@pytest.mark.parametrize(("name", "parse"), PARSERS)
def test_mutated_headers_raise_only_format_errors(name: str, parse) -> None:  # type: ignore[no-untyped-def]
    rng = random.Random(3)
    original = data(name)
    for _ in range(1500):
        mutated = bytearray(original)
        for _ in range(rng.randint(1, 3)):
            mutated[rng.randrange(len(mutated))] = rng.randrange(256)
        with contextlib.suppress(FormatError):
            parse(bytes(mutated))


@pytest.mark.flink
def test_data_files_are_what_flink_writes(flink_dist: Path, tmp_path: Path) -> None:
    subprocess.run(
        ["java", "-cp", str(flink_dist), str(ORACLES / "StateHeaders.java"), str(tmp_path)],
        check=True, capture_output=True,
    )  # fmt: skip
    for written in sorted(tmp_path.glob("*.bin")):
        assert written.read_bytes() == data(written.name), written.name
