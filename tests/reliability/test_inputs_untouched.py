"""Every command leaves its input byte-identical when it succeeds, too (sha256 before/after).

The corpus tests check the same for failing runs; here each registered command runs to
success on intact copies of real fixtures (canonical, compressed, inline and RocksDB native).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.reliability.corpus import COMMANDS, Command, copy_fixture
from tests.reliability.test_corpus import REGISTERED, checksums, run

FIXTURES = ("hashmap_canonical_files", "hashmap_compressed", "hashmap_canonical_inline")
NATIVE = "rocksdb_native_full"


def _run_untouched(
    command: Command, fixture: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if command.name not in REGISTERED:
        pytest.skip(f"`statectl {command.name}` is not registered")
    source = copy_fixture(fixture, tmp_path / "input")
    pristine = copy_fixture(fixture, tmp_path / "pristine")
    out = tmp_path / "out"
    out.mkdir()
    before = checksums(tmp_path / "input"), checksums(tmp_path / "pristine")
    code, _, err = run(command.argv(source, pristine, out), capsys)
    assert code == 0, err
    assert (checksums(tmp_path / "input"), checksums(tmp_path / "pristine")) == before


@pytest.mark.parametrize("command", [c for c in COMMANDS if not c.spark], ids=lambda c: c.id)
@pytest.mark.parametrize("fixture", FIXTURES)
def test_command_leaves_input_identical(
    command: Command, fixture: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _run_untouched(command, fixture, tmp_path, capsys)


@pytest.mark.spark
@pytest.mark.parametrize(
    ("command_id", "fixture"), [("rescale", "hashmap_compressed"), ("convert", NATIVE)]
)
def test_spark_command_leaves_input_identical(
    command_id: str,
    fixture: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    spark: object,
) -> None:
    command = next(c for c in COMMANDS if c.id == command_id)
    _run_untouched(command, fixture, tmp_path, capsys)
