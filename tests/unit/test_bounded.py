"""BoundedSummarizingPolicy: oldest exchanges first, only as many as needed, bounded groups."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from baseaicore import ValidationError

from cutctx import (
    Action,
    BoundedSummarizingPolicy,
    CompactionBudget,
    CompactionExecutor,
    PolicyChain,
    SummarizingPolicy,
    Transcript,
)
from tests.golden_cases import assistant, system, tool, user

if TYPE_CHECKING:
    from cutctx import CompactionPlan


def groups(plan: CompactionPlan) -> list[tuple[tuple[str, ...], int]]:
    return [(r.turn_ids, r.target_tokens) for r in plan.summarization_requests]


def oracle(sizes: list[int], limit: int, cap: int, ratio: float) -> list[list[int]]:
    """The rule over lone turns, written out: take turns oldest first while over ``limit``;
    pack them into groups of at most ``cap`` tokens; a turn over ``cap`` ends the group."""
    total = sum(sizes)
    out: list[list[int]] = []
    current: list[int] = []
    held = 0
    for index, size in enumerate(sizes):
        if total <= limit:
            break
        if size > cap:
            if current:
                out.append(current)
            current, held = [], 0
            continue
        if current and held + size > cap:
            out.append(current)
            current, held = [], 0
        before = max(1, round(held * ratio)) if current else 0
        current.append(index)
        held += size
        total += max(1, round(held * ratio)) - before - size
    if current:
        out.append(current)
    return out


class TestBoundedSummarizingPolicy:
    def test_name_version_and_settings(self) -> None:
        policy = BoundedSummarizingPolicy("summaries/v1", max_input_tokens=500)
        assert (policy.name, policy.version) == ("bounded_summarizing", "1.0.0")
        assert (policy.prompt_id, policy.max_input_tokens, policy.target_ratio) == (
            "summaries/v1",
            500,
            0.2,
        )
        assert repr(policy) == (
            "BoundedSummarizingPolicy('summaries/v1', max_input_tokens=500, target_ratio=0.2)"
        )

    def test_nothing_is_planned_when_the_transcript_fits(self) -> None:
        transcript = Transcript(tuple(user(f"u{k}", 10) for k in range(6)))
        plan = BoundedSummarizingPolicy("p", max_input_tokens=20).decide(
            transcript, CompactionBudget(60, 0)
        )
        assert plan.summarization_requests == ()

    def test_a_large_span_becomes_several_bounded_requests(self) -> None:
        transcript = Transcript(tuple(user(f"u{k}", 100) for k in range(10)))
        plan = BoundedSummarizingPolicy("p", max_input_tokens=250).decide(
            transcript, CompactionBudget(500, 2)
        )
        assert groups(plan) == [
            (("u0", "u1"), 40),
            (("u2", "u3"), 40),
            (("u4", "u5"), 40),
            (("u6",), 20),  # three groups leave 520: one more turn is folded, no more
        ]
        assert plan.tokens_after_estimate == 300 + 3 * 40 + 20
        assert not plan.budget_unmet
        summaries = {r.group_id: "s" for r in plan.summarization_requests}
        view = CompactionExecutor().apply(transcript, plan, summaries)
        assert len(view.transcript.turns) == 4 + 3

    @pytest.mark.parametrize("seed", range(8))
    def test_groups_match_the_rule_written_out(self, seed: int) -> None:
        sizes = [(seed * 37 + k * 53) % 300 + 5 for k in range(14)]
        transcript = Transcript(tuple(user(f"u{k}", size) for k, size in enumerate(sizes)))
        limit = sum(sizes) // 3
        plan = BoundedSummarizingPolicy("p", max_input_tokens=400, target_ratio=0.25).decide(
            transcript, CompactionBudget(limit, 0)
        )
        expected = oracle(sizes, limit, 400, 0.25)
        assert [list(ids) for ids, _ in groups(plan)] == [[f"u{k}" for k in g] for g in expected]
        for ids, _ in groups(plan):
            assert sum(sizes[int(turn_id[1:])] for turn_id in ids) <= 400

    def test_an_exchange_over_the_bound_is_left_and_ends_the_group(self) -> None:
        transcript = Transcript(
            (
                system("s", 5),
                user("u0", 50),
                assistant("a1", 10, call="a1"),
                tool("t1", 900, call="a1"),
                user("u2", 50),
                user("u3", 50),
                user("u4", 50),
            )
        )
        plan = BoundedSummarizingPolicy("p", max_input_tokens=200).decide(
            transcript, CompactionBudget(200, 1)
        )
        assert groups(plan)[0][0] == ("u0",)
        assert groups(plan)[1][0] == ("u2", "u3")
        kinds = {a.turn_id: a.action for a in plan.actions}
        assert kinds["a1"] is Action.KEEP
        assert kinds["t1"] is Action.KEEP
        assert plan.budget_unmet

    def test_untouchable_turns_are_never_folded(self) -> None:
        transcript = Transcript(
            (user("u0", 100), user("u1", 100, pinned=True), user("u2", 100), user("u3", 100))
        )
        plan = BoundedSummarizingPolicy("p", max_input_tokens=1000).decide(
            transcript, CompactionBudget(250, 1)
        )
        assert [ids for ids, _ in groups(plan)] == [("u0",), ("u2",)]

    def test_in_a_chain_after_masking_it_folds_what_masking_left(self) -> None:
        transcript = Transcript(tuple(user(f"u{k}", 100) for k in range(6)))
        chain = PolicyChain([BoundedSummarizingPolicy("p", max_input_tokens=150)])
        plan = chain.decide(transcript, CompactionBudget(450, 1))
        assert [ids for ids, _ in groups(plan)] == [("u0",), ("u1",)]

    def test_the_1_0_0_summarizing_policy_is_unchanged(self) -> None:
        transcript = Transcript(tuple(user(f"u{k}", 100) for k in range(10)))
        plan = SummarizingPolicy("p").decide(transcript, CompactionBudget(500, 2))
        assert groups(plan) == [(tuple(f"u{k}" for k in range(8)), 160)]

    @pytest.mark.parametrize(
        ("kwargs", "match"),
        [
            ({"prompt_id": ""}, "prompt_id"),
            ({"max_input_tokens": 0}, "max_input_tokens"),
            ({"max_input_tokens": -3}, "max_input_tokens"),
            ({"target_ratio": 0}, "target_ratio"),
            ({"target_ratio": True}, "target_ratio"),
        ],
    )
    def test_bad_settings_are_refused(self, kwargs: dict[str, object], match: str) -> None:
        settings: dict[str, object] = {"prompt_id": "p", "max_input_tokens": 10, **kwargs}
        with pytest.raises(ValidationError, match=match):
            BoundedSummarizingPolicy(**settings)  # type: ignore[arg-type]
