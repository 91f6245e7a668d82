"""context-clipper's ``sticky`` and ``priority`` keys on generated conversations of each format.

The conversations are those of ``tests/property/test_formats.py`` with the two keys added to
random messages; what each key must do is restated here from the formats' guide.
"""

from __future__ import annotations

import contextlib
import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cutctx import (
    Action,
    BudgetUnsatisfiable,
    CompactionBudget,
    CompactionExecutor,
    DropOldestPolicy,
    Role,
    compact_messages,
)
from cutctx.formats import anthropic, openai_chat
from tests.format_validators import RESPONSES_MASKABLE, RESPONSES_PAIRS
from tests.property.test_formats import CL100K, ENCODING, FORMATS, FRAMING, NAMES

KEYS = ("sticky", "priority")


@st.composite
def marked(draw: st.DrawFn, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``messages`` with ``sticky`` and/or ``priority`` added to some of them (new dicts)."""
    out = []
    for message in messages:
        extra: dict[str, Any] = {}
        if draw(st.integers(0, 3)) == 0:
            extra["sticky"] = draw(st.booleans())
        if draw(st.integers(0, 2)) == 0:
            extra["priority"] = draw(st.integers(-2, 3))
        out.append({**message, **extra} if extra else message)
    return out


def plain(message: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in message.items() if k not in KEYS}


def tool_names(module: Any, messages: list[dict[str, Any]]) -> list[str]:
    """The tool of every result, in the order the results appear, read from the raw messages."""
    calls: dict[str, str] = {}
    names: list[str] = []
    for message in messages:
        if module is openai_chat:
            for call in message.get("tool_calls") or []:
                calls[call["id"]] = call[call.get("type", "function")]["name"]
            if message.get("role") == "tool":
                names.append(calls[message["tool_call_id"]])
        elif module is anthropic:
            content = message.get("content")
            for block in content if isinstance(content, list) else []:
                if block.get("type") == "tool_use":
                    calls[block["id"]] = block["name"]
                elif block.get("type") == "tool_result":
                    names.append(calls[block["tool_use_id"]])
        elif message.get("type") in ("function_call", "custom_tool_call"):
            calls.setdefault(message["call_id"], message["name"])
        elif message.get("type") in RESPONSES_PAIRS.values():
            # A call with no tool name (computer, local shell, ...) is named by its type.
            calls.setdefault(message["call_id"], message["type"])
        elif message.get("type") in RESPONSES_MASKABLE:
            names.append(calls[message["call_id"] if "call_id" in message else message["id"]])
    return names


@pytest.mark.parametrize("name", NAMES)
class TestMessageMarks:
    @given(data=st.data())
    def test_the_keys_are_read_and_never_sent_on(self, name: str, data: st.DataObject) -> None:
        """Catches a key sent to the provider, any other key lost, a caller's dict changed, an
        unmarked message copied, a sticky message's turn left unpinned, a priority recorded
        wrongly, or a result whose turn does not name its call's tool."""
        fmt = FORMATS[name]
        messages = data.draw(marked(data.draw(fmt.conversations)))
        before = copy.deepcopy(messages)
        transcript, binding = fmt.module.to_transcript(messages)
        plan = DropOldestPolicy().decide(
            transcript, CompactionBudget(transcript.token_estimate(), 0)
        )
        out = fmt.module.from_transcript(CompactionExecutor().apply(transcript, plan), binding)
        assert out == [plain(message) for message in messages]
        for sent, given_ in zip(out, messages, strict=True):
            assert (sent is given_) == (not any(key in given_ for key in KEYS))
        assert messages == before
        # What the format pins by itself (a compaction item or block), seen without the keys.
        unmarked, _ = fmt.module.to_transcript([plain(message) for message in messages])
        for turn, bare in zip(transcript.turns, unmarked.turns, strict=True):
            part = binding.parts[turn.turn_id]
            if part.index is None:
                continue
            source = messages[part.index]
            assert turn.pinned == (bare.pinned or source.get("sticky") is True)
            priority = source.get("priority")
            assert turn.metadata.get("cutctx.priority") == (
                None if priority is None else str(priority)
            )
        recorded = [
            t.metadata.get("cutctx.tool_name") for t in transcript.turns if t.role is Role.TOOL
        ]
        assert recorded == tool_names(fmt.module, messages)

    @given(data=st.data())
    def test_priority_mode_keeps_the_sticky_sends_no_keys_and_fits_when_counted(
        self, name: str, data: st.DataObject
    ) -> None:
        """Catches priority mode (any message with a priority) removing a sticky message's
        turn, sending a key on, a valid request turned invalid, or a plan that fits whose
        messages, counted with tiktoken's cl100k, are over the budget."""
        fmt = FORMATS[name]
        messages = data.draw(marked(data.draw(fmt.conversations)))
        protected = data.draw(st.integers(0, 3))
        total = fmt.tokens(messages, ENCODING.encode, FRAMING, None)
        max_tokens = data.draw(st.integers(0, total + 10))
        with contextlib.suppress(BudgetUnsatisfiable):
            done = compact_messages(
                messages,
                max_tokens=max_tokens,
                format=fmt.module,
                estimator=CL100K,
                protected_recent_turns=protected,
            )
            prioritized = any("priority" in message for message in messages)
            assert (done.plan.policy_name == "priority") == prioritized
            for action in done.plan.actions:
                index = int(action.turn_id[1:].split(".")[0]) if action.turn_id != "system" else -1
                if index >= 0 and messages[index].get("sticky") is True:
                    assert action.action is Action.KEEP
            assert not any(key in message for message in done.messages for key in KEYS)
            if done.messages:
                assert fmt.check(done.messages, [plain(m) for m in messages]) == []
            if not done.plan.budget_unmet:
                assert fmt.tokens(done.messages, ENCODING.encode, FRAMING, None) <= max_tokens
