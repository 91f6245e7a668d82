"""The one gate every plan passes through, and the structure it reasons about.

``check_plan`` runs inside ``CompactionPlan``'s construction: there is no other way to build a
plan. It enforces contracts 2 (the untouchable set is kept), 3 (an exchange travels together) and
4 (the budget outcome is honest), plus the plan's own arithmetic and bookkeeping. It collects
every violation and reports them together.

``Layout`` is the structure policies share with the gate, so that both read "untouchable" and
"exchange" the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from baseaicore import ValidationError

from cutctx._errors import budget_unsatisfiable
from cutctx._values import (
    SUMMARY_TURN_ID_PREFIX,
    Action,
    CompactionBudget,
    Role,
    SummarizationRequest,
    Transcript,
    TurnAction,
    group_id_for,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["Layout", "check_plan", "layout"]

_MAX_REPORTED = 20


@dataclass(frozen=True, slots=True)
class Layout:
    """The untouchable set and the exchanges of one transcript under one budget.

    ``units`` lists every exchange (turns sharing a ``tool_call_id``) and every lone turn, by
    their earliest member; ``unit_of[i]`` is turn ``i``'s unit; ``locked[u]`` is true when a unit
    holds an untouchable turn, which makes the whole unit unremovable.
    """

    untouchable: list[bool]
    units: list[list[int]]
    unit_of: list[int]
    locked: list[bool]
    untouchable_tokens: int
    untouchable_count: int

    def require_satisfiable(self, budget: CompactionBudget) -> None:
        """Raise ``BudgetUnsatisfiable`` if the untouchable set alone is over ``budget``."""
        if self.untouchable_tokens > budget.max_tokens:
            raise budget_unsatisfiable(
                self.untouchable_tokens, budget.max_tokens, self.untouchable_count
            )


def layout(transcript: Transcript, budget: CompactionBudget) -> Layout:
    """Compute the untouchable set (contract 2) and the exchanges (contract 3) in one pass."""
    turns = transcript.turns
    first_protected = len(turns) - budget.protected_recent_turns
    untouchable: list[bool] = []
    units: list[list[int]] = []
    unit_of: list[int] = []
    locked: list[bool] = []
    unit_by_call: dict[str, int] = {}
    tokens = 0
    count = 0
    system = Role.SYSTEM
    for index, turn in enumerate(turns):
        fixed = turn.role is system or turn.pinned or index >= first_protected
        untouchable.append(fixed)
        if fixed:
            tokens += turn.token_estimate
            count += 1
        call = turn.tool_call_id
        unit = unit_by_call.get(call) if call is not None else None
        if unit is None:
            unit = len(units)
            units.append([index])
            locked.append(fixed)
            if call is not None:
                unit_by_call[call] = unit
        else:
            units[unit].append(index)
            if fixed:
                locked[unit] = True
        unit_of.append(unit)
    return Layout(untouchable, units, unit_of, locked, tokens, count)


def check_plan(  # noqa: PLR0917 - one call site, the plan's constructor, passes its fields
    transcript: Transcript,
    budget: CompactionBudget,
    actions: Sequence[TurnAction],
    requests: Sequence[SummarizationRequest],
    tokens_before: int,
    tokens_after_estimate: int,
    budget_unmet: bool,
) -> None:
    """Validate a plan's contents against the transcript and budget it is for.

    Raises:
        BudgetUnsatisfiable: if the untouchable set alone is over the budget (no plan may exist).
        ValidationError: naming every violated invariant, with the full list in
            ``details["violations"]``.
    """
    shape = layout(transcript, budget)
    shape.require_satisfiable(budget)
    turns = transcript.turns
    problems: list[str] = []
    if len(actions) != len(turns) or any(
        action.turn_id != turn.turn_id for action, turn in zip(actions, turns, strict=True)
    ):
        problems.append("the actions do not name the transcript's turns one for one, in order")
        _raise(problems)

    groups: dict[str, list[int]] = {}
    after = 0
    for index, (action, turn) in enumerate(zip(actions, turns, strict=True)):
        kind = action.action
        if kind is Action.KEEP:
            after += turn.token_estimate
        elif shape.untouchable[index]:
            problems.append(f"untouchable turn {turn.turn_id!r} is not kept ({kind.name})")
        elif kind is Action.MASK:
            replacement = action.replacement
            assert replacement is not None  # noqa: S101 - TurnAction guarantees it
            after += replacement.token_estimate
            if replacement.token_estimate >= turn.token_estimate:
                problems.append(
                    f"masked turn {turn.turn_id!r} would not shrink "
                    f"({turn.token_estimate} -> {replacement.token_estimate} tokens)"
                )
        elif kind is Action.SUMMARIZE:
            assert action.summary_group is not None  # noqa: S101 - TurnAction guarantees it
            groups.setdefault(action.summary_group, []).append(index)

    _check_exchanges(shape, actions, problems)
    after += _check_requests(groups, requests, actions, problems)

    total = transcript.token_estimate()
    if tokens_before != total:
        problems.append(f"tokens_before is {tokens_before}, the transcript holds {total}")
    if tokens_after_estimate != after:
        problems.append(
            f"tokens_after_estimate is {tokens_after_estimate}, the actions give {after}"
        )
    if budget_unmet != (after > budget.max_tokens):
        problems.append(
            f"budget_unmet is {budget_unmet} for {after} tokens against {budget.max_tokens}"
        )
    if problems:
        _raise(problems)


def _check_exchanges(
    shape: Layout,
    actions: Sequence[TurnAction],
    problems: list[str],
) -> None:
    """Contract 3: every exchange is wholly in the view, wholly dropped, or wholly in one group."""
    keep, mask = Action.KEEP, Action.MASK
    for members in shape.units:
        if len(members) == 1:
            continue
        first = actions[members[0]]
        stays = first.action is keep or first.action is mask
        for index in members[1:]:
            other = actions[index]
            if stays:
                same = other.action is keep or other.action is mask
            else:
                same = other.action is first.action and other.summary_group == first.summary_group
            if not same:
                problems.append(
                    f"exchange of {first.turn_id!r} is split "
                    f"({first.action.name} beside {other.action.name} on {other.turn_id!r})"
                )
                break


def _check_requests(
    groups: dict[str, list[int]],
    requests: Sequence[SummarizationRequest],
    actions: Sequence[TurnAction],
    problems: list[str],
) -> int:
    """Check that requests and summary groups match one for one; return the summaries' tokens."""
    tokens = 0
    seen: set[str] = set()
    last_start = -1
    for request in requests:
        group = request.group_id
        tokens += request.target_tokens
        if group in seen:
            problems.append(f"group {group!r} is requested twice")
            continue
        seen.add(group)
        members = groups.get(group)
        if members is None:
            problems.append(f"request {group!r} names no summarized turn")
            continue
        ids = tuple(actions[index].turn_id for index in members)
        if request.turn_ids != ids:
            problems.append(f"request {group!r} lists other turns than its group holds")
        if group != group_id_for(ids):
            problems.append(f"group id {group!r} is not the digest of its turn ids")
        if members[0] < last_start:
            problems.append(f"request {group!r} is out of order (by earliest turn)")
        last_start = members[0]
    for group in groups.keys() - seen:
        problems.append(f"group {group!r} has no summarization request")
    if seen:
        present = {
            action.turn_id for action in actions if action.action in (Action.KEEP, Action.MASK)
        }
        for group in sorted(seen):
            if SUMMARY_TURN_ID_PREFIX + group in present:
                problems.append(f"summary turn id {SUMMARY_TURN_ID_PREFIX + group!r} is taken")
    return tokens


def _raise(problems: list[str]) -> None:
    """Raise one ValidationError that names every violation."""
    shown = "; ".join(problems[:3])
    more = f" (+{len(problems) - 3} more)" if len(problems) > 3 else ""
    raise ValidationError(
        f"plan violates {len(problems)} invariant(s): {shown}{more}",
        details={"violations": problems[:_MAX_REPORTED], "violation_count": len(problems)},
    )
