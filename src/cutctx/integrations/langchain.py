"""LangChain 1.x: ``ContextWindowMiddleware``, a ``ContextWindow`` as agent middleware.

>>> from langchain.agents import create_agent                      # doctest: +SKIP
>>> agent = create_agent(model, tools,                              # doctest: +SKIP
...                      middleware=[ContextWindowMiddleware(32_000, keep_first=1)])

On every model call (``wrap_model_call`` and ``awrap_model_call``) the middleware hands the
graph's messages to the conversation's window and sends what it returns; the graph state's
``messages`` are never rewritten. ``request.system_message``, which LangChain puts before the
messages after every middleware, is priced as the window's ``system`` and never dropped; so the
middleware must be the last of those that wrap the model call (a ``@dynamic_prompt`` after it
would change the prompt it priced): listed before another, it refuses the call. The window's
``state()`` is written to the agent state under ``cutctx_window`` (through
``ExtendedModelResponse``), so a checkpointer persists it with the thread, and a new process with
the same checkpointer and ``thread_id`` continues with the same requests. With ``recall=True``
the middleware's own ``tools`` hold ``cutctx_recall``, answered from the thread's window. The
reply's ``usage_metadata["input_tokens"]`` (LangChain's total of the input, cached tokens
included) is reported to the window (``report_usage``), which calibrates to it.
Importing this module imports LangChain (``pip install "cutctx[langchain]"``).

.. versionadded:: 0.1.1
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Annotated, Any, Final, NotRequired, Unpack

from baseaicore import ValidationError

try:
    from langchain.agents.middleware import (
        AgentMiddleware,
        AgentState,
        ExtendedModelResponse,
        ModelRequest,
        ModelResponse,
    )
    from langchain.agents.middleware.types import PrivateStateAttr
    from langchain.tools import ToolRuntime  # noqa: TC002 - LangChain reads the annotation
    from langchain_core.messages import AIMessage
    from langchain_core.tools import BaseTool, StructuredTool
    from langgraph.types import Command
except ImportError as missing:  # the extra is not installed: say which one
    raise ImportError(
        "cutctx.integrations.langchain needs LangChain 1.x: in a cutctx checkout, "
        'pip install ".[langchain]" (cutctx 0.1.1 is not on PyPI yet; see its README)'
    ) from missing

from cutctx._loop.recall import knows
from cutctx.formats.langchain import LANGCHAIN
from cutctx.integrations._options import (
    KEEP,
    Options,
    Recent,
    ShowsWindows,
    WindowOptions,
    report,
)

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from langchain_core.messages import SystemMessage

    from cutctx._loop.window import ContextWindow

__all__ = ["STATE_KEY", "ContextWindowMiddleware", "ContextWindowState"]

STATE_KEY: Final = "cutctx_window"
"""The agent-state key that holds the window's ``state()``.

.. versionadded:: 0.1.1
"""

_COMPOSED: Final = ("langchain.agents.factory", "inner_handler")
"""The module and name of the handler LangChain gives a middleware that wraps other middleware
(``_chain_model_call_handlers``); the innermost gets the model call itself."""


class ContextWindowState(AgentState[Any]):
    """The agent state with the window's ``state()`` under ``cutctx_window``.

    .. versionadded:: 0.1.1
    """

    cutctx_window: NotRequired[Annotated[dict[str, Any] | None, PrivateStateAttr]]


class ContextWindowMiddleware(ShowsWindows, AgentMiddleware[ContextWindowState, Any, Any]):
    """Compact what the model receives on every call of a LangChain agent.

    ``max_tokens`` and ``window_options`` are ``ContextWindow``'s (``compact_at``,
    ``compact_to``, ``keep_first``, ``estimator``, ``summarize``, ``priority``, ...), with the same
    meaning and defaults; ``system`` comes from the request (a prompt that changes between calls
    keeps the thread's window). One middleware serves every thread: each conversation's window
    lives in its own agent state, and the windows of the ``conversations`` states this process
    wrote last are reused without restoring them. A thread's state made with other options
    starts its window over with these. List it last of the middleware that wrap the model call.
    ``window``, ``stats``, ``last`` and ``state()`` are the latest model call's thread's window's,
    ``windows`` the windows held, as on every integration.

    Raises:
        ValidationError: for an option ``ContextWindow`` refuses (or ``system``/``format``); on
            a model call, when other middleware wrap the model call inside it.

    .. versionadded:: 0.1.1
    """

    state_schema = ContextWindowState
    _held: Recent

    def __init__(
        self,
        max_tokens: int,
        *,
        conversations: int = KEEP,
        **window_options: Unpack[WindowOptions],
    ) -> None:
        super().__init__()
        self._options = Options("ContextWindowMiddleware", LANGCHAIN, max_tokens, window_options)
        self._held = Recent(self._options, conversations)
        definition = self._held.latest.recall_tool
        self.tools: list[BaseTool] = [] if definition is None else [self._recall_tool(definition)]

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ExtendedModelResponse[Any]:
        """Send the window's request for ``request.messages``; record the window's state."""
        _innermost(handler)
        window = self._window(request, self._held.find(request.state.get(STATE_KEY)))
        messages = window.prepare(request.messages)
        self._held.latest = window
        response = handler(request.override(messages=messages))
        _report(window, response)
        return self._answer(window, response, window.state())

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ExtendedModelResponse[Any]:
        """``wrap_model_call`` for ``ainvoke``/``astream``: an async ``summarize`` is awaited.

        Nothing CPU-bound runs on the event loop: a window is restored, and its state written,
        in a worker thread, and the step is the window's ``aprepare``.
        """
        _innermost(handler)
        held = self._held.find(request.state.get(STATE_KEY))  # on the loop: it reads _held
        window = await asyncio.to_thread(self._window, request, held)
        messages = await window.aprepare(request.messages)
        self._held.latest = window
        response = await handler(request.override(messages=messages))
        _report(window, response)
        return self._answer(window, response, await asyncio.to_thread(window.state))

    def _recall_tool(self, definition: dict[str, Any]) -> BaseTool:
        """The ``cutctx_recall`` tool, answered from the thread's window (its state)."""
        function = definition["function"]

        def cutctx_recall(runtime: ToolRuntime, **arguments: object) -> str:
            return self._recall(arguments, runtime.state)

        return StructuredTool.from_function(
            cutctx_recall,
            name=function["name"],
            description=function["description"],
            args_schema=function["parameters"],
        )

    def _recall(self, arguments: dict[str, object], state: Any) -> str:  # noqa: ANN401 - the graph's
        """Answer from the window that saw the original: this process's, else the thread's."""
        answer = self._held.recall(arguments)
        if knows(answer):
            return answer
        saved = state.get(STATE_KEY) if isinstance(state, dict) else None
        messages = list(state.get("messages", ())) if isinstance(state, dict) else []
        if messages and isinstance(messages[-1], AIMessage):  # the call asking: not seen yet
            messages.pop()
        window = self._options.new(None) if saved is None else self._restored(saved)
        window.prepare(messages)
        return window.recall(arguments)

    def _window(self, request: ModelRequest[Any], held: ContextWindow | None) -> ContextWindow:
        """Return the conversation's window, with the request's system prompt.

        That is ``held`` (the one this process left), else one restored from the thread's
        state, else a new one.
        """
        system = _system(request.system_message)
        saved = request.state.get(STATE_KEY)
        if saved is None:
            return self._options.new(system)
        window = held
        if window is None:  # another process wrote it (or this one, before a checkpoint reload)
            window = self._restored(saved)
            if self._options.differences(window):  # made with other options: start over
                return self._options.new(system)
        return self._options.with_system(window, system)

    def _restored(self, saved: object) -> ContextWindow:
        return self._options.restore(json.loads(saved) if isinstance(saved, str) else saved)

    def _answer(
        self, window: ContextWindow, response: ModelResponse[Any], state: dict[str, Any]
    ) -> ExtendedModelResponse[Any]:
        """Hold ``window`` with ``state`` (its state after the step) and write it to the thread."""
        self._held.put(window, state)
        return ExtendedModelResponse(response, Command(update={STATE_KEY: state}))


def _report(window: ContextWindow, response: ModelResponse[Any]) -> None:
    """Report the reply's ``usage_metadata["input_tokens"]`` (the request sent) to ``window``."""
    for message in response.result:
        if isinstance(message, AIMessage) and message.usage_metadata:
            report(window, message.usage_metadata.get("input_tokens"))
            return


def _innermost(handler: Callable[..., object]) -> None:
    """Refuse to price a request that other middleware, inside this one, may still change.

    Raises:
        ValidationError: when ``handler`` calls further middleware rather than the model.
    """
    if (getattr(handler, "__module__", None), getattr(handler, "__name__", None)) == _COMPOSED:
        raise ValidationError(
            "ContextWindowMiddleware must be the last middleware that wraps the model call: "
            "middleware after it (a @dynamic_prompt, for one) changes the request it priced; "
            "list it last in create_agent(middleware=[...])",
            details={"field": "middleware"},
        )


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
