"""A retained checkpoint copied away from where Flink wrote it, in Flink's layout.

The committed RocksDB incremental checkpoint names its shared SST files by absolute path under
its original job folder (the fixture manifest's `checkpoint.original_dir`). Its job folder copied
elsewhere (`<copy>/chk-2`, `<copy>/shared`) is read from the copy, saying so once on stderr;
without the mapping those handles would be refused (they leave the copy's folders), so every
command succeeding without `--allow-external-files` shows the copy is read, whether or not
another test has put the original back. A copy without `shared/`, a renamed `chk-2` and a
handle leaving the copy are refused as before. Flink restores of moved checkpoints rescaled:
tests/operations/rescale/test_moved_checkpoint_e2e.py.
"""

from __future__ import annotations

import dataclasses
import shutil
import warnings
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import statectl
from statectl.errors import StatectlNote
from statectl.formats.handles import FileHandle, IncrementalKeyedHandle, RelativeFileHandle
from statectl.formats.metadata import CheckpointMetadata
from statectl.savepoint.moved import absolute_paths
from statectl.savepoint.reader import open_savepoint
from tests.conftest import FIXTURES, fixture_savepoint, load_manifest, run_cli
from tests.reliability.corpus import load, save, subtask, with_subtask

FIXTURE = FIXTURES / "rocksdb_retained_checkpoint"
MANIFEST = load_manifest("rocksdb_retained_checkpoint")
ORIGINAL = MANIFEST["checkpoint"]["original_uri"]  # as Flink wrote it: `file:/tmp/…/<job id>`
CHK = Path(MANIFEST["path"]).name


def copy_job_folder(parent: Path, name: str = "job-copy") -> Path:
    """The fixture's job folder (`chk-2`, `shared`) copied to `parent/name`; its `chk-2`."""
    shutil.copytree(FIXTURE / "checkpoint", parent / name)
    return parent / name / CHK


def note(copy: Path) -> str:
    return f"statectl: note: checkpoint moved: reading {ORIGINAL} from {copy.parent}\n"


@pytest.fixture(scope="module")
def copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_job_folder(tmp_path_factory.mktemp("moved"))


def test_the_fixture_names_its_shared_files_by_absolute_path(copy: Path) -> None:
    paths = set(absolute_paths(load(copy)))
    assert paths and all(p.startswith(f"{ORIGINAL}/shared/") for p in paths)


def test_the_library_reads_the_copy_and_says_so(copy: Path) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sp = statectl.open(str(copy))
    assert [(w.category, str(w.message)) for w in caught] == [
        (StatectlNote, f"checkpoint moved: reading {ORIGINAL} from {copy.parent}")
    ]
    assert sp.moved_from == ORIGINAL
    shared = copy.parent / "shared"
    for path in absolute_paths(sp.parsed.metadata):
        location = sp.parsed.absolute(path)
        assert Path(location.path) == shared / path.rsplit("/", 1)[1]


def test_allowing_external_files_still_reads_the_copy(copy: Path) -> None:
    with pytest.warns(StatectlNote):
        sp = open_savepoint(str(copy), allow_external_files=True)
    path = next(absolute_paths(sp.metadata))
    assert Path(sp.absolute(path).path) == copy.parent / "shared" / path.rsplit("/", 1)[1]


def test_in_place_nothing_is_moved() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sp = statectl.open(str(fixture_savepoint("rocksdb_retained_checkpoint")))
    assert (sp.moved_from, sp.parsed.moved) == (None, None)


@pytest.mark.parametrize("command", ["inspect --deep", "verify --deep"])
def test_commands_read_the_copy_with_one_note(copy: Path, command: str) -> None:
    code, stdout, stderr = run_cli(*command.split(), str(copy))
    assert (code, stderr) == (0, note(copy))
    if command.startswith("verify"):
        entries = sum(sum(op["entry_counts"].values()) for op in MANIFEST["operators"])
        assert stdout.endswith(f"key groups hold data, {entries} entries walked)\n")


def test_export_of_the_copy_holds_every_entry(copy: Path, tmp_path: Path) -> None:
    out = tmp_path / "state.parquet"
    code, _, stderr = run_cli("export", str(copy), "-o", str(out))
    assert (code, stderr) == (0, note(copy))
    table = pq.read_table(out, columns=["operator", "state", "scope"]).to_pylist()
    counted = Counter((row["operator"], row["state"]) for row in table if row["scope"] == "keyed")
    written = {
        (op["uid"], state): count
        for op in MANIFEST["operators"]
        for state, count in op["entry_counts"].items()
    }
    assert dict(counted) == written


def test_a_copy_without_shared_is_refused_with_what_to_do(tmp_path: Path) -> None:
    chk = copy_job_folder(tmp_path)
    shutil.rmtree(chk.parent / "shared")
    code, stdout, stderr = run_cli("inspect", str(chk))
    first = next(iter(absolute_paths(load(chk))))
    assert (code, stdout) == (1, "")
    assert stderr.startswith(
        f"statectl: error: {chk}/_metadata: operator keyed-str, subtask 0: state handle '"
    )
    assert stderr.endswith(
        f"' points outside the checkpoint's folders ({CHK}, shared, taskowned); the checkpoint was"
        f" moved from {ORIGINAL} without its shared/: copy it into {chk.parent}, or pass"
        " --allow-external-files to read it where it was\n"
    )
    assert stderr.count("\n") == 1 and first.startswith(ORIGINAL)


def renamed_paths(value: object, old: str, new: str) -> object:
    """`value` (metadata, however deeply nested) with every code-2 path under `old` under
    `new` instead."""
    if isinstance(value, FileHandle) and value.path.startswith(old + "/"):
        return dataclasses.replace(value, path=new + value.path[len(old) :])
    if isinstance(value, tuple):
        return tuple(renamed_paths(item, old, new) for item in value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {
            n: renamed_paths(getattr(value, n), old, new) for n in value.__dataclass_fields__
        }
        return dataclasses.replace(value, **changes)
    return value


def test_a_checkpoint_copied_from_s3_is_read_from_the_copy(tmp_path: Path) -> None:
    """Written to S3 (the Hadoop scheme Flink writes: `s3a://`), copied to a local folder."""
    chk = copy_job_folder(tmp_path)
    on_s3 = "s3a://prod-bucket/checkpoints/5374617465637463686b707400000001"
    md = renamed_paths(load(chk), ORIGINAL, on_s3)
    assert isinstance(md, CheckpointMetadata)
    save(chk, md)
    code, _, stderr = run_cli("verify", "--deep", str(chk))
    assert (code, stderr) == (
        0,
        f"statectl: note: checkpoint moved: reading {on_s3} from {chk.parent}\n",
    )


def with_absolute_meta_file(chk: Path) -> str:
    """keyed-str subtask 0's RocksDB meta file (a relative handle into `chk-2`, as Flink 2.3
    writes it) named by absolute path instead, into the original `chk-2`, as Flink 1.x did."""
    md = load(chk)
    handle = subtask(md, "keyed-str", 0).managed_keyed_state
    assert isinstance(handle, IncrementalKeyedHandle)
    assert isinstance(handle.meta, RelativeFileHandle)
    path = f"{ORIGINAL}/{CHK}/{handle.meta.relative_path}"
    new = dataclasses.replace(handle, meta=FileHandle(path, handle.meta.size))
    save(chk, with_subtask(md, "keyed-str", 0, managed_keyed_state=new))
    return path


def test_absolute_handles_into_the_checkpoint_folder_are_read_from_the_copy(
    tmp_path: Path,
) -> None:
    chk = copy_job_folder(tmp_path)
    path = with_absolute_meta_file(chk)
    with pytest.warns(StatectlNote):
        sp = open_savepoint(str(chk))
    assert Path(sp.absolute(path).path) == chk / path.rsplit("/", 1)[1]
    code, _, stderr = run_cli("verify", "--deep", str(chk))
    assert (code, stderr) == (0, note(chk))


def test_a_renamed_checkpoint_folder_is_not_flinks_layout(tmp_path: Path) -> None:
    chk = copy_job_folder(tmp_path)
    path = with_absolute_meta_file(chk)
    renamed = chk.rename(chk.parent / "backup")
    code, stdout, stderr = run_cli("inspect", str(renamed))
    assert (code, stdout) == (1, "")
    assert stderr == note(renamed) + (
        f"statectl: error: {renamed}/_metadata: operator keyed-str, subtask 0: state handle"
        f" {path!r} points outside the checkpoint's folders (backup, shared, taskowned); pass"
        " --allow-external-files to read it\n"
    )


@pytest.mark.parametrize(
    "path",
    [
        "file:/elsewhere/5374617465637463686b707400000001/shared/x",  # another job folder
        f"{ORIGINAL}/shared/../../../../etc/hostname",  # mapped, then out of the copy
        f"{ORIGINAL}/shared-not/x",  # the job folder, but none of its state folders
    ],
)
def test_a_handle_outside_the_copy_is_still_refused(tmp_path: Path, path: str) -> None:
    chk = copy_job_folder(tmp_path)
    md = load(chk)
    handle = subtask(md, "keyed-str", 0).managed_keyed_state
    assert isinstance(handle, IncrementalKeyedHandle)
    first = handle.shared[0]
    assert isinstance(first.handle, FileHandle)
    moved = dataclasses.replace(first, handle=FileHandle(path, first.handle.size))
    new = dataclasses.replace(handle, shared=(moved, *handle.shared[1:]))
    save(chk, with_subtask(md, "keyed-str", 0, managed_keyed_state=new))

    code, stdout, stderr = run_cli("inspect", str(chk))
    assert (code, stdout) == (1, "")
    assert stderr == note(chk) + (
        f"statectl: error: {chk}/_metadata: operator keyed-str, subtask 0: state handle"
        f" {path!r} points outside the checkpoint's folders ({CHK}, shared, taskowned); pass"
        " --allow-external-files to read it\n"
    )
