"""A Snappy decompression bomb in a real savepoint: the first compressed key-group block of
`keyed-str` subtask 0 (fixture hashmap_compressed) declares 4 GiB in its first chunk.

Commands that decompress it must refuse it with one error line naming the file, exit 1, and
leave no output. They run in a subprocess whose address space may grow by at most 1 GiB, so
that trusting the declared length fails as it did where the crash was reported (an allocation
failure aborting the process), whatever memory this machine has.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.reliability.corpus import _first_block, copy_fixture, patch

HEADROOM = 1 << 30
FOUR_GIB_PREAMBLE = b"\xff\xff\xff\xff\x0f"  # varint 2**32 - 1


def bomb_savepoint(tmp_path: Path) -> tuple[Path, Path, int, int]:
    """The savepoint, the state file, the key group and the offset of its bomb chunk."""
    savepoint = copy_fixture("hashmap_compressed", tmp_path)
    path, key_group, offset = _first_block(savepoint, "keyed-str", 0)
    chunk_at = offset + 10  # after the stream identifier
    data = path.read_bytes()
    assert data[chunk_at] == 0x00  # a compressed chunk; its payload follows type, length, CRC
    patch(path, chunk_at + 8, FOUR_GIB_PREAMBLE)
    return savepoint, path, key_group, chunk_at - offset


# The CLI in a fresh interpreter whose address space may then grow by at most HEADROOM.
_BOUNDED_CLI = """
import resource, sys
import pyarrow as pa
from statectl.cli.main import main
pa.set_memory_pool(pa.system_memory_pool())  # mimalloc reserves address space by the GiB
with open("/proc/self/statm") as statm:
    used = int(statm.read().split()[0]) * resource.getpagesize()
_, hard = resource.getrlimit(resource.RLIMIT_AS)
resource.setrlimit(resource.RLIMIT_AS, (used + int(sys.argv[1]), hard))
main(sys.argv[2:])
"""


def run_bounded(*argv: str) -> tuple[int, str, str]:
    """statectl in a subprocess with bounded address space: exit code (negative: the signal
    that killed it), stdout, stderr."""
    done = subprocess.run(
        [sys.executable, "-c", _BOUNDED_CLI, str(HEADROOM), *argv],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    return done.returncode, done.stdout, done.stderr


def expected_error(path: Path, key_group: int, chunk_at: int) -> str:
    return (
        f"statectl: error: {path} (key group {key_group}): corrupt Snappy chunk at offset "
        f"{chunk_at}: declares 4294967295 uncompressed bytes, more than the 65536 a chunk may "
        "hold\n"
    )


def test_inspect_deep(tmp_path: Path) -> None:
    savepoint, path, key_group, chunk_at = bomb_savepoint(tmp_path)
    code, out, err = run_bounded("inspect", "--deep", str(savepoint))
    assert (code, out, err) == (1, "", expected_error(path, key_group, chunk_at))


def test_verify_deep_reports_a_finding(tmp_path: Path) -> None:
    savepoint, path, key_group, chunk_at = bomb_savepoint(tmp_path)
    code, out, err = run_bounded("verify", "--deep", "--json", str(savepoint))
    assert code == 1, err
    assert json.loads(out)["findings"] == [
        {
            "operator": "keyed-str",
            "operator_id": "0cad1b1f959e0cc01a89a8ec2be0100c",
            "subtask": 0,
            "file": str(path),
            "problem": f"key group {key_group}: corrupt Snappy chunk at offset {chunk_at}: "
            "declares 4294967295 uncompressed bytes, more than the 65536 a chunk may hold",
        }
    ]


def test_export(tmp_path: Path) -> None:
    savepoint, path, key_group, chunk_at = bomb_savepoint(tmp_path / "in")
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    code, out, err = run_bounded("export", str(savepoint), "-o", str(out_dir / "state.parquet"))
    assert (code, out, err) == (1, "", expected_error(path, key_group, chunk_at))
    assert list(out_dir.iterdir()) == []
