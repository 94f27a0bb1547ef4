"""`flink-savepoint-metadata`'s `keyed_bytes` is a subtask's file, on each of its states' rows:
the documented way to sum it counts each file once (docs/counts.md)."""

from __future__ import annotations

import re

import pytest

from tests.conftest import REPO, fixture_savepoint

pytest.importorskip("pyspark")


def test_keyed_bytes_summed_over_distinct_subtasks_are_the_files() -> None:
    import statectl
    from statectl.spark import metadata_table

    path = str(fixture_savepoint("hashmap_p4"))
    rows = metadata_table(path).to_pandas()
    once = rows[["operator_id", "operator_uid", "subtask", "keyed_bytes"]].drop_duplicates()
    summed = once.groupby("operator_uid")["keyed_bytes"].sum().to_dict()
    files = {
        op.uid: sum(s.keyed_bytes for s in op.subtasks)
        for op in statectl.open(path).inspect().operators
        if op.subtasks
    }
    assert summed == files
    per_state = rows.dropna(subset=["state"]).groupby("operator_uid")["keyed_bytes"].sum()
    assert per_state["keyed-str"] == 5 * files["keyed-str"]  # what summing per state row gives


def test_the_documented_sums_of_keyed_bytes_count_each_file_once() -> None:
    """Every example summing `keyed_bytes` in the README and docs/ takes distinct subtasks."""
    sums = 0
    for doc in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        text = doc.read_text()
        for example in re.findall(r"meta\..*?sum\(\"keyed_bytes\"\)", text, re.DOTALL):
            sums += 1
            assert ".distinct()" in example and "subtask" in example, (doc.name, example)
    assert sums >= 1
