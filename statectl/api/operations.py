"""The operations as functions: each takes a `Savepoint` (or its URL) and returns the frozen
dataclass the CLI renders (`statectl.operations.*` reports). Writing operations stage their
output and publish `_metadata` last; an existing destination is refused unless `overwrite`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from statectl.api.savepoint import Savepoint, open

if TYPE_CHECKING:
    from statectl.operations.diff import DiffReport
    from statectl.operations.export import ExportReport
    from statectl.operations.migrate import MigrationReport
    from statectl.operations.plan import ParallelismPlan
    from statectl.operations.rescale.job import RescaleReport
    from statectl.operations.rescale.plan import RescalePlan
    from statectl.operations.verify import Verification

Source = Savepoint | str


def _opened(source: Source, storage_options: dict[str, Any] | None = None) -> Savepoint:
    return source if isinstance(source, Savepoint) else open(source, storage_options)


def verify(
    source: Source, deep: bool = False, storage_options: dict[str, Any] | None = None
) -> Verification:
    """Every cross-check of `statectl verify`; `deep` walks every entry. Findings are in the
    report (`ok` is false when one is an error); an unreadable `_metadata` raises."""
    return _opened(source, storage_options).verify(deep)


def plan(
    source: Source,
    operator: str | None = None,
    parallelisms: Sequence[int] | None = None,
    deep: bool = False,
) -> ParallelismPlan:
    """Bytes per key group and per subtask for candidate parallelisms (`statectl plan`)."""
    from statectl.operations.plan import plan_parallelism

    return plan_parallelism(_opened(source).parsed, operator, parallelisms, deep)


def rescale(
    source: Source,
    destination: str,
    parallelism: int | None = None,
    *,
    operators: Mapping[str, int] | None = None,
    max_parallelism: int | None = None,
    keyed_format: str | None = None,
    overwrite: bool = False,
    master: str = "local[*]",
    spark_conf: Mapping[str, str] | None = None,
    storage_options: dict[str, Any] | None = None,
) -> RescaleReport:
    """A savepoint at a new parallelism (every operator, or per operator) and/or max
    parallelism, written to `destination` (`statectl rescale`); `keyed_format` "native" or
    "canonical" (None keeps each operator's)."""
    from statectl.operations.rescale.plan import plan_rescale

    sp = _opened(source, storage_options)
    planned = plan_rescale(sp.parsed, parallelism, operators, max_parallelism, keyed_format)
    return _write(planned, destination, overwrite, master, spark_conf, storage_options)


def convert(
    source: Source,
    destination: str,
    keyed_format: str = "canonical",
    *,
    overwrite: bool = False,
    master: str = "local[*]",
    spark_conf: Mapping[str, str] | None = None,
    storage_options: dict[str, Any] | None = None,
) -> RescaleReport:
    """The same savepoint with its keyed state in `keyed_format` ("canonical" or "native")."""
    from statectl.operations.rescale.plan import plan_rescale

    planned = plan_rescale(_opened(source, storage_options).parsed, None, keyed_format=keyed_format)
    return _write(planned, destination, overwrite, master, spark_conf, storage_options)


def _write(
    planned: RescalePlan,
    destination: str,
    overwrite: bool,
    master: str,
    spark_conf: Mapping[str, str] | None,
    storage_options: dict[str, Any] | None,
) -> RescaleReport:
    from statectl.operations.rescale import job

    return job.rescale(
        planned,
        destination,
        overwrite=overwrite,
        master=master,
        spark_conf=spark_conf,
        storage_options=storage_options,
    )


def migrate(
    source: Source,
    destination: str,
    *,
    renames: Sequence[tuple[str, str]] = (),
    drops: Sequence[str] = (),
    overwrite: bool = False,
    storage_options: dict[str, Any] | None = None,
) -> MigrationReport:
    """Operators renamed (uid OLD → NEW) or dropped, every state file carried over as bytes."""
    from statectl.operations.migrate import migrate as run_migration
    from statectl.operations.migrate import plan_migration

    migration = plan_migration(_opened(source, storage_options).parsed, renames, drops)
    return run_migration(
        migration, destination, overwrite=overwrite, storage_options=storage_options
    )


def diff(a: Source, b: Source, operator: str | None = None) -> DiffReport:
    """What differs between two savepoints, state by state, with decoded examples."""
    from statectl.operations.diff import diff as run_diff

    return run_diff(_opened(a).parsed, _opened(b).parsed, operator)


def export(
    source: Source,
    output: str,
    *,
    operator: str | None = None,
    state: str | None = None,
    typed: bool = False,
    overwrite: bool = False,
    storage_options: dict[str, Any] | None = None,
) -> ExportReport:
    """Entries as Parquet (`statectl export`): one row per entry with JSON columns, or with
    `typed` one dataset per state in typed columns (OUT/<operator>/<state>/)."""
    sp = _opened(source, storage_options).parsed
    if typed:
        from statectl.operations.typed_export import export_typed

        return export_typed(
            sp, output, operator=operator, state=state, overwrite=overwrite,
            storage_options=storage_options,
        )  # fmt: skip
    from statectl.operations.export import export as run_export

    return run_export(
        sp, output, operator=operator, state=state, overwrite=overwrite,
        storage_options=storage_options,
    )  # fmt: skip
