"""``ContextWindow``: the object an agent loop keeps for one conversation.

The window composes four parts and decides little itself: the ``Ledger`` (what it has read of
the history, priced once), the ``Decisions`` (one action per turn, as the policies draft them),
the policies (which plan each compaction over the current request) and the ``Format`` (which
renders the view and prices each message as sent). A step that stays under ``compact_at``
prices only the new messages and appends them; a step that would pass it plans once over the
current request, folds the plans into the decisions, and makes the view through the executor
from the one plan over the whole history. See ``docs/agent-loop.md`` and ``docs/design.md``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from baseaicore import ValidationError

from cutctx._core.values import DEFAULT_PLACEHOLDER, Action, Transcript
from cutctx._loop import codec
from cutctx._loop.compact import CompactedMessages, default_messages_policy
from cutctx._loop.decisions import Decisions, excerpts_of
from cutctx._loop.ledger import Ledger
from cutctx._loop.planner import Pending, Planner
from cutctx._loop.recall import (
    DEFAULT_PAGE_TOKENS,
    RECALL_PLACEHOLDER,
    RecallIndex,
    answer,
    tool_of,
)
from cutctx._loop.request import Request, WindowStats, counted
from cutctx._loop.settings import Settings
from cutctx.formats import resolve

if TYPE_CHECKING:
    from collections.abc import Sequence

    from cutctx._core.plan import CompactionPlan
    from cutctx._core.protocols import CompactionPolicy, TokenEstimator
    from cutctx._core.report import CompactionReport
    from cutctx._core.values import TranscriptTurn, TurnReplacement
    from cutctx._loop.settings import Pin, Priority, Summarize
    from cutctx.formats import Format, FormatName, Scanned

__all__ = ["ContextWindow", "WindowStats"]


class ContextWindow:
    """The request to send now, for every step of one agent conversation.

    ``prepare(history)`` takes the application's full history (messages of ``format``, grown
    at its end, never edited in place; equal messages handed as new objects are the same
    history) and returns the messages to send. While the request — earlier decisions applied,
    new messages appended — stays at or under ``compact_at``, nothing is re-planned; when it
    would pass it, one compaction brings it to ``compact_to`` (or, when the untouchable turns
    make that impossible, under ``compact_at``, removing no more than that needs). Fractions are
    of ``max_tokens``, ints are tokens. Decisions are sticky: masked stays masked with the same
    bytes, a summary is reused (and given up last), dropped stays dropped. ``keep_first`` pins
    the first non-system messages (the task). Messages carrying a ``"priority"`` (or
    ``priority=``, a function of ``(index, message)``) are shed by priority unless ``policy`` is
    given; ``"sticky": true`` (or ``pin=``) pins a message; neither key is sent.

    >>> window = ContextWindow("openai_chat", max_tokens=1000)
    >>> window.prepare([{"role": "user", "content": "hi"}])
    [{'role': 'user', 'content': 'hi'}]
    >>> window.stats.requests, window.stats.compactions
    (1, 0)

    Raises:
        ValidationError: for an unknown format or a bad setting, naming it.

    .. versionadded:: 0.1.0
    .. versionchanged:: 0.1.1
       ``format`` may be a ``cutctx.formats.Format``; a history is recognised by content.
    """

    def __init__(
        self,
        format: FormatName | Format[Any],
        *,
        max_tokens: int,
        compact_at: float | int = 0.8,
        compact_to: float | int = 0.5,
        keep_first: int = 0,
        protected_recent_turns: int = 4,
        keep_recent_results: int = 2,
        system: str | list[dict[str, Any]] | None = None,
        estimator: TokenEstimator | str | None = None,
        summarize: Summarize | None = None,
        policy: CompactionPolicy | None = None,
        summary_input_tokens: float | int | None = None,
        cache_breakpoints: bool = False,
        priority: Priority | None = None,
        pin: Pin | None = None,
        max_result_tokens: float | int | None = 0.25,
        recall: bool = False,
    ) -> None:
        settings = Settings.of(
            max_tokens, compact_at, compact_to, keep_first, protected_recent_turns,
            keep_recent_results, system, estimator, summarize, policy, summary_input_tokens,
            cache_breakpoints, priority, pin, max_result_tokens, recall,
        )  # fmt: skip
        self._setup(resolve(format, owner="ContextWindow"), settings)

    def _setup(self, fmt: Format[Any], settings: Settings) -> None:
        """Make the window's parts for ``fmt`` and ``settings`` (``from_state`` comes here too)."""
        self._format, self._settings = fmt, settings
        self._policy: CompactionPolicy = settings.policy or default_messages_policy(
            estimator=settings.estimator,
            keep_recent_results=settings.keep_recent,
            summarize=settings.summarize is not None,
            summary_input_tokens=settings.summary_input,
            placeholder=RECALL_PLACEHOLDER if settings.recall else DEFAULT_PLACEHOLDER,
        )
        self._recall = RecallIndex() if settings.recall else None
        self._planner = Planner(self._format, settings, self._policy)
        self._ledger = Ledger(self._format, settings)
        self._decisions = Decisions([Action.KEEP] * len(self._ledger.head))
        head = sum(turn.token_estimate for turn in self._ledger.head)
        self._request = Request.empty(head, tail=True)
        self._view: list[TranscriptTurn] | None = list(self._ledger.head)
        self._stats = WindowStats()
        self._last: CompactedMessages[Any] | None = None
        self._planned_by = self._policy  # the policy of the latest compaction
        self._last_count: int | None = None  # the messages it was over
        self._before: list[Any] | None = None  # the request before a reset
        self._saved: codec.Saved | None = None  # a restored state, until the history is seen

    # -- public API ---------------------------------------------------------------------------

    @property
    def format(self) -> str:
        """The name of the message format."""
        return self._format.name

    @property
    def system(self) -> str | list[dict[str, Any]] | None:
        """The request-level system prompt, exactly as given (send it beside the messages)."""
        return cast("str | list[dict[str, Any]] | None", self._settings.system)

    @property
    def policy(self) -> CompactionPolicy:
        """The policy every compaction plans with (but in priority mode)."""
        return self._policy

    @property
    def stats(self) -> WindowStats:
        """Requests, compactions, resets, and what the last request shares with the previous."""
        return self._stats

    @property
    def last(self) -> CompactedMessages[Any] | None:
        """The latest compaction: its request, report and plan over the whole history then."""
        if self._last is None and self._last_count is not None:
            self._last = codec.recorded(self, self._last_count)  # a restored window's
        return self._last

    @property
    def recall_tool(self) -> dict[str, Any] | None:
        """The ``cutctx_recall`` tool's definition in the window's format (``recall=True``).

        Add it to the request's tools and route its calls to ``recall``; ``None`` when recall
        is off.
        """
        if self._recall is None:
            return None
        return tool_of(self._format, self._settings.cap or DEFAULT_PAGE_TOKENS)

    def recall(self, arguments: object) -> str:
        """Answer a ``cutctx_recall`` call: a page of the original its ``sha256`` names.

        ``arguments`` is the call's (a mapping or its JSON text): ``sha256``, ``start_line``
        (default 1) and ``max_tokens`` (default, and at most, the result cap; 2 000 without
        one). Every tool result the window has seen can be read, dropped ones included. A bad
        argument or an unknown digest gives back a one-line explanation, never an exception.
        """
        unseen = self._saved is not None and not self._saved.resumed
        if self._recall is not None and not self._recall.complete and not unseen:
            self._warm(self._ledger.seen)  # restored from a state: read the old messages once
            self._recall.fill(self._ledger.turns)
        return answer(self._recall, arguments, self._format, self._settings, unseen=unseen)

    def prepare[M](self, history: Sequence[M]) -> list[M]:
        """Return the messages to send now for ``history``; see the class docstring.

        Raises:
            ValidationError: for malformed messages (naming the ``index``), a ``summarize`` that
                is async (use ``aprepare``) or returns a non-string.
            BudgetUnsatisfiable: if the untouchable messages alone exceed ``max_tokens``
                (naming the largest of them).
            SummaryMissing: if ``policy`` plans a summary and no ``summarize`` was given.
        """
        pending = self._begin(history)
        if pending is not None:
            self._complete(pending, pending.fulfil(self._settings.summarize))
        return cast("list[M]", self._emit())

    async def aprepare[M](self, history: Sequence[M]) -> list[M]:
        """Return the messages to send now, awaiting an async ``summarize``; as ``prepare``.

        Raises:
            ValidationError: as ``prepare``, except that an async ``summarize`` is awaited.
            BudgetUnsatisfiable: as ``prepare``.
            SummaryMissing: as ``prepare``.
        """
        pending = self._begin(history)
        if pending is not None:
            self._complete(pending, await pending.afulfil(self._settings.summarize))
        return cast("list[M]", self._emit())

    def state(self) -> dict[str, Any]:
        """Return the configuration and the decisions as plain JSON data.

        ``ContextWindow.from_state(state, ...)`` continues from it with the same requests; any
        history ``prepare`` accepted has a state.
        """
        return codec.encode(self)

    @classmethod
    def from_state(
        cls,
        state: dict[str, Any] | str,
        *,
        estimator: TokenEstimator | str | None = None,
        summarize: Summarize | None = None,
        policy: CompactionPolicy | None = None,
        priority: Priority | None = None,
        pin: Pin | None = None,
        format: Format[Any] | None = None,
    ) -> ContextWindow:
        """Return a window that continues from ``state()`` (or its JSON text).

        The callables (and a custom ``format``) are given again: the state records that they
        were. The next ``prepare(history)`` checks the history against the state's
        fingerprint in one pass (a changed history starts over and counts a reset) and then
        returns exactly the request an uninterrupted window would, pricing only what is new.

        Raises:
            ValidationError: for a state that is not one ``state()`` returned, a missing
                argument the state needs (naming it), or a policy other than the state's.
        """
        return codec.decode(
            cls, state, estimator=estimator, summarize=summarize, policy=policy,
            priority=priority, pin=pin, format=format,
        )  # fmt: skip

    # -- one step -----------------------------------------------------------------------------

    def _begin(self, history: object) -> Pending | None:
        """Take in ``history``; return the compaction to fulfil, or ``None`` if none is due."""
        if not isinstance(history, list | tuple):
            raise ValidationError(
                f"ContextWindow: history must be a list of messages, got {type(history).__name__}",
                details={"field": "history"},
            )
        if self._saved is not None and not self._saved.resumed:
            codec.resume(self, history)
        ledger = self._ledger
        if ledger.matching(history) < ledger.count:
            self._reset()
        self._resettle(history)
        if self._request.held != ledger.count:  # a step that failed after holding its messages
            self._warm(history)
            self._request.tail, self._request.tokens = False, self._tokens()
        read = ledger.read(history, ledger.count) if len(history) > ledger.count else None
        excerpts = excerpts_of(read, self._settings)
        new = () if read is None else read.turns
        added = sum(excerpts.get(turn.turn_id, turn).token_estimate for turn in new)
        if self._request.tokens + added <= self._settings.at:
            self._append(history, read, added, excerpts)
            return None
        self._warm(history)
        if read is not None:
            self._hold(history, read, excerpts)
        current = Transcript(tuple(self._current()))
        return self._planner.plan(current, self._planner.policy_for(current), ledger)

    def _resettle(self, history: Sequence[Any]) -> None:
        """Read again the trailing messages whose turns the next messages may change."""
        ledger, count = self._ledger, self._ledger.count
        start = count
        while start and not self._format.settled(history[start - 1]):
            start -= 1
        if start == count or len(history) == count:
            return
        self._warm(history)
        end = ledger.end(start)
        if not self._decisions.truncate(end):
            self._reset()
            return
        ledger.truncate(start, history)
        self._view = None
        self._request.tail = False
        self._request.held = min(self._request.held, start)
        self._request.tokens = self._tokens()

    def _reset(self) -> None:
        """Start over from the history; the old request stays only to be compared against."""
        if self._before is None:
            self._before = self._request.messages
        self._ledger.clear()
        self._decisions = Decisions([Action.KEEP] * len(self._ledger.head))
        self._view = list(self._ledger.head)
        head = sum(turn.token_estimate for turn in self._ledger.head)
        self._request = Request.empty(head, tail=False)
        self._saved = None
        self._last_count = None
        self._stats = counted(self._stats, resets=1)

    def _hold(
        self, history: Sequence[Any], read: Scanned[Any], excerpts: dict[str, TurnReplacement]
    ) -> None:
        """Hold the messages ``read``: their turns are kept, or excerpted (decided once)."""
        ledger = self._ledger
        before = len(ledger.turns)
        ledger.add(read, history)
        if self._recall is not None:
            self._recall.add(read.turns)
        if ledger.cold is None:
            decisions = self._decisions
            decisions.keep(len(ledger.turns) - before)
            for turn_id, excerpt in excerpts.items():
                index = ledger.index_of[turn_id]
                decisions.actions[index] = Action.EXCERPT
                decisions.stubs[index] = excerpt
            if excerpts:
                self._view = None  # the executor makes the view with the excerpts
            elif self._view is not None:
                self._view.extend(ledger.turns[before:])

    def _append(
        self,
        history: Sequence[Any],
        read: Scanned[Any] | None,
        added: int,
        excerpts: dict[str, TurnReplacement],
    ) -> None:
        """Send the new messages after the request as it is (no re-planning)."""
        request = self._request
        previous = self._previous()
        if excerpts:
            self._warm(history)
        if read is not None:
            self._hold(history, read, excerpts)
        request.tokens += added
        if excerpts or previous is not request.messages or not request.tail:
            # After a reset, when the request does not end with the last held message (it
            # was masked or removed, so the new ones may merge or need an opener), or when a
            # new result is excerpted: render, and a step that excerpts records its plan.
            self._warm(history)
            made = self._adopt(self._decisions, self._planned_by) if excerpts else None
            self._render(previous, compacted=False)
            if made is not None:
                self._record(*made)
            return
        stable = sum(request.costs)
        if read is not None:
            request.extend(read, history)
        self._stats = counted(self._stats, requests=1, first_changed=len(previous), stable=stable)

    def _complete(self, pending: Pending, texts: dict[str, str]) -> None:
        """Fold the compaction into the decisions, make the view and render the request."""
        ledger = self._ledger
        estimator = self._settings.estimator
        decisions = self._decisions.fold(
            pending.stages,
            texts,
            ledger.index_of,
            ledger.turns,
            lambda text: self._format.price_summary(text, estimator=estimator),
        )
        self._planned_by = pending.policy
        plan, report = self._adopt(decisions, pending.policy)
        dropped = self._planner.merged(self._current(), ledger)
        if dropped:  # lone user messages a removal left behind another: dropped too
            for index in dropped:
                decisions.actions[index] = Action.DROP
            plan, report = self._adopt(decisions, pending.policy)
        tokens = self._tokens()
        if tokens > self._settings.max_tokens:
            raise ValidationError(
                f"ContextWindow: the summaries exceed their targets, so the request would need "
                f"{tokens} tokens, over max_tokens {self._settings.max_tokens}",
                details={"max_tokens": self._settings.max_tokens, "tokens_needed": tokens},
            )
        self._request.tokens = tokens
        self._render(self._previous(), compacted=True)
        self._record(plan, report)

    def _record(self, plan: CompactionPlan, report: CompactionReport) -> None:  # the latest
        self._last = CompactedMessages(list(self._request.messages), report, plan)
        self._last_count = self._ledger.count

    def _adopt(
        self, decisions: Decisions, policy: CompactionPolicy
    ) -> tuple[CompactionPlan, CompactionReport]:
        """Adopt ``decisions``: return the plan over the history they are, and its report."""
        history = Transcript(tuple(self._ledger.turns))
        plan = decisions.plan(
            history, self._planner.budget_for(history), policy, self._settings.estimator
        )
        view, report = decisions.view(history, plan)
        self._decisions, self._view = decisions, view
        return plan, report

    def _current(self) -> list[TranscriptTurn]:
        """Return the view of every held turn (the request's turns)."""
        if self._view is None:
            self._adopt(self._decisions, self._planned_by)
        assert self._view is not None  # noqa: S101 - _adopt made it
        return self._view

    def _tokens(self) -> int:
        return sum(turn.token_estimate for turn in self._current())

    def _warm(self, history: Sequence[Any]) -> None:
        """Materialize what a restored window holds only by its state."""
        if self._ledger.cold is None:
            return
        self._ledger.warm(history)
        codec.adopt(self)

    def _render(self, previous: list[Any], *, compacted: bool) -> None:
        """Render the request from the view and count it against ``previous``."""
        ledger = self._ledger
        binding = ledger.binding(ledger.count)
        rendered = self._format.render(Transcript(tuple(self._current())), binding)
        self._request = Request.rendered(rendered, self._request.tokens, binding, ledger.seen)
        same = self._request.shared(previous)
        self._stats = counted(
            self._stats,
            requests=1,
            compactions=1 if compacted else 0,
            first_changed=same,
            stable=sum(self._request.costs[:same]),
        )

    def _previous(self) -> list[Any]:
        """Return the request the next one is compared against (once, after a reset)."""
        before, self._before = self._before, None
        return self._request.messages if before is None else before

    def _emit(self) -> list[Any]:
        """Return a fresh list of the request, with the format's cache marker if asked."""
        request = list(self._request.messages)
        if self._settings.cache_breakpoints:
            return self._format.mark_cache(
                request, self._stats.first_changed_index, self._settings.system
            )
        return request
