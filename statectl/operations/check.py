"""Will the new version of a job restore this savepoint, state by state? (`statectl check`)

A state's type changed in code is decided by Flink at restore time, in production: it migrates
the state, refuses the restore (`StateMigrationException`), or restores it with values lost (a
renamed POJO field). `check` gives each state the verdict of Flink's own compatibility rules
(`formats/compatibility.py`) before the restore: the old types from the serializer snapshots in
the savepoint, the new ones from the new job's class files (POJOs, enums, Avro specific
records, Kryo classes) and from `types` for what the job declares in code (Row, Tuple, basic
types), which are otherwise assumed unchanged. Keyed states are checked with their operator's
key type, whose class the new job may have changed too; timers are Flink's own.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from statectl.errors import StatectlError
from statectl.formats.class_files import ClassFinder
from statectl.formats.compatibility import AS_IS, PASSING, VERDICTS, TypeChecker, Verdict, worst
from statectl.formats.job_types import LIST, MAP, DeclaredType, parse_type
from statectl.formats.serializer_snapshots import SerializerSnapshot
from statectl.formats.state_headers import StateMetaInfo
from statectl.formats.state_values import flink_major, keyed_codec, operator_codec
from statectl.operations import verify
from statectl.operations.upgrade import each_state
from statectl.savepoint import entries
from statectl.savepoint.model import Savepoint

ASSUMED = "type from code, assumed unchanged (give --type to check it)"


@dataclass(frozen=True)
class StateCheck:
    """What Flink does restoring one state with the new job: `verdict` (as-is, migrates,
    loses, refused, unknown) and why, in one line; `type` the state's type in the savepoint."""

    operator: str  # the operator's label (uid, or hex id)
    operator_id: str
    state: str
    scope: str  # keyed | operator
    type: str
    verdict: str
    reason: str = ""
    new_type: str | None = None  # the type given with `types`, if one was


@dataclass(frozen=True)
class CheckReport:
    source: str
    classpath: tuple[str, ...]
    states: tuple[StateCheck, ...]

    @property
    def ok(self) -> bool:
        """Every state restores as is or migrates: nothing refused, lost or unknown."""
        return all(s.verdict in PASSING for s in self.states)

    def count(self, verdict: str) -> int:
        return sum(s.verdict == verdict for s in self.states)

    def counts(self) -> dict[str, int]:
        return {v: self.count(v) for v in VERDICTS}


def check(
    sp: Savepoint,
    classes: ClassFinder,
    types: Mapping[str, str] | None = None,
    classpath: tuple[str, ...] = (),
) -> CheckReport:
    """Every state's `StateCheck` for a restore by the job whose classes `classes` finds;
    `types`: "OPERATOR/STATE" → the state's new type in `inspect`'s syntax, for types declared
    in code. `classpath` names the class path in the report."""
    given = _given_types(sp, types or {})
    checker = TypeChecker(classes, flink_major(sp.metadata.version))
    results = []
    for op in sp.operators:
        verify.ensure_consistent(sp, [op])
        label = entries.operator_label(op)
        for scope, meta, key in each_state(sp, op):
            if meta.kind == "TIMERS":
                continue
            new, _ = given.pop((op.operator_id_hex, meta.name), (None, ""))
            verdict = _state_verdict(checker, meta, key, scope, new)
            results.append(
                StateCheck(
                    label, op.operator_id_hex, meta.name, scope, _described(meta, key, scope),
                    verdict.verdict, _reason(verdict, new), new.describe() if new else None,
                )
            )  # fmt: skip
    if given:
        _, target = next(iter(given.values()))
        raise StatectlError(f"--type {target}: no such state", sp.directory.url)
    return CheckReport(sp.directory.url, classpath, tuple(results))


def _given_types(
    sp: Savepoint, types: Mapping[str, str]
) -> dict[tuple[str, str], tuple[DeclaredType, str]]:
    """{"OPERATOR/STATE": type text} as (operator id, state) → (`DeclaredType`, the target)."""
    given = {}
    for target, text in types.items():
        operator, slash, state = target.rpartition("/")
        if not slash or not operator or not state:
            raise StatectlError(f"--type: expected OPERATOR/STATE=TYPE, got {target!r}")
        op = sp.find_operator(operator)
        given[(op.operator_id_hex, state)] = (parse_type(text), target)
    return given


def _state_verdict(
    checker: TypeChecker,
    meta: StateMetaInfo,
    key: SerializerSnapshot | None,
    scope: str,
    new: DeclaredType | None,
) -> Verdict:
    """The state's values, and its keys: a keyed state's (whose class the new job may have
    changed too; a key type declared in code is assumed unchanged, without a word: it cannot
    be given) or a broadcast state's."""
    if scope == "keyed":
        parts = [checker.check(meta.value_serializer, new)]
        if key is not None:
            keys = checker.check(key, None, "key: ")
            parts.append(Verdict(keys.verdict, keys.reasons))
    elif meta.backend_state_type == "BROADCAST":
        key_type, value_type = _unwrapped(meta, new, MAP, 2)
        parts = [checker.check(meta.key_serializer, key_type, "key: ")]
        parts.append(checker.check(meta.value_serializer, value_type))
    else:
        (element,) = _unwrapped(meta, new, LIST, 1)
        parts = [checker.check(meta.value_serializer, element)]
    return worst(parts)


def _unwrapped(
    meta: StateMetaInfo, new: DeclaredType | None, kind: str, count: int
) -> tuple[DeclaredType | None, ...]:
    """An operator list state's serializer is its element's, a broadcast state's are its
    key's and value's: the given `LIST<…>` / `MAP<…>` (as `inspect` prints them) unwrapped."""
    if new is None:
        return (None,) * count
    if new.kind != kind:
        expected = "LIST<T>" if kind == LIST else "MAP<K, V>"
        raise StatectlError(f"--type of operator state {meta.name!r}: give {expected}")
    return new.args


def _described(meta: StateMetaInfo, key: SerializerSnapshot | None, scope: str) -> str:
    """The state's type as `inspect` prints it (the syntax of `types`)."""
    if scope == "keyed":
        return keyed_codec(meta, key).describe()
    kind = "BROADCAST" if meta.backend_state_type == "BROADCAST" else "LIST"
    return operator_codec(meta, kind).describe()


def _reason(verdict: Verdict, new: DeclaredType | None) -> str:
    if verdict.reason or verdict.verdict != AS_IS:
        return verdict.reason
    return ASSUMED if verdict.assumed and new is None else ""
