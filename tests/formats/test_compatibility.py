"""Flink's compatibility rules (`formats/compatibility.py`) on hand-made snapshots and classes:
each serializer family's rule, the new job's types (`formats/job_types.py`: POJO rules, the
`--type` syntax) and Avro's schema resolution. Real Flink's answers are asserted in
tests/operations/test_check_e2e.py."""

from __future__ import annotations

import json

import pytest

from statectl.errors import FormatError
from statectl.formats.class_files import (
    ACC_ENUM,
    ACC_PRIVATE,
    ACC_PUBLIC,
    ACC_STATIC,
    STRING,
    UTF8,
    ClassFile,
    Constant,
    ConstantPool,
    Member,
)
from statectl.formats.compatibility import (
    AVRO_SNAPSHOT,
    ENUM_SNAPSHOT,
    KRYO_SNAPSHOT,
    POJO_SNAPSHOT,
    ROW_SNAPSHOT,
    TUPLE_SNAPSHOT,
    TypeChecker,
    avro_change,
)
from statectl.formats.job_types import DeclaredType, avro_schema, parse_type
from statectl.formats.serializer_snapshots import SerializerSnapshot

BASE = "org.apache.flink.api.common.typeutils.base."
INT = SerializerSnapshot(BASE + "IntSerializer$IntSerializerSnapshot", 3)
LONG = SerializerSnapshot(BASE + "LongSerializer$LongSerializerSnapshot", 3)
STRING_SNAPSHOT = SerializerSnapshot(BASE + "StringSerializer$StringSerializerSnapshot", 3)
MAP = BASE + "MapSerializerSnapshot"
LIST = BASE + "ListSerializerSnapshot"
DEFAULT_CONSTRUCTOR = Member(ACC_PUBLIC, "<init>", "()V", None, ())


def field(name: str, descriptor: str, flags: int = ACC_PUBLIC, signature: str | None = None) -> Member:  # fmt: skip
    return Member(flags, name, descriptor, signature, ())


def cls(
    name: str,
    fields: tuple[Member, ...] = (),
    methods: tuple[Member, ...] = (DEFAULT_CONSTRUCTOR,),
    flags: int = ACC_PUBLIC,
    super_name: str = "java.lang.Object",
    strings: tuple[str, ...] = (),
) -> ClassFile:
    """A class file as `parse_class` gives it; `strings`: its String constants."""
    entries: list[Constant | None] = [None]
    for text in strings:
        entries.append(Constant(UTF8, text))
        entries.append(Constant(STRING, len(entries) - 1))
    return ClassFile(
        "test", 0, 52, ConstantPool(tuple(entries)), flags, name, super_name, (), fields,
        methods, None, (),
    )  # fmt: skip


class Classes:
    def __init__(self, *classes: ClassFile) -> None:
        self.classes = {c.name: c for c in classes}

    def find(self, name: str) -> ClassFile | None:
        return self.classes.get(name)


def pojo(name: str, **fields: SerializerSnapshot) -> SerializerSnapshot:
    return SerializerSnapshot(
        POJO_SNAPSHOT, 2, tuple(fields.values()), name, tuple(fields), params=()
    )


def check(old: SerializerSnapshot, *classes: ClassFile, new: str | None = None) -> tuple[str, str]:
    verdict = TypeChecker(Classes(*classes)).check(old, parse_type(new) if new else None)
    return verdict.verdict, verdict.reason


ORDER = "com.acme.Order"
ORDER_V1 = pojo(ORDER, id=STRING_SNAPSHOT, qty=INT)


# --- POJOs (PojoSerializerSnapshot) -------------------------------------------------------------


def test_an_unchanged_pojo_is_as_is() -> None:
    order = cls(ORDER, (field("id", "Ljava/lang/String;"), field("qty", "I")))
    assert check(ORDER_V1, order) == ("as-is", "")


def test_a_field_added_or_removed_migrates() -> None:
    added = cls(ORDER, (field("id", "Ljava/lang/String;"), field("qty", "I"), field("note", "Ljava/lang/String;")))  # fmt: skip
    assert check(ORDER_V1, added) == (
        "migrates", "Order: field note added, empty (as the constructor leaves it)"
    )  # fmt: skip
    removed = cls(ORDER, (field("qty", "Ljava/lang/Integer;"),))  # int and Integer: one serializer
    assert check(ORDER_V1, removed) == ("migrates", "Order: field id removed, its values dropped")


def test_a_renamed_field_loses_its_values() -> None:
    renamed = cls(ORDER, (field("name", "Ljava/lang/String;"), field("qty", "I")))
    verdict, reason = check(ORDER_V1, renamed)
    assert verdict == "loses"
    assert reason.startswith("Order: field id gone and name new (renamed?)")


def test_a_retyped_field_is_refused_even_beside_an_added_one() -> None:
    retyped = cls(ORDER, (field("id", "Ljava/lang/String;"), field("qty", "J"), field("x", "I")))
    assert check(ORDER_V1, retyped) == ("refused", "Order.qty: INT → BIGINT")


def test_a_pojo_inside_a_map_value_follows_the_same_rule() -> None:
    old = SerializerSnapshot(MAP, 1, (STRING_SNAPSHOT, ORDER_V1))
    retyped = cls(ORDER, (field("id", "I"), field("qty", "I")))
    assert check(old, retyped) == ("refused", "Order.id: STRING → INT")


def test_a_nested_pojo_field_is_checked_in_its_class() -> None:
    line = "com.acme.Line"
    old = pojo(line, order=ORDER_V1)
    line_class = cls(line, (field("order", f"L{ORDER.replace('.', '/')};"),))
    order = cls(ORDER, (field("id", "Ljava/lang/String;"), field("qty", "S")))
    assert check(old, line_class, order) == ("refused", "Line.order: Order.qty: INT → SMALLINT")


def test_a_private_field_with_a_getter_and_a_setter_keeps_a_pojo() -> None:
    accessors = (
        DEFAULT_CONSTRUCTOR,
        Member(ACC_PUBLIC, "getQty", "()I", None, ()),
        Member(ACC_PUBLIC, "setQty", "(I)V", None, ()),
    )
    order = cls(ORDER, (field("id", "Ljava/lang/String;"), field("qty", "I", ACC_PRIVATE)), accessors)  # fmt: skip
    assert check(ORDER_V1, order) == ("as-is", "")


@pytest.mark.parametrize(
    ("order", "why"),
    [
        (
            cls(ORDER, (field("id", "Ljava/lang/String;"), field("qty", "I", ACC_PRIVATE))),
            "field qty is neither public nor has a getter and a setter",
        ),
        (
            cls(ORDER, (field("id", "Ljava/lang/String;"),), methods=()),
            "it has no public constructor without arguments",
        ),
        (cls(ORDER, (field("id", "Ljava/lang/String;"),), flags=0), "it is not public"),
    ],
)
def test_a_class_no_longer_a_pojo_is_refused(order: ClassFile, why: str) -> None:
    assert check(ORDER_V1, order) == ("refused", f"Order is no longer a POJO ({why}): Flink would use Kryo")  # fmt: skip


def test_static_and_transient_fields_are_not_fields() -> None:
    order = cls(
        ORDER,
        (
            field("id", "Ljava/lang/String;"),
            field("qty", "I"),
            field("X", "I", ACC_PUBLIC | ACC_STATIC),
            field("t", "I", ACC_PUBLIC | 0x0080),
        ),
    )
    assert check(ORDER_V1, order) == ("as-is", "")


def test_a_class_not_on_the_class_path_is_unknown() -> None:
    assert check(ORDER_V1) == ("unknown", "class com.acme.Order is not on the class path")


def test_collection_fields_are_flink_2s_collection_serializers_and_1xs_kryo() -> None:
    nullable = "org.apache.flink.api.java.typeutils.runtime.NullableSerializer$NullableSerializerSnapshot"  # fmt: skip
    old_2x = pojo(
        ORDER,
        tags=SerializerSnapshot(
            nullable,
            1,
            (SerializerSnapshot(LIST, 1, (SerializerSnapshot(nullable, 1, (STRING_SNAPSHOT,)),)),),
        ),
    )
    order = cls(ORDER, (field("tags", "Ljava/util/List;", signature="Ljava/util/List<Ljava/lang/String;>;"),))  # fmt: skip
    assert check(old_2x, order) == ("as-is", "")
    old_1x = pojo(ORDER, tags=SerializerSnapshot(KRYO_SNAPSHOT, 2, type_name="java.util.List"))
    verdict = TypeChecker(Classes(order), flink_major=1).check(old_1x, None)
    assert verdict.verdict == "as-is"
    assert check(old_1x, order) == ("refused", "Order.tags: Kryo List → LIST<STRING>")


# --- Kryo, enums, Avro --------------------------------------------------------------------------


def test_kryo_compares_the_class_only() -> None:
    opaque = "com.acme.Opaque"
    old = SerializerSnapshot(KRYO_SNAPSHOT, 2, type_name=opaque)
    not_pojo = cls(opaque, (field("x", "I", ACC_PRIVATE),))
    assert check(old, not_pojo) == ("as-is", "")
    now_pojo = cls(opaque, (field("x", "I"),))
    assert check(old, now_pojo) == (
        "refused", "Opaque is now a POJO: Flink's Kryo snapshot wants Kryo"
    )  # fmt: skip
    jdk = SerializerSnapshot(KRYO_SNAPSHOT, 2, type_name="java.util.ArrayList")
    assert check(jdk) == ("as-is", "")


COLOR = "com.acme.Color"


def enum_class(*constants: str) -> ClassFile:
    fields = tuple(field(c, f"L{COLOR.replace('.', '/')};", ACC_PUBLIC | ACC_STATIC | ACC_ENUM) for c in constants)  # fmt: skip
    return cls(COLOR, fields, methods=(), flags=ACC_PUBLIC | ACC_ENUM)


def test_enum_constants_removed_are_refused_added_or_reordered_as_is() -> None:
    old = SerializerSnapshot(ENUM_SNAPSHOT, 3, type_name=COLOR, params=(("constants", ("RED", "GREEN")),))  # fmt: skip
    assert check(old, enum_class("RED", "GREEN")) == ("as-is", "")
    assert check(old, enum_class("GREEN", "RED", "BLUE")) == (
        "as-is", "Color: constants added or reordered (reconfigured)"
    )  # fmt: skip
    assert check(old, enum_class("RED")) == ("refused", "Color: constant GREEN removed")


def record(*fields: dict[str, object], name: str = "Order") -> dict[str, object]:
    return {"type": "record", "name": name, "fields": list(fields)}


ID = {"name": "id", "type": "string"}
QTY = {"name": "qty", "type": "int"}


@pytest.mark.parametrize(
    ("new", "verdict"),
    [
        (record(ID, QTY), "as-is"),
        (record(ID, QTY, {"name": "note", "type": "string", "default": ""}), "migrates"),
        (record(ID, QTY, {"name": "note", "type": "string"}), "refused"),  # no default
        (record(ID), "migrates"),
        (record(ID, {"name": "count", "type": "int", "default": 0}), "loses"),
        (record(ID, {"name": "count", "type": "int", "aliases": ["qty"]}), "migrates"),
        (record(ID, {"name": "qty", "type": "long"}), "migrates"),  # promoted
        (record(ID, {"name": "qty", "type": "string"}), "refused"),
        (record(ID, {"name": "qty", "type": ["null", "int"]}), "unknown"),
    ],
)
def test_avro_resolves_the_old_schema_with_the_new(new: dict[str, object], verdict: str) -> None:
    assert avro_change(record(ID, QTY), new, "Order").verdict == verdict


def test_avro_records_from_their_generated_class() -> None:
    schema = json.dumps(record(ID, QTY)).replace(" ", "")
    name = "com.acme.AvroOrder"
    old = SerializerSnapshot(AVRO_SNAPSHOT, 3, type_name=name, params=(("schema", schema),))
    half = len(schema) // 2  # the compiler splits long schemas into several constants
    generated = cls(name, super_name="org.apache.avro.specific.SpecificRecordBase", strings=("x", schema[:half], schema[half:]))  # fmt: skip
    assert avro_schema(generated) == schema
    assert check(old, generated) == ("as-is", "")
    plain = cls(name, (field("id", "Ljava/lang/String;"),))
    assert check(old, plain) == ("refused", "AvroOrder is no longer an Avro specific record")


# --- types declared in code: --type, or assumed unchanged ----------------------------------------

TUPLE2 = SerializerSnapshot(TUPLE_SNAPSHOT, 2, (STRING_SNAPSHOT, INT), "org.apache.flink.api.java.tuple.Tuple2")  # fmt: skip
ROW2 = SerializerSnapshot(ROW_SNAPSHOT, 3, (STRING_SNAPSHOT, INT))


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        (TUPLE2, "TUPLE2{f0 STRING, f1 INT}", ("as-is", "")),
        (TUPLE2, "TUPLE2{f0 STRING, f1 BIGINT}", ("refused", "TUPLE2.f1: INT → BIGINT")),
        (TUPLE2, "TUPLE3{f0 STRING, f1 INT, f2 INT}", ("refused", "TUPLE2 of 2 fields → 3 fields")),
        (ROW2, "ROW{id STRING, qty INT}", ("as-is", "")),
        (ROW2, "ROW{id STRING, qty INT, c STRING}", ("refused", "ROW of 2 fields → 3 fields")),
        (ROW2, "TUPLE2{f0 STRING, f1 INT}", ("refused", "ROW → TUPLE2{f0 STRING, f1 INT}")),
        (INT, "BIGINT", ("refused", "INT → BIGINT")),
        (SerializerSnapshot(LIST, 1, (LONG,)), "LIST<BIGINT>", ("as-is", "")),
        (
            SerializerSnapshot(MAP, 1, (STRING_SNAPSHOT, LONG)),
            "MAP<STRING, INT>",
            ("refused", "BIGINT → INT"),
        ),
    ],
)
def test_a_given_type_is_compared_field_by_field(
    old: SerializerSnapshot, new: str, expected: tuple[str, str]
) -> None:
    assert check(old, new=new) == expected


def test_a_type_from_code_is_assumed_unchanged_without_type() -> None:
    verdict = TypeChecker(Classes()).check(TUPLE2, None)
    assert (verdict.verdict, verdict.assumed) == ("as-is", True)


@pytest.mark.parametrize(
    "text",
    [
        "ROW{id STRING, qty INT, comment STRING}",
        "TUPLE2{f0 STRING, f1 BIGINT}",
        "MAP<STRING, LIST<ARRAY<INT>>>",
        "BIGINT",
    ],
)
def test_the_type_syntax_is_inspects(text: str) -> None:
    assert parse_type(text).describe() == text


def test_a_class_in_the_type_syntax_is_read_from_the_class_path() -> None:
    assert parse_type("POJO com.acme.Order{id STRING}, TTL") == DeclaredType("class", ORDER)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("ROW{id STRANG}", "unknown type 'STRANG'"),
        ("TUPLE3{f0 INT}", "TUPLE3 with 1 fields"),
        ("LIST<INT", "expected >, found the end"),
        ("INT INT", "unexpected text"),
    ],
)
def test_a_wrong_type_says_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(FormatError, match=message):
        parse_type(text)


def test_flinks_own_serializers_without_a_rule_are_assumed_unchanged_custom_ones_unknown() -> None:
    row_data = "org.apache.flink.table.runtime.typeutils.RowDataSerializer$RowDataSerializerSnapshot"  # fmt: skip
    planner = TypeChecker(Classes()).check(SerializerSnapshot(row_data, 3), None)
    assert (planner.verdict, planner.assumed) == ("as-is", True)
    nesting = SerializerSnapshot("org.apache.flink.cep.nfa.NFAStateSerializerSnapshot", 2, (ORDER_V1,))  # fmt: skip
    assert check(nesting) == ("unknown", "class com.acme.Order is not on the class path")
    custom = SerializerSnapshot("com.acme.OrderSerializer$Snapshot", 1)
    assert check(custom) == (
        "unknown", "custom serializer OrderSerializer$Snapshot: its own rule decides"
    )  # fmt: skip
