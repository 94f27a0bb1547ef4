"""The Java-serialization reader against the CheckpointProperties tails real Flink wrote."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from statectl.errors import FormatError
from statectl.formats.java_serialization import JavaObject, read_object_stream
from statectl.formats.metadata import read_metadata
from tests.conftest import fixture_savepoint

SAVEPOINT = read_metadata(
    (fixture_savepoint("rocksdb_native_full") / "_metadata").read_bytes()
).properties
CHECKPOINT = read_metadata(
    (fixture_savepoint("rocksdb_retained_checkpoint") / "_metadata").read_bytes()
).properties


def test_reads_a_native_savepoints_properties() -> None:
    (properties,) = read_object_stream(SAVEPOINT)
    assert isinstance(properties, JavaObject)
    assert properties.class_name == "org.apache.flink.runtime.checkpoint.CheckpointProperties"
    assert properties.fields["forced"] is True
    savepoint_type = properties.fields["checkpointType"]
    assert savepoint_type.class_name == "org.apache.flink.runtime.checkpoint.SavepointType"
    assert savepoint_type.fields == {
        "formatType": "NATIVE",
        "name": "Savepoint",
        "postCheckpointAction": "NONE",
    }


def test_reads_a_retained_checkpoints_properties() -> None:
    (properties,) = read_object_stream(CHECKPOINT)
    assert properties.fields["discardSubsumed"] is True
    assert properties.fields["checkpointType"].fields == {
        "name": "Checkpoint",
        "sharingFilesStrategy": "FORWARD_BACKWARD",
    }


@pytest.mark.parametrize("data", [SAVEPOINT, CHECKPOINT], ids=["savepoint", "checkpoint"])
def test_every_cut_is_an_error(data: bytes) -> None:
    assert read_object_stream(data[:4]) == []  # an empty stream: metadata requires one object
    for cut in (*range(4), *range(5, len(data))):
        with pytest.raises(FormatError):
            read_object_stream(data[:cut])


@settings(max_examples=300)
@given(st.binary(max_size=64))
def test_random_bytes_raise_only_format_errors(data: bytes) -> None:
    with contextlib.suppress(FormatError):
        read_object_stream(b"\xac\xed\x00\x05" + data)
