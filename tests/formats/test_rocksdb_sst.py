"""SST block checksums verified without RocksDB: every file real Flink wrote passes, every
data block RocksDB counts is checked, a flipped byte anywhere that RocksDB reads is caught, and
a layout this module does not read is said to be unknown, never passed."""

from __future__ import annotations

import re
import struct
from pathlib import Path

import pytest

from statectl.formats import rocksdb_sst
from statectl.formats.rocksdb_sst import SstDamaged, UnknownSst

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
_MAGIC = struct.pack("<Q", 0x88E241B785F4CFF7)
_FOOTER = 53


def _is_sst(path: Path) -> bool:
    if not path.is_file() or path.stat().st_size < _FOOTER:
        return False
    with path.open("rb") as file:
        file.seek(-8, 2)
        return file.read(8) == _MAGIC


def _checksum_type(path: Path) -> int:
    return path.read_bytes()[-_FOOTER]


FLINK_SSTS = sorted(path for path in FIXTURES.rglob("*") if _is_sst(path))


def test_every_sst_real_flink_wrote_passes() -> None:
    """Flink 1.x's FRocksDB 6.20.3 checksums with CRC32C, 2.x's 8.10 with XXH3 (ForSt's
    indexes are partitioned)."""
    assert {_checksum_type(path) for path in FLINK_SSTS} == {1, 4}
    for path in FLINK_SSTS:
        assert rocksdb_sst.verify(str(path)) >= 1, path


def _write(folder: Path, keys: int, **table: object) -> list[Path]:
    """An instance of several SST files of `keys` keys each, written by rocksdict with the
    `table` settings."""
    from rocksdict import BlockBasedOptions, DBCompressionType, Options, Rdict

    settings = BlockBasedOptions()
    for name, value in table.items():
        getattr(settings, f"set_{name}")(value)
    options = Options(raw_mode=True)
    options.create_if_missing(True)
    options.set_block_based_table_factory(settings)
    options.set_compression_type(DBCompressionType.snappy())
    db = Rdict(str(folder), options=options)
    for flush in range(3):
        for n in range(keys):
            db[b"%d-%06d" % (flush, n)] = b"value %d " % n * (n % 7)
        db.flush()
    properties = db.property_value("rocksdb.aggregated-table-properties") or ""
    db.close()
    data_blocks = int(re.search(r"# data blocks=(\d+)", properties).group(1))  # type: ignore[union-attr]
    ssts = sorted(folder.glob("*.sst"))
    assert sum(rocksdb_sst.verify(str(path)) for path in ssts) == data_blocks
    return ssts


CHECKSUMS = ["crc32c", "xxhash", "xxhash64", "xxh3"]


# Every checksum and format version; index values delta-encoded (a restart point every 4
# entries, not each) and partitioned indexes with some of them.
TABLES = [(checksum, version, 1, False) for checksum in CHECKSUMS for version in (4, 5)] + [
    ("xxh3", 5, 4, False),
    ("crc32c", 4, 4, False),
    ("xxh3", 5, 1, True),
    ("xxh3", 5, 4, True),
    ("crc32c", 4, 4, True),
]


@pytest.mark.parametrize(("checksum", "format_version", "restart_interval", "partitioned"), TABLES)
def test_every_data_block_rocksdb_counts_is_checked(
    checksum: str, format_version: int, restart_interval: int, partitioned: bool, tmp_path: Path
) -> None:
    from rocksdict import BlockBasedIndexType, ChecksumType

    index_type = (
        BlockBasedIndexType.two_level_index_search()
        if partitioned
        else BlockBasedIndexType.binary_search()
    )
    _write(
        tmp_path,
        80_000 if partitioned else 20_000,  # 80 000: several index partitions in a file
        checksum_type=getattr(ChecksumType, checksum)(),
        format_version=format_version,
        index_block_restart_interval=restart_interval,
        index_type=index_type,
    )


def _flips(path: Path, positions: range, tmp: Path) -> dict[int, str]:
    """What `verify` says of `path` with the byte at each position flipped."""
    data = path.read_bytes()
    damaged = tmp / "damaged.sst"
    said = {}
    for position in positions:
        copy = bytearray(data)
        copy[position] ^= 0xFF
        damaged.write_bytes(copy)
        try:
            rocksdb_sst.verify(str(damaged))
            said[position] = "passed"
        except SstDamaged:
            said[position] = "damaged"
        except UnknownSst:
            said[position] = "unknown"
    return said


def _footer_padding(path: Path) -> range:
    """The footer's bytes after its two block handles, which no reader looks at."""
    footer = path.read_bytes()[-_FOOTER:]
    position = 1
    for _ in range(4):  # two handles of two varints
        while footer[position] & 0x80:
            position += 1
        position += 1
    size = path.stat().st_size
    return range(size - _FOOTER + position, size - 12)


@pytest.mark.parametrize("checksum", [1, 4])
def test_any_flipped_byte_but_the_footers_padding_is_caught(checksum: int, tmp_path: Path) -> None:
    path = min(
        (p for p in FLINK_SSTS if _checksum_type(p) == checksum), key=lambda p: p.stat().st_size
    )
    said = _flips(path, range(path.stat().st_size), tmp_path)
    padding = _footer_padding(path)
    assert [p for p, what in said.items() if what == "passed"] == list(padding)
    # The footer's checksum type, format version and magic: a file this module does not read.
    size = path.stat().st_size
    unknown = {size - _FOOTER, *range(size - 12, size)}
    assert {p for p, what in said.items() if what == "unknown"} <= unknown


def test_flipped_bytes_of_a_large_file_are_caught(tmp_path: Path) -> None:
    path = max(FLINK_SSTS, key=lambda p: p.stat().st_size)
    size = path.stat().st_size
    said = _flips(path, range(0, size - _FOOTER, max(1, size // 300)), tmp_path)
    assert set(said.values()) == {"damaged"}


def test_a_layout_it_does_not_read_is_unknown(tmp_path: Path) -> None:
    from rocksdict import BlockBasedIndexType, BlockBasedOptions, Options, Rdict, SliceTransform

    for name, table in {
        "format_version 6": {"format_version": 6},
        "hash index": {"index_type": BlockBasedIndexType.hash_search()},
    }.items():
        settings = BlockBasedOptions()
        for setting, value in table.items():
            getattr(settings, f"set_{setting}")(value)
        options = Options(raw_mode=True)
        options.create_if_missing(True)
        options.set_prefix_extractor(SliceTransform.create_fixed_prefix(1))  # the hash index's
        options.set_block_based_table_factory(settings)
        folder = tmp_path / name.replace(" ", "-")
        db = Rdict(str(folder), options=options)
        db[b"k"] = b"v"
        db.flush()
        db.close()
        (sst,) = folder.glob("*.sst")
        with pytest.raises(UnknownSst):
            rocksdb_sst.verify(str(sst))


def _index_blocks(path: Path) -> list[tuple[bytes, bool]]:
    """Each index block of the file (the partitions of a partitioned one), uncompressed, and
    whether its values are delta-encoded."""
    import mmap

    from statectl.formats.rocksdb_sst import (
        _block_entries,
        _checked_block,
        _footer,
        _handle,
        _index_handles,
        _index_layout,
        _properties,
        _uncompressed,
    )

    with path.open("rb") as file, mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as view:
        size = len(view)
        checksum, metaindex, index = _footer(view[size - _FOOTER :])
        meta = _block_entries(_checked_block(view, metaindex, checksum, "metaindex"))
        handles = {key: _handle(value, 0)[0] for key, value in meta}
        partitioned, delta = _index_layout(_properties(view, handles, checksum))
        top = _uncompressed(view, index, _checked_block(view, index, checksum, "index"))
        if not partitioned:
            return [(top, delta)]
        offsets, sizes = _index_handles(top, delta)
        return [
            (_uncompressed(view, part, _checked_block(view, part, checksum, "index")), delta)
            for part in zip(offsets.tolist(), sizes.tolist(), strict=True)
        ]


def _both_index_reads(path: Path) -> list[bool]:
    """For each index block of the file: whether the read at the restart points took it, and
    (asserted) that it found what the entry-by-entry loop finds."""
    from statectl.formats.rocksdb_sst import (
        _entries_end,
        _handles_at_restarts,
        _handles_entry_by_entry,
    )

    taken = []
    for block, delta in _index_blocks(path):
        end = _entries_end(block)
        looped = _handles_entry_by_entry(block, end, delta)
        at_restarts = _handles_at_restarts(block, end, delta)
        if at_restarts is not None:
            offsets, sizes = at_restarts
            assert [n for pair in zip(offsets, sizes, strict=True) for n in pair] == looped
        taken.append(at_restarts is not None)
    return taken


def test_flink_indexes_are_read_at_their_restart_points() -> None:
    """Flink's FRocksDB keeps a restart point per index entry: all of its index blocks (ForSt's
    partitions too) are read at once, and give the handles the loop gives."""
    for path in FLINK_SSTS:
        assert all(_both_index_reads(path)), path


@pytest.mark.parametrize("restart_interval", [1, 4])
@pytest.mark.parametrize("partitioned", [False, True])
def test_an_index_with_fewer_restart_points_is_read_entry_by_entry(
    restart_interval: int, partitioned: bool, tmp_path: Path
) -> None:
    from rocksdict import BlockBasedIndexType, ChecksumType

    index_type = (
        BlockBasedIndexType.two_level_index_search()
        if partitioned
        else BlockBasedIndexType.binary_search()
    )
    ssts = _write(
        tmp_path,
        80_000 if partitioned else 20_000,
        checksum_type=ChecksumType.xxh3(),
        format_version=5,
        index_block_restart_interval=restart_interval,
        index_type=index_type,
    )
    taken = [each for path in ssts for each in _both_index_reads(path)]
    assert taken and all(taken) == (restart_interval == 1) and any(taken) == all(taken)
