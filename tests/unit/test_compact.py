"""``cutctx.compact_messages``: the one-call convenience over plan, fulfil and apply."""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import inspect
import warnings
from typing import TYPE_CHECKING, Any

import pytest
from baseaicore import ValidationError

from cutctx import (
    BudgetUnsatisfiable,
    CharRatioEstimator,
    CompactedMessages,
    DropOldestPolicy,
    ObservationMaskingPolicy,
    PolicyChain,
    SummarizationRequest,
    SummarizingPolicy,
    SummaryMissing,
    TranscriptTurn,
    acompact_messages,
    compact_messages,
)
from cutctx.formats import OPENAI_CHAT, openai_chat
from cutctx.formats._common import SUMMARY_LABEL
from tests.unit.formats.helpers import WORDS

if TYPE_CHECKING:
    from collections.abc import Coroutine, Sequence


def chat(turns: int) -> list[dict[str, Any]]:
    """A system prompt, then user/assistant pairs of ten words each (14 tokens with framing and
    role)."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "Be brief."}]
    for index in range(turns):
        role = "user" if index % 2 == 0 else "assistant"
        messages.append({"role": role, "content": " ".join([f"w{index}"] * 10)})
    return messages


class TestCompactMessages:
    def test_fits_without_change_when_under_budget(self) -> None:
        messages = chat(4)
        done = compact_messages(messages, max_tokens=1000, format="openai_chat", estimator=WORDS)
        assert done.messages == messages
        assert done.report.kept_turn_ids == ("m0", "m1", "m2", "m3", "m4")
        assert done.plan.policy_name == (
            "chain(observation_masking@1.0.0+observation_masking@1.0.0+drop_oldest@1.0.0)"
        )

    def test_accepts_the_format_module_itself(self) -> None:
        messages = chat(2)
        done = compact_messages(messages, max_tokens=100, format=openai_chat)
        assert done.messages == messages
        assert isinstance(done, CompactedMessages)

    def test_calls_summarize_once_per_request_with_its_turns(self) -> None:
        calls: list[tuple[SummarizationRequest, tuple[TranscriptTurn, ...]]] = []

        def summarize(request: SummarizationRequest, turns: Any) -> str:
            calls.append((request, tuple(turns)))
            return "Earlier: chat."

        messages = chat(8)  # 6 + 8 * 14 = 118 tokens
        done = compact_messages(
            messages,
            max_tokens=70,
            format="openai_chat",
            estimator=WORDS,
            summarize=summarize,
            protected_recent_turns=2,
        )
        assert len(calls) == 1
        request, turns = calls[0]
        assert request.prompt_id == "cutctx.summary"
        assert [t.turn_id for t in turns] == ["m1", "m2", "m3", "m4", "m5", "m6"]
        assert done.plan.policy_name == (
            "chain(observation_masking@1.0.0+summarizing@1.0.0+observation_masking@1.0.0"
            "+drop_oldest@1.0.0)"
        )
        # span of 6 x 14 = 84 tokens -> target round(16.8) = 17; 6 + 17 + 28 = 51
        assert done.plan.tokens_after_estimate == 51
        # the summary is a labelled user message: 3 + 1 (its role) + 11 label words + 2 = 17,
        # its target
        assert done.messages == [
            messages[0],
            {"role": "user", "content": f"{SUMMARY_LABEL}\n\nEarlier: chat."},
            *messages[7:],
        ]

    def test_a_summary_that_is_not_a_string_is_refused(self) -> None:
        with pytest.raises(ValidationError, match="not a string") as caught:
            compact_messages(
                chat(8),
                max_tokens=70,
                format="openai_chat",
                estimator=WORDS,
                summarize=lambda _request, _turns: 42,  # type: ignore[arg-type,return-value]
                protected_recent_turns=2,
            )
        assert caught.value.details["group_id"].startswith("span-")

    def test_summaries_that_push_a_fitting_plan_over_budget_are_refused(self) -> None:
        def verbose(_request: SummarizationRequest, _turns: Any) -> str:
            return "word " * 40

        with pytest.raises(ValidationError, match="over the budget of 70") as caught:
            compact_messages(
                chat(8),
                max_tokens=70,
                format="openai_chat",
                estimator=WORDS,
                summarize=verbose,
                protected_recent_turns=2,
            )
        # the plan's 51, less the target of 17, plus the 3 + 1 + 11 + 40 = 55 the summary costs
        assert caught.value.details["tokens_needed"] == 89
        assert len(caught.value.details["group_ids"]) == 1

    def test_a_summary_over_its_target_is_accepted_while_the_whole_still_fits(self) -> None:
        done = compact_messages(
            chat(8),
            max_tokens=70,
            format="openai_chat",
            estimator=WORDS,
            summarize=lambda _request, _turns: "word " * 20,
            protected_recent_turns=2,
        )
        # 51 - 17 + (3 + 1 + 11 + 20) = 69, within 70
        assert done.messages[1] == {
            "role": "user",
            "content": f"{SUMMARY_LABEL}\n\n" + ("word " * 20).rstrip(),
        }

    def test_a_policy_that_summarizes_without_summarize_raises_summary_missing(self) -> None:
        with pytest.raises(SummaryMissing):
            compact_messages(
                chat(8),
                max_tokens=70,
                format="openai_chat",
                estimator=WORDS,
                policy=SummarizingPolicy("mine", min_span_turns=1),
                protected_recent_turns=2,
            )

    def test_records_the_estimator_name_or_the_character_ratio(self) -> None:
        messages: list[dict[str, Any]] = [
            {"role": "user", "content": "q"},
            {
                "role": "assistant",
                "tool_calls": [
                    {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}
                ],
            },
            {"role": "tool", "tool_call_id": "c", "content": "x " * 400},
            {"role": "assistant", "content": "done"},
        ]
        named = compact_messages(
            messages,
            max_tokens=100,
            format="openai_chat",
            estimator=WORDS,
            policy=ObservationMaskingPolicy(0, estimator=WORDS),
            protected_recent_turns=0,
        )
        assert (named.plan.estimator_name, named.plan.estimator_ratio) == ("words", None)
        ratio = compact_messages(
            messages,
            max_tokens=150,
            format="openai_chat",
            policy=ObservationMaskingPolicy(0),
            protected_recent_turns=0,
        )
        assert (ratio.plan.estimator_name, ratio.plan.estimator_ratio) == (None, 4.0)

    def test_an_untouchable_set_over_budget_raises_budget_unsatisfiable(self) -> None:
        with pytest.raises(BudgetUnsatisfiable):
            compact_messages(chat(4), max_tokens=3, format="openai_chat", estimator=WORDS)

    @pytest.mark.parametrize(
        ("kwargs", "fragment"),
        [
            ({"format": "gemini"}, "format must be a cutctx.formats.Format or one of"),
            ({"format": dataclasses}, "format must be a cutctx.formats.Format or one of"),
            ({"format": "openai_chat", "summarize": "yes"}, "summarize must be callable"),
            ({"format": "openai_chat", "policy": object()}, "policy must be a CompactionPolicy"),
        ],
    )
    def test_bad_arguments_are_refused(self, kwargs: dict[str, Any], fragment: str) -> None:
        with pytest.raises(ValidationError, match=fragment):
            compact_messages(chat(2), max_tokens=100, **kwargs)

    def test_a_format_object_gives_what_its_name_gives(self) -> None:
        messages = agent_session(30, large_at=29, large_chars=8000)
        by_object = compact_messages(messages, max_tokens=1500, format=OPENAI_CHAT, keep_first=1)
        by_name = compact_messages(messages, max_tokens=1500, format="openai_chat", keep_first=1)
        assert by_object == by_name
        assert by_object.report.masked_turn_ids  # a compaction, not messages passed through

    def test_a_misspelt_format_name_is_refused(self) -> None:
        with pytest.raises(ValidationError, match="openai-chat") as caught:
            compact_messages(chat(2), max_tokens=100, format="openai-chat")  # type: ignore[arg-type]
        assert caught.value.details["field"] == "format"

    def test_the_result_is_frozen(self) -> None:
        done = compact_messages(chat(2), max_tokens=100, format="openai_chat")
        with pytest.raises(dataclasses.FrozenInstanceError):
            done.plan = done.plan  # type: ignore[misc]


def agent_session(exchanges: int, *, large_at: int, large_chars: int) -> list[dict[str, Any]]:
    """A system prompt, the task, ``exchanges`` tool calls with results, a note every fifth.

    The result of exchange ``large_at`` is ``large_chars`` long; every other is 600 characters.
    """
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Make the build green."},
    ]
    for number in range(1, exchanges + 1):
        call = f"call_{number}"
        messages.append(
            {
                "role": "assistant",
                "content": f"Running step {number}.",
                "tool_calls": [
                    {"id": call, "type": "function", "function": {"name": "sh", "arguments": "{}"}}
                ],
            }
        )
        size = large_chars if number == large_at else 600
        messages.append({"role": "tool", "tool_call_id": call, "content": "y" * size})
        if number % 5 == 0:
            messages.append({"role": "assistant", "content": f"Checkpoint {number}."})
            messages.append({"role": "user", "content": "Keep going."})
    return messages


class TestTheRecentResultsFloor:
    def test_one_large_result_inside_the_floor_is_masked_before_anything_is_dropped(self) -> None:
        """60 exchanges at 12 000 tokens: one large result sits inside the floor (the last two
        results) but outside the protected tail. Masking only outside the floor leaves it, so
        drop-oldest must drop everything older with it; masking the floor too keeps every message.
        """
        messages = agent_session(60, large_at=59, large_chars=48_000)
        assert len(messages) == 146
        floor_kept = compact_messages(
            messages,
            estimator=CharRatioEstimator(),
            max_tokens=12_000,
            format="openai_chat",
            policy=PolicyChain([ObservationMaskingPolicy(2), DropOldestPolicy()]),
        )
        assert len(floor_kept.messages) == 5  # the system prompt and the protected tail
        assert floor_kept.report.dropped_turn_ids[-1] == "m141"  # the large result went too
        done = compact_messages(
            messages, estimator=CharRatioEstimator(), max_tokens=12_000, format="openai_chat"
        )
        assert len(done.messages) == 146
        assert done.report.dropped_turn_ids == ()
        assert "m141" in done.report.masked_turn_ids
        assert done.plan.tokens_after_estimate == openai_chat.count_tokens(done.messages)
        assert done.plan.tokens_after_estimate <= 12_000

    def test_keep_first_keeps_the_task_in_every_plan(self) -> None:
        messages = agent_session(60, large_at=59, large_chars=48_000)
        done = compact_messages(
            messages,
            max_tokens=1_500,
            format="openai_chat",
            keep_first=1,
            keep_recent_results=0,
        )
        assert done.messages[:2] == messages[:2]
        assert "m1" in done.report.kept_turn_ids
        assert done.report.dropped_turn_ids  # something had to go, never the task
        assert openai_chat.count_tokens(done.messages) <= 1_500

    def test_keep_first_and_keep_recent_results_are_checked(self) -> None:
        with pytest.raises(ValidationError, match="keep_first"):
            compact_messages(chat(2), max_tokens=100, format="openai_chat", keep_first=-1)
        with pytest.raises(ValidationError, match="keep_recent_results"):
            compact_messages(chat(2), max_tokens=100, format="openai_chat", keep_recent_results=-1)


def summary_of(request: SummarizationRequest, turns: Sequence[TranscriptTurn]) -> str:
    return f"{request.group_id}: {len(turns)} turns from {turns[0].turn_id}"


async def asummary_of(request: SummarizationRequest, turns: Sequence[TranscriptTurn]) -> str:
    await asyncio.sleep(0)
    return summary_of(request, turns)


SUMMARIZED: dict[str, Any] = {
    "max_tokens": 70,
    "format": "openai_chat",
    "estimator": WORDS,
    "protected_recent_turns": 2,
}


class TestAcompactMessages:
    def test_it_awaits_an_async_summarize_and_matches_compact_messages(self) -> None:
        messages = chat(8)
        done = compact_messages(messages, summarize=summary_of, **SUMMARIZED)
        awaited = asyncio.run(acompact_messages(messages, summarize=asummary_of, **SUMMARIZED))
        assert awaited == done
        assert done.report.summary_turn_ids  # a summary was planned and fulfilled
        assert any(SUMMARY_LABEL in str(m["content"]) for m in awaited.messages)

    def test_a_sync_summarize_is_called_as_it_is(self) -> None:
        messages = agent_session(30, large_at=29, large_chars=8000)
        kwargs: dict[str, Any] = {"max_tokens": 1500, "format": "openai_chat", "keep_first": 1}
        done = compact_messages(
            messages, estimator=CharRatioEstimator(), summarize=summary_of, **kwargs
        )
        awaited = asyncio.run(
            acompact_messages(
                messages, estimator=CharRatioEstimator(), summarize=summary_of, **kwargs
            )
        )
        assert awaited == done
        assert done.report.summary_turn_ids

    def test_compact_messages_refuses_an_async_summarize_leaving_no_coroutine(self) -> None:
        made: list[Coroutine[Any, Any, str]] = []

        def summarize(request: SummarizationRequest, turns: Sequence[TranscriptTurn]) -> Any:
            made.append(asummary_of(request, turns))
            return made[-1]

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with pytest.raises(ValidationError, match="acompact_messages"):
                compact_messages(chat(8), summarize=summarize, **SUMMARIZED)
            gc.collect()
        assert len(made) == 1
        assert inspect.getcoroutinestate(made[0]) == inspect.CORO_CLOSED
        assert [w for w in caught if issubclass(w.category, RuntimeWarning)] == []

    def test_an_async_function_itself_is_refused_the_same_way(self) -> None:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with pytest.raises(ValidationError, match="acompact_messages") as raised:
                compact_messages(chat(8), summarize=asummary_of, **SUMMARIZED)  # type: ignore[arg-type]
            gc.collect()
        assert raised.value.details["field"] == "summarize"
        assert [w for w in caught if issubclass(w.category, RuntimeWarning)] == []

    def test_it_is_exported_beside_compact_messages(self) -> None:
        import cutctx  # noqa: PLC0415 - the package's surface is what is tested

        assert "acompact_messages" in cutctx.__all__
        assert getattr(cutctx, "acompact_messages", None) is acompact_messages
