"""statectl: inspect, read and rewrite Apache Flink savepoints without a JVM.

>>> import statectl
>>> sp = statectl.open("s3://bucket/savepoints/savepoint-1a2b3c")
>>> [op.uid for op in sp.operators]
>>> sp.operator("orders").state("totals").to_pandas()

The API (`statectl.api`) is loaded on first use, so `import statectl` stays light: it loads
no pyspark, rocksdict, typer or rich, and no pyarrow until a state is read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from statectl.errors import (
    FormatError,
    SavepointError,
    StatectlError,
    StatectlNote,
    UnsupportedError,
)

if TYPE_CHECKING:
    from statectl.api import (
        Operator,
        ReadSplit,
        Savepoint,
        State,
        check,
        convert,
        diff,
        export,
        migrate,
        open,
        plan,
        plan_migration,
        plan_rescale,
        read_split,
        rescale,
        set_positions,
        transform,
        uid_hash,
        upgrade,
        verify,
        write_migration,
        write_rescale,
    )

__version__ = "0.1.0"

__all__ = [
    "FormatError",
    "Operator",
    "ReadSplit",
    "Savepoint",
    "SavepointError",
    "State",
    "StatectlError",
    "StatectlNote",
    "UnsupportedError",
    "__version__",
    "check",
    "convert",
    "diff",
    "export",
    "migrate",
    "open",
    "plan",
    "plan_migration",
    "plan_rescale",
    "read_split",
    "rescale",
    "set_positions",
    "transform",
    "uid_hash",
    "upgrade",
    "verify",
    "write_migration",
    "write_rescale",
]
_LEAVES = {
    "FormatError",
    "SavepointError",
    "StatectlError",
    "StatectlNote",
    "UnsupportedError",
    "__version__",
}


def __getattr__(name: str) -> Any:
    if name in __all__ and name not in _LEAVES:
        from statectl import api

        return getattr(api, name)
    raise AttributeError(f"module 'statectl' has no attribute {name!r}")


def __dir__() -> list[str]:
    """The API, which tab completion in a notebook or a shell offers: its names are loaded on
    first use, so they are no globals of this module until then."""
    return sorted(__all__)
