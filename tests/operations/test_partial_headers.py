"""A state-file header read only in part is one verdict for every reader, never fewer rows.

A flipped byte or a huge count in a header's state list leaves the states after it unread.
Entries name their state by its index in that list and broadcast maps need their serializers to
split, so a reader that went on would drop rows (`export --typed` once left a subtask's file out
and exited 0). Every reader refuses such a file in the same one line naming it: `inspect
--deep`, `verify --deep` (its finding), `export`, `export --typed`, `diff` and `State.read`.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import statectl
from statectl.formats import state_headers
from statectl.formats.handles import ByteStreamHandle, RelativeFileHandle
from tests.conftest import fixture_savepoint, run_cli
from tests.reliability.corpus import keyed_handle, load, patch, subtask

HUGE_I32 = b"\x7f\xff\xff\xff"


def verdicts(sp: Path, tmp: Path) -> dict[str, tuple[int, list[str]]]:
    """Each reader's exit code and lines: stderr's (verify: its findings on stdout)."""
    argvs = {
        "inspect --deep": ["inspect", "--deep", str(sp)],
        "verify --deep": ["verify", "--deep", str(sp)],
        "export": ["export", str(sp), "-o", str(tmp / "rows.parquet")],
        "export --typed": ["export", "--typed", str(sp), "-o", str(tmp / "typed")],
        "diff": ["diff", "--no-spark", str(sp), str(sp)],
    }
    found = {}
    for reader, argv in argvs.items():
        code, out, err = run_cli(*argv)
        found[reader] = (code, (out if reader == "verify --deep" else err).splitlines())
    try:
        for op in statectl.open(str(sp)).operators:
            for state in op.states:
                state.to_arrow()
        found["State.read"] = (0, [])
    except statectl.StatectlError as exc:
        found["State.read"] = (1, [str(exc)])
    return found


def assert_refused_alike(sp: Path, tmp: Path, file: str, problem: str) -> None:
    """Every reader: exit 1 and one line, `<file>: … <problem>`."""
    found = verdicts(sp, tmp)
    for reader, (code, lines) in found.items():
        assert code == 1 and len(lines) == 1, (reader, code, lines)
        assert file in lines[0] and lines[0].endswith(problem), (reader, lines[0])
    assert not (tmp / "rows.parquet").exists() and not (tmp / "typed").exists()


def _copy(fixture: str, tmp: Path) -> Path:
    return Path(shutil.copytree(fixture_savepoint(fixture), tmp / "sp"))


def _keyed_file(sp: Path, uid: str, index: int) -> Path:
    handle = keyed_handle(load(sp), uid, index)
    assert isinstance(handle.delegate, RelativeFileHandle)
    return sp / handle.delegate.relative_path


def test_a_keyed_header_with_a_flipped_byte(tmp_path: Path) -> None:
    sp = _copy("hashmap_canonical_files", tmp_path)
    path = _keyed_file(sp, "keyed-str", 0)
    patch(path, 774, bytes((path.read_bytes()[774] ^ 0xFF,)))  # inside state #1's name
    problem = (
        "keyed state header read in part (state #1 at offset 546: invalid modified UTF-8 "
        "string: invalid start byte at offset 722): the states after that cannot be read"
    )
    assert_refused_alike(sp, tmp_path, str(path), problem)


def test_a_keyed_header_with_a_huge_state_count(tmp_path: Path) -> None:
    """Before the fix `export --typed` left this subtask's file out and exited 0."""
    sp = _copy("hashmap_canonical_files", tmp_path)
    path = _keyed_file(sp, "keyed-str", 0)
    count_at = path.read_bytes().index(b"\x00\x02mp") - 2  # the i16 before the first state
    patch(path, count_at, HUGE_I32)
    problem = (
        "keyed state header read in part (state #0 at offset 101: truncated: needs 65535 bytes "
        "at offset 103, only 1750 left at offset 101): the states after that cannot be read"
    )
    assert_refused_alike(sp, tmp_path, str(path), problem)


def test_an_inline_broadcast_header_with_a_flipped_byte(tmp_path: Path) -> None:
    """Operator state inline in `_metadata`: before the fix the broadcast map of subtask 0 was
    one unsplit row (`export`) or none (`export --typed`, `State.read`), all exiting 0."""
    sp = _copy("hashmap_canonical_inline", tmp_path)
    handle = subtask(load(sp), "bcast", 0).managed_operator_state
    assert handle is not None and isinstance(handle.delegate, ByteStreamHandle)
    metadata = sp / "_metadata"
    at = metadata.read_bytes().index(handle.delegate.data) + 150  # a serializer class name
    patch(metadata, at, bytes((metadata.read_bytes()[at] ^ 0x80,)))
    problem = (
        "operator state header read in part (state #0 at offset 9: invalid modified UTF-8 "
        "string: invalid continuation byte at offset 95): the states after that cannot be read"
    )
    assert_refused_alike(sp, tmp_path, f"{metadata} (inline state)", problem)


@pytest.mark.flink
def test_a_heap_checkpoints_broadcast_header_with_a_flipped_byte(tmp_path: Path) -> None:
    from tests.flink import harness

    source = harness.snapshot_path(harness.heap_snapshots()["checkpoint"])
    sp = Path(shutil.copytree(source, tmp_path / "sp"))
    handle = subtask(load(sp), "bcast", 0).managed_operator_state
    assert handle is not None and isinstance(handle.delegate, RelativeFileHandle)
    path = sp / handle.delegate.relative_path
    patch(path, 270, bytes((path.read_bytes()[270] ^ 0x80,)))  # a serializer class name
    header = state_headers.parse_operator_header(path.read_bytes()[:300])
    assert header.problem is not None and not header.states
    assert_refused_alike(sp, tmp_path, str(path), "the states after that cannot be read")


@pytest.mark.flink
def test_a_sql_header_with_a_huge_option_count(tmp_path: Path) -> None:
    """SQL's group aggregation, subtask 0: `accState`'s option count set to 0x7fffffff. The
    RowData key serializer's snapshot is then scanned past `accState` to a later state list,
    so the header reads whole with states missing and ids shifted: `export`, `export --typed`
    and `inspect --deep` exited 0 with rows of two states under other states' names."""
    from tests.flink import harness
    from tests.operations.test_sql_values import SPECS

    manifest = harness.sql_savepoints({"hashmap": SPECS["hashmap"]})["hashmap"]
    sp = Path(shutil.copytree(manifest.parent / "savepoint", tmp_path / "sp"))
    path = next(p for p in sorted(sp.iterdir()) if b"\x00\x08accState" in p.read_bytes()[:8000])
    data = path.read_bytes()
    options = data.index(b"\x00\x10KEYED_STATE_TYPE", data.index(b"\x00\x08accState")) - 4
    patch(path, options, HUGE_I32)
    problem = (
        "keyed state header: RowDataSerializerSnapshot does not match its layout; its states "
        "cannot be told apart"
    )
    assert_refused_alike(sp, tmp_path, str(path), problem)
