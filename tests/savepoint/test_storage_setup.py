"""A store this machine is not set up for is one line saying what it needs (hdfs:// without
Hadoop's client, S3 without credentials), and the storage options a savepoint was opened with
serve a write to the same store (issue 34)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import statectl
from statectl.errors import SavepointError
from tests.conftest import S3_BUCKET, files_under, fixture_savepoint, run_cli, storage_flags

SOURCE = "hashmap_canonical_files"


def test_hdfs_without_hadoops_client_is_one_line(tmp_path: Path) -> None:
    """pyarrow's HadoopFileSystem loads libjvm and libhdfs into the process: a subprocess, with
    no JAVA_HOME and no Hadoop (its error listed every path it tried, 88 lines)."""
    unset = ("JAVA_HOME", "HADOOP_HOME", "ARROW_LIBHDFS_DIR", "CLASSPATH")
    env = {k: v for k, v in os.environ.items() if k not in unset}
    run = subprocess.run(
        [sys.executable, "-m", "statectl", "inspect", "hdfs://nn:8020/sp"],
        env={**env, "COLUMNS": "80"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 1
    lines = run.stderr.splitlines()
    assert len(lines) == 1, run.stderr[:2000]
    assert lines[0].startswith(
        "statectl: error: hdfs://nn:8020/sp: hdfs:// needs Hadoop's native client (Unable to load "
    )
    assert lines[0].endswith(
        "a JVM (JAVA_HOME), HADOOP_HOME and CLASSPATH=$(hadoop classpath --glob); "
        "or read over HTTP: webhdfs://NAMENODE:9870/PATH"
    )


@pytest.fixture
def no_aws_credentials(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """botocore finds no credentials: none in the environment or in files, and it asks no
    instance metadata service."""
    for name in list(os.environ):
        if name.startswith("AWS_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


def _upload(fs: Any, name: str) -> str:
    fs.put(str(fixture_savepoint(SOURCE)), f"{S3_BUCKET}/{name}", recursive=True)
    return f"s3://{S3_BUCKET}/{name}"


def test_s3_without_credentials_is_one_line(
    s3: tuple[Any, dict[str, str]], no_aws_credentials: None, tmp_path: Path
) -> None:
    fs, options = s3
    remote = _upload(fs, f"{tmp_path.name}-sp")
    endpoint = {"endpoint_url": options["endpoint_url"]}  # the server, but no key
    code, out, err = run_cli("inspect", remote, *storage_flags(endpoint))
    assert (code, out) == (1, "")
    assert err.splitlines() == [
        f"statectl: error: {remote}/_metadata: no usable S3 credentials (Unable to locate "
        "credentials): set AWS_PROFILE, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or the "
        "storage options key and secret (--storage-option key=… --storage-option secret=…; "
        "anon=true for a public bucket)"
    ]
    with pytest.raises(SavepointError, match="no usable S3 credentials"):
        statectl.open(remote, endpoint)


@pytest.mark.parametrize("operation", ["rescale", "migrate", "export", "write"])
def test_a_savepoints_storage_options_serve_its_destination(
    s3: tuple[Any, dict[str, str]], no_aws_credentials: None, tmp_path: Path, operation: str
) -> None:
    """`statectl.open(url, storage_options=opts)`, then a write to the same store without
    options: it used to reach S3 without them (botocore's NoCredentialsError)."""
    fs, options = s3
    remote = _upload(fs, f"{tmp_path.name}-{operation}")
    sp = statectl.open(remote, storage_options=options)
    output = f"{remote}-out"
    if operation == "rescale":
        statectl.rescale(sp, output, parallelism=3)
    elif operation == "migrate":
        statectl.migrate(sp, output, renames=[("keyed-str", "sessions")])
    elif operation == "export":
        statectl.export(sp, output, operator="keyed-str")
    else:
        sp.operator("keyed-str").state("cnt").drop()
        sp.write(output)
    written = files_under(output, options)
    assert written and ("_metadata" in written or operation == "export")


def test_a_source_s_options_serve_only_its_own_store() -> None:
    from statectl.savepoint.storage import options_for

    given, source = {"key": "given"}, {"key": "source"}
    assert options_for("s3://b/out", "s3a://b/sp", None, source) == source
    assert options_for("s3://b/out", "s3://b/sp", given, source) == given
    assert options_for("/tmp/out", "s3://b/sp", None, source) is None
    assert options_for("gs://b/out", "s3://b/sp", None, source) is None
    assert options_for("file:///tmp/out", "/tmp/sp", None, source) == source
