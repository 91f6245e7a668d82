"""Pydantic AI 2.x: ``ContextWindowProcessor``, a ``ContextWindow`` as an agent capability.

>>> from pydantic_ai import Agent                                    # doctest: +SKIP
>>> window = ContextWindowProcessor(32_000, keep_first=1)            # doctest: +SKIP
>>> agent = Agent(model, capabilities=[window])                      # doctest: +SKIP

Its ``before_model_request`` replaces only the request's messages with the window's request:
the run's message history (``RunContext.messages``, ``result.all_messages()``) keeps every
original message, unlike ``ProcessHistory``, which rewrites it. The request's instructions are
priced as the window's ``system`` and sent unchanged (instructions that change from request to
request keep the window). One processor serves many conversations: each run's window is the
one of its ``conversation_id`` (or of the history it continues). With ``recall=True`` it adds
the ``cutctx_recall`` tool to the agent and answers it. Its ``after_model_request`` reports the
response's ``usage.input_tokens`` (Pydantic AI's total of the input, cache reads and writes
included for every provider) to the window, which calibrates to it (not the usage ``TestModel``
and ``FunctionModel`` make up when none is given). The processor is also callable
``list[ModelMessage] -> list[ModelMessage]``, for code that still passes history processors.
Importing this module imports Pydantic AI (``pip install "cutctx[pydantic-ai]"``).

.. versionadded:: 0.1.1
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Unpack

try:
    from pydantic_ai.capabilities import AbstractCapability
    from pydantic_ai.models.function import FunctionModel
    from pydantic_ai.models.function import _estimate_usage as guess  # private: see _guessed
    from pydantic_ai.models.test import TestModel
    from pydantic_ai.tools import Tool
    from pydantic_ai.toolsets import FunctionToolset
except ImportError as missing:  # the extra is not installed: say which one
    raise ImportError(
        "cutctx.integrations.pydantic_ai needs Pydantic AI 2.x: in a cutctx checkout, "
        'pip install ".[pydantic-ai]" (cutctx 0.1.1 is not on PyPI yet; see its README)'
    ) from missing

from cutctx.formats.pydantic_ai import PYDANTIC_AI
from cutctx.integrations._options import (
    KEEP,
    UNCHANGED,
    Conversations,
    HeldWindow,
    Options,
    WindowOptions,
    report,
)

if TYPE_CHECKING:
    from pydantic_ai.messages import ModelMessage, ModelResponse
    from pydantic_ai.models import ModelRequestContext
    from pydantic_ai.tools import RunContext


__all__ = ["ContextWindowProcessor"]


class ContextWindowProcessor(HeldWindow, AbstractCapability[Any]):
    """Compact the messages of every model request of the Pydantic AI conversations it serves.

    ``max_tokens`` and ``window_options`` are ``ContextWindow``'s (``compact_at``,
    ``compact_to``, ``keep_first``, ``estimator``, ``summarize``, ``priority``, ...), with the same
    meaning and defaults; ``system`` is the request's instructions, taken from each request.
    ``keep_first=1`` keeps the first request: the system prompt and the user's task.
    ``conversations`` is how many conversations' windows it holds (the most recent).

    Raises:
        ValidationError: for an option ``ContextWindow`` refuses (or ``system``/``format``).

    .. versionadded:: 0.1.1
    """

    def __init__(
        self,
        max_tokens: int,
        *,
        conversations: int = KEEP,
        **window_options: Unpack[WindowOptions],
    ) -> None:
        self._options = Options("ContextWindowProcessor", PYDANTIC_AI, max_tokens, window_options)
        self._held = Conversations(self._options, conversations)

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        """Replace the request's messages (only them) with the window's request."""
        parameters = request_context.model_request_parameters
        instructions = [part.content for part in parameters.instruction_parts or ()]
        system = [{"type": "text", "text": text} for text in instructions] or None
        request_context.messages = await self._held.aprepare(
            request_context.messages, system, ctx.conversation_id
        )
        return request_context

    async def after_model_request(
        self, ctx: RunContext[Any], *, request_context: ModelRequestContext, response: ModelResponse
    ) -> ModelResponse:
        """Report the provider's input tokens (``response.usage.input_tokens``) to the window."""
        window = self._held.keyed(ctx.conversation_id)
        if window is not None and not _guessed(request_context, response):
            report(window, response.usage.input_tokens)
        return response

    def get_toolset(self) -> FunctionToolset[Any] | None:
        """The ``cutctx_recall`` tool when ``recall=True`` (the agent registers it)."""
        definition = self._held.latest.recall_tool
        if definition is None:
            return None
        function = definition["function"]

        def answer(**arguments: object) -> str:
            return self.recall(arguments)

        tool: Tool[Any] = Tool.from_schema(
            answer, function["name"], function["description"], function["parameters"]
        )
        return FunctionToolset([tool])

    def __call__(self, messages: list[ModelMessage]) -> list[ModelMessage]:
        """Return the window's request for ``messages`` (a history processor's signature)."""
        return self._held.prepare(messages, UNCHANGED)


def _guessed(request_context: ModelRequestContext, response: ModelResponse) -> bool:
    """Whether ``response.usage`` is Pydantic AI's own guess, not a provider's count.

    ``TestModel``, and ``FunctionModel`` when the function reports no usage, make one up from the
    messages' words ("solely to give plausible numbers for testing"); calibrating to it would
    steer the window by a number nobody counted. A usage the function gives is reported.
    """
    model = request_context.model
    if not isinstance(model, FunctionModel | TestModel):
        return False
    made = guess(
        [*request_context.messages, response],
        allow_tool_availability_deltas=model.tool_addition_mode is not None,
    )
    return made.input_tokens == response.usage.input_tokens
