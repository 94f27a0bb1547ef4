"""`--overwrite` replaces only what statectl itself writes at DST, and only once the new output is
complete; an unwritable DST is one line naming it (rescale, convert, migrate, export)."""

from __future__ import annotations

import errno
import shutil
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from statectl.operations.verify import verify
from statectl.savepoint import writer
from statectl.savepoint.reader import open_savepoint
from tests.conftest import files_under, fixture_savepoint, run_cli
from tests.reliability.corpus import COMPRESSED, _flip_operator_chunk, copy_fixture

SOURCE = str(fixture_savepoint("hashmap_canonical_files"))
NATIVE = str(fixture_savepoint("rocksdb_native_full"))
MIGRATE = ("migrate", SOURCE, "--drop", "sink")


def _user_folder(path: Path) -> dict[str, bytes]:
    """A folder of someone's files that DST happens to name."""
    (path / "notes").mkdir(parents=True)
    (path / "notes" / "todo.txt").write_text("keep me")
    (path / "data.csv").write_text("a,b\n")
    return files_under(path)


# --- export ------------------------------------------------------------------------------------


@pytest.mark.parametrize("slash", ["", "/"])
def test_export_overwrite_refuses_a_folder_it_did_not_write(tmp_path: Path, slash: str) -> None:
    results = tmp_path / "results"
    before = _user_folder(results)
    code, out, err = run_cli("export", SOURCE, "-o", f"{results}{slash}", "--overwrite")
    what = "a folder, not a Parquet file" if not slash else "not a folder of Parquet part files"
    assert (code, out) == (1, "")
    assert err == (
        f"statectl: error: {results}: is {what} written by statectl export; refusing to replace it\n"
    )
    assert files_under(results) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results"]


def test_export_overwrite_refuses_a_file_that_is_not_its_parquet(tmp_path: Path) -> None:
    out = tmp_path / "state.parquet"
    pq.write_table(pq.read_table(_export(tmp_path / "real.parquet")).select(["key"]), out)
    before = out.read_bytes()
    code, _, err = run_cli("export", SOURCE, "-o", str(out), "--overwrite")
    assert code == 1
    assert err == (
        f"statectl: error: {out}: is not a Parquet file written by statectl export; "
        "refusing to replace it\n"
    )
    assert out.read_bytes() == before


def _export(path: Path, *args: str) -> Path:
    code, _, err = run_cli("export", SOURCE, "-o", str(path), *args)
    assert code == 0, err
    return path


def test_export_overwrite_replaces_its_own_file_and_folder(tmp_path: Path) -> None:
    file = _export(tmp_path / "state.parquet", "--state", "union")
    assert pq.read_table(file).num_rows == 3
    _export(file, "--overwrite")
    assert pq.read_table(file).num_rows > 3
    folder = tmp_path / "parts"
    code, _, err = run_cli("export", SOURCE, "-o", f"{folder}/", "--state", "union")
    assert code == 0, err
    union = sorted(p.name for p in folder.iterdir())  # the part files with its rows
    code, _, err = run_cli("export", SOURCE, "-o", f"{folder}/", "--overwrite")
    assert code == 0, err
    names = sorted(p.name for p in folder.iterdir())
    assert len(names) > len(union) and all(n.startswith("part-") for n in names)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["parts", "state.parquet"]


# --- savepoint commands ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        MIGRATE,
        ("rescale", SOURCE, "-p", "2"),
        ("convert", NATIVE),
    ],
    ids=["migrate", "rescale", "convert"],
)
def test_savepoint_overwrite_refuses_a_folder_without_metadata(
    tmp_path: Path, argv: tuple[str, ...]
) -> None:
    results = tmp_path / "results"
    before = _user_folder(results)
    for overwrite in ((), ("--overwrite",)):
        code, out, err = run_cli(*argv, "-o", str(results), *overwrite)
        assert (code, out) == (1, "")
        assert err == (
            f"statectl: error: {results}: is not a savepoint (no _metadata); "
            "refusing to replace it\n"
        )
    assert files_under(results) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results"]


@pytest.mark.parametrize("argv", [MIGRATE, ("rescale", SOURCE, "-p", "2")], ids=["m", "r"])
def test_savepoint_overwrite_refuses_a_file(tmp_path: Path, argv: tuple[str, ...]) -> None:
    dst = tmp_path / "sp"
    dst.write_text("not a folder")
    code, _, err = run_cli(*argv, "-o", str(dst), "--overwrite")
    assert code == 1
    assert err == (
        f"statectl: error: {dst}: is a file, not a savepoint folder; refusing to replace it\n"
    )
    assert dst.read_text() == "not a folder"


def test_migrate_overwrite_replaces_a_savepoint_keeping_it_until_the_new_is_complete(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dst = tmp_path / "sp"
    shutil.copytree(SOURCE, dst)
    before = files_under(dst)
    publish = writer.publish_folder

    def failing(staged: writer.StagedSavepoint) -> None:  # a full disk as the last file lands
        assert files_under(dst) == before and staged.staging.child("_metadata").exists()
        raise writer.unwritable(
            OSError(errno.ENOSPC, "No space left on device"), staged.destination
        )

    monkeypatch.setattr(writer, "publish_folder", failing)
    code, _, err = run_cli(*MIGRATE, "-o", str(dst), "--overwrite")
    assert (code, err.splitlines()[-1]) == (
        1,
        f"statectl: error: {dst}: cannot write here: no space left on device",
    )
    assert files_under(dst) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sp"]  # staging discarded
    monkeypatch.setattr(writer, "publish_folder", publish)
    code, _, err = run_cli(*MIGRATE, "-o", str(dst), "--overwrite")
    assert code == 0, err
    migrated = open_savepoint(str(dst))
    assert "sink" not in [op.uid for op in migrated.operators]
    assert verify(migrated, deep=True).ok
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sp"]


@pytest.mark.spark
def test_rescale_failing_inside_a_spark_task_keeps_the_old_savepoint(
    spark: object, tmp_path: Path
) -> None:
    good = copy_fixture(COMPRESSED, tmp_path / "good")
    dst = tmp_path / "out" / "sp"
    code, _, err = run_cli("rescale", str(good), "-o", str(dst), "-p", "2")
    assert code == 0, err
    before = files_under(dst)
    bad = copy_fixture(COMPRESSED, tmp_path / "bad")
    culprit = _flip_operator_chunk(bad)  # found only when a Spark task reads the element
    code, out, err = run_cli("rescale", str(bad), "-o", str(dst), "-p", "3", "--overwrite")
    assert (code, out) == (1, "")
    assert err.startswith(f"statectl: error: {culprit}") and err.count("\n") == 1, err
    assert files_under(dst) == before
    assert verify(open_savepoint(str(dst)), deep=True).ok
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["sp"]


# --- unwritable destinations -------------------------------------------------------------------

UNWRITABLE = "/sys/statectl-out"  # root too may not create anything under /sys


@pytest.mark.parametrize(
    "argv",
    [
        MIGRATE,
        ("rescale", SOURCE, "-p", "2"),
        ("convert", NATIVE),
        ("export", SOURCE),
    ],
    ids=["migrate", "rescale", "convert", "export"],
)
@pytest.mark.parametrize("dst", [UNWRITABLE, UNWRITABLE + "/"], ids=["plain", "slash"])
def test_an_unwritable_destination_is_one_line_naming_it(argv: tuple[str, ...], dst: str) -> None:
    code, out, err = run_cli(*argv, "-o", dst)
    assert (code, out) == (1, "")
    assert err == f"statectl: error: {UNWRITABLE}: cannot write here: permission denied\n"


# --- errors raised inside Spark tasks ----------------------------------------------------------

_WORKER_TRACEBACK = """An error occurred while calling o41.collectAndServe.
: org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 3.0 failed 1 \
times, most recent failure: Lost task 0.0 in stage 3.0 (TID 7) (127.0.0.1 executor driver): \
org.apache.spark.api.python.PythonException: Traceback (most recent call last):
  File "/x/pyspark/worker.py", line 1247, in main
    process()
  File "/x/statectl/operations/rescale/rekey.py", line 88, in shuffle_records
    raise FormatError("block runs past the end", "/sp/op-00000-keyed")
{line}

\tat org.apache.spark.api.python.BasePythonRunner$ReaderIterator.handlePythonException(...)
"""


@pytest.mark.parametrize(
    ("line", "kind", "text"),
    [
        (
            "statectl.errors.FormatError: /sp/op-00000-keyed: block runs past the end",
            "FormatError",
            "/sp/op-00000-keyed: block runs past the end",
        ),
        (
            "FileNotFoundError: [Errno 2] No such file or directory: '/sp/gone'",
            "SavepointError",
            "/sp/gone: No such file or directory",
        ),
        ("OSError: [Errno 5] Input/output error", "SavepointError", "Input/output error"),
        ("ValueError: bad value", "RuntimeError", "a Spark task failed: ValueError: bad value"),
    ],
)
def test_a_task_error_from_a_worker_traceback(line: str, kind: str, text: str) -> None:
    from statectl.execution.spark import task_error

    error = task_error(RuntimeError(_WORKER_TRACEBACK.format(line=line)))
    assert (type(error).__name__, str(error)) == (kind, text)
    assert task_error(RuntimeError("Python worker exited unexpectedly (crashed)")) is None


@pytest.mark.spark
def test_errors_raised_inside_spark_tasks_are_one_line_naming_the_file(spark: Any) -> None:
    from statectl.errors import FormatError, SavepointError
    from statectl.execution.spark import collect

    def corrupt(_: int) -> int:
        raise FormatError("block runs past the end", "/sp/op-00000-keyed")

    def unreadable(_: int) -> int:
        raise FileNotFoundError(errno.ENOENT, "No such file or directory", "/sp/gone")

    context = spark.sparkContext
    with pytest.raises(FormatError) as format_error:
        collect(context.parallelize([1]).map(corrupt))
    assert str(format_error.value) == "/sp/op-00000-keyed: block runs past the end"
    with pytest.raises(SavepointError) as os_error:
        collect(context.parallelize([1]).map(unreadable))
    assert str(os_error.value) == "/sp/gone: No such file or directory"
