"""Options shared by several commands."""

from __future__ import annotations

from typing import Annotated, Any

import typer

StorageOptions = Annotated[
    list[str] | None,
    typer.Option(
        "--storage-option",
        help="fsspec storage option KEY=VALUE (repeatable), e.g. endpoint_url=http://…",
    ),
]


def parse_key_values(pairs: list[str] | None, option: str) -> dict[str, str]:
    """`["a=1", "b=2"]` → `{"a": "1", "b": "2"}`; a pair without `=` is a usage error."""
    result: dict[str, str] = {}
    for pair in pairs or ():
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise typer.BadParameter(f"expected KEY=VALUE, got {pair!r}", param_hint=option)
        result[key] = value
    return result


def parse_storage_options(pairs: list[str] | None) -> dict[str, Any] | None:
    return parse_key_values(pairs, "--storage-option") or None
