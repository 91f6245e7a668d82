"""``cutctx.formats.openai_responses``: Responses API input items to and from transcripts."""

from __future__ import annotations

import json
from typing import Any

import pytest
from baseaicore import ValidationError

from cutctx import (
    CompactionBudget,
    CompactionExecutor,
    ObservationMaskingPolicy,
    Role,
    Transcript,
    TranscriptTurn,
    compact_messages,
)
from cutctx.formats import openai_responses
from cutctx.formats._common import SUMMARY_LABEL
from cutctx.formats.testing import check_format
from tests import provider_sessions as ps
from tests.format_validators import png, responses_problems
from tests.property.test_formats import CL100K
from tests.unit.formats.helpers import WORDS, stub

SUNNY, RAIN = "sunny " * 50, "rain " * 50
# The shape of OpenAI's Responses function-calling guide: reasoning, parallel calls, outputs.
ITEMS: list[dict[str, Any]] = [
    {"role": "developer", "content": "You are a weather bot."},
    {"role": "user", "content": "Weather in Paris and Rome?"},
    {
        "type": "reasoning",
        "id": "rs_1",
        "encrypted_content": "gAAAA",
        "summary": [{"type": "summary_text", "text": "Need two lookups."}],
    },
    {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_1",
        "name": "get_weather",
        "arguments": '{"city": "Paris"}',
    },
    {
        "type": "function_call",
        "id": "fc_2",
        "call_id": "call_2",
        "name": "get_weather",
        "arguments": '{"city": "Rome"}',
    },
    {"type": "function_call_output", "call_id": "call_2", "output": RAIN},
    {
        "type": "function_call_output",
        "call_id": "call_1",
        "output": [{"type": "input_text", "text": SUNNY}],
    },
    {
        "type": "message",
        "role": "assistant",
        "id": "msg_1",
        "status": "completed",
        "content": [{"type": "output_text", "text": "Paris sunny, Rome rainy.", "annotations": []}],
    },
    {"type": "reasoning", "id": "rs_2", "summary": []},
    {"role": "assistant", "content": "Anything else?"},
    {"role": "user", "content": "No, thanks."},
]
COSTS = [8, 8, 6, 6, 6, 53, 53, 7, 3, 5, 5]


class TestToTranscript:
    def test_one_turn_per_item_with_hand_counted_estimates(self) -> None:
        transcript, _ = openai_responses.to_transcript(ITEMS, estimator=WORDS)
        assert transcript.turn_ids() == tuple(f"m{i}" for i in range(11))
        assert [turn.token_estimate for turn in transcript.turns] == COSTS
        assert [turn.role for turn in transcript.turns][:6] == [
            Role.SYSTEM,
            Role.USER,
            Role.ASSISTANT,
            Role.ASSISTANT,
            Role.ASSISTANT,
            Role.TOOL,
        ]

    def test_reasoning_joins_the_exchange_of_the_item_it_precedes(self) -> None:
        transcript, _ = openai_responses.to_transcript(ITEMS)
        keys = [turn.tool_call_id for turn in transcript.turns]
        assert keys == [None, None, "m2", "m2", "m2", "m2", "m2", None, "m8", "m8", None]

    def test_trailing_reasoning_items_travel_together(self) -> None:
        items: list[dict[str, Any]] = [
            {"role": "user", "content": "q"},
            {"type": "reasoning", "summary": []},
            {"type": "reasoning", "summary": []},
        ]
        transcript, _ = openai_responses.to_transcript(items)
        assert [turn.tool_call_id for turn in transcript.turns] == [None, "m1", "m1"]
        single, _ = openai_responses.to_transcript(items[:2])
        assert single.turns[1].tool_call_id is None

    def test_custom_tool_calls_pair_by_call_id(self) -> None:
        items: list[dict[str, Any]] = [
            {"type": "custom_tool_call", "call_id": "c", "name": "sh", "input": "ls -la"},
            {"type": "custom_tool_call_output", "call_id": "c", "output": "a b"},
        ]
        transcript, _ = openai_responses.to_transcript(items, estimator=WORDS)
        assert [(t.token_estimate, t.tool_call_id) for t in transcript.turns] == [
            (6, "m0"),
            (5, "m0"),
        ]

    def test_media_and_unknown_parts_are_priced(self) -> None:
        content = [
            {"type": "input_image", "image_url": "https://x/a.png", "detail": "low"},
            {"type": "input_file", "file_id": "file-1"},
            {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "mp3"}},
            {"type": "refusal", "refusal": "no"},
            {"type": "mystery", "v": "a b"},
        ]
        # 3 + 85 + 3000 + 1000 + 1 + words of '{"type":"mystery","v":"a b"}' (2)
        items: list[dict[str, Any]] = [{"role": "user", "content": content}]
        assert openai_responses.count_tokens(items, estimator=WORDS) == 3 + 85 + 3000 + 1000 + 1 + 2

    def test_instructions_are_a_pinned_turn_never_emitted(self) -> None:
        transcript, binding = openai_responses.to_transcript(ITEMS[1:2], system="Be brief.")
        assert transcript.turns[0].pinned
        assert openai_responses.from_transcript(transcript, binding) == ITEMS[1:2]
        assert binding.system == "Be brief."


class TestFromTranscript:
    def test_a_masked_output_keeps_its_call_id_and_only_its_output_changes(self) -> None:
        transcript, binding = openai_responses.to_transcript(ITEMS, estimator=WORDS)
        plan = ObservationMaskingPolicy(0, estimator=WORDS).decide(
            transcript, CompactionBudget(max_tokens=78, protected_recent_turns=0)
        )
        out = openai_responses.from_transcript(
            CompactionExecutor().apply(transcript, plan), binding
        )
        assert out[5] == {
            "type": "function_call_output",
            "call_id": "call_2",
            "output": stub(RAIN, 53),
        }
        assert out[6] == {
            "type": "function_call_output",
            "call_id": "call_1",
            "output": [{"type": "input_text", "text": stub(SUNNY, 53)}],
        }
        assert all(out[i] is ITEMS[i] for i in range(11) if i not in (5, 6))

    def test_a_summary_is_a_labelled_user_message_item(self) -> None:
        transcript, binding = openai_responses.to_transcript(ITEMS)
        view = Transcript(
            (
                TranscriptTurn("summary:span-1", Role.ASSISTANT, "Asked weather.", 4),
                *transcript.turns[7:],
            )
        )
        out = openai_responses.from_transcript(view, binding)
        assert out[0] == {
            "type": "message",
            "role": "user",
            "content": f"{SUMMARY_LABEL}\n\nAsked weather.",
        }
        assert responses_problems(out, ITEMS) == []

    def test_dropping_takes_reasoning_calls_and_outputs_together(self) -> None:
        done = compact_messages(
            ITEMS,
            max_tokens=60,
            format="openai_responses",
            estimator=WORDS,
            protected_recent_turns=3,
        )
        assert done.report.dropped_turn_ids == ("m1", "m2", "m3", "m4", "m5", "m6")
        assert done.messages == [ITEMS[0], *ITEMS[7:]]
        assert done.plan.tokens_after_estimate == 28
        assert responses_problems(done.messages, ITEMS) == []


BAD: list[tuple[Any, int | None, str]] = [
    ("items", None, "must be a list"),
    ([{"foo": 1}], 0, "no string type"),
    ([{"type": 7}], 0, "no string type"),
    ([{"role": "tool", "content": "x"}], 0, "unknown role"),
    ([{"type": "function_call_output", "call_id": "c", "output": "x"}], 0, "no earlier"),
    (
        [
            {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
            {"type": "custom_tool_call_output", "call_id": "c", "output": "x"},
        ],
        1,
        "no earlier",
    ),
    (
        [
            {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c", "output": "x"},
            {"type": "function_call_output", "call_id": "c", "output": "y"},
        ],
        2,
        "already answered",
    ),
    (
        [
            {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
            {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
        ],
        1,
        "used by two calls",
    ),
    (
        [
            {"role": "user", "content": "q"},
            {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
        ],
        1,
        "no output",
    ),
    (
        [{"type": "function_call", "call_id": 1, "name": "f", "arguments": "{}"}],
        0,
        "call_id must be",
    ),
    ([{"type": "function_call", "call_id": "c", "name": "f"}], 0, "arguments must be"),
    ([{"type": "reasoning", "summary": "x"}], 0, "summary must be a list"),
    ([{"type": "reasoning", "summary": [{"text": 3}]}], 0, "text must be a string"),
    ([{"role": "user", "content": 3}], 0, "content must be a string or a list"),
    ([{"role": "user", "content": [{"text": "x"}]}], 0, "no string type"),
    ([{"role": "user", "content": [{"type": "input_text"}]}], 0, "text must be a string"),
]


class TestMalformedInput:
    @pytest.mark.parametrize(("items", "index", "fragment"), BAD)
    def test_is_refused_with_a_typed_error_naming_the_item(
        self, items: Any, index: int | None, fragment: str
    ) -> None:
        with pytest.raises(ValidationError, match=fragment) as caught:
            openai_responses.to_transcript(items)
        assert caught.value.details["index"] == index


def exec_call(call_id: str) -> dict[str, Any]:
    return {
        "type": "local_shell_call",
        "id": f"ls_{call_id}",
        "call_id": call_id,
        "action": {"type": "exec", "command": ["ls"], "env": {}},
        "status": "completed",
    }


SCREENSHOT = {"type": "computer_screenshot", "image_url": "data:image/png;base64," + png(1280, 800)}
HOSTED: list[dict[str, Any]] = [
    {"role": "user", "content": "Tidy the repo."},
    {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"type": "search"}},
    {"type": "computer_call", "id": "cu_1", "call_id": "cu", "action": {"type": "screenshot"}},
    {"type": "computer_call_output", "call_id": "cu", "output": SCREENSHOT},
    exec_call("sh"),
    {"type": "local_shell_call_output", "id": "sh", "output": "a.py b.py " * 40},
    {"type": "mcp_approval_request", "id": "mcpr_1", "server_label": "w", "name": "ask"},
    {"type": "mcp_approval_response", "approval_request_id": "mcpr_1", "approve": True},
    {"type": "reasoning", "id": "rs_1", "summary": []},
    {"type": "mcp_call", "id": "mcp_1", "name": "ask", "arguments": "{}", "output": "x " * 80},
    {"type": "compaction", "id": "cmp_1", "encrypted_content": "opaque blob"},
    {"type": "x_future", "call_id": "fx", "payload": 1},
    {"type": "x_future_output", "call_id": "fx", "data": "y " * 60},
    {"id": "msg_0"},
    {"role": "user", "content": "Go on."},
]


class TestHostedItems:
    def test_each_item_joins_exactly_the_items_it_must_travel_with(self) -> None:
        transcript, _ = openai_responses.to_transcript(HOSTED)
        keys = [turn.tool_call_id for turn in transcript.turns]
        assert keys == [
            None,  # user
            None,  # web_search_call: a unit of its own
            "m2",  # computer_call and its output
            "m2",
            "m4",  # local_shell_call and its output (named by id)
            "m4",
            "m6",  # approval request and response
            "m6",
            "m8",  # reasoning and the mcp_call it precedes
            "m8",
            None,  # compaction
            "m11",  # two unknown items sharing a call_id
            "m11",
            None,  # item_reference, with no type
            None,
        ]

    def test_only_text_outputs_are_tool_turns_and_compaction_is_pinned(self) -> None:
        transcript, _ = openai_responses.to_transcript(HOSTED)
        tools = [turn.turn_id for turn in transcript.turns if turn.role is Role.TOOL]
        assert tools == ["m5"]
        assert [turn.turn_id for turn in transcript.turns if turn.pinned] == ["m10"]

    def test_hosted_items_are_priced_by_the_documented_rules(self) -> None:
        def cost(item: dict[str, Any]) -> int:
            return openai_responses.count_tokens([item], estimator=WORDS) - 3

        # compact JSON without spaces is one word
        assert cost(HOSTED[1]) == 1
        # 1280x800 fits 2048, then 768 on the short side: 1229x768, 3x2 tiles
        assert cost(HOSTED[3]) == 85 + 170 * 6
        assert cost(HOSTED[5]) == 80
        assert cost(HOSTED[10]) == 2
        generated = {"type": "image_generation_call", "id": "ig", "result": png(512, 512)}
        assert cost(generated) == 85 + 170
        assert cost({"type": "image_generation_call", "id": "ig", "result": None}) == 0
        # the JSON '{..."output":"x x ... x "}' splits into 81 words: its head, 79 x, '"}'
        assert cost(HOSTED[9]) == 81

    def test_masking_edits_only_an_output_whose_body_is_text(self) -> None:
        transcript, binding = openai_responses.to_transcript(HOSTED, estimator=WORDS)
        plan = ObservationMaskingPolicy(0, estimator=WORDS).decide(
            transcript, CompactionBudget(max_tokens=5, protected_recent_turns=0)
        )
        out = openai_responses.from_transcript(
            CompactionExecutor().apply(transcript, plan), binding
        )
        assert plan.budget_unmet  # only the one text output could be masked
        assert out[5] == {
            "type": "local_shell_call_output",
            "id": "sh",
            "output": stub("a.py b.py " * 40, 83),
        }
        assert all(out[i] is HOSTED[i] for i in range(len(HOSTED)) if i != 5)
        assert responses_problems(out, HOSTED) == []

    def test_dropping_keeps_the_compaction_item_and_whole_units(self) -> None:
        done = compact_messages(
            HOSTED, max_tokens=40, format="openai_responses", protected_recent_turns=1
        )
        assert HOSTED[10] in done.messages
        assert done.messages == [HOSTED[10], HOSTED[13], HOSTED[14]]
        assert responses_problems(done.messages, HOSTED) == []

    def test_an_unknown_item_is_carried_byte_for_byte(self) -> None:
        transcript, binding = openai_responses.to_transcript(HOSTED)
        out = openai_responses.from_transcript(transcript, binding)
        assert out[11] is HOSTED[11]
        assert out[12] is HOSTED[12]

    def test_an_mcp_call_made_after_approval_joins_its_request_and_response(self) -> None:
        approved = {**HOSTED[9], "approval_request_id": "mcpr_1"}
        items = [*HOSTED[:8], approved, HOSTED[-1]]
        transcript, _ = openai_responses.to_transcript(items)
        assert [turn.tool_call_id for turn in transcript.turns][6:] == ["m6", "m6", "m6", None]

    def test_an_unanswered_approval_request_stands_alone(self) -> None:
        # Keyed from the start (a response read later may join it): an exchange of one.
        transcript, _ = openai_responses.to_transcript([*HOSTED[:7], HOSTED[-1]])
        keys = [turn.tool_call_id for turn in transcript.turns]
        assert keys[6] == "m6"
        assert keys.count("m6") == 1


class TestProviderRules:
    @pytest.mark.parametrize(
        ("items", "index", "fragment"),
        [
            ([{"role": "user", "content": []}], 0, "must have content"),
            ([{"role": "user"}], 0, "must have content"),
            ([{"type": "mcp_approval_response", "approval_request_id": "r"}], 0, "no earlier"),
            ([exec_call("a"), exec_call("a")], 1, "used by two calls"),
            ([{"role": "user", "content": "q"}, exec_call("a")], 1, "no output"),
            (
                [{"type": "computer_call", "call_id": "c"}, HOSTED[5]],
                1,
                "no earlier local_shell_call",
            ),
            ([HOSTED[6], HOSTED[6]], 1, "used twice"),
            ([{"type": "compaction"}], 0, "encrypted_content must be"),
        ],
    )
    def test_inputs_the_provider_refuses_get_a_typed_error_naming_the_item(
        self, items: list[dict[str, Any]], index: int, fragment: str
    ) -> None:
        with pytest.raises(ValidationError, match=fragment) as caught:
            openai_responses.to_transcript(items)
        assert caught.value.details["index"] == index

    def test_count_tokens_accepts_a_partial_history(self) -> None:
        prefix = [*ITEMS[:5]]  # two calls still waiting for their outputs
        with pytest.raises(ValidationError, match="no output"):
            openai_responses.to_transcript(prefix)
        assert openai_responses.count_tokens(prefix, estimator=WORDS) == sum(COSTS[:5])
        orphan = [ITEMS[5], ITEMS[5]]  # outputs whose call is elsewhere, one answered twice
        assert openai_responses.count_tokens(orphan, estimator=WORDS) == 2 * COSTS[5]
        twice = [ITEMS[3], ITEMS[3]]
        assert openai_responses.count_tokens(twice, estimator=WORDS) == 2 * COSTS[3]


def _codex_steps(steps: int) -> list[list[dict[str, Any]]]:
    """A Codex CLI session as its requests carry it: developer messages, an ``additional_tools``
    item, reasoning with ``encrypted_content``, ``custom_tool_call`` items answered by their
    outputs (a string, or ``input_text`` parts), function calls and local shell calls."""
    tools = [{"type": "custom", "name": "apply_patch", "description": "Edit files."}]
    out: list[list[dict[str, Any]]] = [
        [
            {"type": "message", "role": "developer", "content": "Sandbox: workspace-write."},
            {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "Fix CI."}],
            },
            {"type": "additional_tools", "role": "developer", "tools": tools},
        ]
    ]
    for step in range(steps):
        body = f"line {step} of the build log\n" * (40 + 37 * (step % 7))
        reasoning: dict[str, Any] = {
            "type": "reasoning",
            "id": f"rs_{step}",
            "summary": [{"type": "summary_text", "text": f"Step {step}."}],
            "encrypted_content": "gAAAAB" + "x" * 40,
        }
        call_id = f"call_{step}"
        call: dict[str, Any]
        answer: dict[str, Any]
        if step % 3 == 0:
            call = {
                "type": "custom_tool_call",
                "call_id": call_id,
                "name": "apply_patch",
                "input": f"*** Begin Patch\n*** Update File: f{step}.py\n*** End Patch",
                "id": f"ctc_{step}",
                "status": "completed",
            }
            output: object = body if step % 2 else [{"type": "input_text", "text": body}]
            answer = {"type": "custom_tool_call_output", "call_id": call_id, "output": output}
        elif step % 3 == 1:
            call = {
                "type": "function_call",
                "call_id": call_id,
                "name": "shell",
                "arguments": '{"command": ["pytest", "-q"]}',
            }
            answer = {"type": "function_call_output", "call_id": call_id, "output": body}
        else:
            action = {"type": "exec", "command": ["ls"], "env": {}}
            call = {
                "type": "local_shell_call",
                "call_id": call_id,
                "id": f"lsh_{step}",
                "action": action,
                "status": "completed",
            }
            answer = {"type": "local_shell_call_output", "id": call_id, "output": body}
        chunk: list[dict[str, Any]] = [reasoning, call, answer]
        if step % 10 == 9:
            chunk.append({"type": "message", "role": "assistant", "content": f"Done {step}."})
            chunk.append({"type": "message", "role": "developer", "content": "Keep going."})
            chunk.append({"type": "message", "role": "user", "content": "Go on."})
        out.append(chunk)
    return out


class TestCodexRequests:
    def test_additional_tools_is_an_untouchable_turn_priced_as_its_json(self) -> None:
        item = _codex_steps(0)[0][2]
        transcript, _ = openai_responses.to_transcript(_codex_steps(0)[0], estimator=WORDS)
        turn = transcript.turns[2]
        assert (turn.role, turn.tool_call_id) == (Role.SYSTEM, None)
        body = json.dumps(item, ensure_ascii=False, separators=(",", ":"))
        assert turn.token_estimate == 3 + len(body.split())

    def test_additional_tools_is_never_dropped(self) -> None:
        history = [item for chunk in _codex_steps(12) for item in chunk]
        done = compact_messages(
            history, max_tokens=2_500, format="openai_responses", protected_recent_turns=3
        )
        assert done.report.dropped_turn_ids
        assert history[2] in done.messages
        before = done.messages[: done.messages.index(history[2])]
        assert all(any(item is kept for kept in history[:2]) for item in before)  # where it stood

    def test_a_custom_tool_call_output_is_masked_and_excerpted_never_apart_from_its_call(
        self,
    ) -> None:
        history = [item for chunk in _codex_steps(4) for item in chunk]
        masked = compact_messages(
            history,
            max_tokens=2_000,
            format="openai_responses",
            policy=ObservationMaskingPolicy(1),
            protected_recent_turns=1,
        )
        custom = next(i for i in masked.messages if i.get("type") == "custom_tool_call_output")
        assert custom["output"][0]["text"].startswith("[tool result masked by cutctx]")
        assert responses_problems(masked.messages, history) == []
        excerpted = compact_messages(
            history, max_tokens=10_000, format="openai_responses", max_result_tokens=60
        )
        outputs = [i for i in excerpted.messages if i.get("type") == "custom_tool_call_output"]
        assert outputs
        assert all("lines left out" in json.dumps(i["output"]) for i in outputs)
        assert responses_problems(excerpted.messages, history) == []

    def test_a_codex_loop_of_150_steps_is_valid_within_budget_and_keeps_the_tools(self) -> None:
        steps = _codex_steps(150)
        figures = ps.run_window(
            openai_responses.OPENAI_RESPONSES,
            steps,
            max_tokens=6_000,
            estimator=CL100K,
            problems=responses_problems,
            count=lambda items: openai_responses.count_tokens(items, estimator=CL100K),
            restore_at=75,
        )
        assert figures.requests == len(steps)
        assert (figures.invalid, figures.over, figures.missing_task) == (0, 0, 0)
        assert figures.compactions > 3
        assert figures.restored_same


def test_the_conformance_kit_passes_a_codex_history() -> None:
    history = [item for chunk in _codex_steps(9) for item in chunk]
    check_format(openai_responses.OPENAI_RESPONSES, [history], system="Be brief.", estimator=CL100K)
