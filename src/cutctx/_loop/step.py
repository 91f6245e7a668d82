"""One step of a window, as a transaction: ``Step`` works on a copy of the ``WindowState``.

A step that stays under ``compact_at`` prices only the new messages and appends them; a step
that would pass it plans once over the current request, folds the plans into the decisions,
and makes the view through the executor from the one plan over the whole history. Everything a
step changes is in ``Step.state``, a copy of the window's; the window adopts it in one
assignment when the step succeeded, and drops it otherwise (docs/design.md, "The window's
state").
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Final

from baseaicore import ValidationError

from cutctx._core.errors import BudgetUnsatisfiable
from cutctx._core.invariants import layout
from cutctx._core.values import Action, Role, Transcript
from cutctx._loop.compact import CompactedMessages
from cutctx._loop.decisions import Decisions, excerpts_of, shared_excerpts
from cutctx._loop.fingerprint import Fingerprint
from cutctx._loop.jsondata import check_json
from cutctx._loop.planner import Planner
from cutctx._loop.request import Request, Unmarked, counted, resolved
from cutctx.formats._format import WindowHooks, hooks_of
from cutctx.formats._marks import unmarked

if TYPE_CHECKING:
    from collections.abc import Sequence

    from cutctx._core.plan import CompactionPlan
    from cutctx._core.protocols import CompactionPolicy
    from cutctx._core.report import CompactionReport
    from cutctx._core.values import TranscriptTurn, TurnReplacement
    from cutctx._loop.planner import Pending
    from cutctx._loop.settings import Settings
    from cutctx._loop.state import WindowState
    from cutctx.formats import Format, Scanned

__all__ = ["DIGEST_CHARS", "Step", "digest_of", "named"]

DIGEST_CHARS = 16
"""The hex digits of a request message's digest (``digest_of``)."""


HEDGE: Final = 0.4
"""What a calibrated window reserves for the new messages of a step, as a share of their price.

The calibration knows how the provider counts what it has reported on; new content may be of
another kind (source code after logs) that the estimator prices lower against the provider's
tokenizer: the default estimator's kinds of text span 0.9 to 1.3 of a tokenizer, up to 1.44x
apart. The reserve holds only in the step the messages arrive: the next report covers them.
"""


def named(policy: object) -> str:
    """Return how a state names ``policy``: ``name@version``."""
    return f"{getattr(policy, 'name', '?')}@{getattr(policy, 'version', '?')}"


def digest_of(fmt: Format[Any], message: object) -> str:
    """Return the short digest of one request message a state compares the next one by."""
    # The canonical half: equal content whatever the order of its keys (a store's reordering).
    return (
        Fingerprint.of([message], hooks_of(fmt).fingerprint_data)
        .hexdigest()
        .partition(".")[2][:DIGEST_CHARS]
    )


class Step:
    """One ``prepare``: the window's parts, and the state it makes (a copy of the window's)."""

    __slots__ = ("caller", "fmt", "marked", "planner", "policy", "recalled", "settings", "state")

    def __init__(
        self,
        fmt: Format[Any],
        settings: Settings,
        planner: Planner,
        policy: CompactionPolicy,
        state: WindowState,
    ) -> None:
        self.fmt, self.settings, self.planner, self.policy = fmt, settings, planner, policy
        self.state = state.copy()
        self.recalled: list[TranscriptTurn] = []  # tool results to index once adopted
        # The caller's history when some of its messages held cache markers (``begin``): the
        # step holds them without, and ``emit`` sends the caller's own messages again.
        self.caller: Sequence[Any] | None = None
        self.marked: list[int] = []  # the indices of its messages that held one

    # -- the step -----------------------------------------------------------------------------

    def begin(self, history: object) -> Pending | None:
        """Take in ``history``; return the compaction to fulfil, or ``None`` if none is due."""
        if not isinstance(history, list | tuple):
            raise ValidationError(
                f"ContextWindow: history must be a list of messages, got {type(history).__name__}",
                details={"field": "history"},
            )
        history = self.without_cache_markers(history)
        state = self.state
        if state.ledger.unseen:
            self.attach(history)
        ledger = state.ledger
        if ledger.matching(history) < ledger.count:
            self.reset()
        self.resettle(history)
        if state.request.held != ledger.count:  # a step that failed after holding its messages
            state.request.tail, state.request.tokens = False, self.tokens()
        read = ledger.read(history, ledger.count) if len(history) > ledger.count else None
        if read is not None:
            for index, sent in enumerate(read.sent, ledger.count):
                check_json(sent, f"messages[{index}]")
        excerpts = excerpts_of(read, self.settings, quick=self.planner.quick_excerpts)
        new = () if read is None else read.turns
        added = sum(excerpts.get(turn.turn_id, turn).token_estimate for turn in new)
        hedge = math.ceil(HEDGE * added) if state.calibration.reports else 0
        if state.request.tokens + added + hedge <= self.settings.compact_at:
            self.append(history, read, added, excerpts)
            return None
        self.live()
        settings, planner = self.settings, self.planner
        if hedge:
            self.settings = settings.narrowed(hedge)
            self.planner = Planner(self.fmt, self.settings, self.policy)
        if read is not None:
            self.hold(history, read, self.fitted(read.turns, excerpts))
        current = Transcript(tuple(self.current()))
        try:
            return self.planner.plan(current, self.planner.policy_for(current), ledger)
        except BudgetUnsatisfiable:
            if not hedge:
                raise
            # The untouchable turns fit the calibrated room, not the hedged one: no hedge.
            self.settings, self.planner = settings, planner
            return planner.plan(current, planner.policy_for(current), ledger)

    def complete(self, pending: Pending, texts: dict[str, str]) -> None:
        """Fold the compaction into the decisions, make the view and render the request."""
        state = self.state
        if not pending.stages:  # a small window that still fits: sent as it is, nothing cut
            state.request.tokens = self.tokens()
            self.render(self.previous(), compacted=False)
            return
        ledger = state.ledger
        estimator = self.settings.estimator
        before = state.decisions
        decisions = state.decisions.fold(
            pending.stages,
            texts,
            ledger.index_of,
            ledger.turns,
            lambda text: self.fmt.price_summary(text, estimator=estimator),
        )
        state.planned_by = pending.policy
        tried: list[tuple[Decisions, CompactionPlan, CompactionReport, list[TranscriptTurn]]] = []

        def view_of(chosen: Decisions) -> list[TranscriptTurn]:
            plan, report, view = self.made(chosen, pending.policy)
            tried.append((chosen, plan, report, view))
            return view

        # The planner's rule for the lone user messages a removal left behind another.
        decisions = self.planner.without_merges(decisions, before, ledger, view_of)
        plan, report, state.view = next(
            (plan, report, view)
            for made, plan, report, view in reversed(tried)
            if made is decisions
        )
        state.decisions = decisions
        tokens = self.tokens()
        if tokens > self.settings.max_tokens:
            raise ValidationError(
                f"ContextWindow: the summaries exceed their targets, so the request would need "
                f"{tokens} tokens, over max_tokens {self.settings.max_tokens}",
                details={"max_tokens": self.settings.max_tokens, "tokens_needed": tokens},
            )
        state.request.tokens = tokens
        self.render(self.previous(), compacted=True)
        self.record(plan, report)

    def emit(self) -> list[Any]:
        """Return a fresh list of the request, with the format's cache marker if asked."""
        state = self.state
        state.calibration = state.calibration.sent(state.request.tokens)
        request = list(state.request.messages)
        if self.caller is not None:
            request = self.with_cache_markers(request)
        if self.settings.cache_breakpoints:
            return hooks_of(self.fmt).mark_cache(
                request, state.stats.first_changed_index, self.settings.system
            )
        return request

    # -- its parts ----------------------------------------------------------------------------

    def fitted(
        self, new: Sequence[TranscriptTurn], excerpts: dict[str, TurnReplacement]
    ) -> dict[str, TurnReplacement]:
        """Return ``excerpts`` with the new results cut to fit the request together.

        The new messages join the protected tail; the room their results share is what the
        most a request may hold (``max_tokens``, calibrated) leaves after the untouchable turns
        already held and the new messages that are not results (``shared_excerpts``). With
        excerpts off (no result cap) the results stay whole.
        """
        if self.settings.max_result_tokens is None or not new:
            return excerpts
        view = self.current()
        flags = layout(Transcript((*view, *new)), self.planner.hard).untouchable
        fixed = sum(turn.token_estimate for turn, flag in zip(view, flags, strict=False) if flag)
        fixed += sum(turn.token_estimate for turn in new if turn.role is not Role.TOOL)
        return shared_excerpts(
            new,
            excerpts,
            self.planner.top - fixed,
            self.settings,
            quick=self.planner.quick_excerpts,
        )

    def without_cache_markers(self, history: Sequence[Any]) -> Sequence[Any]:
        """Return ``history`` as the step holds it: its messages without cache markers.

        A marker is the caller's to place, not content: moved from message to message it leaves
        the same history (no reset, no message priced again). ``self.caller`` keeps the
        caller's own history when a message held one, for ``with_cache_markers``.
        """
        hooks = hooks_of(self.fmt)
        if type(hooks).without_cache_markers is WindowHooks.without_cache_markers:
            return history  # a format without markers
        strip = hooks.without_cache_markers
        plain = [strip(message) for message in history]
        self.marked = [
            index for index, message in enumerate(plain) if message is not history[index]
        ]
        if self.marked:
            self.caller = history
            return plain
        return history

    def with_cache_markers(self, request: list[Any]) -> list[Any]:
        """Return ``request`` with the caller's own messages where it sends a held one whole.

        Each message the request sends as the caller gave it (or as its copy without ``sticky``
        and ``priority``) is the caller's current message again, its markers where the caller
        put them; a message the window made (a stub, an excerpt, a merge) goes as it is.
        """
        caller, recipe = self.caller, self.state.request.recipe
        assert caller is not None  # noqa: S101 - only called when begin kept the caller's history
        if len(recipe) != len(request):
            return request
        made = list(request)
        whole: set[int] = set()
        for position, how in enumerate(recipe):
            if type(how) is int:
                made[position] = caller[how]
                whole.add(how)
            elif isinstance(how, Unmarked):
                original = caller[how.index]
                made[position] = unmarked(original) if isinstance(original, dict) else original
                whole.add(how.index)
        seen = self.state.ledger.seen
        marked = [
            (seen[index], caller[index])
            for index in self.marked
            if index not in whole and index < len(seen)
        ]
        return hooks_of(self.fmt).with_cache_markers(made, marked) if marked else made

    def resettle(self, history: Sequence[Any]) -> None:
        """Read again the trailing messages whose turns the next messages may change."""
        state = self.state
        ledger, count = state.ledger, state.ledger.count
        start = count
        settled = hooks_of(self.fmt).settled
        while start and not settled(history[start - 1]):
            start -= 1
        if start == count or len(history) == count:
            return
        self.live()
        end = ledger.end(start)
        if not state.decisions.truncate(end):
            self.reset()
            return
        ledger.truncate(start)
        state.view = None
        state.request.tail = False
        state.request.held = min(state.request.held, start)
        state.request.tokens = self.tokens()

    def reset(self) -> None:
        """Start over from the history; the old request stays only to be compared against."""
        state = self.state
        if state.before is None and state.before_digests is None:
            state.before = state.request.messages
        ledger = state.ledger
        ledger.clear()
        state.decisions = Decisions([Action.KEEP] * len(ledger.head))
        state.view = list(ledger.head)
        head = sum(turn.token_estimate for turn in ledger.head)
        state.request = Request.empty(head, tail=False)
        state.restored = None
        state.compaction, state.compacted_count = None, None
        state.stats = counted(state.stats, resets=1)

    def hold(
        self, history: Sequence[Any], read: Scanned[Any], excerpts: dict[str, TurnReplacement]
    ) -> None:
        """Hold the messages ``read``: their turns are kept, or excerpted (decided once)."""
        state = self.state
        ledger = state.ledger
        before = len(ledger.turns)
        ledger.add(read, history)
        self.recalled.extend(read.turns)
        if ledger.cold is None:
            decisions = state.decisions
            decisions.keep(len(ledger.turns) - before)
            for turn_id, excerpt in excerpts.items():
                index = ledger.index_of[turn_id]
                decisions.actions[index] = Action.EXCERPT
                decisions.stubs[index] = excerpt
            if excerpts:
                state.view = None  # the executor makes the view with the excerpts
            elif state.view is not None:
                state.view.extend(ledger.turns[before:])

    def append(
        self,
        history: Sequence[Any],
        read: Scanned[Any] | None,
        added: int,
        excerpts: dict[str, TurnReplacement],
    ) -> None:
        """Send the new messages after the request as it is (no re-planning)."""
        state = self.state
        request = state.request
        previous = self.previous()
        if excerpts:
            self.live()  # an excerpt is a decision: on the turns read again
        if read is not None:
            self.hold(history, read, excerpts)
        request.tokens += added
        if excerpts or previous is not request.messages or not request.tail:
            # After a reset, when the request does not end with the last held message (it
            # was masked or removed, so the new ones may merge or need an opener), or when a
            # new result is excerpted: render, and a step that excerpts records its plan.
            self.live()  # the render binds the held messages as read again
            made = self.adopt(state.decisions, state.planned_by) if excerpts else None
            self.render(previous, compacted=False)
            if made is not None:
                self.record(*made)
            return
        stable = sum(request.costs)
        if read is not None:
            request.extend(read, history)
        state.stats = counted(state.stats, requests=1, first_changed=len(previous), stable=stable)

    def record(self, plan: CompactionPlan, report: CompactionReport) -> None:
        """Record the latest compaction."""
        state = self.state
        state.compaction = CompactedMessages(list(state.request.messages), report, plan)
        state.compacted_count = state.ledger.count

    def adopt(
        self, decisions: Decisions, policy: CompactionPolicy
    ) -> tuple[CompactionPlan, CompactionReport]:
        """Adopt ``decisions``: return the plan over the history they are, and its report."""
        plan, report, view = self.made(decisions, policy)
        self.state.decisions, self.state.view = decisions, view
        return plan, report

    def made(
        self, decisions: Decisions, policy: CompactionPolicy
    ) -> tuple[CompactionPlan, CompactionReport, list[TranscriptTurn]]:
        """Return the plan over the history ``decisions`` are, its report and its view."""
        history = Transcript(tuple(self.state.ledger.turns))
        plan = decisions.plan(
            history, self.planner.budget_for(history), policy, self.settings.estimator
        )
        view, report = decisions.view(history, plan)
        return plan, report, view

    def current(self) -> list[TranscriptTurn]:
        """Return the view of every held turn (the request's turns)."""
        state = self.state
        if state.view is None:  # made from the decisions, over the turns (read again if cold)
            self.live()
            self.adopt(state.decisions, state.planned_by)
        assert state.view is not None  # noqa: S101 - adopt made it
        return state.view

    def tokens(self) -> int:
        """Return the estimate of the current view."""
        return sum(turn.token_estimate for turn in self.current())

    def render(self, previous: list[Any], *, compacted: bool) -> None:
        """Render the request from the view and count it against ``previous``."""
        state = self.state
        ledger = state.ledger
        binding = ledger.binding(ledger.count)
        rendered = self.fmt.render(Transcript(tuple(self.current())), binding)
        state.request = Request.rendered(rendered, state.request.tokens, binding, ledger.seen)
        digests, state.before_digests = state.before_digests, None
        if digests is None:
            same = state.request.shared(previous)
        else:  # a restored window's request before a reset: known by its digests
            same = 0
            for old, new in zip(digests, state.request.messages, strict=False):
                if old != digest_of(self.fmt, new):
                    break
                same += 1
        state.stats = counted(
            state.stats,
            requests=1,
            compactions=1 if compacted else 0,
            first_changed=same,
            stable=sum(state.request.costs[:same]),
        )

    def previous(self) -> list[Any]:
        """Return the request the next one is compared against (once, after a reset)."""
        state = self.state
        before, state.before = state.before, None
        return state.request.messages if before is None else before

    def rehead(self, settings: Settings) -> None:
        """Take the head ``settings`` give (a new system prompt), the decisions kept."""
        state = self.state
        ledger = state.ledger
        old = ledger.head
        ledger.rehead(settings)
        if ledger.cold is None:
            state.decisions = state.decisions.reheaded(len(old), len(ledger.head))
        state.view = None
        change = sum(turn.token_estimate for turn in ledger.head) - sum(
            turn.token_estimate for turn in old
        )
        state.request.tokens += change
        state.before, state.before_digests = [], None  # nothing of the old prefix is shared
        state.restored = None

    # -- a restored state ---------------------------------------------------------------------

    def live(self) -> None:
        """Have a restored window's old messages read again, once (``Ledger.warm``).

        The decisions the state named by turn id are then the window's, and the view is made
        again from them.
        """
        state = self.state
        decisions = state.ledger.warm()
        if decisions is not None:
            state.decisions, state.view = decisions, None

    def attach(self, history: Sequence[Any]) -> None:
        """Take up a restored state over ``history``: held cold if it starts as the state saw.

        A history that does not (shorter, or edited) starts over as a live window's would,
        its request compared with the state's by the digests of its messages.
        """
        state = self.state
        request = state.request
        if not state.ledger.attach(history):
            state.before_digests = list(request.digests)
            self.reset()
            return
        messages = resolved(request.recipe, history)  # None: a message the state lacks
        request.messages = [] if messages is None else messages
        request.tail = request.tail and messages is not None
        state.restored = None

    def recorded(self) -> CompactedMessages[Any] | None:
        """Return a restored window's latest compaction, made again (``None`` if none)."""
        state = self.state
        count = state.compacted_count
        if state.compaction is not None or count is None:
            return state.compaction
        ledger = state.ledger
        self.live()
        history = Transcript(tuple(ledger.turns[: ledger.end(count)]))
        budget = self.planner.budget_for(history)
        plan = state.decisions.plan(history, budget, state.planned_by, self.settings.estimator)
        view, report = state.decisions.view(history, plan)
        messages = self.fmt.render(Transcript(tuple(view)), ledger.binding(count)).messages
        state.compaction = CompactedMessages(messages, report, plan)
        return state.compaction
