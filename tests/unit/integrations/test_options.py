"""``cutctx.integrations._options``: one window per conversation, recall across them, options.

Driven with Chat Completions messages (no framework): what the hooks share, on its own.
"""

from __future__ import annotations

from typing import Any

import pytest
from baseaicore import ValidationError, sha256_of

from cutctx.formats import OPENAI_CHAT
from cutctx.integrations._options import UNCHANGED, Conversations, Options, Recent, WindowOptions

SYSTEM = "You are a coding agent."


def options(**given: Any) -> Options:
    chosen: WindowOptions = {"keep_first": 1, **given}  # type: ignore[typeddict-item]
    return Options("Hook", OPENAI_CHAT, 2_000, chosen)


def history(task: str, results: int, size: int = 40) -> list[dict[str, Any]]:
    """A task and ``results`` tool exchanges whose outputs name the task (distinct originals)."""
    made: list[dict[str, Any]] = [{"role": "user", "content": task}]
    for step in range(results):
        call = {"id": f"c{step}", "type": "function", "function": {"name": "sh", "arguments": "{}"}}
        made.append({"role": "assistant", "content": None, "tool_calls": [call]})
        body = "".join(f"{task} row {n}\n" for n in range(size))
        made.append({"role": "tool", "tool_call_id": f"c{step}", "content": body})
    return made


class TestConversations:
    def test_each_conversation_keeps_its_window_whatever_the_order_of_calls(self) -> None:
        held = Conversations(options())
        for step in range(1, 6):
            for task in ("A", "B"):
                held.prepare(history(task, step), SYSTEM)
        assert [window.stats.requests for window in held.windows] == [5, 5]
        assert [window.stats.resets for window in held.windows] == [0, 0]

    def test_a_key_names_the_conversation_before_its_history_does(self) -> None:
        held = Conversations(options())
        held.prepare(history("A", 1), SYSTEM, "one")
        held.prepare(history("A", 1), SYSTEM, "two")  # the same history, another conversation
        held.prepare(history("A", 2), SYSTEM, "one")
        assert len(held.windows) == 1  # "two" continued the window; "one" still names it
        edited = history("B", 2)
        held.prepare(edited, SYSTEM, "one")  # the same key, an edited history: the window resets
        assert held.latest.stats.resets == 1
        assert len(held.windows) == 1

    def test_the_least_recently_used_window_is_let_go_with_its_keys(self) -> None:
        held = Conversations(options(), keep=2)
        for task in ("A", "B", "C"):
            held.prepare(history(task, 1), SYSTEM, task)
        assert len(held.windows) == 2
        held.prepare(history("A", 2), SYSTEM, "A")  # let go: a new window
        assert held.latest.stats.requests == 1
        for _ in range(2):
            held.adopt(options().new(None))
        assert len(held.windows) == 2

    def test_a_restored_window_is_claimed_by_the_first_conversation_it_does_not_know(self) -> None:
        made = options()
        first = Conversations(made)
        first.prepare(history("A", 2), SYSTEM)
        restored = made.restore(first.latest.state())
        held = Conversations(made)
        held.adopt(restored)
        assert held.latest is restored
        held.prepare(history("A", 3), SYSTEM, "A")
        assert held.latest is restored
        assert restored.stats.requests == 2
        assert restored.stats.resets == 0

    def test_a_call_that_names_no_system_keeps_the_windows(self) -> None:
        held = Conversations(options())
        held.prepare(history("A", 1), SYSTEM)
        held.prepare(history("A", 2), UNCHANGED)
        assert held.latest.system == SYSTEM
        assert held.latest.stats.requests == 2
        held.prepare(history("B", 1), UNCHANGED)
        assert held.latest.system is None

    def test_recall_finds_the_original_in_any_conversation(self) -> None:
        held = Conversations(options(recall=True))
        held.prepare(history("A", 1, size=400), SYSTEM)
        held.prepare(history("B", 1), SYSTEM)
        original = "".join(f"A row {n}\n" for n in range(400))
        assert held.recall({"sha256": sha256_of(original)}).startswith("A row 0\n")
        unknown = held.recall({"sha256": "0" * 64})
        assert unknown.startswith("[cutctx_recall: no tool result with sha256")


class TestOptions:
    def test_differences_name_each_option_the_state_was_not_made_with(self) -> None:
        window = options(compact_at=0.7).new(SYSTEM)
        assert options(compact_at=0.7).differences(window) == []
        assert options().differences(window) == ["compact_at=0.8 (the state's 0.7)"]
        with pytest.raises(ValidationError, match=r"compact_at=0\.8") as caught:
            options().check(window)
        assert caught.value.details == {"fields": ["compact_at"]}

    def test_a_new_system_prompt_keeps_the_window_and_its_count(self) -> None:
        made = options()
        window = made.new(SYSTEM)
        window.prepare(history("A", 1))
        assert made.with_system(window, SYSTEM) is window
        assert made.with_system(window, "Another.") is window
        assert window.system == "Another."
        window.prepare(history("A", 2))
        assert (window.stats.requests, window.stats.resets) == (2, 0)


class TestRecent:
    def test_recall_finds_the_original_in_an_older_window_held(self) -> None:
        made = options(recall=True)
        held = Recent(made, keep=2)
        for task in ("A", "B", "C"):
            window = made.new(SYSTEM)
            window.prepare(history(task, 1, size=400))
            held.put(window, window.state())
        assert len(held.windows) == 2  # A's window was let go
        latest = "".join(f"C row {n}\n" for n in range(400))
        assert held.recall({"sha256": sha256_of(latest)}).startswith("C row 0\n")
        original = "".join(f"B row {n}\n" for n in range(400))
        assert held.recall({"sha256": sha256_of(original)}).startswith("B row 0\n")
        gone = "".join(f"A row {n}\n" for n in range(400))
        assert held.recall({"sha256": sha256_of(gone)}).startswith("[cutctx_recall: no tool")

    def test_a_window_is_found_by_the_very_state_it_wrote_last(self) -> None:
        made = options()
        held = Recent(made)
        window = made.new(SYSTEM)
        first = window.state()
        held.put(window, first)
        assert held.find(first) is window
        assert held.find(dict(first)) is None  # an equal copy: a checkpoint read back
        second = window.state()
        held.put(window, second)
        assert held.find(first) is None
        assert held.windows == (window,)
        assert held.latest is window
