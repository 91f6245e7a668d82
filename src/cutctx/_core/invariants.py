"""The one gate every plan passes through, and the structure it reasons about.

``check_plan`` runs inside ``CompactionPlan``'s construction: there is no other way to build a
plan. It enforces contracts 2 (the untouchable set is kept, but for a tool result over the
budget's ``max_result_tokens``, which may be excerpted), 3 (an exchange travels together) and
4 (the budget outcome is honest), plus the plan's own arithmetic and bookkeeping, and the shape
of every excerpt. It collects every violation and reports them together.

``Layout`` is the structure policies share with the gate, so that both read "untouchable" and
"exchange" the same way.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field, replace
from itertools import compress
from operator import ge
from typing import TYPE_CHECKING

from baseaicore import ValidationError

from cutctx._core.actions import (
    ACTIONS,
    DROP,
    EXCERPT,
    EXCERPTED,
    FOLD,
    KEEP,
    KEPT,
    MASKED,
    REPLACED,
    STAYS,
    SUMMARIZE,
    SUMMARIZED,
    ActionTable,
    indices,
)
from cutctx._core.errors import budget_unsatisfiable
from cutctx._core.excerpts import parse_excerpt
from cutctx._core.values import (
    SUMMARY_TURN_ID_PREFIX,
    CompactionBudget,
    Role,
    SummarizationRequest,
    Transcript,
    TranscriptTurn,
)

if TYPE_CHECKING:
    from collections.abc import Iterable, MutableSequence, Sequence

__all__ = ["Layout", "Units", "check_plan", "fixed_flags", "layout"]

_MAX_REPORTED = 20


@dataclass(frozen=True, slots=True)
class Units:
    """The exchanges of a view (contract 3), one entry per turn.

    A unit is an exchange (the turns sharing a ``tool_call_id``) or a lone turn, named by the
    index of its earliest member: ``unit_of[i]`` is turn ``i``'s unit. Indexed by a unit,
    ``unit_last`` is its last member, ``unit_tokens`` its members' total and ``locked`` whether it
    holds an untouchable turn (which makes the whole unit unremovable); at other indices these
    hold the turn's own figures and mean nothing.
    """

    unit_of: array[int]
    unit_last: array[int]
    unit_tokens: MutableSequence[int]
    locked: bytearray


@dataclass(frozen=True, slots=True)
class Layout:
    """The untouchable set and the exchanges of one view under one budget.

    ``untouchable`` flags contract 2's set and ``fixed`` the part of it no budget changes (the
    SYSTEM and pinned turns); ``tokens`` holds each turn's estimate, ``total`` their sum and
    ``turn_ids`` the ids. ``units`` (the exchanges) are derived on first use: a plan that
    removes nothing never needs them. Flags are bytes and figures machine ints, so a
    layout costs a few bytes per turn and no objects. Shared between callers: never mutate it.
    """

    turns: tuple[TranscriptTurn, ...]
    turn_ids: tuple[str, ...]
    tokens: Sequence[int]
    fixed: bytes
    untouchable: bytearray
    untouchable_tokens: int
    untouchable_count: int
    total: int
    _units: Units | None = field(default=None, repr=False, compare=False)

    @property
    def units(self) -> Units:
        """The exchanges, derived from the turns' call ids once, on first use."""
        units = self._units
        if units is None:
            units = _units_of(self)
            object.__setattr__(self, "_units", units)
        return units

    def repriced(self, prices: Iterable[tuple[int, int]], total: int) -> Layout:
        """Return this layout with the turns in ``prices`` (index, estimate) re-priced.

        The layout of a view that only changes some bodies (masks), which keeps every turn, its
        role, pin and call id: the same units and untouchable set, other figures.
        """
        units = self.units
        tokens = list(self.tokens)
        unit_tokens = units.unit_tokens[:]  # an array or a list, copied as such
        unit_of = units.unit_of
        for index, estimate in prices:
            unit_tokens[unit_of[index]] -= tokens[index] - estimate
            tokens[index] = estimate
        return replace(
            self, tokens=tokens, total=total, _units=replace(units, unit_tokens=unit_tokens)
        )

    def require_satisfiable(self, budget: CompactionBudget) -> None:
        """Raise ``BudgetUnsatisfiable`` if the untouchable set alone is over ``budget``.

        What a policy asks before it decides. With ``budget.max_result_tokens`` set, an
        untouchable tool result over that cap counts at the cap: an upper bound of the price
        of its excerpt (the gate counts a built plan's excerpts at their own prices).
        """
        tokens = self.untouchable_tokens
        cap = budget.max_result_tokens
        if tokens > budget.max_tokens and cap is not None:
            tool, turns, prices = Role.TOOL, self.turns, self.tokens
            tokens -= sum(
                prices[index] - cap
                for index in indices(self.untouchable)
                if prices[index] > cap and turns[index].role is tool
            )
        if tokens > budget.max_tokens:
            raise budget_unsatisfiable(tokens, budget.max_tokens, self.untouchable_count)


def layout(transcript: Transcript, budget: CompactionBudget) -> Layout:
    """Return the untouchable set (contract 2) and the exchanges (contract 3) of ``transcript``.

    Computed once per transcript and ``protected_recent_turns`` and kept on the (immutable)
    transcript, so a policy and the gate that checks its plan share one pass.
    """
    cache = transcript._layouts  # the transcript keeps its layouts for this module
    known = cache.get(budget.protected_recent_turns)
    if isinstance(known, Layout):
        return known
    turns = transcript.turns
    fixed = fixed_flags(transcript)
    untouchable = bytearray(fixed)
    protected = min(budget.protected_recent_turns, len(turns))
    if protected:
        untouchable[-protected:] = b"\x01" * protected
    tokens = [turn.token_estimate for turn in turns]
    shape = Layout(
        turns,
        transcript.turn_ids(),
        tokens,
        fixed,
        untouchable,
        sum(compress(tokens, untouchable)) + transcript.request_tokens,
        untouchable.count(1),
        transcript.token_estimate(),
    )
    cache[budget.protected_recent_turns] = shape
    return shape


def fixed_flags(transcript: Transcript) -> bytes:
    """Return one flag per turn: whether it is SYSTEM or pinned (untouchable under any budget).

    Read from a layout the transcript already keeps when there is one.
    """
    known = next(iter(transcript._layouts.values()), None)
    if isinstance(known, Layout):
        return known.fixed
    system = Role.SYSTEM
    return bytes([turn.role is system or turn.pinned for turn in transcript.turns])


def _units_of(shape: Layout) -> Units:
    """Return the exchanges of the view ``shape`` describes (one pass over its turns)."""
    tokens, untouchable = shape.tokens, shape.untouchable
    unit_of = array("q", range(len(tokens)))
    unit_last = array("q", unit_of)
    # Machine ints hold any sane total; a view beyond 2**63 tokens keeps Python ints.
    unit_tokens: MutableSequence[int] = array("q", tokens) if shape.total < 2**63 else list(tokens)
    locked = bytearray(untouchable)
    first_member: dict[str, int] = {}
    for index, turn in enumerate(shape.turns):
        call = turn.tool_call_id
        if call is None:
            continue
        unit = first_member.setdefault(call, index)
        if unit != index:
            unit_of[index] = unit
            unit_last[unit] = index
            unit_tokens[unit] += tokens[index]
            if untouchable[index]:
                locked[unit] = True
    return Units(unit_of, unit_last, unit_tokens, locked)


def check_plan(  # noqa: PLR0917 - one call site, the plan's constructor, passes its fields
    transcript: Transcript,
    budget: CompactionBudget,
    table: ActionTable,
    requests: Sequence[SummarizationRequest],
    tokens_before: int,
    tokens_after_estimate: int,
    budget_unmet: bool,
) -> None:
    """Validate a plan's actions and figures against the transcript and budget it is for.

    Raises:
        BudgetUnsatisfiable: if the untouchable set alone is over the budget (no plan may exist).
        ValidationError: naming every violated invariant, with the full list in
            ``details["violations"]``.
    """
    shape = layout(transcript, budget)
    same = table.turn_ids == shape.turn_ids
    _require_satisfiable(shape, budget, table if same else None)
    problems: list[str] = []
    if not same:
        problems.append("the actions do not name the transcript's turns one for one, in order")
        _raise(problems)

    after = _check_actions(shape, table, problems) + transcript.request_tokens
    if EXCERPT in table.kinds:
        _check_excerpts(shape, budget, table, problems)
    after += _check_requests(table, requests, problems)

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


def _require_satisfiable(
    shape: Layout, budget: CompactionBudget, table: ActionTable | None
) -> None:
    """Raise ``BudgetUnsatisfiable`` if the untouchable set, as ``table`` sends it, is over.

    An untouchable turn the plan excerpts counts at its excerpt's price (whether it may be
    excerpted is ``_check_excerpts``'s question); every other one at its own.
    """
    tokens = shape.untouchable_tokens
    if tokens > budget.max_tokens and table is not None and EXCERPT in table.kinds:
        prices, stubs, untouchable = shape.tokens, table.stub_tokens, shape.untouchable
        tokens -= sum(
            prices[index] - stubs[index]
            for index in indices(table.kinds.translate(EXCERPTED))
            if untouchable[index]
        )
    if tokens > budget.max_tokens:
        raise budget_unsatisfiable(tokens, budget.max_tokens, shape.untouchable_count)


def _check_excerpts(
    shape: Layout, budget: CompactionBudget, table: ActionTable, problems: list[str]
) -> None:
    """Check every excerpt: of a tool result, smaller than it, within the cap, well formed."""
    cap = budget.max_result_tokens
    ids, stubs, texts = table.turn_ids, table.stub_tokens, table.stub_texts
    for index in indices(table.kinds.translate(EXCERPTED)):
        turn = shape.turns[index]
        name = ids[index]
        if turn.role is not Role.TOOL:
            problems.append(f"excerpted turn {name!r} is not a tool result ({turn.role.name})")
            continue
        if cap is None:
            problems.append(f"excerpted turn {name!r}: the budget sets no max_result_tokens")
            continue
        if turn.token_estimate <= stubs[index]:
            # A result under the cap may be excerpted too (results that arrive together share
            # the room: the window), but an excerpt must cost less than the original.
            problems.append(
                f"excerpt of {name!r} is not smaller than the result "
                f"({stubs[index]} >= {turn.token_estimate})"
            )
        if stubs[index] > cap:
            problems.append(
                f"excerpt of {name!r} is over max_result_tokens ({stubs[index]} > {cap})"
            )
        text = texts[index]
        assert text is not None  # noqa: S101 - every excerpted turn has its excerpt
        if parse_excerpt(turn.content, text) is None:
            problems.append(
                f"excerpt of {name!r} is not the original's first lines, one elision line "
                "and its last lines"
            )


def _check_actions(shape: Layout, table: ActionTable, problems: list[str]) -> int:
    """Check contracts 2 and 3 and that masks shrink; return the tokens the view keeps."""
    kinds, ids, tokens = table.kinds, table.turn_ids, shape.tokens
    # Contract 2: every untouchable turn is kept (or excerpted: see _check_excerpts).
    for index in indices(shape.untouchable):
        if kinds[index] != KEEP and kinds[index] != EXCERPT:
            problems.append(
                f"untouchable turn {ids[index]!r} is not kept ({ACTIONS[kinds[index]].name})"
            )
    after = sum(compress(tokens, kinds.translate(KEPT)))
    if table.stub_tokens:
        after += sum(compress(table.stub_tokens, kinds.translate(REPLACED)))
        masked = kinds.translate(MASKED)
        if any(map(ge, compress(table.stub_tokens, masked), compress(tokens, masked))):
            for index in indices(masked):
                if table.stub_tokens[index] >= tokens[index]:
                    problems.append(
                        f"masked turn {ids[index]!r} would not shrink "
                        f"({tokens[index]} -> {table.stub_tokens[index]} tokens)"
                    )
    # Contract 3: each member of an exchange agrees with its earliest member, in the action
    # (KEEP, MASK and EXCERPT agree: all stay) and in the summary group. A plan that removes nothing
    # cannot split an exchange.
    if SUMMARIZE in kinds or DROP in kinds:
        unit_of = shape.units.unit_of
        folded = kinds.translate(FOLD)
        agree = bytes(map(folded.__getitem__, unit_of)) == folded
        if agree and table.groups:
            agree = tuple(map(table.groups.__getitem__, unit_of)) == table.groups
        if not agree:
            _name_splits(unit_of, table, folded, problems)
    return after


def _name_splits(
    unit_of: Sequence[int], table: ActionTable, folded: bytes, problems: list[str]
) -> None:
    """Add one problem for each exchange whose members disagree (the slow path of a refusal)."""
    kinds, ids = table.kinds, table.turn_ids
    groups = table.groups or (None,) * len(kinds)
    split: set[int] = set()
    for index, unit in enumerate(unit_of):
        if unit == index or unit in split:
            continue
        if folded[index] != folded[unit] or groups[index] != groups[unit]:
            split.add(unit)
            problems.append(
                f"exchange of {ids[unit]!r} is split "
                f"({ACTIONS[kinds[unit]].name} beside {ACTIONS[kinds[index]].name} "
                f"on {ids[index]!r})"
            )


def _check_requests(
    table: ActionTable,
    requests: Sequence[SummarizationRequest],
    problems: list[str],
) -> int:
    """Check that requests and summary groups match one for one; return the summaries' tokens."""
    ids = table.turn_ids
    groups: dict[str, list[int]] = {}
    if table.groups:
        summarized = table.kinds.translate(SUMMARIZED)
        for group, index in zip(
            compress(table.groups, summarized), indices(summarized), strict=True
        ):
            assert group is not None  # noqa: S101 - a summarized turn names its group
            groups.setdefault(group, []).append(index)
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
        named = tuple(map(ids.__getitem__, members))
        # A group may be named freely (only the built-in policies derive ids from digests):
        # what must hold is that requests and groups match.
        if request.turn_ids != named:
            problems.append(f"request {group!r} lists other turns than its group holds")
        if members[0] < last_start:
            problems.append(f"request {group!r} is out of order (by earliest turn)")
        last_start = members[0]
    for group in groups.keys() - seen:
        problems.append(f"group {group!r} has no summarization request")
    if seen:
        present = set(compress(ids, table.kinds.translate(STAYS)))
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
