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


class NotConvertible(StatectlError):
    """A value `upgrade` could not convert while writing, where no trial had read it first."""


class SparkError(StatectlError):
    """Spark failed: its JVM did not start or died, or a job failed. Not the input's fault, but
    told as one line too, with what to change (`--conf spark.driver.memory=...`)."""


class StatectlNote(UserWarning):
    """Something a reader should know that is no error (a checkpoint read from a copy of its
    folders): a Python warning of the library, one `statectl: note: …` line of the CLI."""


# Errors of the libraries under fsspec that tell what this machine lacks, not what is wrong
# with the input: botocore's (S3) for credentials it found none or only part of.
_CREDENTIAL_ERRORS = {
    "NoCredentialsError",
    "PartialCredentialsError",
    "CredentialRetrievalError",
    "ProfileNotFound",
    "TokenRetrievalError",
    "SSOError",
}
_S3_CREDENTIALS = (
    "set AWS_PROFILE, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or the storage options key "
    "and secret (--storage-option key=… --storage-option secret=…; anon=true for a public bucket)"
)
_HADOOP_CLIENT = (
    "hdfs:// needs Hadoop's native client ({said}): a JVM (JAVA_HOME), HADOOP_HOME and "
    "CLASSPATH=$(hadoop classpath --glob); or read over HTTP: webhdfs://NAMENODE:9870/PATH"
)


def setup_error(exc: BaseException, source: str | None = None) -> StatectlError | None:
    """`exc`, raised by a filesystem's library, as one line saying what to set or install
    (no S3 credentials; no Hadoop client for `hdfs://`), or None for any other error."""
    names = {cls.__name__ for cls in type(exc).__mro__}
    if names & _CREDENTIAL_ERRORS and "BotoCoreError" in names:
        return SavepointError(f"no usable S3 credentials ({exc}): {_S3_CREDENTIALS}", source)
    text = str(exc)
    if isinstance(exc, OSError) and ("libjvm" in text or "libhdfs" in text):
        said = text.splitlines()[0] if text else type(exc).__name__
        return SavepointError(_HADOOP_CLIENT.format(said=said), source)
    return None
