"""`statectl convert`: a RocksDB NATIVE savepoint or retained checkpoint → a CANONICAL savepoint."""

from __future__ import annotations

from typing import Annotated

import typer

from statectl.cli.options import (
    DEFAULT_MASTER,
    DestinationOption,
    DryRunOption,
    JsonOption,
    MasterOption,
    OverwriteOption,
    SourceArgument,
    SparkConfOption,
    StorageOptionFlags,
)
from statectl.cli.rescale_cmd import WriteFlags, plan_and_write
from statectl.operations.rescale.plan import plan_rescale

FORMATS = ("canonical",)


def convert(
    source: SourceArgument,
    destination: DestinationOption,
    format: Annotated[
        str, typer.Option("--format", help="Output format; only 'canonical'.")
    ] = "canonical",
    master: MasterOption = DEFAULT_MASTER,
    conf: SparkConfOption = None,
    overwrite: OverwriteOption = False,
    dry_run: DryRunOption = False,
    json_output: JsonOption = False,
    storage_option: StorageOptionFlags = None,
) -> None:
    """Turn RocksDB (or ForSt) native keyed state into canonical key-group blocks, at the same
    parallelism.

    Each RocksDB instance (native savepoint, or incremental checkpoint with its shared files) is
    opened read-only with rocksdict on the Spark executor's local disk; its rows become
    canonical blocks, which the hashmap and RocksDB backends restore (Flink 2.3's ForSt restores
    no canonical savepoint). Other state is copied, so the output is self-contained; the input
    is never modified.

    Examples:

      statectl convert ./savepoint-native -o ./savepoint-canonical --format canonical

      statectl convert s3://b/checkpoints/job/chk-42 -o s3://b/savepoints/sp-42
    """
    if format.lower() not in FORMATS:
        raise typer.BadParameter(
            f"{format!r}: statectl writes only CANONICAL savepoints", param_hint="--format"
        )
    flags = WriteFlags(destination, overwrite, dry_run, json_output, master, conf)
    # the same parallelism: native state becomes canonical
    plan_and_write("convert", source, storage_option, flags, lambda sp: plan_rescale(sp, None))
