"""``cutctx.formats.testing.check_format``: built-in formats pass, broken ones fail, saying why."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cutctx import Role
from cutctx.formats import (
    ANTHROPIC,
    BEDROCK_CONVERSE,
    GEMINI,
    OPENAI_CHAT,
    OPENAI_RESPONSES,
    Format,
    Reader,
    Rendered,
)
from cutctx.formats.langchain import LANGCHAIN
from cutctx.formats.pydantic_ai import PYDANTIC_AI
from cutctx.formats.testing import FormatCheckFailed, check_format
from tests import bedrock_strategies, gemini_strategies
from tests import format_strategies as fs
from tests import framework_strategies as frs
from tests.property.test_formats import CL100K

_ChatType: Any = type(OPENAI_CHAT)


def _call(call_id: str) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": "ls", "arguments": "{}"}}
        ],
    }


HISTORIES = [
    [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Make the build green."},
        _call("c1"),
        {"role": "tool", "tool_call_id": "c1", "content": "FAILED test_a " * 40},
        _call("c2"),
        {"role": "tool", "tool_call_id": "c2", "content": "passed " * 40},
        {"role": "assistant", "content": "Green now."},
    ],
    [{"role": "user", "content": "hi"}],
]


class _ForgetfulReader(Reader[Any]):
    """Keeps only how many messages it read: a call answered in the next chunk is lost."""

    def __init__(self, inner: Reader[Any]) -> None:
        self.inner = inner

    def read(self, messages: Any, *, final: bool = False) -> Any:
        return self.inner.read(messages, final=final)

    def getstate(self) -> dict[str, Any]:
        return {**self.inner.getstate(), "pending": {}}

    def setstate(self, state: dict[str, Any]) -> None:
        self.inner.setstate(state)

    def reset(self) -> None:
        self.inner.reset()


class Forgetful(_ChatType):  # type: ignore[misc]
    def reader(self, **options: Any) -> Reader[Any]:
        return _ForgetfulReader(super().reader(**options))


class _UnpairingReader(Reader[Any]):
    """Reads as the Chat reader does, but forgets which call each tool result answers."""

    def __init__(self, inner: Reader[Any]) -> None:
        self.inner = inner

    def read(self, messages: Any, *, final: bool = False) -> Any:
        read = self.inner.read(messages, final=final)
        turns = tuple(
            dataclasses.replace(turn, tool_call_id=None) if turn.role is Role.TOOL else turn
            for turn in read.turns
        )
        parts = {
            turn.turn_id: dataclasses.replace(read.parts[turn.turn_id], turn=turn) for turn in turns
        }
        return read._replace(turns=turns, parts=parts)

    def getstate(self) -> dict[str, Any]:
        return self.inner.getstate()

    def setstate(self, state: dict[str, Any]) -> None:
        self.inner.setstate(state)

    def reset(self) -> None:
        self.inner.reset()


class Unpaired(_ChatType):  # type: ignore[misc]
    """Its reader drops the link between a call and its result: plans keep one without the
    other, and the requests rendered from them are ones the provider refuses."""

    def reader(self, **options: Any) -> Reader[Any]:
        return _UnpairingReader(super().reader(**options))


class Cheap(_ChatType):  # type: ignore[misc]
    """Prices every turn at one token."""

    def to_transcript(self, messages: Any, **options: Any) -> Any:
        transcript, binding = super().to_transcript(messages, **options)
        turns = tuple(dataclasses.replace(turn, token_estimate=1) for turn in transcript.turns)
        return type(transcript)(turns), binding


class Meddling(_ChatType):  # type: ignore[misc]
    """Writes into the caller's messages as it renders them."""

    def render(self, view: Any, binding: Any) -> Rendered[Any]:
        done: Rendered[Any] = super().render(view, binding)
        for message in done.messages:
            message["seen"] = True
        return done


class Unlabelled(_ChatType):  # type: ignore[misc]
    """Renders a summary as its bare text."""

    def render(self, view: Any, binding: Any) -> Rendered[Any]:
        done: Rendered[Any] = super().render(view, binding)
        for message in done.messages:
            if isinstance(message.get("content"), str) and message["content"].startswith(
                "[Summary"
            ):
                message["content"] = message["content"].split("\n\n", 1)[1]
        return done


class Sentinel(_ChatType):  # type: ignore[misc]
    """Puts the head's turns in the binding at index -1."""

    def to_transcript(self, messages: Any, **options: Any) -> Any:
        transcript, binding = super().to_transcript(messages, **options)
        parts = {
            key: part if part.index is not None else dataclasses.replace(part, index=-1)
            for key, part in binding.parts.items()
        }
        return transcript, dataclasses.replace(binding, parts=parts)


class TestCheckFormat:
    @pytest.mark.parametrize(
        ("fmt", "strategy", "system"),
        [
            (OPENAI_CHAT, fs.chat_conversations(), "Be brief."),
            (OPENAI_RESPONSES, fs.responses_conversations(), "Be brief."),
            (ANTHROPIC, fs.anthropic_conversations(), [{"type": "text", "text": "Be brief."}]),
            (ANTHROPIC, fs.anthropic_runs(), "Be brief."),
            (LANGCHAIN, frs.langchain_conversations(), "Be brief."),
            (PYDANTIC_AI, frs.pydantic_ai_conversations(), "Be brief."),
            (GEMINI, gemini_strategies.gemini_histories(), "Be brief."),
            (BEDROCK_CONVERSE, bedrock_strategies.bedrock_histories(), [{"text": "Be brief."}]),
        ],
    )
    @given(data=st.data())
    @settings(max_examples=15)
    def test_every_built_in_format_passes(
        self, fmt: Format[Any], strategy: Any, system: object, data: st.DataObject
    ) -> None:
        histories = data.draw(st.lists(strategy, min_size=1, max_size=3))
        check_format(fmt, histories, system=system, estimator=CL100K)
        check_format(fmt, histories)

    def test_the_chat_histories_of_these_tests_pass(self) -> None:
        check_format(OPENAI_CHAT, HISTORIES, system="Be brief.", estimator=CL100K)

    @pytest.mark.parametrize(
        ("broken", "words"),
        [
            (Forgetful(), "read in chunks"),
            (Cheap(), "over its estimate"),
            (Meddling(), "the caller's messages were changed"),
            (Unlabelled(), "summary_text"),
            (Sentinel(), "index None"),
            (Unpaired(), "shares no tool_call_id with a call"),
            (Unpaired(), "the rendered request is refused reading it back"),
        ],
    )
    def test_a_broken_format_fails_naming_what_is_wrong(
        self, broken: Format[Any], words: str
    ) -> None:
        with pytest.raises(FormatCheckFailed, match="breaks the Format contract") as caught:
            check_format(broken, HISTORIES, system="Be brief.")
        assert any(words in problem for problem in caught.value.problems), caught.value.problems
        assert str(caught.value).count("histories[") >= 1
