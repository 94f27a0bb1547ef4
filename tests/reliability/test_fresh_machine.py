"""The suite needs nothing an earlier test or an earlier run left behind."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.conftest import fixture_savepoint, load_manifest, run_cli

RETAINED = "rocksdb_retained_checkpoint"


def test_a_retained_checkpoint_fixture_puts_itself_where_its_metadata_points() -> None:
    """Its `_metadata` names absolute paths; on a fresh machine nothing is there yet."""
    original = Path(load_manifest(RETAINED)["checkpoint"]["original_dir"])
    shutil.rmtree(original, ignore_errors=True)

    checkpoint = fixture_savepoint(RETAINED)

    assert checkpoint.is_relative_to(original)
    code, stdout, stderr = run_cli("verify", "--deep", str(checkpoint))
    assert (code, stderr) == (0, ""), stdout
