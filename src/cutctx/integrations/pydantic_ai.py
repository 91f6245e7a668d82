"""Pydantic AI 2.x: ``ContextWindowProcessor``, a ``ContextWindow`` as an agent capability.

>>> from pydantic_ai import Agent                                    # doctest: +SKIP
>>> window = ContextWindowProcessor(32_000, keep_first=1)            # doctest: +SKIP
>>> agent = Agent(model, capabilities=[window])                      # doctest: +SKIP

Its ``before_model_request`` replaces only the request's messages with the window's request:
the run's message history (``RunContext.messages``, ``result.all_messages()``) keeps every
original message, unlike ``ProcessHistory``, which rewrites it. The request's instructions are
priced as the window's ``system`` and sent unchanged. The processor is also callable
``list[ModelMessage] -> list[ModelMessage]``, for code that still passes history processors.
Keep one per conversation; ``state()`` / ``from_state`` carry it to another process. Importing
this module imports Pydantic AI (``pip install "cutctx[pydantic-ai]"``).

.. versionadded:: 0.1.1
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Unpack

try:
    from pydantic_ai.capabilities import AbstractCapability
except ImportError as missing:  # the extra is not installed: say which one
    raise ImportError(
        "cutctx.integrations.pydantic_ai needs Pydantic AI 2.x: in a cutctx checkout, "
        'pip install ".[pydantic-ai]" (cutctx 0.1.1 is not on PyPI yet; see its README)'
    ) from missing

from cutctx.formats.pydantic_ai import PYDANTIC_AI
from cutctx.integrations._options import HeldWindow, Options, WindowOptions

if TYPE_CHECKING:
    from pydantic_ai.messages import ModelMessage
    from pydantic_ai.models import ModelRequestContext
    from pydantic_ai.tools import RunContext


__all__ = ["ContextWindowProcessor"]


class ContextWindowProcessor(HeldWindow, AbstractCapability[Any]):
    """Compact the messages of every model request of one Pydantic AI conversation.

    ``max_tokens`` and ``window_options`` are ``ContextWindow``'s (``compact_at``,
    ``compact_to``, ``keep_first``, ``estimator``, ``summarize``, ``priority``, ...), with the same
    meaning and defaults; ``system`` is the request's instructions, taken from each request (a
    change starts the window over). ``keep_first=1`` keeps the first request: the system prompt
    and the user's task.

    Raises:
        ValidationError: for an option ``ContextWindow`` refuses (or ``system``/``format``).

    .. versionadded:: 0.1.1
    """

    def __init__(self, max_tokens: int, **window_options: Unpack[WindowOptions]) -> None:
        self._options = Options("ContextWindowProcessor", PYDANTIC_AI, max_tokens, window_options)
        self._window = self._options.new(None)

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        """Replace the request's messages (only them) with the window's request."""
        del ctx  # the run's own history stays as it is
        parameters = request_context.model_request_parameters
        instructions = [part.content for part in parameters.instruction_parts or ()]
        system = [{"type": "text", "text": text} for text in instructions] or None
        if self._window.system != system:
            self._window = self._options.new(system)
        request_context.messages = await self._window.aprepare(request_context.messages)
        return request_context

    def __call__(self, messages: list[ModelMessage]) -> list[ModelMessage]:
        """Return the window's request for ``messages`` (a history processor's signature)."""
        return self._window.prepare(messages)
