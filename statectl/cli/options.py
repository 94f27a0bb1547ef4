"""Options and arguments shared by several commands, declared once, and their parsing.

Names, help texts and defaults are part of the interface: users' scripts depend on them.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

DEFAULT_MASTER = "local[*]"

# --- arguments -------------------------------------------------------------------------------

SavepointArgument = Annotated[
    str, typer.Argument(help="Savepoint directory or its _metadata file (path or URL).")
]
SourceArgument = Annotated[
    str,
    typer.Argument(
        help="Savepoint or retained checkpoint (chk-N) to read: directory or _metadata."
    ),
]

# --- output ----------------------------------------------------------------------------------

JsonOption = Annotated[bool, typer.Option("--json", help="Print one JSON document to stdout.")]
JsonSummaryOption = Annotated[bool, typer.Option("--json", help="Print a JSON summary to stdout.")]
DestinationOption = Annotated[
    str,
    typer.Option("--output", "-o", metavar="DESTINATION", help="Where to write the new savepoint."),
]
OverwriteOption = Annotated[bool, typer.Option(help="Replace DESTINATION if it exists.")]
OverwriteOutOption = Annotated[bool, typer.Option(help="Replace OUT if it exists.")]
DryRunOption = Annotated[bool, typer.Option("--dry-run", help="Print the plan; write nothing.")]
DebugOption = Annotated[bool, typer.Option("--debug", help="Show tracebacks for errors.")]

# --- what to read ----------------------------------------------------------------------------

OperatorOption = Annotated[
    str | None,
    typer.Option(
        "--operator", "-O", metavar="OPERATOR", help="Only this operator (uid, name or 32-hex id)."
    ),
]
AllowExternalFilesOption = Annotated[
    bool,
    typer.Option(
        "--allow-external-files",
        help="Read files that absolute state handles name anywhere; by default only in the "
        "checkpoint's own folder and its job's shared and taskowned folders.",
    ),
]
StorageOptionFlags = Annotated[
    list[str] | None,
    typer.Option(
        "--storage-option",
        metavar="KEY=VALUE",
        help="fsspec storage option KEY=VALUE (repeatable), e.g. endpoint_url=http://minio:9000",
    ),
]

# --- Spark -----------------------------------------------------------------------------------

MasterOption = Annotated[
    str, typer.Option(metavar="URL", help="Spark master URL, as for spark-submit.")
]
# Commands that also run without Spark: a master asks for it.
MasterImpliesSparkOption = Annotated[
    str | None,
    typer.Option(metavar="URL", help="Spark master URL, as for spark-submit (implies --spark)."),
]
HeadStartOption = Annotated[
    bool,
    typer.Option(
        "--head-start/--no-head-start",
        help="With an embedded Spark (local master): run tasks in this process while Spark "
        "starts, and start it only for work that would outlast its start. --no-head-start: "
        "every task on Spark.",
    ),
]
SparkConfOption = Annotated[
    list[str] | None,
    typer.Option("--conf", metavar="KEY=VALUE", help="Spark configuration KEY=VALUE (repeatable)."),
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


def parse_spark_conf(pairs: list[str] | None) -> dict[str, str]:
    return parse_key_values(pairs, "--conf")


KEYED_FORMATS = ("native", "canonical")

KeyedFormatOption = Annotated[
    str | None,
    typer.Option(
        "--format",
        metavar="FORMAT",
        help="Keyed state of the output: 'native' (RocksDB instances) or 'canonical' (key-group "
        "blocks). Default: the input's.",
    ),
]


def parse_keyed_format(value: str | None) -> str | None:
    """'native', 'canonical' or None (the input's), from the --format option."""
    if value is None:
        return None
    if value.lower() not in KEYED_FORMATS:
        raise typer.BadParameter(
            f"{value!r}: choose 'native' or 'canonical'", param_hint="--format"
        )
    return value.lower()
