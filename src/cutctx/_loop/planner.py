"""How a window plans one compaction over its current request.

The policies decide; this module only chooses what they are asked. It runs the policy's
stages (leading masking members first, so a summarizer is handed the stubs the request holds),
aims at ``compact_to``, and keeps two rules of the loop: when ``compact_to`` cannot be reached,
the destructive stages (dropping, giving up a summary) stop once the request is under
``compact_at``; and a summary is the last thing given up (summaries are held fixed until
nothing else is left to remove).
"""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from baseaicore import ValidationError

from cutctx._core.errors import BudgetUnsatisfiable
from cutctx._core.executor import CompactionExecutor
from cutctx._core.invariants import Units, layout
from cutctx._core.plan import CompactionPlan
from cutctx._core.protocols import declares
from cutctx._core.values import (
    SUMMARY_TURN_ID_PREFIX,
    Action,
    CompactionBudget,
    Role,
    Transcript,
)
from cutctx._loop.compact import afulfil, fulfil, is_prioritized, priority_policy
from cutctx._policies.chain import PolicyChain
from cutctx._policies.floor import FloorChain, RoomChain
from cutctx._policies.masking import ObservationMaskingPolicy

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from cutctx._core.protocols import CompactionPolicy
    from cutctx._core.values import SummarizationRequest, TranscriptTurn
    from cutctx._loop.decisions import Decisions
    from cutctx._loop.ledger import Ledger
    from cutctx._loop.settings import Settings, Summarize
    from cutctx.formats import Format

__all__ = ["Pending", "Planner", "stages_of"]

_AS_SENT = (Action.KEEP, Action.MASK, Action.EXCERPT)
"""The actions a turn the request before held may be given back with (not a summary's)."""

type Stages = tuple[tuple[Transcript, CompactionPlan], ...]


@dataclass(frozen=True, slots=True)
class Pending:
    """A compaction planned over the current request, waiting for its summaries.

    No ``stages``: nothing is to be cut (a small window whose request still fits).
    """

    stages: Stages
    calls: tuple[tuple[SummarizationRequest, tuple[TranscriptTurn, ...]], ...]
    policy: CompactionPolicy

    def fulfil(self, summarize: Summarize | None) -> dict[str, str]:
        """Return each request's summary, from a synchronous ``summarize`` (see ``fulfil``)."""
        owner = "ContextWindow"
        return fulfil(self.calls, summarize, owner=owner, instead="window.aprepare(history)")

    async def afulfil(self, summarize: Summarize | None) -> dict[str, str]:
        """Return each request's summary, awaiting an async ``summarize``."""
        return await afulfil(self.calls, summarize, owner="ContextWindow")


def stages_of(policy: CompactionPolicy) -> tuple[CompactionPolicy, ...]:
    """Split a chain whose leading masking members come before one that may summarize.

    The window runs the masking members first and the rest over the view they give, so a
    summarizer is handed the stubs the request holds, not the originals behind them. What a
    member does is what it declares (``masks``, ``drops``: see ``CompactionPolicy``): the chain
    is split after its leading ``masks`` members when a later member does anything but mask or
    drop.
    """
    if not isinstance(policy, PolicyChain):
        return (policy,)
    members = policy.policies
    lead = 0
    while lead < len(members) and declares(members[lead], "masks"):
        lead += 1
    later = members[lead:]
    if not lead or all(declares(member, "masks") or declares(member, "drops") for member in later):
        return (policy,)
    first = members[0] if lead == 1 else PolicyChain(members[:lead])
    rest = later[0] if len(later) == 1 else PolicyChain(later)
    return (first, rest)


class Planner:
    """Plans compactions for one window: its format, settings and the default policy's stages."""

    __slots__ = (
        "_default",
        "_drops",
        "_floor",
        "_format",
        "_headroom",
        "_room",
        "_settings",
        "_stages",
    )

    def __init__(self, fmt: Format[Any], settings: Settings, policy: CompactionPolicy) -> None:
        self._format, self._settings = fmt, settings
        self._default, self._stages = policy, stages_of(policy)
        # How a small window is cut: as the window's default chain of version 3 says (with
        # summaries, as before: a summary is the last thing given up, and a deep cut gives up
        # summaries that a cut to just under compact_at keeps).
        self._floor = isinstance(policy, FloorChain) and settings.summarize is None
        # Version 4's: a window whose fixed turns alone take max_tokens - compact_at or more is
        # small at every step (a cut to compact_to itself would keep little beside them).
        self._room = self._floor and isinstance(policy, RoomChain)
        # And its small-window cuts drop whole exchanges, oldest first, masking none: a masked
        # result keeps nothing the agent can quote, while its call and stub keep their room.
        self._drops = _without_masking(policy) if self._room else self._stages
        # Under compact_at, a new summary still needs room for its label and its text's
        # overrun of the target: what a summary of nothing costs, twice.
        self._headroom = (
            2 * fmt.price_summary("", estimator=settings.estimator)
            if settings.summarize is not None
            else 0
        )

    def policy_for(self, current: Transcript) -> CompactionPolicy:
        """Return the policy a compaction of ``current`` plans with.

        That is priority mode's when the window has no policy of the caller's and a message has
        a priority (or ``priority=`` was given); else the window's policy.
        """
        settings = self._settings
        if settings.policy is None and (settings.priority is not None or is_prioritized(current)):
            return priority_policy(settings.estimator)
        return self._default

    def budget_for(self, history: Transcript) -> CompactionBudget:
        """Return the budget a plan over ``history`` is held to: ``compact_to`` or the floor."""
        settings = self._settings
        return CompactionBudget(
            max(settings.compact_to, layout(history, self.hard).untouchable_tokens),
            settings.protected_recent_turns,
            max_result_tokens=settings.max_result_tokens,
        )

    def plan(self, current: Transcript, policy: CompactionPolicy, ledger: Ledger) -> Pending:
        """Plan one compaction of the request ``current`` with ``policy``'s stages.

        Raises:
            BudgetUnsatisfiable: if the untouchable turns (and the exchanges they hold) alone
                exceed ``max_tokens``, naming the largest message among them.
            ValidationError: if a policy returns no plan, or asks to summarize more than
                ``summary_input_tokens``.
        """
        settings, hard = self._settings, self.hard
        shape = layout(current, hard)
        if shape.untouchable_tokens > settings.max_tokens:
            flags = shape.untouchable
            held = [turn for turn, flag in zip(current.turns, flags, strict=True) if flag]
            raise _too_big(
                held, shape.untouchable_tokens, settings.max_tokens, ledger, "untouchable messages"
            )
        stages = self._stages if policy is self._default else (policy,)
        untouchable = shape.untouchable_tokens
        top = max(settings.max_tokens - self._headroom, untouchable)
        fixed = current.request_tokens + sum(
            price for price, flag in zip(shape.tokens, shape.fixed, strict=True) if flag
        )
        small = untouchable > settings.compact_to or (
            self._room and fixed >= settings.max_tokens - settings.compact_at
        )
        floor = small and self._floor and policy is self._default
        if floor:
            # A small window: the untouchable turns alone pass compact_to, so no cut reaches
            # it (or, from version 4, the fixed turns take so much of it that a cut to
            # compact_to would keep little beside them). Everything that fits under max_tokens
            # is sent; once it does not, the cut aims at the fixed turns (the system prompt,
            # the pinned ones) and compact_to's share of the room beside them, so the next
            # steps append instead of cutting again (a cut to just under compact_at left room
            # for no step: one cut a step).
            if current.token_estimate() <= top:
                return Pending((), (), policy)
            room = max(0, top - fixed)
            budgets = [max(untouchable, fixed + room * settings.compact_to // settings.max_tokens)]
            stages = self._drops
        elif untouchable > settings.compact_at:
            # A small window planned by a policy of the caller's, priority mode or with
            # summaries: everything that fits under max_tokens is sent; once it does not, the
            # cut keeps the newest exchanges and leaves compact_to's share of the room that is
            # left free.
            if current.token_estimate() <= top:
                return Pending((), (), policy)
            room = top - untouchable
            budgets = [untouchable + room * settings.compact_to // settings.max_tokens]
        else:
            # compact_to when the untouchable turns leave it reachable; else, and when no plan
            # reaches it, destructive moves stop once the request is under compact_at.
            under_at = max(min(settings.compact_at, top), untouchable)
            budgets = (
                [under_at] if untouchable > settings.compact_to else [settings.compact_to, under_at]
            )
        summaries = any(turn.turn_id.startswith(SUMMARY_TURN_ID_PREFIX) for turn in current.turns)
        transcripts = [_with_summaries_pinned(current), current] if summaries else [current]
        made: Stages = ()
        refused: BudgetUnsatisfiable | None = None
        for transcript, budget in itertools.product(transcripts, budgets):
            try:
                made = self._run(transcript, stages, budget)
            except BudgetUnsatisfiable as error:
                refused = error
                continue  # the summaries alone do not fit: give them up
            if made[-1][1].tokens_after_estimate <= budget:
                break
        if not made:  # the policy itself found the budget unsatisfiable, every time
            assert refused is not None  # noqa: S101 - the loop ran at least once
            raise refused
        if _keeps_only_untouchable(made, hard):
            # Planned again with more room: up to max_tokens, or in a small window up to its
            # cut's aim (a refill to max_tokens would cut again on the next step).
            made = self._keeping_more(made, stages, transcripts, budgets[0] if floor else top, hard)
        plan = made[-1][1]
        if plan.tokens_after_estimate > settings.max_tokens:
            kept = [
                turn
                for turn, action in zip(made[-1][0].turns, plan.actions, strict=True)
                if action.action is not Action.DROP
            ]
            raise _too_big(
                kept,
                plan.tokens_after_estimate,
                settings.max_tokens,
                ledger,
                "untouchable messages and the exchanges they hold",
            )
        return Pending(made, self._calls(made), policy)

    def _keeping_more(
        self,
        made: Stages,
        stages: Sequence[CompactionPolicy],
        transcripts: Sequence[Transcript],
        top: int,
        hard: CompactionBudget,
    ) -> Stages:
        """Return a plan that keeps more than the untouchable turns ``made`` keeps, if one fits.

        The stages run again up to ``top`` (what ``max_tokens`` leaves), so the newest exchanges
        that fit are sent; no new summary is planned so close to ``max_tokens`` (its overrun
        would not fit). When dropping the oldest first still leaves the untouchable turns alone
        (the newest exchange is too big for ``top``), the exchanges that fit are chosen newest
        first, skipping the ones that do not, and held for the stages as pinned turns.
        """
        quiet = _without_summarizers(stages)
        for transcript in transcripts if quiet else ():
            for candidate in (transcript, _newest_fitting_pinned(transcript, hard, top)):
                if candidate is None:
                    continue
                try:
                    fuller = self._run(candidate, quiet, top)
                except BudgetUnsatisfiable:
                    continue
                if fuller[-1][1].tokens_after_estimate <= top and not _keeps_only_untouchable(
                    fuller, hard, transcript
                ):
                    return fuller
        return made

    def _run(self, current: Transcript, stages: Sequence[CompactionPolicy], budget: int) -> Stages:
        """Run ``stages`` over ``current``, each over the view the one before gives."""
        aim = CompactionBudget(budget, self._settings.protected_recent_turns)
        made: list[tuple[Transcript, CompactionPlan]] = []
        for policy in stages:
            if made:
                previous = made[-1][1]
                if previous.tokens_after_estimate <= budget:
                    break
                # The next stage plans over the view the masks give: a summarizer then
                # receives the stubs, as the request will hold them.
                current = CompactionExecutor().apply(current, previous).transcript
            plan = policy.decide(current, aim)
            if not isinstance(plan, CompactionPlan):
                raise ValidationError(
                    f"ContextWindow: the policy returned {type(plan).__name__}, "
                    "not a CompactionPlan",
                    details={"field": "policy"},
                )
            made.append((current, plan))
        return tuple(made)

    def _calls(
        self, stages: Stages
    ) -> tuple[tuple[SummarizationRequest, tuple[TranscriptTurn, ...]], ...]:
        """Return each summary request with the turns it covers, within the input bound."""
        bound = self._settings.summary_input_tokens
        calls = []
        for current, plan in stages:
            by_id = {turn.turn_id: turn for turn in current.turns}
            for request in plan.summarization_requests:
                turns = tuple(by_id[turn_id] for turn_id in request.turn_ids)
                size = sum(turn.token_estimate for turn in turns)
                if size > bound:
                    raise ValidationError(
                        f"ContextWindow: the policy asks to summarize {size} tokens in group "
                        f"{request.group_id!r}, over summary_input_tokens {bound}",
                        details={"group_id": request.group_id, "tokens": size},
                    )
                calls.append((request, turns))
        return tuple(calls)

    @property
    def quick_excerpts(self) -> bool:
        """Whether new results are excerpted quickly (``priced_excerpt``'s ``quick``).

        On the window's default chain of version 3 (a ``FloorChain``) they are; a window on an
        earlier default (restored from an earlier state) or on a policy of the caller's makes
        the exact excerpt, as it did before.
        """
        return isinstance(self._default, FloorChain)

    @property
    def top(self) -> int:
        """What a request may hold when more than its untouchable turns fit.

        That is ``max_tokens`` less a new summary's headroom.
        """
        return self._settings.max_tokens - self._headroom

    @property
    def hard(self) -> CompactionBudget:
        """The budget a request is laid out under: ``max_tokens``, the protected tail."""
        return CompactionBudget(self._settings.max_tokens, self._settings.protected_recent_turns)

    def units(self, turns: Sequence[TranscriptTurn]) -> Units:
        """Return the exchanges of ``turns`` under the window's protected tail."""
        return layout(Transcript(tuple(turns)), self.hard).units

    def only_untouchable(self, view: Sequence[TranscriptTurn]) -> bool:
        """Whether ``view`` holds nothing but untouchable turns (and the exchanges they hold)."""
        return _only_locked(self.units(view))

    def without_merges(
        self,
        decisions: Decisions,
        before: Decisions,
        ledger: Ledger,
        view_of: Callable[[Decisions], Sequence[TranscriptTurn]],
    ) -> Decisions:
        """Return ``decisions`` with the lone user messages a removal left behind another dropped.

        ``before`` are the decisions of the request before this compaction, ``view_of`` the view
        decisions make. When dropping the lone messages leaves only the untouchable turns, they
        are kept instead, with the exchange that separated each from the message before it (so
        nothing merges), if this cut dropped that exchange (a message a request lost never
        comes back), the request still fits under ``max_tokens`` (less a new summary's
        headroom) and nothing merges.
        """
        lone = self.merged(view_of(decisions), ledger)
        if not lone:
            return decisions
        dropped = decisions.copy()
        for index in lone:
            dropped.actions[index] = Action.DROP
        if not self.only_untouchable(view_of(dropped)):
            return dropped
        kept = decisions.copy()
        actions, held = kept.actions, before.actions
        units = self.units(ledger.turns)
        for index in lone:
            last = index - 1
            if last < 0 or actions[last] is not Action.DROP:
                continue
            members = range(units.unit_of[last], units.unit_last[units.unit_of[last]] + 1)
            if all(member < len(held) and held[member] in _AS_SENT for member in members):
                for member in members:  # as the request before sent it: kept, masked, excerpted
                    actions[member] = held[member]
                    if member in before.stubs:
                        kept.stubs[member] = before.stubs[member]
        view = view_of(kept)
        if sum(turn.token_estimate for turn in view) <= self.top and not self.merged(view, ledger):
            return kept
        return dropped

    def merged(self, view: Sequence[TranscriptTurn], ledger: Ledger) -> list[int]:
        """Return the held turns of lone user messages the format would merge behind another.

        Merging would change the earlier message (often the task) and every cached prefix with
        it; dropping the lone message instead is what dropping the oldest does next anyway.
        Only a one-turn, unpinned, unprotected user message with no call is dropped so.
        """
        rendered = self._format.render(Transcript(tuple(view)), ledger.binding(ledger.count))
        if not rendered.joined:
            return []
        tail = len(ledger.turns) - self._settings.protected_recent_turns
        dropped = []
        for turn in view:
            part = ledger.parts.get(turn.turn_id)
            if part is None or part.index not in rendered.joined:
                continue
            index = ledger.index_of[turn.turn_id]
            if (
                part.siblings == 1
                and turn.role is Role.USER
                and turn.tool_call_id is None
                and not turn.pinned
                and index < tail
            ):
                dropped.append(index)
        return dropped


def _without_masking(policy: CompactionPolicy) -> tuple[CompactionPolicy, ...]:
    """Return the stages of ``policy`` (a chain) without its members that mask results.

    Those are the ``ObservationMaskingPolicy`` members (``LargeResultMaskingPolicy`` too); the
    stub dropping and the dropping members stay, in their order.
    """
    assert isinstance(policy, PolicyChain)  # noqa: S101 - a RoomChain is a chain
    kept = [m for m in policy.policies if not isinstance(m, ObservationMaskingPolicy)]
    return stages_of(PolicyChain(kept))


def _without_summarizers(stages: Sequence[CompactionPolicy]) -> tuple[CompactionPolicy, ...]:
    """Return ``stages`` with their summarizing members left out (none left: empty).

    A summarizing member is one that declares ``summarizes`` (see ``CompactionPolicy``).
    """
    kept: list[CompactionPolicy] = []
    for stage in stages:
        members = stage.policies if isinstance(stage, PolicyChain) else (stage,)
        rest = [m for m in members if not declares(m, "summarizes")]
        if rest:
            kept.append(rest[0] if len(rest) == 1 else PolicyChain(rest))
    return tuple(kept)


def _keeps_only_untouchable(
    made: Stages, hard: CompactionBudget, read: Transcript | None = None
) -> bool:
    """Whether the request ``made`` gives keeps nothing but untouchable turns of its own.

    Such a request sends the system prompt, the pinned turns and the protected tail alone (with
    at most the summaries of what it cut); a higher budget (up to ``max_tokens``) is tried before
    it is sent. The request is judged as it will be read: the turns neither dropped nor
    summarized, as ``read`` has them (the stages' own transcript by default; the one before any
    turn was pinned for them), laid out again, so what the tail protects is counted from the
    request's own end; a turn in an exchange with an untouchable one counts with it (it cannot
    go without it).
    """
    transcript, plan = made[-1]
    removed = {
        turn.turn_id
        for turn, action in zip(transcript.turns, plan.actions, strict=True)
        if action.action in (Action.DROP, Action.SUMMARIZE)
    }
    if not removed:
        return False
    source = transcript if read is None else read
    kept = tuple(turn for turn in source.turns if turn.turn_id not in removed)
    return _only_locked(layout(Transcript(kept), hard).units)


def _only_locked(units: Units) -> bool:
    """Whether every exchange of ``units`` is locked (holds an untouchable turn)."""
    return all(units.locked[unit] for unit in units.unit_of)


def _newest_fitting_pinned(
    transcript: Transcript, hard: CompactionBudget, top: int
) -> Transcript | None:
    """Return ``transcript`` with the newest exchanges that fit under ``top`` pinned, or None.

    The exchanges are taken newest first, each one whose whole cost still fits beside the
    untouchable turns and the ones taken before it; one that does not fit is skipped, not an
    end. None when no exchange fits.
    """
    shape = layout(transcript, hard)
    units = shape.units
    room = top - shape.untouchable_tokens
    chosen: list[int] = []
    for index in range(len(transcript.turns) - 1, -1, -1):
        unit = units.unit_of[index]
        if unit != index or units.locked[unit]:
            continue
        if units.unit_tokens[unit] <= room:
            room -= units.unit_tokens[unit]
            chosen.append(unit)
    if not chosen:
        return None
    pinned: set[int] = set()
    for unit in chosen:
        pinned.update(range(unit, units.unit_last[unit] + 1))
    return Transcript(
        tuple(
            dataclasses.replace(turn, pinned=True) if index in pinned else turn
            for index, turn in enumerate(transcript.turns)
        )
    )


def _with_summaries_pinned(current: Transcript) -> Transcript:
    return Transcript(
        tuple(
            dataclasses.replace(turn, pinned=True)
            if turn.turn_id.startswith(SUMMARY_TURN_ID_PREFIX)
            else turn
            for turn in current.turns
        )
    )


def _too_big(
    turns: Sequence[TranscriptTurn], needed: int, max_tokens: int, ledger: Ledger, what: str
) -> BudgetUnsatisfiable:
    """Return the error naming the largest message among ``turns`` (which must be kept)."""
    sizes: dict[int, int] = {}
    for turn in turns:
        part = ledger.parts.get(turn.turn_id)
        if part is not None and part.index is not None:
            sizes[part.index] = sizes.get(part.index, 0) + turn.token_estimate
    index = max(sizes, key=lambda key: (sizes[key], -key)) if sizes else None
    where = "" if index is None else f"; messages[{index}] alone needs {sizes[index]}"
    return BudgetUnsatisfiable(
        f"the {what} need {needed} tokens, over the budget of {max_tokens}{where}",
        details={
            "untouchable_tokens": needed,
            "max_tokens": max_tokens,
            "untouchable_turn_count": len(turns),
            "index": index,
        },
    )
