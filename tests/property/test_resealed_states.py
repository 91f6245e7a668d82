"""A window's state edited anywhere and resealed: refused in one wording, or it continues.

Whoever can write a store can edit a state and seal it again (the digest is no signature). Such a
state is either refused where it comes in (``from_state``) or, for what only the history shows,
by the step that reads it, always as a one-line ``ValidationError`` beginning
``ContextWindow.from_state:`` that leaves the window as it was — never another exception from
inside a step.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from baseaicore import ValidationError
from hypothesis import given, settings
from hypothesis import strategies as st

from cutctx import ContextWindow
from cutctx._loop.codec import seal
from tests.unit.test_window import session

if TYPE_CHECKING:
    from collections.abc import Sequence

    from cutctx import SummarizationRequest, TranscriptTurn

_SETTINGS: dict[str, Any] = {"max_tokens": 3000, "keep_first": 1}
_STEPS = list(session("openai_chat", 60))


def _summarize(request: SummarizationRequest, turns: Sequence[TranscriptTurn]) -> str:
    del turns
    return f"summary of {len(request.turn_ids)} turns"


def _state() -> dict[str, Any]:
    window = ContextWindow("openai_chat", summarize=_summarize, **_SETTINGS)
    for history in _STEPS[:40]:
        window.prepare(history)
    state: dict[str, Any] = window.state()
    return state


_BASE = json.dumps(_state())


def _paths(value: object, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in ``value`` (JSON data) a value sits, the digest's left out."""
    found = [path] if path and path != ("digest",) else []
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _paths(item, (*path, index))
    return found


_PLACES = _paths(json.loads(_BASE))
_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-3, max_value=10**6),
    st.sampled_from(["", "x", "m1", "m3", "unmarked", "render", "H", "0" * 16]),
    st.just([]),
    st.just({}),
    st.lists(st.integers(min_value=0, max_value=50), max_size=3),
)


def _edited(place: tuple[Any, ...], value: object, *, drop: bool) -> dict[str, Any]:
    state: dict[str, Any] = json.loads(_BASE)
    parent: Any = state
    for key in place[:-1]:
        parent = parent[key]
    if drop:
        del parent[place[-1]]
    else:
        parent[place[-1]] = value
    return seal(state)


@settings(max_examples=120, deadline=None)
@given(st.sampled_from(_PLACES), _VALUES, st.booleans())
def test_a_resealed_edit_is_refused_in_one_wording_or_the_window_continues(
    place: tuple[Any, ...], value: object, drop: bool
) -> None:
    """Any one value of a state replaced (or removed) and the state resealed: ``from_state``
    refuses it, or the window it returns sends a request, or its step refuses it; each refusal a
    one-line ``ValidationError`` beginning ``ContextWindow.from_state:`` (or naming an option
    the state holds), and a refused step leaves the window's state as it was."""
    state = _edited(place, value, drop=drop)
    try:
        window = ContextWindow.from_state(state, summarize=_summarize)
    except ValidationError as error:
        text = str(error)
        assert "\n" not in text
        assert text.startswith(("ContextWindow.from_state:", "ContextWindow:")), text
        return
    before = window.state()
    try:
        window.prepare(_STEPS[-1])  # compacts: the old messages are read again
    except ValidationError as error:
        text = str(error)
        assert "\n" not in text
        assert window.state() == before
