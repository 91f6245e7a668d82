"""``ContextWindow``: the object an agent loop keeps for one conversation.

The window composes its parts and decides little itself: what it knows between calls is one
``WindowState`` (the ledger, the decisions, the last request, the calibration, ...); each
``prepare`` is a ``Step`` over a copy of it, adopted in one assignment when the step succeeds;
the codec writes and reads the state whole; the policies plan, the ``Format`` reads and renders.
One caller at a time: a step takes the window's one permit. See ``docs/agent-loop.md`` and
``docs/design.md``.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, cast

from baseaicore import ValidationError

from cutctx._core.priced import pricing_once
from cutctx._core.values import DEFAULT_PLACEHOLDER, Action
from cutctx._loop import codec
from cutctx._loop.compact import default_messages_policy
from cutctx._loop.decisions import Decisions
from cutctx._loop.jsondata import check_json
from cutctx._loop.ledger import Ledger
from cutctx._loop.offload import off_loop
from cutctx._loop.planner import Planner
from cutctx._loop.recall import (
    DEFAULT_PAGE_TOKENS,
    RECALL_PLACEHOLDER,
    RecallIndex,
    answer,
    tool_of,
)
from cutctx._loop.request import Request, WindowStats
from cutctx._loop.settings import Settings
from cutctx._loop.state import WindowState
from cutctx._loop.step import Step, named
from cutctx._policies.floor import RoomChain
from cutctx.formats import resolve

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from cutctx._core.protocols import CompactionPolicy, TokenEstimator
    from cutctx._loop.compact import CompactedMessages
    from cutctx._loop.planner import Pending
    from cutctx._loop.settings import Observation, Pin, Priority, Summarize
    from cutctx.formats import Format, FormatName

__all__ = ["ContextWindow", "WindowStats"]


class ContextWindow:
    """The request to send now, for every step of one agent conversation.

    ``prepare(history)`` takes the application's full history (messages of ``format``, grown at
    its end, never edited in place; equal messages handed as new objects are the same history)
    and returns the messages to send. While the request — earlier decisions applied, new
    messages appended — stays at or under ``compact_at``, nothing is re-planned; when it would
    pass it, one compaction brings it to ``compact_to`` (by default half of ``max_tokens``, at
    every size: fewer cuts keep more of the prompt cache; or, when the untouchable turns make
    that impossible, under ``compact_at``, removing no more than that needs; when they alone
    pass ``compact_at``, every message that fits under ``max_tokens`` is sent, and a cut keeps
    the newest exchanges). A float is a fraction of ``max_tokens`` (``0.8``, ``1.0``), an int a
    token count (``800``; ``1`` is refused), for every option that takes either. Decisions are
    sticky: masked stays masked with the same bytes, a summary is reused (and given up last),
    dropped stays dropped. ``keep_first`` pins the first non-system messages (the task).
    Messages carrying a ``"priority"`` (or ``priority=``, a function of ``(index, message)``)
    are shed by priority unless ``policy`` is given; ``"sticky": true`` (or ``pin=``) pins a
    message; neither key is sent. ``observation=`` (``message -> bool`` or ``(index, message) ->
    bool``, told apart by its signature: any callable, ``functools.partial`` and objects with
    ``__call__`` included; one of neither shape is refused here) marks the user messages that
    carry tool output (a ReAct agent's, SWE-agent's): each is a tool result to every policy, in
    the exchange of the assistant message before it; unmarked user messages are never touched,
    and neither are pinned ones (``keep_first``, ``pin=``, ``"sticky"``), whatever it says.

    >>> window = ContextWindow("openai_chat", max_tokens=1000)
    >>> window.prepare([{"role": "user", "content": "hi"}])
    [{'role': 'user', 'content': 'hi'}]
    >>> window.stats.requests, window.stats.compactions
    (1, 0)

    Raises:
        ValidationError: for an unknown format or a bad setting, naming it.

    .. versionadded:: 0.1.0
    .. versionchanged:: 0.1.1
       ``format`` may be a ``cutctx.formats.Format``; a history is recognised by content;
       ``observation=``; ``compact_to`` defaults to ``None``: half of ``max_tokens``.
    """

    def __init__(
        self,
        format: FormatName | Format[Any],
        *,
        max_tokens: int,
        compact_at: float | int = 0.8,
        compact_to: float | int | None = None,
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
        observation: Observation | None = None,
    ) -> None:
        settings = Settings.of(
            max_tokens, compact_at, compact_to, keep_first, protected_recent_turns,
            keep_recent_results, system, estimator, summarize, policy, summary_input_tokens,
            cache_breakpoints, priority, pin, max_result_tokens, recall, observation=observation,
        )  # fmt: skip
        if system is not None:
            check_json(system, "system")
        self._setup(resolve(format, owner="ContextWindow"), settings)
        self._tune()

    def _setup(self, fmt: Format[Any], settings: Settings, *, version: int = 4) -> None:
        """Make the window's parts for ``fmt`` and ``settings`` (``from_state`` comes here too).

        ``_tune`` then makes its planner. ``version`` is the messages default's, when no policy
        is given (a state made with version 1, 2 or 3 continues with it).
        """
        policy: CompactionPolicy = settings.policy or default_messages_policy(
            estimator=settings.estimator,
            keep_recent_results=settings.keep_recent_results,
            summarize=settings.summarize is not None,
            summary_input_tokens=settings.summary_input_tokens,
            placeholder=RECALL_PLACEHOLDER if settings.recall else DEFAULT_PLACEHOLDER,
            version=version,
            recall_index=settings.recall and version >= 2,
        )
        # The default of version 4 (without summaries) sends a result whose excerpt would keep
        # no line whole (whether the window made it or was given it).
        whole = isinstance(policy, RoomChain) and settings.summarize is None
        settings = dataclasses.replace(settings, whole_lines=whole)
        self._format, self._settings, self._policy = fmt, settings, policy
        self._recall = RecallIndex() if settings.recall else None
        self._permit = [True]  # the one caller's permit: taken by a step in flight (see _enter)
        self._working = False  # an aprepare's work runs in a worker thread (see _off_loop)
        self._probe: list[int] | None = None  # the estimator's count of the probe texts
        self._digests = codec.Digests()  # what state() computed of the request, for the next
        ledger = Ledger(fmt, settings)
        head = sum(turn.token_estimate for turn in ledger.head)
        self._state = WindowState(
            ledger,
            Decisions([Action.KEEP] * len(ledger.head)),
            Request.empty(head, tail=True),
            list(ledger.head),
            WindowStats(),
            self._policy,
        )

    def _tune(self) -> None:
        """Hold the thresholds at the calibration's (the planner plans with them)."""
        self._limits = self._state.calibration.applied(self._settings)
        self._planner = Planner(self._format, self._limits, self._policy)

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
        return self._state.stats

    @property
    def last(self) -> CompactedMessages[Any] | None:
        """The latest compaction: its request, report and plan over the whole history then."""
        state = self._state
        if (
            state.compaction is None
            and state.compacted_count is not None
            and not state.ledger.unseen
        ):
            self._idle()
            step = self._step()
            made = step.recorded()
            self._keep(step)
            return made
        return state.compaction

    @property
    def recall_tool(self) -> dict[str, Any] | None:
        """The ``cutctx_recall`` tool's definition in the window's format (``recall=True``).

        Add it to the request's tools and route its calls to ``recall``; ``None`` when recall
        is off.
        """
        if self._recall is None:
            return None
        return tool_of(self._format, self._settings.max_result_tokens or DEFAULT_PAGE_TOKENS)

    def recall(self, arguments: object) -> str:
        """Answer a ``cutctx_recall`` call: a page of the original its ``sha256`` names.

        ``arguments`` is the call's (a mapping or its JSON text): ``sha256``, ``start_line``
        (default 1) and ``max_tokens`` (default, and at most, the result cap; 2 000 without
        one). Every tool result the window has seen can be read, dropped ones included. A bad
        argument or an unknown digest gives back a one-line explanation, never an exception.
        """
        state = self._state
        unseen = state.ledger.unseen
        if self._recall is not None and not self._recall.complete and not unseen:
            self._idle()
            step = self._step()  # restored from a state: read the old messages once
            step.live()
            self._recall.fill(step.state.ledger.turns)
            self._keep(step)
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
        step = self._enter()
        try:
            pending = _begin(step, history)
            if pending is not None:
                step.complete(pending, pending.fulfil(self._settings.summarize))
            return cast("list[M]", self._commit(step))
        finally:
            self._permit.append(True)

    async def aprepare[M](self, history: Sequence[M]) -> list[M]:
        """Return the messages to send now, awaiting an async ``summarize``; as ``prepare``.

        The same request ``prepare`` returns. The step's work (reading and pricing the new
        messages, planning, rendering) runs in the event loop's default executor, so the loop
        serves its other coroutines meanwhile; ``summarize`` is called (and awaited) on the
        loop. The step is adopted on the loop once it is whole: a failure or a cancellation
        leaves the window as it was. Cancelled while its work runs, the call returns (raising
        ``asyncio.CancelledError``) when that work has finished, and the window takes the next
        step from the state before it.

        Raises:
            ValidationError: as ``prepare``, except that an async ``summarize`` is awaited.
            BudgetUnsatisfiable: as ``prepare``.
            SummaryMissing: as ``prepare``.

        .. versionchanged:: 0.1.1
           The step's work runs off the event loop.
        """
        step = self._enter()
        try:
            pending = await self._off_loop(_begin, step, history)
            if pending is not None:
                texts = await pending.afulfil(self._settings.summarize)
                await self._off_loop(step.complete, pending, texts)
            request = await self._off_loop(step.emit)
            self._adopt(step)
            return cast("list[M]", request)
        finally:
            self._permit.append(True)

    def state(self) -> dict[str, Any]:
        """Return the configuration and the decisions as plain JSON data.

        ``ContextWindow.from_state(state, ...)`` continues from it with the same requests; any
        history ``prepare`` accepted has a state.
        """
        if self._probe is None:
            self._probe = codec.probe_of(self._settings.estimator)
        return codec.to_data(
            self._state, self._format, self._settings, self._policy, self._probe, memo=self._digests
        )

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
        observation: Observation | None = None,
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
        decoded = codec.from_data(
            state, estimator=estimator, summarize=summarize, policy=policy,
            priority=priority, pin=pin, format=format, observation=observation,
        )  # fmt: skip
        window = cls.__new__(cls)
        try:  # the head (the system prompt) is read here: refused in from_state's words
            window._setup(decoded.fmt, decoded.settings)
            for version in (3, 2, 1):  # a state made with an earlier messages default keeps it
                if policy is not None or decoded.policy == named(window._policy):
                    break
                window._setup(decoded.fmt, decoded.settings, version=version)
        except ValidationError as error:
            raise codec.reworded(error) from None
        codec.check_policy(decoded, window._policy)
        window._probe = decoded.probe
        window._state = decoded.state(window._state.ledger, window._policy)
        if window._recall is not None:
            window._recall = RecallIndex(complete=False)  # indexed when first asked
        window._tune()
        return window

    def report_usage(self, input_tokens: int) -> None:
        """Report the provider's input token count for the request this window returned last.

        The window learns how the provider counts against its own estimate and keeps every
        later request under ``max_tokens`` by the provider's count (docs/agent-loop.md,
        "Calibration"); the calibration is part of ``state()``.

        Raises:
            ValidationError: for a count that is not an int ``>= 0``, before any request, or
                while a step is in flight.

        .. versionadded:: 0.1.1
        """
        self._take()
        try:
            state = self._state
            calibration = state.calibration.reported(input_tokens)
            self._state = dataclasses.replace(state, calibration=calibration)
            self._tune()
        finally:
            self._permit.append(True)

    def set_system(self, system: str | list[dict[str, Any]] | None) -> None:
        """Take a new request-level system prompt, keeping every decision on the messages.

        The new head is priced; the next ``prepare`` re-plans only if it puts the request over
        ``compact_at``, and its stats count it as a changed prefix (nothing cached is shared).
        The system prompt is part of ``state()``.

        Raises:
            ValidationError: for a system prompt JSON cannot carry, or while a step is in
                flight.

        .. versionadded:: 0.1.1
        """
        self._take()
        try:
            if system == self._settings.system:
                return
            if system is not None:
                check_json(system, "system")
            given = {**self._settings.given, "system": system}
            settings = dataclasses.replace(
                self._settings, system=system, given=given, head_prices=None
            )
            step = self._step()
            step.rehead(settings)
            self._settings = settings
            self._state = step.state
            self._tune()
        finally:
            self._permit.append(True)

    # -- one step -----------------------------------------------------------------------------

    def _step(self) -> Step:
        """Return a step over a copy of the window's state."""
        return Step(self._format, self._limits, self._planner, self._policy, self._state)

    async def _off_loop[*A, T](self, function: Callable[[*A], T], *args: *A) -> T:
        """Return ``function(*args)``, run off the event loop (``offload.off_loop``)."""
        self._working = True
        try:
            return await off_loop(function, *args)
        finally:
            self._working = False

    def _idle(self) -> None:
        """Refuse a read of the old messages while a step's work runs in a worker thread.

        Such a read (a restored window's ``last``, its first ``recall``) would use the ledger's
        reader, which that step is using.

        Raises:
            ValidationError: if an ``aprepare``'s work is running.
        """
        if self._working:
            raise _in_flight()

    def _take(self) -> None:
        """Take the one caller's permit, or refuse a second caller.

        ``list.pop`` takes the permit in one operation (one bytecode on a builtin list, atomic
        under the GIL and under free threading's per-object locks), so two callers can never
        both pass: there is no window between the check and the set.

        Raises:
            ValidationError: if a step is in flight (another thread, another task).
        """
        try:
            self._permit.pop()
        except IndexError:
            raise _in_flight() from None

    def _enter(self) -> Step:
        """Take the one caller's permit and return the step over a copy of the state."""
        self._take()
        try:
            return self._step()
        except BaseException:
            self._permit.append(True)
            raise

    def _keep(self, step: Step) -> None:
        """Keep what ``step`` read again (the same state, warm), unless a step is in flight."""
        if self._permit:
            self._state = step.state  # no step in flight could adopt a state after this one

    def _commit(self, step: Step) -> list[Any]:
        """Adopt the state ``step`` made (one assignment) and return its request."""
        request = step.emit()
        self._adopt(step)
        return request

    def _adopt(self, step: Step) -> None:
        """Adopt the state ``step`` made, in one assignment, and index what it recalled."""
        self._state = step.state
        if self._recall is not None:
            self._recall.add(step.recalled)


def _in_flight() -> ValidationError:
    """Return the error a second caller gets while a step is in flight."""
    return ValidationError(
        "ContextWindow: a step is in flight; a window serves one conversation, one prepare at "
        "a time (keep one window per conversation)",
        details={"field": "history"},
    )


def _begin(step: Step, history: Sequence[object]) -> Pending | None:
    """Return ``step.begin(history)``, a large new result priced once (read, then excerpted)."""
    with pricing_once():
        return step.begin(history)
