"""A rescale killed with SIGKILL midway leaves no savepoint at DST, and a rerun succeeds (and
removes the killed run's staging folder).

The input is a real fixture made bigger in the test: keyed-long's files are rewritten with one
Long key per key group (each hashing to its group) holding a long LIST state, so the Spark
tasks take long enough to be killed while they write. The CLI runs as a subprocess in its own
process group; SIGKILL goes to the whole group (the Spark JVM included), and the test checks
that no process of the group survives.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from statectl.formats import java_types, keyed_blocks, state_headers
from statectl.formats.handles import KeyGroupsHandle, RelativeFileHandle
from statectl.operations.verify import verify
from statectl.savepoint.reader import open_savepoint
from statectl.savepoint.writer import OWNER_FILE, STAGING_MARK
from tests.conftest import REPO
from tests.reliability.corpus import FILES, copy_fixture, load, save, with_subtask

LONG = java_types.KEY_TYPES["org.apache.flink.api.common.typeutils.base.LongSerializer"]
ELEMENTS_PER_KEY = 1 << 17  # ~1.1 MiB of list state per key group
VOID_NAMESPACE = b"\x00"


def bigger_savepoint(parent: Path) -> tuple[Path, int]:
    """hashmap_canonical_files with keyed-long grown to ~140 MiB; returns it and its entries."""
    sp = copy_fixture(FILES, parent)
    md = load(sp)
    op = next(o for o in md.operators if o.uid == "keyed-long")
    entries = 0
    for subtask in op.subtasks or ():
        handle = subtask.managed_keyed_state
        assert isinstance(handle, KeyGroupsHandle)
        assert isinstance(handle.delegate, RelativeFileHandle)
        path = sp / handle.delegate.relative_path
        header = path.read_bytes()[: min(o for o in handle.offsets if o)]
        grown, count = _grow(path, header, handle, op.max_parallelism)
        entries += count
        md = with_subtask(md, "keyed-long", subtask.index, managed_keyed_state=grown)
    save(sp, md)
    return sp, entries


def _grow(
    path: Path, header: bytes, handle: KeyGroupsHandle, max_parallelism: int
) -> tuple[KeyGroupsHandle, int]:
    state_id = state_headers.parse_keyed_header(header).state_names().index("lst")
    prefix = java_types.key_group_prefix_bytes(max_parallelism)
    offsets = []
    with path.open("wb") as out:
        out.write(header)
        position = len(header)
        for key_group in range(
            handle.start_key_group, handle.start_key_group + len(handle.offsets)
        ):
            key = _long_in(key_group, max_parallelism)
            composite = java_types.key_group_prefix(key_group, prefix) + LONG.write(key)
            value = b",".join(LONG.write(n) for n in range(ELEMENTS_PER_KEY))
            block = keyed_blocks.build_block([(state_id, [(composite + VOID_NAMESPACE, value)])])
            out.write(block)
            offsets.append(position)
            position += len(block)
    delegate = RelativeFileHandle(path.name, position)
    return dataclasses.replace(handle, offsets=tuple(offsets), delegate=delegate), len(offsets)


def _long_in(key_group: int, max_parallelism: int) -> int:
    return next(k for k in range(1 << 20) if LONG.key_group(k, max_parallelism) == key_group)


def _statectl(*args: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen(
        [sys.executable, "-m", "statectl", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        start_new_session=True,  # its own process group: the Spark JVM and Python workers too
    )


def _group_alive(pgid: int) -> list[str]:
    found = subprocess.run(["pgrep", "-g", str(pgid)], capture_output=True, text=True)
    return found.stdout.split()


def _wait_for_state_files(staging_parent: Path, process: subprocess.Popen[bytes]) -> Path:
    """The staging folder once its first state file exists (the Spark tasks are writing)."""
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        assert process.poll() is None, process.communicate()
        for folder in staging_parent.glob(STAGING_MARK + "*"):
            state_files = (p for p in folder.iterdir() if p.is_file() and p.name != OWNER_FILE)
            if any(p.stat().st_size > 0 for p in state_files):
                return folder
        time.sleep(0.005)
    raise AssertionError("the rescale never started writing")


@pytest.mark.spark
def test_rescale_killed_midway_leaves_no_savepoint_and_a_rerun_succeeds(tmp_path: Path) -> None:
    source, entries = bigger_savepoint(tmp_path / "input")
    assert verify(open_savepoint(str(source)), deep=True).ok
    out = tmp_path / "out"
    out.mkdir()
    destination = out / "rescaled"
    argv = ["rescale", str(source), "-o", str(destination), "-p", "3", "--master", "local[1]"]

    process = _statectl(*argv)
    staging = _wait_for_state_files(out, process)
    written = sorted(p.name for p in staging.iterdir() if p.name != OWNER_FILE)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=60)
    deadline = time.monotonic() + 30
    while _group_alive(process.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _group_alive(process.pid) == [], "a process of the killed run (Spark JVM?) survived"

    assert process.returncode == -signal.SIGKILL
    assert written and "_metadata" not in written
    assert not destination.exists(), "a killed run must not leave a savepoint at DST"
    assert [p.name for p in out.iterdir()] == [staging.name]  # only the staging sibling
    assert not (staging / "_metadata").exists()

    rerun = _statectl(*argv)  # DST does not exist, so no --overwrite is needed
    _, stderr = rerun.communicate(timeout=600)
    assert rerun.returncode == 0, stderr.decode()
    result = verify(open_savepoint(str(destination)), deep=True)
    assert result.ok, result.findings
    expected = verify(open_savepoint(str(source)), deep=True).entries
    assert result.entries == expected >= entries
    # The killed run's staging folder is removed once the rerun succeeded: its owner (a
    # process of this host) is dead, so no run can still be writing there.
    assert f"{staging}" not in stderr.decode()
    assert [p.name for p in out.iterdir()] == [destination.name]
