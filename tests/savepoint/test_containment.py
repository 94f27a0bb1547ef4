"""Relative handles (code 6) stay inside the savepoint directory (the folder holding `_metadata`).

A savepoint from elsewhere must not make statectl read, copy or export files outside it: a
relative handle that leaves the folder (`../../../../etc/hostname`, a state file moved to a
sibling folder, a RocksDB SST handle naming `/etc/passwd` through `..`) is one verify finding
and makes every other command fail with one line before it writes anything. Absolute handles
(code 2, segments) of retained checkpoints stay allowed: tests/savepoint/test_native.py.

No Spark here: `rescale` and `convert` must refuse while checking their input.
"""

from __future__ import annotations

import dataclasses
import posixpath
from collections.abc import Callable
from pathlib import Path

import pytest

from statectl.errors import SavepointError
from statectl.formats.handles import (
    FileHandle,
    IncrementalKeyedHandle,
    KeyGroupsHandle,
    LocalFile,
    RelativeFileHandle,
    SegmentFileHandle,
)
from statectl.savepoint.model import Savepoint
from statectl.savepoint.reader import open_savepoint
from tests.conftest import checksums, fixture_savepoint, run_cli
from tests.reliability.corpus import (
    FILES,
    NATIVE,
    copy_fixture,
    load,
    save,
    subtask,
    with_subtask,
)

PASSWD = Path("/etc/passwd")
HOSTNAME = Path("/etc/hostname")
OUTSIDE = "points outside the savepoint directory"


def _to_root(sp: Path, target: Path) -> str:
    """`../` up to `/` from the savepoint folder, then `target` (extra `..` stop at `/`)."""
    return "../" * (len(sp.parts) + 2) + str(target).lstrip("/")


def _keyed_to(sp: Path, name: Callable[[Path, RelativeFileHandle], str], size: int | None) -> str:
    """Point keyed-str subtask 0's key-group file at `name(sp, old handle)`."""
    md = load(sp)
    handle = subtask(md, "keyed-str", 0).managed_keyed_state
    assert isinstance(handle, KeyGroupsHandle)
    assert isinstance(handle.delegate, RelativeFileHandle)
    path = name(sp, handle.delegate)
    delegate = RelativeFileHandle(path, handle.delegate.size if size is None else size)
    new = dataclasses.replace(handle, delegate=delegate)
    save(sp, with_subtask(md, "keyed-str", 0, managed_keyed_state=new))
    return path


def hostname(sp: Path) -> str:
    """(a) a relative handle walking up to /etc/hostname, with its true size."""
    return _keyed_to(sp, lambda s, _: _to_root(s, HOSTNAME), HOSTNAME.stat().st_size)


def moved_outside(sp: Path) -> str:
    """(b) a valid state file moved to a sibling folder and referenced as `../outside/<name>`."""

    def move(s: Path, old: RelativeFileHandle) -> str:
        outside = s.parent / "outside"
        outside.mkdir()
        (s / old.relative_path).rename(outside / old.relative_path)
        return f"../outside/{old.relative_path}"

    return _keyed_to(sp, move, None)


def passwd_sst(sp: Path) -> str:
    """(c) an SST of keyed-str subtask 0's RocksDB instance, moved to the shared map and
    pointed at /etc/passwd with its true size."""
    md = load(sp)
    handle = subtask(md, "keyed-str", 0).managed_keyed_state
    assert isinstance(handle, IncrementalKeyedHandle)
    sst = next(f for f in handle.private if f.local_path.endswith(".sst"))
    path = _to_root(sp, PASSWD)
    shared = LocalFile(sst.local_path, RelativeFileHandle(path, PASSWD.stat().st_size))
    private = tuple(f for f in handle.private if f is not sst)
    new = dataclasses.replace(handle, shared=(*handle.shared, shared), private=private)
    save(sp, with_subtask(md, "keyed-str", 0, managed_keyed_state=new))
    return path


CASES = {"etc-hostname": (FILES, hostname), "moved-outside": (FILES, moved_outside)}
NATIVE_CASES = {"etc-passwd-sst": (NATIVE, passwd_sst)}

Argv = Callable[[Path, Path, Path], list[str]]
COMMANDS: dict[str, Argv] = {
    "inspect --deep": lambda sp, _, __: ["inspect", "--deep", str(sp)],
    "verify": lambda sp, _, __: ["verify", str(sp)],
    "verify --deep": lambda sp, _, __: ["verify", "--deep", str(sp)],
    "rescale": lambda sp, _, out: ["rescale", str(sp), "-o", str(out / "dst"), "-p", "3"],
    "migrate": lambda sp, _, out: [
        "migrate",
        str(sp),
        "-o",
        str(out / "dst"),
        "--rename-uid",
        "keyed-str=ks",
    ],
    "export": lambda sp, _, out: ["export", str(sp), "-o", str(out / "dst.parquet")],
    "diff": lambda sp, pristine, _: ["diff", "--no-spark", str(sp), str(pristine)],
}
CONVERT: dict[str, Argv] = {
    "convert": lambda sp, _, out: ["convert", str(sp), "-o", str(out / "dst")]
}


pytestmark = pytest.mark.usefixtures("no_spark")


def _params() -> list[object]:
    combos = [(c, m) for c in CASES for m in COMMANDS]
    combos += [(c, m) for c in NATIVE_CASES for m in {**COMMANDS, **CONVERT}]
    return [pytest.param(c, m, id=f"{c}-{m}") for c, m in combos]


@pytest.mark.parametrize(("case", "command"), _params())
def test_escaping_handle_is_refused(case: str, command: str, tmp_path: Path) -> None:
    fixture, corrupt = {**CASES, **NATIVE_CASES}[case]
    sp = copy_fixture(fixture, tmp_path / "input")
    path = corrupt(sp)
    pristine = copy_fixture(fixture, tmp_path / "pristine")
    out = tmp_path / "out"
    out.mkdir()
    before = checksums(tmp_path)

    code, stdout, stderr = run_cli(*{**COMMANDS, **CONVERT}[command](sp, pristine, out))

    line = f"{sp}/_metadata: operator keyed-str, subtask 0: state handle '{path}' {OUTSIDE}\n"
    if command.startswith("verify"):
        assert (code, stdout, stderr) == (1, line, "")
    else:
        assert (code, stdout, stderr) == (1, "", f"statectl: error: {line}")
    assert list(out.iterdir()) == []  # nothing at DST, no staging sibling
    assert checksums(tmp_path) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["input", "out", "pristine"]
    assert PASSWD.read_text().splitlines()[0] not in stdout + stderr


# --- the rule itself ----------------------------------------------------------------------


@pytest.fixture
def savepoint(tmp_path: Path) -> Savepoint:
    return open_savepoint(str(copy_fixture(FILES, tmp_path)))


@pytest.mark.parametrize(
    "name",
    [
        "../x",
        "..",
        "a/../../x",
        "/etc/passwd",
        "//etc/passwd",
        "..\\..\\etc\\passwd",
        "a\\..\\..\\x",
    ],
)
def test_names_leaving_the_folder_are_refused(savepoint: Savepoint, name: str) -> None:
    with pytest.raises(SavepointError) as raised:
        savepoint.stream(RelativeFileHandle(name, 1))
    assert raised.value.message == f"state handle {name!r} {OUTSIDE}"
    assert raised.value.source == savepoint.metadata_location.url


@pytest.mark.parametrize("name", ["", ".", "a/.."])
def test_names_of_no_file_are_refused(savepoint: Savepoint, name: str) -> None:
    with pytest.raises(SavepointError) as raised:
        savepoint.stream(RelativeFileHandle(name, 1))
    assert raised.value.message == f"state handle {name!r} names no file in the savepoint directory"
    assert raised.value.source == savepoint.metadata_location.url


def test_a_nul_byte_is_not_a_file_name(savepoint: Savepoint) -> None:
    with pytest.raises(SavepointError) as raised:
        savepoint.stream(RelativeFileHandle("a\x00/../../x", 1))
    assert (
        raised.value.message
        == "not a valid file name (state handle 'a\\x00/../../x' has a NUL byte)"
    )
    assert raised.value.source == savepoint.directory.url + "/a\x00/../../x"


@pytest.mark.parametrize(
    ("name", "resolved"), [("x", "x"), ("sub/x", "sub/x"), ("./x", "x"), ("a/../x", "x")]
)
def test_names_inside_the_folder_resolve_there(
    savepoint: Savepoint, name: str, resolved: str
) -> None:
    stream = savepoint.stream(RelativeFileHandle(name, 7))
    expected = savepoint.directory.child(resolved)
    assert (stream.description, stream.location, stream.size) == (expected.url, expected, 7)


@pytest.mark.parametrize("folder", ["shared", "taskowned", "hashmap_canonical_files"])
def test_absolute_handles_into_the_checkpoint_folders_stay_allowed(
    savepoint: Savepoint, tmp_path: Path, folder: str
) -> None:
    """Retained checkpoints reference their files by absolute path (code 2), as Flink writes:
    files of the checkpoint's own folder (`<job id>/chk-N/…`, here the fixture's) and of the
    job's `shared` and `taskowned` folders beside it."""
    target = tmp_path / folder / "file"
    target.parent.mkdir(exist_ok=True)
    target.write_bytes(b"abc")
    stream = savepoint.stream(FileHandle(f"file://{target}", 3))
    assert (stream.location.path, stream.read()) == (str(target), b"abc")


ELSEWHERE = [
    "/etc/passwd",  # no folder of the checkpoint
    "../other-checkpoint/shared/file",  # the job folder, but not one of its state folders
    "../shared-elsewhere/file",
]


@pytest.mark.parametrize("path", ELSEWHERE)
@pytest.mark.parametrize("kind", ["file", "segment"])
def test_absolute_handles_elsewhere_are_refused(savepoint: Savepoint, path: str, kind: str) -> None:
    absolute = "file://" + posixpath.normpath(posixpath.join(savepoint.directory.path, path))
    handle = (
        FileHandle(absolute, 3) if kind == "file" else SegmentFileHandle(0, 3, 0, absolute, "f")
    )
    with pytest.raises(SavepointError) as refused:
        savepoint.stream(handle)
    assert str(refused.value) == (
        f"{savepoint.metadata_location.url}: state handle {absolute!r} points outside the "
        "checkpoint's folders (hashmap_canonical_files, shared, taskowned); pass "
        "--allow-external-files to read it"
    )


def test_absolute_handles_elsewhere_are_read_when_allowed(
    savepoint: Savepoint, tmp_path: Path
) -> None:
    target = tmp_path / "elsewhere" / "file"
    target.parent.mkdir()
    target.write_bytes(b"abc")
    allowed = dataclasses.replace(savepoint, allow_external_files=True)
    assert allowed.stream(FileHandle(f"file://{target}", 3)).read() == b"abc"


def test_a_symbolic_link_cannot_lead_out_of_the_savepoint(savepoint: Savepoint) -> None:
    (Path(savepoint.directory.path) / "link").symlink_to("/etc/passwd")
    with pytest.raises(SavepointError, match="points outside the savepoint directory"):
        savepoint.stream(RelativeFileHandle("link", 3))


# --- absolute handles, end to end --------------------------------------------------------


def moved_elsewhere(sp: Path) -> str:
    """keyed-str subtask 0's key-group file moved out of the checkpoint's folders and named by
    an absolute handle (code 2), as a `_metadata` written elsewhere could."""
    md = load(sp)
    handle = subtask(md, "keyed-str", 0).managed_keyed_state
    assert isinstance(handle, KeyGroupsHandle)
    assert isinstance(handle.delegate, RelativeFileHandle)
    elsewhere = sp.parent.parent / "elsewhere"
    elsewhere.mkdir()
    (sp / handle.delegate.relative_path).rename(elsewhere / handle.delegate.relative_path)
    path = f"file://{elsewhere / handle.delegate.relative_path}"
    new = dataclasses.replace(handle, delegate=FileHandle(path, handle.delegate.size))
    save(sp, with_subtask(md, "keyed-str", 0, managed_keyed_state=new))
    return path


READERS = ["inspect --deep", "verify --deep", "export"]


@pytest.mark.parametrize("command", READERS)
def test_an_absolute_handle_elsewhere_is_read_only_when_allowed(
    command: str, tmp_path: Path
) -> None:
    sp = copy_fixture(FILES, tmp_path / "input")
    path = moved_elsewhere(sp)
    out = tmp_path / "out"
    out.mkdir()
    argv = COMMANDS[command](sp, sp, out)

    code, stdout, stderr = run_cli(*argv)
    line = (
        f"{sp}/_metadata: operator keyed-str, subtask 0: state handle '{path}' points outside "
        f"the checkpoint's folders ({sp.name}, shared, taskowned); pass --allow-external-files "
        "to read it\n"
    )
    if command.startswith("verify"):
        assert (code, stdout, stderr) == (1, line, "")
    else:
        assert (code, stdout, stderr) == (1, "", f"statectl: error: {line}")
    assert list(out.iterdir()) == []

    code, stdout, stderr = run_cli(*argv, "--allow-external-files")
    assert (code, stderr) == (0, ""), stderr


def test_a_retained_checkpoint_needs_no_flag(tmp_path: Path) -> None:
    """Its handles are absolute, into its job's `shared` folder (and its own `chk-N`)."""
    chk = fixture_savepoint("rocksdb_retained_checkpoint")
    assert f"file:{chk.parent}/shared/".encode() in (chk / "_metadata").read_bytes()
    for argv in (["inspect", "--deep", str(chk)], ["verify", "--deep", str(chk)]):
        code, _, stderr = run_cli(*argv)
        assert (code, stderr) == (0, ""), stderr
