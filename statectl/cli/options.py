"""Options and arguments shared by several commands, declared once, and their parsing; the
options that travel together as groups (`ReadOptions`, `SparkOptions`, `ShowOptions` and the
write groups made of them, see `option_groups`).

Names, help texts and defaults are part of the interface: users' scripts depend on them.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Callable
from dataclasses import MISSING, dataclass, field
from typing import TYPE_CHECKING, Annotated, Any, TypeVar, cast, get_type_hints

import typer

if TYPE_CHECKING:
    from statectl.api import Savepoint

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


# --- option groups ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ReadOptions:
    """How a command reads savepoints: `--storage-option` and `--allow-external-files`."""

    storage_option: StorageOptionFlags = None
    allow_external_files: AllowExternalFilesOption = False

    @property
    def storage_options(self) -> dict[str, Any] | None:
        return parse_storage_options(self.storage_option)

    def open(self, path: str) -> Savepoint:
        """The savepoint at `path`, read with these options."""
        import statectl

        options = self.storage_options
        return statectl.open(path, options, allow_external_files=self.allow_external_files)


@dataclass(frozen=True)
class SparkOptions:
    """Where a write runs its tasks: `--master`, `--conf` and `--head-start`."""

    master: MasterOption = DEFAULT_MASTER
    conf: SparkConfOption = None
    head_start: HeadStartOption = True

    @property
    def spark_conf(self) -> dict[str, str]:
        return parse_spark_conf(self.conf)


@dataclass(frozen=True)
class ShowOptions:
    """What `inspect` and `positions` show, and how: the savepoint, `--json` and `--operator`."""

    path: SavepointArgument
    json_output: JsonOption = False
    operator: OperatorOption = None


@dataclass(frozen=True)
class RewriteOptions:
    """How `migrate` and `upgrade` write: `--overwrite`, `--json`, then the `ReadOptions` and
    the `SparkOptions`."""

    overwrite: OverwriteOption = False
    json_output: JsonOption = False
    read: ReadOptions = field(default_factory=ReadOptions)
    spark: SparkOptions = field(default_factory=SparkOptions)


@dataclass(frozen=True)
class PlannedWriteOptions:
    """How `rescale` and `convert` write the savepoint they plan: the `SparkOptions`,
    `--overwrite`, `--dry-run`, `--json`, then the `ReadOptions`."""

    spark: SparkOptions = field(default_factory=SparkOptions)
    overwrite: OverwriteOption = False
    dry_run: DryRunOption = False
    json_output: JsonOption = False
    read: ReadOptions = field(default_factory=ReadOptions)


Command = TypeVar("Command", bound=Callable[..., None])


def option_groups(command: Command) -> Command:
    """`command` as typer sees it: each parameter typed with an option group (`ReadOptions`,
    `SparkOptions`, groups of groups) becomes that group's options, in its place; the command
    gets the group."""
    signature = inspect.signature(command, eval_str=True)
    groups: dict[str, type[Any]] = {}
    parameters: list[inspect.Parameter] = []
    for parameter in signature.parameters.values():
        group = parameter.annotation
        if dataclasses.is_dataclass(group):
            assert isinstance(group, type)
            groups[parameter.name] = group
            parameters += _options_of(group, parameter.kind)
        else:
            parameters.append(parameter)

    @functools.wraps(command)
    def grouped(**given: Any) -> None:
        for name, group in groups.items():
            given[name] = _gathered(group, given)
        command(**given)

    grouped.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
    grouped.__annotations__ = {p.name: p.annotation for p in parameters}
    return cast(Command, grouped)


def _options_of(group: type[Any], kind: inspect._ParameterKind) -> list[inspect.Parameter]:
    """The parameters typer sees for an option group: its fields, a nested group's in its place."""
    hints = get_type_hints(group, include_extras=True)
    parameters = []
    for field_ in dataclasses.fields(group):
        hint = hints[field_.name]
        if dataclasses.is_dataclass(hint):
            assert isinstance(hint, type)
            parameters += _options_of(hint, kind)
        else:
            default = inspect.Parameter.empty if field_.default is MISSING else field_.default
            parameters.append(
                inspect.Parameter(field_.name, kind, default=default, annotation=hint)
            )
    return parameters


def _gathered(group: type[Any], given: dict[str, Any]) -> Any:
    """`group` made of the values typer parsed for its options, which leave `given`."""
    hints = get_type_hints(group, include_extras=True)
    values = {
        field_.name: _gathered(hints[field_.name], given)
        if dataclasses.is_dataclass(hints[field_.name])
        else given.pop(field_.name)
        for field_ in dataclasses.fields(group)
    }
    return group(**values)
