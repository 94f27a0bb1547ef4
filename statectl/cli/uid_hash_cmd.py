"""`statectl uid-hash`: the operator id Flink derives from a uid."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from statectl.cli import output
from statectl.cli.options import JsonOption
from statectl.savepoint.model import operator_id_for_uid


def uid_hash(
    uids: Annotated[
        list[str], typer.Argument(metavar="UID...", help="Operator uids, as set with .uid(…).")
    ],
    json_output: JsonOption = False,
) -> None:
    """Print the operator id (32 hex) Flink gives each uid: murmur3_128, seed 0, of its UTF-8.

    The id is what `_metadata` stores and what Flink's logs and web UI show; use it to find an
    operator's state, or with setUidHash.

    Examples:

      statectl uid-hash keyed-str

      statectl uid-hash src sink --json | jq -r '.[].id'
    """
    for uid in uids:
        if not uid:
            raise typer.BadParameter("a uid must not be empty", param_hint="UID")
    ids = uid_ids(uids)
    if json_output:
        output.print_json(ids)
        return
    width = max(len(uid) for uid in uids)
    for entry in ids:
        print(f"{entry['uid']:<{width}}  {entry['id']}")


def uid_ids(uids: list[str]) -> list[dict[str, Any]]:
    return [{"uid": uid, "id": operator_id_for_uid(uid).hex()} for uid in uids]
