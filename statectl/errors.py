"""The one error type statectl raises for bad input, and its flavours.

Every layer raises these; the CLI turns them into `statectl: error: <file>: <what>`.
"""

from __future__ import annotations


class StatectlError(Exception):
    """Bad input or an unsupported operation. `source` names the file or object at fault."""

    def __init__(self, message: str, source: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.source = source

    def with_source(self, source: str) -> StatectlError:
        """The same error, attributed to `source` unless it already names one."""
        if self.source is None:
            self.source = source
        return self

    def __str__(self) -> str:
        return f"{self.source}: {self.message}" if self.source else self.message


class FormatError(StatectlError):
    """Bytes that do not follow Flink's format: truncated, corrupt, unknown version or code."""


class UnsupportedError(StatectlError):
    """Valid Flink data that statectl cannot handle for the requested operation."""


class SavepointError(StatectlError):
    """A savepoint directory that is incomplete: missing `_metadata`, missing state files."""
