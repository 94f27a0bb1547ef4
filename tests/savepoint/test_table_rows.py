"""A table written back as a state's entries: what does not fit the state is refused in one
line naming the column or row, before anything is written (`State.replace`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import statectl

SOURCE = Path(__file__).parents[1] / "fixtures" / "values" / "2.3.0-hashmap-canonical" / "savepoint"


def state(name: str, operator: str = "values") -> statectl.State:
    return statectl.open(str(SOURCE)).operator(operator).state(name)


def refused(target: statectl.State, table: pa.Table) -> str:
    with pytest.raises(statectl.StatectlError) as caught:
        target.replace(table)
    message = str(caught.value)
    assert "\n" not in message
    assert not target.operator.savepoint._edits  # nothing recorded, nothing to write
    return message


def with_column(table: pa.Table, name: str, values: Any) -> pa.Table:
    return table.set_column(table.schema.get_field_index(name), name, values)


def test_a_key_of_another_type() -> None:
    target = state("string")
    table = target.to_arrow()
    message = refused(target, with_column(table, "key", pa.array(range(table.num_rows))))
    assert "column 'key': expected string, found int64" in message


def test_a_value_of_another_type() -> None:
    target = state("long")
    table = target.to_arrow()
    message = refused(target, with_column(table, "value", table.column("key")))
    assert "column 'value': expected int64, found string" in message


def test_a_null_in_a_field_that_takes_none() -> None:
    target = state("tuple2")  # Tuple2<String, Long>: a Tuple's fields are never null
    rows = target.to_arrow().to_pylist()
    rows[2]["value"] = {**rows[2]["value"], "f1": None}
    message = refused(target, pa.Table.from_pylist(rows, schema=target.schema))
    assert message.startswith("values: state 'tuple2': row 2: ") or "row 2:" in message


def test_a_null_key() -> None:
    target = state("string")
    rows = target.to_arrow().to_pylist()
    rows[1]["key"] = None
    assert "row 1: key is null" in refused(target, pa.Table.from_pylist(rows, schema=target.schema))


def test_a_key_twice() -> None:
    target = state("string")
    rows = target.to_arrow().to_pylist()
    rows.append(dict(rows[0]))
    message = refused(target, pa.Table.from_pylist(rows, schema=target.schema))
    assert f"key {rows[0]['key']!r} appears more than once" in message


def test_a_namespace_that_does_not_parse() -> None:
    target = state("window-contents", "window")  # TimeWindow namespaces
    rows = target.to_arrow().to_pylist()
    rows[0]["namespace"] = None
    message = refused(target, pa.Table.from_pylist(rows, schema=target.schema))
    assert "row 0: namespace" in message


def test_a_missing_and_an_unexpected_column() -> None:
    target = state("string")
    table = target.to_arrow()
    assert "column 'value' (string) is missing" in refused(target, table.drop_columns(["value"]))
    extra = table.append_column("note", pa.array(["x"] * table.num_rows))
    assert "unexpected column 'note'" in refused(target, extra)


def test_a_list_element_in_a_subtask_the_operator_lacks() -> None:
    target = state("op-union", "opstate")
    table = pa.Table.from_pylist([{"subtask": 5, "value": 1}], schema=target.schema)
    assert "subtask 5 is not one of the operator's 0–1" in refused(target, table)
