"""`statectl inspect` in a narrow terminal: uids and operator ids are never cut (more in
test_tables_width.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from statectl.cli import console
from tests.conftest import FIXTURES, run_cli

# Long enough that a table of every column cannot fit 80 or 120 columns.
LONG_UID = "sessions-by-customer-and-region-v2"
# Longer than the terminal leaves beside a 32-hex id: the operators are stacked, not cut.
LONGEST_UID = "enrichment-join-of-orders-with-customer-profiles-and-regions-v3"


def run_at_width(width: int, *argv: str) -> tuple[int, str, str]:
    """statectl in-process with a terminal `width` columns wide (rich reads COLUMNS when the
    stdout console is made, once per process: it is made again, then dropped)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("COLUMNS", str(width))
        console.stdout_console.cache_clear()
        try:
            return run_cli(*argv)
        finally:
            console.stdout_console.cache_clear()


def renamed(source: Path, tmp_path: Path, uid: str) -> Path:
    """A copy of `source` whose `keyed-str` operator has the uid `uid`."""
    out = tmp_path / "renamed"
    code, _, err = run_cli(
        "migrate", str(source), "-o", str(out), "--rename-uid", f"keyed-str={uid}"
    )
    assert code == 0, err
    return out


def savepoints(tmp_path: Path) -> list[Path]:
    canonical = FIXTURES / "hashmap_canonical_files" / "savepoint"
    return [
        FIXTURES / "values" / "2.3.0-hashmap-canonical" / "savepoint",
        canonical,
        renamed(canonical, tmp_path / "long", LONG_UID),
        renamed(canonical, tmp_path / "longest", LONGEST_UID),
    ]


@pytest.mark.parametrize("width", [80, 100, 120])
def test_every_uid_and_id_appears_whole(width: int, tmp_path: Path) -> None:
    for savepoint in savepoints(tmp_path):
        code, out, err = run_cli("inspect", "--json", str(savepoint))
        assert code == 0, err
        operators = json.loads(out)["operators"]
        code, out, err = run_at_width(width, "inspect", str(savepoint))
        assert code == 0, err
        for op in operators:
            assert op["id"] in out, (savepoint, op["id"])
            assert op["uid"] in out, (savepoint, op["uid"])
