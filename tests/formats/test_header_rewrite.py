"""Headers and snapshots rewritten by state-level edits: written back unchanged they are the
very bytes Flink wrote (every keyed and operator state header of the committed savepoints), and
TTL turned on is the TTL snapshot Flink writes for the same type (values fixtures)."""

from __future__ import annotations

from pathlib import Path

import pytest

from statectl.formats import state_headers
from statectl.formats.snapshot_edits import has_ttl, with_ttl, without_ttl
from statectl.savepoint import entries, keyed, native
from statectl.savepoint.reader import open_savepoint

FIXTURES = Path(__file__).parents[1] / "fixtures"
SAVEPOINTS = sorted(
    str(p.parent.relative_to(FIXTURES))
    for p in FIXTURES.rglob("_metadata")
    if "checkpoint" not in str(p) and "1.18.1-hashmap-compressed" not in str(p)
)
VALUES_OPERATOR = "8918828246c22e7d25902f74d971b709"


@pytest.mark.parametrize("savepoint", SAVEPOINTS)
def test_headers_written_back_unchanged_are_flinks_bytes(savepoint: str) -> None:
    sp = open_savepoint(str(FIXTURES / savepoint))
    headers = 0
    for op in sp.operators:
        for file in entries.keyed_files(sp, op):
            if isinstance(file, entries.KeyedFile):
                end = keyed.header_end(file.stream, file.handle)
                data, header = keyed.read_header(file.stream, end)
            else:
                data, header = native.meta_header(file.instance)
            assert state_headers.write_keyed_header(header) == bytes(data), file.description
            headers += 1
        for holder in entries.operator_files(sp, op):
            layout, head = entries.operator_file_layout(holder.stream, holder.handle)
            data = head[: layout.header_length]
            parsed = state_headers.parse_operator_header(data)
            assert state_headers.write_operator_header(parsed) == bytes(data)
            headers += 1
    assert headers > 0


@pytest.mark.parametrize("version", ["1.15.4", "1.20.3", "2.0.1", "2.3.0"])
def test_ttl_snapshots_are_flinks(version: str) -> None:
    sp = open_savepoint(str(FIXTURES / "values" / f"{version}-hashmap-canonical" / "savepoint"))
    header = entries.keyed_files(sp, sp.find_operator(VALUES_OPERATOR))[0].header()
    states = {state.name: state for state in header.states}
    # `string` and `ttl-value` are both String values, one without TTL, one with.
    assert with_ttl(states["string"]).value_serializer == states["ttl-value"].value_serializer
    assert (
        with_ttl(states["string"]).value_serializer.raw == states["ttl-value"].value_serializer.raw
    )
    for name in ("ttl-value", "ttl-list", "ttl-map", "ttl-reducing", "ttl-aggregating"):
        plain = without_ttl(states[name])
        assert not has_ttl(plain) and has_ttl(states[name])
        assert with_ttl(plain).value_serializer.raw == states[name].value_serializer.raw, name
