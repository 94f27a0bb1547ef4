"""The CLI's last resort: a Ctrl-C is one line and exit 130 wherever it lands, and a storage
library's error that says what the machine lacks (S3 credentials) is one line saying what to
set, not an `internal error`."""

from __future__ import annotations

import pytest

import statectl
from tests.conftest import run_cli


def _raises(exc: BaseException) -> object:
    def fail(*args: object, **kwargs: object) -> None:
        raise exc

    return fail


def test_ctrl_c_in_a_command_is_one_line_and_exit_130(monkeypatch: pytest.MonkeyPatch) -> None:
    """typer turns a KeyboardInterrupt into a silent exit 130; the CLI says why it ended."""
    monkeypatch.setattr(statectl, "uid_hash", _raises(KeyboardInterrupt()))
    assert run_cli("uid-hash", "src") == (130, "", "statectl: error: interrupted\n")


def test_missing_s3_credentials_anywhere_are_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    from botocore.exceptions import NoCredentialsError

    monkeypatch.setattr(statectl, "uid_hash", _raises(NoCredentialsError()))
    code, out, err = run_cli("uid-hash", "src")
    assert (code, out) == (1, "")
    assert err.splitlines() == [
        "statectl: error: no usable S3 credentials (Unable to locate credentials): set "
        "AWS_PROFILE, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or the storage options key "
        "and secret (--storage-option key=… --storage-option secret=…; anon=true for a public "
        "bucket)"
    ]
