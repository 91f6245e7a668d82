"""``compact_messages``: provider messages in, compacted provider messages out, in one call.

A convenience over the primary API: it maps the messages onto a transcript with a format of
``cutctx.formats``, plans, fulfils any summarization request through the caller's function,
applies, and maps the view back.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from types import ModuleType
from typing import TYPE_CHECKING, Final, Literal

from baseaicore import ValidationError

from cutctx._core.estimators import CharRatioEstimator
from cutctx._core.executor import CompactionExecutor
from cutctx._core.protocols import CompactionPolicy
from cutctx._core.values import CompactionBudget, Role, Transcript, check_count
from cutctx._policies.bounded import BoundedSummarizingPolicy
from cutctx._policies.chain import PolicyChain
from cutctx._policies.drop import DropOldestPolicy
from cutctx._policies.masking import ObservationMaskingPolicy
from cutctx._policies.priority import PRIORITY_METADATA, PriorityPolicy
from cutctx._policies.summarizing import SummarizingPolicy
from cutctx.formats import anthropic, openai_chat, openai_responses
from cutctx.formats._common import Binding, Pricer, shown

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from typing import Any

    from cutctx._core.plan import CompactionPlan
    from cutctx._core.protocols import TokenEstimator
    from cutctx._core.report import CompactionReport
    from cutctx._core.values import SummarizationRequest, TranscriptTurn
    from cutctx.formats._common import Message

__all__ = [
    "SUMMARY_PROMPT_ID",
    "CompactedMessages",
    "FormatName",
    "compact_messages",
    "default_policy",
    "is_prioritized",
    "pin_first",
    "priority_policy",
]

type FormatName = Literal["openai_chat", "openai_responses", "anthropic"]
"""The names ``format=`` takes; a misspelt one is a type error."""

SUMMARY_PROMPT_ID: Final = "cutctx.summary"
"""The ``prompt_id`` of every request the default chain plans when ``summarize`` is given."""

_FORMATS: Final[dict[str, ModuleType]] = {
    "openai_chat": openai_chat,
    "openai_responses": openai_responses,
    "anthropic": anthropic,
}


@dataclass(frozen=True, slots=True)
class CompactedMessages[M]:
    """The compacted messages, the report of what was done, and the plan it carried out.

    ``M`` is the type of the messages given, so the result assigns back to the caller's list.

    .. versionadded:: 0.1.0
    """

    messages: list[M]
    report: CompactionReport
    plan: CompactionPlan


def compact_messages[M: Message](
    messages: Sequence[M],
    *,
    max_tokens: int,
    format: FormatName | ModuleType,
    system: str | Sequence[Mapping[str, Any]] | None = None,
    policy: CompactionPolicy | None = None,
    summarize: Callable[[SummarizationRequest, Sequence[TranscriptTurn]], str] | None = None,
    estimator: TokenEstimator | None = None,
    protected_recent_turns: int = 4,
    keep_first: int = 0,
    keep_recent_results: int = 2,
    priority: Callable[[int, dict[str, Any]], int] | None = None,
    pin: Callable[[int, dict[str, Any]], bool] | None = None,
) -> CompactedMessages[M]:
    """Compact provider ``messages`` to ``max_tokens`` and return them in the same format.

    ``format`` is ``"openai_chat"``, ``"openai_responses"`` or ``"anthropic"`` (or the module
    of ``cutctx.formats``). Without ``policy`` it masks old tool results (all but the last
    ``keep_recent_results``), then the recent ones too, and only then drops the oldest
    exchanges; with ``summarize`` it summarizes (requests named ``SUMMARY_PROMPT_ID``) before
    it masks the recent results, and calls ``summarize(request, turns)`` once per request,
    between plan and apply. ``keep_first`` pins the first non-system messages (the task), so
    every plan keeps them. ``estimator`` prices everything (``CharRatioEstimator()`` by
    default); a plan that fits means the returned messages fit, counted by the format's
    ``count_tokens`` with the same estimator.

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
       ``keep_first`` and ``keep_recent_results``; the default policy masks the recent results
       too before it drops an exchange; ``sticky`` and ``priority`` keys, the ``priority`` and
       ``pin`` callables, priority mode.
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
    if keep_first:
        transcript = pin_first(transcript, binding, keep_first)
    budget = CompactionBudget(max_tokens, protected_recent_turns)
    if policy is None:
        policy = (
            priority_policy(chosen)
            if is_prioritized(transcript)
            else default_policy(
                chosen, keep_recent_results=keep_recent_results, summarize=summarize is not None
            )
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
    out: list[M] = module.from_transcript(compacted.transcript, binding)
    if summaries and not plan.budget_unmet:
        _check_summaries(plan, summaries, Pricer.of(module.FORMAT, chosen), max_tokens)
    return CompactedMessages(out, compacted.report, plan)


def _module(format: object) -> ModuleType:
    if isinstance(format, str) and format in _FORMATS:
        return _FORMATS[format]
    if isinstance(format, ModuleType) and format in _FORMATS.values():
        return format
    raise ValidationError(
        f"compact_messages: format must be one of {sorted(_FORMATS)}, got {shown(format, 60)}",
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


def default_policy(
    estimator: TokenEstimator,
    *,
    keep_recent_results: int = 2,
    summarize: bool,
    summary_input_tokens: int | None = None,
) -> PolicyChain:
    """Return the default chain: mask old results, [summarize,] mask the rest, drop the oldest.

    ``PolicyChain([ObservationMaskingPolicy(keep_recent_results), ObservationMaskingPolicy(0),
    DropOldestPolicy()])``: every eligible result is masked, the recent-results floor last,
    before any exchange is dropped. With a summarizer, summaries (``SummarizingPolicy``, or
    ``BoundedSummarizingPolicy`` when ``summary_input_tokens`` bounds their input) come
    after the old results are masked and before the floor is. The masking members price stubs
    with the same estimator as the messages: the budget guarantee needs it.
    """
    check_count("compact_messages", "keep_recent_results", keep_recent_results)
    old = ObservationMaskingPolicy(keep_recent_results, estimator=estimator)
    floor = ObservationMaskingPolicy(0, estimator=estimator)
    if not summarize:
        return PolicyChain((old, floor, DropOldestPolicy()))
    summarizing: CompactionPolicy = (
        SummarizingPolicy(SUMMARY_PROMPT_ID)
        if summary_input_tokens is None
        else BoundedSummarizingPolicy(SUMMARY_PROMPT_ID, max_input_tokens=summary_input_tokens)
    )
    return PolicyChain((old, summarizing, floor, DropOldestPolicy()))


def pin_first(transcript: Transcript, binding: Binding[Any], count: int) -> Transcript:
    """Return ``transcript`` with the turns of its first ``count`` non-system messages pinned."""
    check_count("compact_messages", "keep_first", count)
    firsts: set[int] = set()
    for turn in transcript.turns:
        part = binding.parts[turn.turn_id]
        if part.index >= 0 and turn.role is not Role.SYSTEM and part.index not in firsts:
            if len(firsts) == count:
                break
            firsts.add(part.index)
    return Transcript(
        tuple(
            replace(turn, pinned=True)
            if not turn.pinned and binding.parts[turn.turn_id].index in firsts
            else turn
            for turn in transcript.turns
        )
    )


def _check_summaries(
    plan: CompactionPlan,
    summaries: dict[str, str],
    pricer: Pricer,
    max_tokens: int,
) -> None:
    """Raise if the summaries, priced as the messages they become, push a fitting plan over."""
    total = plan.tokens_after_estimate
    over: list[str] = []
    for request in plan.summarization_requests:
        cost = pricer.summary(summaries[request.group_id])
        total += cost - request.target_tokens
        if cost > request.target_tokens:
            over.append(request.group_id)
    if total > max_tokens:
        raise ValidationError(
            f"compact_messages: the summaries exceed their targets, so the messages would need "
            f"{total} tokens, over the budget of {max_tokens}",
            details={"max_tokens": max_tokens, "tokens_needed": total, "group_ids": over},
        )
