"""A result whose excerpt would keep none of its lines whole is sent whole while it fits.

Function-calling tools mostly return one line of JSON; an excerpt of one line is its head cut at
a character, so a later message can quote nothing of it whole. The window's default (messages
default version 4) sends such a result whole when the request has room for it, and excerpts
results of several lines as before; version 3 (a restored state of it) excerpts both.
"""

from __future__ import annotations

import json
from typing import Any

from cutctx import CharRatioEstimator, ContextWindow, default_messages_policy
from cutctx._core.excerpts import excerpt
from cutctx._loop.decisions import keeps_a_line
from cutctx.formats import openai_chat
from tests.format_validators import chat_problems

CHARS = CharRatioEstimator()  # four characters a token


def price(text: str) -> int:
    return CHARS.estimate_tokens(text)


ONE_LINE = json.dumps({"records": [{"id": f"R{n:04}", "price": n * 7} for n in range(100)]})
LINES = "".join(f"line {n}: {'x' * 30}\n" for n in range(80))


def history(result: str) -> list[dict[str, Any]]:
    call = {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
    return [
        {"role": "system", "content": "rules " + "r" * 400},
        {"role": "user", "content": "find the record"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": result},
    ]


def window(version: int | None = None, max_tokens: int = 2_000) -> ContextWindow:
    policy = None if version is None else default_messages_policy(estimator=CHARS, version=version)
    return ContextWindow(
        "openai_chat", max_tokens=max_tokens, keep_first=1, estimator=CHARS, policy=policy
    )


class TestKeepsALine:
    def test_an_excerpt_of_one_line_keeps_no_line_whole(self) -> None:
        made = excerpt(ONE_LINE, 100, price)
        assert made is not None
        assert not keeps_a_line(ONE_LINE, made)

    def test_an_excerpt_of_several_lines_keeps_its_first_and_last_lines(self) -> None:
        made = excerpt(LINES, 100, price)
        assert made is not None
        assert keeps_a_line(LINES, made)

    def test_a_text_that_is_no_excerpt_counts_as_keeping_its_lines(self) -> None:
        assert keeps_a_line(LINES, "something else")


class TestTheDefaultSendsOneLineResultsWhole:
    def test_a_one_line_result_over_the_cap_is_sent_whole_when_it_fits(self) -> None:
        assert openai_chat.count_tokens(history(ONE_LINE), estimator=CHARS) < 2_000
        assert price(ONE_LINE) > 2_000 // 4  # over the default cap, a quarter of the window
        request = window().prepare(history(ONE_LINE))
        assert request[-1]["content"] == ONE_LINE
        assert not chat_problems(request)

    def test_the_default_given_as_policy_sends_it_whole_too(self) -> None:
        request = window(version=4).prepare(history(ONE_LINE))
        assert request[-1]["content"] == ONE_LINE

    def test_with_summaries_the_result_is_excerpted_as_before(self) -> None:
        summarizing = ContextWindow(
            "openai_chat",
            max_tokens=2_000,
            keep_first=1,
            estimator=CHARS,
            summarize=lambda _request, _turns: "summary",
        )
        assert summarizing.prepare(history(ONE_LINE))[-1]["content"] != ONE_LINE

    def test_version_3_excerpts_the_same_result(self) -> None:
        request = window(version=3).prepare(history(ONE_LINE))
        assert request[-1]["content"] != ONE_LINE
        assert "cutctx:" in request[-1]["content"]

    def test_a_result_of_several_lines_over_the_cap_is_still_excerpted(self) -> None:
        assert price(LINES) > 2_000 // 4
        request = window().prepare(history(LINES))
        assert request[-1]["content"] != LINES
        assert request[-1]["content"].startswith("line 0: ")

    def test_a_one_line_result_without_room_is_cut_to_fit(self) -> None:
        big = json.dumps([{"id": f"R{n:05}", "note": "y" * 40} for n in range(400)])
        assert price(big) > 2_000
        request = window().prepare(history(big))
        assert openai_chat.count_tokens(request, estimator=CHARS) <= 2_000
        assert request[-1]["content"] != big
        assert not chat_problems(request)

    def test_a_restored_state_of_version_3_goes_on_excerpting(self) -> None:
        old = window(version=3)
        old.prepare(history(ONE_LINE)[:2])
        state = json.loads(json.dumps(old.state()))
        restored = ContextWindow.from_state(state, estimator=CHARS)
        assert restored.policy.version == "1.1.0"
        assert restored.prepare(history(ONE_LINE)) == old.prepare(history(ONE_LINE))
        assert restored.prepare(history(ONE_LINE))[-1]["content"] != ONE_LINE
