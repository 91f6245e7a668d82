"""The working form of a decision, shared by the built-in policies and the chain.

A policy decides into a ``Draft`` (one ``Action`` per turn index, the replacements of masked
turns and the summary groups), and ``build_plan`` turns a draft into the one ``CompactionPlan``,
computing the group ids, the requests and the figures. The chain composes drafts over projections
and calls ``build_plan`` once, against the real transcript.
"""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar, NamedTuple

from baseaicore import ValidationError

from cutctx._estimators import CharRatioEstimator
from cutctx._invariants import Layout, layout
from cutctx._plan import CompactionPlan
from cutctx._values import (
    Action,
    CompactionBudget,
    SummarizationRequest,
    Transcript,
    TranscriptTurn,
    TurnAction,
    TurnReplacement,
    group_id_for,
    trusted_action,
    trusted_replacement,
)

if TYPE_CHECKING:
    from cutctx._typing import TokenEstimator

__all__ = [
    "BuiltinPolicy",
    "Draft",
    "Group",
    "Stub",
    "build_plan",
    "estimator_marks",
    "stub_text",
]


@dataclass(slots=True)
class Group:
    """One summary group: its turn indices in order, the target size and the prompt record."""

    members: list[int]
    target_tokens: int
    prompt_id: str


def stub_text(placeholder: str, token_estimate: int, digest: str) -> str:
    """Return the text of a masked stub: the label, the original's estimate and its digest."""
    return f"{placeholder} (original: {token_estimate} tokens, sha256:{digest})"


class Stub(NamedTuple):
    """A masked body's stub whose digest waits until the plan is built.

    Its price is already known (the character default prices a stub by its length alone), so a
    body is hashed only if the final plan still masks it, not when a later chain member
    summarizes or drops it; the text is made then, from the label and the turn.
    """

    placeholder: str
    token_estimate: int

    def resolve(self, turn: TranscriptTurn) -> TurnReplacement:
        """Return the replacement for ``turn``, the SHA-256 of its UTF-8 content included."""
        digest = hashlib.sha256(turn.content.encode("utf-8")).hexdigest()
        text = stub_text(self.placeholder, turn.token_estimate, digest)
        return trusted_replacement(text, self.token_estimate)


@dataclass(slots=True)
class Draft:
    """A decision in the making, indexed by turn position.

    ``tokens`` is the estimate of the view the decision yields (the gate checks it on the plan).
    ``replacements`` is empty when nothing is masked, else one entry per turn (``None`` where the
    turn is not masked): a flat list costs a pointer a turn and no object.
    """

    actions: list[Action]
    tokens: int
    replacements: list[TurnReplacement | Stub | None] = field(default_factory=list)
    groups: list[Group] = field(default_factory=list)
    estimator_ratio: float | None = None
    estimator_name: str | None = None


def keep_all(transcript: Transcript) -> Draft:
    """Return the draft that keeps every turn."""
    return Draft([Action.KEEP] * len(transcript.turns), transcript.token_estimate())


def estimator_marks(estimator: TokenEstimator) -> tuple[float | None, str | None]:
    """Return what a plan records about the estimator that priced it: ratio, or name."""
    if isinstance(estimator, CharRatioEstimator):
        return estimator.chars_per_token, None
    name = getattr(estimator, "name", None)
    if isinstance(name, str) and name:
        return None, name
    kind = type(estimator)
    return None, f"{kind.__module__}.{kind.__qualname__}"


def build_plan(
    transcript: Transcript,
    budget: CompactionBudget,
    draft: Draft,
    policy_name: str,
    policy_version: str,
) -> CompactionPlan:
    """Turn ``draft`` into a ``CompactionPlan`` for ``transcript`` (the gate runs inside).

    The draft is consumed: its actions and replacements are emptied once the plan's are made.
    """
    turns = transcript.turns
    group_ids: dict[int, str] = {}
    requests: list[SummarizationRequest] = []
    for group in sorted(draft.groups, key=lambda g: g.members[0]):
        ids = tuple(turns[index].turn_id for index in group.members)
        group_id = group_id_for(ids)
        for index in group.members:
            group_ids[index] = group_id
        requests.append(SummarizationRequest(group_id, ids, group.target_tokens, group.prompt_id))

    keep, mask, summarize = Action.KEEP, Action.MASK, Action.SUMMARIZE
    replacements = draft.replacements
    actions: list[TurnAction] = []
    append = actions.append
    # The parts are valid by construction (ids of validated turns, priced stubs); the gate
    # inside CompactionPlan checks the plan they form.
    for index, (turn, kind) in enumerate(zip(turns, draft.actions, strict=True)):
        if kind is keep:
            append(trusted_action(turn.turn_id, keep, None, None))
        elif kind is mask:
            replacement = replacements[index]
            assert replacement is not None  # noqa: S101 - every masked turn has one
            if isinstance(replacement, Stub):
                replacement = replacement.resolve(turn)
            append(trusted_action(turn.turn_id, mask, None, replacement))
        elif kind is summarize:
            append(trusted_action(turn.turn_id, summarize, group_ids[index], None))
        else:
            append(trusted_action(turn.turn_id, kind, None, None))
    after = draft.tokens
    # A draft is consumed here: its working data is released before the plan's tuple is made
    # and the gate runs.
    draft.actions.clear()
    draft.replacements.clear()
    frozen = tuple(actions)
    actions.clear()
    return CompactionPlan(
        frozen,
        tuple(requests),
        transcript.token_estimate(),
        after,
        policy_name,
        policy_version,
        draft.estimator_ratio,
        after > budget.max_tokens,
        transcript=transcript,
        budget=budget,
        estimator_name=draft.estimator_name,
    )


class BuiltinPolicy(ABC):
    """Base of cutctx's own policies: decide into a draft, then build the one plan.

    The chain calls ``_draft`` directly on projections, so composing built-in policies builds no
    intermediate plan.
    """

    __slots__ = ()

    _NAME: ClassVar[str]
    _VERSION: ClassVar[str]

    @property
    def name(self) -> str:
        """The policy's stable name, recorded on every plan."""
        return self._NAME

    @property
    def version(self) -> str:
        """The version of the policy's behaviour: a change of behaviour bumps it."""
        return self._VERSION

    @abstractmethod
    def _draft(self, transcript: Transcript, budget: CompactionBudget, shape: Layout) -> Draft:
        """Decide over ``transcript``; ``shape`` is its layout, already known to be satisfiable."""

    def decide(self, transcript: Transcript, budget: CompactionBudget) -> CompactionPlan:
        """Return the plan for ``transcript`` under ``budget``.

        Raises:
            BudgetUnsatisfiable: if the untouchable turns alone are over the budget.
            ValidationError: if ``transcript`` or ``budget`` is not a cutctx value.
        """
        # The layout is released before the plan is built (the gate computes its own).
        draft = self._draft(transcript, budget, checked_layout(transcript, budget))
        return build_plan(transcript, budget, draft, self.name, self.version)


def checked_layout(transcript: Transcript, budget: CompactionBudget) -> Layout:
    """Return the layout of ``transcript`` after checking the arguments and satisfiability."""
    if not isinstance(transcript, Transcript):
        raise ValidationError(
            f"decide() needs a cutctx.Transcript, got {type(transcript).__name__}",
            details={"field": "transcript"},
        )
    if not isinstance(budget, CompactionBudget):
        raise ValidationError(
            f"decide() needs a cutctx.CompactionBudget, got {type(budget).__name__}",
            details={"field": "budget"},
        )
    shape = layout(transcript, budget)
    shape.require_satisfiable(budget)
    return shape
