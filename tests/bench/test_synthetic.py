"""The benchmark's synthetic savepoint is a real canonical savepoint holding what it claims."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import synthetic
from statectl.cli.main import main
from statectl.formats import java_types, keyed_blocks
from statectl.formats.handles import KeyGroupsHandle
from statectl.savepoint.reader import open_savepoint

TINY = synthetic.Params(size_bytes=48 << 10, parallelism=3, max_parallelism=256, list_elements=4)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> synthetic.Built:
    return synthetic.ensure(TINY, tmp_path_factory.mktemp("bench"))


def test_inspect_deep_counts_the_generated_entries(
    built: synthetic.Built, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["inspect", "--json", "--deep", "--operator", "keyed-str", str(built.path)])
    out, err = capsys.readouterr()
    assert exit_info.value.code in (0, None), err
    (op,) = json.loads(out)["operators"]
    assert (op["parallelism"], op["max_parallelism"]) == (3, 256)
    assert [s["key_groups"] for s in op["subtasks"]] == [[0, 85], [86, 170], [171, 255]]
    entries = {s["name"]: s["entries"] for s in op["states"]}
    keys = built.keys
    assert keys == -(-TINY.size_bytes // _bytes_per_key())
    expected = {
        "mp": 2 * keys,
        "cnt": keys,
        "lst": keys,
        "_timer_state/processing_user-timers": keys,
        "_timer_state/event_user-timers": 0,
    }
    assert entries == built.entries == expected


def _bytes_per_key() -> int:
    # prefix 2 + key 16 + namespace 1 = 19-byte keys; 8 bytes of lengths per entry
    cnt = 8 + 19 + 8
    lst = 8 + 19 + (4 * 9 - 1)
    mp = 2 * (8 + 19 + 3 + 9)
    timer = 8 + 2 + 8 + 16 + 1
    return cnt + lst + mp + timer


def test_every_key_sits_in_the_key_group_flink_assigns(built: synthetic.Built) -> None:
    sp = open_savepoint(str(built.path))
    key_type = java_types.key_type_for_serializer(
        "org.apache.flink.api.common.typeutils.base.StringSerializer"
    )
    assert key_type is not None
    counters: dict[str, int] = {}
    for subtask in sp.find_operator("keyed-str").subtasks or ():
        handle = subtask.managed_keyed_state
        assert isinstance(handle, KeyGroupsHandle) and handle.delegate is not None
        stream = sp.stream(handle.delegate)
        for span in keyed_blocks.block_spans(handle.start_key_group, handle.offsets, stream.size):
            for entry in keyed_blocks.iter_entries(stream.read(span.start, span.end), False):
                assert int.from_bytes(entry.key[:2], "big") == span.key_group
                if entry.state_id == 1:  # `cnt` in the fixture's header: value = key index
                    key, _ = key_type.read(entry.key, 2)
                    assert key == synthetic.key_string(int.from_bytes(entry.value, "big"))
                    assert key_type.key_group(key, 256) == span.key_group
                    counters[key] = counters.get(key, 0) + 1
    assert sorted(counters) == [synthetic.key_string(i) for i in range(built.keys)]
    assert set(counters.values()) == {1}


def test_other_operators_are_the_fixtures_and_a_rebuild_is_skipped(
    built: synthetic.Built,
) -> None:
    fixture = open_savepoint(str(synthetic.FIXTURE))
    sp = open_savepoint(str(built.path))
    assert [o for o in sp.operators if o.uid != "keyed-str"] == [
        o for o in fixture.operators if o.uid != "keyed-str"
    ]
    files = sorted(p.name for p in built.path.iterdir())
    assert built.bytes == sum((built.path / f).stat().st_size for f in files)
    before = (built.path / "_metadata").stat().st_mtime_ns
    again = synthetic.ensure(TINY, built.path.parent)
    assert again == built
    assert (built.path / "_metadata").stat().st_mtime_ns == before
    assert sorted(p.name for p in Path(again.path).iterdir()) == files
