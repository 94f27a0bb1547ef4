"""The public API (`import statectl`): open a savepoint, read its states as Arrow, run the
operations. The CLI and the Spark data source are built on it."""

from statectl.api.operations import convert, diff, export, migrate, plan, rescale, verify
from statectl.api.savepoint import Operator, ReadSplit, Savepoint, State, open, read_split

__all__ = [
    "Operator",
    "ReadSplit",
    "Savepoint",
    "State",
    "convert",
    "diff",
    "export",
    "migrate",
    "open",
    "plan",
    "read_split",
    "rescale",
    "verify",
]
