"""A window's decisions over its history, per turn, in the form the policies draft them.

Every held turn has an ``Action`` (kept, masked to a stub, dropped, or folded into a summary);
the summaries carry the caller's text and their price as rendered. A compaction plans over the
*current request* (these decisions applied) and ``fold`` maps its plans back onto the history's
turns; ``plan`` turns the decisions into the one ``CompactionPlan`` over the history (through
the gate), and the executor makes the view from it, so no second view builder exists.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Final

from baseaicore import ValidationError

from cutctx._core.excerpts import parse_excerpt
from cutctx._core.executor import CompactionExecutor
from cutctx._core.metadata import SUMMARY_GROUP_METADATA
from cutctx._core.values import (
    SUMMARY_TURN_ID_PREFIX,
    Action,
    CompactionBudget,
    Role,
    Transcript,
    group_id_for,
)
from cutctx._loop.jsondata import refused
from cutctx._loop.recall import RECALL_TOOL
from cutctx._policies.draft import Draft, Group, build_plan, estimator_marks
from cutctx._policies.excerpting import excerpt_of

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from cutctx._core.plan import CompactionPlan
    from cutctx._core.protocols import CompactionPolicy, TokenEstimator
    from cutctx._core.report import CompactionReport
    from cutctx._core.values import TranscriptTurn, TurnReplacement
    from cutctx._loop.settings import Settings
    from cutctx.formats import Scanned

__all__ = [
    "MIN_SHARED_EXCERPT",
    "Decisions",
    "SavedDecisions",
    "SavedGroup",
    "Summary",
    "excerpts_of",
    "keeps_a_line",
    "saved_decisions",
    "shared_excerpts",
]


def excerpts_of(
    read: Scanned[Any] | None, settings: Settings, *, quick: bool
) -> dict[str, TurnReplacement]:
    """Return the excerpt of each tool result ``read`` priced over the result cap, by turn id.

    An excerpt is decided once, when its result arrives (its elision lines name the recall tool
    when recall is on); one whose framing alone is over the cap is not made. With
    ``settings.whole_lines`` (the messages default of version 4) neither is one that keeps no
    line of the result whole (``keeps_a_line``): such a result is sent whole, unless the
    request has no room for it (``shared_excerpts`` cuts it then). ``quick``: as
    ``priced_excerpt``'s (``Planner.quick_excerpts``).
    """
    cap = settings.new_result_cap
    if read is None or cap is None:
        return {}
    tool = RECALL_TOOL if settings.recall else None
    made = {}
    for turn in read.turns:
        if turn.role is Role.TOOL and turn.token_estimate > cap:
            excerpt = excerpt_of(turn, cap, settings.estimator, tool, quick=quick)
            if excerpt is not None and (
                not settings.whole_lines or keeps_a_line(turn.content, excerpt.content)
            ):
                made[turn.turn_id] = excerpt
    return made


def keeps_a_line(original: str, excerpt: str) -> bool:
    """Whether ``excerpt`` keeps at least one line of ``original`` whole.

    An excerpt of one line of JSON (a tool result on one line, as most function-calling tools
    return theirs) keeps only that line's head, cut at a character: nothing of it a later
    message can quote whole, nor a value the head cuts through.
    """
    kept = parse_excerpt(original, excerpt)
    return kept is None or kept.head + kept.tail > 0


MIN_SHARED_EXCERPT: Final = 200
"""The fewest tokens a result is cut to when several large results must fit in one request."""


def shared_excerpts(
    turns: Sequence[TranscriptTurn],
    excerpts: dict[str, TurnReplacement],
    room: int,
    settings: Settings,
    *,
    quick: bool,
) -> dict[str, TurnReplacement]:
    """Return ``excerpts`` with the tool results among ``turns`` cut to fit ``room`` together.

    Results that arrive at once (parallel calls, or one step's several large files) share the
    room the rest of the request leaves them: each result under an even share keeps what it
    has, and the others are excerpted to the share of what is left, never below
    ``MIN_SHARED_EXCERPT`` tokens (nor over the result cap). ``excerpts`` is returned as it is
    when they fit.
    """
    results = [turn for turn in turns if turn.role is Role.TOOL]

    def price(turn: TranscriptTurn) -> int:
        return excerpts.get(turn.turn_id, turn).token_estimate

    if not results or sum(map(price, results)) <= room:
        return excerpts
    ordered = sorted(results, key=price)
    left, cap = room, MIN_SHARED_EXCERPT
    for position, turn in enumerate(ordered):
        share = left // (len(ordered) - position)
        if price(turn) > share:
            cap = max(MIN_SHARED_EXCERPT, share)
            break
        left -= price(turn)
    if (
        settings.max_result_tokens is not None
    ):  # every plan is checked against the cap: never over it
        cap = min(cap, settings.max_result_tokens)
    tool = RECALL_TOOL if settings.recall else None
    made = dict(excerpts)
    for turn in results:
        if price(turn) > cap:
            excerpt = excerpt_of(turn, cap, settings.estimator, tool, quick=quick)
            if excerpt is not None:
                made[turn.turn_id] = excerpt
    return made


@dataclass(frozen=True, slots=True)
class Summary:
    """A fulfilled summary: its turns (ledger indices), request, text and rendered price."""

    members: tuple[int, ...]
    target_tokens: int
    prompt_id: str
    text: str
    cost: int


class Decisions:
    """One action per held turn, the stubs of the masked ones and the summaries, by group id."""

    __slots__ = ("actions", "stubs", "summaries")

    def __init__(
        self,
        actions: list[Action],
        stubs: dict[int, TurnReplacement] | None = None,
        summaries: dict[str, Summary] | None = None,
    ) -> None:
        self.actions = actions
        self.stubs: dict[int, TurnReplacement] = {} if stubs is None else stubs
        self.summaries: dict[str, Summary] = {} if summaries is None else summaries

    def copy(self) -> Decisions:
        """Return a copy that may be changed without touching these."""
        return Decisions(list(self.actions), dict(self.stubs), dict(self.summaries))

    def reheaded(self, old: int, new: int) -> Decisions:
        """Return these decisions over a head of ``new`` turns instead of ``old`` (kept)."""
        moved = new - old
        return Decisions(
            [Action.KEEP] * new + self.actions[old:],
            {index + moved: stub for index, stub in self.stubs.items()},
            {
                key: replace(summary, members=tuple(member + moved for member in summary.members))
                for key, summary in self.summaries.items()
            },
        )

    def keep(self, count: int) -> None:
        """Keep ``count`` more turns (the new messages)."""
        self.actions.extend([Action.KEEP] * count)

    def truncate(self, count: int) -> bool:
        """Forget the decisions from turn ``count`` on; return whether they were all keeps."""
        if any(action is not Action.KEEP for action in self.actions[count:]):
            return False
        del self.actions[count:]
        return True

    def fold(
        self,
        stages: Sequence[tuple[Transcript, CompactionPlan]],
        texts: Mapping[str, str],
        index_of: Mapping[str, int],
        turns: Sequence[TranscriptTurn],
        price: Callable[[str], int],
    ) -> Decisions:
        """Return these decisions with the plans made over the current request folded in.

        ``stages`` are the plans, each over the request the one before it gave; ``texts`` the
        summaries of their requests; ``price(text)`` what a summary costs as rendered.

        Raises:
            ValidationError: if a plan masks a summary.
        """
        actions, stubs = list(self.actions), dict(self.stubs)
        summaries = dict(self.summaries)
        folded: dict[str, list[int]] = {}
        for current, plan in stages:
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
                    old = summaries.pop(turn.turn_id.removeprefix(SUMMARY_TURN_ID_PREFIX))
                    members: Sequence[int] = old.members
                else:
                    members = (index,)
                for member in members:
                    stubs.pop(member, None)
                    actions[member] = kind
                    if kind is Action.MASK:
                        assert action.replacement is not None  # noqa: S101 - the gate ensures it
                        stubs[member] = action.replacement
                    elif kind is Action.SUMMARIZE:
                        assert action.summary_group is not None  # noqa: S101 - the gate ensures
                        folded.setdefault(action.summary_group, []).append(member)
        for _, plan in stages:
            for request in plan.summarization_requests:
                members = sorted(folded[request.group_id])
                text = texts[request.group_id]
                group_id = group_id_for([turns[member].turn_id for member in members])
                summaries[group_id] = Summary(
                    tuple(members), request.target_tokens, request.prompt_id, text, price(text)
                )
        return Decisions(actions, stubs, summaries)

    def plan(
        self,
        history: Transcript,
        budget: CompactionBudget,
        policy: CompactionPolicy,
        estimator: TokenEstimator,
    ) -> CompactionPlan:
        """Return the plan over ``history`` (the held turns) that these decisions are."""
        turns = history.turns
        actions = self.actions[: len(turns)]
        stubs = self.stubs
        tokens = sum(
            turn.token_estimate
            if action is Action.KEEP
            else stubs[index].token_estimate
            if action is Action.MASK or action is Action.EXCERPT
            else 0
            for index, (turn, action) in enumerate(zip(turns, actions, strict=True))
        ) + sum(summary.target_tokens for summary in self.summaries.values())
        ratio, name = estimator_marks(estimator) if stubs else (None, None)
        draft = Draft(
            list(actions),
            tokens,
            [stubs.get(index) for index in range(len(turns))] if stubs else [],
            [
                Group(summary.members, summary.target_tokens, summary.prompt_id)
                for summary in self.summaries.values()
            ],
            ratio,
            name,
        )
        return build_plan(history, budget, draft, policy.name, policy.version)

    def view(
        self, history: Transcript, plan: CompactionPlan
    ) -> tuple[list[TranscriptTurn], CompactionReport]:
        """Return the view ``plan`` gives (summaries priced as rendered) and its report."""
        texts = {group_id: summary.text for group_id, summary in self.summaries.items()}
        done = CompactionExecutor().apply(history, plan, texts)
        summaries = self.summaries
        view = []
        for turn in done.transcript.turns:
            summary = summaries.get(turn.metadata.get(SUMMARY_GROUP_METADATA, ""))
            view.append(turn if summary is None else replace(turn, token_estimate=summary.cost))
        return view, done.report


type Run = tuple[str, int]
"""Consecutive held turns: the first one's turn id, and how many they are."""


@dataclass(frozen=True, slots=True)
class SavedGroup:
    """A summary as a state holds it: its members as runs, and the summary."""

    runs: tuple[Run, ...]
    target_tokens: int
    prompt_id: str
    text: str
    cost: int


@dataclass(frozen=True, slots=True)
class SavedDecisions:
    """Decisions as a restored state holds them until its history is read: by turn id.

    The stubs and excerpts each name their turn; the dropped turns and a summary's members are
    runs in the order the window holds them. ``over`` places them on the held turns.
    """

    masked: tuple[tuple[str, TurnReplacement], ...] = ()
    excerpted: tuple[tuple[str, TurnReplacement], ...] = ()
    dropped: tuple[Run, ...] = ()
    groups: tuple[SavedGroup, ...] = ()

    @property
    def named(self) -> int:
        """How many held turns these decisions name (each at most once in a state that holds)."""
        runs = [*self.dropped, *(run for group in self.groups for run in group.runs)]
        return len(self.masked) + len(self.excerpted) + sum(length for _, length in runs)

    def over(self, turns: Sequence[TranscriptTurn], index_of: Mapping[str, int]) -> Decisions:
        """Return these decisions over the held ``turns`` (``index_of``: by turn id).

        Raises:
            ValidationError: if a decision names a turn the history does not hold.
        """
        count = len(turns)
        actions = [Action.KEEP] * count
        stubs: dict[int, TurnReplacement] = {}
        summaries: dict[str, Summary] = {}
        try:
            for action, named in ((Action.MASK, self.masked), (Action.EXCERPT, self.excerpted)):
                for turn_id, stub in named:
                    index = index_of[turn_id]
                    actions[index] = action
                    stubs[index] = stub
            for index in _indices(self.dropped, index_of, count):
                actions[index] = Action.DROP
            for group in self.groups:
                members = tuple(_indices(group.runs, index_of, count))
                for member in members:
                    actions[member] = Action.SUMMARIZE
                key = group_id_for([turns[member].turn_id for member in members])
                summaries[key] = Summary(
                    members, group.target_tokens, group.prompt_id, group.text, group.cost
                )
        except (KeyError, ValueError) as error:
            raise refused(
                f"the state does not fit the history ({type(error).__name__}: {error})"
            ) from None
        return Decisions(actions, stubs, summaries)


def saved_decisions(decisions: Decisions, turns: Sequence[TranscriptTurn]) -> SavedDecisions:
    """Return ``decisions`` over the held ``turns`` as a state holds them (``SavedDecisions``)."""
    actions, stubs = decisions.actions, decisions.stubs
    named = sorted(stubs.items())
    return SavedDecisions(
        tuple(
            (turns[index].turn_id, stub) for index, stub in named if actions[index] is Action.MASK
        ),
        tuple(
            (turns[index].turn_id, stub)
            for index, stub in named
            if actions[index] is Action.EXCERPT
        ),
        _runs([index for index, action in enumerate(actions) if action is Action.DROP], turns),
        tuple(
            SavedGroup(
                _runs(summary.members, turns),
                summary.target_tokens,
                summary.prompt_id,
                summary.text,
                summary.cost,
            )
            for summary in decisions.summaries.values()
        ),
    )


def _runs(indices: Sequence[int], turns: Sequence[TranscriptTurn]) -> tuple[Run, ...]:
    """Return ascending turn ``indices`` as runs: ``(first turn id, how many turns)``."""
    runs: list[list[Any]] = []
    end = -1
    for index in indices:
        if index == end:
            runs[-1][1] += 1
        else:
            runs.append([turns[index].turn_id, 1])
        end = index + 1
    return tuple((turn_id, length) for turn_id, length in runs)


def _indices(runs: Sequence[Run], index_of: Mapping[str, int], count: int) -> list[int]:
    """Return the turn indices of ``runs``.

    Raises:
        KeyError, ValueError: for a run that names a turn the history lacks, or runs past the
            ``count`` turns held.
    """
    indices: list[int] = []
    for first, length in runs:
        start = index_of[first]
        if start + length > count:
            raise ValueError(f"the run {[first, length]!r:.40} is not in the history")
        indices.extend(range(start, start + length))
    return indices
