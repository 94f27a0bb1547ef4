"""RowData, Tuple and Row keys: statectl's hash against Flink's (java_types composite key types)."""

from __future__ import annotations

import pickle
import subprocess
from pathlib import Path

import numpy as np
import pytest

from statectl.errors import FormatError, UnsupportedError
from statectl.formats import java_types as jt
from statectl.formats.java_io import DataReader
from statectl.formats.row_data_hashing import row_data_kernel
from statectl.formats.serializer_snapshots import (
    SerializerSnapshot,
    at_end,
    read_versioned_snapshot,
)

ORACLE = Path(__file__).parent / "oracles" / "RowKeys.java"
DATA = Path(__file__).parent / "data"
BASE = "org.apache.flink.api.common.typeutils.base."
RUNTIME = "org.apache.flink.api.java.typeutils.runtime."
MAX_PARALLELISMS = (128, 256, 4096)


def _base(name: str) -> SerializerSnapshot:
    return SerializerSnapshot(f"{BASE}{name}Serializer${name}SerializerSnapshot", 3)


LONG_STRING = (_base("Long"), _base("String"))
TUPLE2 = jt.key_type_for_snapshot(
    SerializerSnapshot(RUNTIME + "TupleSerializerSnapshot", 3, LONG_STRING)
)
ROW1 = jt.key_type_for_snapshot(
    SerializerSnapshot(RUNTIME + "RowSerializer$RowSerializerSnapshot", 3, (_base("String"),))
)
ROW_DATA = jt.key_type_for_snapshot(
    SerializerSnapshot("org.apache.flink.table.runtime.typeutils.RowDataSerializer", 3)
)

# Lines of tests/formats/oracles/RowKeys.java (seed 7): serialized key, hashCode, key groups.
FLINK_VECTORS = [
    (ROW_DATA, "0000001000010000000000000000000000000000", -1748325344, 99, 227, 3555),
    (ROW_DATA, "000000080000000000000000", -1670924195, 11, 11, 267),
    (
        ROW_DATA,
        "0000002000000000000000000d00000010000000c39f3131f09f9880f09f988062000000",
        1662811131, 9, 137, 1929,
    ),
    (
        ROW_DATA,
        "00000070004000000000000023dd84dc408e134a0b00000048000000332819cc000000000c00000058000000"
        "e0d60d006800000001000000000000000000000000000000259a00000000000030c39fe4b8ad63627a6131"
        "0000000000fe4db7b81505714401be1e420000000063671fa9c5feffff",
        1054801418, 59, 59, 1083,
    ),
    (TUPLE2, "839ade86c338cc0605e901797831", -737411863, 69, 197, 3269),
    (ROW1, "e0", 124, 102, 230, 1254),
    (ROW1, "000278", 182, 45, 45, 3373),
]  # fmt: skip


@pytest.mark.parametrize(("key_type", "hex_", "hash_", "kg128", "kg256", "kg4096"), FLINK_VECTORS)
def test_flink_vectors(
    key_type: jt.KeyType, hex_: str, hash_: int, kg128: int, kg256: int, kg4096: int
) -> None:
    data = bytes.fromhex(hex_)
    value, end = key_type.read(data)
    assert end == len(data)
    assert key_type.write(value) == data
    assert key_type.hash_code(value) == hash_
    assert [key_type.key_group(value, p) for p in MAX_PARALLELISMS] == [kg128, kg256, kg4096]


def test_decoded_values_and_names() -> None:
    assert TUPLE2 is not None and ROW1 is not None and ROW_DATA is not None
    assert TUPLE2.name == "Tuple2<Long, String>"
    assert TUPLE2.read(bytes.fromhex("839ade86c338cc0605e901797831"))[0] == (
        -8963607437945287674,
        "\u00e9yx1",
    )
    assert ROW1.name == "Row<String>"
    assert ROW1.read(b"\xe0")[0] == (3, (None,))  # DELETE, null field
    assert ROW1.read(bytes.fromhex("000278"))[0] == (0, ("x",))
    assert ROW_DATA.name == "RowData"
    assert ROW_DATA.read(bytes.fromhex("000000080000000000000000"))[0] == bytes(8)


def test_key_types_pickle_with_their_fields() -> None:
    for key_type in (TUPLE2, ROW1, ROW_DATA):
        again = pickle.loads(pickle.dumps(key_type))
        assert again is not None and key_type is not None
        assert (again.name, again.serializer) == (key_type.name, key_type.serializer)
        assert again.hash_code(again.read(key_type.write(_sample(key_type)))[0]) == (
            key_type.hash_code(_sample(key_type))
        )


def _sample(key_type: jt.KeyType) -> object:
    return {"RowData": bytes(8), "Row<String>": (0, ("a",))}.get(key_type.name, (5, "b"))


def test_row_data_serializer_snapshot_is_read_whole() -> None:
    """RowDataSerializerSnapshot (Flink 2.3, RowKeys.java): arity, each LogicalType as a Java
    serialization stream, then the field serializers' snapshots."""
    data = bytes.fromhex((DATA / "row_data_snapshot_multi.hex").read_text())
    snapshot = read_versioned_snapshot(DataReader(data), at_end)
    assert snapshot.complete
    assert snapshot.describe() == (
        "RowData<Long, StringData, Int, Decimal, TimestampData, Boolean, Double, Int>"
    )
    assert jt.key_type_for_snapshot(snapshot) is ROW_DATA


# RowKeys.java's Row<String> snapshot: composite magic, outer version 4, supportsRowKind = 01.
ROW_STRING_SNAPSHOT = (
    "004f6f72672e6170616368652e666c696e6b2e6170692e6a6176612e747970657574696c732e72756e74696d65"
    "2e526f7753657269616c697a657224526f7753657269616c697a6572536e617073686f7400000003000de70400"
    "00000401001457fd000000010000000100546f72672e6170616368652e666c696e6b2e6170692e636f6d6d6f6e"
    "2e747970657574696c732e626173652e537472696e6753657269616c697a657224537472696e6753657269616c"
    "697a6572536e617073686f7400000003"
)


def test_legacy_row_serializer_is_refused() -> None:
    """A RowSerializer without RowKind (state from Flink < 1.11) has no kind bits in its mask."""
    current = bytes.fromhex(ROW_STRING_SNAPSHOT)
    flag = current.index(bytes.fromhex("0000000401")) + 4
    legacy = current[:flag] + b"\x00" + current[flag + 1 :]
    snapshots = [read_versioned_snapshot(DataReader(d), at_end) for d in (current, legacy)]
    assert [s.type_name for s in snapshots] == [None, "legacy mode"]
    assert [s.complete for s in snapshots] == [True, True]
    row_type = jt.key_type_for_snapshot(snapshots[0])
    assert row_type is not None and row_type.name == "Row<String>"
    assert jt.key_type_for_snapshot(snapshots[1]) is None


def test_unsupported_fields_and_bad_bytes() -> None:
    pojo = SerializerSnapshot(RUNTIME + "PojoSerializerSnapshot", 2, (), "demo.Event")
    tuple_of = SerializerSnapshot(RUNTIME + "TupleSerializerSnapshot", 3, (_base("Long"), pojo))
    assert jt.key_type_for_snapshot(tuple_of) is None
    skipped = SerializerSnapshot(RUNTIME + "TupleSerializerSnapshot", 3, LONG_STRING, parsed=False)
    assert jt.key_type_for_snapshot(skipped) is None
    assert jt.key_type_for_snapshot(None) is None
    legacy = SerializerSnapshot(
        RUNTIME + "RowSerializer$RowSerializerSnapshot", 3, LONG_STRING, "legacy mode"
    )
    assert jt.key_type_for_snapshot(legacy) is None
    assert ROW_DATA is not None and ROW1 is not None
    with pytest.raises(
        FormatError, match="cannot read a RowData key at offset 0: binary row of 16"
    ):
        ROW_DATA.read(bytes.fromhex("00000010") + bytes(8))
    with pytest.raises(UnsupportedError, match="binary row of 6 bytes is not whole 4-byte words"):
        ROW_DATA.hash_code(bytes(6))
    with pytest.raises(FormatError, match="row ends inside its null mask"):
        ROW1.read(b"")


# --- against Flink itself --------------------------------------------------------------------


def _oracle_lines(lib: Path, seed: int, per_type: int) -> list[list[str]]:
    jars = [lib / f"{name}-2.3.0.jar" for name in ("flink-dist", "flink-table-runtime")]
    jars.append(lib / "flink-table-api-java-uber-2.3.0.jar")
    out = subprocess.run(
        ["java", "-cp", ":".join(map(str, jars)), str(ORACLE), str(seed), str(per_type)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [line.split(" ") for line in out.splitlines()]


@pytest.mark.flink
def test_generated_keys_match_flink(flink_dist: Path) -> None:
    """Every generated key of every field type: decoded, re-written, hashed and assigned to
    key groups at max parallelism 128, 256 and 4096 exactly as Flink 2.3 does."""
    key_types: dict[str, jt.KeyType] = {}
    compared = 0
    row_data: list[tuple[bytes, int]] = []  # also through the vectorised hash
    for line in _oracle_lines(flink_dist.parent, 20261123, 150):
        if line[0] == "SNAPSHOT":
            snapshot = read_versioned_snapshot(DataReader(bytes.fromhex(line[2])), at_end)
            assert snapshot.complete, line[1]
            key_type = jt.key_type_for_snapshot(snapshot)
            assert key_type is not None, line[1]
            key_types[line[1]] = key_type
            continue
        name, data, expected = line[1], bytes.fromhex(line[2]), [int(x) for x in line[3:]]
        key_type = key_types[name]
        value, end = key_type.read(data)
        assert end == len(data), (name, line[2])
        assert key_type.write(value) == data, (name, line[2])
        hash_code = key_type.hash_code(value)
        groups = [jt.assign_to_key_group(hash_code, p) for p in MAX_PARALLELISMS]
        assert [hash_code, *groups] == expected, (name, line[2])
        compared += 1
        if key_type.name == "RowData":
            row_data.append((data, hash_code))
    assert compared == 150 * len(key_types) and len(key_types) == 21
    keys = [data for data, _ in row_data]
    ends = np.cumsum([len(k) for k in keys])
    codes = np.zeros(len(keys), np.uint32)
    buffer = np.frombuffer(b"".join(keys), np.uint8)
    assert row_data_kernel(buffer, ends - [len(k) for k in keys], ends, codes).all()
    assert codes.view(np.int32).tolist() == [code for _, code in row_data]
    assert len(row_data) == 16 * 150
