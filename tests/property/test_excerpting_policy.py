"""With a result cap, excerpting chains keep every contract, as amended for excerpts.

Restated from docs/contract.md, not read from the code: an untouchable turn is kept or
excerpted; only a tool result over the cap is excerpted, within the cap, as its head lines, one
elision line naming its digest and its tail lines; every result over the cap is excerpted when
any excerpt fits; a masked stub names the original's estimate and digest, never an excerpt;
exchanges stay whole; ``BudgetUnsatisfiable`` only when the untouchable set, each result over
the cap at most at the cap, cannot fit. And without a cap an excerpting member changes nothing.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from baseaicore import sha256_of
from hypothesis import given, note

from cutctx import (
    DEFAULT_PLACEHOLDER,
    Action,
    BudgetUnsatisfiable,
    CompactionExecutor,
    CompactionPlan,
    DropOldestPolicy,
    ExcerptingPolicy,
    ObservationMaskingPolicy,
    PolicyChain,
    PriorityPolicy,
    Role,
    SummarizingPolicy,
    Transcript,
)
from tests.excerpt_cases import bare_elision, readings
from tests.oracle import Foreign
from tests.strategies import capped_cases, cases

if TYPE_CHECKING:
    from collections.abc import Callable

    from cutctx import CompactionBudget, CompactionPolicy


def chars(text: str) -> int:
    return math.ceil(len(text) / 4)


TOOL = "cutctx_recall"
"""The recall tool the chains whose name ends in ``+recall`` name."""

CHAINS: dict[str, Callable[[], CompactionPolicy]] = {
    "excerpt": ExcerptingPolicy,
    "excerpt+default": lambda: PolicyChain(
        (
            ExcerptingPolicy(),
            ObservationMaskingPolicy(),
            SummarizingPolicy("p", min_span_turns=2),
            DropOldestPolicy(),
        )
    ),
    "excerpt+mask0+drop+recall": lambda: PolicyChain(
        (ExcerptingPolicy(recall_tool=TOOL), ObservationMaskingPolicy(0), DropOldestPolicy())
    ),
    "excerpt+priority": lambda: PolicyChain(
        (ExcerptingPolicy(), PriorityPolicy(mask_results=True))
    ),
    "foreign": lambda: PolicyChain(
        (Foreign(ExcerptingPolicy()), Foreign(ObservationMaskingPolicy(0)), DropOldestPolicy())
    ),
}


def untouchable(transcript: Transcript, budget: CompactionBudget) -> list[bool]:
    count = len(transcript.turns)
    return [
        turn.role is Role.SYSTEM or turn.pinned or count - index <= budget.protected_recent_turns
        for index, turn in enumerate(transcript.turns)
    ]


def excerptable(turn_text: str, estimate: int, cap: int, tool: str | None = None) -> bool:
    """Whether any excerpt of a result fits the cap: its text is not empty and the smallest
    excerpt (the bare elision line) fits beside the turn's framing."""
    framing = estimate - chars(turn_text)
    return bool(turn_text) and framing + chars(bare_elision(turn_text, chars, tool)) <= cap


def assert_amended_contracts(
    transcript: Transcript, budget: CompactionBudget, plan: CompactionPlan, name: str
) -> None:
    cap = budget.max_result_tokens
    assert cap is not None
    fixed = untouchable(transcript, budget)
    fits = transcript.token_estimate() <= budget.max_tokens
    after = 0
    for turn, action, locked in zip(transcript.turns, plan.actions, fixed, strict=True):
        kind = action.action
        over = turn.role is Role.TOOL and turn.token_estimate > cap
        if locked:
            assert kind in (Action.KEEP, Action.EXCERPT), action
        if kind is Action.EXCERPT:
            assert over
            replacement = action.replacement
            assert replacement is not None
            assert replacement.token_estimate <= cap
            found = readings(turn.content, replacement.content)
            assert found, replacement.content
            said = found[0][3]
            assert said.group(3) == sha256_of(turn.content)
            assert replacement.token_estimate == max(
                0, turn.token_estimate - chars(turn.content) + chars(replacement.content)
            )
        elif kind is Action.KEEP and over and not (name == "foreign" and fits):
            # Excerpting ran first: a result it left whole has no excerpt at all. (A chain
            # cannot know a foreign member's limit is not the budget: it skips it once fitting.)
            tool = TOOL if name.endswith("+recall") else None
            assert not excerptable(turn.content, turn.token_estimate, cap, tool)
        if kind is Action.MASK:
            replacement = action.replacement
            assert replacement is not None
            assert replacement.content == (
                f"{DEFAULT_PLACEHOLDER} (original: {turn.token_estimate} tokens, "
                f"sha256:{sha256_of(turn.content)})"
            )
        if kind in (Action.KEEP,):
            after += turn.token_estimate
        elif kind in (Action.MASK, Action.EXCERPT):
            assert action.replacement is not None
            after += action.replacement.token_estimate
    after += sum(request.target_tokens for request in plan.summarization_requests)
    assert plan.tokens_after_estimate == after
    assert plan.budget_unmet == (after > budget.max_tokens)
    # Contract 3: the members of an exchange all stay, or all leave by one action and group.
    fates: dict[str, set[tuple[str, str | None]]] = {}
    for turn, action in zip(transcript.turns, plan.actions, strict=True):
        if turn.tool_call_id is not None:
            stays = action.action in (Action.KEEP, Action.MASK, Action.EXCERPT)
            fate = ("stays", None) if stays else (action.action.value, action.summary_group)
            fates.setdefault(turn.tool_call_id, set()).add(fate)
    assert all(len(fate) == 1 for fate in fates.values()), fates


def floors(transcript: Transcript, budget: CompactionBudget, tool: str | None) -> tuple[int, int]:
    """The untouchable set with each result over the cap at the cap, and with those that have
    no excerpt at all at their full price (the gate's figure is at most the second)."""
    cap = budget.max_result_tokens
    assert cap is not None
    bound = worst = 0
    for turn, locked in zip(transcript.turns, untouchable(transcript, budget), strict=True):
        if not locked:
            continue
        over = turn.role is Role.TOOL and turn.token_estimate > cap
        bound += cap if over else turn.token_estimate
        possible = over and excerptable(turn.content, turn.token_estimate, cap, tool)
        worst += cap if possible else turn.token_estimate
    return bound, worst


@given(case=capped_cases())
def test_excerpting_chains_keep_every_contract_as_amended(
    case: tuple[Transcript, CompactionBudget],
) -> None:
    """Catches an untouchable turn masked or dropped under a cap, an excerpt of a turn that is
    no tool result or not over the cap, an excerpt over the cap or not made of the original's
    lines, an over-cap result left whole although an excerpt fits, a stub naming the excerpt
    instead of the original, a split exchange, dishonest figures, and a BudgetUnsatisfiable
    that a cap should have prevented (or a plan that should not exist)."""
    transcript, budget = case
    note(repr(budget))
    for name, make in CHAINS.items():
        bound, worst = floors(transcript, budget, TOOL if name.endswith("+recall") else None)
        refused: dict[str, Any] | None = None
        try:
            plan = make().decide(transcript, budget)
        except BudgetUnsatisfiable as error:
            refused = error.details
        if refused is not None:
            assert bound > budget.max_tokens or worst > budget.max_tokens, name
            assert refused["untouchable_tokens"] > budget.max_tokens
            continue
        assert bound <= budget.max_tokens, name
        assert_amended_contracts(transcript, budget, plan, name)
        again = make().decide(Transcript(transcript.turns), budget)
        assert again.canonical_json() == plan.canonical_json()


@given(case=capped_cases())
def test_a_stub_of_an_excerpted_result_names_the_original_even_in_a_view(
    case: tuple[Transcript, CompactionBudget],
) -> None:
    """Catches a view fed back in whose excerpted results are masked with the excerpt's own
    digest or estimate: the stub must name what the model can no longer see, the original."""
    transcript, budget = case
    try:
        plan = ExcerptingPolicy().decide(transcript, budget)
    except BudgetUnsatisfiable:
        return
    view = CompactionExecutor().apply(transcript, plan).transcript
    # Down to the system and pinned turns: every other result of the view is masked.
    fixed = sum(t.token_estimate for t in view.turns if t.role is Role.SYSTEM or t.pinned)
    again = ObservationMaskingPolicy(0).decide(view, type(budget)(fixed, 0))
    for original, action in zip(transcript.turns, again.actions, strict=True):
        if action.action is Action.MASK:
            assert action.replacement is not None
            assert action.replacement.content == (
                f"{DEFAULT_PLACEHOLDER} (original: {original.token_estimate} tokens, "
                f"sha256:{sha256_of(original.content)})"
            )


@given(case=cases())
def test_without_a_cap_an_excerpting_member_changes_no_plan(
    case: tuple[Transcript, CompactionBudget],
) -> None:
    """Catches an excerpting member that, with the cap off (the 0.1 default), changes a chain's
    actions or figures, or its refusal: only the chain's name may differ."""
    transcript, budget = case
    members = (
        ObservationMaskingPolicy(),
        SummarizingPolicy("p", min_span_turns=2),
        DropOldestPolicy(),
    )
    outcomes = []
    for chain in (PolicyChain((ExcerptingPolicy(), *members)), PolicyChain(members)):
        try:
            data = chain.decide(transcript, budget).to_dict()
        except BudgetUnsatisfiable as error:
            outcomes.append(error.details)
            continue
        data.pop("policy_name")
        outcomes.append(data)
    assert outcomes[0] == outcomes[1]
