"""``CompactionPlan``: the auditable value a policy returns, validated as it is born."""

from __future__ import annotations

import hashlib
import json
from dataclasses import KW_ONLY, InitVar, dataclass, field
from typing import Any

from baseaicore import ValidationError

from cutctx._invariants import check_plan
from cutctx._values import (
    Action,
    CompactionBudget,
    SummarizationRequest,
    Transcript,
    TurnAction,
    check_bool,
    check_count,
    check_ratio,
    check_str,
)

__all__ = ["CompactionPlan", "canonical_json"]

# An enum's ``.value`` is a descriptor call; a plan serializes one action per turn.
_WIRE = {action: action.value for action in Action}


def canonical_json(value: object) -> str:
    """Serialize plain JSON data canonically: sorted keys, no whitespace, non-ASCII kept as is."""
    # No cycle check: callers pass the fresh, acyclic trees that to_dict() builds, and the check
    # (one id-keyed marker per container) costs more than the rest of the encoding.
    return json.dumps(
        value,
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        allow_nan=False,
        check_circular=False,
    )


@dataclass(frozen=True, slots=True)
class CompactionPlan:
    """What a policy decided for every turn, with the figures it expects; nothing is spent yet.

    The constructor takes, keyword-only, the ``transcript`` and ``budget`` the plan is for and
    runs the invariants gate against them before the object exists, so every plan in existence
    keeps the untouchable set, keeps exchanges whole and states its budget outcome honestly.
    ``estimator_ratio`` is the character ratio that priced the plan's stubs, if any;
    ``estimator_name`` names any other estimator that did.

    Raises:
        ValidationError: for a field of the wrong type or a violated invariant.
        BudgetUnsatisfiable: if the untouchable set alone is over ``budget``.
    """

    actions: tuple[TurnAction, ...]
    summarization_requests: tuple[SummarizationRequest, ...]
    tokens_before: int
    tokens_after_estimate: int
    policy_name: str
    policy_version: str
    estimator_ratio: float | None
    budget_unmet: bool
    _: KW_ONLY
    transcript: InitVar[Transcript]
    budget: InitVar[CompactionBudget]
    estimator_name: str | None = None
    _hash: str | None = field(default=None, init=False, repr=False, compare=False, hash=False)

    def __post_init__(self, transcript: Transcript, budget: CompactionBudget) -> None:
        if not isinstance(transcript, Transcript):
            raise _wrong("transcript", "a cutctx.Transcript", transcript)
        if not isinstance(budget, CompactionBudget):
            raise _wrong("budget", "a cutctx.CompactionBudget", budget)
        object.__setattr__(self, "actions", _tuple_of(self.actions, TurnAction, "actions"))
        object.__setattr__(
            self,
            "summarization_requests",
            _tuple_of(self.summarization_requests, SummarizationRequest, "summarization_requests"),
        )
        check_count("CompactionPlan", "tokens_before", self.tokens_before)
        check_count("CompactionPlan", "tokens_after_estimate", self.tokens_after_estimate)
        check_str("CompactionPlan", "policy_name", self.policy_name)
        check_str("CompactionPlan", "policy_version", self.policy_version)
        if self.estimator_ratio is not None:
            ratio = check_ratio("CompactionPlan", "estimator_ratio", self.estimator_ratio)
            object.__setattr__(self, "estimator_ratio", ratio)
        check_bool("CompactionPlan", "budget_unmet", self.budget_unmet)
        if self.estimator_name is not None:
            check_str("CompactionPlan", "estimator_name", self.estimator_name)
        check_plan(
            transcript,
            budget,
            self.actions,
            self.summarization_requests,
            self.tokens_before,
            self.tokens_after_estimate,
            self.budget_unmet,
        )

    def to_dict(self) -> dict[str, Any]:
        """Return the plan as plain JSON data (``estimator_name`` only when one was recorded)."""
        data: dict[str, Any] = {
            "actions": [
                {
                    "action": _WIRE[action.action],
                    "replacement": None
                    if action.replacement is None
                    else {
                        "content": action.replacement.content,
                        "token_estimate": action.replacement.token_estimate,
                    },
                    "summary_group": action.summary_group,
                    "turn_id": action.turn_id,
                }
                for action in self.actions
            ],
            "summarization_requests": [
                {
                    "group_id": request.group_id,
                    "turn_ids": list(request.turn_ids),
                    "target_tokens": request.target_tokens,
                    "prompt_id": request.prompt_id,
                }
                for request in self.summarization_requests
            ],
            "tokens_before": self.tokens_before,
            "tokens_after_estimate": self.tokens_after_estimate,
            "policy_name": self.policy_name,
            "policy_version": self.policy_version,
            "estimator_ratio": self.estimator_ratio,
            "budget_unmet": self.budget_unmet,
        }
        if self.estimator_name is not None:
            data["estimator_name"] = self.estimator_name
        return data

    def to_json(self) -> str:
        """Return the canonical JSON form: sorted keys, no whitespace, hashed as UTF-8."""
        return canonical_json(self.to_dict())

    @property
    def plan_hash(self) -> str:
        """The SHA-256 hex digest of ``to_json()`` as UTF-8, identical on every platform."""
        if self._hash is None:
            digest = hashlib.sha256(self.to_json().encode("utf-8")).hexdigest()
            object.__setattr__(self, "_hash", digest)
            return digest
        return self._hash


def _wrong(name: str, expected: str, value: object) -> ValidationError:
    return ValidationError(
        f"CompactionPlan.{name} must be {expected}, got {type(value).__name__}",
        details={"field": f"CompactionPlan.{name}", "expected": expected},
    )


def _tuple_of[T](value: object, kind: type[T], name: str) -> tuple[T, ...]:
    """Return ``value`` as a tuple if it is a tuple or list of ``kind``, else raise."""
    if not isinstance(value, tuple | list) or not all(isinstance(item, kind) for item in value):
        raise _wrong(name, f"a tuple of {kind.__name__}", value)
    return tuple(value)
