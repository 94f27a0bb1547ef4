"""Values carried into a new version of their types (`formats/schema_evolution.py`): POJO fields
by name, Tuple and Row fields by position, numbers widened or narrowed with a check."""

from __future__ import annotations

import pytest

from statectl.formats.schema_evolution import (
    ConversionError,
    ValueEvolver,
    convert_scalar,
    scalar_change,
)
from statectl.formats.values.composites import ListCodec, MapCodec, RowCodec, StructCodec
from statectl.formats.values.pojo import CLASS, PojoCodec
from statectl.formats.values.scalars import DOUBLE, FLOAT, INT, LONG, SHORT, STRING


def _pojo(names: list[str], codecs: list, declared: dict[str, str] | None = None) -> PojoCodec:
    return PojoCodec("demo.Order", names, codecs, [], {}, declared)


OLD = _pojo(["count", "legacy", "name"], [INT, STRING, STRING])
NEW = _pojo(
    ["count", "extra", "qty", "title"],
    [LONG, STRING, INT, STRING],
    {"count": "long", "extra": "java.lang.String", "qty": "int", "title": "java.lang.String"},
)


def test_pojo_fields_renamed_dropped_added_widened() -> None:
    value = {"count": 7, "legacy": "gone", "name": "n7"}
    evolved = ValueEvolver({"name": "title"}).evolve(OLD, NEW, value)
    # renamed under its new name, removed dropped, added null (a primitive: its default)
    assert evolved == {"count": 7, "extra": None, "qty": 0, "title": "n7"}
    out = bytearray()
    NEW.write(evolved, out)
    assert NEW.read(memoryview(bytes(out)), 0) == (evolved, len(out))


def test_null_pojo_and_subclass_values_stay() -> None:
    evolver = ValueEvolver()
    assert evolver.evolve(OLD, NEW, None) is None
    subclass = {"x": 1, CLASS: "demo.Special"}
    assert evolver.evolve(OLD, NEW, subclass) == subclass


def test_inside_lists_and_maps() -> None:
    evolver = ValueEvolver({"name": "title"})
    old_list, new_list = ListCodec(OLD), ListCodec(NEW)
    assert evolver.evolve(old_list, new_list, [{"count": 1, "name": "a"}]) == [
        {"count": 1, "extra": None, "qty": 0, "title": "a"}
    ]
    old_map, new_map = MapCodec(STRING, OLD), MapCodec(STRING, NEW)
    assert evolver.evolve(old_map, new_map, [("m0", {"count": 2})]) == [
        ("m0", {"count": 2, "extra": None, "qty": 0, "title": None})
    ]


def test_tuple_retyped_and_row_field_added() -> None:
    old = StructCodec("TUPLE2", "Tuple2", ["f0", "f1"], [STRING, INT])
    new = StructCodec("TUPLE2", "Tuple2", ["f0", "f1"], [STRING, LONG])
    assert ValueEvolver().evolve(old, new, {"f0": "t", "f1": 3}) == {"f0": "t", "f1": 3}
    old_row = RowCodec(["f0", "f1"], [STRING, INT], True)
    new_row = RowCodec(["f0", "f1", "f2"], [STRING, INT, STRING], True)
    value = {"__row_kind": 2, "f0": "id", "f1": 4}
    assert ValueEvolver().evolve(old_row, new_row, value) == {**value, "f2": None}


def test_numbers_widen_and_narrow_only_when_asked() -> None:
    assert convert_scalar(INT, LONG, 2**31 - 1, False) == 2**31 - 1
    assert convert_scalar(INT, DOUBLE, 3, False) == 3.0
    assert convert_scalar(FLOAT, DOUBLE, 0.5, False) == 0.5
    with pytest.raises(ConversionError, match="narrows"):
        convert_scalar(LONG, INT, 1, False, "count")
    assert convert_scalar(LONG, INT, -(2**31), True) == -(2**31)
    with pytest.raises(ConversionError, match=r"field count: 2147483648 does not fit in INT"):
        convert_scalar(LONG, INT, 2**31, True, "count")
    with pytest.raises(ConversionError, match="does not fit in SMALLINT"):
        convert_scalar(INT, SHORT, 40_000, True)
    with pytest.raises(ConversionError, match="not a whole number"):
        convert_scalar(DOUBLE, LONG, 1.5, True)


def test_strings_parse_as_numbers_or_are_refused() -> None:
    assert convert_scalar(STRING, INT, " 42", False) == 42
    assert convert_scalar(STRING, DOUBLE, "1.5", False) == 1.5
    with pytest.raises(ConversionError, match=r"field label: 'label0' does not parse as INT"):
        convert_scalar(STRING, INT, "label0", False, "label")
    assert convert_scalar(INT, STRING, 5, False) == "5"
    assert scalar_change(DOUBLE, STRING) is not None


def test_on_error_null_only_where_the_field_is_nullable() -> None:
    old = _pojo(["a", "b"], [STRING, STRING])
    new = _pojo(["a", "b"], [INT, INT], {"a": "java.lang.Integer", "b": "int"})
    evolver = ValueEvolver(nulls_on_error=True)
    assert evolver.evolve(old, new, {"a": "x", "b": "1"}) == {"a": None, "b": 1}
    assert evolver.nulls == 1
    with pytest.raises(ConversionError, match="field b: 'y' does not parse as INT"):
        evolver.evolve(old, new, {"a": "2", "b": "y"})
    with pytest.raises(ConversionError, match="field a"):
        ValueEvolver().evolve(old, new, {"a": "x", "b": "1"})
