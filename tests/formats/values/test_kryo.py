"""The Kryo codec (KryoSerializer of Flink 1.x with Kryo 2.24, 2.x with Kryo 5.6): golden values
Flink's own KryoSerializer wrote (tests/flink/kryo/KryoGolden.java → tests/fixtures/kryo), the
hand examples of flink-state-values.md §9.1, bad bytes, and the Kryo states of the real
savepoints in tests/fixtures/values. Each value decodes, gives the expected JSON and re-encodes
to the very same bytes. No JVM needed: the golden files are committed."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from statectl.errors import FormatError
from statectl.formats.java_io import DataReader
from statectl.formats.serializer_snapshots import (
    SerializerSnapshot,
    at_end,
    read_versioned_snapshot,
)
from statectl.formats.values import Context, Raw, RawCodec, Undecodable, codec_for
from statectl.formats.values import kryo as kryo_module
from statectl.formats.values.kryo import KRYO_SNAPSHOT, KryoCodec, KryoObject

FIXTURES = Path(__file__).parents[2] / "fixtures"
GOLDEN = {"1.20.3": 1, "2.3.0": 2}  # the Flink that wrote them → its major version
AVRO = (
    "org.apache.avro.generic.GenericData$Array",
    "org.apache.flink.api.java.typeutils.runtime.kryo.Serializers$DummyAvroKryoSerializerClass",
)


def golden(version: str) -> list[dict[str, Any]]:
    """The golden lines, each with the snapshot of its type (written on its first line)."""
    snapshots: dict[str, str] = {}
    lines = []
    with open(FIXTURES / "kryo" / f"{version}.jsonl", encoding="utf-8") as text:
        for line in text:
            case = json.loads(line)
            snapshots.setdefault(case["type"], case.get("snapshot", ""))
            lines.append({**case, "snapshot": snapshots[case["type"]]})
    return lines


CASES = [(v, case) for v in GOLDEN for case in golden(v)]


def golden_codec(version: str, snapshot_hex: str) -> KryoCodec:
    snapshot = read_versioned_snapshot(DataReader(bytes.fromhex(snapshot_hex)), at_end)
    codec = codec_for(snapshot, Context(GOLDEN[version]))
    assert isinstance(codec, KryoCodec), codec
    return codec


def kryo(type_name: str, flink_major: int | None, *registered: str) -> KryoCodec:
    """A codec for a KryoSerializerSnapshot of `type_name` as Flink builds its registrations."""
    registrations = ((type_name, None), *((name, None) for name in registered), AVRO)
    snapshot = SerializerSnapshot(
        KRYO_SNAPSHOT,
        2,
        type_name=type_name,
        params=(("registrations", registrations), ("default_serializers", ())),
    )
    codec = codec_for(snapshot, Context(flink_major))
    assert isinstance(codec, KryoCodec), codec
    return codec


def hexbytes(text: str) -> bytes:
    return bytes.fromhex(text.replace(" ", "").replace("|", ""))


def ascii_name(name: str) -> str:
    """A class name as Kryo's ASCII form writes it: bit 8 set on the last byte."""
    data = bytearray(name.encode("ascii"))
    data[-1] |= 0x80
    return data.hex()


def roundtrip(codec: KryoCodec, data: bytes) -> Any:
    """The value's JSON; asserts that it re-encodes to the same bytes."""
    value = codec.decode(data)
    assert codec.encode(value) == data
    return None if value is None else codec.to_json(value)


# --- golden values of Flink's KryoSerializer ------------------------------------------------------


@pytest.mark.parametrize(("version", "case"), CASES, ids=[f"{v}-{c['case']}" for v, c in CASES])
def test_golden_values_decode_and_reencode_exactly(version: str, case: dict[str, Any]) -> None:
    codec = golden_codec(version, case["snapshot"])
    data = bytes.fromhex(case["hex"])
    if case["raw"]:
        with pytest.raises(Undecodable, match=r"FieldSerializer of statectl\.kryo\.KryoGolden"):
            codec.decode(data)
        return
    assert roundtrip(codec, data) == case["json"]
    json.loads(codec.to_arrow(codec.decode(data)))  # the Arrow value is the JSON text


def test_golden_files_cover_both_kryo_versions_and_differ_where_kryo_did() -> None:
    by_case = {v: {c["case"]: c["hex"] for c in golden(v)} for v in GOLDEN}
    assert by_case["1.20.3"].keys() == by_case["2.3.0"].keys()
    same = {c for c in by_case["1.20.3"] if by_case["1.20.3"][c] == by_case["2.3.0"][c]}
    assert {"string", "int", "long", "null"} <= same
    assert not {"arraylist", "hashmap", "string-40", "uuid", "double", "char"} & same


def test_shared_objects_are_read_back_as_one_object() -> None:
    for version in GOLDEN:
        case = next(c for c in golden(version) if c["case"] == "shared-list")
        value = golden_codec(version, case["snapshot"]).decode(bytes.fromhex(case["hex"]))
        first, second = value.value
        assert first is second


# --- the examples of flink-state-values.md §9.1 ---------------------------------------------------


@pytest.mark.parametrize("flink_major", [1, 2, None])
def test_section_9_1_examples_common_to_both_kryos(flink_major: int | None) -> None:
    opaque = kryo("ex.Opaque", flink_major)
    assert roundtrip(opaque, hexbytes("00")) is None
    with pytest.raises(Undecodable, match=r"FieldSerializer of ex\.Opaque"):
        opaque.decode(hexbytes("57 01 | 01 82 73 | 02"))
    anything = kryo("java.lang.Object", flink_major)
    assert roundtrip(anything, hexbytes("03 01 68 65 6C 6C EF")) == "hello"
    assert roundtrip(anything, hexbytes("09 0A")) == 5
    assert roundtrip(anything, hexbytes("02 0A")) == 5
    by_name = "01 00" + ascii_name("ex.Opaque") + "01 01 82 73 02"
    with pytest.raises(Undecodable, match=r"FieldSerializer of ex\.Opaque"):
        anything.decode(hexbytes(by_name))


def test_section_9_1_collections_differ_between_kryo_2_and_5() -> None:
    array_list, hash_map = ascii_name("java.util.ArrayList"), ascii_name("java.util.HashMap")
    kryo2, kryo5 = kryo("java.lang.Object", 1), kryo("java.lang.Object", 2)
    assert roundtrip(kryo2, hexbytes(f"01 00 {array_list} 01 02 | 03 01 82 61 | 02 02")) == ["a", 1]
    assert roundtrip(kryo5, hexbytes(f"01 00 {array_list} 01 03 | 03 01 82 61 | 02 02")) == ["a", 1]
    assert roundtrip(kryo2, hexbytes(f"01 00 {hash_map} 01 01 | 03 01 82 6B | 03 01 82 76")) == {
        "k": "v"
    }
    assert roundtrip(kryo5, hexbytes(f"01 00 {hash_map} 01 02 | 03 01 82 6B | 03 01 82 76")) == {
        "k": "v"
    }
    assert roundtrip(kryo("java.util.ArrayList", 1), hexbytes("57 01 01 | 03 01 82 79")) == ["y"]
    assert roundtrip(kryo("java.util.ArrayList", 2), hexbytes("57 01 82 03 00 01 82 79")) == ["y"]


def test_registrations_take_ids_from_85_unless_kryo_has_the_class() -> None:
    codec = kryo("ex.Opaque", 2, "java.util.UUID", "ex.Address")
    assert codec.registry.by_id[85] == "ex.Opaque"
    assert codec.registry.ids["java.util.UUID"] == 82
    assert codec.registry.by_id[86] == "ex.Address"
    assert codec.registry.by_id[87] == AVRO[0]
    with pytest.raises(Undecodable, match="DummyAvroKryoSerializerClass"):
        codec.decode(hexbytes("59 01"))
    uuid_bytes = "54 01" + "00" * 16
    assert roundtrip(codec, hexbytes(uuid_bytes)) == "00000000-0000-0000-0000-000000000000"


def test_unknown_flink_version_reads_kryo_5() -> None:
    assert kryo("java.lang.Object", None).dialect.kryo == 5
    assert kryo("java.lang.Object", 1).dialect.kryo == 2


def test_a_default_serializer_for_a_jdk_class_keeps_values_raw() -> None:
    snapshot = SerializerSnapshot(
        KRYO_SNAPSHOT,
        2,
        type_name="java.util.ArrayList",
        params=(("registrations", ()), ("default_serializers", ("java.util.Collection",))),
    )
    codec = codec_for(snapshot, Context(2))
    assert isinstance(codec, RawCodec) and "java.util.Collection" in codec.reason


def test_description_and_arrow_type() -> None:
    codec = kryo("java.util.HashMap", 2)
    assert codec.describe() == "KRYO(java.util.HashMap)"
    assert codec.tree() == {"type": "KRYO", "class": "java.util.HashMap", "kryo": 5}
    assert str(codec.arrow_type()) == "extension<arrow.json>"
    value = codec.decode(hexbytes("57 01 02 | 03 01 82 6B | 02 02"))
    assert codec.to_arrow(value) == '{"k":1}'


# --- writing ----------------------------------------------------------------------------------------


def test_values_kryo_cannot_write_are_refused_from_write() -> None:
    codec = kryo("java.lang.Object", 2)
    for bad in ("text", KryoObject("com.acme.Thing", {}), KryoObject("java.lang.Integer", 1 << 40)):
        out = bytearray(b"x")
        with pytest.raises(Undecodable):
            codec.write(bad, out)
        assert out == b"x"  # nothing half-written
    raw = Raw(b"\x57\x01", "ex.Opaque", "FieldSerializer")
    assert codec.encode(raw) == b"\x57\x01"


def test_written_values_read_back() -> None:
    value = KryoObject(
        "java.util.ArrayList",
        [KryoObject("java.lang.String", "é" * 70), None, KryoObject("java.lang.Long", -(1 << 63))],
    )
    for flink_major in (1, 2):
        codec = kryo("java.lang.Object", flink_major)
        assert codec.decode(codec.encode(value)) == value


# --- bad bytes ----------------------------------------------------------------------------------------

NON_CANONICAL = [
    ("02 8A 00", "shortest form"),  # int 5 in two bytes
    ("03 01 83 61 62", "ASCII string in the long form"),  # "ab" with a length
    ("03 01 C2 00 61", "shortest form"),  # a length of 2 in two bytes
    ("03 01 61", "cut short"),
    ("01", "cut short"),
    ("01 05", "out of order"),  # a new class name must take the next name id
    ("01 00 " + ascii_name("java.lang.String") + " 01 82 61", "written by name"),
    ("07 FF", "do not fit"),
    ("FF 7F", "not registered"),
    ("5B 01", "class id 89 is not registered"),  # past the Avro entry at 86
]


@pytest.mark.parametrize(("hexdata", "reason"), NON_CANONICAL)
def test_bytes_kryo_never_writes_are_format_errors(hexdata: str, reason: str) -> None:
    codec = kryo("java.lang.Object", 2)
    with pytest.raises(FormatError, match=reason):
        codec.decode(hexbytes(hexdata))


def test_lengths_beyond_the_bytes_and_deep_nesting_are_errors() -> None:
    array_list = "01 00" + ascii_name("java.util.ArrayList")
    kryo2 = kryo("java.lang.Object", 1)
    with pytest.raises(FormatError, match="does not fit"):
        kryo2.decode(hexbytes(array_list + "01 FF FF FF FF 07"))
    nested = hexbytes(array_list + "01 01" + "01 00 01 01" * 100 + "00")
    with pytest.raises(FormatError, match="nested more than"):
        kryo2.decode(nested)


def test_cycles_and_exploding_back_references_are_refused() -> None:
    array_list = "01 00" + ascii_name("java.util.ArrayList")
    kryo2 = kryo("java.lang.Object", 1)
    with pytest.raises(Undecodable, match="cycle"):
        kryo2.decode(hexbytes(array_list + "01 01 | 01 00 02"))  # a list holding itself
    with pytest.raises(FormatError, match="too many objects"):
        kryo2.decode(hexbytes(_doubling_lists(40)))


def _doubling_lists(levels: int) -> str:
    """Kryo 2 bytes of list k holding list k+1 twice (the second time by reference): 2^levels
    strings from a few hundred bytes."""
    parts = ["01 00", ascii_name("java.util.ArrayList"), "01 02"]
    parts += ["01 00 01 02"] * (levels - 1)  # class name id 0 again, a new list of two
    parts.append("03 01 82 61 03 01 82 62")  # the innermost list: "a", "b"
    parts += [f"01 00 {ref + 2:02x}" for ref in range(levels - 1, 0, -1)]  # each list again
    return " ".join(parts)


def test_random_mutations_never_crash_or_hang() -> None:
    rng = random.Random(7)
    for version, case in CASES:
        codec = golden_codec(version, case["snapshot"])
        data = bytes.fromhex(case["hex"])
        for cut in range(len(data)):
            _decode_or_refuse(codec, data[:cut])
        for _ in range(20):
            mutated = bytearray(data)
            mutated[rng.randrange(len(mutated))] = rng.randrange(256)
            _decode_or_refuse(codec, bytes(mutated))


def _decode_or_refuse(codec: KryoCodec, data: bytes) -> None:
    try:
        value = codec.decode(data)
    except FormatError:  # Undecodable is one
        return
    assert codec.encode(value) == data  # what decodes is what Kryo writes


# --- the real savepoints ---------------------------------------------------------------------------

KRYO_STATES = {"kryo-arraylist", "kryo-hashmap", "kryo-object", "kryo-custom"}
POJO_STATES = {"pojo", "pojo-list", "pojo-map", "op-list", "op-broadcast"}  # Kryo fields in 1.x
SAVEPOINTS = sorted(
    p.name for p in (FIXTURES / "values").iterdir() if (p / "truth.jsonl").is_file()
)


def _entry(state: str, operator: bool, subtask: int, key: Any, user_key: Any) -> tuple[Any, ...]:
    return (state, subtask if operator else None, _text(key), _text(user_key))


def _text(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


@pytest.mark.parametrize("fixture", SAVEPOINTS)
def test_kryo_states_of_real_savepoints(fixture: str, tmp_path: Path) -> None:
    """Every value of the Kryo states (and, in 1.x, of the POJOs with Kryo List/Map/Set fields)
    gives what Flink read; a Kryo state's bytes re-encode exactly; only the user class is raw."""
    import pyarrow.parquet as pq

    from statectl.operations.export import export
    from statectl.savepoint.reader import open_savepoint

    states = KRYO_STATES | POJO_STATES
    truth: dict[tuple[Any, ...], list[str]] = {}
    with open(FIXTURES / "values" / fixture / "truth.jsonl", encoding="utf-8") as lines:
        for line in map(json.loads, lines):
            if line["state"] in states:
                operator = "key_group" not in line and line["kind"] in ("LIST", "UNION")
                entry = _entry(
                    line["state"],
                    operator,
                    line.get("subtask"),
                    line.get("key"),
                    line.get("user_key"),
                )
                values = truth.setdefault(entry, [])
                # Every subtask holds a copy of a broadcast state; its entries count once
                # (docs/counts.md), as Flink's readBroadcastState reads one copy.
                if line["kind"] != "BROADCAST" or _text(line.get("value")) not in values:
                    values.append(_text(line.get("value")))
    export(
        open_savepoint(str(FIXTURES / "values" / fixture / "savepoint")),
        str(tmp_path / "x.parquet"),
    )
    ours: dict[tuple[Any, ...], list[str]] = {}
    flink_major = 1 if fixture.startswith("1.") else 2
    for row in pq.read_table(tmp_path / "x.parquet").to_pylist():
        if row["state"] not in states:
            continue
        if row["raw_reason"]:
            assert row["state"] == "kryo-custom", row["raw_reason"]
            assert "FieldSerializer of statectl.values.Model$Opaque" in row["raw_reason"]
            continue
        operator = row["scope"] == "operator" and row["kind"] != "BROADCAST"
        key = None if row["key_json"] is None else json.loads(row["key_json"])
        user_key = None if row["user_key_json"] is None else json.loads(row["user_key_json"])
        entry = _entry(row["state"], operator, row["subtask"], key, user_key)
        ours.setdefault(entry, []).append(_text(json.loads(row["value_json"])))
        if row["state"] in KRYO_STATES:
            assert roundtrip(kryo(row["value_type"], flink_major), row["value"]) is not None
    custom = {k for k in truth if k[0] == "kryo-custom"}
    assert {k: sorted(v) for k, v in ours.items()} == {
        k: sorted(v) for k, v in truth.items() if k not in custom
    }


def _kryo_string(text: str, ascii_limit: int) -> bytes:
    """`Output.writeString` as Kryo's source has it: ASCII of 2 to `ascii_limit` chars with bit
    8 on the last byte, else a flagged varint of chars + 1 and each UTF-16 unit in 1-3 bytes."""
    units = text.encode("utf-16-le", "surrogatepass")
    chars = [units[i] | units[i + 1] << 8 for i in range(0, len(units), 2)]
    if text.isascii() and 2 <= len(chars) <= ascii_limit:
        return text[:-1].encode() + bytes([ord(text[-1]) | 0x80])
    length, out = len(chars) + 1, bytearray()
    out.append(0x80 | length & 0x3F | (0x40 if length >> 6 else 0))
    rest = length >> 6
    while rest:
        out.append(rest & 0x7F | (0x80 if rest >> 7 else 0))
        rest >>= 7
    for c in chars:
        if c < 0x80:
            out.append(c)
        elif c < 0x800:
            out += bytes((0xC0 | c >> 6, 0x80 | c & 0x3F))
        else:
            out += bytes((0xE0 | c >> 12, 0x80 | c >> 6 & 0x3F, 0x80 | c & 0x3F))
    return bytes(out)


@pytest.mark.parametrize("dialect", [kryo_module.KRYO2, kryo_module.KRYO5])
def test_strings_take_the_form_kryo_writes_them_in_and_read_back(
    dialect: kryo_module.Dialect,
) -> None:
    limit = dialect.ascii_limit
    texts = ["", "a", "ab", "x" * limit, "x" * (limit + 1), "y" * 200, "é", "aé", "日本", "a😀"]
    registry = kryo_module.build_registry((), dialect)
    for text in texts:
        writer = kryo_module.Writer(bytearray(), dialect, registry)
        writer.string(text)
        assert bytes(writer.out) == _kryo_string(text, limit), text
        reader = kryo_module.Reader(memoryview(bytes(writer.out)), 0, dialect, registry)
        assert reader.string() == text
        assert reader.pos == len(writer.out)
