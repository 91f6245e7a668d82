"""``CompactionRecord`` and ``verify``: what an application stores, and its re-derivation.

A record holds the plan (its ``to_dict()`` object) and everything needed to make it again: the
budget, the policy's name, version and configuration, and a digest of the transcript. ``verify``
rebuilds the policy, decides again and compares byte for byte. The ``plan_hash`` seals the plan;
the ``seal`` (a short digest per other field) lets ``verify`` name a field edited after the
record was made even when the edit changes no outcome. See docs/records.md.
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

from cutctx._audit.policies import NotRebuildable, policy_config, rebuild
from cutctx._core.digest import (
    body_digest,
    canonical_digest,
    canonical_json,
    json_digest,
    json_string,
)
from cutctx._core.errors import BudgetUnsatisfiable
from cutctx._core.executor import plan_holds
from cutctx._core.plan import CompactionPlan
from cutctx._core.protocols import CompactionPolicy, Named
from cutctx._core.values import CompactionBudget, Transcript, TranscriptTurn, check_count, check_str

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = [
    "SCHEMA_VERSION",
    "CompactionRecord",
    "Verification",
    "budget_dict",
    "transcript_digest",
    "verify",
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

_LABELS: Final = {
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
_SHOWN: Final = 3
"""Differing turns named in one difference."""


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
            raise _argument("plan", "a cutctx.CompactionPlan", plan)
        if not isinstance(transcript, Transcript):
            raise _argument("transcript", "a cutctx.Transcript", transcript)
        if not isinstance(budget, CompactionBudget):
            raise _argument("budget", "a cutctx.CompactionBudget", budget)
        if not isinstance(policy, CompactionPolicy):
            raise _argument("policy", "a CompactionPolicy", policy)
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


@dataclass(frozen=True, slots=True)
class Verification:
    """The outcome of ``verify``: ``ok`` exactly when nothing differs.

    Each difference is one short sentence for a person, in the order ``verify`` checks: the
    seal, the plan's own hash, the transcript, the policy, then the plan it re-derives.

    .. versionadded:: 0.1.0
    """

    ok: bool
    differences: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.differences, tuple) or not all(
            isinstance(item, str) for item in self.differences
        ):
            raise ValidationError(
                "Verification.differences must be a tuple of str",
                details={"field": "Verification.differences"},
            )
        if self.ok is not (not self.differences):
            raise ValidationError(
                "Verification.ok must be True exactly when there are no differences",
                details={"field": "Verification.ok"},
            )


def verify(
    record: CompactionRecord, transcript: Transcript, policy: CompactionPolicy | None = None
) -> Verification:
    """Re-derive the record's plan from ``transcript`` and say what, if anything, differs.

    ``ok`` means the policy decides, under the record's budget, a plan whose canonical JSON is
    byte identical to the record's, and that no field was edited after the record was made.
    Without ``policy``, the built-in policy is rebuilt from the record's name, version and
    configuration.

    .. versionadded:: 0.1.0

    >>> from cutctx import CompactionBudget, DropOldestPolicy, Role, Transcript, TranscriptTurn
    >>> t = Transcript((TranscriptTurn("u", Role.USER, "hi", 1),))
    >>> budget, policy = CompactionBudget(10), DropOldestPolicy()
    >>> verify(CompactionRecord.of(policy.decide(t, budget), t, budget, policy), t)
    Verification(ok=True, differences=())

    Raises:
        ValidationError: if ``policy`` is ``None`` and the record's policy cannot be rebuilt
            from data (a policy of the caller's own, or one priced by an estimator that is not a
            ``CharRatioEstimator``), or an argument is of the wrong type.
    """
    if not isinstance(record, CompactionRecord):
        raise _argument("record", "a cutctx.CompactionRecord", record, owner="verify")
    if not isinstance(transcript, Transcript):
        raise _argument("transcript", "a cutctx.Transcript", transcript, owner="verify")
    if policy is not None and not isinstance(policy, CompactionPolicy):
        raise _argument("policy", "a CompactionPolicy or None", policy, owner="verify")
    differences = list(_edited(record))
    record_json = record._plan_json
    if json_digest(record_json) != record.plan_hash:
        differences.append("the record's plan_hash does not match its plan")
    digest = transcript_digest(transcript)
    if digest != record.transcript_digest:
        differences.append(
            "the transcript is not the one the record was made for "
            f"(digest {record.transcript_digest[:12]}… in the record, {digest[:12]}… here)"
        )
    chosen = _policy(record, policy, edited="policy" in _edited_keys(record))
    if isinstance(chosen, str):
        differences.append(chosen)
        return Verification(ok=False, differences=tuple(differences))
    made = (chosen.name, chosen.version)
    if made != (record.policy_name, record.policy_version):
        differences.append(
            f"the policy differs: the record names {record.policy_name}@{record.policy_version}, "
            f"the policy is {made[0]}@{made[1]}"
        )
    elif policy is not None and record.policy_config is not None:
        given = policy_config(policy)
        if given is not None and canonical_json(given) != canonical_json(record.policy_config):
            differences.append("the policy's configuration differs from the record's")
    try:
        derived = chosen.decide(transcript, record.budget)
    except BudgetUnsatisfiable as error:
        differences.append(f"the policy refuses this transcript under the record's budget: {error}")
        return Verification(ok=False, differences=tuple(differences))
    if derived.canonical_json() != record_json:
        differences.extend(_plan_differences(json.loads(record_json), derived.to_dict()))
    if derived.plan_hash() != record.plan_hash:
        differences.append(
            f"the plan hash differs: {record.plan_hash[:12]}… in the record, "
            f"{derived.plan_hash()[:12]}… re-derived"
        )
    return Verification(ok=not differences, differences=tuple(differences))


def _edited_keys(record: CompactionRecord) -> list[str]:
    seal = record.seal or {}
    now = record._sealed()
    return [name for name in SEALED if seal.get(name) != now[name]]


def _edited(record: CompactionRecord) -> Iterator[str]:
    for name in _edited_keys(record):
        yield f"the record's {_LABELS[name]} was edited after it was made (its seal differs)"


def _policy(
    record: CompactionRecord, policy: CompactionPolicy | None, *, edited: bool
) -> CompactionPolicy | str:
    """Return the policy to decide with, or the difference that stops verification."""
    if policy is not None:
        return policy
    try:
        config = record.policy_config
        return rebuild(
            record.policy_name, None if config is None else json.loads(canonical_json(config))
        )
    except NotRebuildable as error:
        if edited:
            return f"the record's policy cannot be rebuilt: {error}"
        raise ValidationError(
            f"verify() needs policy=: {error}, so the record's policy "
            f"{record.policy_name}@{record.policy_version} cannot be rebuilt from it",
            details={"field": "policy", "policy_name": record.policy_name},
        ) from None
    except ValidationError as error:
        return f"the record's policy configuration cannot be rebuilt: {error.message}"


def _plan_differences(record: dict[str, Any], derived: dict[str, Any]) -> list[str]:
    """Name what differs between the record's plan and the re-derived one (they do differ)."""
    found: list[str] = []
    theirs, ours = record.get("actions"), derived["actions"]
    if theirs != ours:
        found.append(_action_difference(theirs, ours))
    for key in sorted((record.keys() | derived.keys()) - {"actions"}):
        if key not in derived:
            found.append(f"the record's plan holds the unknown key {key!r}")
        elif key not in record:
            found.append(f"the record's plan lacks {key!r}")
        elif canonical_json(record[key]) != canonical_json(derived[key]):
            found.append(
                f"{key} differs: {_short(record[key])} in the record, "
                f"{_short(derived[key])} re-derived"
            )
    if not found:  # pragma: no cover - equal keys and values give equal canonical JSON
        found.append("the record's plan JSON differs from the re-derived plan's")
    return found


def _action_difference(theirs: object, ours: list[dict[str, Any]]) -> str:
    """Return one sentence naming the first turns whose actions differ."""
    if not isinstance(theirs, list) or not all(isinstance(item, Mapping) for item in theirs):
        return "the record's plan holds no list of actions"
    their_ids = [item.get("turn_id") for item in theirs]
    our_ids = [item["turn_id"] for item in ours]
    if their_ids != our_ids:
        at = next(
            (i for i, (a, b) in enumerate(zip(their_ids, our_ids, strict=False)) if a != b),
            min(len(their_ids), len(our_ids)),
        )
        return (
            f"the record's plan is for other turns: {len(their_ids)} actions for "
            f"{len(our_ids)} turns, first differing at position {at}"
        )
    differing = [
        (mine["turn_id"], _describe(item), _describe(mine))
        for item, mine in zip(theirs, ours, strict=True)
        if canonical_json(item) != canonical_json(mine)
    ]
    named = ", ".join(
        f"{turn_id!r} ({a} in the record, {b} re-derived)" if a != b else f"{turn_id!r} ({a})"
        for turn_id, a, b in differing[:_SHOWN]
    )
    more = f" (+{len(differing) - _SHOWN} more)" if len(differing) > _SHOWN else ""
    return f"the actions differ at {len(differing)} turn(s): {named}{more}"


def _describe(action: Mapping[str, Any]) -> str:
    """Return an action in a few words: ``mask (12 tokens)``, ``summarize into span-…``."""
    kind = action.get("action")
    replacement = action.get("replacement")
    group = action.get("summary_group")
    text = str(kind)
    if isinstance(replacement, Mapping):
        body = "excerpt" if kind == "excerpt" else "stub"
        shown = _short(replacement.get("content"), 24)
        text += f" ({replacement.get('token_estimate')} tokens, {body} {shown})"
    if group is not None:
        text += f" into {group}"
    return text


def _short(value: object, width: int = 40) -> str:
    text = canonical_json(value)
    return text if len(text) <= width else text[: width - 1] + "…"


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


def _argument(
    name: str, expected: str, value: object, owner: str = "CompactionRecord.of"
) -> ValidationError:
    return ValidationError(
        f"{owner}: {name} must be {expected}, got {type(value).__name__}",
        details={"field": name, "expected": expected},
    )
