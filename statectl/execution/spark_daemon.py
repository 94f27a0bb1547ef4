"""PySpark's worker daemon, importing the driver's installed pyspark instead of Spark's zip.

Spark puts `pyspark.zip` first on its Python workers' path. Python keeps no bytecode for
modules imported from a zip, so every daemon start compiles PySpark from source: half a
second of every embedded (`local[*]`) rescale. An embedded session's workers run the driver's
own interpreter (`PYSPARK_PYTHON`), whose pyspark is the same release with its bytecode
cached, so this daemon drops Spark's zips from the path before importing it. Used for local
masters only (`spark.spark_context`); cluster workers keep Spark's own daemon.
"""

import fnmatch
import importlib
import os
import sys
from importlib.machinery import PathFinder


def _spark_zip(path: str) -> bool:
    """Spark's own copies: <pyspark>/python/lib/pyspark.zip and py4j-*-src.zip."""
    name = os.path.basename(path)
    return name == "pyspark.zip" or fnmatch.fnmatch(name, "py4j-*-src.zip")


_kept = [p for p in sys.path if not _spark_zip(p)]
if PathFinder.find_spec("pyspark", _kept) is not None:  # else pyspark lives only in the zip
    sys.path[:] = _kept

from pyspark import daemon  # noqa: E402  (after the path is fixed)

if __name__ == "__main__":
    # What statectl's tasks import, imported once here rather than by every worker forked
    # from this daemon, which then share these pages and start at once.
    from statectl.execution.processes import TASK_MODULES

    for module in TASK_MODULES:
        importlib.import_module(module)
    daemon.manager()
