"""``explain``: one short reason per turn for what a plan does with it.

The reasons are read from the plan, the transcript and the budget alone (never from a policy), so
they explain a stored plan as well as a fresh one. See docs/records.md for every reason.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from baseaicore import ValidationError

from cutctx._core.actions import DROP, EXCERPT, KEEP, MASK
from cutctx._core.executor import plan_holds
from cutctx._core.invariants import layout
from cutctx._core.plan import CompactionPlan, table_of
from cutctx._core.values import CompactionBudget, Role, Transcript

if TYPE_CHECKING:
    from cutctx._core.invariants import Layout

__all__ = ["explain"]


def explain(
    plan: CompactionPlan, transcript: Transcript, budget: CompactionBudget
) -> tuple[str, ...]:
    """Return one short reason per turn of ``transcript``, in order, for what ``plan`` does.

    Each reason starts with what happens (``untouchable``, ``kept``, ``masked``,
    ``excerpted``, ``summarized``, ``dropped``) and says why, with the figures that matter;
    the same arguments give the same reasons.

    .. versionadded:: 0.1.0

    .. versionchanged:: 0.1.1
       Explains excerpts.

    >>> from cutctx import CompactionBudget, DropOldestPolicy, Role, Transcript, TranscriptTurn
    >>> t = Transcript((TranscriptTurn("u1", Role.USER, "a", 5),
    ...                 TranscriptTurn("u2", Role.USER, "b", 5)))
    >>> budget = CompactionBudget(6, protected_recent_turns=1)
    >>> explain(DropOldestPolicy().decide(t, budget), t, budget)
    ('dropped: removed while over budget', 'untouchable: protected tail (the last turn)')

    Raises:
        PlanTranscriptMismatch: if ``plan`` was not built for ``transcript``.
        ValidationError: if ``plan`` does not hold under ``budget`` (it was made for another
            budget), or an argument is of the wrong type.
        BudgetUnsatisfiable: if the untouchable set alone is over ``budget``.
    """
    _check(plan, transcript, budget)
    shape = layout(transcript, budget)
    turns = transcript.turns
    fits = plan.tokens_before <= budget.max_tokens
    kept = _kept_reason(plan, fits=fits)
    protected = budget.protected_recent_turns
    tail = "untouchable: protected tail (the last " + (
        "turn)" if protected == 1 else f"{protected} turns)"
    )
    summaries = _summary_reasons(plan, shape)
    units = None if fits else shape.units  # a plan for a transcript that fits cuts nothing
    sizes = Counter(units.unit_of) if units is not None else Counter[int]()
    reasons: list[str] = []
    for index, (_id, code, _text, stub_tokens, group) in enumerate(table_of(plan).rows()):
        turn = turns[index]
        if code == KEEP:
            if turn.role is Role.SYSTEM:
                reason = "untouchable: system turn"
            elif turn.pinned:
                reason = "untouchable: pinned"
            elif shape.untouchable[index]:
                reason = tail
            elif units is not None and units.locked[units.unit_of[index]]:
                reason = "kept: its exchange holds an untouchable turn"
            else:
                reason = kept
        elif code == MASK:
            what = "old tool result" if turn.role is Role.TOOL else f"{turn.role.value} turn body"
            reason = (
                f"masked: {what} stubbed while over budget "
                f"({turn.token_estimate} → {stub_tokens} tokens)"
            )
        elif code == EXCERPT:
            where = " (untouchable)" if shape.untouchable[index] else ""
            reason = (
                f"excerpted: tool result over the cap of {budget.max_result_tokens} tokens"
                f"{where} ({turn.token_estimate} → {stub_tokens} tokens)"
            )
        elif code == DROP:
            assert units is not None  # noqa: S101 - a plan that drops was over budget
            size = sizes[units.unit_of[index]]
            reason = (
                f"dropped with its exchange {turn.tool_call_id} ({size} turns) while over budget"
                if size > 1
                else "dropped: removed while over budget"
            )
        else:
            assert group is not None  # noqa: S101 - a summarized turn names its group
            reason = summaries[group]
        reasons.append(reason)
    return tuple(reasons)


def _check(plan: CompactionPlan, transcript: Transcript, budget: CompactionBudget) -> None:
    """Raise unless the arguments are cutctx values and ``plan`` holds for the other two."""
    if not isinstance(plan, CompactionPlan):
        raise _wrong("plan", "a cutctx.CompactionPlan", plan)
    if not isinstance(transcript, Transcript):
        raise _wrong("transcript", "a cutctx.Transcript", transcript)
    if not isinstance(budget, CompactionBudget):
        raise _wrong("budget", "a cutctx.CompactionBudget", budget)
    plan_holds(plan, transcript, budget)


def _kept_reason(plan: CompactionPlan, *, fits: bool) -> str:
    """Return the reason of a turn kept although it could have been cut."""
    if fits:
        return "kept: the transcript fits the budget"
    if plan.budget_unmet:
        return "kept: the policy had no move left for it (budget unmet)"
    return "kept: the budget fits without cutting it"


def _summary_reasons(plan: CompactionPlan, shape: Layout) -> dict[str, str]:
    """Return each summary group's reason: its id, turns and tokens before and after."""
    position = {turn_id: index for index, turn_id in enumerate(shape.turn_ids)}
    reasons: dict[str, str] = {}
    for request in plan.summarization_requests:
        span = sum(shape.tokens[position[turn_id]] for turn_id in request.turn_ids)
        count = len(request.turn_ids)
        reasons[request.group_id] = (
            f"summarized in group {request.group_id} ({count} turn{'' if count == 1 else 's'}, "
            f"{span} → {request.target_tokens} tokens)"
        )
    return reasons


def _wrong(name: str, expected: str, value: object) -> ValidationError:
    return ValidationError(
        f"explain(): {name} must be {expected}, got {type(value).__name__}",
        details={"field": name, "expected": expected},
    )
