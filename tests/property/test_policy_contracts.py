"""Every policy and every chain order keeps contracts 2, 3, 4, 5 and 8 on random transcripts.

The contracts are restated here, not read from ``cutctx._core.invariants``: a plan that
touches the untouchable set, splits an exchange, claims to fit while over, leaks an excerpt into
a stub, or differs between two runs fails; so does any exception other than
``BudgetUnsatisfiable``, and ``BudgetUnsatisfiable`` itself unless the untouchable set is over
budget. The transcripts (``tests.strategies``) hold exchanges that interleave and sit far apart.
"""

from __future__ import annotations

import itertools
import re
from typing import TYPE_CHECKING

import pytest
from baseaicore import sha256_of
from hypothesis import given, note

from cutctx import (
    DEFAULT_PLACEHOLDER,
    Action,
    BudgetUnsatisfiable,
    CompactionExecutor,
    CompactionPlan,
    CompactionPolicy,
    DropOldestPolicy,
    ObservationMaskingPolicy,
    PolicyChain,
    Role,
    SummarizingPolicy,
    Transcript,
    default_chain,
)
from tests.contract import rebuilt
from tests.oracle import Foreign
from tests.strategies import cases

if TYPE_CHECKING:
    from collections.abc import Callable

    from cutctx import CompactionBudget

STUB = re.compile(
    re.escape(DEFAULT_PLACEHOLDER) + r" \(original: (\d+) tokens, sha256:([0-9a-f]{64})\)"
)


def masking() -> ObservationMaskingPolicy:
    return ObservationMaskingPolicy()


def summarizing() -> SummarizingPolicy:
    return SummarizingPolicy("summaries/v1", min_span_turns=2)


def drop() -> DropOldestPolicy:
    return DropOldestPolicy()


BUILT_INS: dict[str, Callable[[], CompactionPolicy]] = {
    "mask": masking,
    "summarize": summarizing,
    "drop": drop,
}


def chain_of(*names: str) -> Callable[[], CompactionPolicy]:
    return lambda: PolicyChain([BUILT_INS[name]() for name in names])


POLICIES: dict[str, Callable[[], CompactionPolicy]] = {
    **BUILT_INS,
    "default_chain": lambda: default_chain(prompt_id="summaries/v1"),
    # every order of the three built-ins
    **{
        "+".join(order): chain_of(*order)
        for order in itertools.permutations(("mask", "summarize", "drop"))
    },
    # duplicates, shorter chains, a nested chain and foreign members
    "mask+mask": chain_of("mask", "mask"),
    "summarize+summarize+drop": chain_of("summarize", "summarize", "drop"),
    "summarize+mask+summarize": chain_of("summarize", "mask", "summarize"),
    "drop+mask+drop": chain_of("drop", "mask", "drop"),
    "summarize+drop": chain_of("summarize", "drop"),
    "nested": lambda: PolicyChain([summarizing(), PolicyChain([masking(), summarizing()]), drop()]),
    "foreign": lambda: PolicyChain(
        [Foreign(summarizing()), Foreign(masking()), summarizing(), Foreign(drop())]
    ),
}


def untouchable(transcript: Transcript, budget: CompactionBudget) -> list[bool]:
    """Contract 2's set: system, pinned and the last ``protected_recent_turns`` turns."""
    count = len(transcript.turns)
    return [
        turn.role == Role.SYSTEM or turn.pinned or count - position <= budget.protected_recent_turns
        for position, turn in enumerate(transcript.turns)
    ]


def assert_contracts(
    transcript: Transcript, budget: CompactionBudget, plan: CompactionPlan
) -> None:
    """Contracts 2, 3, 4 and 8, and the plan's figures, restated."""
    turns = transcript.turns
    actions = plan.actions
    assert [action.turn_id for action in actions] == [turn.turn_id for turn in turns]
    # Contract 2: the untouchable set is kept.
    for fixed, action in zip(untouchable(transcript, budget), actions, strict=True):
        if fixed:
            assert action.action is Action.KEEP, action
    # Contract 3: an exchange stays (KEEP/MASK mixed), or leaves by one action and one group.
    by_call: dict[str, set[tuple[str, str | None]]] = {}
    for turn, action in zip(turns, actions, strict=True):
        if turn.tool_call_id is None:
            continue
        stays = action.action in (Action.KEEP, Action.MASK)
        fate = ("stays", None) if stays else (action.action.value, action.summary_group)
        by_call.setdefault(turn.tool_call_id, set()).add(fate)
    for call, fates in by_call.items():
        assert len(fates) == 1, f"exchange {call} is split: {fates}"
    # Contract 8: a stub is the label, the original's estimate and its digest, nothing else;
    # and it is smaller than what it replaces.
    for turn, action in zip(turns, actions, strict=True):
        if action.action is Action.MASK:
            assert action.replacement is not None
            match = STUB.fullmatch(action.replacement.content)
            assert match is not None, action.replacement.content
            assert int(match.group(1)) == turn.token_estimate
            assert match.group(2) == sha256_of(turn.content)
            assert action.replacement.token_estimate < turn.token_estimate
    # Contract 4: the figures add up and the outcome is honest.
    kept = sum(
        turn.token_estimate
        for turn, action in zip(turns, actions, strict=True)
        if action.action is Action.KEEP
    )
    stubs = sum(action.replacement.token_estimate for action in actions if action.replacement)
    summaries = sum(request.target_tokens for request in plan.summarization_requests)
    assert plan.tokens_before == sum(turn.token_estimate for turn in turns)
    assert plan.tokens_after_estimate == kept + stubs + summaries
    assert plan.budget_unmet == (plan.tokens_after_estimate > budget.max_tokens)


@given(case=cases())
def test_every_policy_keeps_the_contracts_or_refuses_only_an_unsatisfiable_budget(
    case: tuple[Transcript, CompactionBudget],
) -> None:
    """Catches a plan that breaks contract 2, 3, 4 or 8 under any policy or chain order (a
    chain member splitting a real exchange through the projection included), an exception
    other than ``BudgetUnsatisfiable``, a ``BudgetUnsatisfiable`` for a satisfiable budget or
    with wrong numbers, an applied view whose total differs from the plan's estimate, a
    mutated input, or a plan that differs between two runs (contract 5).

    One transcript is checked under every policy in turn (generating it is the costly part);
    the failing policy's key is printed with a failing example.
    """
    transcript, budget = case
    fixed = untouchable(transcript, budget)
    floor = sum(t.token_estimate for t, f in zip(transcript.turns, fixed, strict=True) if f)
    before = Transcript(tuple(transcript.turns))
    for key, make in POLICIES.items():
        note(f"policy: {key}")
        policy = make()
        if floor > budget.max_tokens:
            with pytest.raises(BudgetUnsatisfiable) as caught:
                policy.decide(transcript, budget)
            assert caught.value.details == {
                "untouchable_tokens": floor,
                "max_tokens": budget.max_tokens,
                "untouchable_turn_count": sum(fixed),
            }
            continue
        plan = policy.decide(transcript, budget)
        assert_contracts(transcript, budget, plan)
        summaries = {
            request.group_id: f"summary of {len(request.turn_ids)} turns"
            for request in plan.summarization_requests
        }
        view = CompactionExecutor().apply(transcript, plan, summaries).transcript
        assert sum(turn.token_estimate for turn in view.turns) == plan.tokens_after_estimate
        assert view.token_estimate() == plan.tokens_after_estimate
        assert transcript == before
        again = make().decide(Transcript(tuple(transcript.turns)), budget)
        assert again.plan_hash() == plan.plan_hash()


@given(case=cases())
def test_a_policys_plan_is_the_plan_its_actions_make(
    case: tuple[Transcript, CompactionBudget],
) -> None:
    """Catches a policy's plan (held as columns, ``actions`` made on first read) that differs
    from the plan the public constructor makes from the same actions: in equality, canonical
    JSON, hash, or in the view and report ``apply`` gives for either.

    Every policy key is checked; the applied plans are compared before their actions are read.
    """
    transcript, budget = case
    fixed = untouchable(transcript, budget)
    if sum(t.token_estimate for t, f in zip(transcript.turns, fixed, strict=True) if f) > (
        budget.max_tokens
    ):
        return
    executor = CompactionExecutor()
    for key, make in POLICIES.items():
        note(f"policy: {key}")
        plan = make().decide(transcript, budget)
        summaries = {
            request.group_id: f"summary of {request.group_id}"
            for request in plan.summarization_requests
        }
        applied = executor.apply(transcript, plan, summaries)
        made = rebuilt(plan, transcript, budget)
        assert made == plan
        assert made.to_json() == plan.to_json()
        assert made.plan_hash() == plan.plan_hash()
        assert executor.apply(transcript, made, summaries) == applied
