"""Source state as values: the splits of FLIP-27 `SourceReaderState` and the legacy
FlinkKafkaConsumer's `topic-partition-offset-states`.

`SourceOperator` keeps its reader's splits as operator list state of `byte[]`
(`BytePrimitiveArraySerializer`) holding `SimpleVersionedSerialization.writeVersionAndSerialize`
of the split; the split serializer is not in the snapshot, so the kind of source is told by
which layout reads the bytes exactly (`source_state.split_kinds`). A split that parses as no
kind, or as several, stays raw with the reason; `statectl positions` settles such ties with the
coordinator state and the operator's name. The legacy consumer's union state is a
`Tuple2<KafkaTopicPartition, Long>` whose partition Kryo 2 wrote with its FieldSerializer
(`source_state.read_legacy_kafka_element`).

A split's JSON form is an object of its fields (`kind` first); its Arrow type is Arrow's JSON
extension type, since one state's splits share no static type. A value keeps the bytes it was
read from and is written back as those bytes.
"""

from __future__ import annotations

import dataclasses
import json
import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from statectl.errors import FormatError
from statectl.formats import source_state
from statectl.formats.values.model import Codec, Undecodable

if TYPE_CHECKING:
    import pyarrow as pa

_I32 = struct.Struct(">i")


@dataclass(frozen=True, slots=True)
class SourceValue:
    """A decoded split (or legacy offset), and the bytes it was read from."""

    kind: str
    fields: dict[str, Any]
    data: bytes


class _SourceCodec(Codec):
    """Common to both: JSON-typed values that write back the bytes they came from."""

    __slots__ = ()

    def write(self, value: Any, out: bytearray) -> None:
        if not isinstance(value, SourceValue):
            raise Undecodable(f"{self.describe()} values are written back only as read")
        out += value.data

    def arrow_type(self) -> pa.DataType:
        import pyarrow as pa

        return pa.json_()

    def to_arrow(self, value: Any) -> Any:
        return json.dumps(self.to_json(value), ensure_ascii=False, separators=(",", ":"))

    def from_arrow(self, value: Any) -> Any:
        raise Undecodable(f"{self.describe()} values are written back only as read, not from JSON")

    def to_json(self, value: Any) -> Any:
        return {"kind": value.kind, **value.fields}


class SourceSplitCodec(_SourceCodec):
    """One `SourceReaderState` element: i32 length, then the versioned split."""

    __slots__ = ()
    type_class = "SourceSplit"

    def read(self, buf: memoryview, pos: int) -> tuple[Any, int]:
        (length,) = _I32.unpack_from(buf, pos)
        end = pos + 4 + length
        if length < 0 or end > len(buf):
            raise FormatError(f"split of {length} bytes at offset {pos} runs past the end")
        element = bytes(buf[pos:end])
        split = source_state.read_reader_state_element(element)
        kinds = source_state.split_kinds(split)
        if len(kinds) != 1:
            found = " or ".join(kinds) or "no known source"
            raise Undecodable(f"split of version {split.version} reads as {found}")
        decoded = source_state.read_split(kinds[0], split)
        return SourceValue(kinds[0], _fields(decoded), element), end

    def describe(self) -> str:
        return "SOURCE_SPLIT"


class LegacyKafkaOffsetCodec(_SourceCodec):
    """One `Tuple2<KafkaTopicPartition, Long>` of FlinkKafkaConsumerBase's union state."""

    __slots__ = ()
    type_class = "Tuple2<KafkaTopicPartition, Long>"

    def read(self, buf: memoryview, pos: int) -> tuple[Any, int]:
        element = bytes(buf[pos:])  # the element is the whole value: it ends with the offset
        offset = source_state.read_legacy_kafka_element(element)
        return SourceValue("legacy-kafka", _fields(offset), element), len(buf)

    def describe(self) -> str:
        return "KAFKA_PARTITION_OFFSET"


def _fields(value: Any) -> dict[str, Any]:
    fields = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    for marker in ("starting_marker", "stopping_marker", "marker"):
        if hasattr(value, marker):
            fields[marker] = getattr(value, marker)
    if isinstance(fields.get("hostnames"), tuple):
        fields["hostnames"] = list(fields["hostnames"])
    return fields


def source_codec(state_name: str) -> Codec | None:
    """The codec of a source's operator state, by its name; None for any other state."""
    if state_name == source_state.READER_STATE:
        return SourceSplitCodec()
    if state_name == source_state.LEGACY_KAFKA_STATE:
        return LegacyKafkaOffsetCodec()
    return None
