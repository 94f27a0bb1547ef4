"""Exports to object stores (the suite's S3 server; memory://): every row, published whole.

Object stores have no folder rename: an export is staged beside its destination and its files
then moved in one by one. A store that fails its Nth write (a part written, or a file moved in)
must leave nothing at the destination, and a rerun must then succeed.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fsspec
import pyarrow.parquet as pq
import pytest
from s3fs import S3FileSystem

import statectl
from statectl.errors import SavepointError
from tests.conftest import S3_BUCKET, fixture_savepoint, run_cli, storage_flags

SOURCE = "hashmap_canonical_files"


class FailingS3(S3FileSystem):  # type: ignore[misc]
    """The suite's S3 server under `fails3://`, failing its `fail_at`th write: a file opened
    for writing, or a copy (what a move is on S3)."""

    protocol = ("fails3",)
    fail_at: int | None = None
    writes = 0

    @classmethod
    def arm(cls, fail_at: int | None) -> None:
        cls.fail_at, cls.writes = fail_at, 0

    @classmethod
    def _count(cls, path: str) -> None:
        cls.writes += 1
        if cls.writes == cls.fail_at:
            raise OSError(f"injected failure at write {cls.writes} ({path})")

    def _open(self, path: str, mode: str = "rb", **kwargs: Any) -> Any:
        if "r" not in mode:
            self._count(path)
        return super()._open(path, mode, **kwargs)

    async def _cp_file(self, path1: str, path2: str, **kwargs: Any) -> Any:
        self._count(path2)
        return await super()._cp_file(path1, path2, **kwargs)


@pytest.fixture
def failing_s3(s3: tuple[Any, dict[str, str]]) -> Iterator[dict[str, str]]:
    """Storage options for `fails3://` URLs (same server, same bucket)."""
    fsspec.register_implementation("fails3", FailingS3, clobber=True)
    yield s3[1]
    FailingS3.arm(None)


def rows_by_file(url: str | Path, options: dict[str, str] | None = None) -> dict[str, Any]:
    """Every Parquet file under a folder (or the file itself), by relative path: its rows."""
    fs, root = fsspec.core.url_to_fs(str(url), **(options or {}))
    paths = sorted(fs.find(root)) if fs.isdir(root) else [root]
    rows = {}
    for path in paths:
        with fs.open(path, "rb") as file:
            rows[path[len(root) :].strip("/")] = pq.read_table(file).to_pylist()
    return rows


def under(fs: Any, prefix: str) -> list[str]:
    """Every key of the bucket starting with `prefix` (the destination, its staging folders and
    temporary files all do)."""
    return [key for key in fs.find(S3_BUCKET) if key.startswith(f"{S3_BUCKET}/{prefix}")]


@pytest.mark.parametrize(
    ("args", "slash", "rows"),
    [((), "", 465), ((), "/", 465), (("--typed",), "", 465)],
    ids=["file", "folder", "typed"],
)
def test_cli_export_to_s3_has_every_row_of_a_local_export(
    s3: tuple[Any, dict[str, str]], tmp_path: Path, args: tuple[str, ...], slash: str, rows: int
) -> None:
    fs, options = s3
    source = str(fixture_savepoint(SOURCE))
    local = tmp_path / "local"
    remote = f"s3://{S3_BUCKET}/{tmp_path.name}/out"
    code, _, err = run_cli("export", source, "-o", f"{local}{slash}", *args)
    assert code == 0, err
    code, _, err = run_cli("export", source, "-o", remote + slash, *args, *storage_flags(options))
    assert (code, err) == (0, "")
    expected = rows_by_file(local)
    assert sum(map(len, expected.values())) == rows
    assert rows_by_file(remote, options) == expected
    # Nothing beside the output: no staging folder, no temporary file.
    out = f"{S3_BUCKET}/{tmp_path.name}/out"
    assert all(key == out or key.startswith(f"{out}/") for key in under(fs, f"{tmp_path.name}/"))


@pytest.mark.parametrize("store", ["s3", "memory"])
@pytest.mark.parametrize("typed", [False, True], ids=["json", "typed"])
def test_library_export_to_a_store_has_every_row_of_a_local_export(
    s3: tuple[Any, dict[str, str]], tmp_path: Path, typed: bool, store: str
) -> None:
    options = s3[1] if store == "s3" else {}
    source = statectl.open(str(fixture_savepoint(SOURCE)))
    local = str(tmp_path / "local") + "/"
    root = f"s3://{S3_BUCKET}" if store == "s3" else "memory://statectl-tests"
    remote = f"{root}/{tmp_path.name}-library/"
    expected_report = statectl.export(source, local, typed=typed)
    report = statectl.export(source, remote, typed=typed, storage_options=options)
    assert (report.rows, report.files) == (expected_report.rows, expected_report.files)
    assert report.states == expected_report.states
    assert rows_by_file(remote, options) == rows_by_file(local)


@pytest.mark.parametrize(
    ("typed", "slash", "files"),
    [(False, "", 1), (False, "/", 2), (True, "", 4)],  # typed: 2 states of 2 subtasks
    ids=["file", "folder", "typed"],
)
def test_a_failed_export_leaves_nothing_and_a_rerun_succeeds(
    s3: tuple[Any, dict[str, str]],
    failing_s3: dict[str, str],
    tmp_path: Path,
    typed: bool,
    slash: str,
    files: int,
) -> None:
    fs, options = s3
    source = statectl.open(str(fixture_savepoint(SOURCE)))
    export = functools.partial(statectl.export, source, operator="opstate", typed=typed)
    local = export(f"{tmp_path}/local{slash}")
    folder = f"{S3_BUCKET}/{tmp_path.name}"
    FailingS3.arm(None)
    counted = f"fails3://{folder}/counted/out{slash}"
    export(counted, storage_options=failing_s3)
    writes = FailingS3.writes  # each part (or the file) written, then moved into place
    assert (writes, local.files) == (2 * files, files)
    out = f"{folder}/out{slash}"
    # The first and second part, the last part, the first and the last file moved in.
    for fail_at in sorted({1, 2, local.files, local.files + 1, writes}):
        FailingS3.arm(fail_at)
        failure = f"cannot write here: injected failure at write {fail_at} "
        with pytest.raises(SavepointError, match=failure):
            export(f"fails3://{out}", storage_options=failing_s3)
        left = [key for key in under(fs, f"{tmp_path.name}/") if "/counted/" not in key]
        assert left == [], f"left behind by a failure at write {fail_at}"
    report = export(f"s3://{out}", storage_options=options)
    assert (report.rows, report.files) == (local.rows, local.files)
    assert rows_by_file(f"s3://{out}", options) == rows_by_file(local.output)
