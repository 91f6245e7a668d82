"""Reads do not write: ``state()`` and ``last`` leave a window as they found it."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest

from cutctx import ContextWindow
from tests.unit.test_window import session

if TYPE_CHECKING:
    from cutctx.formats import FormatName


def requests_of(window: ContextWindow, fmt: FormatName, *, read: bool) -> list[object]:
    """The requests (and, at the end, the state) of a 40-step session, reading between steps."""
    made: list[object] = []
    for history in session(fmt, 40):
        if read:
            for _ in range(3):
                window.state()
                _ = window.last
        made.append(json.dumps(window.prepare(history), sort_keys=True))
    made.append(json.dumps(window.state(), sort_keys=True))
    made.append(window.stats)
    return made


@pytest.mark.parametrize("fmt", ["openai_chat", "anthropic", "openai_responses"])
class TestReadsDoNotWrite:
    def test_state_and_last_between_steps_change_no_request(self, fmt: FormatName) -> None:
        read = ContextWindow(fmt, max_tokens=3000, keep_first=1)
        untouched = ContextWindow(fmt, max_tokens=3000, keep_first=1)
        assert requests_of(read, fmt, read=True) == requests_of(untouched, fmt, read=False)

    def test_a_restored_window_read_before_its_first_step_sends_the_same(
        self, fmt: FormatName
    ) -> None:
        live = ContextWindow(fmt, max_tokens=3000, keep_first=1)
        steps = list(session(fmt, 40))
        for history in steps[:25]:
            live.prepare(history)
        state = json.loads(json.dumps(live.state()))
        read, untouched = ContextWindow.from_state(state), ContextWindow.from_state(state)
        for _ in range(2):
            assert read.state() == state
            _ = read.last
        for history in steps[25:]:
            assert read.prepare(history) == untouched.prepare(history)
        assert read.state() == untouched.state()
        assert read.stats == untouched.stats
