"""`statectl migrate`: rename operators' uids and drop operators' state, into a new savepoint."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from statectl.cli import console, migrate_view, output
from statectl.cli.check_cmd import type_option
from statectl.cli.options import (
    DestinationOption,
    RewriteOptions,
    SourceArgument,
    option_groups,
)

if TYPE_CHECKING:
    from statectl.api.reports import Engine


def _repeatable(flag: str, metavar: str, help: str) -> Any:
    """A list option given once per value (typer collects the repeats)."""
    return typer.Option(flag, metavar=metavar, help=help)


@option_groups
def migrate_command(
    source: SourceArgument,
    destination: DestinationOption,
    rename_uid: Annotated[
        list[str] | None,
        _repeatable(
            "--rename-uid",
            "OLD=NEW",
            "Give operator OLD (uid or 32-hex id) the uid NEW and its id (repeatable).",
        ),
    ] = None,
    drop: Annotated[
        list[str] | None,
        _repeatable(
            "--drop",
            "UID_OR_ID",
            "Remove this operator and its state from the savepoint (repeatable).",
        ),
    ] = None,
    drop_state: Annotated[
        list[str] | None,
        _repeatable(
            "--drop-state", "OP/NAME", "Remove keyed state NAME of operator OP (repeatable)."
        ),
    ] = None,
    rename_state: Annotated[
        list[str] | None,
        _repeatable(
            "--rename-state", "OP/OLD=NEW", "Rename keyed state OLD of operator OP (repeatable)."
        ),
    ] = None,
    ttl: Annotated[
        list[str] | None,
        _repeatable(
            "--ttl",
            "OP/NAME=DURATION",
            "Turn TTL on for keyed state NAME (the job's new TTL, e.g. 7d, 12h, 30m): every "
            "value gets now as its last-access time (repeatable).",
        ),
    ] = None,
    no_ttl: Annotated[
        list[str] | None,
        _repeatable("--no-ttl", "OP/NAME", "Turn TTL off for keyed state NAME (repeatable)."),
    ] = None,
    kafka_offset: Annotated[
        list[str] | None,
        _repeatable(
            "--kafka-offset",
            "OP:TOPIC[:PARTITION]=OFFSET",
            "Move a Kafka source (KafkaSource or FlinkKafkaConsumer) of operator OP: TOPIC (* for "
            "all) and PARTITION (all if left out) resume at OFFSET (the next record read) or at "
            "earliest, latest or committed (repeatable).",
        ),
    ] = None,
    file_position: Annotated[
        list[str] | None,
        _repeatable(
            "--file-position",
            "OP:SPLIT=OFFSET[,RECORDS]|records:N|start",
            "Move a FileSource split (by split id or path) of operator OP: to a byte offset and "
            "records to skip, to N records from its start, or to its start (repeatable).",
        ),
    ] = None,
    classpath: Annotated[
        list[str] | None,
        _repeatable(
            "--classpath",
            "JAR_OR_DIR",
            "The new job's jar or class folder: every state whose type it changed (as check "
            "says) is rewritten into its layout (repeatable).",
        ),
    ] = None,
    types: Annotated[
        list[str] | None,
        _repeatable(
            "--type",
            "OP/STATE=TYPE",
            "With --classpath: a state's new type declared in code, as inspect prints types "
            "(repeatable).",
        ),
    ] = None,
    rename_field: Annotated[
        list[str] | None,
        _repeatable(
            "--rename-field",
            "OP/STATE:OLD=NEW",
            "With --classpath: POJO field OLD of the state is field NEW in the new job "
            "(repeatable).",
        ),
    ] = None,
    narrow: Annotated[
        bool,
        typer.Option(
            "--narrow",
            help="With --classpath: let numbers narrow (BIGINT to INT, DOUBLE to FLOAT), "
            "each value checked to fit.",
        ),
    ] = False,
    on_error: Annotated[
        str,
        typer.Option(
            "--on-error",
            metavar="fail|null",
            help="With --classpath: a value that cannot be converted fails the migration "
            "(default), or is written as null where the new field is nullable.",
        ),
    ] = "fail",
    *,
    rewrite: RewriteOptions,
) -> None:
    """Rename or drop operators and states, set TTL, positions or the new job's types.

    A renamed operator gets the operator id Flink derives from its new uid, so a job whose
    operator now has .uid("NEW") restores the old state. A dropped operator leaves the
    savepoint, so a job without it restores without --allowNonRestoredState. A dropped or
    renamed state leaves (or changes) the operator's state headers, so a job that no longer
    declares it, or declares it under the new name, restores it. TTL on wraps every value with
    a last-access time (now) and gives the state TTL's serializer: Flink before 2.2 refuses a
    state whose TTL changed unless it is migrated so. Every other operator is carried over
    unchanged; all files are copied into DESTINATION and referenced relatively, so it can be
    moved anywhere. No Spark, no JVM; the input is never modified.

    With --classpath (the new job's jar), every state whose type the new job changed is
    rewritten so that it restores it with nothing refused and nothing lost: POJO fields added
    (null, or a primitive's default), removed or renamed (--rename-field), Row and Tuple fields
    (--type), numbers widened, inside list, map and operator list state and TTL. A value that
    cannot be converted is refused in one line naming the state, the key and the field, and
    nothing is written.

    Examples:

      statectl migrate ./sp -o ./sp-renamed --rename-uid keyed-str=sessions

      statectl migrate ./sp -o ./sp-new --drop old-enricher --drop 0cad1b1f959e0cc01a89a8ec2be0100c

      statectl migrate s3://b/chk-42 -o s3://b/sp-42 --rename-uid Map=normalize --json

      statectl migrate ./sp -o ./sp-ttl --ttl orders/totals=7d --no-ttl orders/seen

      statectl migrate ./sp -o ./sp-clean --drop-state orders/legacy --rename-state orders/cnt=count

      statectl migrate ./sp -o ./sp-rewound --kafka-offset src:orders=earliest

      statectl migrate ./sp -o ./sp2 --classpath job-2.jar --rename-field orders/o:name=title
    """
    import statectl
    from statectl.api import stale_staging

    renames = _parse_renames(rename_uid)
    drops = [_state_of(v, "--drop-state") for v in drop_state or ()]
    state_renames = [_renamed_state(v) for v in rename_state or ()]
    ttls = [_ttl_of(v) for v in ttl or ()]
    no_ttls = [_state_of(v, "--no-ttl") for v in no_ttl or ()]
    offsets = [_kafka_offset(v) for v in kafka_offset or ()]
    files = [_file_position(v) for v in file_position or ()]
    if offsets or files:
        if drops or state_renames or ttls or no_ttls or classpath:
            raise typer.BadParameter(
                "source positions and state edits go in separate runs",
                param_hint="'--kafka-offset' / '--file-position'",
            )
        _move_sources(source, destination, offsets, files, renames, drop or (), rewrite)
        return
    given_types = dict(type_option(v) for v in types or ())
    field_renames = _field_renames(rename_field)
    if (given_types or field_renames or narrow or on_error != "fail") and not classpath:
        raise typer.BadParameter(
            "--type, --rename-field, --narrow and --on-error need the new job's classpath",
            param_hint="'--classpath'",
        )
    if on_error not in ("fail", "null"):
        raise typer.BadParameter(
            f"expected fail or null, got {on_error!r}", param_hint="--on-error"
        )
    for entry in classpath or ():
        if not Path(entry).exists():
            raise typer.BadParameter(f"{entry}: no such file or folder", param_hint="--classpath")
    if not (renames or drop or drops or state_renames or ttls or no_ttls or classpath):
        raise typer.BadParameter(
            "nothing to do: give at least one of them",
            param_hint="'--rename-uid' / '--drop' / '--drop-state' / '--rename-state' / '--ttl'",
        )
    options = rewrite.read.storage_options
    # A schema migration's values are tried, then written, by the same engine's tasks.
    engine = _engine(source, destination, rewrite) if classpath else None
    savepoint = rewrite.read.open(source)
    console.warn_stale_staging(stale_staging(destination, options))
    render = output.renderer(rewrite.json_output)
    # The trial of a schema migration's values: a bar on a terminal, no "written" line.
    with render.progress("migrate", writes=False) as trying:
        plan = statectl.plan_migration(  # of a consistent savepoint
            savepoint,
            renames,
            drop or (),
            drop_states=drops,
            rename_states=state_renames,
            ttl=ttls,
            no_ttl=no_ttls,
            classpath=classpath or (),
            types=given_types,
            rename_fields=field_renames,
            narrow=narrow,
            on_error=on_error,
            engine=engine,
            progress=trying.update,
        )
    with render.progress("migrate") as progress:
        report = statectl.write_migration(
            plan,
            destination,
            overwrite=rewrite.overwrite,
            storage_options=options,
            progress=progress.update,
            master=rewrite.spark.master,
            spark_conf=rewrite.spark.spark_conf,
            head_start=rewrite.spark.head_start,
            engine=engine,
        )
    render.migrate(report)


def _engine(source: str, destination: str, rewrite: RewriteOptions) -> Engine | None:
    from statectl.api import prepare_engine

    return prepare_engine(
        source,
        destination,
        master=rewrite.spark.master,
        spark_conf=rewrite.spark.spark_conf,
        storage_options=rewrite.read.storage_options,
        head_start=rewrite.spark.head_start,
    )


def _parse_renames(pairs: list[str] | None) -> list[tuple[str, str]]:
    renames = []
    for pair in pairs or ():
        old, sep, new = pair.partition("=")
        if not sep or not old or not new:
            raise typer.BadParameter(f"expected OLD=NEW, got {pair!r}", param_hint="--rename-uid")
        renames.append((old, new))
    return renames


def _field_renames(values: list[str] | None) -> dict[str, dict[str, str]]:
    """`OP/STATE:OLD=NEW` options as {"OP/STATE": {OLD: NEW}}."""
    renames: dict[str, dict[str, str]] = {}
    for value in values or ():
        target, colon, fields = value.rpartition(":")
        old, equals, new = fields.partition("=")
        if not colon or not equals or not old or not new or "/" not in target.strip("/"):
            raise typer.BadParameter(
                f"expected OP/STATE:OLD=NEW, got {value!r}", param_hint="--rename-field"
            )
        renames.setdefault(target, {})[old] = new
    return renames


def _state_of(value: str, option: str) -> tuple[str, str]:
    """`OP/NAME` (the state name may hold `/`, as timer states do)."""
    operator, sep, state = value.partition("/")
    if not sep or not operator or not state:
        raise typer.BadParameter(f"expected OP/NAME, got {value!r}", param_hint=option)
    return operator, state


def _renamed_state(value: str) -> tuple[str, str, str]:
    target, sep, new = value.rpartition("=")
    if not sep or not new:
        raise typer.BadParameter(f"expected OP/OLD=NEW, got {value!r}", param_hint="--rename-state")
    operator, old = _state_of(target, "--rename-state")
    return operator, old, new


_UNITS_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def _ttl_of(value: str) -> tuple[str, str, int]:
    target, sep, duration = value.rpartition("=")
    if not sep:
        raise typer.BadParameter(f"expected OP/NAME=DURATION, got {value!r}", param_hint="--ttl")
    operator, state = _state_of(target, "--ttl")
    return operator, state, _duration_ms(duration)


def _duration_ms(text: str) -> int:
    """`7d`, `12h`, `30m`, `90s`, `500ms`: a positive duration in milliseconds."""
    number = text.rstrip("abcdefghijklmnopqrstuvwxyz")
    unit = text[len(number) :] or "ms"
    if not number.isdigit() or unit not in _UNITS_MS or int(number) <= 0:
        raise typer.BadParameter(
            f"expected a duration such as 7d, 12h, 30m, 90s or 500ms, got {text!r}",
            param_hint="--ttl",
        )
    return int(number) * _UNITS_MS[unit]


def _move_sources(
    source: str,
    destination: str,
    offsets: list[tuple[str, str | None, int | None, int | str]],
    files: list[tuple[str, str, tuple[int, int] | None]],
    renames: list[tuple[str, str]],
    drops: list[str] | tuple[str, ...],
    rewrite: RewriteOptions,
) -> None:
    import statectl
    from statectl.api import stale_staging

    options = rewrite.read.storage_options
    savepoint = rewrite.read.open(source)
    console.warn_stale_staging(stale_staging(destination, options))
    report = statectl.set_positions(
        savepoint, destination, kafka_offsets=offsets, file_positions=files, renames=renames,
        drops=drops, overwrite=rewrite.overwrite, storage_options=options,
    )  # fmt: skip
    migrate_view.print_position_edits(report, rewrite.json_output)


def _kafka_offset(value: str) -> tuple[str, str | None, int | None, int | str]:
    target, sep, offset = value.rpartition("=")
    parts = target.split(":")
    if not sep or len(parts) not in (2, 3) or not all(parts):
        raise typer.BadParameter(
            f"expected OP:TOPIC[:PARTITION]=OFFSET, got {value!r}", param_hint="--kafka-offset"
        )
    topic = None if parts[1] == "*" else parts[1]
    partition = _integer(parts[2], "--kafka-offset") if len(parts) == 3 else None
    marker = offset.lower()
    at = (
        marker
        if marker in ("earliest", "latest", "committed")
        else _integer(offset, "--kafka-offset")
    )
    return parts[0], topic, partition, at


def _file_position(value: str) -> tuple[str, str, tuple[int, int] | None]:
    target, sep, where = value.rpartition("=")
    operator, colon, split = target.partition(":")
    if not sep or not colon or not operator or not split:
        raise typer.BadParameter(
            f"expected OP:SPLIT=OFFSET[,RECORDS]|records:N|start, got {value!r}",
            param_hint="--file-position",
        )
    if where == "start":
        return operator, split, None
    if where.startswith("records:"):
        return operator, split, (-1, _integer(where[len("records:") :], "--file-position"))
    offset, _, records = where.partition(",")
    return (
        operator,
        split,
        (_integer(offset, "--file-position"), _integer(records or "0", "--file-position")),
    )


def _integer(text: str, option: str) -> int:
    if not text.isdigit():
        raise typer.BadParameter(
            f"expected a non-negative integer, got {text!r}", param_hint=option
        )
    return int(text)
