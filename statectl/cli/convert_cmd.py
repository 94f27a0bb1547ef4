"""`statectl convert`: keyed state to CANONICAL blocks or NATIVE RocksDB instances, at the same
parallelism."""

from __future__ import annotations

from typing import Annotated

import typer

from statectl.cli.options import (
    DestinationOption,
    PlannedWriteOptions,
    SourceArgument,
    option_groups,
    parse_keyed_format,
)
from statectl.cli.rescale_cmd import plan_and_write


@option_groups
def convert(
    source: SourceArgument,
    destination: DestinationOption,
    format: Annotated[
        str,
        typer.Option(
            "--format",
            metavar="FORMAT",
            help="Keyed state of the output: 'canonical' (key-group blocks) or 'native' "
            "(RocksDB instances).",
        ),
    ] = "canonical",
    *,
    write: PlannedWriteOptions,
) -> None:
    """Convert keyed state between RocksDB native instances and canonical key-group blocks.

    RocksDB (or ForSt) native keyed state becomes canonical key-group blocks, or canonical keyed
    state RocksDB native instances, at the same parallelism. Each RocksDB instance (native
    savepoint, or incremental checkpoint with its shared files) is opened read-only with
    rocksdict on the Spark executor's local disk; its rows become canonical blocks, which the
    hashmap and RocksDB backends restore (Flink 2.3's ForSt restores no canonical savepoint).
    With --format native, every subtask's keyed state becomes a RocksDB instance (a NATIVE
    savepoint, for the RocksDB backend). Other state is copied, so the output is self-contained;
    the input is never modified.

    Examples:

      statectl convert ./savepoint-native -o ./savepoint-canonical --format canonical

      statectl convert ./savepoint-hashmap -o ./savepoint-rocksdb --format native

      statectl convert s3://b/checkpoints/job/chk-42 -o s3://b/savepoints/sp-42
    """
    import statectl

    keyed_format = parse_keyed_format(format)
    plan_and_write(
        "convert",
        source,
        destination,
        write,
        lambda sp: statectl.plan_rescale(sp, keyed_format=keyed_format),  # same parallelism
    )
