"""`entries(states=…)`: the entries of some states of a subtask's keyed state, exactly those a
full walk yields for them, in the same order. In CANONICAL files the other states' runs are
skipped without a step per entry (what makes reading one state of many, and upgrade's value
checks, cost that state's entries rather than the whole file's); RocksDB instances open only
the states' column families."""

from __future__ import annotations

from pathlib import Path

import pytest

from statectl.savepoint import entries
from statectl.savepoint.reader import open_savepoint

FIXTURES = Path(__file__).parents[1] / "fixtures"
SAVEPOINTS = {
    "values": FIXTURES / "values" / "1.20.3-hashmap-canonical" / "savepoint",  # 57 states
    "compressed": FIXTURES / "hashmap_compressed" / "savepoint",  # Snappy blocks
    "maxp300": FIXTURES / "hashmap_maxp300" / "savepoint",  # 2-byte key-group prefixes
    "native": FIXTURES / "values" / "1.20.3-rocksdb-native" / "savepoint",
}


def keyed_sources(path: Path) -> list[entries.KeyedSource]:
    sp = open_savepoint(str(path))
    return [file for op in sp.operators for file in entries.keyed_files(sp, op)]


@pytest.mark.parametrize("name", sorted(SAVEPOINTS))
def test_the_entries_of_some_states_are_those_of_the_full_walk(name: str) -> None:
    sources = keyed_sources(SAVEPOINTS[name])
    assert sources
    for source in sources:
        walked = list(source.entries())
        names = [state.name for state in source.header().states]
        for picked in ({names[0]}, set(names[1::3]), set()):
            expected = [e for e in walked if e.state.name in picked]
            assert list(source.entries(states=picked)) == expected, (source.description, picked)


def test_a_key_group_range_and_states_together() -> None:
    sp = open_savepoint(str(SAVEPOINTS["values"]))
    source = entries.keyed_files(sp, sp.find_operator("values"))[0]
    first, last = source.chunks(1)[1]
    wanted = {"pojo", "_timer_state/processing_user-timers"}
    expected = [e for e in source.entries((first, last)) if e.state.name in wanted]
    assert expected
    assert list(source.entries((first, last), states=wanted)) == expected
