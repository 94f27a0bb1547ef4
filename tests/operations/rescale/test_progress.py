"""What `rescale` reports while it runs: files written and state bytes, ending at the totals."""

from __future__ import annotations

from pathlib import Path

import pytest

from statectl.cli.progress_view import TaskProgress
from statectl.cli.units import human_bytes
from statectl.operations.rescale.job import rescale
from statectl.operations.rescale.plan import plan_rescale
from statectl.progress import Progress
from statectl.savepoint.reader import open_savepoint
from tests.conftest import fixture_savepoint

pytestmark = pytest.mark.spark


@pytest.mark.parametrize(
    ("parallelism", "max_parallelism"), [(3, None), (1, None), (3, 256)], ids=["p3", "p1", "m256"]
)
def test_progress_counts_every_file_and_ends_at_the_totals(
    spark: object, tmp_path: Path, parallelism: int, max_parallelism: int | None
) -> None:
    source = fixture_savepoint("hashmap_canonical_files")
    plan = plan_rescale(open_savepoint(str(source)), parallelism, {}, max_parallelism)
    seen: list[Progress] = []
    rescale(plan, str(tmp_path / "out"), progress=seen.append)
    written = [p for p in (tmp_path / "out").iterdir() if p.name != "_metadata"]
    last = seen[-1]
    assert (last.files, last.total_files) == (len(written), len(written))
    assert last.bytes == last.total_bytes
    if max_parallelism is None:  # bytes copied are bytes written (headers included)
        assert last.total_bytes == sum(p.stat().st_size for p in written)
    else:  # re-hashed files count the input blocks they came from
        assert 0 < last.total_bytes < sum(p.stat().st_size for p in written)
    assert all(p.total_files == last.total_files for p in seen)  # re-hashed files counted upfront
    assert [p.files for p in seen] == sorted(p.files for p in seen)
    assert [p.bytes for p in seen] == sorted(p.bytes for p in seen)


def test_plain_progress_is_one_line_with_files_and_bytes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with TaskProgress("rescale") as progress:  # stderr is no terminal under pytest
        progress.update(Progress(1, 3, 100, 4096))
        progress.update(Progress(3, 3, 4096, 4096))
        progress.update(Progress(3, 3, 4096, 4096))
    assert capsys.readouterr().err == "statectl: rescale: 3/3 files written (4.0 KiB of state)\n"
    assert human_bytes(4096) == "4.0 KiB"
