"""Flink 1.x snapshots and values upgraded to what Flink 2.x writes (formats/upgrade.py).

The values job (tests/flink/values) writes the same values with every Flink; its `Pojo` has
`List<String> tags`, `Map<String, Long> counts` and `Set<Integer> codes`, Kryo in 1.x and
Nullable List/Map/Set serializers in 2.x. The committed 2.3.0 savepoints are the oracle: the
upgraded 1.15.4 and 1.20.3 snapshots are byte for byte Flink 2.3's, and every upgraded value is
2.3's bytes for the same key, but for the order of HashSet and HashMap elements, which Java does
not fix from one run to the next (`Set.of`/`Map.of` iterate in a per-JVM order, and elements of
one hash bucket keep their insertion order): where the orders agree, the bytes are equal. No JVM
needed."""

from __future__ import annotations

import collections
import dataclasses
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from statectl.errors import FormatError
from statectl.formats.java_io import DataReader, DataWriter
from statectl.formats.operator_state import split_broadcast_entries
from statectl.formats.serializer_snapshots import (
    OPTIONAL_MAP_HEADER,
    SerializerSnapshot,
    at_end,
    read_versioned_snapshot,
)
from statectl.formats.state_headers import StateMetaInfo
from statectl.formats.state_values import keyed_codec, operator_codec, split_list
from statectl.formats.upgrade import (
    ElementClasses,
    Hints,
    collect_element_classes,
    collection_snapshot,
    element_snapshot,
    hints_from,
    infer_hints,
    merge_element_classes,
    upgrade_value,
    upgraded_snapshot,
)
from statectl.formats.values import Codec, Context, Undecodable, codec_for
from statectl.formats.values.composites import ListCodec, MapCodec, NullableCodec, SetCodec
from statectl.formats.values.kryo import KryoCodec, KryoObject
from statectl.formats.values.pojo import PojoCodec

VALUES = Path(__file__).parents[1] / "fixtures" / "values"
KEYED = "8918828246c22e7d25902f74d971b709"  # the keyed operator: pojo, pojo-list, pojo-map, …
OPERATOR = "21991e99748be05b56fddb2033c0ff3b"  # op-list, op-broadcast, …
POJO = "statectl.values.Model$Pojo"
STATES = {"pojo", "pojo-list", "pojo-map", "op-list", "op-broadcast"}  # POJOs with collections
HINTS: Hints = {  # as the job's classes declare them
    (POJO, "tags"): "String",
    (POJO, "counts"): ("String", "Long"),
    (POJO, "codes"): "Integer",
}
OLD = [f"{v}-{b}" for v in ("1.15.4", "1.20.3") for b in ("hashmap-canonical", "rocksdb-native")]


@dataclasses.dataclass
class Fixture:
    keyed: dict[tuple[str, bytes], tuple[StateMetaInfo, SerializerSnapshot | None, bytes]]
    operator: dict[tuple[str, int], list[tuple[StateMetaInfo | None, str, bytes]]]
    serializers: dict[tuple[str, str, str], SerializerSnapshot]  # (scope, state, slot)


@cache
def fixture(name: str) -> Fixture:
    from statectl.savepoint import entries
    from statectl.savepoint.reader import open_savepoint

    sp = open_savepoint(str(VALUES / name / "savepoint"))
    keyed: dict[tuple[str, bytes], Any] = {}
    serializers: dict[tuple[str, str, str], SerializerSnapshot] = {}
    for file in entries.keyed_files(sp, sp.find_operator(KEYED)):
        header = file.header()
        for state in header.states:
            for slot, snapshot in state.serializers.items():
                if snapshot is not None:
                    serializers[("keyed", state.name, slot)] = snapshot
        for entry in file.entries(header=header):
            if entry.state.name in STATES:
                keyed[(entry.state.name, entry.key)] = (
                    entry.state,
                    header.key_serializer_snapshot,
                    entry.value,
                )
    operator: dict[tuple[str, int], list[Any]] = collections.defaultdict(list)
    for op_file in entries.operator_files(sp, sp.find_operator(OPERATOR)):
        for name, meta in op_file.state_metas().items():
            for slot, snapshot in meta.serializers.items():
                if snapshot is not None:
                    serializers[("operator", name, slot)] = snapshot
        for element in op_file.elements():
            if element.state in STATES:
                operator[(element.state, element.subtask)].append(
                    (element.meta, element.kind, element.value)
                )
    return Fixture(keyed, dict(operator), serializers)


def oracle(old: str) -> Fixture:
    return fixture("2.3.0-" + old.split("-", 1)[1])


def upgraded_meta(meta: StateMetaInfo, hints: Hints) -> StateMetaInfo:
    value = meta.serializers["VALUE_SERIALIZER"]
    assert value is not None
    new = upgraded_snapshot(value, hints)
    return dataclasses.replace(meta, serializers={**meta.serializers, "VALUE_SERIALIZER": new})


# --- snapshots ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", OLD)
def test_every_upgraded_snapshot_is_flink_2_3s(name: str) -> None:
    """Every serializer of every state of both operators: the POJO states' value serializers
    change (the POJO alone, in a List, as a Map value, in operator list and broadcast state) and
    become exactly 2.3's bytes; all others are left as they are, and are 2.3's already."""
    old, new = fixture(name).serializers, oracle(name).serializers
    assert old.keys() == new.keys()
    changed = set()
    for where, snapshot in old.items():
        upgraded = upgraded_snapshot(snapshot, HINTS)
        assert upgraded.raw == new[where].raw, where
        if upgraded.raw != snapshot.raw:
            changed.add(where)
    assert changed == {
        ("operator" if state.startswith("op-") else "keyed", state, "VALUE_SERIALIZER")
        for state in STATES
    }


def test_the_upgraded_pojo_names_the_2x_collection_serializers() -> None:
    pojo = fixture("1.20.3-hashmap-canonical").serializers[("keyed", "pojo", "VALUE_SERIALIZER")]
    assert "tags: Kryo(java.util.List)" in pojo.describe()
    upgraded = upgraded_snapshot(pojo, HINTS)
    fields = dict(zip(upgraded.field_names, upgraded.nested, strict=True))
    assert fields["tags"].describe() == "Nullable<List<Nullable<String>>>"
    assert fields["counts"].describe() == "Nullable<Map<Nullable<String>, Long>>"
    assert fields["codes"].describe() == "Nullable<Set<Int>>"
    assert fields["codes"].param("padding") == 0  # NullableSerializer.wrap(…, false)
    assert upgraded.param("declaring") == pojo.param("declaring")
    assert upgraded_snapshot(upgraded, {}) is upgraded  # nothing left to upgrade: kept as is


def test_hints_by_java_class_name_and_snapshot_give_the_same_bytes() -> None:
    pojo = fixture("1.20.3-hashmap-canonical").serializers[("keyed", "pojo", "VALUE_SERIALIZER")]
    by_class: Hints = {
        (POJO, "tags"): "java.lang.String",
        (POJO, "counts"): (element_snapshot("java.lang.String"), "java.lang.Long"),
        (POJO, "codes"): "java.lang.Integer",
    }
    assert upgraded_snapshot(pojo, by_class).raw == upgraded_snapshot(pojo, HINTS).raw


def test_a_field_hinted_none_stays_kryo() -> None:
    """A raw `List` or a `List<List<String>>` field is Kryo in 2.x too."""
    pojo = fixture("1.20.3-hashmap-canonical").serializers[("keyed", "pojo", "VALUE_SERIALIZER")]
    upgraded = upgraded_snapshot(pojo, {**HINTS, (POJO, "tags"): None})
    fields = dict(zip(upgraded.field_names, upgraded.nested, strict=True))
    assert fields["tags"].describe() == "Kryo(java.util.List)"
    assert fields["codes"].describe() == "Nullable<Set<Int>>"


def test_a_subclass_snapshot_is_upgraded_too() -> None:
    """A POJO's registered and non-registered subclass snapshots are upgraded like its fields:
    the 1.20.3 `Pojo` snapshot put in as a subclass of `Inner` comes out as 2.3's."""
    old = fixture("1.20.3-hashmap-canonical").serializers
    new = oracle("1.20.3-hashmap-canonical").serializers
    pojo = old[("keyed", "pojo", "VALUE_SERIALIZER")]
    inner = dict(zip(pojo.field_names, pojo.nested, strict=True))["inner"]
    with_subclass = _with_subclasses(inner, [(POJO, pojo.raw)], [(POJO + "2", pojo.raw)])
    upgraded = upgraded_snapshot(with_subclass, HINTS)
    expected = new[("keyed", "pojo", "VALUE_SERIALIZER")]
    ((_, registered),) = upgraded.param("registered")
    ((_, nonregistered),) = upgraded.param("nonregistered")
    assert registered.raw == expected.raw
    assert nonregistered.raw == expected.raw
    assert upgraded.raw != with_subclass.raw
    assert upgraded.nested == inner.nested


def _with_subclasses(
    pojo: SerializerSnapshot, registered: list[tuple[str, bytes]], other: list[tuple[str, bytes]]
) -> SerializerSnapshot:
    """`pojo`'s bytes with these subclass maps instead of its own (which are empty)."""
    assert not pojo.param("registered") and not pojo.param("nonregistered")
    empty = OPTIONAL_MAP_HEADER.to_bytes(8, "big") + bytes(4)
    assert pojo.raw.endswith(empty * 2)
    out = DataWriter()
    out.write_bytes(pojo.raw[: -2 * len(empty)])
    for entries in (registered, other):
        out.write_i64(OPTIONAL_MAP_HEADER)
        out.write_i32(len(entries))
        for name, frame in entries:
            out.write_utf(name)
            out.write_bool(True)  # the key frame: empty (NoOpWriter)
            out.write_i32(0)
            out.write_bool(True)
            out.write_i32(len(frame))
            out.write_bytes(frame)
    return read_versioned_snapshot(DataReader(out.getvalue()), at_end)


def test_a_pojo_element_type_is_given_as_its_snapshot() -> None:
    old = fixture("1.20.3-hashmap-canonical").serializers
    pojo = old[("keyed", "pojo", "VALUE_SERIALIZER")]
    inner = dict(zip(pojo.field_names, pojo.nested, strict=True))["inner"]
    snapshot = collection_snapshot("Map", [element_snapshot("Long"), element_snapshot(inner)])
    assert snapshot.describe() == (
        "Nullable<Map<Nullable<Long>, Pojo(statectl.values.Model$Inner)<label: String, n: Int>>>"
    )
    codec = codec_for(snapshot, Context(2))
    value = [(1, {"label": "x", "n": 2}), (None, None)]
    assert codec.decode(codec.encode(value)) == value


# --- errors ------------------------------------------------------------------------------------


def test_a_field_without_element_types_is_refused_in_one_line() -> None:
    pojo = fixture("1.20.3-hashmap-canonical").serializers[("keyed", "pojo", "VALUE_SERIALIZER")]
    hints = {k: v for k, v in HINTS.items() if k != (POJO, "counts")}
    with pytest.raises(Undecodable) as caught:
        upgraded_snapshot(pojo, hints)
    message = caught.value.message
    assert "\n" not in message
    assert f"POJO {POJO} field counts (java.util.Map, Kryo in Flink 1.x)" in message
    assert "key and value types" in message
    # inside a List state's and a Map state's snapshot alike
    for state in ("pojo-list", "pojo-map"):
        nested = fixture("1.20.3-hashmap-canonical").serializers[
            ("keyed", state, "VALUE_SERIALIZER")
        ]
        with pytest.raises(Undecodable, match=r"Model\$Pojo field counts"):
            upgraded_snapshot(nested, hints)


@pytest.mark.parametrize(
    ("hint", "error"),
    [
        (("String", "Long"), r"field tags is a List: 1 element type\(s\) expected, 2 given"),
        ("java.util.UUID", r"element type java.util.UUID: not a basic type"),
        ("Strin", r"element type Strin: not a basic type"),
    ],
)
def test_bad_hints_are_refused(hint: Any, error: str) -> None:
    pojo = fixture("1.20.3-hashmap-canonical").serializers[("keyed", "pojo", "VALUE_SERIALIZER")]
    with pytest.raises(FormatError, match=error):
        upgraded_snapshot(pojo, {**HINTS, (POJO, "tags"): hint})


def test_values_of_another_type_than_hinted_are_refused() -> None:
    meta, _key, data = _first_keyed("1.20.3-hashmap-canonical", "pojo")
    old_codec = codec_for(meta.serializers["VALUE_SERIALIZER"], Context(1))
    wrong = upgraded_meta(meta, {**HINTS, (POJO, "tags"): "Long"})
    new_codec = codec_for(wrong.serializers["VALUE_SERIALIZER"], Context(2))
    with pytest.raises(Undecodable, match=r"a Kryo java.lang.String where Flink 2.x writes BIGINT"):
        upgrade_value(old_codec, new_codec, old_codec.decode(data))


def _first_keyed(name: str, state: str) -> tuple[StateMetaInfo, bytes, bytes]:
    for (st, key), (meta, _ks, data) in sorted(fixture(name).keyed.items()):
        if st == state:
            return meta, key, data
    raise AssertionError(state)


# --- hints from values -------------------------------------------------------------------------


@pytest.mark.parametrize("name", OLD)
def test_hints_inferred_from_the_values_are_the_declared_types(name: str) -> None:
    meta, _key, _data = _first_keyed(name, "pojo")
    codec = codec_for(meta.serializers["VALUE_SERIALIZER"], Context(1))
    values = [
        codec.decode(data)
        for (st, _k), (_m, _ks, data) in fixture(name).keyed.items()
        if st == "pojo"
    ]
    assert infer_hints(codec, values) == {
        (POJO, "tags"): "java.lang.String",
        (POJO, "counts"): ("java.lang.String", "java.lang.Long"),
        (POJO, "codes"): "java.lang.Integer",
    }


def test_inferred_hints_leave_out_fields_with_no_or_mixed_elements() -> None:
    meta, _key, data = _first_keyed("1.20.3-hashmap-canonical", "pojo")
    codec = codec_for(meta.serializers["VALUE_SERIALIZER"], Context(1))
    value = codec.decode(data)
    mixed = {
        **value,
        "tags": KryoObject(
            "java.util.ArrayList",
            [KryoObject("java.lang.String", "a"), KryoObject("java.lang.Integer", 1), None],
        ),
        "codes": KryoObject("java.util.HashSet", []),
        "counts": None,
    }
    assert infer_hints(codec, [mixed]) == {}


def test_element_classes_gathered_apart_merge_to_the_hints_of_all_values() -> None:
    """Upgrade's tasks gather each subtask file's element classes apart: merged, they give
    what all values at once give (tags of Strings in one file, of Integers in another: no
    hint; the other fields' classes agree)."""
    meta, _key, data = _first_keyed("1.20.3-hashmap-canonical", "pojo")
    codec = codec_for(meta.serializers["VALUE_SERIALIZER"], Context(1))
    value = codec.decode(data)
    integers = {
        **value,
        "tags": KryoObject("java.util.ArrayList", [KryoObject("java.lang.Integer", 1)]),
    }
    merged: ElementClasses = {}
    for part in ([value], [integers]):
        apart: ElementClasses = {}
        collect_element_classes(codec, part, apart)
        merge_element_classes(merged, apart)
    assert hints_from(merged) == infer_hints(codec, [value, integers])
    assert set(hints_from(merged)) == {(POJO, "counts"), (POJO, "codes")}


# --- values ------------------------------------------------------------------------------------


def canonical(codec: Codec, value: Any, ordered: bool) -> Any:
    """A value to compare: sets and maps in a fixed order unless `ordered`."""
    if value is None:
        return None
    if isinstance(codec, NullableCodec):
        return canonical(codec.inner, value, ordered)
    if isinstance(codec, ListCodec):
        items = [repr(canonical(codec.element, v, ordered)) for v in value]
        return items if ordered or not isinstance(codec, SetCodec) else sorted(items)
    if isinstance(codec, MapCodec):
        pairs = [
            repr((canonical(codec.key, k, ordered), canonical(codec.value, v, ordered)))
            for k, v in value
        ]
        return pairs if ordered else sorted(pairs)
    if isinstance(codec, PojoCodec):
        fields = zip(codec.names, codec.codecs, strict=True)
        return {n: canonical(c, value.get(n), ordered) for n, c in fields}
    return value


def same(codec: Codec, ours: bytes, theirs: bytes, tally: collections.Counter[str]) -> None:
    """Equal bytes; or, where 2.3 iterated a HashSet or HashMap in another order, the same
    elements (and equal bytes once in the same order)."""
    if ours == theirs:
        tally["exact"] += 1
        return
    a, b = codec.decode(ours), codec.decode(theirs)
    assert canonical(codec, a, ordered=True) != canonical(codec, b, ordered=True)
    assert canonical(codec, a, ordered=False) == canonical(codec, b, ordered=False)
    tally["set or map order"] += 1


@pytest.mark.parametrize("name", OLD)
def test_every_upgraded_value_is_flink_2_3s(name: str) -> None:
    """Every entry of the keyed POJO states (the value, each list element, each map value) and
    every operator list element and broadcast value, decoded with the 1.x codec, upgraded and
    encoded with the upgraded snapshot's codec, is what Flink 2.3 wrote for the same key."""
    old, new = fixture(name), oracle(name)
    tally: collections.Counter[str] = collections.Counter()
    assert {k for k in old.keyed} == {k for k in new.keyed}
    for (state, key), (meta, key_snapshot, data) in old.keyed.items():
        old_codec = keyed_codec(meta, key_snapshot, 1)
        new_codec = keyed_codec(upgraded_meta(meta, HINTS), key_snapshot, 2)
        assert old_codec.value is not None and new_codec.value is not None
        theirs = new.keyed[(state, key)][2]
        decoded = old_codec.decode_value(data).value
        if meta.kind == "LIST":
            upgraded = [upgrade_value(old_codec.value, new_codec.value, v) for v in decoded]
            ours = new_codec.encode_value(upgraded)
            ours_elements = split_list(new_codec.value, ours)
            theirs_elements = split_list(new_codec.value, theirs)
            assert len(ours_elements) == len(theirs_elements)
            for a, b in zip(ours_elements, theirs_elements, strict=True):
                same(new_codec.value, new_codec.value.encode(a), new_codec.value.encode(b), tally)
            assert (ours == theirs) == (ours_elements == theirs_elements)
            continue
        upgraded = upgrade_value(old_codec.value, new_codec.value, decoded)
        heap_null = meta.kind == "MAP" and upgraded is None and "hashmap" in name
        ours = new_codec.encode_value(upgraded, heap_null_map_value=heap_null)
        if meta.kind == "MAP":  # the null flag, then the value
            assert ours[:1] == theirs[:1]
            ours, theirs = ours[1:], theirs[1:]
            if upgraded is None:
                assert ours == theirs
                tally["exact"] += 1
                continue
        same(new_codec.value, ours, theirs, tally)
    assert old.operator.keys() == new.operator.keys()
    for where, elements in old.operator.items():
        expected = new.operator[where]
        assert len(elements) == len(expected)
        for (meta, kind, data), (_meta, _kind, theirs) in zip(elements, expected, strict=True):
            assert meta is not None
            old_codec = operator_codec(meta, kind, 1)
            new_codec = operator_codec(upgraded_meta(meta, HINTS), kind, 2)
            assert old_codec.value is not None and new_codec.value is not None
            if kind == "BROADCAST":
                assert old_codec.key is not None and new_codec.key is not None
                ours_map = split_broadcast_entries(data, old_codec.key, old_codec.value)
                theirs_map = dict(split_broadcast_entries(theirs, new_codec.key, new_codec.value))
                assert {k for k, _ in ours_map} == theirs_map.keys()
                for user_key, value in ours_map:
                    upgraded = upgrade_value(
                        old_codec.value, new_codec.value, old_codec.value.decode(value)
                    )
                    encoded = new_codec.value.encode(upgraded)
                    same(new_codec.value, encoded, theirs_map[user_key], tally)
                continue
            upgraded = upgrade_value(old_codec.value, new_codec.value, old_codec.value.decode(data))
            same(new_codec.value, new_codec.value.encode(upgraded), theirs, tally)
    # 16 POJO values, 16 keys × 2 list elements, 20 map values, 5 list elements, 8 broadcast values
    assert sum(tally.values()) == 16 + 32 + 20 + 5 + 8
    assert tally["exact"] >= 50, tally


def test_kryo_that_stays_kryo_is_kept_and_written_with_kryo_5() -> None:
    meta, _key, data = _first_keyed("1.20.3-hashmap-canonical", "pojo")
    old_codec = codec_for(meta.serializers["VALUE_SERIALIZER"], Context(1))
    kept = upgraded_meta(meta, {**HINTS, (POJO, "tags"): None})
    new_codec = codec_for(kept.serializers["VALUE_SERIALIZER"], Context(2))
    value = old_codec.decode(data)
    upgraded = upgrade_value(old_codec, new_codec, value)
    assert upgraded["tags"] is value["tags"]
    assert isinstance(upgraded["codes"], list)
    tags = dict(zip(new_codec.names, new_codec.codecs, strict=True))["tags"]  # type: ignore[attr-defined]
    assert isinstance(tags, KryoCodec) and tags.dialect.kryo == 5
    assert new_codec.decode(new_codec.encode(upgraded)) == upgraded
