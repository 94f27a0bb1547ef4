"""The one error type statectl raises for bad input, and its flavours.

Every layer raises these; the CLI turns them into `statectl: error: <file>: <what>`.
"""

from __future__ import annotations


def one_line(text: str) -> str:
    """`text` as one printable line: line breaks become spaces, and other control characters
    (names read from a damaged savepoint hold any) are escaped, so the line shows what is there.
    """
    text = " ".join(text.split("\n"))
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in text)


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


class SparkError(StatectlError):
    """Spark failed: its JVM did not start or died, or a job failed. Not the input's fault, but
    told as one line too, with what to change (`--conf spark.driver.memory=...`)."""


class StatectlNote(UserWarning):
    """Something a reader should know that is no error (a checkpoint read from a copy of its
    folders): a Python warning of the library, one `statectl: note: …` line of the CLI."""
