"""How the formats read a message list: dicts as they are, SDK objects through ``model_dump``."""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

import pytest
from baseaicore import ValidationError

from cutctx import CompactionBudget, CompactionExecutor, DropOldestPolicy
from cutctx.formats import anthropic, openai_chat


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
        assert openai_chat.count_tokens(messages) == 2
        assert answer.calls == [True]
        assert keep_all(openai_chat, messages)[1] is answer

    def test_sdk_blocks_inside_a_dict_are_read_and_the_dict_returned_as_given(self) -> None:
        block = Dumped({"type": "text", "text": "twelve chars"})
        message = {"role": "assistant", "content": [block, {"type": "text", "text": "abcd"}]}
        messages: list[Any] = [{"role": "user", "content": "hi"}, message]
        assert anthropic.count_tokens(messages) == 1 + 3 + 1
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
