"""The MANIFEST reader and writer: what RocksDB writes reads back, ours round-trips, and what
the reader does not know (or a damaged record) is refused, never skipped."""

from __future__ import annotations

from pathlib import Path

import pytest

from statectl.formats import rocksdb_manifest
from statectl.formats.rocksdb_manifest import SstFile, UnknownManifest


def _sst(number: int, level: int, low: bytes, high: bytes) -> SstFile:
    return SstFile(level, number, 1000 + number, low + bytes(8), high + bytes(8), 1, 9)


def test_what_rocksdb_writes_reads_back_as_its_live_files(tmp_path: Path) -> None:
    from rocksdict import Options, Rdict

    options = Options(raw_mode=True)
    options.create_if_missing(True)
    options.create_missing_column_families(True)
    db = Rdict(str(tmp_path), options=options, column_families={"cnt": Options(raw_mode=True)})
    for n in range(3):
        db.get_column_family("cnt")[bytes([n])] = b"v"
        db.flush()
    live = {(entry["name"].lstrip("/"), entry["level"]) for entry in db.live_files()}
    db.close()
    manifest = rocksdb_manifest.read(
        (tmp_path / (tmp_path / "CURRENT").read_text().strip()).read_bytes()
    )
    assert set(manifest.families) == {"default", "cnt"}
    assert {(f"{s.number:06d}.sst", s.level) for s in manifest.families["cnt"]} == live
    assert manifest.comparator == "leveldb.BytewiseComparator" and manifest.last_sequence == 3


def test_an_encoded_manifest_round_trips() -> None:
    families = [("default", []), ("cnt", [_sst(10, 0, b"\x00a", b"\x05z")]),
                ("lst", [_sst(11, 1, b"\x00" * 40_000, b"\x01"), _sst(12, 6, b"\x02", b"\x03")])]  # fmt: skip
    data = rocksdb_manifest.encode(families, 77, "leveldb.BytewiseComparator", 13)
    assert len(data) > 32768  # a record split across blocks
    manifest = rocksdb_manifest.read(data)
    assert manifest.families == {name: list(files) for name, files in families}
    assert manifest.last_sequence == 77


def test_a_damaged_record_or_an_unknown_tag_is_refused() -> None:
    data = bytearray(rocksdb_manifest.encode([("default", [_sst(10, 0, b"a", b"b")])], 1, "x", 11))
    data[20] ^= 0x40
    with pytest.raises(UnknownManifest, match="damaged record"):
        rocksdb_manifest.read(bytes(data))
    blob = rocksdb_manifest.encode_records([bytes([0x90, 0x03]) + b"\x00"])  # tag 400: a blob file
    with pytest.raises(UnknownManifest, match="VersionEdit tag 400"):
        rocksdb_manifest.read(blob)
