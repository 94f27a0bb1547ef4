"""The command line raises glibc's mmap and trim thresholds for its own process."""

from __future__ import annotations

import platform

import pytest

from statectl.cli import allocator


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's mallopt")
def test_glibc_takes_the_thresholds() -> None:
    assert allocator.keep_freed_buffers()
