"""No command publishes an output its own check rejects (`verify.check_written`).

A fault is injected at the writer (a key-group block without its end mark, as a truncated
block would be): the command exits 1 with one line naming the file, and nothing is published,
not even a staging folder. Destinations are `memory://`, so the work runs in this process,
where the fault is injected.
"""

from __future__ import annotations

import uuid

import fsspec
import pyarrow as pa
import pytest

import statectl
from statectl.errors import StatectlError
from statectl.formats import keyed_blocks
from statectl.operations.rescale import execute
from statectl.savepoint import keyed_rewrite
from tests.conftest import FIXTURES, run_cli

SOURCE = FIXTURES / "hashmap_canonical_files" / "savepoint"
END_MARK = (keyed_blocks.END_OF_KEY_GROUP_MARK).to_bytes(2, "big")


def _destination() -> tuple[str, str]:
    root = f"statectl-tests/{uuid.uuid4().hex}"
    return root, f"memory://{root}/out"


def _nothing_under(root: str) -> bool:
    return fsspec.filesystem("memory").find(f"/{root}") == []


def test_a_rescale_whose_blocks_lose_their_end_mark_publishes_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    append_block = execute._append_block

    def truncated(chunks: list[execute.Chunk], out: bytearray) -> None:
        append_block(chunks, out)
        del out[-2:]

    monkeypatch.setattr(execute, "_append_block", truncated)
    root, destination = _destination()
    code, out, err = run_cli(
        "rescale", str(SOURCE), "-o", destination, "--max-parallelism", "256", "-p", "3"
    )
    errors = [line for line in err.splitlines() if line.startswith("statectl: error:")]
    assert code == 1 and len(errors) == 1 and err.splitlines()[-1] == errors[0], err
    assert "fails its own check, so nothing was published" in errors[0]
    assert "key-group block" in errors[0] and "memory://" in errors[0]
    assert out == "" and _nothing_under(root)


def test_an_edit_whose_blocks_lose_their_end_mark_publishes_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The library's write path (transform, the Spark writer, upgrade and migrate end there)."""
    build_block = keyed_blocks.build_block
    monkeypatch.setattr(
        keyed_rewrite.keyed_blocks, "build_block", lambda *a, **k: build_block(*a, **k)[:-2]
    )
    sp = statectl.open(str(SOURCE))
    state = sp.operator("keyed-str").state("cnt")
    rows = state.to_arrow().to_pylist()
    state.replace(pa.Table.from_pylist(rows[1:], schema=state.schema))
    root, destination = _destination()
    with pytest.raises(StatectlError, match="fails its own check") as failed:
        sp.write(destination)
    assert failed.value.source and failed.value.source.startswith("memory://")
    assert _nothing_under(root)


def test_unharmed_writes_pass_the_check() -> None:
    """Not vacuous: the same commands without the fault publish."""
    root, destination = _destination()
    code, _, err = run_cli(
        "rescale", str(SOURCE), "-o", destination, "--max-parallelism", "256", "-p", "3"
    )
    assert code == 0, err
    assert fsspec.filesystem("memory").exists(f"/{root}/out/_metadata")
