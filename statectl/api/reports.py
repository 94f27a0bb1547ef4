"""What the operations return: the frozen dataclasses the CLI renders, the values in them
(`jsonable` makes a decoded value JSON), and the `Engine` that `prepare_engine` makes.

>>> from statectl.api import reports
>>> report: reports.RescaleReport = statectl.rescale(sp, "s3://b/sp-p8", parallelism=8)

Each name is loaded from the operation that makes it on first use, so importing this module
loads no operation (and a command that renders one report loads only its operation).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from statectl.execution.engine import Engine
    from statectl.formats.source_state import (
        FILE_NO_OFFSET,
        Enumerator,
        FileEnumerator,
        FileSplit,
        KafkaEnumerator,
        KafkaPartitionAssignment,
        KafkaSplit,
        LegacyKafkaOffset,
        NumberSequenceEnumerator,
        NumberSequenceSplit,
        Split,
        UnrecognisedEnumerator,
        UnrecognisedSplit,
    )
    from statectl.formats.state_values import jsonable
    from statectl.operations.check import CheckReport, StateCheck
    from statectl.operations.diff import DiffReport, Example, OperatorRef, StateDiff
    from statectl.operations.export import ExportReport, RawCount
    from statectl.operations.migrate import (
        CARRIED,
        DROPPED,
        RENAMED,
        MigrationPlan,
        MigrationReport,
        OperatorChange,
    )
    from statectl.operations.migrate import OperatorReport as MigratedOperator
    from statectl.operations.plan import (
        Candidate,
        HotKeyGroup,
        OperatorOutlook,
        OperatorStateLoad,
        ParallelismPlan,
        Recommendation,
    )
    from statectl.operations.positions import PositionsReport, ReaderSplit, SourcePositions
    from statectl.operations.rescale.job import OperatorReport as RescaledOperator
    from statectl.operations.rescale.job import RescaleReport
    from statectl.operations.rescale.load import SubtaskLoads
    from statectl.operations.rescale.plan import (
        KeyedTarget,
        OperatorPlan,
        OperatorTarget,
        RescalePlan,
        SubtaskTarget,
    )
    from statectl.operations.rescale.rekey import describe as describe_rehash
    from statectl.operations.set_positions import PositionChange, render_position
    from statectl.operations.set_positions import PositionsReport as PositionsEditReport
    from statectl.operations.state_edits import StateEditReport
    from statectl.operations.summary import (
        NativeFileSummary,
        NativeSummary,
        OperatorSummary,
        SavepointSummary,
        StateSummary,
        SubtaskSummary,
    )
    from statectl.operations.upgrade import StateVerdict, UpgradeCheck, UpgradeReport
    from statectl.operations.verify import Finding, Verification

__all__ = [
    "CARRIED",
    "DROPPED",
    "FILE_NO_OFFSET",
    "RENAMED",
    "Candidate",
    "CheckReport",
    "DiffReport",
    "Engine",
    "Enumerator",
    "Example",
    "ExportReport",
    "FileEnumerator",
    "FileSplit",
    "Finding",
    "HotKeyGroup",
    "KafkaEnumerator",
    "KafkaPartitionAssignment",
    "KafkaSplit",
    "KeyedTarget",
    "LegacyKafkaOffset",
    "MigratedOperator",
    "MigrationPlan",
    "MigrationReport",
    "NativeFileSummary",
    "NativeSummary",
    "NumberSequenceEnumerator",
    "NumberSequenceSplit",
    "OperatorChange",
    "OperatorOutlook",
    "OperatorPlan",
    "OperatorRef",
    "OperatorStateLoad",
    "OperatorSummary",
    "OperatorTarget",
    "ParallelismPlan",
    "PositionChange",
    "PositionsEditReport",
    "PositionsReport",
    "RawCount",
    "ReaderSplit",
    "Recommendation",
    "RescalePlan",
    "RescaleReport",
    "RescaledOperator",
    "SavepointSummary",
    "SourcePositions",
    "Split",
    "StateCheck",
    "StateDiff",
    "StateEditReport",
    "StateSummary",
    "StateVerdict",
    "SubtaskLoads",
    "SubtaskSummary",
    "SubtaskTarget",
    "UnrecognisedEnumerator",
    "UnrecognisedSplit",
    "UpgradeCheck",
    "UpgradeReport",
    "Verification",
    "describe_rehash",
    "jsonable",
    "render_position",
]

# The module each name comes from, and its name there when it differs.
_HOMES: dict[str, tuple[str, ...]] = {
    "statectl.operations.summary": (
        "SavepointSummary", "OperatorSummary", "StateSummary", "SubtaskSummary", "NativeSummary",
        "NativeFileSummary",
    ),
    "statectl.operations.verify": ("Verification", "Finding"),
    "statectl.operations.plan": (
        "ParallelismPlan", "OperatorOutlook", "Candidate", "Recommendation", "HotKeyGroup",
        "OperatorStateLoad",
    ),
    "statectl.operations.rescale.load": ("SubtaskLoads",),
    "statectl.operations.rescale.plan": (
        "RescalePlan", "OperatorPlan", "SubtaskTarget", "KeyedTarget", "OperatorTarget",
    ),
    "statectl.operations.rescale.job": ("RescaleReport", "RescaledOperator=OperatorReport"),
    "statectl.operations.rescale.rekey": ("describe_rehash=describe",),
    "statectl.operations.migrate": (
        "MigrationPlan", "MigrationReport", "OperatorChange", "MigratedOperator=OperatorReport",
        "RENAMED", "DROPPED", "CARRIED",
    ),
    "statectl.operations.state_edits": ("StateEditReport",),
    "statectl.operations.upgrade": ("UpgradeCheck", "StateVerdict", "UpgradeReport"),
    "statectl.operations.check": ("CheckReport", "StateCheck"),
    "statectl.operations.set_positions": (
        "PositionsEditReport=PositionsReport", "PositionChange", "render_position",
    ),
    "statectl.operations.diff": ("DiffReport", "StateDiff", "Example", "OperatorRef"),
    "statectl.operations.export": ("ExportReport", "RawCount"),
    "statectl.operations.positions": ("PositionsReport", "SourcePositions", "ReaderSplit"),
    "statectl.formats.source_state": (
        "Split", "FileSplit", "KafkaSplit", "NumberSequenceSplit", "UnrecognisedSplit",
        "LegacyKafkaOffset", "Enumerator", "FileEnumerator", "KafkaEnumerator",
        "KafkaPartitionAssignment", "NumberSequenceEnumerator", "UnrecognisedEnumerator",
        "FILE_NO_OFFSET",
    ),
    "statectl.formats.state_values": ("jsonable",),
    "statectl.execution.engine": ("Engine",),
}  # fmt: skip
_WHERE = {
    name: (module, original or name)
    for module, names in _HOMES.items()
    for name, _, original in (entry.partition("=") for entry in names)
}


def __getattr__(name: str) -> Any:
    """Load `name` from the operation that defines it (once: it is kept here after)."""
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, original = _WHERE[name]
    value = getattr(importlib.import_module(module), original)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
