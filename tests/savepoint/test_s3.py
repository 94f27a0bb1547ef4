"""Savepoints on S3: a real S3 protocol server (moto's, on 127.0.0.1) reached through s3fs by the
driver and by Spark's workers alike. Outputs equal, byte for byte, what the same commands write
between local folders (outputs that real Flink restores in the end-to-end tests).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import S3_BUCKET as BUCKET
from tests.conftest import files_under, fixture_savepoint
from tests.conftest import run_cli as cli
from tests.conftest import storage_flags as flags

pytestmark = pytest.mark.spark


def upload(fs: object, local: Path, name: str) -> str:
    fs.put(str(local), f"{BUCKET}/{name}", recursive=True)  # type: ignore[attr-defined]
    return f"s3://{BUCKET}/{name}"


@pytest.mark.parametrize(
    ("fixture", "args"),
    [
        ("hashmap_canonical_files", ("rescale", "-p", "3")),
        ("hashmap_canonical_files", ("rescale", "--max-parallelism", "256", "-p", "3")),
        ("rocksdb_native_full", ("rescale", "-p", "1", "--format", "canonical")),
    ],
)
def test_rescale_on_s3_equals_rescale_between_local_folders(
    spark: object,
    s3: tuple[object, dict[str, str]],
    tmp_path: Path,
    fixture: str,
    args: tuple[str, ...],
) -> None:
    fs, options = s3
    source = fixture_savepoint(fixture)
    command, *extra = args
    code, _, err = cli(command, str(source), "-o", str(tmp_path / "local"), *extra)
    assert code == 0, err
    name = f"{tmp_path.name}-{fixture}"
    remote = upload(fs, source, name)
    output = f"{remote}-out"
    code, _, err = cli(command, remote, "-o", output, *extra, "--json", *flags(options))
    assert code == 0, err
    written = files_under(output, options)
    assert "_metadata" in written
    assert written == files_under(tmp_path / "local")
    assert files_under(remote, options) == files_under(source)  # the input untouched
    # Refused without --overwrite, and nothing changed by the refusal.
    code, _, err = cli(command, remote, "-o", output, *extra, *flags(options))
    assert code == 1 and "destination exists" in err
    assert files_under(output, options) == written


def test_native_output_on_s3_holds_the_state_of_a_local_one(
    spark: object, s3: tuple[object, dict[str, str]], tmp_path: Path
) -> None:
    """RocksDB instances are uploaded through fsspec; their files carry random ids (DB and
    session ids, as RocksDB writes them), so the outputs compare by file names and state."""
    fs, options = s3
    source = fixture_savepoint("rocksdb_native_full")
    local = tmp_path / "local"
    assert cli("rescale", str(source), "-o", str(local), "-p", "3")[0] == 0
    remote = upload(fs, source, f"{tmp_path.name}-native")
    output = f"{remote}-out"
    code, _, err = cli("rescale", remote, "-o", output, "-p", "3", "--json", *flags(options))
    assert code == 0, err
    assert files_under(output, options).keys() == files_under(local).keys()
    code, out, err = cli("diff", str(local), output, *flags(options))
    assert (code, err) == (0, ""), out
    assert out.strip().endswith("identical (13 states compared)")


def test_inspect_verify_and_diff_on_s3(
    spark: object, s3: tuple[object, dict[str, str]], tmp_path: Path
) -> None:
    fs, options = s3
    source = fixture_savepoint("hashmap_canonical_files")
    remote = upload(fs, source, f"{tmp_path.name}-sp")
    code, out, err = cli("inspect", remote, "--json", *flags(options))
    assert code == 0, err
    assert out == cli("inspect", str(source), "--json")[1].replace(str(source), remote)
    code, out, err = cli("verify", remote, "--deep", *flags(options))
    assert (code, err) == (0, "")
    assert out.startswith(f"{remote}: OK (7 operators")
    code, out, err = cli("diff", remote, str(source), "--spark", *flags(options))
    assert (code, err) == (0, ""), out
    assert out.strip().endswith("identical (13 states compared)")
