"""Arrow columns back to codec values: the inverse of `Codec.to_arrow` over whole columns, so
that a state read as a typed table, edited, can be encoded again (`StateCodec.encode_*`).

A column is first cast to its storage form, recursively through structs, lists and maps:
dates, times, timestamps and durations to the integers of their unit (what the codecs' values
are, and `date64`'s milliseconds survive, which `as_py()`'s `datetime.date` would drop),
extension types (Kryo's and the source splits' JSON) to their storage. Each non-null value is
then handed to its codec's `from_arrow`; null stays None.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from statectl.formats.values.model import Codec, Raw

if TYPE_CHECKING:
    import pyarrow as pa


def storage_type(arrow: pa.DataType) -> pa.DataType:
    """`arrow` with every temporal type replaced by its integer and every extension type by its
    storage, at any depth."""
    import pyarrow as pa

    types = pa.types
    if isinstance(arrow, pa.BaseExtensionType):
        return storage_type(arrow.storage_type)
    if types.is_date32(arrow) or types.is_time32(arrow):
        return pa.int32()
    if (
        types.is_date64(arrow)
        or types.is_time64(arrow)
        or types.is_timestamp(arrow)
        or types.is_duration(arrow)
    ):
        return pa.int64()
    if types.is_struct(arrow):
        return pa.struct([f.with_type(storage_type(f.type)) for f in arrow])
    if types.is_map(arrow):
        return pa.map_(
            arrow.key_field.with_type(storage_type(arrow.key_type)),
            arrow.item_field.with_type(storage_type(arrow.item_type)),
        )
    if types.is_large_list(arrow):
        return pa.large_list(arrow.value_field.with_type(storage_type(arrow.value_type)))
    if types.is_fixed_size_list(arrow):
        return pa.list_(
            arrow.value_field.with_type(storage_type(arrow.value_type)), arrow.list_size
        )
    if types.is_list(arrow):
        return pa.list_(arrow.value_field.with_type(storage_type(arrow.value_type)))
    return arrow


def arrow_values(column: pa.Array | pa.ChunkedArray) -> list[Any]:
    """A column's Python values in its storage form (`storage_type`)."""
    storage = storage_type(column.type)
    if storage != column.type:
        column = column.cast(storage)
    values: list[Any] = column.to_pylist()
    return values


def value_from_arrow(codec: Codec | None, value: Any) -> Any:
    """One Python value of a column back to the codec's value; without a codec the column is the
    raw bytes (a serializer statectl does not read)."""
    if value is None:
        return None
    if codec is None:
        return value if isinstance(value, Raw) else Raw(bytes(value), "unknown", "no serializer")
    return codec.from_arrow(value)


def values_from_arrow(codec: Codec | None, column: pa.Array | pa.ChunkedArray) -> list[Any]:
    """Every value of a column of `codec.arrow_type()` (as `to_arrow` built it), as the codec's
    values: `codec.encode` gives back the bytes each was read from. Null stays None."""
    return [value_from_arrow(codec, value) for value in arrow_values(column)]
