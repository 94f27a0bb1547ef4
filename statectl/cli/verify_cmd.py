"""`statectl verify`: the check a CI step runs before deploying a savepoint.

Findings are the command's data: one line each on stdout (or one JSON document with `--json`).
Exit 0 when clean, 1 when anything was found, 2 for usage errors.
"""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer

from statectl.cli import output
from statectl.cli.options import (
    JsonOption,
    SavepointArgument,
    StorageOptionFlags,
    parse_storage_options,
)
from statectl.operations.verify import Verification, verify_location


def verify(
    path: SavepointArgument,
    deep: Annotated[
        bool,
        typer.Option(
            "--deep",
            help="Also walk every key-group block and check every key's key group.",
        ),
    ] = False,
    json_output: JsonOption = False,
    storage_option: StorageOptionFlags = None,
) -> None:
    """Check that a savepoint is complete and consistent; exit 1 when it is not.

    Files exist with their declared sizes, key-group ranges cover every key group exactly once,
    offsets lie inside their files in order, headers parse; with --deep every key-group block
    walks cleanly and every key sits in its key group.

    Examples:

      statectl verify ./savepoint-1a2b3c-0123456789ab

      statectl verify s3://bucket/savepoints/sp-1 --deep --json | jq '.findings[]'
    """
    result = verify_location(path, parse_storage_options(storage_option), deep)
    if json_output:
        output.print_json(verification_to_json(result))
    else:
        _print(result)
    if not result.ok:
        raise typer.Exit(1)


def verification_to_json(result: Verification) -> dict[str, Any]:
    return {
        "location": result.location,
        "ok": result.ok,
        "deep": result.deep,
        "checked": {
            "operators": result.operators,
            "subtasks": result.subtasks,
            "files": result.files,
            "key_groups": result.key_groups,
            **({"entries": result.entries} if result.deep else {}),
        },
        "findings": [
            {
                "operator": f.operator,
                "operator_id": f.operator_id,
                "subtask": f.subtask,
                "file": f.file,
                "problem": f.problem,
            }
            for f in result.findings
        ],
        "notes": list(result.notes),
    }


def _print(result: Verification) -> None:
    for note in result.notes:
        print(f"statectl: note: {note}", file=sys.stderr)
    for finding in result.findings:
        sys.stdout.write(finding.line(result.location) + "\n")
    if result.ok:
        c = output.counted
        checked = (
            f"{c(result.operators, 'operator')}, {c(result.subtasks, 'subtask')}, "
            f"{c(result.files, 'file')}, {c(result.key_groups, 'key group')}"
        )
        if result.deep:
            checked += f", {result.entries} {'entry' if result.entries == 1 else 'entries'} walked"
        sys.stdout.write(f"{result.location}: OK ({checked})\n")
