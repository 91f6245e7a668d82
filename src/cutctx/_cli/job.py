"""The main job on one conversation: price it, plan it, and (for ``compact``) apply the plan.

The command line works on the library's public path: a format maps the messages onto a
transcript, a policy decides, the executor applies, and the format maps the view back.
``--keep-first N`` pins the first N non-system messages in the transcript before planning, so
every policy keeps them.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from baseaicore import ValidationError

from cutctx._audit.records import CompactionRecord
from cutctx._cli.inputs import CliError
from cutctx._core.digest import value_digest
from cutctx._core.errors import BudgetUnsatisfiable
from cutctx._core.estimators import CharRatioEstimator, resolve_estimator
from cutctx._core.executor import CompactionExecutor
from cutctx._core.invariants import layout
from cutctx._core.priced import pricing_once
from cutctx._core.values import CompactionBudget, Transcript
from cutctx._loop.compact import (
    cut_budget,
    default_messages_policy,
    is_prioritized,
    pin_first_messages,
    priority_policy,
)
from cutctx._policies.chain import PolicyChain
from cutctx._policies.drop import DropOldestPolicy
from cutctx._policies.excerpting import ExcerptingPolicy
from cutctx._policies.masking import ObservationMaskingPolicy

if TYPE_CHECKING:
    from cutctx._cli.inputs import Conversation
    from cutctx._core.plan import CompactionPlan
    from cutctx._core.protocols import CompactionPolicy, TokenEstimator
    from cutctx._core.report import CompactionReport
    from cutctx.formats._common import Binding

__all__ = [
    "POLICIES",
    "Job",
    "Settings",
    "build_policy",
    "load_tokenizer",
    "rebuilt_policy",
    "system_digest",
]

POLICIES: Final = ("default", "mask", "drop", "priority")
"""The policies ``--policy`` names: ``default`` is what ``compact_messages`` uses without
``summarize`` (masking, then drop-oldest; shedding by priority when a message has one);
``mask`` masks old tool results only; ``drop`` drops the oldest exchanges only; ``priority``
sheds by the messages' priorities (``PriorityPolicy(mask_results=True)``)."""


@dataclass(frozen=True, slots=True)
class Settings:
    """The options every command shares."""

    max_tokens: int = 0
    protected_recent_turns: int = 4
    keep_first: int = 1
    policy: str = "default"
    tokenizer: str = "text"
    max_result_tokens: int | None = None


def load_tokenizer(name: str) -> TokenEstimator:
    """Return the estimator ``--tokenizer name`` asks for.

    ``text`` is ``TextEstimator`` (the default), ``chars`` ``CharRatioEstimator``; any other
    name is a tiktoken encoding, loaded as ``estimator=name`` loads it everywhere else
    (``cutctx._core.estimators.load_encoding``).

    Raises:
        CliError: when tiktoken (the ``cutctx[tiktoken]`` extra) is missing or cannot load
            ``name``.
    """
    if name == "chars":
        return CharRatioEstimator()
    try:
        return resolve_estimator(None if name == "text" else name, owner="--tokenizer")
    except ValidationError as error:
        raise CliError(str(error)) from None


def build_policy(
    name: str,
    estimator: TokenEstimator,
    transcript: Transcript | None = None,
    *,
    max_result_tokens: int | None = None,
) -> CompactionPolicy:
    """Return the policy ``--policy name`` asks for, pricing stubs with ``estimator``.

    ``default`` is what ``compact_messages`` plans with: for a ``transcript`` that has
    priorities, priority mode; otherwise its default chain, with ``max_result_tokens`` led by
    an ``ExcerptingPolicy``. Any other choice with ``max_result_tokens`` is led by one too.
    """
    if name == "default" and not (transcript is not None and is_prioritized(transcript)):
        return default_messages_policy(estimator=estimator, max_result_tokens=max_result_tokens)
    chosen: CompactionPolicy
    if name == "mask":
        chosen = ObservationMaskingPolicy(estimator=estimator)
    elif name == "drop":
        chosen = DropOldestPolicy()
    else:
        chosen = priority_policy(estimator)
    if max_result_tokens is None or name == "default":  # priority mode, as compact_messages
        return chosen
    return PolicyChain((ExcerptingPolicy(estimator=estimator), chosen))


def rebuilt_policy(record: CompactionRecord, estimator: TokenEstimator) -> CompactionPolicy | None:
    """Return the policy to verify ``record`` with, or ``None`` to rebuild it from the record.

    A policy priced by the character default is rebuilt from the record's configuration; one
    priced by a tokenizer (a function, not data) is made again here, as ``--policy`` made it.
    """
    if isinstance(estimator, CharRatioEstimator):
        return None
    for choice in POLICIES:
        policy = build_policy(choice, estimator, max_result_tokens=record.budget.max_result_tokens)
        if (policy.name, policy.version) == (record.policy_name, record.policy_version):
            return policy
    return None


def system_digest(system: object) -> str | None:
    """Return the digest of request-level system text (``None`` when there is none).

    It is ``baseaicore.sha256_of(system)``, and a lone surrogate in it does not make it raise.
    """
    return None if system is None else value_digest(system)


@dataclass(frozen=True, slots=True)
class Job:
    """A conversation priced and planned: its transcript, binding, budget, policy and plan."""

    conversation: Conversation
    settings: Settings
    estimator: TokenEstimator
    transcript: Transcript
    binding: Binding[Any]
    budget: CompactionBudget
    policy: CompactionPolicy
    plan: CompactionPlan | None

    @classmethod
    @pricing_once()  # a large result is priced reading it, and again to excerpt it: once
    def prepare(cls, conversation: Conversation, settings: Settings, *, plan: bool = True) -> Job:
        """Price the conversation and (with ``plan``) plan it.

        Raises:
            ValidationError: for malformed messages or a bad budget.
            BudgetUnsatisfiable: when the untouchable turns alone exceed the budget.
        """
        estimator = load_tokenizer(settings.tokenizer)
        fmt = conversation.format
        transcript, binding = fmt.to_transcript(
            conversation.messages, estimator=estimator, system=conversation.system
        )
        # As compact_messages: the transcript keeps the request's overhead as its
        # request_tokens, so its estimate is the format's count_tokens and the plan is held
        # to max_tokens.
        transcript = pin_first_messages(transcript, binding, settings.keep_first)
        budget = CompactionBudget(
            cut_budget(transcript, settings.max_tokens, default=settings.tokenizer == "text"),
            settings.protected_recent_turns,
            max_result_tokens=settings.max_result_tokens,
        )
        policy = build_policy(
            settings.policy,
            estimator,
            transcript,
            max_result_tokens=settings.max_result_tokens,
        )
        made = cls(conversation, settings, estimator, transcript, binding, budget, policy, None)
        return made.planned() if plan else made

    def planned(self) -> Job:
        """Return this job with its plan (the conversation is priced already).

        Raises:
            BudgetUnsatisfiable: when the untouchable turns alone exceed the budget.
        """
        try:
            return dataclasses.replace(self, plan=self.policy.decide(self.transcript, self.budget))
        except BudgetUnsatisfiable:
            full = self.settings.max_tokens
            if self.budget.max_tokens == full:
                raise
            budget = dataclasses.replace(self.budget, max_tokens=full)  # the margin does not fit
            plan = self.policy.decide(self.transcript, budget)
            return dataclasses.replace(self, budget=budget, plan=plan)

    def excerpt_hint(self) -> str | None:
        """Return the ``--max-result-tokens N`` that would make an unsatisfiable budget fit.

        ``None`` unless no cap was given and capping the untouchable tool results at a quarter
        of the budget (``N``) would bring the untouchable turns within it: when a result larger
        than the budget is what made it unsatisfiable.
        """
        if self.settings.max_result_tokens is not None:
            return None
        cap = max(1, self.budget.max_tokens // 4)
        capped = dataclasses.replace(self.budget, max_result_tokens=cap)
        try:
            layout(self.transcript, self.budget).require_satisfiable(capped)
        except BudgetUnsatisfiable:
            return None
        return f"--max-result-tokens {cap}"

    @property
    def decided(self) -> CompactionPlan:
        """The plan (``prepare`` was called with ``plan=True``)."""
        assert self.plan is not None  # noqa: S101 - every caller that reads it planned
        return self.plan

    def record(self) -> CompactionRecord:
        """Return the audit record of the plan, with what is needed to rebuild the transcript."""
        return CompactionRecord.of(
            self.decided,
            self.transcript,
            self.budget,
            self.policy,
            format=self.conversation.format.name,
            tokenizer=self.settings.tokenizer,
            keep_first=self.settings.keep_first,
            system_digest=system_digest(self.conversation.system),
        )

    def apply(self) -> tuple[list[dict[str, Any]], CompactionReport]:
        """Apply the plan and return the compacted messages and the report."""
        compacted = CompactionExecutor().apply(self.transcript, self.decided)
        messages: list[dict[str, Any]] = self.conversation.format.from_transcript(
            compacted.transcript, self.binding
        )
        return messages, compacted.report
