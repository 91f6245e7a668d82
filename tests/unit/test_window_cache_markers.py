"""The caller's prompt-cache markers: moved each turn, they are not a new history."""

from __future__ import annotations

import copy
import random
from typing import Any

import pytest

from cutctx import ContextWindow
from tests.bedrock_validators import bedrock_problems
from tests.format_validators import anthropic_problems

TASK = "TASK: make the build green again."
SYSTEM = "You are a careful coding agent."
EPHEMERAL = {"type": "ephemeral"}


def anthropic_session(steps: int, seed: int = 5, lines: int = 12) -> list[dict[str, Any]]:
    """An Anthropic agent's history: a text, a call, a result of random size, per step."""
    rng = random.Random(seed)
    history: list[dict[str, Any]] = [{"role": "user", "content": [{"type": "text", "text": TASK}]}]
    for step in range(steps):
        call = f"toolu_{step:02d}"
        history.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": f"step {step}: reading the next file"},
                    {"type": "tool_use", "id": call, "name": "read", "input": {"n": step}},
                ],
            }
        )
        body = f"file {step}\n" + "\n".join(
            f"line {n} of {step}: " + "w" * rng.choice([20, 60, 120]) for n in range(lines)
        )
        history.append(
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": call, "content": body}],
            }
        )
    return history


def marked_last(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The history as Claude Code sends it: a fresh copy, the last block of the last message
    marked (and no other message)."""
    sent = copy.deepcopy(history)
    sent[-1]["content"][-1]["cache_control"] = dict(EPHEMERAL)
    return sent


def markers(request: list[dict[str, Any]]) -> list[tuple[int, int]]:
    """Where the request's ``cache_control`` markers are: (message, block) positions."""
    found: list[tuple[int, int]] = []
    for index, message in enumerate(request):
        content = message["content"]
        if isinstance(content, list):
            found.extend(
                (index, position)
                for position, block in enumerate(content)
                if "cache_control" in block
            )
    return found


def without_markers(request: list[dict[str, Any]]) -> list[dict[str, Any]]:
    plain = copy.deepcopy(request)
    for message in plain:
        if isinstance(message["content"], list):
            for block in message["content"]:
                block.pop("cache_control", None)
    return plain


class TestAMovingCacheMarker:
    def test_a_marker_moved_every_turn_resets_nothing_and_goes_out_where_the_caller_put_it(
        self,
    ) -> None:
        history = anthropic_session(30)
        marked = ContextWindow("anthropic", max_tokens=6000, keep_first=1, system=SYSTEM)
        plain = ContextWindow("anthropic", max_tokens=6000, keep_first=1, system=SYSTEM)
        for end in range(3, len(history) + 1, 2):
            sent = marked_last(history[:end])
            before = copy.deepcopy(sent)
            request = marked.prepare(sent)
            assert sent == before  # the caller's messages are never changed
            assert without_markers(request) == plain.prepare(history[:end])
            assert markers(request) == [(len(request) - 1, len(request[-1]["content"]) - 1)]
            assert request[-1] is sent[-1]  # the caller's own message, its marker with it
            assert anthropic_problems(request) == []
        assert marked.stats.resets == 0
        assert marked.stats.compactions == plain.stats.compactions > 0
        assert marked.stats.stable_prefix_tokens == plain.stats.stable_prefix_tokens

    def test_an_excerpted_result_keeps_the_callers_marker(self) -> None:
        history = anthropic_session(8, lines=80)
        window = ContextWindow("anthropic", max_tokens=6000, keep_first=1)
        for end in range(3, len(history) + 1, 2):
            sent = marked_last(history[:end])
            request = window.prepare(sent)
            last = request[-1]["content"][-1]
            assert "left out" in last["content"]  # the window excerpted it
            assert last["cache_control"] == EPHEMERAL
            assert len(markers(request)) == 1
        assert window.stats.resets == 0

    def test_with_the_windows_own_breakpoint_there_are_at_most_four(self) -> None:
        history = anthropic_session(30)
        window = ContextWindow("anthropic", max_tokens=6000, keep_first=1, cache_breakpoints=True)
        for end in range(3, len(history) + 1, 2):
            sent = marked_last(history[:end])
            # The caller marks three more blocks it keeps marked: four with the moving one.
            for position in (0, 1, 2):
                sent[position]["content"][-1]["cache_control"] = dict(EPHEMERAL)
            request = window.prepare(sent)
            assert len(markers(request)) <= 4
            assert markers(request)[-1] == (len(request) - 1, len(request[-1]["content"]) - 1)
        assert window.stats.resets == 0

    def test_a_state_saved_between_moved_markers_continues_with_the_same_requests(self) -> None:
        history = anthropic_session(24)
        whole = ContextWindow("anthropic", max_tokens=5000, keep_first=1)
        window = ContextWindow("anthropic", max_tokens=5000, keep_first=1)
        for end in range(3, len(history) + 1, 2):
            sent = marked_last(history[:end])
            expected = whole.prepare(sent)
            state = window.state()
            window = ContextWindow.from_state(state)
            assert window.prepare(copy.deepcopy(sent)) == expected
        assert window.stats.resets == 0

    def test_a_changed_message_still_starts_over(self) -> None:
        history = anthropic_session(6)
        window = ContextWindow("anthropic", max_tokens=100_000)
        window.prepare(marked_last(history))
        edited = marked_last(history)
        edited[2]["content"][0]["content"] = "something else"
        window.prepare(edited)
        assert window.stats.resets == 1


def converse_session(steps: int) -> list[dict[str, Any]]:
    history: list[dict[str, Any]] = [{"role": "user", "content": [{"text": TASK}]}]
    for step in range(steps):
        call = f"tool-{step}"
        history.append(
            {
                "role": "assistant",
                "content": [{"toolUse": {"toolUseId": call, "name": "read", "input": {}}}],
            }
        )
        history.append(
            {
                "role": "user",
                "content": [
                    {
                        "toolResult": {
                            "toolUseId": call,
                            "content": [{"text": f"out {step} " + "q" * 900}],
                        }
                    }
                ],
            }
        )
    return history


class TestAMovingCachePoint:
    @pytest.mark.parametrize("steps", [20])
    def test_a_cache_point_moved_every_turn_resets_nothing(self, steps: int) -> None:
        history = converse_session(steps)
        window = ContextWindow("bedrock_converse", max_tokens=3000, keep_first=1)
        for end in range(3, len(history) + 1, 2):
            sent = copy.deepcopy(history[:end])
            sent[-1]["content"].append({"cachePoint": {"type": "default"}})
            request = window.prepare(sent)
            assert request[-1] is sent[-1]
            assert bedrock_problems(request) == []
        assert window.stats.resets == 0
        assert window.stats.compactions > 0
