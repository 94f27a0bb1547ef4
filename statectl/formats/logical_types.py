"""SQL logical types, as Flink's Table runtime snapshots carry them (Java-serialized).

Mirrors `org.apache.flink.table.types.logical.*` (`LogicalType.isNullable`/`typeRoot`, and each
subclass's fields: `length`, `precision`, `scale`, `elementType`, `keyType`/`valueType`, RowType's
`fields` of `RowField{name, type}`, StructuredType's `attributes`, RawType's `clazz`), read from the
`JavaObject`s of `java_serialization` (flink-state-values.md §1.5, §7). A `RowDataSerializer`
snapshot holds one per field; `ArrayDataSerializer`/`MapDataSerializer` snapshots hold the
element, key and value types.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from statectl.errors import FormatError
from statectl.formats.java_serialization import ClassDesc, JavaObject

_MAX_DEPTH = 64


@dataclass(frozen=True, slots=True)
class LogicalType:
    """One SQL type: its root (`BIGINT`, `DECIMAL`, `ROW`, …) and what that root needs."""

    root: str
    nullable: bool = True
    length: int | None = None  # CHAR, VARCHAR, BINARY, VARBINARY
    precision: int | None = None  # DECIMAL, TIME, TIMESTAMP*
    scale: int | None = None  # DECIMAL
    children: tuple[LogicalType, ...] = ()  # ARRAY/MULTISET element; MAP key, value; ROW fields
    field_names: tuple[str, ...] = ()  # ROW and STRUCTURED_TYPE
    class_name: str | None = None  # RAW: the Java class; STRUCTURED_TYPE: its implementation

    def describe(self) -> str:
        """SQL-like text: `DECIMAL(10, 2)`, `ROW<id BIGINT, name STRING>`, `ARRAY<INT>`."""
        text = _NAMES.get(self.root, self.root)
        if self.root in ("VARCHAR",) and self.length == _MAX_LENGTH:
            text = "STRING"
        elif self.root in ("VARBINARY",) and self.length == _MAX_LENGTH:
            text = "BYTES"
        elif self.length is not None:
            text += f"({self.length})"
        elif self.root == "DECIMAL":
            text += f"({self.precision}, {self.scale})"
        elif self.precision is not None:
            text += f"({self.precision})"
        if self.root in ("ROW", "STRUCTURED_TYPE"):
            inner = ", ".join(
                f"{n} {t.describe()}" for n, t in zip(self.field_names, self.children, strict=True)
            )
            text += f"<{inner}>"
        elif self.root == "RAW":
            text += f"('{self.class_name}')"
        elif self.children:
            text += "<" + ", ".join(c.describe() for c in self.children) + ">"
        return text if self.nullable else text + " NOT NULL"


_MAX_LENGTH = 2147483647
_NAMES = {
    "TIMESTAMP_WITHOUT_TIME_ZONE": "TIMESTAMP",
    "TIMESTAMP_WITH_LOCAL_TIME_ZONE": "TIMESTAMP_LTZ",
    "TIMESTAMP_WITH_TIME_ZONE": "TIMESTAMP_TZ",
    "TIME_WITHOUT_TIME_ZONE": "TIME",
}


def logical_type(obj: Any, depth: int = 0) -> LogicalType:
    """The `LogicalType` a deserialized Java object describes; `FormatError` if it is not one."""
    if depth > _MAX_DEPTH:
        raise FormatError("SQL type nested too deeply")
    if not isinstance(obj, JavaObject) or "typeRoot" not in obj.fields:
        raise FormatError(f"not a SQL logical type: {_name_of(obj)}")
    fields = obj.fields
    root = fields["typeRoot"]
    if not isinstance(root, str):
        raise FormatError("SQL logical type without a type root")
    nullable = bool(fields.get("isNullable", True))
    common: dict[str, Any] = {"nullable": nullable}
    if root in ("CHAR", "VARCHAR", "BINARY", "VARBINARY"):
        return LogicalType(root, length=_int(fields, "length"), **common)
    if root == "DECIMAL":
        return LogicalType(
            root, precision=_int(fields, "precision"), scale=_int(fields, "scale"), **common
        )
    if root.startswith(("TIMESTAMP", "TIME_")):
        return LogicalType(root, precision=_int(fields, "precision"), **common)
    if root in ("ARRAY", "MULTISET"):
        return LogicalType(
            root, children=(logical_type(fields["elementType"], depth + 1),), **common
        )
    if root == "MAP":
        key = logical_type(fields["keyType"], depth + 1)
        value = logical_type(fields["valueType"], depth + 1)
        return LogicalType(root, children=(key, value), **common)
    if root == "ROW":
        return _row_like(root, java_list(fields.get("fields")), depth, common, None)
    if root == "STRUCTURED_TYPE":
        implementation = fields.get("implementationClass")
        name = implementation.name if isinstance(implementation, ClassDesc) else None
        return _row_like(root, java_list(fields.get("attributes")), depth, common, name)
    if root == "DISTINCT_TYPE":
        return logical_type(fields.get("sourceType"), depth + 1)
    if root == "RAW":
        clazz = fields.get("clazz")
        name = clazz.name if isinstance(clazz, ClassDesc) else None
        return LogicalType(root, class_name=name, **common)
    return LogicalType(root, **common)


def _row_like(
    root: str, members: list[Any], depth: int, common: dict[str, Any], class_name: str | None
) -> LogicalType:
    names: list[str] = []
    types: list[LogicalType] = []
    for member in members:
        if not isinstance(member, JavaObject):
            raise FormatError(f"{root} field is not an object: {_name_of(member)}")
        name = member.fields.get("name")
        if not isinstance(name, str):
            raise FormatError(f"{root} field without a name")
        names.append(name)
        types.append(logical_type(member.fields.get("type"), depth + 1))
    return LogicalType(
        root, children=tuple(types), field_names=tuple(names), class_name=class_name, **common
    )


def java_list(obj: Any) -> list[Any]:
    """The elements of a serialized `java.util.List` (ArrayList, `List.of`, the unmodifiable
    and `Arrays.asList` wrappers around one, or an array)."""
    for _ in range(_MAX_DEPTH):
        if isinstance(obj, list):
            return obj
        if not isinstance(obj, JavaObject):
            break
        # CollSer: the serialized form of `List.of(…)` (its elements follow its i32 count).
        if obj.class_name in ("java.util.ArrayList", "java.util.LinkedList", "java.util.CollSer"):
            return [item for item in obj.annotations if not isinstance(item, bytes)]
        inner = next((obj.fields[n] for n in ("list", "c", "a") if n in obj.fields), None)
        if inner is None:
            break
        obj = inner
    raise FormatError(f"not a Java list: {_name_of(obj)}")


def _int(fields: dict[str, Any], name: str) -> int:
    value = fields.get(name)
    if not isinstance(value, int) or isinstance(value, bool):
        raise FormatError(f"SQL logical type without its {name}")
    return value


def _name_of(obj: Any) -> str:
    return obj.class_name if isinstance(obj, JavaObject) else type(obj).__name__
