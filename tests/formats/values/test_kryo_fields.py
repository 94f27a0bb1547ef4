"""Kryo's FieldSerializer of the user's own classes, read from the job's class files (issue 26).

The oracle: the values job's `kryo-custom` state (GenericTypeInfo<Model.Opaque>: no default
constructor, a String, a Long and an int[] field) in the committed savepoints of Flink 1.15,
1.20 (Kryo 2.24), 2.0 and 2.3 (Kryo 5.6), and truth.jsonl, what Flink's own Kryo read. With a
ClassPath over the job's classes every value decodes to Flink's JSON, re-encodes to the very
bytes, and the 1.x values encoded by Kryo 5 are the 2.x savepoints' bytes. Then Flink's golden
KryoGolden$Opaque values (tests/fixtures/kryo) with its class file built here, and the layout
rules (order, superclasses, primitives, class tags, enums, refusals) on built class files.
No JVM: the values job's classes come from the compile cache (javac only when it is empty).
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from statectl.errors import FormatError
from statectl.formats.class_files import (
    ACC_ENUM,
    ACC_FINAL,
    ACC_PUBLIC,
    ACC_STATIC,
    ACC_SUPER,
    ACC_SYNTHETIC,
    ACC_TRANSIENT,
)
from statectl.formats.serializer_snapshots import SerializerSnapshot
from statectl.formats.values import Context, RawCodec, Undecodable, codec_for
from statectl.formats.values.kryo import KRYO_SNAPSHOT, KryoCodec, KryoObject
from statectl.formats.values.kryo_fields import MAX_SUPERCLASSES
from statectl.savepoint.classpath import ClassPath
from tests.formats.test_class_files import (
    NEEDS_JAVAC,
    class_bytes,
    field,
    values_classes,
    write_jar,
)
from tests.formats.values.test_kryo import AVRO, golden, golden_codec, hexbytes

FIXTURES = Path(__file__).parents[2] / "fixtures"
VALUES = FIXTURES / "values"
OPERATOR = "8918828246c22e7d25902f74d971b709"
STATE = "kryo-custom"
OPAQUE = "statectl.values.Model$Opaque"
SAVEPOINTS = sorted(p.name for p in VALUES.iterdir() if (p / "truth.jsonl").is_file())
OLD = [name for name in SAVEPOINTS if name.startswith("1.")]
NEW_VERSIONS = ("2.0.1", "2.3.0")


def major(fixture: str) -> int:
    return 1 if fixture.startswith("1.") else 2


@cache
def custom_state(fixture: str) -> tuple[SerializerSnapshot, dict[str, bytes]]:
    """The `kryo-custom` state's value serializer snapshot and its value bytes by key."""
    import tempfile

    import pyarrow.parquet as pq

    from statectl.operations.export import export
    from statectl.savepoint.entries import keyed_files
    from statectl.savepoint.reader import open_savepoint

    savepoint = open_savepoint(str(VALUES / fixture / "savepoint"))
    (operator,) = [o for o in savepoint.metadata.operators if o.operator_id_hex == OPERATOR]
    (meta,) = [s for s in keyed_files(savepoint, operator)[0].header().states if s.name == STATE]
    assert meta.value_serializer is not None
    with tempfile.TemporaryDirectory() as tmp:
        export(savepoint, f"{tmp}/x.parquet")
        rows = pq.read_table(f"{tmp}/x.parquet").to_pylist()
    values = {json.loads(r["key_json"]): r["value"] for r in rows if r["state"] == STATE}
    return meta.value_serializer, values


def truth(fixture: str) -> dict[str, Any]:
    with open(VALUES / fixture / "truth.jsonl", encoding="utf-8") as lines:
        return {
            line["key"]: line["value"]
            for line in map(json.loads, lines)
            if line["state"] == STATE and line["operator_id"] == OPERATOR
        }


@pytest.fixture(scope="module")
def job_classpath() -> Any:
    with ClassPath([values_classes()]) as path:
        yield path


def job_codec(fixture: str, classpath: ClassPath | None) -> KryoCodec:
    snapshot, _ = custom_state(fixture)
    codec = codec_for(snapshot, Context(major(fixture), classpath=classpath))
    assert isinstance(codec, KryoCodec), codec
    return codec


# --- the oracle: the values job's savepoints -----------------------------------------------------


@pytest.mark.parametrize("fixture", [pytest.param(f, marks=NEEDS_JAVAC) for f in SAVEPOINTS])
def test_every_value_decodes_to_what_flink_read_and_reencodes_exactly(
    fixture: str, job_classpath: ClassPath
) -> None:
    _, values = custom_state(fixture)
    expected = truth(fixture)
    assert len(values) == len(expected) == 16
    codec = job_codec(fixture, job_classpath)
    for key, data in values.items():
        value = codec.decode(data)
        assert isinstance(value, KryoObject) and value.java_class == OPAQUE
        assert set(value.value) == {"amount", "codes", "label"}
        assert codec.to_json(value) == expected[key], key
        assert json.loads(codec.to_arrow(value)) == expected[key]
        assert codec.encode(value) == data


@pytest.mark.parametrize(
    ("old", "new"),
    [pytest.param(o, n, marks=NEEDS_JAVAC) for o in OLD for n in NEW_VERSIONS],
)
def test_kryo_2_values_written_by_kryo_5_are_what_flink_2_wrote(
    old: str, new: str, job_classpath: ClassPath
) -> None:
    """Decoded from a 1.x savepoint, encoded by the 2.x codec: the 2.x savepoint's bytes."""
    new_fixture = f"{new}-{old.split('-', 1)[1]}"
    reader = job_codec(old, job_classpath)
    writer = job_codec(new_fixture, job_classpath)
    assert (reader.dialect.kryo, writer.dialect.kryo) == (2, 5)
    _, old_values = custom_state(old)
    _, new_values = custom_state(new_fixture)
    assert old_values.keys() == new_values.keys()
    for key, data in old_values.items():
        assert writer.encode(reader.decode(data)) == new_values[key], key


@pytest.mark.parametrize("fixture", SAVEPOINTS)
def test_without_a_class_path_the_values_stay_undecodable(fixture: str) -> None:
    snapshot, values = custom_state(fixture)
    codec = codec_for(snapshot, Context(major(fixture)))
    assert isinstance(codec, KryoCodec)
    with pytest.raises(Undecodable, match=r"FieldSerializer of statectl\.values\.Model\$Opaque: its fields are not in the savepoint"):  # fmt: skip
        codec.decode(next(iter(values.values())))


def test_a_class_path_without_the_class_says_so(tmp_path: Path) -> None:
    snapshot, values = custom_state("2.3.0-hashmap-canonical")
    with ClassPath([write_jar(tmp_path / "other.jar", {})]) as path:
        codec = codec_for(snapshot, Context(2, classpath=path))
        assert isinstance(codec, KryoCodec)
        with pytest.raises(Undecodable, match=r"Model\$Opaque: it is not on the class path"):
            codec.decode(next(iter(values.values())))


# --- Flink's golden values of a user class, its class file built here ---------------------------

GOLDEN_OPAQUE = "statectl.kryo.KryoGolden$Opaque"  # public String s = "s"; public int v = 1


@pytest.fixture(scope="module")
def golden_classpath(tmp_path_factory: pytest.TempPathFactory) -> Any:
    data = class_bytes(GOLDEN_OPAQUE, fields=[field("s", "Ljava/lang/String;", ACC_PUBLIC), field("v", "I", ACC_PUBLIC)])  # fmt: skip
    jar = write_jar(tmp_path_factory.mktemp("golden") / "golden.jar", {GOLDEN_OPAQUE: data})
    with ClassPath([jar]) as path:
        yield path


USER_CASES = ("user-class", "list-of-user-class", "declared-user-class")


def golden_user_cases(version: str) -> dict[str, dict[str, Any]]:
    return {c["case"]: c for c in golden(version) if c["case"] in USER_CASES}


def with_classes(codec: KryoCodec, classpath: ClassPath, snapshot: str) -> KryoCodec:
    """The golden case's codec again, now with the class path."""
    from statectl.formats.java_io import DataReader
    from statectl.formats.serializer_snapshots import at_end, read_versioned_snapshot

    parsed = read_versioned_snapshot(DataReader(bytes.fromhex(snapshot)), at_end)
    made = codec_for(parsed, Context(1 if codec.dialect.kryo == 2 else 2, classpath=classpath))
    assert isinstance(made, KryoCodec)
    return made


@pytest.mark.parametrize("version", ["1.20.3", "2.3.0"])
def test_golden_user_class_values_decode_and_reencode(
    version: str, golden_classpath: ClassPath
) -> None:
    cases = golden_user_cases(version)
    assert set(cases) == set(USER_CASES)
    for name, case in cases.items():
        plain = golden_codec(version, case["snapshot"])
        with pytest.raises(Undecodable):
            plain.decode(bytes.fromhex(case["hex"]))
        codec = with_classes(plain, golden_classpath, case["snapshot"])
        value = codec.decode(bytes.fromhex(case["hex"]))
        expected = [{"s": "s", "v": 1}] if name == "list-of-user-class" else {"s": "s", "v": 1}
        assert codec.to_json(value) == expected, name
        assert codec.encode(value) == bytes.fromhex(case["hex"]), name


def test_golden_kryo_2_user_values_in_kryo_5_are_flink_2_bytes(golden_classpath: ClassPath) -> None:
    old, new = golden_user_cases("1.20.3"), golden_user_cases("2.3.0")
    for name in USER_CASES:
        reader = with_classes(golden_codec("1.20.3", old[name]["snapshot"]), golden_classpath, old[name]["snapshot"])  # fmt: skip
        writer = with_classes(golden_codec("2.3.0", new[name]["snapshot"]), golden_classpath, new[name]["snapshot"])  # fmt: skip
        assert (
            writer.encode(reader.decode(bytes.fromhex(old[name]["hex"]))).hex() == new[name]["hex"]
        )


# --- the layout rules, on built class files ------------------------------------------------------


def kryo_codec(type_name: str, kryo: int, classes: dict[str, bytes], tmp_path: Path) -> KryoCodec:
    registrations = ((type_name, None), AVRO)
    snapshot = SerializerSnapshot(
        KRYO_SNAPSHOT,
        2,
        type_name=type_name,
        params=(("registrations", registrations), ("default_serializers", ())),
    )
    path = ClassPath([write_jar(tmp_path / f"job{len(classes)}-{kryo}.jar", classes)])
    codec = codec_for(snapshot, Context(1 if kryo == 2 else 2, classpath=path))
    assert isinstance(codec, KryoCodec), codec
    return codec


def ascii_bytes(text: str) -> bytes:
    data = bytearray(text.encode("ascii"))
    data[-1] |= 0x80
    return bytes(data)


def test_fields_of_superclasses_sorted_by_name_without_static_transient_synthetic(
    tmp_path: Path,
) -> None:
    classes = {
        "p.Base": class_bytes("p.Base", fields=[field("b", "I"), field("z", "Ljava/lang/String;")]),
        "p.Child": class_bytes(
            "p.Child",
            "p.Base",
            [
                field("a", "J"),
                field("B", "Z"),
                field("t", "I", ACC_TRANSIENT),
                field("S", "I", ACC_STATIC),
                field("this$0", "Lp/Base;", ACC_FINAL | ACC_SYNTHETIC),
            ],
        ),
    }
    for kryo in (2, 5):
        codec = kryo_codec("p.Child", kryo, classes, tmp_path)
        value = KryoObject(
            "p.Child", {"B": True, "a": -2, "b": 3, "z": KryoObject("java.lang.String", "zz")}
        )
        # "B" < "a" < "b" < "z" (String.compareTo), the base class's fields among them
        data = hexbytes("57 01 | 01 | 03 | 06 | 01") + ascii_bytes("zz")
        assert codec.encode(value) == data
        assert codec.decode(data) == value
        assert codec.to_json(value) == {"B": True, "a": -2, "b": 3, "z": "zz"}


def test_primitive_fields_in_each_kryo(tmp_path: Path) -> None:
    fields = [
        field("a", "B"),
        field("b", "C"),
        field("c", "D"),
        field("d", "F"),
        field("e", "I"),
        field("f", "J"),
        field("g", "S"),
        field("h", "Z"),
    ]
    classes = {"p.P": class_bytes("p.P", fields=fields)}
    value = KryoObject("p.P", {"a": -1, "b": "\u00e9", "c": 0.5, "d": float("nan"), "e": -3, "f": 1 << 40, "g": -2, "h": False})  # fmt: skip
    big = hexbytes("57 01 | ff | 00 e9 | 3f e0 00 00 00 00 00 00 | 7f c0 00 00 | 05 | 80 80 80 80 80 40 | ff fe | 00")  # fmt: skip
    little = hexbytes("57 01 | ff | e9 00 | 00 00 00 00 00 00 e0 3f | 00 00 c0 7f | 05 | 80 80 80 80 80 40 | fe ff | 00")  # fmt: skip
    for kryo, data in ((2, big), (5, little)):
        codec = kryo_codec("p.P", kryo, classes, tmp_path)
        assert codec.encode(value) == data
        decoded = codec.decode(data)
        assert codec.encode(decoded) == data
        assert codec.to_json(decoded)["d"] == "NaN" and codec.to_json(decoded)["b"] == "\u00e9"


def test_final_types_without_and_open_types_with_a_class_tag(tmp_path: Path) -> None:
    """A final field type: reference marker or null flag, then the object; an open one (a
    non-final class, Object, an interface): a class tag, then the object."""
    classes = {
        "p.Leaf": class_bytes(
            "p.Leaf", fields=[field("n", "I")], access=ACC_PUBLIC | ACC_SUPER | ACC_FINAL
        ),
        "p.Open": class_bytes("p.Open", fields=[field("n", "I")]),
        "p.Root": class_bytes(
            "p.Root",
            fields=[
                field("a", "Lp/Leaf;"),
                field("b", "Lp/Open;"),
                field("c", "Ljava/lang/Object;"),
                field("d", "Ljava/lang/Integer;"),
                field("e", "[Lp/Leaf;"),
                field("f", "Ljava/util/List;", signature="Ljava/util/List<Ljava/lang/Object;>;"),
                field("g", "Lp/Leaf;"),
            ],
        ),
    }
    leaf = KryoObject("p.Leaf", {"n": 1})
    value = KryoObject(
        "p.Root",
        {
            "a": leaf,
            "b": KryoObject("p.Open", {"n": 2}),
            "c": KryoObject("java.lang.Integer", 3),
            "d": None,
            "e": KryoObject("[Lp.Leaf;", [leaf, None]),
            "f": None,
            "g": leaf,
        },
    )
    data = b"".join(
        (
            hexbytes("57 01"),  # p.Root (id 85), a new object (0)
            hexbytes("01 02"),  # a: final p.Leaf: a new object (1), n = 1
            hexbytes("01 00")
            + ascii_bytes("p.Open")
            + hexbytes("01 04"),  # b: tag, name, new, n = 2
            hexbytes("02 06"),  # c: Integer (id 0), no reference marker, 3
            hexbytes("00"),  # d: final Integer, null
            # e: `[Lp.Leaf;` is final (its element class is): a new object, length + 1, each
            # element by p.Leaf's serializer: a back-reference to object 1, null
            hexbytes("01 03 03 00"),
            hexbytes("00"),  # f: null, class tag 0
            hexbytes("03"),  # g: the same p.Leaf: a back-reference to object 1
        )
    )
    for kryo in (2, 5):
        codec = kryo_codec("p.Root", kryo, classes, tmp_path)
        assert codec.encode(value).hex() == data.hex()
        decoded = codec.decode(data)
        assert decoded.value["a"] is decoded.value["g"]  # one object, read back as one
        assert codec.encode(decoded) == data
        assert codec.to_json(decoded) == {"a": {"n": 1}, "b": {"n": 2}, "c": 3, "d": None, "e": [{"n": 1}, None], "f": None, "g": {"n": 1}}  # fmt: skip


def test_user_enums_by_ordinal(tmp_path: Path) -> None:
    enum_flags = ACC_PUBLIC | ACC_STATIC | ACC_FINAL | ACC_ENUM
    classes = {
        "p.Color": class_bytes(
            "p.Color",
            "java.lang.Enum",
            [
                field("RED", "Lp/Color;", enum_flags),
                field("BLUE", "Lp/Color;", enum_flags),
                field("$VALUES", "[Lp/Color;", ACC_STATIC | ACC_FINAL | ACC_SYNTHETIC),
            ],
            access=ACC_PUBLIC | ACC_FINAL | ACC_SUPER | ACC_ENUM,
        ),
        "p.Car": class_bytes("p.Car", fields=[field("color", "Lp/Color;")]),
    }
    value = KryoObject("p.Car", {"color": KryoObject("p.Color", "BLUE")})
    # Kryo 2 gives an enum a reference marker, Kryo 5 a null flag (`useReferences`)
    for kryo, data in ((2, "57 01 01 02"), (5, "57 01 01 02")):
        codec = kryo_codec("p.Car", kryo, classes, tmp_path)
        assert codec.encode(value) == hexbytes(data)
        assert codec.to_json(codec.decode(hexbytes(data))) == {"color": "BLUE"}
    shared = KryoObject("p.Color", "RED")
    twice = KryoObject("[Lp.Color;", [shared, shared])
    assert kryo_codec("[Lp.Color;", 2, classes, tmp_path).encode(twice) == hexbytes(
        "57 01 03 01 01 03"
    )
    assert kryo_codec("[Lp.Color;", 5, classes, tmp_path).encode(twice) == hexbytes(
        "57 01 03 01 01 01 01"
    )


@pytest.mark.parametrize(
    ("classes", "reason"),
    [
        (
            {"p.X": class_bytes("p.X", "java.util.AbstractList")},
            r"superclass java\.util\.AbstractList is not on the class path",
        ),
        ({"p.X": class_bytes("p.X", interfaces=["java.util.Map"])}, r"implements java\.util\.Map"),
        (
            {
                "p.X": class_bytes("p.X", interfaces=["p.Bag"]),
                "p.Bag": class_bytes(
                    "p.Bag", None, interfaces=["java.util.Collection"], access=0x0601
                ),
            },
            r"implements java\.util\.Collection",
        ),
        (
            {
                "p.X": class_bytes(
                    "p.X", annotations=["Lcom/esotericsoftware/kryo/DefaultSerializer;"]
                )
            },
            "Kryo annotation",
        ),
        (
            {
                "p.X": class_bytes(
                    "p.X",
                    fields=[
                        field(
                            "a",
                            "I",
                            annotations=(
                                "Lcom/esotericsoftware/kryo/serializers/FieldSerializer$Bind;",
                            ),
                        )
                    ],
                )
            },
            "Kryo annotation",
        ),
        (
            {
                "p.X": class_bytes(
                    "p.X",
                    fields=[field("a", "Ljava/util/List;", signature="Ljava/util/List<TT;>;")],
                )
            },
            "generic type .*: a type variable",
        ),
        (
            {
                "p.X": class_bytes(
                    "p.X",
                    fields=[
                        field(
                            "a",
                            "Ljava/util/List;",
                            signature="Ljava/util/List<[Ljava/util/List<Ljava/lang/String;>;>;",
                        )
                    ],
                )
            },
            "an array of a parameterized type",
        ),
        (
            {
                "p.X": class_bytes(
                    "p.X",
                    fields=[
                        field(
                            "a",
                            "Ljava/util/List;",
                            signature="Ljava/util/List<Ljava/time/Instant;>;",
                        )
                    ],
                )
            },
            r"whether java\.time\.Instant is final is not known",
        ),
        (
            {"p.X": class_bytes("p.X", fields=[field("a", "Ljava/lang/Object;", signature="TT;")])},
            "generic type",
        ),
        (
            {
                "p.X": class_bytes("p.X", "p.Y", [field("a", "I")]),
                "p.Y": class_bytes("p.Y", fields=[field("a", "J")]),
            },
            "two fields named a",
        ),
        (
            {"p.X": class_bytes("p.X", fields=[field("a", "Ljava/time/Instant;")])},
            r"java\.time\.Instant: whether the class is final is not known",
        ),
        (
            {"p.X": class_bytes("p.X", fields=[field("a", "Lp/Missing;")])},
            r"p\.Missing: whether the class is final",
        ),
    ],
)
def test_what_kryo_would_not_write_with_field_serializer_is_refused(
    classes: dict[str, bytes], reason: str, tmp_path: Path
) -> None:
    codec = kryo_codec("p.X", 5, classes, tmp_path)
    with pytest.raises(Undecodable, match=reason):
        codec.decode(hexbytes("57 01"))
    with pytest.raises(Undecodable, match=reason):
        codec.encode(KryoObject("p.X", {}))


def test_values_not_matching_the_class_are_refused_and_bad_bytes_are_format_errors(
    tmp_path: Path,
) -> None:
    classes = {
        "p.X": class_bytes("p.X", fields=[field("a", "I"), field("s", "Ljava/lang/String;")])
    }
    codec = kryo_codec("p.X", 5, classes, tmp_path)
    for bad in ({"a": 1}, {"a": 1, "s": None, "t": 2}, [1, None]):
        with pytest.raises(Undecodable):
            codec.encode(KryoObject("p.X", bad))
    with pytest.raises(Undecodable):
        codec.encode(KryoObject("p.X", {"a": 1 << 40, "s": None}))
    codec.encode(KryoObject("p.X", {"a": 1, "s": None}))
    for data in ("57 01 02", "57 01 02 05", "57 01 02 01"):  # cut short, a bad marker, cut string
        with pytest.raises(FormatError):
            codec.decode(hexbytes(data))


def test_a_class_path_reaches_nested_snapshots(tmp_path: Path) -> None:
    """`Context.codec` hands the class path to nested serializers (a Tuple's Kryo field)."""
    classes = {"p.X": class_bytes("p.X", fields=[field("a", "I")])}
    path = ClassPath([write_jar(tmp_path / "n.jar", classes)])
    context = Context(2, classpath=path)
    assert context.classpath is path
    kryo = SerializerSnapshot(KRYO_SNAPSHOT, 2, type_name="p.X", params=(("registrations", (("p.X", None), AVRO)), ("default_serializers", ())))  # fmt: skip
    nested = context.codec(kryo)
    assert isinstance(nested, KryoCodec) and nested.decode(hexbytes("57 01 04")).value == {"a": 2}
    assert not isinstance(codec_for(kryo, Context(2)), RawCodec)


# --- fields of generic types: their type arguments reach the collection serializers --------------

GENERIC_FIELDS = [
    field("a", "Ljava/util/List;", signature="Ljava/util/List<Ljava/lang/String;>;"),
    field("b", "Ljava/util/Map;", signature="Ljava/util/Map<Ljava/lang/String;Ljava/lang/Long;>;"),
    field(
        "c",
        "Ljava/util/Map;",
        signature="Ljava/util/Map<Ljava/lang/String;Ljava/util/List<Ljava/lang/Integer;>;>;",
    ),
]


def test_generic_fields_write_final_elements_without_class_tags(tmp_path: Path) -> None:
    """`List<String>`, `Map<String, Long>`, `Map<String, List<Integer>>`: elements, keys and
    values of a final type argument by its serializer (reference marker or null flag, no class
    tag) in both Kryo; Kryo 5 writes the list's has-null flag where the same-type flag was, and
    also hands `Integer` down to the nested list (2.24 passes the first level only)."""
    classes = {"p.G": class_bytes("p.G", fields=GENERIC_FIELDS)}
    x = KryoObject("java.lang.String", "x")

    def string(text: str) -> KryoObject:
        return KryoObject("java.lang.String", text)

    value = KryoObject(
        "p.G",
        {
            "a": KryoObject("java.util.ArrayList", [x, None, x]),
            "b": KryoObject(
                "java.util.HashMap",
                [(string("k"), KryoObject("java.lang.Long", 5)), (string("n"), None)],
            ),
            "c": KryoObject(
                "java.util.HashMap",
                [
                    (
                        string("g"),
                        KryoObject("java.util.ArrayList", [KryoObject("java.lang.Integer", 1)]),
                    )
                ],
            ),
        },
    )
    array_list = hexbytes("01 00") + ascii_bytes("java.util.ArrayList")
    hash_map = hexbytes("01 01") + ascii_bytes("java.util.HashMap")
    kryo_2 = b"".join(
        (
            hexbytes("57 01"),  # p.G (id 85), a new object (0)
            # a: ArrayList (tag), new (1), 3 elements by String's serializer: new (2) "x",
            # null, a back-reference to object 2
            array_list + hexbytes("01 | 03 | 01 82 78 | 00 | 04"),
            # b: HashMap (tag), new (3), 2 entries: key "k" new (4), Long 5 behind its null
            # flag; key "n" new (5), null
            hash_map + hexbytes("01 | 02 | 01 82 6b 01 0a | 01 82 6e 00"),
            # c: HashMap (its name again), new (6), 1 entry: "g" new (7), the value a List
            # (not final: tagged), new (8), its Integer element tagged (id 0)
            hexbytes("01 01 | 01 | 01 | 01 82 67 | 01 00 01 | 01 | 02 02"),
        )
    )
    kryo_5 = b"".join(
        (
            hexbytes("57 01"),
            # a: length + 1 = 4 flagged "has a null" (not "one class"), no element class tag
            array_list + hexbytes("01 | 84 | 01 82 78 | 00 | 04"),
            hash_map + hexbytes("01 | 03 | 01 82 6b 01 0a | 01 82 6e 00"),
            # c: the nested List gets Integer: no null (flag off), the element untagged
            hexbytes("01 01 | 01 | 02 | 01 82 67 | 01 00 01 | 02 | 02"),
        )
    )
    for kryo, data in ((2, kryo_2), (5, kryo_5)):
        codec = kryo_codec("p.G", kryo, classes, tmp_path)
        assert codec.encode(value).hex(" ") == data.hex(" "), kryo
        decoded = codec.decode(data)
        assert decoded == value
        assert decoded.value["a"].value[0] is decoded.value["a"].value[2]
        assert codec.encode(decoded) == data
        assert codec.to_json(decoded) == {"a": ["x", None, "x"], "b": {"k": 5, "n": None}, "c": {"g": [1]}}  # fmt: skip
    old = kryo_codec("p.G", 2, classes, tmp_path)
    new = kryo_codec("p.G", 5, classes, tmp_path)
    assert new.encode(old.decode(kryo_2)) == kryo_5  # what `upgrade` writes


@pytest.mark.parametrize(
    ("signature", "kryo", "element", "final"),
    [
        ("Ljava/util/List<+Ljava/lang/String;>;", 2, "java.lang.Object", False),
        ("Ljava/util/List<+Ljava/lang/String;>;", 5, "java.lang.String", True),
        ("Ljava/util/List<-Ljava/lang/String;>;", 5, "java.lang.String", True),
        ("Ljava/util/List<*>;", 5, "java.lang.Object", False),
        ("Ljava/util/List<[Ljava/lang/String;>;", 2, "[Ljava.lang.String;", True),
        ("Ljava/util/List<[[I>;", 5, "[[I", True),
        ("Ljava/util/List<Ljava/util/List<Ljava/lang/String;>;>;", 2, "java.util.List", False),
    ],
)
def test_type_arguments_as_each_kryo_resolves_them(
    signature: str, kryo: int, element: str, final: bool, tmp_path: Path
) -> None:
    classes = {"p.G": class_bytes("p.G", fields=[field("a", "Ljava/util/List;", signature=signature)])}  # fmt: skip
    codec = kryo_codec("p.G", kryo, classes, tmp_path)
    assert codec.registry.classes is not None
    ((only,),) = [f.type_args for f in codec.registry.classes.layout("p.G")]
    assert (only.java_class, only.value_class is not None) == (element, final)


def test_nested_type_arguments_only_in_kryo_5(tmp_path: Path) -> None:
    signature = "Ljava/util/List<Ljava/util/List<Ljava/lang/String;>;>;"
    classes = {"p.G": class_bytes("p.G", fields=[field("a", "Ljava/util/List;", signature=signature)])}  # fmt: skip
    for kryo, nested in ((2, ()), (5, ("java.lang.String",))):
        codec = kryo_codec("p.G", kryo, classes, tmp_path)
        assert codec.registry.classes is not None
        ((outer,),) = [f.type_args for f in codec.registry.classes.layout("p.G")]
        assert tuple(a.java_class for a in outer.args) == nested


def superclass_chain(length: int) -> dict[str, bytes]:
    """`p.C0` extends `p.C1` … extends `p.C{length-1}` extends Object, each with one field."""
    return {
        f"p.C{n}": class_bytes(
            f"p.C{n}", f"p.C{n + 1}" if n + 1 < length else None, [field(f"f{n}", "I")]
        )
        for n in range(length)
    }


def test_a_superclass_chain_longer_than_the_limit_is_refused_quickly(tmp_path: Path) -> None:
    """The chain is walked once, with a set for the cycle check, and refused past the limit
    (a hostile class path of 100,001 classes took hours with a list scanned for each)."""
    at_limit = kryo_codec("p.C0", 5, superclass_chain(MAX_SUPERCLASSES + 1), tmp_path)
    data = hexbytes("57 01") + b"\x02" * (MAX_SUPERCLASSES + 1)  # every field 1 (zigzag)
    assert set(at_limit.decode(data).value.values()) == {1}
    too_long = kryo_codec("p.C0", 5, superclass_chain(MAX_SUPERCLASSES + 2), tmp_path)
    with pytest.raises(Undecodable, match=f"p.C0: more than {MAX_SUPERCLASSES} superclasses"):
        too_long.decode(data)
