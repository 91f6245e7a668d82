"""How the formats read a message list: dicts as they are, SDK objects through ``model_dump``."""

from __future__ import annotations

import json
from types import MappingProxyType
from typing import Any

import pytest
from baseaicore import ValidationError

from cutctx import (
    CharRatioEstimator,
    CompactionBudget,
    CompactionExecutor,
    ContextWindow,
    DropOldestPolicy,
    compact_messages,
    recall,
)
from cutctx.formats import FormatName, anthropic, openai_chat


class Dumped:
    """An object read through ``model_dump``, as the SDKs' pydantic models are."""

    def __init__(self, value: object) -> None:
        self.value = value
        self.calls: list[bool] = []

    def model_dump(self, *, exclude_none: bool = False) -> Any:
        self.calls.append(exclude_none)
        return self.value


def keep_all(module: Any, messages: Any) -> list[Any]:
    transcript, binding = module.to_transcript(messages)
    plan = DropOldestPolicy().decide(transcript, CompactionBudget(10**9, 0))
    out: list[Any] = module.from_transcript(CompactionExecutor().apply(transcript, plan), binding)
    return out


class TestReading:
    def test_a_tuple_and_any_mapping_are_read_and_kept_ones_returned_as_given(self) -> None:
        proxy = MappingProxyType({"role": "user", "content": "hi"})
        messages = (proxy, {"role": "assistant", "content": "yes"})
        out = keep_all(openai_chat, messages)
        assert out[0] is proxy
        assert out[1] is messages[1]

    def test_an_sdk_object_is_read_with_exclude_none_and_returned_as_itself(self) -> None:
        answer = Dumped({"role": "assistant", "content": "yes"})
        messages: list[Any] = [{"role": "user", "content": "hi"}, answer]
        assert openai_chat.count_tokens(messages, estimator=CharRatioEstimator()) == 2
        assert answer.calls == [True]
        assert keep_all(openai_chat, messages)[1] is answer

    def test_sdk_blocks_inside_a_dict_are_read_and_the_dict_returned_as_given(self) -> None:
        block = Dumped({"type": "text", "text": "twelve chars"})
        message = {"role": "assistant", "content": [block, {"type": "text", "text": "abcd"}]}
        messages: list[Any] = [{"role": "user", "content": "hi"}, message]
        filler = 8  # the system turn's reserve, FILLER_TEXT by four characters a token
        assert (
            anthropic.count_tokens(messages, estimator=CharRatioEstimator()) == 1 + 3 + 1 + filler
        )
        assert keep_all(anthropic, messages)[1] is message
        assert message["content"][0] is block  # the caller's list is not changed

    @pytest.mark.parametrize(
        "message",
        [Dumped(["not", "a", "dict"]), 42, "text", None],
        ids=["dump not a dict", "int", "str", "None"],
    )
    def test_anything_else_is_refused_naming_its_index(self, message: object) -> None:
        with pytest.raises(ValidationError, match=r"messages\[1\]: the message must be an object"):
            openai_chat.count_tokens([{"role": "user", "content": "hi"}, message])  # type: ignore[list-item]

    def test_a_block_whose_dump_is_not_a_dict_is_refused_by_the_format(self) -> None:
        message = {"role": "user", "content": [Dumped("text")]}
        with pytest.raises(ValidationError, match=r"content\[0\] must be an object"):
            anthropic.count_tokens([message])

    @pytest.mark.parametrize("messages", ["hi", b"hi", {"role": "user"}, 3])
    def test_messages_that_are_not_a_list_are_refused(self, messages: object) -> None:
        with pytest.raises(ValidationError, match="messages must be a list"):
            openai_chat.count_tokens(messages)  # type: ignore[arg-type]


def _responses_steps() -> list[list[dict[str, Any]]]:
    """Two steps of a Responses history; the second reuses the first call's ``call_id``."""
    first = [
        {"role": "user", "content": "look"},
        {"type": "function_call", "call_id": "c1", "name": "ls", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "a b"},
    ]
    again = [
        {"type": "function_call", "call_id": "c1", "name": "ls", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "a b c"},
    ]
    return [first, [*first, *again]]


def _anthropic_steps() -> list[list[dict[str, Any]]]:
    """Two steps of a Messages history; the second reuses the first ``tool_use`` id."""

    def use() -> dict[str, Any]:
        return {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "ls", "input": {}}],
        }

    def result(text: str) -> dict[str, Any]:
        return {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "t1", "content": text}],
        }

    first = [{"role": "user", "content": "look"}, use(), result("a b")]
    return [first, [*first, use(), result("a b c")]]


def _chat_steps() -> list[list[dict[str, Any]]]:
    """Two steps of a Chat history whose second exchange reuses the call id (allowed)."""

    def call() -> dict[str, Any]:
        return {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
            ],
        }

    first = [
        {"role": "user", "content": "look"},
        call(),
        {"role": "tool", "tool_call_id": "c1", "content": "a"},
    ]
    return [first, [*first, call(), {"role": "tool", "tool_call_id": "c1", "content": "b"}]]


def _entry_points(
    fmt: FormatName, history: list[dict[str, Any]], steps: list[list[dict[str, Any]]]
) -> dict[str, Any]:
    """Read ``history`` by every entry point; return each one's error (or ``None``)."""
    out: dict[str, Any] = {}

    def attempt(name: str, run: Any) -> None:
        try:
            run()
        except ValidationError as error:
            out[name] = (error.details.get("index"), error.message)
        else:
            out[name] = None

    def stepwise() -> None:
        window = ContextWindow(fmt, max_tokens=10_000)
        for step in steps:
            window.prepare(step)

    def restored() -> None:
        window = ContextWindow(fmt, max_tokens=10_000)
        for step in steps:
            window = ContextWindow.from_state(json.loads(json.dumps(window.state())))
            window.prepare(step)

    attempt("window step by step", stepwise)
    attempt("window restored each step", restored)
    attempt("window at once", lambda: ContextWindow(fmt, max_tokens=10_000).prepare(history))
    attempt("compact_messages", lambda: compact_messages(history, max_tokens=10_000, format=fmt))
    attempt("recall", lambda: recall(history, {"digest": "0" * 64}, format=fmt))
    return out


class TestReusedIds:
    @pytest.mark.parametrize(
        ("fmt", "steps", "field"),
        [
            ("openai_responses", _responses_steps(), "call_id"),
            ("anthropic", _anthropic_steps(), "tool_use_id"),
        ],
    )
    def test_a_reused_call_id_is_refused_at_its_index_by_every_entry_point(
        self, fmt: FormatName, steps: list[list[dict[str, Any]]], field: str
    ) -> None:
        history = steps[-1]
        errors = _entry_points(fmt, history, steps)
        assert set(errors.values()) == {(3, errors["compact_messages"][1])}, errors
        assert "used by two calls" in errors["compact_messages"][1]
        with pytest.raises(ValidationError) as caught:
            compact_messages(history, max_tokens=10_000, format=fmt)
        assert caught.value.details[field] == ("c1" if fmt == "openai_responses" else "t1")
        assert caught.value.details["first_index"] == 1

    def test_chat_pairs_a_result_with_the_nearest_call_so_a_reused_id_is_accepted(self) -> None:
        steps = _chat_steps()
        assert set(_entry_points("openai_chat", steps[-1], steps).values()) == {None}
