"""A state edit of a RocksDB native savepoint rewrites only the edited states' rows: the
others' SST files are carried into the new instances as they are (`keyed_rewrite`), and read
back entry by entry as before."""

from __future__ import annotations

import hashlib
from pathlib import Path

import statectl
from statectl.formats import rocksdb_manifest
from tests.conftest import fixture_savepoint

UID = "keyed-str"
EDITED = "cnt"


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _files_by_family(savepoint: Path) -> dict[str, set[str]]:
    """Each column family's SST files (by content) in the savepoint's `keyed-str` instances,
    as the new instances' MANIFESTs list them."""
    found: dict[str, set[str]] = {}
    for manifest in savepoint.glob("*-keyed-MANIFEST-*"):
        prefix = manifest.name.split("-MANIFEST-")[0]
        for family, ssts in rocksdb_manifest.read(manifest.read_bytes()).families.items():
            names = (savepoint / f"{prefix}-{sst.number:06d}.sst" for sst in ssts)
            found.setdefault(family, set()).update(_digest(name) for name in names)
    return found


def test_ttl_on_one_state_carries_the_other_states_files(tmp_path: Path) -> None:
    source = fixture_savepoint("rocksdb_native_full")
    out = tmp_path / "out"
    plan = statectl.plan_migration(str(source), ttl=[(UID, EDITED, 86_400_000)])
    statectl.write_migration(plan, str(out))
    before = {_digest(path) for path in source.iterdir() if path.is_file()}
    after = _files_by_family(out)
    assert after[EDITED] and not after[EDITED] & before  # rewritten
    carried = {family for family, files in after.items() if files and files <= before}
    assert {"lst", "mp"} <= carried
    old, new = statectl.open(str(source)).operator(UID), statectl.open(str(out)).operator(UID)
    for state in ("lst", "mp"):
        assert new.state(state).to_arrow().equals(old.state(state).to_arrow())
    values = new.state(EDITED).to_arrow()
    assert values.column("value").equals(old.state(EDITED).to_arrow().column("value"))
    assert values.column("ttl_timestamp").null_count == 0
