"""Pins win over ``observation=``: a pinned or system message is never read as an observation.

``keep_first`` messages, messages ``pin=`` marks and system messages are untouchable; a predicate
that marks one of them (here: one that marks every message) does not make it a tool result, so
it is never masked, excerpted, recalled or dropped, and it comes back as the caller's object.
"""

from __future__ import annotations

import copy
import functools
import json
from typing import TYPE_CHECKING, Any

import pytest
from baseaicore import ValidationError

from cutctx import CharRatioEstimator, ContextWindow, compact_messages, default_messages_policy

if TYPE_CHECKING:
    from cutctx.formats import FormatName

CHARS = CharRatioEstimator()
_BODY_LINES = 200
# Version 3 of the window's default masks the observations its cuts reach; version 4 cuts this
# window (its system prompt is over a fifth of it) by dropping whole exchanges instead.
MASKING = default_messages_policy(estimator=CHARS, version=3)


def _lines(label: str, count: int = _BODY_LINES) -> str:
    return "".join(f"{label} line {n}: some text that fills the line\n" for n in range(count))


def everything(message: dict[str, Any]) -> bool:
    """A predicate that marks every message (the pins must win over it)."""
    del message
    return True


def swe_history(fmt: FormatName, steps: int) -> list[dict[str, Any]]:
    """SWE-agent's shape: a demonstration and the task before the steps, every one long.

    With ``keep_first=2`` the pins are the demonstration and the task (in Anthropic's strict
    alternation: the task and the first step).
    """
    field, model = ("parts", "model") if fmt == "gemini" else ("content", "assistant")

    def message(role: str, text: str) -> dict[str, Any]:
        if fmt == "openai_chat":
            return {"role": role, "content": text}
        block = {"type": "text", "text": text} if fmt == "anthropic" else {"text": text}
        return {"role": role, field: [block]}

    history = [message("user", "TASK\n" + _lines("task"))]
    if fmt != "anthropic":  # Anthropic's strict alternation: the task alone, then the steps
        history.insert(0, message("user", "DEMONSTRATION\n" + _lines("demo")))
    for step in range(steps):
        history.append(message(model, f"Step {step}: run the tests."))
        history.append(message("user", f"OBSERVATION {step}\n" + _lines(f"out {step}", 80)))
    if fmt == "openai_chat":
        history.insert(0, {"role": "system", "content": "SYSTEM\n" + _lines("system", 40)})
    return history


def _first(fmt: FormatName) -> int:
    """Where the demonstration is: after the system message in Chat."""
    return 1 if fmt == "openai_chat" else 0


@pytest.mark.parametrize("fmt", ["openai_chat", "anthropic", "gemini"])
@pytest.mark.parametrize("keep_first", [1, 2])
class TestPinsWinOverObservations:
    def test_the_window_sends_the_pinned_messages_as_given(
        self, fmt: FormatName, keep_first: int
    ) -> None:
        history = swe_history(fmt, 30)
        before = copy.deepcopy(history)
        window = ContextWindow(
            fmt,
            estimator=CHARS,
            max_tokens=12_000,
            keep_first=keep_first,
            observation=everything,
            max_result_tokens=500,
            policy=MASKING,
        )
        first = _first(fmt)
        for end in range(first + 4, len(history) + 1, 2):
            request = window.prepare(history[:end])
            for index in range(first + keep_first):
                assert request[index] is history[index], (end, index)
        last = window.last
        assert last is not None
        assert last.report.masked_turn_ids  # the observations after the pins are masked
        assert history == before

    def test_compact_messages_returns_the_pinned_messages_as_given(
        self, fmt: FormatName, keep_first: int
    ) -> None:
        history = swe_history(fmt, 30)
        for cap in (None, 0.05):
            done = compact_messages(
                history,
                max_tokens=12_000,
                format=fmt,
                estimator=CHARS,
                keep_first=keep_first,
                observation=everything,
                max_result_tokens=cap,
            )
            assert done.report.masked_turn_ids
            for index in range(_first(fmt) + keep_first):
                assert done.messages[index] is history[index], (cap, index)


def test_a_message_pinned_by_pin_is_never_an_observation() -> None:
    """``pin=`` wins too: the marked message it pins is sent whole, not excerpted."""
    history = swe_history("openai_chat", 20)
    pinned = 8  # an observation in the middle of the run

    def pin(index: int, message: dict[str, Any]) -> bool:
        del message
        return index == pinned

    window = ContextWindow(
        "openai_chat",
        estimator=CHARS,
        max_tokens=12_000,
        keep_first=2,
        observation=everything,
        pin=pin,
        max_result_tokens=200,
    )
    request = window.prepare(history)
    assert any(message is history[pinned] for message in request)
    done = compact_messages(
        history,
        max_tokens=12_000,
        format="openai_chat",
        estimator=CHARS,
        observation=everything,
        pin=pin,
        max_result_tokens=200,
    )
    assert any(message is history[pinned] for message in done.messages)
    assert f"m{pinned}" not in done.report.excerpted_turn_ids


def test_an_observation_in_the_protected_tail_is_excerpted_as_a_tool_result_is() -> None:
    """The tail's rule is unchanged: a marked observation there is a tool result over the cap."""
    history = swe_history("openai_chat", 4)
    done = compact_messages(
        history,
        max_tokens=12_000,
        format="openai_chat",
        estimator=CHARS,
        keep_first=2,
        observation=everything,
        max_result_tokens=200,
        protected_recent_turns=2,
    )
    last = f"m{len(history) - 1}"
    assert last in done.report.excerpted_turn_ids
    assert done.messages[1] is history[1]
    assert done.messages[2] is history[2]


def _starts(prefix: str, message: dict[str, Any]) -> bool:
    return str(message["content"]).startswith(prefix)


def _indexed(prefix: str, index: int, message: dict[str, Any]) -> bool:
    del index
    return str(message["content"]).startswith(prefix)


class _Marker:
    """An object with ``__call__`` of the message."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix

    def __call__(self, message: dict[str, Any]) -> bool:
        return str(message["content"]).startswith(self.prefix)


class _IndexedMarker:
    """An object with ``__call__`` of ``(index, message)``."""

    def __call__(self, index: int, message: dict[str, Any]) -> bool:
        del index
        return str(message["content"]).startswith("OBSERVATION")


class _Methods:
    def marks(self, message: dict[str, Any]) -> bool:
        return str(message["content"]).startswith("OBSERVATION")

    @staticmethod
    def static(message: dict[str, Any]) -> bool:
        return str(message["content"]).startswith("OBSERVATION")


def _either(*args: Any) -> bool:
    """``*args``: called as ``pin=`` is, with ``(index, message)``."""
    return str(args[1]["content"]).startswith("OBSERVATION")


def _with_default(message: dict[str, Any], prefix: str = "OBSERVATION") -> bool:
    return str(message["content"]).startswith(prefix)


OBSERVATION_SHAPES: dict[str, Any] = {
    "partial of (prefix, message)": functools.partial(_starts, "OBSERVATION"),
    "partial of (prefix, index, message)": functools.partial(_indexed, "OBSERVATION"),
    "partial with a keyword": functools.partial(_with_default, prefix="OBSERVATION"),
    "callable object": _Marker("OBSERVATION"),
    "callable object of (index, message)": _IndexedMarker(),
    "bound method": _Methods().marks,
    "static method": _Methods.static,
    "lambda of the message": lambda message: _starts("OBSERVATION", message),
    "lambda of (index, message)": lambda _index, message: _starts("OBSERVATION", message),
    "*args": _either,
    "one required, one default": _with_default,
}


class TestObservationCallables:
    """``observation=`` takes any callable of the message or of ``(index, message)``."""

    @pytest.mark.parametrize("shape", sorted(OBSERVATION_SHAPES))
    def test_every_shape_marks_the_same_messages_as_a_plain_function(self, shape: str) -> None:
        history = swe_history("openai_chat", 12)

        def plain(message: dict[str, Any]) -> bool:
            return _starts("OBSERVATION", message)

        function = OBSERVATION_SHAPES[shape]
        expected = compact_messages(
            history, max_tokens=6000, format="openai_chat", estimator=CHARS, observation=plain
        )
        assert expected.report.masked_turn_ids
        done = compact_messages(
            history, max_tokens=6000, format="openai_chat", estimator=CHARS, observation=function
        )
        assert done.messages == expected.messages
        windows = [
            ContextWindow("openai_chat", estimator=CHARS, max_tokens=6000, observation=chosen)
            for chosen in (plain, function)
        ]
        assert windows[0].prepare(history) == windows[1].prepare(history)

    def test_a_builtin_without_a_signature_is_called_with_the_message(self) -> None:
        """``bool`` has no signature Python can read: it is called with the message alone (a
        message is a non-empty dict, so every user message after the pins is an observation)."""
        history = swe_history("openai_chat", 30)
        done = compact_messages(
            history,
            max_tokens=12_000,
            format="openai_chat",
            estimator=CHARS,
            keep_first=2,
            observation=bool,
        )
        assert done.report.masked_turn_ids
        window = ContextWindow(
            "openai_chat",
            estimator=CHARS,
            max_tokens=12_000,
            keep_first=2,
            observation=bool,
            policy=MASKING,
        )
        request = window.prepare(history)
        assert window.last is not None
        assert window.last.report.masked_turn_ids
        assert request[:3] == history[:3]

    @pytest.mark.parametrize(
        "function",
        [
            lambda: True,
            lambda _a, _b, _c: True,
            functools.partial(_indexed, "x", 1, {}),
            _Methods,  # a class: made with no argument
        ],
        ids=["no argument", "three arguments", "a partial of everything", "a class"],
    )
    def test_a_callable_of_neither_shape_is_refused_when_made(self, function: Any) -> None:
        pattern = r"observation must take the message or \(index, message\)"
        with pytest.raises(ValidationError, match="ContextWindow: " + pattern):
            ContextWindow("openai_chat", max_tokens=6000, observation=function)
        with pytest.raises(ValidationError, match="compact_messages: " + pattern):
            compact_messages(
                swe_history("openai_chat", 1),
                max_tokens=6000,
                format="openai_chat",
                observation=function,
            )


def test_a_restored_window_keeps_the_pins_over_observations() -> None:
    """A window restored mid-run reads the held messages again: the pins still win there."""
    history = swe_history("openai_chat", 30)
    options: dict[str, Any] = {
        "estimator": CHARS,
        "max_tokens": 12_000,
        "keep_first": 2,
        "observation": everything,
        "max_result_tokens": 500,
    }
    straight = ContextWindow("openai_chat", **options)
    window = ContextWindow("openai_chat", **options)
    for step, end in enumerate(range(5, len(history) + 1, 2)):
        if step == 10:
            state = json.loads(json.dumps(window.state()))
            window = ContextWindow.from_state(state, estimator=CHARS, observation=everything)
        request = window.prepare(history[:end])
        assert request == straight.prepare(history[:end])
        assert request[1] is history[1]
        assert request[2] is history[2]
