"""Raw ``bytes`` from the SDKs (boto3's images and redacted reasoning, google-genai's signatures)
through a window and its state."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from baseaicore import ValidationError
from google.genai import types

from cutctx import ContextWindow, TextEstimator, default_messages_policy
from cutctx._loop.jsondata import from_json_data, to_json_data
from tests.bedrock_validators import bedrock_problems
from tests.image_files import image_bytes

SYSTEM = "You are a careful agent that reads screenshots."
PNG = image_bytes("png", 64, 48)
REDACTED = bytes(range(256)) * 3  # not UTF-8: what boto3 hands back for redacted reasoning


def converse_history(steps: int) -> list[dict[str, Any]]:
    """A Converse agent's history as boto3 takes and returns it: raw bytes, not base64."""
    history: list[dict[str, Any]] = [{"role": "user", "content": [{"text": "Fix the layout."}]}]
    for step in range(steps):
        call = f"tool-{step:02d}"
        assistant: list[dict[str, Any]] = []
        if step % 3 == 0:
            assistant.append({"reasoningContent": {"redactedContent": REDACTED}})
        assistant.append({"toolUse": {"toolUseId": call, "name": "shot", "input": {"n": step}}})
        history.append({"role": "assistant", "content": assistant})
        result: list[dict[str, Any]] = [{"text": f"screen {step} " + "p" * 600}]
        if step % 4 == 0:
            result.append({"image": {"format": "png", "source": {"bytes": PNG}}})
        answer: list[dict[str, Any]] = [{"toolResult": {"toolUseId": call, "content": result}}]
        if step % 5 == 1:  # a screenshot beside the result: a masked result's message keeps it
            answer.append({"image": {"format": "png", "source": {"bytes": PNG}}})
        history.append({"role": "user", "content": answer})
    return history


def steps(history: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    return [history[:end] for end in range(3, len(history) + 1, 2)]


class TestBytesThroughAWindow:
    def test_a_converse_session_with_raw_bytes_runs_and_its_state_travels_as_json(self) -> None:
        history = converse_history(30)
        before = copy.deepcopy(history)
        whole = ContextWindow("bedrock_converse", max_tokens=6000, keep_first=1, system=SYSTEM)
        window = ContextWindow("bedrock_converse", max_tokens=6000, keep_first=1, system=SYSTEM)
        for number, sent in enumerate(steps(history)):
            expected = whole.prepare(sent)
            assert bedrock_problems(expected) == []
            if number == 15:
                text = json.dumps(window.state())
                window = ContextWindow.from_state(json.loads(text))
            request = window.prepare(sent)
            assert request == expected
            kept = {id(message) for message in sent}
            for message in request:
                if message in sent:
                    assert id(message) in kept  # a kept message is the caller's own object
        assert whole.stats.compactions > 0
        assert history == before  # nothing of the caller's was changed

    def test_a_state_restores_the_bytes_of_a_message_the_window_made(self) -> None:
        history = steps(converse_history(30))
        # The version-2 default masks where version 3 drops: masked messages the window made.
        masking = default_messages_policy(version=2, estimator=TextEstimator())
        window = ContextWindow("bedrock_converse", max_tokens=3000, keep_first=1, policy=masking)
        tagged = 0
        for number, sent in enumerate(history):
            window.prepare(sent)
            state = window.state()
            text = json.dumps(state)
            if "$bytes" not in text:
                continue
            tagged += 1  # a made message holding an image or reasoning, tagged
            again = ContextWindow.from_state(json.loads(text), policy=masking)
            assert again.state() == state
            twin = ContextWindow.from_state(json.loads(text), policy=masking)
            for later in history[number + 1 : number + 4]:
                assert again.prepare(later) == twin.prepare(later)
        assert tagged > 0


class TestTaggedJson:
    @pytest.mark.parametrize(
        "value",
        [
            b"",
            b"\x00\xff",
            {"$bytes": "not really"},
            {"$dict": {"a": b"x"}},
            [{"k": b"v", "$other": 1}, "s", 1, 2.5, None, True],
            {"nested": {"$bytes": b"\x01"}},
        ],
    )
    def test_bytes_and_dollar_keys_read_back_equal(self, value: object) -> None:
        data = to_json_data(value)
        assert from_json_data(json.loads(json.dumps(data))) == value

    def test_a_malformed_tag_is_refused(self) -> None:
        with pytest.raises(ValidationError, match="bytes"):
            from_json_data({"$bytes": "@@not base64@@"})


class TestGeminiSignatures:
    def test_sdk_contents_with_byte_signatures_run_and_their_state_travels(self) -> None:
        history = [types.Content(role="user", parts=[types.Part(text="Do the task.")])]
        for step in range(12):
            call = types.FunctionCall(name="run", args={"n": step})
            signature = bytes([step, 255, 0, 7])
            history.append(
                types.Content(
                    role="model",
                    parts=[types.Part(function_call=call, thought_signature=signature)],
                )
            )
            answer = types.FunctionResponse(name="run", response={"out": "y" * 2000})
            history.append(types.Content(role="user", parts=[types.Part(function_response=answer)]))
        whole = ContextWindow("gemini", max_tokens=3000, keep_first=1)
        window = ContextWindow("gemini", max_tokens=3000, keep_first=1)
        for end in range(3, len(history) + 1, 2):
            expected = whole.prepare(history[:end])
            if end == 13:
                window = ContextWindow.from_state(json.loads(json.dumps(window.state())))
            assert window.prepare(history[:end]) == expected
        assert whole.stats.compactions > 0
        assert window.stats.resets == 0
