"""LangChain 1.x: ``ContextWindowMiddleware``, a ``ContextWindow`` as agent middleware.

>>> from langchain.agents import create_agent                      # doctest: +SKIP
>>> agent = create_agent(model, tools,                              # doctest: +SKIP
...                      middleware=[ContextWindowMiddleware(32_000, keep_first=1)])

On every model call (``wrap_model_call`` and ``awrap_model_call``) the middleware hands the
graph's messages to the conversation's window and sends what it returns; the graph state's
``messages`` are never rewritten. ``request.system_message``, which LangChain puts before the
messages after every middleware, is priced as the window's ``system`` and never dropped. The
window's ``state()`` is written to the agent state under ``cutctx_window`` (through
``ExtendedModelResponse``), so a checkpointer persists it with the thread, and a new process with
the same checkpointer and ``thread_id`` continues with the same requests. Importing this module
imports LangChain (``pip install "cutctx[langchain]"``).

.. versionadded:: 0.1.1
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Any, Final, NotRequired, Unpack

try:
    from langchain.agents.middleware import (
        AgentMiddleware,
        AgentState,
        ExtendedModelResponse,
        ModelRequest,
        ModelResponse,
    )
    from langchain.agents.middleware.types import PrivateStateAttr
    from langgraph.types import Command
except ImportError as missing:  # the extra is not installed: say which one
    raise ImportError(
        "cutctx.integrations.langchain needs LangChain 1.x: in a cutctx checkout, "
        'pip install ".[langchain]" (cutctx 0.1.1 is not on PyPI yet; see its README)'
    ) from missing

from cutctx.formats.langchain import LANGCHAIN
from cutctx.integrations._options import Options, WindowOptions

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from langchain_core.messages import SystemMessage

    from cutctx._loop.window import ContextWindow

__all__ = ["STATE_KEY", "ContextWindowMiddleware", "ContextWindowState"]

STATE_KEY: Final = "cutctx_window"
"""The agent-state key that holds the window's ``state()``.

.. versionadded:: 0.1.1
"""

_KEEP: Final = 32
"""Windows kept in memory (per middleware) for the states this process wrote last."""


class ContextWindowState(AgentState[Any]):
    """The agent state with the window's ``state()`` under ``cutctx_window``.

    .. versionadded:: 0.1.1
    """

    cutctx_window: NotRequired[Annotated[dict[str, Any] | None, PrivateStateAttr]]


class ContextWindowMiddleware(AgentMiddleware[ContextWindowState, Any, Any]):
    """Compact what the model receives on every call of a LangChain agent.

    ``max_tokens`` and ``window_options`` are ``ContextWindow``'s (``compact_at``,
    ``compact_to``, ``keep_first``, ``estimator``, ``summarize``, ``priority``, ...), with the same
    meaning and defaults; ``system`` comes from the request. One middleware serves every thread:
    each conversation's window lives in its own agent state, and the window of the state this
    process wrote last is reused without restoring it. A system prompt that changes between
    calls starts that conversation's window over.

    Raises:
        ValidationError: for an option ``ContextWindow`` refuses (or ``system``/``format``).

    .. versionadded:: 0.1.1
    """

    state_schema = ContextWindowState

    def __init__(self, max_tokens: int, **window_options: Unpack[WindowOptions]) -> None:
        super().__init__()
        self._options = Options("ContextWindowMiddleware", LANGCHAIN, max_tokens, window_options)
        self._windows: dict[int, tuple[object, ContextWindow]] = {}

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ExtendedModelResponse[Any]:
        """Send the window's request for ``request.messages``; record the window's state."""
        window = self._window(request)
        response = handler(request.override(messages=window.prepare(request.messages)))
        return self._answer(window, response)

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ExtendedModelResponse[Any]:
        """``wrap_model_call`` for ``ainvoke``/``astream``: an async ``summarize`` is awaited."""
        window = self._window(request)
        messages = await window.aprepare(request.messages)
        response = await handler(request.override(messages=messages))
        return self._answer(window, response)

    def _window(self, request: ModelRequest[Any]) -> ContextWindow:
        """Return the conversation's window: the one this process left, restored, or new."""
        system = _system(request.system_message)
        saved = request.state.get(STATE_KEY)
        window: ContextWindow | None = None
        if saved is not None:
            held = self._windows.pop(id(saved), None)
            if held is not None and held[0] is saved:
                window = held[1]
            else:  # another process wrote it (or this one, before a checkpoint reload)
                window = self._options.restore(
                    json.loads(saved) if isinstance(saved, str) else saved
                )
        if window is None or window.system != system:
            window = self._options.new(system)
        return window

    def _answer(
        self, window: ContextWindow, response: ModelResponse[Any]
    ) -> ExtendedModelResponse[Any]:
        state = window.state()
        self._windows[id(state)] = (state, window)
        while len(self._windows) > _KEEP:
            del self._windows[next(iter(self._windows))]
        return ExtendedModelResponse(response, Command(update={STATE_KEY: state}))


def _system(message: SystemMessage | None) -> str | list[dict[str, Any]] | None:
    """Return the system message's content as ``ContextWindow(system=...)`` takes it."""
    if message is None:
        return None
    content = message.content
    if isinstance(content, str):
        return content
    return [
        {"type": "text", "text": block} if isinstance(block, str) else dict(block)
        for block in content
    ]
