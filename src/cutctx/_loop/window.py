"""``ContextWindow``: the object an agent loop keeps for one conversation.

The window holds the application's history as it has seen it (each message's turns priced
once), its decisions per turn (kept, masked to a stub, dropped, folded into a summary), the
view of the request those decisions give, and the request itself. A step that stays under
``compact_at`` only prices the new messages and appends them; a step that would pass it plans
once over the *current request* (earlier decisions applied), so new decisions only add to old
ones, and the result is recorded as one plan over the whole history, through the gate. See
``docs/agent-loop.md`` for the recipe and the reasoning.
"""

from __future__ import annotations

import operator
from collections.abc import Awaitable, Coroutine, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal, cast

from baseaicore import ValidationError, sha256_of

from cutctx._core.errors import BudgetUnsatisfiable, SummaryMissing
from cutctx._core.estimators import CharRatioEstimator
from cutctx._core.executor import CompactionExecutor, masked_turn, summary_turn
from cutctx._core.invariants import layout
from cutctx._core.plan import CompactionPlan
from cutctx._core.protocols import CompactionPolicy
from cutctx._core.values import (
    SUMMARY_TURN_ID_PREFIX,
    Action,
    CompactionBudget,
    Role,
    SummarizationRequest,
    Transcript,
    TranscriptTurn,
    TurnReplacement,
    check_count,
    group_id_for,
    trusted_action,
)
from cutctx._loop.compact import (
    CompactedMessages,
    default_policy,
    is_prioritized,
    priority_policy,
)
from cutctx._policies.chain import PolicyChain
from cutctx._policies.draft import estimator_marks
from cutctx._policies.drop import DropOldestPolicy
from cutctx._policies.masking import ObservationMaskingPolicy
from cutctx.formats import anthropic, openai_chat, openai_responses
from cutctx.formats._common import Binding, Part, Pricer

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from types import ModuleType

    from cutctx._core.protocols import TokenEstimator
    from cutctx._core.report import CompactionReport

__all__ = ["ContextWindow", "WindowStats", "window_policy"]

FormatName = Literal["openai_chat", "openai_responses", "anthropic"]

_FORMATS: Final[dict[str, ModuleType]] = {
    "openai_chat": openai_chat,
    "openai_responses": openai_responses,
    "anthropic": anthropic,
}
_STATE_VERSION: Final = 1
_EPHEMERAL: Final = {"type": "ephemeral"}
_MAX_BREAKPOINTS: Final = 4
_THINKING: Final = frozenset({"thinking", "redacted_thinking"})
_OPENER: Final = {"role": "user", "content": "-"}
"""Put before a new Anthropic chunk that opens with an assistant message, to price it alone."""


@dataclass(frozen=True, slots=True)
class WindowStats:
    """What a ``ContextWindow`` has done, and what its last request shares with the one before.

    ``first_changed_index`` is the first message of the last request that differs from the
    request before it (its length when none does); ``stable_prefix_tokens`` the estimated tokens
    of the messages before it — the part a provider's prompt cache can serve.

    .. versionadded:: 0.1.0
    """

    requests: int = 0
    compactions: int = 0
    resets: int = 0
    first_changed_index: int = 0
    stable_prefix_tokens: int = 0


@dataclass(frozen=True, slots=True)
class _Group:
    """A fulfilled summary: its history turn indices, target, text and rendered price."""

    members: tuple[int, ...]
    target_tokens: int
    prompt_id: str
    text: str
    cost: int


@dataclass(frozen=True, slots=True)
class _Pending:
    """A compaction planned over the current request, waiting for its summaries."""

    stages: tuple[tuple[Transcript, CompactionPlan], ...]
    calls: tuple[tuple[SummarizationRequest, tuple[TranscriptTurn, ...]], ...]


class ContextWindow:
    """The request to send now, for every step of one agent conversation.

    ``prepare(history)`` takes the application's full history (messages of ``format``, grown
    at its end, never edited in place) and returns the messages to send. While the request —
    earlier decisions applied, new messages appended — stays at or under ``compact_at``,
    nothing is re-planned; when it would pass it, one compaction brings it to ``compact_to``
    (or as close as the untouchable turns allow). Fractions are of ``max_tokens``, ints are
    tokens. Decisions are sticky: masked stays masked with the same bytes, a summary is reused,
    dropped stays dropped. ``keep_first`` pins the first non-system messages (the task).
    Messages carrying context-clipper's ``"priority"`` (or ``priority=``, a function of
    ``(index, message)``) are shed by priority unless ``policy`` is given; ``"sticky": true``
    (or ``pin=``) pins a message; neither key is sent.

    >>> window = ContextWindow("openai_chat", max_tokens=1000)
    >>> window.prepare([{"role": "user", "content": "hi"}])
    [{'role': 'user', 'content': 'hi'}]
    >>> window.stats.requests, window.stats.compactions
    (1, 0)

    Raises:
        ValidationError: for an unknown format or a bad setting, naming it.

    .. versionadded:: 0.1.0
    """

    def __init__(
        self,
        format: FormatName,
        *,
        max_tokens: int,
        compact_at: float | int = 0.8,
        compact_to: float | int = 0.5,
        keep_first: int = 0,
        protected_recent_turns: int = 4,
        keep_recent_results: int = 2,
        system: str | list[dict[str, Any]] | None = None,
        estimator: TokenEstimator | None = None,
        summarize: Callable[[SummarizationRequest, Sequence[TranscriptTurn]], str | Awaitable[str]]
        | None = None,
        policy: CompactionPolicy | None = None,
        summary_input_tokens: float | int | None = None,
        cache_breakpoints: bool = False,
        priority: Callable[[int, dict[str, Any]], int] | None = None,
        pin: Callable[[int, dict[str, Any]], bool] | None = None,
    ) -> None:
        owner = "ContextWindow"
        if not isinstance(format, str) or format not in _FORMATS:
            raise ValidationError(
                f"{owner}: format must be one of {sorted(_FORMATS)}, got {format!r:.60}",
                details={"field": "format", "expected": sorted(_FORMATS)},
            )
        self._format: str = format
        self._module = _FORMATS[format]
        self._max_tokens = check_count(owner, "max_tokens", max_tokens)
        if self._max_tokens < 1:
            raise ValidationError(
                f"{owner}.max_tokens must be at least 1", details={"field": "max_tokens"}
            )
        self._settings: dict[str, Any] = {
            "compact_at": compact_at,
            "compact_to": compact_to,
            "summary_input_tokens": summary_input_tokens,
        }
        self._at = _tokens_of(owner, "compact_at", compact_at, self._max_tokens)
        self._to = _tokens_of(owner, "compact_to", compact_to, self._max_tokens)
        if self._to > self._at:
            raise ValidationError(
                f"{owner}: compact_to ({self._to} tokens) is over compact_at ({self._at} tokens)",
                details={"field": "compact_to", "compact_to": self._to, "compact_at": self._at},
            )
        self._summary_input = (
            self._to
            if summary_input_tokens is None
            else _tokens_of(owner, "summary_input_tokens", summary_input_tokens, self._max_tokens)
        )
        self._keep_first = check_count(owner, "keep_first", keep_first)
        self._protected = check_count(owner, "protected_recent_turns", protected_recent_turns)
        self._keep_recent = check_count(owner, "keep_recent_results", keep_recent_results)
        if not isinstance(cache_breakpoints, bool):
            raise ValidationError(
                f"{owner}.cache_breakpoints must be a bool", details={"field": "cache_breakpoints"}
            )
        self._cache_breakpoints = cache_breakpoints
        if summarize is not None and not callable(summarize):
            raise ValidationError(
                f"{owner}: summarize must be callable(request, turns) -> str",
                details={"field": "summarize"},
            )
        self._summarize = summarize
        for name, function in (("priority", priority), ("pin", pin)):
            if function is not None and not callable(function):
                raise ValidationError(
                    f"{owner}: {name} must be callable(index, message)", details={"field": name}
                )
        self._priority_of, self._pin_of = priority, pin
        if policy is not None and not isinstance(policy, CompactionPolicy):
            raise ValidationError(
                f"{owner}: policy must be a CompactionPolicy, got {type(policy).__name__}",
                details={"field": "policy"},
            )
        if estimator is not None and not callable(getattr(estimator, "estimate_tokens", None)):
            raise ValidationError(
                f"{owner}: estimator must have estimate_tokens(text) -> int",
                details={"field": "estimator"},
            )
        self._estimator: TokenEstimator = CharRatioEstimator() if estimator is None else estimator
        self._pricer = Pricer.of(format, self._estimator)
        self._system = system
        self._policy: CompactionPolicy = (
            policy
            if policy is not None
            else window_policy(
                self._estimator,
                keep_recent_results=self._keep_recent,
                summarize=summarize is not None,
                summary_input_tokens=self._summary_input,
            )
        )
        self._stages = _stages(self._policy)
        # Without a policy of the caller's, a conversation with priorities sheds by them.
        self._priority_mode: CompactionPolicy | None = (
            priority_policy(self._estimator) if policy is None else None
        )
        self._planned_by = self._policy  # the policy of the latest compaction
        head, _ = self._module.to_transcript([], estimator=self._estimator, system=system)
        self._system_turns: tuple[TranscriptTurn, ...] = head.turns
        self._stats = WindowStats()
        self._last: CompactedMessages[Any] | None = None
        self._last_inputs: (
            tuple[
                list[TranscriptTurn],
                int,
                list[Action],
                dict[int, TurnReplacement],
                dict[str, _Group],
                list[Any],
            ]
            | None
        ) = None
        self._restore: dict[str, Any] | None = None
        self._request: list[Any] = []
        self._costs: list[int] = []
        self._before: list[Any] | None = None  # the request before a reset
        self._clear()

    # -- the conversation's state -------------------------------------------------------------

    def _clear(self) -> None:
        """Forget the conversation (not the stats, nor the last request, kept to compare)."""
        self._seen: list[Any] = []  # the caller's messages, compared by identity
        self._sent: list[dict[str, Any]] = []  # each as read: a dict, context-clipper keys gone
        self._originals: list[Any] = []  # what a kept message is sent as (see Binding)
        self._digests: list[str] = []
        self._turns: list[TranscriptTurn] = list(self._system_turns)
        self._parts: dict[str, Part] = {
            turn.turn_id: Part(turn, -1, None, maskable=False, siblings=1)
            for turn in self._system_turns
        }
        self._index_of: dict[str, int] = {
            turn.turn_id: index for index, turn in enumerate(self._system_turns)
        }
        self._ends: list[int] = []  # each message's end in _turns (exclusive)
        self._message_tokens: list[int] = []
        self._firsts_left = self._keep_first
        self._kinds: list[Action] = [Action.KEEP] * len(self._system_turns)
        self._stubs: dict[int, TurnReplacement] = {}
        self._groups: dict[str, _Group] = {}
        self._view: list[TranscriptTurn] = list(self._system_turns)
        self._tokens = sum(turn.token_estimate for turn in self._system_turns)
        self._held = 0  # messages reflected in _view and _request
        self._last_count = 0  # messages the last compaction planned over

    # -- public API ---------------------------------------------------------------------------

    @property
    def format(self) -> str:
        """The provider format of the messages."""
        return self._format

    @property
    def system(self) -> str | list[dict[str, Any]] | None:
        """The request-level system prompt, exactly as given (send it beside the messages)."""
        return self._system

    @property
    def policy(self) -> CompactionPolicy:
        """The policy every compaction plans with."""
        return self._policy

    @property
    def stats(self) -> WindowStats:
        """Requests, compactions, resets, and what the last request shares with the previous."""
        return self._stats

    @property
    def last(self) -> CompactedMessages[Any] | None:
        """The latest compaction: its request, report and plan over the whole history then."""
        if self._last is None and self._last_inputs is not None:
            turns, count, kinds, stubs, groups, messages = self._last_inputs
            plan, report = self._record(turns[:count], kinds, stubs, groups)
            self._last = CompactedMessages(messages, report, plan)
        return self._last

    def prepare[M](self, history: Sequence[M]) -> list[M]:
        """Return the messages to send now for ``history``; see the class docstring.

        Raises:
            ValidationError: for malformed messages (naming the ``index``), a ``summarize`` that
                is async (use ``aprepare``) or returns a non-string.
            BudgetUnsatisfiable: if the untouchable messages alone exceed ``max_tokens``.
            SummaryMissing: if ``policy`` plans a summary and no ``summarize`` was given.
        """
        pending = self._begin(history)
        if pending is None:
            return cast("list[M]", self._emit())
        summaries: dict[str, str] = {}
        for request, turns in pending.calls:
            text = self._call(request, turns)
            if isinstance(text, Awaitable):
                if isinstance(text, Coroutine):
                    text.close()  # never awaited: close it, so no warning is left behind
                raise ValidationError(
                    "ContextWindow: summarize is async; call await window.aprepare(history)",
                    details={"field": "summarize"},
                )
            summaries[request.group_id] = _text(request, text)
        self._complete(pending, summaries)
        return cast("list[M]", self._emit())

    async def aprepare[M](self, history: Sequence[M]) -> list[M]:
        """Return the messages to send now, awaiting an async ``summarize``; as ``prepare``.

        Raises:
            ValidationError: as ``prepare``, except that an async ``summarize`` is awaited.
            BudgetUnsatisfiable: as ``prepare``.
            SummaryMissing: as ``prepare``.
        """
        pending = self._begin(history)
        if pending is None:
            return cast("list[M]", self._emit())
        summaries: dict[str, str] = {}
        for request, turns in pending.calls:
            text = self._call(request, turns)
            if isinstance(text, Awaitable):
                text = await text
            summaries[request.group_id] = _text(request, text)
        self._complete(pending, summaries)
        return cast("list[M]", self._emit())

    def _call(self, request: SummarizationRequest, turns: tuple[TranscriptTurn, ...]) -> object:
        summarize = self._summarize
        if summarize is None:
            raise SummaryMissing(
                f"the policy planned a summary of group {request.group_id!r}, but the window "
                "has no summarize",
                details={"group_id": request.group_id, "missing_group_ids": [request.group_id]},
            )
        return summarize(request, turns)

    # -- one step -----------------------------------------------------------------------------

    def _begin(self, history: object) -> _Pending | None:
        """Take in ``history``; return the compaction to fulfil, or ``None`` if none is due."""
        if not isinstance(history, list | tuple):
            raise ValidationError(
                f"ContextWindow: history must be a list of messages, got {type(history).__name__}",
                details={"field": "history"},
            )
        if self._restore is not None:
            self._resume(history)
        seen = self._seen
        if len(history) < len(seen) or not all(map(operator.is_, history, seen)):
            self._reset()
        if len(history) > len(self._seen):
            self._scan(history, len(self._seen))
        start = self._ends[self._held - 1] if self._held else len(self._system_turns)
        tokens = self._tokens + sum(turn.token_estimate for turn in self._turns[start:])
        if tokens <= self._at:
            self._append(start, tokens)
            return None
        return self._plan(start)

    def _reset(self) -> None:
        """Start over from the history; the old request stays only to be compared against."""
        if self._before is None:
            self._before = self._request
        self._request, self._costs = [], []
        self._clear()
        self._stats = _with(self._stats, resets=self._stats.resets + 1)

    def _previous(self) -> list[Any]:
        """Return the request the next one is compared against (once, after a reset)."""
        before, self._before = self._before, None
        return self._request if before is None else before

    def _append(self, start: int, tokens: int) -> None:
        """Append the new messages to the request unchanged (no re-planning)."""
        held = self._held
        base = self._request
        previous = self._previous()
        self._view.extend(self._turns[start:])
        self._tokens = tokens
        self._held = len(self._seen)
        if previous is not base or (
            held and (not base or base[-1] is not self._originals[held - 1])
        ):
            # After a reset, or when the request does not end with the history's last message
            # (it was masked or removed, so new ones may need merging, or an opener before
            # them when nothing is left): render the whole view.
            self._settle(previous, *self._rebuild(), compacted=False)
            return
        stable = sum(self._costs)
        self._request = [*base, *self._originals[held:]]
        self._costs = [*self._costs, *self._message_tokens[held:]]
        self._count(len(base), stable, compacted=False)

    def _count(self, first_changed: int, stable: int, *, compacted: bool) -> None:
        stats = self._stats
        self._stats = WindowStats(
            stats.requests + 1,
            stats.compactions + (1 if compacted else 0),
            stats.resets,
            first_changed,
            stable,
        )

    def _emit(self) -> list[Any]:
        """Return a fresh list of the request, with the window's cache breakpoint if asked."""
        request = list(self._request)
        if self._cache_breakpoints and self._format == "anthropic":
            _place_breakpoint(request, self._stats.first_changed_index, self._system)
        return request

    # -- pricing the new messages once --------------------------------------------------------

    def _scan(self, history: Sequence[Any], start: int) -> None:
        """Price messages ``history[start:]`` (their turns, ids and parts) and remember them."""
        module = self._module
        chunk = list(history[start:])
        offset = start
        if self._format == "anthropic":
            opens = _role_of(chunk[0]) == "assistant"
            before = self._sent[start - 1].get("role") if start else None
            if (opens and before != "user" and start) or (
                not opens and start and before != "assistant"
            ):
                self._full_check(history)
            if opens and start:
                chunk.insert(0, _OPENER)
                offset -= 1
        elif self._format == "openai_responses" and start and _reasoning(self._sent[start - 1]):
            # A trailing reasoning item joins the exchange of the item after it: its turn is
            # settled only now, so the window starts over from the whole history.
            self._reset()
            self._scan(history, 0)
            return
        skip = 0 if offset == start else 1  # the opener put before the chunk
        try:
            transcript, binding = module.to_transcript(
                chunk,
                estimator=self._estimator,
                priority=_shifted(self._priority_of, offset, skip, neutral=0),
                pin=_shifted(self._pin_of, offset, skip, neutral=False),
            )
        except ValidationError:
            self._full_check(history)
            raise
        turns, parts, index_of = self._turns, self._parts, self._index_of
        current = -1
        pinned = False
        for turn in transcript.turns:
            part = binding.parts[turn.turn_id]
            if part.index < skip:
                continue
            index = part.index + offset
            if index != current:
                if current >= 0:
                    self._close_message(current)
                current = index
                pinned = self._firsts_left > 0 and _not_system(binding, part.index)
                if pinned:
                    self._firsts_left -= 1
            made = TranscriptTurn(
                _shift(turn.turn_id, offset),
                turn.role,
                turn.content,
                turn.token_estimate,
                None if turn.tool_call_id is None else _shift(turn.tool_call_id, offset),
                pinned=pinned or turn.pinned,  # a sticky message, or a compaction item
                metadata=turn.metadata,  # its priority and tool name
            )
            index_of[made.turn_id] = len(turns)
            turns.append(made)
            self._kinds.append(Action.KEEP)
            parts[made.turn_id] = Part(made, index, part.block, part.maskable, part.siblings)
        if current >= 0:
            self._close_message(current)
        self._seen.extend(history[start:])
        self._sent.extend(binding.messages[skip:])
        self._originals.extend(binding.originals[skip:])

    def _close_message(self, index: int) -> None:
        end = len(self._turns)
        begin = self._ends[-1] if self._ends else len(self._system_turns)
        assert index == len(self._ends)  # noqa: S101 - messages are scanned in order
        self._ends.append(end)
        self._message_tokens.append(sum(turn.token_estimate for turn in self._turns[begin:end]))

    def _full_check(self, history: Sequence[Any]) -> None:
        """Validate the whole history, so an error names the right message."""
        self._module.to_transcript(
            list(history), estimator=self._estimator, priority=self._priority_of, pin=self._pin_of
        )

    # -- compaction ---------------------------------------------------------------------------

    def _plan(self, start: int) -> _Pending:
        """Plan one compaction over the current request (earlier decisions applied)."""
        current = Transcript((*self._view, *self._turns[start:]))
        hard = CompactionBudget(self._max_tokens, self._protected)
        shape = layout(current, hard)
        shape.require_satisfiable(hard)
        budget = CompactionBudget(max(self._to, shape.untouchable_tokens), self._protected)
        self._planned_by = self._policy_for(current)
        stages: list[tuple[Transcript, CompactionPlan]] = []
        chosen = self._stages if self._planned_by is self._policy else (self._planned_by,)
        for policy in chosen:
            if stages:
                previous = stages[-1][1]
                if previous.tokens_after_estimate <= budget.max_tokens:
                    break
                # The next stage plans over the view the masks give: a summarizer then
                # receives the stubs, as the request will hold them.
                current = CompactionExecutor().apply(current, previous).transcript
            made = policy.decide(current, budget)
            if not isinstance(made, CompactionPlan):
                raise ValidationError(
                    f"ContextWindow: the policy returned {type(made).__name__}, "
                    "not a CompactionPlan",
                    details={"field": "policy"},
                )
            stages.append((current, made))
        plan = stages[-1][1]
        if plan.tokens_after_estimate > self._max_tokens:
            kept = sum(1 for action in plan.actions if action.action is not Action.DROP)
            raise BudgetUnsatisfiable(
                f"the untouchable turns and the exchanges they hold need "
                f"{plan.tokens_after_estimate} tokens, over the budget of {self._max_tokens}",
                details={
                    "untouchable_tokens": plan.tokens_after_estimate,
                    "max_tokens": self._max_tokens,
                    "untouchable_turn_count": kept,
                    "policy": plan.policy_name,
                },
            )
        by_id = {turn.turn_id: turn for turn in current.turns}
        calls = []
        for request in plan.summarization_requests:
            turns = tuple(by_id[turn_id] for turn_id in request.turn_ids)
            size = sum(turn.token_estimate for turn in turns)
            if size > self._summary_input:
                raise ValidationError(
                    f"ContextWindow: the policy asks to summarize {size} tokens in group "
                    f"{request.group_id!r}, over summary_input_tokens {self._summary_input}",
                    details={"group_id": request.group_id, "tokens": size},
                )
            calls.append((request, turns))
        return _Pending(tuple(stages), tuple(calls))

    def _complete(self, pending: _Pending, summaries: dict[str, str]) -> None:
        """Fold the plan into the decisions, record it over the history, render the request."""
        kinds = list(self._kinds)
        stubs = dict(self._stubs)
        groups = dict(self._groups)
        folded: dict[str, list[int]] = {}
        index_of = self._index_of
        for current, plan in pending.stages:
            for turn, action in zip(current.turns, plan.actions, strict=True):
                kind = action.action
                if kind is Action.KEEP:
                    continue
                index = index_of.get(turn.turn_id)
                if index is None:  # a summary the request holds
                    if kind is Action.MASK:
                        raise ValidationError(
                            f"ContextWindow: the policy masked the summary {turn.turn_id!r}",
                            details={"turn_id": turn.turn_id},
                        )
                    group = groups.pop(turn.turn_id.removeprefix(SUMMARY_TURN_ID_PREFIX))
                    members: Sequence[int] = group.members
                else:
                    members = (index,)
                for member in members:
                    stubs.pop(member, None)
                    kinds[member] = kind
                    if kind is Action.MASK:
                        assert action.replacement is not None  # noqa: S101 - the gate ensures it
                        stubs[member] = action.replacement
                    elif kind is Action.SUMMARIZE:
                        assert action.summary_group is not None  # noqa: S101 - the gate ensures
                        folded.setdefault(action.summary_group, []).append(member)
        requests = [
            request for _, plan in pending.stages for request in plan.summarization_requests
        ]
        for request in requests:
            members = sorted(folded[request.group_id])
            text = summaries[request.group_id]
            cost = self._pricer.summary(text)  # as rendered
            group_id = group_id_for([self._turns[member].turn_id for member in members])
            groups[group_id] = _Group(
                tuple(members), request.target_tokens, request.prompt_id, text, cost
            )
        count = len(self._turns)
        view = _view_of(self._turns, kinds, stubs, groups)
        if self._format == "anthropic" and self._snap(view, kinds):
            view = _view_of(self._turns, kinds, stubs, groups)
        tokens = sum(turn.token_estimate for turn in view)
        if tokens > self._max_tokens:
            raise ValidationError(
                f"ContextWindow: the summaries exceed their targets, so the request would need "
                f"{tokens} tokens, over max_tokens {self._max_tokens}",
                details={"max_tokens": self._max_tokens, "tokens_needed": tokens},
            )
        self._kinds, self._stubs, self._groups = kinds, stubs, groups
        self._view, self._tokens, self._held = view, tokens, len(self._seen)
        self._last_count = len(self._seen)
        self._settle(self._previous(), *self._rebuild(), compacted=True)
        # The plan over the whole history (and its report) is built when it is first read:
        # a loop that does not log it does not pay for it. Turns below ``count`` and these
        # decisions never change in place, so the snapshot stays true.
        self._last = None
        self._last_inputs = (self._turns, count, kinds, stubs, groups, list(self._request))

    def _snap(self, view: list[TranscriptTurn], kinds: list[Action]) -> bool:
        """Drop a lone user message that a removal left behind another user message.

        Anthropic needs alternating roles, so ``from_transcript`` would merge the two, and the
        earlier one (often the task) would change its bytes and every cached prefix with it.
        Dropping the lone message instead is what drop-oldest does next anyway. Return whether
        any was dropped.
        """
        parts, sent, index_of = self._parts, self._sent, self._index_of
        tail = len(self._turns) - self._protected
        previous: object = None
        last = -2
        changed = False
        for turn in view:
            part = parts.get(turn.turn_id)
            if part is None:
                previous, last = "assistant", -2
                continue
            if part.index < 0 or part.index == last:
                continue
            last = part.index
            role = sent[part.index].get("role")
            index = index_of[turn.turn_id]
            if (
                role == previous == "user"
                and part.siblings == 1
                and turn.tool_call_id is None
                and not turn.pinned
                and index < tail
            ):
                kinds[index] = Action.DROP
                changed = True
                continue
            previous = role
        return changed

    def _record(
        self,
        turns: list[TranscriptTurn],
        kinds: list[Action],
        stubs: dict[int, TurnReplacement],
        groups: dict[str, _Group],
    ) -> tuple[CompactionPlan, CompactionReport]:
        """Return the plan over the history ``turns`` under the decisions, and its report."""
        history = Transcript(tuple(turns))
        group_of: dict[int, str] = {}
        for group_id, group in groups.items():
            for member in group.members:
                group_of[member] = group_id
        # Each part is a value already checked (ids, actions, stubs); the gate checks the whole.
        actions = tuple(
            trusted_action(turn.turn_id, kinds[index], group_of.get(index), stubs.get(index))
            for index, turn in enumerate(turns)
        )
        requests = tuple(
            SummarizationRequest(
                group_id,
                tuple(turns[member].turn_id for member in group.members),
                group.target_tokens,
                group.prompt_id,
            )
            for group_id, group in sorted(groups.items(), key=lambda item: item[1].members[0])
        )
        after = sum(
            turn.token_estimate if kinds[index] is Action.KEEP else stubs[index].token_estimate
            for index, turn in enumerate(turns)
            if kinds[index] is Action.KEEP or kinds[index] is Action.MASK
        ) + sum(group.target_tokens for group in groups.values())
        hard = CompactionBudget(self._max_tokens, self._protected)
        target = max(self._to, layout(history, hard).untouchable_tokens)
        budget = CompactionBudget(target, self._protected)
        ratio, name = estimator_marks(self._estimator) if stubs else (None, None)
        plan = CompactionPlan(
            actions=actions,
            summarization_requests=requests,
            tokens_before=history.token_estimate(),
            tokens_after_estimate=after,
            policy_name=self._planned_by.name,
            policy_version=self._planned_by.version,
            estimator_ratio=ratio,
            budget_unmet=after > budget.max_tokens,
            transcript=history,
            budget=budget,
            estimator_name=name,
        )
        texts = {group_id: group.text for group_id, group in groups.items()}
        report = CompactionExecutor().apply(history, plan, texts).report
        return plan, report

    def _policy_for(self, transcript: Transcript) -> CompactionPolicy:
        """Return the policy a compaction over ``transcript`` plans with.

        That is the priority policy when the window has no policy of the caller's and any
        message has a priority (or ``priority=`` was given); else the window's policy.
        """
        mode = self._priority_mode
        if mode is not None and (self._priority_of is not None or is_prioritized(transcript)):
            return mode
        return self._policy

    def _rebuild(self) -> tuple[list[Any], list[int]]:
        """Render the request from the view; return it and each message's estimate."""
        held = self._held
        binding: Binding[Any] = Binding(
            self._format,
            tuple(self._sent[:held]),
            self._system,
            self._parts,
            self._estimator,
            tuple(self._originals[:held]),
        )
        view = Transcript(tuple(self._view))
        request = self._module.from_transcript(view, binding)
        costs = self._piece_costs(binding)
        if len(costs) != len(request):  # pragma: no cover - the walk mirrors from_transcript
            costs = [0] * len(request)
        return request, costs

    def _settle(
        self, previous: list[Any], request: list[Any], costs: list[int], *, compacted: bool
    ) -> None:
        """Make ``request`` the current one and count it against ``previous``."""
        same = 0
        for old, new in zip(previous, request, strict=False):
            if old is not new and old != new:
                break
            same += 1
        self._request, self._costs = request, costs
        self._count(same, sum(costs[:same]), compacted=compacted)

    def _piece_costs(self, binding: Binding[Any]) -> list[int]:
        """Return the estimate of each message ``from_transcript`` renders from the view."""
        pieces: list[tuple[int, int]] = []
        parts = self._parts
        last = -2
        for turn in self._view:
            part = parts.get(turn.turn_id)
            if part is None:
                pieces.append((-1, turn.token_estimate))
                last = -2
            elif part.index >= 0:
                if part.index == last:
                    pieces[-1] = (last, pieces[-1][1] + turn.token_estimate)
                else:
                    pieces.append((part.index, turn.token_estimate))
                    last = part.index
        if self._format != "anthropic":
            return [cost for _, cost in pieces]
        filler = self._pricer.framing + self._pricer.text(anthropic.FILLER_TEXT)
        out: list[list[Any]] = []
        for index, cost in pieces:
            message = binding.messages[index] if index >= 0 else None
            role = "assistant" if message is None else message.get("role")
            if not out or out[-1][0] == role:
                if role == "assistant" and (not out or _thinks(message)):
                    out.append(["user", filler])
                elif out:
                    out[-1][1] += cost
                    continue
            out.append([role, cost])
        return [cost for _, cost in out]

    # -- state that travels -------------------------------------------------------------------

    def state(self) -> dict[str, Any]:
        """Return the configuration and the decisions as plain JSON data.

        ``ContextWindow.from_state(state, ...)`` continues from it with the same requests.
        """
        held = self._held
        digests = self._digests
        for index in range(len(digests), held):
            digests.append(_digest(self._seen[index], index))
        turns = self._turns
        return {
            "cutctx_window": _STATE_VERSION,
            "format": self._format,
            "max_tokens": self._max_tokens,
            "compact_at": self._settings["compact_at"],
            "compact_to": self._settings["compact_to"],
            "keep_first": self._keep_first,
            "protected_recent_turns": self._protected,
            "keep_recent_results": self._keep_recent,
            "system": self._system,
            "summary_input_tokens": self._settings["summary_input_tokens"],
            "cache_breakpoints": self._cache_breakpoints,
            "summarize": self._summarize is not None,
            "policy": f"{self._policy.name}@{self._policy.version}",
            "estimator": list(estimator_marks(self._estimator)),
            "messages": digests[:held],
            "masked": [
                [turns[index].turn_id, stub.content, stub.token_estimate]
                for index, stub in sorted(self._stubs.items())
            ],
            "dropped": [
                turns[index].turn_id
                for index, kind in enumerate(self._kinds)
                if kind is Action.DROP
            ],
            "groups": [
                {
                    "turn_ids": [turns[member].turn_id for member in group.members],
                    "target_tokens": group.target_tokens,
                    "prompt_id": group.prompt_id,
                    "text": group.text,
                }
                for group in self._groups.values()
            ],
            "last_compaction": (
                self._last_count
                if self._last is not None or self._last_inputs is not None
                else None
            ),
            "stats": {
                "requests": self._stats.requests,
                "compactions": self._stats.compactions,
                "resets": self._stats.resets,
                "first_changed_index": self._stats.first_changed_index,
                "stable_prefix_tokens": self._stats.stable_prefix_tokens,
            },
        }

    @classmethod
    def from_state(
        cls,
        state: dict[str, Any],
        *,
        estimator: TokenEstimator | None = None,
        summarize: Callable[[SummarizationRequest, Sequence[TranscriptTurn]], str | Awaitable[str]]
        | None = None,
        policy: CompactionPolicy | None = None,
    ) -> ContextWindow:
        """Return a window that continues from ``state()``; the callables are given again.

        The next ``prepare(history)`` checks the history against the digests in the state (a
        changed history starts over and counts a reset) and then returns exactly the request
        an uninterrupted window would.

        Raises:
            ValidationError: for a state that is not one ``state()`` returned, or a policy (or
                ``summarize`` presence) other than the one the state was made with.
        """
        if not isinstance(state, dict) or state.get("cutctx_window") != _STATE_VERSION:
            raise ValidationError(
                "ContextWindow.from_state: not a window state (or of another version)",
                details={"field": "state"},
            )
        try:
            window = cls(
                state["format"],
                max_tokens=state["max_tokens"],
                compact_at=state["compact_at"],
                compact_to=state["compact_to"],
                keep_first=state["keep_first"],
                protected_recent_turns=state["protected_recent_turns"],
                keep_recent_results=state["keep_recent_results"],
                system=state["system"],
                estimator=estimator,
                summarize=summarize,
                policy=policy,
                summary_input_tokens=state["summary_input_tokens"],
                cache_breakpoints=state["cache_breakpoints"],
            )
            named = f"{window._policy.name}@{window._policy.version}"
            if named != state["policy"]:
                raise ValidationError(
                    f"ContextWindow.from_state: the state was made with policy "
                    f"{state['policy']!r}, this window has {named!r}",
                    details={"field": "policy"},
                )
            marks = list(estimator_marks(window._estimator))
            if marks != state["estimator"]:
                raise ValidationError(
                    f"ContextWindow.from_state: the state was priced by {state['estimator']!r}, "
                    f"this window's estimator is {marks!r}",
                    details={"field": "estimator"},
                )
            stats = WindowStats(**state["stats"])
            window._stats = stats
            window._restore = {
                "messages": list(state["messages"]),
                "masked": [tuple(item) for item in state["masked"]],
                "dropped": list(state["dropped"]),
                "groups": [dict(group) for group in state["groups"]],
                "last_compaction": state["last_compaction"],
            }
        except (KeyError, TypeError) as error:
            raise ValidationError(
                f"ContextWindow.from_state: malformed state ({type(error).__name__}: {error})",
                details={"field": "state"},
            ) from None
        return window

    def _resume(self, history: Sequence[Any]) -> None:
        """Rebuild the decisions of a restored state over ``history``, or start over."""
        saved = self._restore
        assert saved is not None  # noqa: S101 - only called with a pending state
        self._restore = None
        digests: list[str] = saved["messages"]
        count = len(digests)
        if len(history) < count or any(
            _digest(history[index], index) != digest for index, digest in enumerate(digests)
        ):
            self._stats = _with(self._stats, resets=self._stats.resets + 1)
            return
        if count:
            self._scan(list(history[:count]), 0)
        self._digests = list(digests)
        try:
            self._adopt(saved, count)
        except (KeyError, TypeError, ValueError, IndexError) as error:
            raise ValidationError(
                f"ContextWindow.from_state: the state does not fit the history "
                f"({type(error).__name__}: {error})",
                details={"field": "state"},
            ) from None

    def _adopt(self, saved: dict[str, Any], count: int) -> None:
        """Apply the saved decisions to the first ``count`` messages, as the window had them."""
        index_of = self._index_of
        for turn_id, content, estimate in saved["masked"]:
            index = index_of[turn_id]
            self._kinds[index] = Action.MASK
            self._stubs[index] = TurnReplacement(content, estimate)
        for turn_id in saved["dropped"]:
            self._kinds[index_of[turn_id]] = Action.DROP
        for group in saved["groups"]:
            members = tuple(index_of[turn_id] for turn_id in group["turn_ids"])
            text = group["text"]
            cost = self._pricer.summary(text)  # as rendered
            group_id = group_id_for(list(group["turn_ids"]))
            for member in members:
                self._kinds[member] = Action.SUMMARIZE
            self._groups[group_id] = _Group(
                members, group["target_tokens"], group["prompt_id"], text, cost
            )
        self._view = _view_of(self._turns, self._kinds, self._stubs, self._groups)
        self._tokens = sum(turn.token_estimate for turn in self._view)
        self._held = count
        stats = self._stats
        last = saved["last_compaction"]
        if last is not None:
            end = self._ends[last - 1] if last else len(self._system_turns)
            binding: Binding[Any] = Binding(
                self._format,
                tuple(self._sent[:last]),
                self._system,
                self._parts,
                self._estimator,
                tuple(self._originals[:last]),
            )
            view = _view_of(self._turns[:end], self._kinds, self._stubs, self._groups)
            self._planned_by = self._policy_for(Transcript(tuple(self._turns[:end])))
            messages = self._module.from_transcript(Transcript(tuple(view)), binding)
            self._last_inputs = (self._turns, end, self._kinds, self._stubs, self._groups, messages)
            self._last_count = last
        self._request, self._costs = self._rebuild()
        self._stats = stats


def window_policy(
    estimator: TokenEstimator,
    *,
    keep_recent_results: int,
    summarize: bool,
    summary_input_tokens: int,
) -> CompactionPolicy:
    """Return the policy a ``ContextWindow`` plans with when it is given none.

    Masking the old results, then (with a summarizer) bounded summaries of the oldest
    exchanges, then masking the recent-results floor, then dropping the oldest exchanges.
    """
    return default_policy(
        estimator,
        keep_recent_results=keep_recent_results,
        summarize=summarize,
        summary_input_tokens=summary_input_tokens,
    )


# -- helpers -------------------------------------------------------------------------------------


def _stages(policy: CompactionPolicy) -> tuple[CompactionPolicy, ...]:
    """Split a chain whose leading masking members come before one that may summarize.

    The window runs the masking members first and the rest over the view they give, so a
    summarizer is handed the stubs the request holds, not the originals behind them.
    """
    if not isinstance(policy, PolicyChain):
        return (policy,)
    members = policy.policies
    lead = 0
    while lead < len(members) and isinstance(members[lead], ObservationMaskingPolicy):
        lead += 1
    later = members[lead:]
    if not lead or all(
        isinstance(member, ObservationMaskingPolicy | DropOldestPolicy) for member in later
    ):
        return (policy,)
    first = members[0] if lead == 1 else PolicyChain(members[:lead])
    rest = later[0] if len(later) == 1 else PolicyChain(later)
    return (first, rest)


def _tokens_of(owner: str, name: str, value: object, max_tokens: int) -> int:
    """Return ``value`` in tokens: a float is a fraction of ``max_tokens``, an int is tokens."""
    if isinstance(value, float) and 0 < value <= 1:
        return max(1, int(value * max_tokens))
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= max_tokens:
        return value
    raise ValidationError(
        f"{owner}.{name} must be a fraction in (0, 1] or a token count in [1, max_tokens], "
        f"got {value!r:.40}",
        details={"field": name, "max_tokens": max_tokens},
    )


def _with(stats: WindowStats, *, resets: int) -> WindowStats:
    return WindowStats(
        stats.requests,
        stats.compactions,
        resets,
        stats.first_changed_index,
        stats.stable_prefix_tokens,
    )


def _text(request: SummarizationRequest, text: object) -> str:
    if not isinstance(text, str):
        raise ValidationError(
            f"ContextWindow: summarize returned {type(text).__name__} for group "
            f"{request.group_id!r}, not a string",
            details={"field": "summarize", "group_id": request.group_id},
        )
    return text


def _shift(turn_id: str, offset: int) -> str:
    """Return the id of a chunk's turn (``m<i>`` or ``m<i>.<block>``) at its history position."""
    if not offset:
        return turn_id
    head, dot, block = turn_id[1:].partition(".")
    return f"m{int(head) + offset}{dot}{block}"


def _not_system(binding: Binding[Any], index: int) -> bool:
    """Whether chunk message ``index`` has a turn that is not ``SYSTEM`` (so it counts as first)."""
    return any(
        part.index == index and part.turn.role is not Role.SYSTEM for part in binding.parts.values()
    )


def _shifted[T](
    function: Callable[[int, dict[str, Any]], T] | None, offset: int, skip: int, *, neutral: T
) -> Callable[[int, dict[str, Any]], T] | None:
    """Return ``function`` called with history indices for a chunk starting at ``offset``.

    The first ``skip`` messages of the chunk are the window's own opener: ``neutral`` for them.
    """
    if function is None:
        return None
    return lambda index, message: neutral if index < skip else function(index + offset, message)


def _role_of(message: object) -> object:
    """Return a message's ``role``: a dict's key, or an SDK object's attribute."""
    if isinstance(message, Mapping):
        return message.get("role")
    return getattr(message, "role", None)


def _reasoning(message: object) -> bool:
    return isinstance(message, dict) and message.get("type") == "reasoning"


def _thinks(message: object) -> bool:
    content = message.get("content") if isinstance(message, dict) else None
    return isinstance(content, list | tuple) and any(
        isinstance(block, dict) and block.get("type") in _THINKING for block in content
    )


def _digest(message: object, index: int) -> str:
    dump = getattr(message, "model_dump", None)
    if not isinstance(message, Mapping) and callable(dump):
        message = dump(exclude_none=True)  # an SDK object, digested as the data it holds
    try:
        return sha256_of(message)
    except (TypeError, ValueError, ValidationError) as error:
        raise ValidationError(
            f"ContextWindow: messages[{index}] is not JSON data, so it cannot be digested",
            details={"index": index},
        ) from error


def _view_of(
    turns: Sequence[TranscriptTurn],
    kinds: Sequence[Action],
    stubs: dict[int, TurnReplacement],
    groups: dict[str, _Group],
) -> list[TranscriptTurn]:
    """Return the request's turns under the decisions (summaries priced as rendered)."""
    starts = {group.members[0]: (group_id, group) for group_id, group in groups.items()}
    view: list[TranscriptTurn] = []
    keep, mask, summarize = Action.KEEP, Action.MASK, Action.SUMMARIZE
    for index, turn in enumerate(turns):
        kind = kinds[index]
        if kind is keep:
            view.append(turn)
        elif kind is mask:
            stub = stubs[index]
            view.append(masked_turn(turn, stub.content, stub.token_estimate))
        elif kind is summarize and index in starts:
            group_id, group = starts[index]
            view.append(summary_turn(group_id, group.text, group.cost, len(group.members)))
    return view


def _place_breakpoint(request: list[Any], stable: int, system: object) -> None:
    """Mark the last block of the stable prefix ``cache_control: ephemeral``, in copies.

    The caller's own markers stay; none is added when the prefix is empty, already marked, or
    the caller's markers already take the provider's four.
    """
    if stable <= 0:
        return
    markers = _markers(system) + sum(_markers(message.get("content")) for message in request)
    if markers >= _MAX_BREAKPOINTS:
        return
    message = request[stable - 1]
    content = message.get("content")
    if isinstance(content, str):
        if not content:
            return
        blocks: list[Any] = [{"type": "text", "text": content, "cache_control": _EPHEMERAL}]
    elif isinstance(content, list) and content:
        position = len(content) - 1
        while position >= 0 and (
            not isinstance(content[position], dict) or content[position].get("type") in _THINKING
        ):
            position -= 1
        if position < 0 or "cache_control" in content[position]:
            return
        blocks = list(content)
        blocks[position] = {**content[position], "cache_control": dict(_EPHEMERAL)}
    else:
        return
    request[stable - 1] = {**message, "content": blocks}


def _markers(content: object) -> int:
    """Count ``cache_control`` markers on the blocks of ``content`` (and inside tool results)."""
    if not isinstance(content, list | tuple):
        return 0
    count = 0
    for block in content:
        if isinstance(block, dict):
            if block.get("cache_control") is not None:
                count += 1
            if block.get("type") == "tool_result":
                count += _markers(block.get("content"))
    return count
