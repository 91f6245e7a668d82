"""``compact_messages``: provider messages in, compacted provider messages out, in one call.

A convenience over the primary API: it maps the messages onto a transcript with a format of
``cutctx.formats``, plans, fulfils any summarization request through the caller's function,
applies, and maps the view back.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Awaitable, Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, cast

from baseaicore import ValidationError

from cutctx._core.errors import BudgetUnsatisfiable, SummaryMissing
from cutctx._core.estimators import resolve_estimator
from cutctx._core.executor import CompactionExecutor
from cutctx._core.metadata import PRIORITY_METADATA
from cutctx._core.priced import pricing_once
from cutctx._core.protocols import CompactionPolicy
from cutctx._core.values import (
    DEFAULT_PLACEHOLDER,
    CompactionBudget,
    Transcript,
    check_bool,
    check_count,
)
from cutctx._loop.callables import two_argument
from cutctx._loop.ledger import observe, pin_first
from cutctx._loop.settings import tokens_of
from cutctx._policies.bounded import BoundedSummarizingPolicy
from cutctx._policies.chain import PolicyChain
from cutctx._policies.drop import DropOldestPolicy
from cutctx._policies.excerpting import ExcerptingPolicy
from cutctx._policies.floor import FloorChain, RoomChain
from cutctx._policies.large import LargeResultMaskingPolicy
from cutctx._policies.masking import ObservationMaskingPolicy
from cutctx._policies.priority import PriorityPolicy
from cutctx._policies.stubs import INDEX_PROMPT_ID, StubDroppingPolicy, index_text
from cutctx._policies.summarizing import SummarizingPolicy
from cutctx.formats import Binding, Format, FormatName, resolve

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from types import ModuleType

    from cutctx._core.plan import CompactionPlan
    from cutctx._core.protocols import TokenEstimator
    from cutctx._core.report import CompactionReport
    from cutctx._core.values import SummarizationRequest, TranscriptTurn
    from cutctx._loop.settings import Observation

__all__ = [
    "DEFAULT_COUNT_ERROR",
    "SUMMARY_PROMPT_ID",
    "CompactedMessages",
    "acompact_messages",
    "afulfil",
    "compact_messages",
    "cut_budget",
    "default_messages_policy",
    "fulfil",
    "is_prioritized",
    "pin_first_messages",
    "priority_policy",
]


def cut_budget(transcript: Transcript, room: int, *, default: bool) -> int:
    """Return the budget a one-shot plan of ``transcript`` is held to under ``room`` tokens.

    ``room`` itself when the transcript fits it or the estimator was the caller's; with the
    default estimator a cut aims at ``room / DEFAULT_COUNT_ERROR``: the default estimate is not
    a count, and a plan that says it fits must fit by a real tokenizer too.
    """
    if not default or transcript.token_estimate() <= room:
        return room
    return max(1, math.floor(room / DEFAULT_COUNT_ERROR))


DEFAULT_COUNT_ERROR: Final = 1.1
"""How far the default estimate may under-count a real tokenizer, as a factor: measured at 1.095
at worst over the whole histories of the real trajectories, framing included (docs/performance.md,
"TextEstimator"). ``compact_messages`` with the default estimator cuts to ``max_tokens`` divided
by it, so the result fits by the count of a tokenizer such as cl100k too."""

SUMMARY_PROMPT_ID: Final = "cutctx.summary"
"""The ``prompt_id`` of every request the default policy plans when ``summarize`` is given."""


@dataclass(frozen=True, slots=True)
class CompactedMessages[M]:
    """The compacted messages, the report of what was done, and the plan it carried out.

    ``M`` is the type of the messages given, so the result assigns back to the caller's list.

    .. versionadded:: 0.1.0
    """

    messages: list[M]
    report: CompactionReport
    plan: CompactionPlan


def compact_messages[M](
    messages: Sequence[M],
    *,
    max_tokens: int,
    format: FormatName | Format[Any] | ModuleType,
    system: str | Sequence[Mapping[str, Any]] | None = None,
    policy: CompactionPolicy | None = None,
    summarize: Callable[[SummarizationRequest, Sequence[TranscriptTurn]], str] | None = None,
    estimator: TokenEstimator | str | None = None,
    protected_recent_turns: int = 4,
    keep_first: int = 0,
    keep_recent_results: int = 2,
    priority: Callable[[int, dict[str, Any]], int] | None = None,
    pin: Callable[[int, dict[str, Any]], bool] | None = None,
    max_result_tokens: float | int | None = None,
    observation: Observation | None = None,
) -> CompactedMessages[M]:
    """Compact ``messages`` to ``max_tokens`` and return them in the same format.

    ``format`` is a ``cutctx.formats.Format`` or a built-in one's name (``"openai_chat"``,
    ``"openai_responses"``, ``"anthropic"``). Without ``policy`` it plans with
    ``default_messages_policy``: it masks old tool results (all but the last
    ``keep_recent_results``), then the recent ones too, and only then drops the oldest
    exchanges; with ``summarize`` it summarizes (requests named ``SUMMARY_PROMPT_ID``) before it
    masks the recent results, and calls ``summarize(request, turns)`` once per request, between
    plan and apply. ``keep_first`` pins the first non-system messages (the task), so every plan
    keeps them. ``estimator`` prices everything (``TextEstimator()`` by default; a tiktoken
    encoding's name, ``"cl100k_base"``, counts with that tokenizer); a plan that fits means the
    returned messages fit, counted by the format's ``count_tokens`` with the same estimator. A
    history ``count_tokens`` counts within ``max_tokens`` comes back unchanged (the caller's own
    objects); with the default estimator a cut aims at ``max_tokens / DEFAULT_COUNT_ERROR``
    (1.1), the default's measured under-count of a real tokenizer, so the result fits by cl100k
    too.
    With ``max_result_tokens`` (a fraction of ``max_tokens`` as a float, ``0.25``, or a token
    count as an int, ``2000``: the rule of ``ContextWindow``'s options), every tool result
    priced above it is sent as an excerpt (its first and last lines, within the cap) — in the
    protected tail too — and an untouchable one counts at its excerpt's price; without it, as
    in 0.1, a result over the budget raises ``BudgetUnsatisfiable``.

    A message's ``"sticky": true`` (or a true ``pin(index, message)``) makes it untouchable and
    its ``"priority": n`` (or ``priority(index, message)``) sets its priority; neither key is
    sent on. When any message has a priority, the default policy is
    ``PriorityPolicy(mask_results=True)`` (lowest priority shed first, results masked before
    their exchanges are dropped) and nothing is summarized. ``observation`` (``message -> bool``
    or ``(index, message) -> bool``, told apart by its signature as ``ContextWindow`` tells it)
    marks the user messages that carry tool output: each is a tool result to every policy
    (masked, excerpted), in the exchange of the assistant message before it; unmarked user
    messages are never touched, and neither are pinned ones (``keep_first``, ``pin=``), whatever
    it says.

    >>> done = compact_messages([{"role": "user", "content": "hi"}], max_tokens=10,
    ...                         format="openai_chat")
    >>> done.messages, done.report.budget_unmet
    ([{'role': 'user', 'content': 'hi'}], False)

    Raises:
        ValidationError: for malformed messages (naming the ``index``), an unknown format, a
            ``summarize`` that is async (use ``acompact_messages``) or returns a non-string, or
            summaries so far over their targets that the messages would exceed a budget the
            plan meets.
        BudgetUnsatisfiable: if the untouchable messages alone exceed ``max_tokens``.
        SummaryMissing: if ``policy`` plans a summary and no ``summarize`` was given.

    .. versionadded:: 0.1.0
    .. versionchanged:: 0.1.1
       ``format`` may be a ``Format``; an async ``summarize`` is refused; ``max_result_tokens``
       (a fraction or a token count); ``observation``.
    """
    job = _Job.of(
        messages, max_tokens, format, system, policy, summarize, estimator,
        protected_recent_turns, keep_first, keep_recent_results, priority, pin,
        max_result_tokens, observation,
    )  # fmt: skip
    texts = fulfil(
        job.calls(), job.summarize, owner="compact_messages", instead="acompact_messages(...)"
    )
    return cast("CompactedMessages[M]", job.finish(texts))


async def acompact_messages[M](
    messages: Sequence[M],
    *,
    max_tokens: int,
    format: FormatName | Format[Any] | ModuleType,
    system: str | Sequence[Mapping[str, Any]] | None = None,
    policy: CompactionPolicy | None = None,
    summarize: Callable[[SummarizationRequest, Sequence[TranscriptTurn]], str | Awaitable[str]]
    | None = None,
    estimator: TokenEstimator | str | None = None,
    protected_recent_turns: int = 4,
    keep_first: int = 0,
    keep_recent_results: int = 2,
    priority: Callable[[int, dict[str, Any]], int] | None = None,
    pin: Callable[[int, dict[str, Any]], bool] | None = None,
    max_result_tokens: float | int | None = None,
    observation: Observation | None = None,
) -> CompactedMessages[M]:
    """Compact ``messages`` as ``compact_messages`` does, awaiting an async ``summarize``.

    >>> import asyncio
    >>> async def summarize(request, turns):
    ...     return "the story so far"
    >>> done = asyncio.run(acompact_messages([{"role": "user", "content": "hi"}], max_tokens=10,
    ...                    format="openai_chat", summarize=summarize))
    >>> done.messages
    [{'role': 'user', 'content': 'hi'}]

    Raises:
        ValidationError: as ``compact_messages`` (a sync ``summarize`` is called as it is).
        BudgetUnsatisfiable: as ``compact_messages``.
        SummaryMissing: as ``compact_messages``.

    .. versionadded:: 0.1.1
    """
    job = _Job.of(
        messages, max_tokens, format, system, policy, summarize, estimator,
        protected_recent_turns, keep_first, keep_recent_results, priority, pin,
        max_result_tokens, observation,
    )  # fmt: skip
    texts = await afulfil(job.calls(), job.summarize, owner="compact_messages")
    return cast("CompactedMessages[M]", job.finish(texts))


@dataclass(frozen=True, slots=True)
class _Job:
    """One compaction of messages: planned, waiting for its summaries."""

    fmt: Format[Any]
    transcript: Transcript
    binding: Binding[Any]
    plan: CompactionPlan
    summarize: Callable[..., object] | None
    estimator: TokenEstimator
    max_tokens: int

    @classmethod
    @pricing_once()  # a large result is priced reading it, and again to excerpt it: once
    def of(  # noqa: PLR0917 - compact_messages' arguments, in its order
        cls,
        messages: object,
        max_tokens: int,
        format: object,
        system: object,
        policy: object,
        summarize: object,
        estimator: TokenEstimator | str | None,
        protected_recent_turns: int,
        keep_first: int,
        keep_recent_results: int,
        priority: Callable[[int, dict[str, Any]], int] | None,
        pin: Callable[[int, dict[str, Any]], bool] | None,
        max_result_tokens: float | int | None,
        observation: object,
    ) -> _Job:
        fmt = resolve(format, owner="compact_messages")
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
        chosen = resolve_estimator(estimator, owner="compact_messages")  # None: TextEstimator()
        transcript, binding = fmt.to_transcript(
            messages,  # type: ignore[arg-type]
            estimator=chosen,
            system=system,
            priority=priority,
            pin=pin,
        )
        if observation is not None:
            transcript, binding = observed(
                fmt,
                transcript,
                binding,
                chosen,
                observation,
                check_count("compact_messages", "keep_first", keep_first),
            )
        if keep_first:
            transcript = pin_first_messages(transcript, binding, keep_first)
        # The transcript carries the request's overhead (a reply's priming, Bedrock's reserved
        # filler) as its request_tokens: its estimate is the format's count_tokens.
        room = check_count("compact_messages", "max_tokens", max_tokens)
        cap = (
            None
            if max_result_tokens is None
            else tokens_of("max_result_tokens", max_result_tokens, room, owner="compact_messages")
        )
        planned = cut_budget(transcript, room, default=estimator is None)
        budget = CompactionBudget(
            planned,
            protected_recent_turns,
            max_result_tokens=cap,
        )
        if policy is None:
            policy = (
                priority_policy(chosen)
                if is_prioritized(transcript)
                else default_messages_policy(
                    estimator=chosen,
                    keep_recent_results=keep_recent_results,
                    summarize=summarize is not None,
                    max_result_tokens=cap,
                )
            )
        try:
            plan = policy.decide(transcript, budget)
        except BudgetUnsatisfiable:
            if planned == room:
                raise
            budget = CompactionBudget(room, protected_recent_turns, max_result_tokens=cap)
            plan = policy.decide(transcript, budget)  # the margin does not fit: the budget
        return cls(fmt, transcript, binding, plan, summarize, chosen, max_tokens)

    def calls(self) -> list[tuple[SummarizationRequest, tuple[TranscriptTurn, ...]]]:
        """Return each request with its turns (none without ``summarize``)."""
        if self.summarize is None:
            return []
        by_id = {turn.turn_id: turn for turn in self.transcript.turns}
        return [
            (request, tuple(by_id[turn_id] for turn_id in request.turn_ids))
            for request in self.plan.summarization_requests
        ]

    def finish(self, texts: dict[str, str]) -> CompactedMessages[Any]:
        """Apply the plan with the summaries and render the messages."""
        compacted = CompactionExecutor().apply(self.transcript, self.plan, texts)
        out = self.fmt.from_transcript(compacted.transcript, self.binding)
        if texts and not self.plan.budget_unmet:
            self._check(texts)
        return CompactedMessages(out, compacted.report, self.plan)

    def _check(self, texts: dict[str, str]) -> None:
        """Raise if the summaries, priced as the messages they become, push a fitting plan over.

        The plan's figures hold the request's overhead (a format's reply priming, Bedrock's
        reserved filler), as the format's ``count_tokens`` does.
        """
        total = self.plan.tokens_after_estimate
        over: list[str] = []
        for request in self.plan.summarization_requests:
            cost = self.fmt.price_summary(texts[request.group_id], estimator=self.estimator)
            total += cost - request.target_tokens
            if cost > request.target_tokens:
                over.append(request.group_id)
        if total > self.max_tokens:
            raise ValidationError(
                f"compact_messages: the summaries exceed their targets, so the request would "
                f"need {total} tokens, over the budget of {self.max_tokens}",
                details={"max_tokens": self.max_tokens, "tokens_needed": total, "group_ids": over},
            )


type Calls = Sequence[tuple[SummarizationRequest, Sequence[TranscriptTurn]]]


def fulfil(calls: Calls, summarize: object, *, owner: str, instead: str) -> dict[str, str]:
    """Return each request's summary from a synchronous ``summarize``, by group id.

    A recall index's request (``INDEX_PROMPT_ID``) is answered here, with ``index_text``.

    Raises:
        ValidationError: for an async ``summarize`` (saying to call ``instead``; no coroutine is
            left unawaited) or a text that is not a string.
        SummaryMissing: if a summary is planned and there is no ``summarize``.
    """
    texts: dict[str, str] = {}
    for request, turns in calls:
        if request.prompt_id == INDEX_PROMPT_ID:  # the library writes a recall index itself
            texts[request.group_id] = index_text(turns)
            continue
        text = _asked(summarize, request, turns, owner)
        if isinstance(text, Awaitable):
            if isinstance(text, Coroutine):
                text.close()  # never awaited: close it, so no warning is left behind
            raise ValidationError(
                f"{owner}: summarize is async; call await {instead}",
                details={"field": "summarize"},
            )
        texts[request.group_id] = _text(owner, request, text)
    return texts


async def afulfil(calls: Calls, summarize: object, *, owner: str) -> dict[str, str]:
    """Return each request's summary, awaiting an async ``summarize``; as ``fulfil``."""
    texts: dict[str, str] = {}
    for request, turns in calls:
        if request.prompt_id == INDEX_PROMPT_ID:
            texts[request.group_id] = index_text(turns)
            continue
        text = _asked(summarize, request, turns, owner)
        if isinstance(text, Awaitable):
            text = await text
        texts[request.group_id] = _text(owner, request, text)
    return texts


def _asked(
    summarize: object, request: SummarizationRequest, turns: Sequence[TranscriptTurn], owner: str
) -> object:
    if not callable(summarize):
        raise SummaryMissing(
            f"the policy planned a summary of group {request.group_id!r}, but {owner} has no "
            "summarize",
            details={"group_id": request.group_id, "missing_group_ids": [request.group_id]},
        )
    return summarize(request, tuple(turns))


def _text(owner: str, request: SummarizationRequest, text: object) -> str:
    if not isinstance(text, str):
        raise ValidationError(
            f"{owner}: summarize returned {type(text).__name__} for group "
            f"{request.group_id!r}, not a string",
            details={"field": "summarize", "group_id": request.group_id},
        )
    return text


def is_prioritized(transcript: Transcript) -> bool:
    """Whether any turn of ``transcript`` has a priority (``cutctx.priority``): priority mode."""
    return any(PRIORITY_METADATA in turn.metadata for turn in transcript.turns)


def priority_policy(estimator: TokenEstimator) -> PriorityPolicy:
    """Return the policy of priority mode, in place of the default: it plans no summary.

    Its stubs are priced with the same estimator as the messages: the budget guarantee needs it.
    """
    return PriorityPolicy(mask_results=True, estimator=estimator)


def default_messages_policy(
    *,
    estimator: TokenEstimator | None = None,
    keep_recent_results: int = 2,
    summarize: bool = False,
    summary_input_tokens: int | None = None,
    max_result_tokens: int | None = None,
    placeholder: str = DEFAULT_PLACEHOLDER,
    recall_tool: str | None = None,
    version: int = 1,
    recall_index: bool = False,
) -> PolicyChain:
    """Return the policy ``compact_messages``, ``ContextWindow`` and the CLI plan with.

    ``version=4`` (``ContextWindow``'s): version 2's chain as a ``RoomChain`` (version
    ``1.2.0``), which decides the same; a window planning with it cuts as version 3's does, and
    a window whose fixed turns alone take ``max_tokens - compact_at`` or more is small at every
    step. ``version=3`` (``ContextWindow``'s before version 4): version 2's chain as a
    ``FloorChain`` (version ``1.1.0``), which decides the same; a window planning with it cuts a
    small window (its untouchable turns alone over ``compact_to``) once the request passes
    ``max_tokens``, down to the fixed turns and ``compact_to``'s share of the room beside them
    (docs/agent-loop.md).
    ``version=1`` (``compact_messages``' and the CLI's): ``PolicyChain([ObservationMaskingPolicy(
    keep_recent_results), ObservationMaskingPolicy(0), DropOldestPolicy()])``: the old results
    are masked first (all but the last ``keep_recent_results``), then the recent ones too, before
    any exchange is dropped — which is why ``observation_masking`` appears twice in its name.
    ``version=2`` (``ContextWindow``'s before version 3): stubs pay for their place — the
    exchanges already masked are dropped, oldest first (``StubDroppingPolicy``), before a
    fresher result is masked: first, or with ``summarize`` after the summaries (a summary is not
    given up for a stub); and the large old results are masked before the rest
    (``LargeResultMaskingPolicy``: each result of at least 1/32 of the budget outside its newest
    half, oldest first); the rest as version 1. With ``recall_index`` (the window's when recall
    is on) the stubbed exchanges are folded into recall indexes instead of dropped: summary
    turns the library writes itself (no model call), naming each dropped result's digest for
    ``cutctx_recall``.
    With ``summarize``, summaries (``SummarizingPolicy``, or ``BoundedSummarizingPolicy`` when
    ``summary_input_tokens`` bounds their input; requests named ``SUMMARY_PROMPT_ID``) come
    after the old results are masked and before the floor is. The masking members price stubs
    with ``estimator`` (the one that prices the messages: the budget guarantee needs it),
    labelled ``placeholder``. With ``max_result_tokens`` an ``ExcerptingPolicy`` goes first (it
    excerpts by the budget's ``max_result_tokens``, which ``compact_messages`` sets to the same
    figure; its elision lines name ``recall_tool`` when given). It differs from 0.1's
    ``default_chain`` (masking, summarizing, drop): see ``docs/policies.md``.

    >>> default_messages_policy().name
    'chain(observation_masking@1.0.0+observation_masking@1.0.0+drop_oldest@1.0.0)'
    >>> default_messages_policy(version=2).name
    'chain(stub_dropping@1.0.0+large_result_masking@1.0.0+observation_masking@1.0.0+observation_masking@1.0.0+drop_oldest@1.0.0)'

    Raises:
        ValidationError: for a ``version`` other than 1, 2, 3 or 4, or a negative count.

    .. versionadded:: 0.1.1
    """
    owner = "default_messages_policy"
    check_bool(owner, "recall_index", recall_index)
    check_count(owner, "keep_recent_results", keep_recent_results)
    if version not in (1, 2, 3, 4) or isinstance(version, bool):
        raise ValidationError(
            f"{owner}.version must be 1, 2, 3 or 4, got {version!r:.40}",
            details={"field": "version"},
        )
    old = ObservationMaskingPolicy(keep_recent_results, placeholder, estimator=estimator)
    floor = ObservationMaskingPolicy(0, placeholder, estimator=estimator)
    members: list[CompactionPolicy] = [old]
    if max_result_tokens is not None:
        check_count(owner, "max_result_tokens", max_result_tokens)
        members.insert(0, ExcerptingPolicy(estimator=estimator, recall_tool=recall_tool))
    if summarize:
        members.append(
            SummarizingPolicy(SUMMARY_PROMPT_ID)
            if summary_input_tokens is None
            else BoundedSummarizingPolicy(SUMMARY_PROMPT_ID, max_input_tokens=summary_input_tokens)
        )
    if version >= 2:  # stubs go before fresher results do: first, or after the summaries
        position = members.index(old)
        members.insert(
            position,
            LargeResultMaskingPolicy(keep_recent_results, placeholder, estimator=estimator),
        )
        members.insert(
            len(members) if summarize else position,
            StubDroppingPolicy(index=recall_index, estimator=estimator),
        )
    if version == 4:  # the same decisions; a large fixed share makes a window small
        return RoomChain((*members, floor, DropOldestPolicy()))
    if version == 3:  # the same decisions; a window cuts a small window by dropping alone
        return FloorChain((*members, floor, DropOldestPolicy()))
    return PolicyChain((*members, floor, DropOldestPolicy()))


def observed(  # noqa: PLR0917 - the job's pieces, as named there
    fmt: Format[Any],
    transcript: Transcript,
    binding: Binding[Any],
    estimator: TokenEstimator,
    observation: object,
    keep_first: int,
) -> tuple[Transcript, Binding[Any]]:
    """Return ``transcript`` and ``binding`` with the observations read as tool results.

    The first ``keep_first`` non-system messages are pinned next, so they are never read as
    observations (``observe``: a pin wins over the predicate).

    Raises:
        ValidationError: for an ``observation`` that is not callable or returns no bool.
    """
    if not callable(observation):
        raise ValidationError(
            "compact_messages: observation must be callable(index, message) -> bool",
            details={"field": "observation"},
        )
    turns, parts = observe(
        fmt,
        transcript.turns,
        binding.parts,
        binding.messages,
        two_argument(observation, owner="compact_messages"),
        estimator,
        keep_first=keep_first,
    )
    return (
        Transcript(tuple(turns), request_tokens=transcript.request_tokens),
        dataclasses.replace(binding, parts=parts),
    )


def pin_first_messages(transcript: Transcript, binding: Binding[Any], count: int) -> Transcript:
    """Return ``transcript`` with the turns of its first ``count`` non-system messages pinned."""
    check_count("compact_messages", "keep_first", count)
    turns, _ = pin_first(transcript.turns, binding.parts, count)
    return Transcript(tuple(turns), request_tokens=transcript.request_tokens)
