"""The metadata keys and message keys: their strings, who writes and reads them, and one home."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

import cutctx
from cutctx import (
    SUMMARY_TURN_ID_PREFIX,
    CompactionBudget,
    CompactionExecutor,
    ObservationMaskingPolicy,
    Role,
    SummarizingPolicy,
    Transcript,
    TranscriptTurn,
)
from cutctx._core import metadata
from cutctx._core.metadata import (
    KIND_METADATA,
    MASKED_KIND,
    PRIORITY_KEY,
    PRIORITY_METADATA,
    REPLACED_TURN_COUNT_METADATA,
    STICKY_KEY,
    SUMMARY_GROUP_METADATA,
    SUMMARY_KIND,
    TOOL_NAME_METADATA,
)
from cutctx.formats import _marks, openai_chat

# The strings are a contract: 0.1 wrote the executor's keys, context-clipper's users write the
# message keys, and applications read all of them back.
WIRE = {
    "KIND_METADATA": "cutctx.kind",
    "MASKED_KIND": "masked",
    "SUMMARY_KIND": "summary",
    "EXCERPT_KIND": "excerpt",
    "ORIGINAL_TOKENS_METADATA": "cutctx.original_tokens",
    "ORIGINAL_SHA256_METADATA": "cutctx.original_sha256",
    "SUMMARY_GROUP_METADATA": "cutctx.summary_group",
    "REPLACED_TURN_COUNT_METADATA": "cutctx.replaced_turn_count",
    "TOOL_NAME_METADATA": "cutctx.tool_name",
    "PRIORITY_METADATA": "cutctx.priority",
    "FRAMING_METADATA": "cutctx.framing",
    "STICKY_KEY": "sticky",
    "PRIORITY_KEY": "priority",
}
TURN_KEYS = frozenset(value for value in WIRE.values() if value.startswith("cutctx."))
SOURCE = Path(metadata.__file__).resolve().parents[1]


def call(n: int) -> tuple[TranscriptTurn, TranscriptTurn]:
    return (
        TranscriptTurn(f"a{n}", Role.ASSISTANT, "call", 5, f"c{n}"),
        TranscriptTurn(f"t{n}", Role.TOOL, "log " * 200, 200, f"c{n}"),
    )


def string_constants(path: Path) -> list[tuple[int, str]]:
    """Every string literal of a module, docstrings left out, with its line."""
    tree = ast.parse(path.read_text("utf-8"))
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
        if id(node) not in docstrings
    ]


class TestMetadataKeys:
    def test_every_key_is_the_documented_string(self) -> None:
        assert metadata.__all__ == sorted(WIRE)
        assert {name: getattr(metadata, name) for name in WIRE} == WIRE

    def test_the_keys_users_write_are_public_and_the_formats_names_for_them(self) -> None:
        assert (cutctx.STICKY_KEY, cutctx.PRIORITY_KEY) == (STICKY_KEY, PRIORITY_KEY)
        assert (_marks.STICKY_KEY, _marks.PRIORITY_KEY) == (STICKY_KEY, PRIORITY_KEY)

    def test_the_formats_read_the_message_keys_into_a_pin_and_the_priority_metadata(
        self,
    ) -> None:
        message = {"role": "user", "content": "hi", STICKY_KEY: True, PRIORITY_KEY: 3}
        transcript, _ = openai_chat.to_transcript([message])
        (turn,) = transcript.turns
        assert turn.pinned
        assert turn.metadata[PRIORITY_METADATA] == "3"

    def test_the_formats_name_a_tool_results_tool(self) -> None:
        messages: list[dict[str, Any]] = [
            {"role": "user", "content": "ls?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "x", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
                ],
            },
            {"role": "tool", "tool_call_id": "x", "content": "a b"},
        ]
        transcript, _ = openai_chat.to_transcript(messages)
        assert transcript.turns[2].metadata[TOOL_NAME_METADATA] == "ls"

    def test_the_executor_marks_masked_and_summary_turns(self) -> None:
        user = TranscriptTurn("u", Role.USER, "go", 5)
        transcript = Transcript((user, *call(1), *call(2), TranscriptTurn("e", Role.USER, "?", 5)))
        budget = CompactionBudget(300, 1)
        masked_plan = ObservationMaskingPolicy(keep_recent_results=0).decide(transcript, budget)
        masked = CompactionExecutor().apply(transcript, masked_plan).transcript
        assert masked.turns[2].metadata == {KIND_METADATA: MASKED_KIND}
        summary_plan = SummarizingPolicy("recap").decide(transcript, budget)
        (request,) = summary_plan.summarization_requests
        view = CompactionExecutor().apply(transcript, summary_plan, {request.group_id: "done"})
        (summary,) = [
            t for t in view.transcript.turns if t.turn_id.startswith(SUMMARY_TURN_ID_PREFIX)
        ]
        assert summary.metadata == {
            KIND_METADATA: SUMMARY_KIND,
            SUMMARY_GROUP_METADATA: request.group_id,
            REPLACED_TURN_COUNT_METADATA: str(len(request.turn_ids)),
        }

    def test_the_masking_policy_never_masks_a_turn_already_masked(self) -> None:
        tool = TranscriptTurn("t1", Role.TOOL, "x" * 800, 200, "c1", metadata={KIND_METADATA: "x"})
        turns = (
            TranscriptTurn("a1", Role.ASSISTANT, "call", 5, "c1"),
            tool,
            TranscriptTurn("e", Role.USER, "?", 5),
        )
        policy = ObservationMaskingPolicy(keep_recent_results=0)
        budget = CompactionBudget(50, 1)
        assert policy.decide(Transcript(turns), budget).tokens_after_estimate < 210
        already = TranscriptTurn(
            "t1", Role.TOOL, "x" * 800, 200, "c1", metadata={KIND_METADATA: MASKED_KIND}
        )
        plan = policy.decide(Transcript((turns[0], already, turns[2])), budget)
        assert plan.tokens_after_estimate == 210

    @pytest.mark.parametrize(
        "path",
        sorted(set(SOURCE.rglob("*.py")) - {Path(metadata.__file__).resolve()}),
        ids=lambda path: str(path.relative_to(SOURCE)),
    )
    def test_no_module_but_this_one_spells_a_turn_metadata_key(self, path: Path) -> None:
        """One home: every other module names a ``cutctx.`` metadata key by its constant."""
        found = [(line, text) for line, text in string_constants(path) if text in TURN_KEYS]
        assert found == []
