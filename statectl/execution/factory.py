"""Which engine runs a command's tasks: the one module that knows every engine.

`engine.py` (the local engine and the `Engine` protocol), `spark.py` and `head_start.py` build on
one another in that order; picking among them lives here, above all three, so none imports in a
circle.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from statectl.execution.engine import Engine, LocalEngine

if TYPE_CHECKING:
    from statectl.savepoint.storage import Location


def choose_engine(
    use_spark: bool,
    master: str | None,
    conf: Mapping[str, str] | None,
    *locations: Location,
    head_start: bool = False,
) -> Engine:
    """Spark when asked, except over storage only this process sees (`memory://`), whose files
    Spark's workers could not read: that work runs here. `head_start`: an embedded (local
    mode) Spark's first tasks run here while it starts (`head_start.HeadStartEngine`)."""
    if not use_spark or any(location.is_process_local for location in locations):
        return LocalEngine()
    from statectl.execution.spark import SparkEngine  # lazy: pyspark is heavy

    spark = SparkEngine(master or "local[*]", dict(conf or {}))
    if head_start and spark.master.startswith("local"):
        from statectl.execution.head_start import HeadStartEngine

        return HeadStartEngine(spark)
    return spark
