"""``Format`` is what a format is; the window's hooks and the command line's presentation are
optional mixins beside it (``WindowHooks``, ``Presentation``), with defaults."""

from __future__ import annotations

from typing import Any, cast

from cutctx import ContextWindow
from cutctx.formats import (
    ANTHROPIC,
    BEDROCK_CONVERSE,
    GEMINI,
    OPENAI_CHAT,
    OPENAI_RESPONSES,
    Binding,
    Format,
    Presentation,
    Reader,
    Rendered,
    WindowHooks,
    hooks_of,
    presentation_of,
)

ONLY_BESIDE = ("settled", "mark_cache", "fingerprint_data", "pieces", "system_field")


class Plain(Format[Any]):
    """A format of name, reader and render alone (Chat's, delegated): no mixin."""

    @property
    def name(self) -> str:
        return "plain"

    def reader(self, **options: Any) -> Reader[Any]:
        return OPENAI_CHAT.reader(**options)

    def render(self, view: Any, binding: Binding[Any]) -> Rendered[Any]:
        return OPENAI_CHAT.render(view, binding)


def test_a_format_holds_none_of_the_hooks_that_live_beside_it() -> None:
    assert not [name for name in ONLY_BESIDE if hasattr(Format, name)]
    assert all(hasattr(WindowHooks, name) for name in ONLY_BESIDE[:3])
    assert all(hasattr(Presentation, name) for name in ONLY_BESIDE[3:])


def test_the_built_in_formats_give_their_own_hooks_and_presentation() -> None:
    for fmt in (OPENAI_CHAT, OPENAI_RESPONSES, ANTHROPIC, GEMINI, BEDROCK_CONVERSE):
        assert hooks_of(fmt) is cast("object", fmt)
        assert presentation_of(fmt) is cast("object", fmt)
    assert presentation_of(ANTHROPIC).system_field == "system"
    assert presentation_of(OPENAI_CHAT).system_field is None


def test_a_format_without_them_gets_the_defaults_and_runs_in_a_window() -> None:
    fmt = Plain()
    hooks, shown = hooks_of(fmt), presentation_of(fmt)
    message = {"role": "assistant", "content": "hi"}
    assert hooks.settled(message)
    assert hooks.fingerprint_data(message) is message
    request = [message]
    assert hooks.mark_cache(request, 1, None) is request
    assert shown.system_field is None
    assert shown.pieces(message, estimator=OPENAI_CHAT.pricer(None).estimator, tokens=3) == ([], 0)
    window = ContextWindow(fmt, max_tokens=2000, cache_breakpoints=True)
    history = [{"role": "user", "content": "look"}, message]
    assert window.prepare(history) == history
    restored = ContextWindow.from_state(window.state(), format=fmt)
    assert (
        restored.prepare([*history, {"role": "user", "content": "more"}])[-1]["content"] == "more"
    )
