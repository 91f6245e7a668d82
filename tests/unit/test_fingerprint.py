"""The window's fingerprint of what it has seen: equal content gives equal bytes in any process,
any edit changes it, and it is stable across the Python versions cutctx is tested on."""

from __future__ import annotations

import hashlib
import json
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
GOLDEN = "52ce59dccb574f2a0d8cd80ed3523cfde409dffecb57ea7ad975fce1c21b4141"


def fingerprint(messages: list[Any]) -> str:
    return Fingerprint.of(messages, lambda message: message).hexdigest()


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
        assert fingerprint([{"role": "user", "content": "hi"}]) == expected

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
            ([{"a": 1, "b": 2}], [{"b": 2, "a": 1}]),  # key order is what is sent
            ([[1, [2]]], [[[1], 2]]),
            ([HISTORY[1]], [{**HISTORY[1], "content": [*HISTORY[1]["content"][:1]]}]),
        ],
    )
    def test_an_edit_changes_the_fingerprint(self, one: list[Any], other: list[Any]) -> None:
        assert fingerprint(one) != fingerprint(other)


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
