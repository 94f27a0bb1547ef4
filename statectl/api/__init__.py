"""The public API (`import statectl`): open a savepoint, read its states as Arrow, run the
operations. The CLI and the Spark data source are built on it: they import nothing below it.

The names here are also `statectl.<name>`, except the helpers the commands need around the
operations (`predicted_loads`, `prepare_engine`, `stale_staging`, `key_group_range`,
`parse_parallelisms`) and `reports`, the report dataclasses the operations return.
"""

from statectl.api import reports
from statectl.api.helpers import key_group_range, parse_parallelisms, uid_hash
from statectl.api.operations import (
    check,
    convert,
    diff,
    export,
    migrate,
    plan,
    plan_migration,
    plan_rescale,
    predicted_loads,
    prepare_engine,
    rescale,
    set_positions,
    stale_staging,
    transform,
    upgrade,
    verify,
    write_migration,
    write_rescale,
)
from statectl.api.savepoint import Operator, ReadSplit, Savepoint, State, open, read_split

__all__ = [
    "Operator",
    "ReadSplit",
    "Savepoint",
    "State",
    "check",
    "convert",
    "diff",
    "export",
    "key_group_range",
    "migrate",
    "open",
    "parse_parallelisms",
    "plan",
    "plan_migration",
    "plan_rescale",
    "predicted_loads",
    "prepare_engine",
    "read_split",
    "reports",
    "rescale",
    "set_positions",
    "stale_staging",
    "transform",
    "uid_hash",
    "upgrade",
    "verify",
    "write_migration",
    "write_rescale",
]
