"""``compact_messages``: provider messages in, compacted provider messages out, in one call.

A convenience over the primary API: it maps the messages onto a transcript with a format of
``cutctx.formats``, plans, fulfils any summarization request through the caller's function,
applies, and maps the view back.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any, Final

from baseaicore import ValidationError

from cutctx._core.estimators import CharRatioEstimator
from cutctx._core.executor import CompactionExecutor
from cutctx._core.protocols import CompactionPolicy
from cutctx._core.values import CompactionBudget
from cutctx._policies.chain import PolicyChain
from cutctx._policies.drop import DropOldestPolicy
from cutctx._policies.masking import ObservationMaskingPolicy
from cutctx._policies.priority import PRIORITY_METADATA, PriorityPolicy
from cutctx._policies.summarizing import SummarizingPolicy
from cutctx.formats import anthropic, openai_chat, openai_responses
from cutctx.formats._common import Pricer

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from cutctx._core.plan import CompactionPlan
    from cutctx._core.protocols import TokenEstimator
    from cutctx._core.report import CompactionReport
    from cutctx._core.values import SummarizationRequest, Transcript, TranscriptTurn

__all__ = [
    "SUMMARY_PROMPT_ID",
    "CompactedMessages",
    "compact_messages",
    "is_prioritized",
    "priority_policy",
]

SUMMARY_PROMPT_ID: Final = "cutctx.summary"
"""The ``prompt_id`` of every request the default chain plans when ``summarize`` is given."""

_FORMATS: Final[dict[str, ModuleType]] = {
    "openai_chat": openai_chat,
    "openai_responses": openai_responses,
    "anthropic": anthropic,
}


@dataclass(frozen=True, slots=True)
class CompactedMessages:
    """The compacted messages, the report of what was done, and the plan it carried out.

    .. versionadded:: 0.1.0
    """

    messages: list[dict[str, Any]]
    report: CompactionReport
    plan: CompactionPlan


def compact_messages(
    messages: list[dict[str, Any]],
    *,
    max_tokens: int,
    format: str | ModuleType,
    system: str | list[dict[str, Any]] | None = None,
    policy: CompactionPolicy | None = None,
    summarize: Callable[[SummarizationRequest, Sequence[TranscriptTurn]], str] | None = None,
    estimator: TokenEstimator | None = None,
    protected_recent_turns: int = 4,
    priority: Callable[[int, dict[str, Any]], int] | None = None,
    pin: Callable[[int, dict[str, Any]], bool] | None = None,
) -> CompactedMessages:
    """Compact provider ``messages`` to ``max_tokens`` and return them in the same format.

    ``format`` is ``"openai_chat"``, ``"openai_responses"`` or ``"anthropic"`` (or the module
    of ``cutctx.formats``). Without ``policy`` it masks old tool results and then drops the
    oldest exchanges; with ``summarize`` it runs the full default chain (requests named
    ``SUMMARY_PROMPT_ID``) and calls ``summarize(request, turns)`` once per request, between
    plan and apply. ``estimator`` prices everything (``CharRatioEstimator()`` by default); a
    plan that fits means the returned messages fit, counted by the format's ``count_tokens``
    with the same estimator.

    A message's ``"sticky": true`` (or a true ``pin(index, message)``) makes it untouchable and
    its ``"priority": n`` (or ``priority(index, message)``) sets its priority; neither key is
    sent on. When any message has a priority, the default policy is
    ``PriorityPolicy(mask_results=True)`` (lowest priority shed first, results masked before
    their exchanges are dropped) and nothing is summarized.

    >>> done = compact_messages([{"role": "user", "content": "hi"}], max_tokens=10,
    ...                         format="openai_chat")
    >>> done.messages, done.report.budget_unmet
    ([{'role': 'user', 'content': 'hi'}], False)

    Raises:
        ValidationError: for malformed messages (naming the ``index``), an unknown format, a
            ``summarize`` that returns a non-string, or summaries so far over their targets
            that the messages would exceed a budget the plan meets.
        BudgetUnsatisfiable: if the untouchable messages alone exceed ``max_tokens``.
        SummaryMissing: if ``policy`` plans a summary and no ``summarize`` was given.

    .. versionchanged:: 0.1.0
       ``sticky`` and ``priority`` keys, the ``priority`` and ``pin`` callables, priority mode.
    """
    module = _module(format)
    if summarize is not None and not callable(summarize):
        raise ValidationError(
            "compact_messages: summarize must be callable(request, turns) -> str",
            details={"field": "summarize"},
        )
    if policy is not None and not isinstance(policy, CompactionPolicy):
        raise ValidationError(
            f"compact_messages: policy must be a CompactionPolicy, got {type(policy).__name__}",
            details={"field": "policy"},
        )
    chosen: TokenEstimator = CharRatioEstimator() if estimator is None else estimator
    transcript, binding = module.to_transcript(
        messages, estimator=chosen, system=system, priority=priority, pin=pin
    )
    budget = CompactionBudget(max_tokens, protected_recent_turns)
    if policy is None:
        policy = (
            priority_policy(chosen)
            if is_prioritized(transcript)
            else _default_policy(chosen, summarize=summarize is not None)
        )
    plan = policy.decide(transcript, budget)
    summaries: dict[str, str] = {}
    if summarize is not None and plan.summarization_requests:
        by_id = {turn.turn_id: turn for turn in transcript.turns}
        for request in plan.summarization_requests:
            text = summarize(request, tuple(by_id[turn_id] for turn_id in request.turn_ids))
            if not isinstance(text, str):
                raise ValidationError(
                    f"compact_messages: summarize returned {type(text).__name__} for group "
                    f"{request.group_id!r}, not a string",
                    details={"field": "summarize", "group_id": request.group_id},
                )
            summaries[request.group_id] = text
    compacted = CompactionExecutor().apply(transcript, plan, summaries)
    out: list[dict[str, Any]] = module.from_transcript(compacted.transcript, binding)
    if summaries and not plan.budget_unmet:
        _check_summaries(module, plan, summaries, Pricer.of(module.FORMAT, chosen), max_tokens)
    return CompactedMessages(out, compacted.report, plan)


def _module(format: object) -> ModuleType:
    if isinstance(format, str) and format in _FORMATS:
        return _FORMATS[format]
    if isinstance(format, ModuleType) and format in _FORMATS.values():
        return format
    raise ValidationError(
        f"compact_messages: format must be one of {sorted(_FORMATS)}, got {format!r:.60}",
        details={"field": "format", "expected": sorted(_FORMATS)},
    )


def is_prioritized(transcript: Transcript) -> bool:
    """Whether any turn of ``transcript`` has a priority (``cutctx.priority``): priority mode."""
    return any(PRIORITY_METADATA in turn.metadata for turn in transcript.turns)


def priority_policy(estimator: TokenEstimator) -> PriorityPolicy:
    """Return the policy of priority mode, in place of the default: it plans no summary.

    Its stubs are priced with the same estimator as the messages: the budget guarantee needs it.
    """
    return PriorityPolicy(mask_results=True, estimator=estimator)


def _default_policy(estimator: TokenEstimator, *, summarize: bool) -> PolicyChain:
    """Return masking then drop-oldest, or with a summarizer the full default chain.

    The masking member prices stubs with the same estimator as the messages: the budget
    guarantee needs it.
    """
    masking = ObservationMaskingPolicy(estimator=estimator)
    if summarize:
        return PolicyChain((masking, SummarizingPolicy(SUMMARY_PROMPT_ID), DropOldestPolicy()))
    return PolicyChain((masking, DropOldestPolicy()))


def _check_summaries(
    module: ModuleType,
    plan: CompactionPlan,
    summaries: dict[str, str],
    pricer: Pricer,
    max_tokens: int,
) -> None:
    """Raise if the summaries, priced as the messages they become, push a fitting plan over."""
    total = plan.tokens_after_estimate
    over: list[str] = []
    for request in plan.summarization_requests:
        text = summaries[request.group_id]
        if module is anthropic:
            text = text.rstrip()  # as emitted
        cost = pricer.framing + pricer.text(text)
        total += cost - request.target_tokens
        if cost > request.target_tokens:
            over.append(request.group_id)
    if total > max_tokens:
        raise ValidationError(
            f"compact_messages: the summaries exceed their targets, so the messages would need "
            f"{total} tokens, over the budget of {max_tokens}",
            details={"max_tokens": max_tokens, "tokens_needed": total, "group_ids": over},
        )
