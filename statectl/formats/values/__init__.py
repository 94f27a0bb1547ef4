"""Value codecs: bytes ⇄ values for every serializer family statectl reads (docs/values.md).

`codec_for(snapshot)` finds a codec by the snapshot's class name; importing this package
registers every family (one module each).
"""

from statectl.formats.values import avro, composites, kryo, pojo, row_data, scalars  # noqa: F401  (registration)
from statectl.formats.values.composites import TtlCodec
from statectl.formats.values.model import (
    Codec,
    Context,
    CorruptSnapshot,
    Raw,
    RawCodec,
    TtlValue,
    Undecodable,
    codec_for,
    register,
    registered,
)

__all__ = [
    "Codec",
    "Context",
    "CorruptSnapshot",
    "Raw",
    "RawCodec",
    "TtlCodec",
    "TtlValue",
    "Undecodable",
    "codec_for",
    "register",
    "registered",
]
