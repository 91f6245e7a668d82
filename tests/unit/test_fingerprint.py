"""The window's fingerprint of what it has seen: equal content gives an equal fingerprint in any
process and in any key order, any other edit changes it, and it is stable across the Python
versions cutctx is tested on."""

from __future__ import annotations

import hashlib
import json
import marshal
import subprocess
import sys
from types import MappingProxyType
from typing import Any

import pytest
from baseaicore import ValidationError
from hypothesis import given
from hypothesis import strategies as st

from cutctx._loop.fingerprint import Fingerprint
from tests.strategies import JSON_DATA

HISTORY: list[Any] = [
    {"role": "user", "content": "Task: fix the build. é 漢 𝄞 \x00"},
    {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Let me look."},
            {"type": "tool_use", "id": "t1", "name": "run", "input": {"n": 10**30, "x": -1.5}},
        ],
    },
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]},
    {"role": "user", "content": "log: \udcff", "flags": [True, False, None, 0, -0.0]},
]
# The fingerprint of HISTORY. It is what every Python version cutctx is tested on (3.12 and 3.13
# in CI) must write: a change would make a state saved by one version reset when another restores
# it. Update it only with a state format change.
GOLDEN = (
    "52ce59dccb574f2a0d8cd80ed3523cfde409dffecb57ea7ad975fce1c21b4141"
    ".5c67082d6e106bb0172bf868856e5b27e96e4ba1086cdbd43d0906cf8be0d880"
)


def fingerprint(messages: list[Any]) -> str:
    return Fingerprint.of(messages, lambda message: message).hexdigest()


def raw(messages: list[Any]) -> str:
    """The raw half: what a history handed over in the same order is checked by."""
    return fingerprint(messages).partition(".")[0]


def resumed(messages: list[Any], saved: str) -> str | None:
    made = Fingerprint.resume(messages, lambda message: message, saved)
    return None if made is None else made.hexdigest()


def reordered(value: Any) -> Any:
    """``value`` with every dict's keys in reverse order (a store such as jsonb reorders them)."""
    if isinstance(value, dict):
        return {key: reordered(value[key]) for key in reversed(list(value))}
    if isinstance(value, list):
        return [reordered(item) for item in value]
    return value


def copy_of(value: Any) -> Any:
    """``value`` as new objects: every string built afresh (no sharing, no interning)."""
    if isinstance(value, str):
        return "".join(list(value))
    if isinstance(value, dict):
        return {copy_of(key): copy_of(item) for key, item in value.items()}
    if isinstance(value, list):
        return [copy_of(item) for item in value]
    return value


class TestStable:
    def test_the_fingerprint_is_the_golden_one(self) -> None:
        assert fingerprint(HISTORY) == GOLDEN

    def test_a_message_is_hashed_as_its_typed_length_prefixed_strings(self) -> None:
        # The bytes by their definition: "{" a dict, "u" a string (its UTF-8 length in four
        # little-endian bytes, then the bytes), "0" the end of the dict.
        written = b"{u\x04\0\0\0roleu\x04\0\0\0useru\x07\0\0\0contentu\x02\0\0\0hi0"
        expected = hashlib.sha256(written).hexdigest()
        assert raw([{"role": "user", "content": "hi"}]) == expected

    def test_the_canonical_half_chains_each_message_sorted(self) -> None:
        # One link a message: SHA-256 of the previous link and the message with its keys sorted.
        seed = hashlib.sha256(b"cutctx canonical fingerprint").digest()
        written = b"{u\x07\0\0\0contentu\x02\0\0\0hiu\x04\0\0\0roleu\x04\0\0\0user0"
        link = hashlib.sha256(seed + written).hexdigest()
        assert fingerprint([{"role": "user", "content": "hi"}]).partition(".")[2] == link

    def test_a_history_hashes_as_its_messages_written_one_after_another(self) -> None:
        # The raw half hashes the history a slice at a time; the bytes are each message's own,
        # whatever slice a message falls in, and wherever one must be made plain first.
        frozen = MappingProxyType({"role": "user", "content": "hi"})  # made plain first
        long = [copy_of(HISTORY[index % len(HISTORY)]) for index in range(150)]
        for history in (
            HISTORY,
            [*HISTORY, frozen, HISTORY[0]],
            long,
            [*long[:130], frozen, *long[130:]],
        ):
            plain = [dict(m) if isinstance(m, MappingProxyType) else m for m in history]
            written = b"".join(marshal.dumps(message, 0) for message in plain)
            assert raw(history) == hashlib.sha256(written).hexdigest()

    def test_another_process_with_another_hash_seed_gives_the_same_fingerprint(self) -> None:
        script = (
            "import json, sys\n"
            "from cutctx._loop.fingerprint import Fingerprint\n"
            "history = json.loads(sys.stdin.read())\n"
            "print(Fingerprint.of(history, lambda m: m).hexdigest())\n"
        )
        done = subprocess.run(  # noqa: S603 - this interpreter, a fixed script
            [sys.executable, "-c", script],
            input=json.dumps(HISTORY),
            capture_output=True,
            text=True,
            check=True,
            env={"PYTHONHASHSEED": "12345", "PYTHONPATH": ":".join(sys.path)},
        )
        assert done.stdout.strip() == fingerprint(HISTORY)

    def test_shared_and_interned_strings_give_the_same_fingerprint(self) -> None:
        text = sys.intern("the same text object in every message")
        shared = [{"role": "user", "content": text} for _ in range(3)]
        assert fingerprint(shared) == fingerprint([copy_of(m) for m in shared])

    def test_feeding_in_steps_gives_the_fingerprint_of_feeding_at_once(self) -> None:
        running = Fingerprint(lambda message: message)
        for end in (1, 1, 3, 4):
            running.feed(HISTORY[:end], running.count)
        assert running.count == len(HISTORY)
        assert running.hexdigest() == fingerprint(HISTORY)

    @given(st.lists(JSON_DATA, max_size=4))
    def test_equal_content_in_new_objects_gives_an_equal_fingerprint(
        self, messages: list[Any]
    ) -> None:
        """A history loaded from a store (a JSON round trip) is the history the window saw."""
        assert fingerprint(json.loads(json.dumps(messages))) == fingerprint(messages)
        assert fingerprint(copy_of(messages)) == fingerprint(messages)


class TestEdits:
    @given(st.lists(JSON_DATA, max_size=3), st.lists(JSON_DATA, max_size=3))
    def test_fingerprints_are_equal_exactly_when_the_json_texts_are(
        self, one: list[Any], other: list[Any]
    ) -> None:
        """Different data (a value, its type, a key, their order) gives a different fingerprint."""
        same = json.dumps(one) == json.dumps(other)
        assert (fingerprint(one) == fingerprint(other)) is same

    @pytest.mark.parametrize(
        ("one", "other"),
        [
            (["ab", "c"], ["a", "bc"]),  # where one message ends and the next begins
            ([{"a": "bc"}], [{"ab": "c"}]),  # where a key ends and its value begins
            ([{"n": 1}], [{"n": "1"}]),
            ([{"n": 1}], [{"n": True}]),
            ([{"n": 1}], [{"n": 1.0}]),
            ([[1, [2]]], [[[1], 2]]),
            ([HISTORY[1]], [{**HISTORY[1], "content": [*HISTORY[1]["content"][:1]]}]),
        ],
    )
    def test_an_edit_changes_the_fingerprint(self, one: list[Any], other: list[Any]) -> None:
        assert fingerprint(one) != fingerprint(other)
        assert resumed(other, fingerprint(one)) is None


class TestKeyOrder:
    """A store that returns keys in another order hands back the same history."""

    def test_a_history_with_its_keys_reordered_resumes_the_saved_fingerprint(self) -> None:
        saved = fingerprint(HISTORY)
        again = reordered(HISTORY)
        assert raw(again) != raw(HISTORY)  # the fast check alone would call it another history
        assert resumed(again, saved) is not None

    def test_a_resumed_fingerprint_continues_from_the_history_as_handed_over(self) -> None:
        """After a reordered restore, the next state is checked fast against the same order."""
        again = reordered(HISTORY)
        made = Fingerprint.resume(again[:2], lambda message: message, fingerprint(HISTORY[:2]))
        assert made is not None
        made.feed(again, made.count)
        assert made.hexdigest() == fingerprint(again)
        assert made.hexdigest().partition(".")[2] == fingerprint(HISTORY).partition(".")[2]

    def test_the_same_order_resumes_by_the_raw_half_and_keeps_the_saved_chain(self) -> None:
        made = Fingerprint.resume(copy_of(HISTORY), lambda message: message, fingerprint(HISTORY))
        assert made is not None
        assert made.hexdigest() == fingerprint(HISTORY)

    @given(st.lists(JSON_DATA, max_size=4))
    def test_equal_data_in_any_key_order_resumes_and_other_data_does_not(
        self, messages: list[Any]
    ) -> None:
        """Key order never decides whether a history is the one a state saw (sort_keys=True)."""
        saved = fingerprint(messages)
        stored = json.loads(json.dumps(messages, sort_keys=True))
        assert resumed(stored, saved) is not None
        assert resumed(reordered(messages), saved) is not None
        assert resumed([*messages, "one more"], saved) is None

    @pytest.mark.parametrize(
        "saved",
        ["", "0" * 64, "0" * 64 + ".", "0" * 64 + "." + "z" * 64, "0" * 64 + "." + "0" * 63],
    )
    def test_a_saved_digest_of_another_shape_matches_nothing(self, saved: str) -> None:
        assert resumed(HISTORY, saved) is None

    def test_keys_that_do_not_compare_are_sorted_by_their_repr(self) -> None:
        one: dict[Any, Any] = {1: "a", "1": "b"}
        other: dict[Any, Any] = {"1": "b", 1: "a"}
        assert resumed([other], fingerprint([one])) is not None

    def test_a_tuple_is_the_list_a_json_store_gives_back(self) -> None:
        saved = fingerprint([{"role": "user", "content": ("a", ("b",))}])
        assert resumed([{"role": "user", "content": ["a", ["b"]]}], saved) is not None


class TestObjects:
    def test_a_mapping_reads_as_the_dict_it_holds(self) -> None:
        message = {"role": "user", "content": [{"type": "text", "text": "hi"}]}
        frozen = MappingProxyType(
            {**message, "content": [MappingProxyType({"type": "text", "text": "hi"})]}
        )
        assert fingerprint([frozen]) == fingerprint([message])

    def test_an_sdk_object_reads_as_the_data_it_dumps(self) -> None:
        from anthropic.types import TextBlock, ToolUseBlock  # noqa: PLC0415 - dev dependency

        blocks = [
            TextBlock(type="text", text="Let me look."),
            ToolUseBlock(type="tool_use", id="toolu_1", name="run", input={"cmd": "ls"}),
        ]
        dumped = [block.model_dump(exclude_none=True) for block in blocks]
        assert fingerprint([{"role": "assistant", "content": blocks}]) == fingerprint(
            [{"role": "assistant", "content": dumped}]
        )

    def test_a_value_that_is_not_message_data_is_named_with_its_message(self) -> None:
        with pytest.raises(ValidationError, match=r"messages\[1\] holds a object"):
            fingerprint([{"role": "user", "content": "hi"}, {"content": [object()]}])


def agent_history(steps: int) -> list[dict[str, Any]]:
    """An OpenAI Chat agent session: a task, then ``steps`` tool calls and their results."""
    history: list[dict[str, Any]] = [{"role": "user", "content": "TASK: make the build green."}]
    for step in range(steps):
        arguments = json.dumps({"step": step, "cmd": "make"})
        function = {"name": "run", "arguments": arguments}
        call: dict[str, Any] = {"id": f"call_{step}", "type": "function", "function": function}
        history.append({"role": "assistant", "content": None, "tool_calls": [call]})
        body = f"step {step}: " + "log line with output\n" * (20 + step % 7)
        history.append({"role": "tool", "tool_call_id": f"call_{step}", "content": body})
    return history


class TestRestoredWindow:
    def test_a_store_that_sorts_keys_gives_the_live_windows_requests_and_no_reset(self) -> None:
        """Each step restored from the last one's state, the history handed over alternately as
        written and with its keys sorted (as PostgreSQL jsonb or ``sort_keys=True`` returns it),
        sends what one live window sends, and never resets."""
        from cutctx import ContextWindow  # noqa: PLC0415 - the window over the fingerprint

        history = agent_history(40)
        live = ContextWindow("openai_chat", max_tokens=1500, keep_first=1)
        stored = json.dumps(ContextWindow("openai_chat", max_tokens=1500, keep_first=1).state())
        for step, end in enumerate(range(3, len(history) + 1, 2)):
            expected = live.prepare(history[:end])
            restored = ContextWindow.from_state(json.loads(stored))
            handed = history[:end]
            if step % 2:
                handed = json.loads(json.dumps(handed, sort_keys=True))
            assert restored.prepare(handed) == expected
            assert restored.stats.resets == 0
            stored = json.dumps(restored.state(), sort_keys=True)
        assert live.stats.compactions >= 1
        assert json.loads(stored)["stats"] == json.loads(json.dumps(live.state()))["stats"]
