"""The command line's own process keeps freed buffers for the next batch.

glibc gives freed blocks above its mmap threshold back to the operating system at once, and
trims its heap when more than twice that is free at its top. The batch readers allocate arrays
of megabytes per batch (a block's bytes, positions, decoded columns) and free them before the
next, so each batch paid again for zeroed pages: 0.3-0.4 CPU-seconds of the 5 of a 10 M-entry
`export --typed`. Raising both thresholds keeps those pages; what the process holds stays set by
the batch, not the state (the library leaves the allocator of its host process alone).
"""

from __future__ import annotations

import ctypes
import ctypes.util

_M_TRIM_THRESHOLD = -1  # glibc's mallopt parameters (malloc.h)
_M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 64 << 20
TRIM_THRESHOLD = 256 << 20


def keep_freed_buffers() -> bool:
    """Raise glibc's thresholds; False where the C library is not glibc (nothing changes)."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    return bool(
        mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD) and mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    )
