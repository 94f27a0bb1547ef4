"""Small functions beside the operations: what Flink derives from a uid and a parallelism, and
the parallelism lists the commands take."""

from __future__ import annotations


def uid_hash(uid: str) -> str:
    """The operator id (32 hex) Flink gives the operator with this uid: murmur3_128 (seed 0)
    of its UTF-8 bytes, as `_metadata`, Flink's logs and its web UI show it.

    >>> statectl.uid_hash("keyed-str")
    '0cad1b1f959e0cc01a89a8ec2be0100c'
    """
    from statectl.savepoint.model import operator_id_for_uid

    return operator_id_for_uid(uid).hex()


def key_group_range(max_parallelism: int, parallelism: int, subtask: int) -> tuple[int, int]:
    """The key groups (first, last; inclusive) Flink gives `subtask` of an operator at
    `parallelism` with `max_parallelism` key groups."""
    from statectl.formats.key_groups import key_group_range as subtask_range

    return subtask_range(max_parallelism, parallelism, subtask)


def parse_parallelisms(text: str) -> list[int]:
    """Parallelisms written as a list and ranges (`2,3,5`, `1-16`, `1-4,8,16`): ascending,
    without repeats; anything else raises `ValueError`."""
    from statectl.operations.rescale.load import parse_parallelisms as parse

    return parse(text)


def parse_state_type(text: str) -> str:
    """A state's type in the syntax `inspect` prints (`ROW{id STRING, qty INT}`,
    `TUPLE2{f0 STRING, f1 BIGINT}`, `MAP<STRING, POJO com.acme.Order>`), as `check`'s `types`
    take it: the type written back in that syntax; `ValueError` saying what is wrong."""
    from statectl.errors import FormatError
    from statectl.formats.job_types import parse_type

    try:
        return parse_type(text).describe()
    except FormatError as exc:
        raise ValueError(exc.message) from None
