"""What a policy says it does: ``masks``, ``drops``, ``summarizes``, read by the window's planner.

The planner reads the declared flags, never the policy's class, so a policy of the caller's own
that declares them is planned with as a built-in one is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

import pytest

from cutctx import (
    BoundedSummarizingPolicy,
    CharRatioEstimator,
    ContextWindow,
    DropOldestPolicy,
    ExcerptingPolicy,
    ObservationMaskingPolicy,
    PolicyChain,
    PriorityPolicy,
    SummarizingPolicy,
    default_messages_policy,
)
from cutctx._core.protocols import CAPABILITIES, declares
from cutctx._loop.planner import stages_of
from cutctx._policies.large import LargeResultMaskingPolicy
from cutctx._policies.stubs import StubDroppingPolicy

if TYPE_CHECKING:
    from cutctx import CompactionBudget, CompactionPlan, Transcript

CHARS = CharRatioEstimator()


class Masking:
    """A policy of the caller's own that masks, by delegating: it declares ``masks``."""

    masks: ClassVar[bool] = True

    def __init__(self) -> None:
        self._inner = ObservationMaskingPolicy(1)

    @property
    def name(self) -> str:
        return "my_masking"

    @property
    def version(self) -> str:
        return "1"

    def decide(self, transcript: Transcript, budget: CompactionBudget) -> CompactionPlan:
        return self._inner.decide(transcript, budget)


class Undeclared(Masking):
    """The same policy, declaring nothing."""

    masks: ClassVar[bool] = False


class TestDeclaredFlags:
    @pytest.mark.parametrize(
        ("policy", "declared"),
        [
            (ObservationMaskingPolicy(), {"masks"}),
            (LargeResultMaskingPolicy(), {"masks"}),
            (StubDroppingPolicy(), {"masks", "drops"}),
            (DropOldestPolicy(), {"drops"}),
            (PriorityPolicy(), {"drops"}),
            (SummarizingPolicy("p"), {"summarizes"}),
            (BoundedSummarizingPolicy("p", max_input_tokens=100), {"summarizes"}),
            (ExcerptingPolicy(), set()),
            (PolicyChain((DropOldestPolicy(),)), set()),
            (Masking(), {"masks"}),
            (Undeclared(), set()),
        ],
    )
    def test_each_policy_declares_what_it_does(self, policy: Any, declared: set[str]) -> None:
        assert {flag for flag in CAPABILITIES if declares(policy, flag)} == declared

    def test_only_true_declares(self) -> None:
        class Truthy:
            masks = 1
            drops = "yes"

        assert not declares(Truthy(), "masks")
        assert not declares(Truthy(), "drops")
        assert not declares(object(), "summarizes")


class TestThePlannerReadsTheFlags:
    def test_the_windows_default_chains_split_as_before(self) -> None:
        assert len(stages_of(default_messages_policy(version=2))) == 1
        split = stages_of(default_messages_policy(version=2, summarize=True))
        assert [stage.name for stage in split] == [
            "chain(large_result_masking@1.0.0+observation_masking@1.0.0)",
            (
                "chain(summarizing@1.0.0+stub_dropping@1.0.0+observation_masking@1.0.0"
                "+drop_oldest@1.0.0)"
            ),
        ]

    def test_a_policy_of_ones_own_that_declares_masks_runs_before_the_summarizer(self) -> None:
        """The window runs it as a stage of its own, so the summarizer is handed its stubs."""
        chain = PolicyChain((Masking(), SummarizingPolicy("p", min_span_turns=2)))
        assert [stage.name for stage in stages_of(chain)] == ["my_masking", "summarizing"]
        undeclared = PolicyChain((Undeclared(), SummarizingPolicy("p", min_span_turns=2)))
        assert stages_of(undeclared) == (undeclared,)

    def test_later_members_that_only_mask_or_drop_need_no_stage_of_their_own(self) -> None:
        only = PolicyChain((Masking(), PriorityPolicy(), DropOldestPolicy()))
        assert stages_of(only) == (only,)
        excerpting = PolicyChain((Masking(), ExcerptingPolicy()))
        assert len(stages_of(excerpting)) == 2

    def test_a_window_plans_with_a_declared_policy_of_ones_own(self) -> None:
        history: list[dict[str, Any]] = [{"role": "user", "content": "Fix the build."}]
        for step in range(40):
            call = {
                "id": f"c{step}",
                "type": "function",
                "function": {"name": "run", "arguments": "{}"},
            }
            history.append({"role": "assistant", "content": None, "tool_calls": [call]})
            body = "".join(f"step {step} line {n}\n" for n in range(60))
            history.append({"role": "tool", "tool_call_id": f"c{step}", "content": body})
        window = ContextWindow(
            "openai_chat",
            estimator=CHARS,
            max_tokens=2000,
            keep_first=1,
            policy=PolicyChain((Masking(), SummarizingPolicy("p"), DropOldestPolicy())),
            summarize=lambda _request, _turns: "summary",
        )
        request = window.prepare(history)
        assert request[0] is history[0]
        assert window.last is not None
        assert window.last.report.masked_turn_ids
