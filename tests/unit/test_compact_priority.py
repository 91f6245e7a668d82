"""``compact_messages`` in priority mode: context-clipper's message keys and their callables.

Counts use the word tokenizer of the format tests (3 tokens of framing and 1 of role a message,
a tool call framed again and priced with its answer's role): the quickstart below costs
10 + 10 + 10 + 12 + 9 + 8 = 59 tokens, and a request 3 more (the reply's priming).
"""

from __future__ import annotations

import copy
from typing import Any

from cutctx import DropOldestPolicy, SummarizationRequest, compact_messages
from cutctx.formats import openai_chat
from tests.unit.formats.helpers import WORDS

SEARCH = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "search", "arguments": '{"query": "Paris weather"}'},
}
# context-clipper's quickstart shape: the system prompt sticky at 100, a question and its
# answer at 1, a failed search call and its result at 0, a follow-up question at 2.
QUICKSTART: list[dict[str, Any]] = [
    {
        "role": "system",
        "content": "You are a helpful travel assistant.",
        "sticky": True,
        "priority": 100,
    },
    {"role": "user", "content": "What is the capital of France?", "priority": 1},
    {"role": "assistant", "content": "The capital of France is Paris.", "priority": 1},
    {"role": "assistant", "content": None, "tool_calls": [SEARCH], "priority": 0},
    {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": "Error: the search service timed out.",
        "priority": 0,
    },
    {"role": "user", "content": "And what about Germany?", "priority": 2},
]
LEVELS = (100, 1, 1, 0, 0, 2)


def plain(message: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in message.items() if k not in ("sticky", "priority")}


class TestPriorityMode:
    def test_without_priorities_the_answer_is_shed_and_the_failed_search_stays(self) -> None:
        messages = [plain(message) for message in QUICKSTART]
        done = compact_messages(
            messages, max_tokens=43, format="openai_chat", estimator=WORDS, protected_recent_turns=1
        )
        assert done.report.dropped_turn_ids == ("m1", "m2")
        assert done.plan.policy_name == (
            "chain(observation_masking@1.0.0+observation_masking@1.0.0+drop_oldest@1.0.0)"
        )

    def test_the_quickstart_sheds_the_failed_search_first_and_sends_no_keys(self) -> None:
        before = copy.deepcopy(QUICKSTART)
        done = compact_messages(
            QUICKSTART,
            max_tokens=43,
            format="openai_chat",
            estimator=WORDS,
            protected_recent_turns=1,
        )
        assert done.report.dropped_turn_ids == ("m3", "m4")
        # 38 for the messages, 3 for the reply's priming: the figure count_tokens gives
        assert (done.plan.policy_name, done.plan.tokens_after_estimate) == ("priority", 38 + 3)
        assert done.messages == [plain(QUICKSTART[i]) for i in (0, 1, 2, 5)]
        assert not any("sticky" in m or "priority" in m for m in done.messages)
        assert before == QUICKSTART
        assert openai_chat.count_tokens(done.messages, estimator=WORDS) == 38 + 3

    def test_like_pack_it_goes_on_level_by_level_and_never_sheds_the_sticky_prompt(
        self,
    ) -> None:
        # No protected tail, as context-clipper's pack: level 0 (21) -> 38, level 1 -> 18 (the
        # figures hold the 3 tokens of the reply's priming, as every Chat count with a tokenizer).
        done = compact_messages(
            QUICKSTART,
            max_tokens=23,
            format="openai_chat",
            estimator=WORDS,
            protected_recent_turns=0,
        )
        assert done.messages == [plain(QUICKSTART[0]), plain(QUICKSTART[5])]
        assert done.plan.tokens_after_estimate == 18 + 3
        # At exactly the sticky prompt's price, only the prompt is left.
        done = compact_messages(
            QUICKSTART,
            max_tokens=13,
            format="openai_chat",
            estimator=WORDS,
            protected_recent_turns=0,
        )
        assert done.messages == [plain(QUICKSTART[0])]

    def test_the_callables_do_the_same_without_keys_in_the_messages(self) -> None:
        messages = [plain(message) for message in QUICKSTART]
        done = compact_messages(
            messages,
            max_tokens=43,
            format="openai_chat",
            estimator=WORDS,
            protected_recent_turns=1,
            priority=lambda index, _message: LEVELS[index],
            pin=lambda _index, message: message["role"] == "system",
        )
        assert done.report.dropped_turn_ids == ("m3", "m4")
        kept = [messages[i] for i in (0, 1, 2, 5)]
        assert all(a is b for a, b in zip(done.messages, kept, strict=True))

    def test_priority_mode_plans_no_summary(self) -> None:
        calls: list[SummarizationRequest] = []

        def summarize(request: SummarizationRequest, _turns: Any) -> str:
            calls.append(request)
            return "summary"

        done = compact_messages(
            QUICKSTART,
            max_tokens=23,
            format="openai_chat",
            estimator=WORDS,
            summarize=summarize,
            protected_recent_turns=0,
        )
        assert calls == []
        assert done.plan.summarization_requests == ()
        assert done.report.summary_turn_ids == ()

    def test_in_priority_mode_a_long_result_is_masked_before_its_exchange_is_dropped(
        self,
    ) -> None:
        messages = copy.deepcopy(QUICKSTART)
        messages[4]["content"] = "Error: timed out. " + "trace " * 60  # 3 + 63 = 66 tokens
        done = compact_messages(
            messages, max_tokens=65, format="openai_chat", estimator=WORDS, protected_recent_turns=1
        )
        # 116 tokens; the stub costs 9 words + 3 = 12: 116 - 54 = 62 fits, nothing is dropped.
        assert done.report.masked_turn_ids == ("m4",)
        assert done.report.dropped_turn_ids == ()
        assert done.messages[4]["content"].startswith("[tool result masked by cutctx]")
        assert "priority" not in done.messages[4]
        assert openai_chat.count_tokens(done.messages, estimator=WORDS) == 62 + 3

    def test_a_policy_given_wins_over_priority_mode_and_the_keys_still_stay_home(self) -> None:
        done = compact_messages(
            QUICKSTART,
            max_tokens=43,
            format="openai_chat",
            estimator=WORDS,
            policy=DropOldestPolicy(),
            protected_recent_turns=1,
        )
        assert done.report.dropped_turn_ids == ("m1", "m2")
        assert not any("sticky" in m or "priority" in m for m in done.messages)

    def test_sticky_alone_pins_without_priority_mode(self) -> None:
        messages = [plain(message) for message in QUICKSTART]
        messages[1] = {**messages[1], "sticky": True}
        done = compact_messages(
            messages, max_tokens=43, format="openai_chat", estimator=WORDS, protected_recent_turns=1
        )
        assert done.plan.policy_name == (
            "chain(observation_masking@1.0.0+observation_masking@1.0.0+drop_oldest@1.0.0)"
        )
        # m1 is pinned now: drop-oldest takes the answer and the search exchange instead.
        assert done.report.dropped_turn_ids == ("m2", "m3", "m4")
        assert done.messages[1] == plain(QUICKSTART[1])
