"""`verify --deep` passes on every values fixture: every entry and operator-state element of
the values job, as Flink 1.15–2.3 wrote it, read as `export` reads it (Kryo 2 for 1.x)."""

from __future__ import annotations

from pathlib import Path

import pytest

from statectl.operations.verify import verify
from statectl.savepoint.reader import open_savepoint

VALUES = Path(__file__).parents[1] / "fixtures" / "values"


@pytest.mark.parametrize("fixture", sorted(p.name for p in VALUES.iterdir() if p.is_dir()))
def test_verify_deep_passes(fixture: str) -> None:
    result = verify(open_savepoint(str(VALUES / fixture / "savepoint")), deep=True)
    assert result.ok, [f.message for f in result.findings][:3]
