"""`statectl uid-hash`: the operator id Flink derives from a uid."""

from __future__ import annotations

from typing import Annotated

import typer

from statectl.cli import output
from statectl.cli.options import JsonOption


def uid_hash(
    uids: Annotated[
        list[str],
        typer.Argument(metavar="UID...", help="Operator uids, as the job sets them with .uid()."),
    ],
    json_output: JsonOption = False,
) -> None:
    """Print the operator id (32 hex) Flink gives each uid.

    The id, murmur3_128 with seed 0 of the uid's UTF-8 bytes, is what `_metadata` stores and
    what Flink's logs and web UI show; use it to find an operator's state, or with setUidHash.

    Examples:

      statectl uid-hash keyed-str

      statectl uid-hash src sink --json | jq -r '.[].id'
    """
    import statectl

    if not all(uids):
        raise typer.BadParameter("a uid must not be empty", param_hint="UID")
    ids = [(uid, statectl.uid_hash(uid)) for uid in uids]
    output.renderer(json_output).uid_hash(ids)
