"""The batched re-hash (vectorised key groups, chunks through the shuffle, blocks from chunks)
against the per-entry `KeyRegrouper.regroup`, and the same bytes from both engines."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any
from unittest.mock import patch

import fsspec
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench import synthetic
from statectl.execution.engine import Engine, LocalEngine
from statectl.formats import keyed_blocks
from statectl.formats.java_types import key_group_prefix_bytes
from statectl.operations.rescale import rekey_batches
from statectl.operations.rescale.execute import SubtaskResult
from statectl.operations.rescale.job import rekey
from statectl.operations.rescale.plan import plan_rescale
from statectl.operations.rescale.rekey import RekeyOperator
from statectl.savepoint.keyed import block_spans
from statectl.savepoint.reader import open_savepoint
from tests.conftest import fixture_savepoint, run_cli
from tests.reliability.corpus import corrupted_cases

# Two key types, several old files, timers among the states; 300 → 64 narrows the prefix
# (the fixture test widens it: 128 → 256).
SMALL = {
    key: synthetic.Params(
        96 << 10, parallelism=3, max_parallelism=300, list_elements=2, key_type=key
    )
    for key in ("String", "Long")
}


@pytest.fixture(scope="module")
def savepoints(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("small")
    return {key: synthetic.ensure(params, root).path for key, params in SMALL.items()}


def _rekey(
    path: Path, engine: Engine, out: Path, parallelism: int, max_p: int, uid: str | None = None
) -> tuple[list[RekeyOperator], list[Any]]:
    """Re-hash the keyed operators (or only `uid`) of a savepoint into `out`."""
    plan = plan_rescale(open_savepoint(str(path)), parallelism, max_parallelism=max_p)
    operators = [
        p.rekey for p in plan.operators if p.rekey is not None and uid in (None, p.operator.uid)
    ]
    results = rekey(engine, operators, str(out), None)
    return operators, results


def _old_entries(path: Path, operator: RekeyOperator) -> Counter:
    """(state name, new key, value) of every old entry, its key regrouped one by one."""
    sp = open_savepoint(str(path))
    op = sp.find_operator(synthetic.OPERATORS[operator.regrouper.key_type.name])
    entries: Counter = Counter()
    for subtask in op.subtasks or ():
        handle = subtask.managed_keyed_state
        stream = sp.stream(handle.delegate)
        for span in block_spans(stream, handle):
            block = stream.read(span.start, span.end)
            for entry in keyed_blocks.iter_entries(block, False):
                _, new_key = operator.regrouper.regroup(entry.state_id, entry.key)
                entries[(entry.state_id, new_key, entry.value)] += 1
    return entries


def _new_entries(out: Path, results: list[Any], max_p: int) -> Counter:
    entries: Counter = Counter()
    prefix = key_group_prefix_bytes(max_p)
    for result in results:
        assert isinstance(result, SubtaskResult) and result.keyed is not None
        data = (out / result.keyed.delegate.relative_path).read_bytes()
        spans = keyed_blocks.block_spans(
            result.keyed.start_key_group, result.keyed.offsets, len(data)
        )
        for span in spans:
            for entry in keyed_blocks.iter_entries(data[span.start : span.end], False):
                assert int.from_bytes(entry.key[:prefix], "big") == span.key_group
                entries[(entry.state_id, entry.key, entry.value)] += 1
    return entries


@pytest.mark.parametrize("key", sorted(SMALL))
@pytest.mark.parametrize(("parallelism", "max_p"), [(2, 256), (4, 4096), (1, 64)])
def test_every_entry_once_in_the_key_group_regroup_gives(
    savepoints: dict[str, Path], tmp_path: Path, key: str, parallelism: int, max_p: int
) -> None:
    uid = SMALL[key].operator
    (operator,), results = _rekey(savepoints[key], LocalEngine(), tmp_path, parallelism, max_p, uid)
    expected = _old_entries(savepoints[key], operator)
    assert sum(expected.values()) == sum(
        synthetic.ensure(SMALL[key], savepoints[key].parent).entries.values()
    )
    assert _new_entries(tmp_path, results, max_p) == expected


def test_the_fixtures_timers_and_both_key_types(tmp_path: Path) -> None:
    path = fixture_savepoint("hashmap_canonical_files")
    operators, results = _rekey(path, LocalEngine(), tmp_path, 3, 256)
    assert sorted(op.regrouper.key_type.name for op in operators) == ["Long", "String"]
    found = _new_entries(tmp_path, results, 256)
    expected = sum((_old_entries(path, op) for op in operators), Counter())
    assert found == expected


@pytest.mark.spark
def test_both_engines_write_the_same_bytes(
    spark: Any, savepoints: dict[str, Path], tmp_path: Path
) -> None:
    from statectl.execution.spark import SparkEngine

    for key, path in savepoints.items():
        written = {}
        for engine in (LocalEngine(), SparkEngine()):
            out = tmp_path / f"{key}-{engine.name}"
            out.mkdir()
            _rekey(path, engine, out, 3, 256, SMALL[key].operator)
            written[engine.name] = {f.name: f.read_bytes() for f in out.iterdir()}
        assert written["local"] == written["spark"]
        assert len(written["local"]) == 3


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 60), st.integers(1, 9)), min_size=1, max_size=30))
def test_ranges_copy_as_slices_would(ranges: list[tuple[int, int]]) -> None:
    source = np.frombuffer(bytes(range(70)), np.uint8)
    starts = np.array([start for start, _ in ranges], np.int64)
    lengths = np.array([length for _, length in ranges], np.int64)
    expected = b"".join(bytes(source[a : a + n]) for a, n in ranges)
    positions = np.cumsum(lengths) - lengths
    for many in (rekey_batches._MANY_LENGTHS, 0):  # by rows, and by one index per byte
        out = np.zeros(int(lengths.sum()), np.uint8)
        with patch.object(rekey_batches, "_MANY_LENGTHS", many):
            rekey_batches._copy_ranges(out, positions, source, starts, lengths)
        assert out.tobytes() == expected


@pytest.mark.parametrize(
    "case_name", ["block-key-hashes-elsewhere", "block-key-hashes-elsewhere-p300"]
)
def test_keys_stored_in_another_key_group_are_refused(case_name: str, tmp_path: Path) -> None:
    """A key that does not hash to its stored key group means statectl hashes the key type
    unlike the job did: re-hashing refuses rather than misplace keys."""
    case = next(c for c in corrupted_cases() if c.name == case_name)
    built = case.build(tmp_path)
    target = f"memory://refused-{case_name}"
    code, stdout, stderr = run_cli(
        "rescale", str(built.savepoint), "-o", target, "--max-parallelism", "4096"
    )
    old = open_savepoint(str(built.savepoint)).find_operator("keyed-long").max_parallelism
    pattern = (
        rf"statectl: error: {re.escape(str(built.culprit))}: 1 of \d+ keys do not hash to the "
        rf"key group they are stored in \(first: stored in key group (\d+), hashes to (\d+) "
        rf"under max parallelism {old}\): statectl hashes Long keys unlike this job, so "
        r"re-hashing would misplace them; nothing is written\n"
    )
    match = re.fullmatch(pattern, stderr)
    assert (code, stdout) == (1, "") and match, stderr
    assert match.group(1) != match.group(2)
    assert not fsspec.filesystem("memory").exists(target)
