"""``Reader``: the built-in readers' state, and formats that implement only ``scan``."""

from __future__ import annotations

import json
from typing import Any

import pytest
from baseaicore import ValidationError
from langchain_core.messages import HumanMessage

from cutctx.formats import (
    ANTHROPIC,
    BEDROCK_CONVERSE,
    GEMINI,
    OPENAI_CHAT,
    OPENAI_RESPONSES,
    Format,
    Rendered,
)
from cutctx.formats.langchain import LANGCHAIN
from tests.unit.formats.helpers import WORDS
from tests.unit.formats.test_bedrock_converse import agent as converse_agent
from tests.unit.formats.test_bedrock_converse import user as converse_user
from tests.unit.formats.test_gemini import agent as gemini_agent
from tests.unit.formats.test_gemini import user as gemini_user

CALL = {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
CHAT: list[dict[str, Any]] = [
    {"role": "user", "content": "look"},
    {"role": "assistant", "content": None, "tool_calls": [CALL]},
    {"role": "tool", "tool_call_id": "c1", "content": "a b"},
]
ANTHROPIC_CALL: list[dict[str, Any]] = [
    {"role": "user", "content": "look"},
    {"role": "assistant", "content": [{"type": "tool_use", "id": "c1", "name": "ls", "input": {}}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1", "content": "a b"}]},
]


class Nothing(Format[Any]):
    @property
    def name(self) -> str:
        return "nothing"

    def render(self, view: Any, binding: Any) -> Rendered[Any]:
        raise NotImplementedError


class TestReader:
    def test_the_state_is_json_and_continues_the_reading(self) -> None:
        reader = OPENAI_CHAT.reader()
        first = reader.read(CHAT[:2])
        assert reader.count == 2
        state = json.loads(json.dumps(reader.getstate()))
        assert state["pending"] == {"c1": "ls"}
        again = OPENAI_CHAT.reader()
        again.setstate(state)
        rest = again.read(CHAT[2:], final=True)
        assert (*first.turns, *rest.turns) == OPENAI_CHAT.reader().read(CHAT, final=True).turns

    @pytest.mark.parametrize("fmt", [OPENAI_CHAT, ANTHROPIC])
    def test_a_state_given_or_taken_is_the_callers_own(self, fmt: Format[Any]) -> None:
        """Changing a state after ``setstate`` or ``getstate`` changes nothing a reader holds:
        the flat maps of ids and the state around them are copied alike."""
        history = CHAT if fmt is OPENAI_CHAT else ANTHROPIC_CALL
        reader = fmt.reader()
        first = reader.read(history[:2])
        taken = reader.getstate()
        held = json.loads(json.dumps(taken))
        given = json.loads(json.dumps(taken))
        again = fmt.reader()
        again.setstate(given)
        for state in (taken, given):
            state["count"] = 99
            for value in state.values():
                if isinstance(value, dict):
                    value.clear()
                    value["intruder"] = 1
        assert reader.getstate() == again.getstate() == held
        rest = again.read(history[2:], final=True)
        assert (*first.turns, *rest.turns) == fmt.reader().read(history, final=True).turns

    @pytest.mark.parametrize(
        "fmt", [OPENAI_CHAT, OPENAI_RESPONSES, ANTHROPIC, GEMINI, BEDROCK_CONVERSE]
    )
    def test_a_state_holding_a_value_of_another_kind_is_refused_by_setstate(
        self, fmt: Format[Any]
    ) -> None:
        """Where a fresh state holds a map, a list or a text, a number there is refused as the
        state is set, not by the read that would trip on it."""
        fresh = fmt.reader().getstate()
        kinds = [key for key, value in fresh.items() if isinstance(value, dict | list | str)]
        assert kinds
        for key in kinds:
            with pytest.raises(ValidationError, match="not a reader state"):
                fmt.reader().setstate({**fresh, key: 1})

    @pytest.mark.parametrize(
        "fmt", [OPENAI_CHAT, OPENAI_RESPONSES, ANTHROPIC, GEMINI, BEDROCK_CONVERSE]
    )
    @pytest.mark.parametrize("state", [None, [], {"count": -1}, {"count": True}, {"count": 0}])
    def test_a_value_that_is_not_its_state_is_refused(self, fmt: Format[Any], state: Any) -> None:
        with pytest.raises(ValidationError, match="not a reader state"):
            fmt.reader().setstate(state)

    def test_a_call_left_open_is_refused_only_when_the_history_ends(self) -> None:
        reader = OPENAI_CHAT.reader()
        assert len(reader.read(CHAT[:2]).sent) == 2
        with pytest.raises(ValidationError, match="has no tool message"):
            reader.read([], final=True)
        reader.reset()
        assert reader.count == 0

    def test_messages_that_are_not_a_list_are_refused(self) -> None:
        with pytest.raises(ValidationError, match="must be a list"):
            OPENAI_CHAT.reader().read("hi")  # type: ignore[arg-type]

    @pytest.mark.parametrize("fmt", [OPENAI_CHAT, LANGCHAIN])
    def test_a_reader_started_at_an_offset_reads_indices_from_it(self, fmt: Format[Any]) -> None:
        messages = CHAT[:1] if fmt is OPENAI_CHAT else [HumanMessage("look")]
        reader = fmt.reader(estimator=OPENAI_CHAT.pricer(None).estimator)
        reader.start(4)  # type: ignore[attr-defined]
        read = reader.read(messages, final=True)
        assert [turn.turn_id for turn in read.turns] == ["m4"]
        assert read.parts["m4"].index == 4


CUT_OFF: list[tuple[Format[Any], Any, dict[str, Any], str]] = [
    (
        GEMINI,
        gemini_agent,
        gemini_user({"text": "no answer"}),
        "is not answered by a function_response",
    ),
    (
        BEDROCK_CONVERSE,
        converse_agent,
        converse_user({"text": "no answer"}),
        "has no toolResult",
    ),
]


@pytest.mark.parametrize(("fmt", "agent", "other", "words"), CUT_OFF)
class TestChunks:
    """A history cut into chunks reads as the whole one: answers that arrive in the next chunk
    pair with their calls, and a call the next chunk leaves unanswered is refused at its index."""

    def test_answers_in_the_next_chunk_are_read_as_in_the_whole_history(
        self, fmt: Format[Any], agent: Any, other: dict[str, Any], words: str
    ) -> None:
        del other, words
        whole = fmt.reader(estimator=WORDS).read(agent(), final=True)
        first = fmt.reader(estimator=WORDS)
        head = first.read(agent()[:2])
        rest = fmt.reader(estimator=WORDS)
        rest.setstate(json.loads(json.dumps(first.getstate())))
        tail = rest.read(agent()[2:], final=True)
        assert (*head.turns, *tail.turns) == whole.turns
        assert {**head.parts, **tail.parts} == dict(whole.parts)

    def test_a_call_cut_off_from_its_answer_by_a_chunk_is_refused(
        self, fmt: Format[Any], agent: Any, other: dict[str, Any], words: str
    ) -> None:
        reader = fmt.reader()
        reader.read(agent()[:2])
        with pytest.raises(ValidationError, match=words) as caught:
            reader.read([other], final=True)
        assert caught.value.details["index"] == 1


class TestAFormatWithoutAReader:
    def test_a_format_without_a_reader_says_so(self) -> None:
        with pytest.raises(NotImplementedError, match="must implement reader"):
            Nothing().reader()
