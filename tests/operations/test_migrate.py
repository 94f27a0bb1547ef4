"""`statectl migrate` on the committed Flink fixtures: the metadata transformation, the files
carried into a self-contained output, the state read back equal, and every refusal.

No Spark and no JVM here (the `no_spark` fixture fails any test that starts Spark); Flink
restoring the outputs is tests/savepoint/test_migrate_e2e.py.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import fsspec
import pytest

from statectl.cli.main import main
from statectl.cli.units import human_bytes
from statectl.errors import StatectlError
from statectl.formats.handles import (
    ByteStreamHandle,
    IncrementalKeyedHandle,
    KeyGroupsHandle,
    OperatorStateHandle,
    RelativeFileHandle,
    SegmentFileHandle,
    StreamHandle,
)
from statectl.formats.metadata import OperatorState, read_metadata, write_metadata
from statectl.operations import migrate as migration
from statectl.operations.diff import diff
from statectl.operations.migrate import MigrationPlan, migrate, plan_migration
from statectl.operations.verify import verify_location
from statectl.savepoint.model import Savepoint, operator_id_for_uid
from statectl.savepoint.reader import open_savepoint
from statectl.savepoint.writer import STAGING_MARK
from tests.conftest import FIXTURES, checksums, fixture_names, fixture_savepoint, load_manifest
from tests.flink import harness

KEYED_STR = operator_id_for_uid("keyed-str")
KS = operator_id_for_uid("ks")


pytestmark = pytest.mark.usefixtures("no_spark")


def snapshot(name: str) -> Path:
    """The fixture's savepoint; a retained checkpoint where its absolute paths point."""
    return harness.checkpoint_in_place(FIXTURES / name)


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    out, err = capsys.readouterr()
    return int(exit_info.value.code or 0), out, err


def stream_handles(op: OperatorState) -> Iterator[StreamHandle]:
    """Every stream handle of an operator: operator state, keyed files, RocksDB files."""
    if op.coordinator_state is not None:
        yield op.coordinator_state
    for subtask in op.subtasks or ():
        for operator_handle in (subtask.managed_operator_state, subtask.raw_operator_state):
            if operator_handle is not None and operator_handle.delegate is not None:
                yield operator_handle.delegate
        for keyed in (subtask.managed_keyed_state, subtask.raw_keyed_state):
            if isinstance(keyed, KeyGroupsHandle) and keyed.delegate is not None:
                yield keyed.delegate
            elif isinstance(keyed, IncrementalKeyedHandle):
                if keyed.meta is not None:
                    yield keyed.meta
                yield from (f.handle for f in (*keyed.shared, *keyed.private) if f.handle)


def renamed_view(plan: MigrationPlan) -> Savepoint:
    """The input as the plan sees it: renamed/dropped operators, the input's files."""
    return dataclasses.replace(plan.source, metadata=plan.metadata)


# --- planning: the metadata transformation ------------------------------------------------


def test_rename_gives_the_new_uid_and_its_flink_id_and_keeps_everything_else() -> None:
    source = open_savepoint(str(fixture_savepoint("hashmap_canonical_files")))
    plan = plan_migration(
        source, [("keyed-str", "ks"), ("21991e99748be05b56fddb2033c0ff3b", "ops")]
    )
    old = {op.operator_id: op for op in source.operators}
    new = {op.operator_id: op for op in plan.metadata.operators}
    assert KEYED_STR not in new and operator_id_for_uid("opstate") not in new
    assert dataclasses.replace(new[KS], operator_id=KEYED_STR, uid="keyed-str") == old[KEYED_STR]
    assert new[KS].uid == "ks" and new[KS].name == "keyed-str"
    assert new[operator_id_for_uid("ops")].uid == "ops"
    assert [op.uid for op in plan.metadata.operators] == [
        {"keyed-str": "ks", "opstate": "ops"}.get(op.uid, op.uid) for op in source.operators
    ]
    # Everything but the operators is the input's: version, id, master states, properties.
    assert dataclasses.replace(plan.metadata, operators=source.operators) == source.metadata
    assert [(c.action, c.old_uid, c.new_uid) for c in plan.changes if c.action != "carried"] == [
        ("renamed", "keyed-str", "ks"),
        ("renamed", "opstate", "ops"),
    ]
    # The new uid is written into the V5+ metadata and read back.
    written = read_metadata(write_metadata(plan.metadata))
    assert {op.uid for op in written.operators} >= {"ks", "ops"}


def test_drop_removes_the_operator_from_the_metadata() -> None:
    source = open_savepoint(str(fixture_savepoint("hashmap_canonical_files")))
    plan = plan_migration(source, drops=["keyed-long", "07a6ec7f7ea4aa0ab982082b2e483a10"])
    assert [op.uid for op in plan.metadata.operators] == [
        op.uid for op in source.operators if op.uid not in ("keyed-long", "bcast")
    ]
    dropped = [c for c in plan.changes if c.action == "dropped"]
    assert [(c.old_uid, c.new_id) for c in dropped] == [("bcast", None), ("keyed-long", None)]


def test_swapping_two_uids_and_renaming_onto_a_dropped_uid_are_allowed() -> None:
    source = open_savepoint(str(fixture_savepoint("hashmap_canonical_files")))
    swap = plan_migration(source, [("keyed-str", "keyed-long"), ("keyed-long", "keyed-str")])
    by_uid = {op.uid: op for op in swap.metadata.operators}
    assert by_uid["keyed-long"].subtasks == source.find_operator("keyed-str").subtasks
    assert by_uid["keyed-str"].operator_id == KEYED_STR
    onto = plan_migration(source, [("keyed-str", "keyed-long")], ["keyed-long"])
    assert onto.metadata.operators[1].operator_id == operator_id_for_uid("keyed-long")
    assert len(onto.metadata.operators) == len(source.operators) - 1


def test_setting_the_uid_of_an_operator_named_by_id_to_its_own_uid() -> None:
    source = open_savepoint(str(fixture_savepoint("hashmap_canonical_files")))
    plan = plan_migration(source, [(KEYED_STR.hex(), "keyed-str")])
    assert plan.metadata == source.metadata


@pytest.mark.parametrize(
    ("renames", "drops", "message"),
    [
        ([("nope", "x")], [], "unknown operator 'nope'; known operators: stateless (d0789e"),
        ([], ["0123456789abcdef0123456789abcdef"], "unknown operator '0123456789abcdef0123"),
        (
            [("keyed-str", "keyed-long")],
            [],
            "cannot rename keyed-str to 'keyed-long': its operator id 9ffc9079ae46c8da2062fcba248ae73c is taken by operator keyed-long (9ffc9079ae46c8da2062fcba248ae73c); drop or rename that one too",
        ),
        ([("keyed-str", "opstate")], [], "is taken by operator opstate"),
        (
            [("keyed-str", "x"), ("keyed-long", "x")],
            [],
            "cannot rename keyed-long to 'x': its operator id 5b0ec9d0cd3fc6ed9f2fa12e5c1b6d1d is the new id of keyed-str (renamed to 'x')".replace(
                "5b0ec9d0cd3fc6ed9f2fa12e5c1b6d1d", operator_id_for_uid("x").hex()
            ),
        ),
        (
            [("keyed-str", "a"), ("keyed-str", "b")],
            [],
            "operator keyed-str (0cad1b1f959e0cc01a89a8ec2be0100c) is named twice (--rename-uid keyed-str=a and --rename-uid keyed-str=b)",
        ),
        (
            [("keyed-str", "a")],
            [KEYED_STR.hex()],
            "is named twice (--rename-uid keyed-str=a and --drop 0cad1b1f",
        ),
        ([], ["sink", "sink"], "is named twice (--drop sink and --drop sink)"),
        ([("keyed-str", "")], [], "the new uid is empty"),
        ([("keyed-str", "x" * 70000)], [], "the new uid is too long"),
    ],
)
def test_bad_requests_are_one_error_naming_the_savepoint(
    renames: list[tuple[str, str]], drops: list[str], message: str
) -> None:
    path = fixture_savepoint("hashmap_canonical_files")
    with pytest.raises(StatectlError) as error:
        plan_migration(open_savepoint(str(path)), renames, drops)
    assert error.value.source == str(path)
    assert message in error.value.message


# --- writing: self-contained output with exactly the input's state ------------------------


@pytest.mark.parametrize("name", fixture_names())
def test_every_fixture_migrates_to_a_self_contained_savepoint_with_the_same_state(
    name: str, tmp_path: Path
) -> None:
    path = snapshot(name)
    before = checksums(path.parent)
    out = tmp_path / "out"
    plan = plan_migration(open_savepoint(str(path)), [("keyed-str", "ks")], ["keyed-long"])
    report = migrate(plan, str(out))

    assert checksums(path.parent) == before  # the input is untouched
    result = open_savepoint(str(out))
    assert dataclasses.replace(result.metadata, operators=plan.metadata.operators) == (
        plan.metadata
    )  # version, checkpoint id, master states, properties tail: the input's
    assert [op.operator_id for op in result.operators] == [
        op.operator_id for op in plan.metadata.operators
    ]
    referenced: dict[str, int] = {}
    for new, old in zip(result.operators, plan.metadata.operators, strict=True):
        assert (new.uid, new.name, new.parallelism, new.max_parallelism) == (
            old.uid, old.name, old.parallelism, old.max_parallelism,
        )  # fmt: skip
        for handle, original in zip(stream_handles(new), stream_handles(old), strict=True):
            if isinstance(original, ByteStreamHandle):
                assert handle == original  # inline state stays inline
                continue
            assert isinstance(handle, RelativeFileHandle), handle
            assert handle.relative_path.startswith(new.operator_id_hex + "-")
            referenced[handle.relative_path] = handle.size
            assert result.stream(handle).read() == plan.source.stream(original).read()
    files = {p.name: p.stat().st_size for p in out.iterdir()}
    assert files == {"_metadata": (out / "_metadata").stat().st_size, **referenced}
    assert report.files == len(referenced) and report.bytes == sum(referenced.values())
    assert verify_location(str(out), None, deep=True).findings == ()
    # The state reads back entry for entry (canonical blocks, RocksDB instances, operator state).
    same = diff(renamed_view(plan), result)
    assert same.identical, same
    assert not list(tmp_path.glob(f"{STAGING_MARK}*"))


def test_native_instances_keep_everything_but_where_their_files_live(tmp_path: Path) -> None:
    """RocksDB handles of a retained checkpoint (absolute `shared/` paths) become relative."""
    source = open_savepoint(str(snapshot("rocksdb_retained_checkpoint")))
    migrate(plan_migration(source, drops=["sink"]), str(tmp_path / "out"))
    result = {op.operator_id: op for op in open_savepoint(str(tmp_path / "out")).operators}
    instances = 0
    for old in source.operators:
        if old.uid == "sink":
            assert old.operator_id not in result
            continue
        for a, b in zip(old.subtasks or (), result[old.operator_id].subtasks or (), strict=True):
            h, g = a.managed_keyed_state, b.managed_keyed_state
            if not isinstance(h, IncrementalKeyedHandle):
                continue
            instances += 1
            assert isinstance(g, IncrementalKeyedHandle)
            assert dataclasses.replace(g, meta=h.meta, shared=h.shared, private=h.private) == h
            assert [f.local_path for f in g.shared] == [f.local_path for f in h.shared]
            assert [f.local_path for f in g.private] == [f.local_path for f in h.private]
            assert not all(isinstance(f.handle, RelativeFileHandle) for f in h.shared)
            assert all(isinstance(f.handle, RelativeFileHandle) for f in (*g.shared, *g.private))
    assert instances == 4  # keyed-str and keyed-long, 2 subtasks each


def test_file_merging_segments_of_one_file_become_separate_copies(tmp_path: Path) -> None:
    """Flink's file merging puts several streams into one physical file (code 15 handles)."""
    source_dir = tmp_path / "merged"
    shutil.copytree(fixture_savepoint("hashmap_canonical_files"), source_dir)
    sp = open_savepoint(str(source_dir))
    physical = source_dir / "physical-file"
    blob = bytearray(b"header")
    operators = []
    for op in sp.operators:
        subtasks = []
        for subtask in op.subtasks or ():
            handle = subtask.managed_operator_state
            if handle is not None and handle.delegate is not None:
                data = sp.stream(handle.delegate).read()
                segment = SegmentFileHandle(len(blob), len(data), 0, str(physical), f"l{len(blob)}")
                blob += data
                handle = OperatorStateHandle(17, handle.states, segment, "task-owned", "shared", False)  # fmt: skip
            subtasks.append(dataclasses.replace(subtask, managed_operator_state=handle))
        operators.append(dataclasses.replace(op, subtasks=tuple(subtasks)))
    physical.write_bytes(bytes(blob))
    merged = dataclasses.replace(sp.metadata, operators=tuple(operators))
    (source_dir / "_metadata").write_bytes(write_metadata(merged))

    sp = open_savepoint(str(source_dir))
    assert verify_location(str(source_dir), None, deep=True).findings == ()
    plan = plan_migration(sp, [("opstate", "ops")])
    migrate(plan, str(tmp_path / "out"))
    result = open_savepoint(str(tmp_path / "out"))
    segments = 0
    for new, old in zip(result.operators, plan.metadata.operators, strict=True):
        for a, b in zip(old.subtasks or (), new.subtasks or (), strict=True):
            if a.managed_operator_state is not None:
                segments += 1
                assert b.managed_operator_state is not None
                assert b.managed_operator_state.code == 4
                assert isinstance(b.managed_operator_state.delegate, RelativeFileHandle)
                assert (
                    result.stream(b.managed_operator_state.delegate).read()
                    == sp.stream(
                        a.managed_operator_state.delegate  # type: ignore[arg-type]
                    ).read()
                )
    assert segments == 4  # opstate and bcast, 2 subtasks each
    assert diff(renamed_view(plan), result).identical


def test_memory_filesystem_source_and_destination(tmp_path: Path) -> None:
    """Non-local storage: copies stream through fsspec, `_metadata` is moved last."""
    fs = fsspec.filesystem("memory")
    root = f"memory://statectl-migrate-{tmp_path.name}"
    for file in fixture_savepoint("hashmap_canonical_files").iterdir():
        fs.pipe_file(f"{root}/sp/{file.name}", file.read_bytes())
    try:
        plan = plan_migration(open_savepoint(f"{root}/sp"), [("keyed-str", "ks")])
        migrate(plan, f"{root}/out")
        result = open_savepoint(f"{root}/out")
        assert diff(renamed_view(plan), result).identical
        assert sorted(p.rsplit("/", 1)[-1] for p in fs.ls(f"{root}", detail=False)) == ["out", "sp"]
    finally:
        fs.rm(root, recursive=True)


def test_a_failed_copy_publishes_nothing_and_removes_the_staging_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan = plan_migration(open_savepoint(str(fixture_savepoint("hashmap_canonical_files"))), [("keyed-str", "ks")])  # fmt: skip
    calls = []

    def failing(task: object, output: object) -> object:
        calls.append(task)
        if len(calls) == 3:
            raise FileNotFoundError(2, "No such file or directory", "/gone/file")
        return real(task, output)  # type: ignore[arg-type]

    real = migration.copy_file
    monkeypatch.setattr(migration, "copy_file", failing)
    with pytest.raises(StatectlError, match="No such file or directory") as error:
        migrate(plan, str(tmp_path / "out"))
    assert error.value.source == "/gone/file"
    assert list(tmp_path.iterdir()) == []


def test_destination_inside_the_source_is_refused(tmp_path: Path) -> None:
    source = tmp_path / "sp"
    shutil.copytree(fixture_savepoint("hashmap_canonical_files"), source)
    before = checksums(source)
    plan = plan_migration(open_savepoint(str(source)), drops=["sink"])
    for destination in (source, source / "inside", tmp_path):
        with pytest.raises(StatectlError, match="must not be the source savepoint"):
            migrate(plan, str(destination), overwrite=True)
    assert checksums(source) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sp"]


# --- the command --------------------------------------------------------------------------


def test_cli_json_is_one_document_and_the_input_stays_byte_identical(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = fixture_savepoint("rocksdb_native_full")
    before = checksums(source)
    out = tmp_path / "out"
    code, stdout, err = run(
        ["migrate", str(source), "-o", str(out), "--rename-uid", "keyed-str=ks",
         "--rename-uid", "opstate=ops", "--drop", "keyed-long", "--drop", "bcast", "--json"],
        capsys,
    )  # fmt: skip
    assert code == 0, err
    assert err == ""  # --json: no progress lines either
    document = json.loads(stdout)
    manifest = {op["uid"]: op for op in load_manifest("rocksdb_native_full")["operators"]}
    assert document["destination"] == str(out)
    assert (document["renamed"], document["dropped"], document["carried"]) == (2, 2, 3)
    assert document["metadata_version"] == 6
    by_old = {op["old_uid"]: op for op in document["operators"]}
    assert by_old["keyed-str"] == {
        "action": "renamed", "uid": "ks", "id": operator_id_for_uid("ks").hex(),
        "old_uid": "keyed-str", "old_id": manifest["keyed-str"]["id"],
        "files": by_old["keyed-str"]["files"], "bytes": by_old["keyed-str"]["bytes"],
    }  # fmt: skip
    assert by_old["keyed-long"] == {
        "action": "dropped", "uid": None, "id": None, "old_uid": "keyed-long",
        "old_id": manifest["keyed-long"]["id"], "files": 0, "bytes": 0,
    }  # fmt: skip
    assert by_old["keyed-str"]["files"] > 2  # RocksDB files: meta, SSTs, MANIFEST, ...
    assert document["files"] == sum(op["files"] for op in document["operators"])
    assert document["files"] == len(list(out.iterdir())) - 1
    assert (
        document["bytes"]
        == sum(p.stat().st_size for p in out.iterdir()) - (out / "_metadata").stat().st_size
    )
    assert checksums(source) == before


def test_cli_human_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Also with a destination path longer than the table (a fresh TMPDIR's are)."""
    source = fixture_savepoint("hashmap_canonical_files")
    out = tmp_path / ("a-long-folder-name-" * 5) / "out"
    out.parent.mkdir()
    code, stdout, err = run(
        ["migrate", str(source), "-o", str(out), "--rename-uid", "keyed-str=ks",
         "--drop", "keyed-long"],
        capsys,
    )  # fmt: skip
    assert code == 0, err
    assert f"Wrote {out} (metadata v6)" in stdout
    assert operator_id_for_uid("ks").hex() in stdout
    assert "renamed" in stdout and "dropped" in stdout
    assert "1 renamed, 1 dropped, 5 kept; " in stdout
    copied = sum(p.stat().st_size for p in out.iterdir() if p.name != "_metadata")
    # No terminal: one plain line, with the bytes of the state files copied.
    assert err == f"statectl: migrate: 6/6 files written ({human_bytes(copied)} of state)\n"


def test_cli_refuses_an_existing_destination_unless_overwrite(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = fixture_savepoint("hashmap_canonical_files")
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep-me").write_text("x")
    argv = ["migrate", str(source), "-o", str(out), "--drop", "sink"]
    for overwrite in ([], ["--overwrite"]):  # not a savepoint: never replaced
        code, stdout, err = run([*argv, *overwrite], capsys)
        assert (code, stdout) == (1, "")
        assert err == (
            f"statectl: error: {out}: is not a savepoint (no _metadata); refusing to replace it\n"
        )
        assert [p.name for p in out.iterdir()] == ["keep-me"]
        assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # no staging folder
    shutil.rmtree(out)
    code, _, err = run(argv, capsys)
    assert code == 0, err
    code, _, err = run(argv, capsys)
    assert err == f"statectl: error: {out}: destination exists; pass --overwrite to replace it\n"
    code, _, err = run([*argv, "--overwrite"], capsys)
    assert code == 0, err
    assert open_savepoint(str(out)).find_operator("keyed-str")


def test_cli_unknown_operator_is_one_line_naming_the_known_ones(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = fixture_savepoint("hashmap_canonical_files")
    code, stdout, err = run(
        ["migrate", str(source), "-o", str(tmp_path / "out"), "--rename-uid", "keyed=ks"], capsys
    )
    assert (code, stdout) == (1, "")
    assert len(err.splitlines()) == 1
    assert err.startswith(f"statectl: error: {source}: unknown operator 'keyed'; known operators: ")
    for op in load_manifest("hashmap_canonical_files")["operators"]:
        assert f"{op['uid']} ({op['id']})" in err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ([], "nothing to do"),
        (["--rename-uid", "keyed-str"], "expected OLD=NEW, got 'keyed-str'"),
        (["--rename-uid", "keyed-str="], "expected OLD=NEW"),
        (["--rename-uid", "=ks"], "expected OLD=NEW"),
    ],
)
def test_cli_usage_errors_exit_2(
    extra: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = fixture_savepoint("hashmap_canonical_files")
    code, stdout, err = run(["migrate", str(source), "-o", str(tmp_path / "out"), *extra], capsys)
    assert (code, stdout) == (2, "")
    assert message in " ".join(err.split())
    assert list(tmp_path.iterdir()) == []


def test_cli_inconsistent_input_is_refused_before_writing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "sp"
    shutil.copytree(fixture_savepoint("hashmap_canonical_files"), source)
    sp = open_savepoint(str(source))
    keyed = sp.find_operator("keyed-str").subtasks[0].managed_keyed_state  # type: ignore[index]
    victim = Path(sp.stream(keyed.delegate).location.path)  # type: ignore[union-attr]
    victim.unlink()
    code, stdout, err = run(["migrate", str(source), "-o", str(tmp_path / "out"), "--drop", "sink"], capsys)  # fmt: skip
    assert (code, stdout) == (1, "")
    assert err == f"statectl: error: {victim}: operator keyed-str, subtask 0: file not found\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sp"]
