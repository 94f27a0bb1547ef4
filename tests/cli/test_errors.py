"""Bad input: one line on stderr naming the file and the problem, exit 1; usage errors exit 2."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from statectl.cli.main import main


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    out, err = capsys.readouterr()
    return int(exit_info.value.code or 0), out, err


def assert_one_line_error(err: str, *fragments: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("statectl: error: "), err
    assert "Traceback" not in err
    for fragment in fragments:
        assert fragment in lines[0], (fragment, err)


def test_missing_path(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["inspect", str(tmp_path / "nope")], capsys)
    assert (code, out) == (1, "")
    assert_one_line_error(err, str(tmp_path / "nope"), "no such file or directory")


def test_directory_without_metadata(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "some-file").write_text("x")
    code, _, err = run(["inspect", str(tmp_path)], capsys)
    assert code == 1
    assert_one_line_error(err, str(tmp_path), "not a savepoint: no _metadata file")


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b"", "truncated"),
        (b"\x00\x00\x00\x01garbage!", "bad magic number"),
        (struct.pack(">ii", 0x4960672D, 99), "unsupported metadata version 99"),
        (struct.pack(">iiq", 0x4960672D, 6, 1), "truncated"),
    ],
)
def test_bad_metadata(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes, problem: str
) -> None:
    (tmp_path / "_metadata").write_bytes(content)
    code, _, err = run(["inspect", str(tmp_path)], capsys)
    assert code == 1
    assert_one_line_error(err, str(tmp_path / "_metadata"), problem)


def test_debug_shows_the_traceback(tmp_path: Path) -> None:
    (tmp_path / "_metadata").write_bytes(b"\x00" * 8)
    from statectl.errors import FormatError

    with pytest.raises(FormatError):
        main(["--debug", "inspect", str(tmp_path)])


def test_usage_error_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, _ = run(["inspect", "--no-such-flag", "x"], capsys)
    assert code == 2


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    from statectl import __version__

    code, out, _ = run(["--version"], capsys)
    assert (code, out.strip()) == (0, f"statectl {__version__}")


@pytest.mark.parametrize("name", ["hashmap_canonical_files", "rocksdb_native_full"])
def test_metadata_truncated_anywhere_is_one_line_each_time(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    """The CLI side of the codec's truncation test (which cuts at every offset): every cut of
    the header and of the last bytes, and every 13th between, is exit 1 and one named line."""
    from tests.conftest import fixture_savepoint

    data = (fixture_savepoint(name) / "_metadata").read_bytes()
    metadata = tmp_path / "_metadata"
    cuts = sorted({*range(256), *range(256, len(data), 13), *range(len(data) - 64, len(data))})
    for cut in cuts:
        metadata.write_bytes(data[:cut])
        code, out, err = run(["inspect", "--json", str(tmp_path)], capsys)
        assert (code, out) == (1, ""), cut
        assert_one_line_error(err, str(metadata), "truncated")
