"""``CompactionRecord``: what an application stores of a plan, to re-derive it later.

A record holds the plan (its ``to_dict()`` object) and everything needed to make it again: the
budget, the policy's name, version and configuration, and a digest of the transcript
(``verify``, in ``_audit.verify``, rebuilds the policy, decides again and compares byte for
byte). The ``plan_hash`` seals the plan; the ``seal`` (a short digest per other field) lets
``verify`` name a field edited after the record was made even when the edit changes no outcome.
See docs/records.md.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final

from baseaicore import ValidationError

from cutctx._audit.policies import policy_config
from cutctx._core.digest import (
    body_digest,
    canonical_digest,
    canonical_json,
    json_digest,
    json_string,
)
from cutctx._core.executor import plan_holds
from cutctx._core.plan import CompactionPlan
from cutctx._core.protocols import CompactionPolicy, Named
from cutctx._core.values import CompactionBudget, Transcript, TranscriptTurn, check_count, check_str

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = [
    "LABELS",
    "SCHEMA_VERSION",
    "SEALED",
    "CompactionRecord",
    "argument_error",
    "budget_dict",
    "transcript_digest",
]

SCHEMA_VERSION: Final = 1
"""The version of the record's JSON shape this cutctx writes and reads."""

SEALED: Final = (
    "budget",
    "policy",
    "transcript_digest",
    "format",
    "tokenizer",
    "keep_first",
    "system_digest",
)
"""The keys of ``to_dict()`` the seal covers: every one but the plan, its hash and the version."""

LABELS: Final = {
    "budget": "budget",
    "policy": "policy (name, version or configuration)",
    "transcript_digest": "transcript digest",
    "format": "format",
    "tokenizer": "tokenizer",
    "keep_first": "keep_first",
    "system_digest": "system digest",
}
_KEYS: Final = frozenset({"schema_version", "plan", "plan_hash", "seal", *SEALED})
_HEX64: Final = re.compile(r"[0-9a-f]{64}")
_HEX16: Final = re.compile(r"[0-9a-f]{16}")


def transcript_digest(transcript: Transcript) -> str:
    """Return the SHA-256 hex digest of the transcript's canonical description.

    The description is a JSON array with one object per turn, in order, holding every field of
    the turn: ``turn_id``, ``role`` (its wire string), ``content_sha256`` (the SHA-256 hex of the
    content as UTF-8, which stands for the content), ``token_estimate``, ``tool_call_id``,
    ``pinned`` and ``metadata``; written canonically (sorted keys, no whitespace, non-ASCII as
    is) and hashed as UTF-8 (``json_digest``; the body by ``body_digest``). Each body is hashed
    once and never copied or escaped whole.
    """
    return json_digest(_transcript_json(transcript))


def _transcript_json(transcript: Transcript) -> Iterator[str]:
    """Yield the transcript's canonical description, a JSON array, one turn at a time."""
    yield "["
    for index, turn in enumerate(transcript.turns):
        yield "," + _turn_json(turn) if index else _turn_json(turn)
    yield "]"


def _turn_json(turn: TranscriptTurn) -> str:
    """Return the canonical JSON of one turn's description (keys in sorted order).

    Written directly, not through ``json.dumps``: the call's set-up costs more than the object,
    several times the hashing on a large transcript. The tests compare it with ``json.dumps``.
    """
    string = json_string
    metadata = "{}" if not turn.metadata else canonical_json(turn.metadata)
    call = "null" if turn.tool_call_id is None else string(turn.tool_call_id)
    return (
        f'{{"content_sha256":"{body_digest(turn.content)}","metadata":{metadata}'
        f',"pinned":{"true" if turn.pinned else "false"},"role":"{turn.role.value}"'
        f',"token_estimate":{turn.token_estimate},"tool_call_id":{call}'
        f',"turn_id":{string(turn.turn_id)}}}'
    )


@dataclass(frozen=True, slots=True)
class CompactionRecord:
    """What an application stores about one plan, so that anyone can re-derive it later.

    Build one with ``CompactionRecord.of(...)``; store ``to_dict()`` (plain JSON); read it back
    with ``CompactionRecord.from_dict``; check it with ``cutctx.verify``. ``plan`` and
    ``policy_config`` are read-only copies of plain JSON data. ``format``, ``tokenizer``,
    ``keep_first`` and ``system_digest`` say how a command line built the transcript from a file
    (``None`` otherwise). ``seal`` maps each field of ``SEALED`` to 16 hex digits of the SHA-256
    of its canonical JSON; left out, it is computed (the record is sealed as it is made).

    .. versionadded:: 0.1.0

    Raises:
        ValidationError: naming the field that is malformed.
    """

    schema_version: int
    plan: Mapping[str, Any] = field(hash=False)
    plan_hash: str
    budget: CompactionBudget
    policy_name: str
    policy_version: str
    policy_config: Mapping[str, Any] | None = field(hash=False)
    transcript_digest: str
    format: str | None = None
    tokenizer: str | None = None
    keep_first: int | None = None
    system_digest: str | None = None
    seal: Mapping[str, str] | None = field(default=None, hash=False)
    # The plan's canonical JSON, written once: verify compares it and to_dict reads it back.
    _plan_json: str = field(init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        _check_schema(self.schema_version)
        if not isinstance(self.plan, Mapping):
            raise _refuse("plan", "a JSON object (a plan's to_dict())", self.plan)
        plan = _frozen(self.plan, "CompactionRecord.plan")
        object.__setattr__(self, "plan", plan)
        object.__setattr__(self, "_plan_json", canonical_json(plan))
        _hex("plan_hash", self.plan_hash, _HEX64)
        if not isinstance(self.budget, CompactionBudget):
            raise _refuse("budget", "a cutctx.CompactionBudget", self.budget)
        check_str("CompactionRecord", "policy_name", self.policy_name)
        check_str("CompactionRecord", "policy_version", self.policy_version)
        if self.policy_config is not None:
            if not isinstance(self.policy_config, Mapping):
                raise _refuse("policy_config", "a JSON object or None", self.policy_config)
            frozen = _frozen(self.policy_config, "CompactionRecord.policy_config")
            object.__setattr__(self, "policy_config", frozen)
        _hex("transcript_digest", self.transcript_digest, _HEX64)
        for name in ("format", "tokenizer"):
            value = getattr(self, name)
            if value is not None:
                check_str("CompactionRecord", name, value)
        if self.keep_first is not None:
            check_count("CompactionRecord", "keep_first", self.keep_first)
        if self.system_digest is not None:
            _hex("system_digest", self.system_digest, _HEX64)
        if self.seal is None:
            object.__setattr__(self, "seal", MappingProxyType(self._sealed()))
            return
        if not isinstance(self.seal, Mapping) or set(self.seal) != set(SEALED):
            raise _refuse("seal", f"a JSON object with the keys {', '.join(SEALED)}", self.seal)
        for name in SEALED:
            _hex(f"seal[{name!r}]", self.seal[name], _HEX16)
        object.__setattr__(self, "seal", MappingProxyType({k: self.seal[k] for k in SEALED}))

    @classmethod
    def of(
        cls,
        plan: CompactionPlan,
        transcript: Transcript,
        budget: CompactionBudget,
        policy: CompactionPolicy,
        *,
        format: str | Named | None = None,  # the field's name in the record
        tokenizer: str | None = None,
        keep_first: int | None = None,
        system_digest: str | None = None,
    ) -> CompactionRecord:
        """Return the record of ``plan``, which ``policy`` made for ``transcript`` under ``budget``.

        .. versionadded:: 0.1.0

        >>> from cutctx import CompactionBudget, DropOldestPolicy, Role, Transcript, TranscriptTurn
        >>> t = Transcript((TranscriptTurn("u", Role.USER, "hi", 1),))
        >>> budget, policy = CompactionBudget(10), DropOldestPolicy()
        >>> record = CompactionRecord.of(policy.decide(t, budget), t, budget, policy)
        >>> record.policy_name, record.policy_config
        ('drop_oldest', mappingproxy({}))

        ``format`` is the messages' format: a ``cutctx.formats.Format`` or its name.

        Raises:
            PlanTranscriptMismatch: if ``plan`` was not built for ``transcript``.
            ValidationError: if ``plan`` does not hold under ``budget``, was not made by a
                policy of ``policy``'s name and version, or an argument is malformed.
        """
        named = format if format is None or isinstance(format, str) else format.name
        if not isinstance(plan, CompactionPlan):
            raise argument_error("plan", "a cutctx.CompactionPlan", plan)
        if not isinstance(transcript, Transcript):
            raise argument_error("transcript", "a cutctx.Transcript", transcript)
        if not isinstance(budget, CompactionBudget):
            raise argument_error("budget", "a cutctx.CompactionBudget", budget)
        if not isinstance(policy, CompactionPolicy):
            raise argument_error("policy", "a CompactionPolicy", policy)
        plan_holds(plan, transcript, budget)
        made_by = (plan.policy_name, plan.policy_version)
        if made_by != (policy.name, policy.version):
            raise ValidationError(
                f"CompactionRecord.of: the plan was made by {made_by[0]}@{made_by[1]}, "
                f"not by the policy given ({policy.name}@{policy.version})",
                details={"field": "policy", "plan_policy": made_by[0]},
            )
        return cls(
            SCHEMA_VERSION,
            plan.to_dict(),
            plan.plan_hash(),
            budget,
            policy.name,
            policy.version,
            policy_config(policy),
            transcript_digest(transcript),
            named,
            tokenizer,
            keep_first,
            system_digest,
        )

    def to_dict(self) -> dict[str, Any]:
        """Return the record as plain JSON data (a fresh copy; every key always present)."""
        return {
            "schema_version": self.schema_version,
            "plan_hash": self.plan_hash,
            **self._fields(),
            "seal": dict(self.seal or {}),
            "plan": json.loads(self._plan_json),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CompactionRecord:
        """Return the record a ``to_dict()`` object describes (parsed JSON, for instance).

        The structure is checked here; whether the record still holds is ``verify``'s question.

        .. versionadded:: 0.1.0

        Raises:
            ValidationError: naming the key that is missing, unknown or malformed, or for a
                ``schema_version`` this cutctx does not read.
        """
        if isinstance(data, Mapping) and data.get("schema_version") != SCHEMA_VERSION:
            _check_schema(data.get("schema_version"))
        record = _object(data, "record", _KEYS)
        budget = _object(
            record["budget"],
            "budget",
            frozenset(("max_tokens", "protected_recent_turns")),
            frozenset(("max_result_tokens",)),
        )
        policy = _object(record["policy"], "policy", frozenset(("name", "version", "config")))
        if not isinstance(record["seal"], Mapping):  # a record read back is never sealed anew
            raise _refuse(
                "seal", f"a JSON object with the keys {', '.join(SEALED)}", record["seal"]
            )
        return cls(
            record["schema_version"],
            record["plan"],
            record["plan_hash"],
            CompactionBudget(
                budget["max_tokens"],
                budget["protected_recent_turns"],
                max_result_tokens=budget.get("max_result_tokens"),
            ),
            policy["name"],
            policy["version"],
            policy["config"],
            record["transcript_digest"],
            record["format"],
            record["tokenizer"],
            record["keep_first"],
            record["system_digest"],
            record["seal"],
        )

    def _fields(self) -> dict[str, Any]:
        """Return the sealed keys of ``to_dict()`` and their plain JSON values."""
        return {
            "budget": budget_dict(self.budget),
            "policy": {
                "name": self.policy_name,
                "version": self.policy_version,
                "config": None
                if self.policy_config is None
                else json.loads(canonical_json(self.policy_config)),
            },
            "transcript_digest": self.transcript_digest,
            "format": self.format,
            "tokenizer": self.tokenizer,
            "keep_first": self.keep_first,
            "system_digest": self.system_digest,
        }

    def _sealed(self) -> dict[str, str]:
        """Return the seal the record's fields have now."""
        return {name: _seal_of(value) for name, value in self._fields().items()}


def budget_dict(budget: CompactionBudget) -> dict[str, Any]:
    """Return ``budget`` as a record holds it: ``max_result_tokens`` only when set.

    A budget without the cap is written exactly as before it existed, so the seal of every
    record made then still holds.
    """
    data: dict[str, Any] = {
        "max_tokens": budget.max_tokens,
        "protected_recent_turns": budget.protected_recent_turns,
    }
    if budget.max_result_tokens is not None:
        data["max_result_tokens"] = budget.max_result_tokens
    return data


def _check_schema(version: object) -> None:
    if version != SCHEMA_VERSION or isinstance(version, bool):
        raise ValidationError(
            f"CompactionRecord.schema_version {version!r:.20} is not supported "
            f"(this cutctx reads {SCHEMA_VERSION})",
            details={"field": "CompactionRecord.schema_version", "expected": SCHEMA_VERSION},
        )


def _seal_of(value: object) -> str:
    return canonical_digest(value)[:16]


class _NotJson(Exception):
    """A value of ``_frozen``'s input is not JSON data; ``path`` is filled while unwinding."""

    def __init__(self, expected: str, value: object) -> None:
        super().__init__(expected)
        self.expected = expected
        self.value = value
        self.path: list[str] = []


def _frozen(value: object, where: str) -> Any:  # noqa: ANN401 - JSON data of any shape
    """Return a read-only deep copy of plain JSON data, refusing anything that is not JSON."""
    try:
        return _freeze(value)
    except _NotJson as error:
        raise _refuse_at(
            where + "".join(reversed(error.path)), error.expected, error.value
        ) from None


def _freeze(value: object) -> Any:  # noqa: ANN401 - JSON data of any shape
    # Exact types first: a plan of 20 000 turns is some 120 000 values, and an ABC check each
    # would cost more than the copy. The path of a refused value is built only on refusal.
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return value
    if kind is dict or (kind is not list and kind is not tuple and isinstance(value, Mapping)):
        frozen: dict[str, Any] = {}
        for key, item in value.items():  # type: ignore[attr-defined]
            if type(key) is not str:
                raise _NotJson("an object with string keys", key)
            try:
                frozen[key] = _freeze(item)
            except _NotJson as error:
                error.path.append(f".{key}")
                raise
        return MappingProxyType(frozen)
    if kind is list or kind is tuple:
        items = []
        for index, item in enumerate(value):  # type: ignore[arg-type]
            try:
                items.append(_freeze(item))
            except _NotJson as error:
                error.path.append(f"[{index}]")
                raise
        return tuple(items)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise _NotJson("a finite number", value)
        return value
    if isinstance(value, str | int):
        return value
    raise _NotJson("JSON data", value)


def _object(
    value: object, where: str, keys: frozenset[str], optional: frozenset[str] = frozenset()
) -> Mapping[str, Any]:
    """Return ``value`` if it is a JSON object with ``keys`` (and any of ``optional``)."""
    if not isinstance(value, Mapping):
        raise _refuse_at(f"CompactionRecord.from_dict: {where}", "a JSON object", value)
    missing = sorted(keys - value.keys())
    if missing:
        raise ValidationError(
            f"CompactionRecord.from_dict: {where} lacks the key {missing[0]!r}",
            details={"field": f"{where}.{missing[0]}"},
        )
    unknown = sorted(str(key) for key in value.keys() - keys - optional)
    if unknown:
        raise ValidationError(
            f"CompactionRecord.from_dict: {where} holds the unknown key {unknown[0]!r}",
            details={"field": f"{where}.{unknown[0]}"},
        )
    return value


def _hex(name: str, value: object, pattern: re.Pattern[str]) -> None:
    if not isinstance(value, str) or not pattern.fullmatch(value):
        digits = 64 if pattern is _HEX64 else 16
        raise _refuse(name, f"{digits} lowercase hex digits", value)


def _refuse(name: str, expected: str, value: object) -> ValidationError:
    return _refuse_at(f"CompactionRecord.{name}", expected, value)


def _refuse_at(where: str, expected: str, value: object) -> ValidationError:
    return ValidationError(
        f"{where} must be {expected}, got {type(value).__name__} {value!r:.60}",
        details={"field": where, "expected": expected},
    )


def argument_error(
    name: str, expected: str, value: object, owner: str = "CompactionRecord.of"
) -> ValidationError:
    return ValidationError(
        f"{owner}: {name} must be {expected}, got {type(value).__name__}",
        details={"field": name, "expected": expected},
    )
