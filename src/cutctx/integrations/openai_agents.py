"""OpenAI Agents SDK: ``ContextWindowFilter``, a ``ContextWindow`` as the model input filter.

>>> from agents import RunConfig, Runner                            # doctest: +SKIP
>>> window = ContextWindowFilter(32_000, keep_first=1)              # doctest: +SKIP
>>> Runner.run_sync(agent, task,                                    # doctest: +SKIP
...                 run_config=RunConfig(call_model_input_filter=window))

Before every model call the SDK hands the filter the input items (Responses API items, rebuilt
by the SDK on every turn) and the instructions; the filter returns a ``ModelInputData`` with the
items compacted by the conversation's window and the instructions unchanged (priced as the
window's ``system``; instructions that change from call to call keep the window). One filter
serves many runs and conversations: each conversation's window is found by its history (the
items it continues). With ``recall=True``, ``window.recall_tool`` is the ``cutctx_recall``
function tool to add to the agent's tools. Passed as the run's hooks too (``hooks=window``), it
reports each response's ``usage.input_tokens`` to the window, which calibrates to it: the SDK
hands a model input filter no usage, so without ``hooks=window`` the window cannot calibrate,
and the filter says so with a ``UserWarning`` (once) at a run's second model call.
Importing this module imports the Agents SDK (``pip install "cutctx[openai-agents]"``).

.. versionadded:: 0.1.1
"""

from __future__ import annotations

import warnings
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Final, Unpack

from baseaicore import ValidationError

try:
    from agents import FunctionTool, RunHooks
    from agents.run_config import ModelInputData
except ImportError as missing:  # the extra is not installed: say which one
    raise ImportError(
        "cutctx.integrations.openai_agents needs the OpenAI Agents SDK: in a cutctx checkout, "
        'pip install ".[openai-agents]" (cutctx 0.1.1 is not on PyPI yet; see its README)'
    ) from missing

from cutctx.formats import OPENAI_RESPONSES
from cutctx.integrations._options import (
    KEEP,
    Conversations,
    HeldWindow,
    Options,
    WindowOptions,
    report,
)

if TYPE_CHECKING:
    from agents import Agent, ModelResponse, RunContextWrapper
    from agents.run_config import CallModelData
    from agents.tool_context import ToolContext

    from cutctx._loop.window import ContextWindow


__all__ = ["ContextWindowFilter"]


class _Sent:
    """The filter and window of a run's latest model call, and whether its usage was heard."""

    __slots__ = ("filter", "heard", "window")

    def __init__(self, owner: ContextWindowFilter, window: ContextWindow) -> None:
        self.filter, self.window, self.heard = owner, window, False


_SENT: Final[ContextVar[_Sent | None]] = ContextVar("cutctx_sent", default=None)
"""The run's latest model call: the filter runs in the run's own task, and the SDK calls
``on_llm_end`` from it (in tasks that copy its context, hence a mutable record), so a run's
report reaches its own window even when runs of other conversations are in flight, and the
next call of the run knows whether the previous one was heard."""

_UNHEARD: Final = (
    "ContextWindowFilter cannot calibrate: the Agents SDK hands a model input filter no usage, "
    "and this filter is not the run's hooks; pass it as both, Runner.run(agent, input, "
    "run_config=RunConfig(call_model_input_filter=window), hooks=window), so that the "
    "provider's input token count reaches the window"
)
"""The warning a filter gives once when a run's model call was not reported to it."""


class ContextWindowFilter(HeldWindow, RunHooks[Any]):
    """Compact the input items of every model call of the Agents SDK conversations it serves.

    ``max_tokens`` and ``window_options`` are ``ContextWindow``'s (``compact_at``,
    ``compact_to``, ``keep_first``, ``estimator``, ``summarize``, ``priority``, ...), with the same
    meaning and defaults; ``system`` is the agent's instructions, taken from each call.
    ``conversations`` is how many conversations' windows it holds (the most recent). Call it as
    the SDK does: ``await window(data)``. It is also the run hooks that report the provider's
    input tokens to the window: ``Runner.run(agent, items, run_config=RunConfig(
    call_model_input_filter=window), hooks=window)``; without ``hooks=window`` it cannot
    calibrate, and warns (``UserWarning``, once) at a run's second model call.

    Raises:
        ValidationError: for an option ``ContextWindow`` refuses (or ``system``/``format``).

    .. versionadded:: 0.1.1
    .. versionchanged:: 0.1.1
       Warns when it is not the run's hooks too (its window cannot calibrate then).
    """

    def __init__(
        self,
        max_tokens: int,
        *,
        conversations: int = KEEP,
        **window_options: Unpack[WindowOptions],
    ) -> None:
        self._options = Options("ContextWindowFilter", OPENAI_RESPONSES, max_tokens, window_options)
        self._held = Conversations(self._options, conversations)
        self._tool: FunctionTool | None = None
        self._warned = False

    async def __call__(self, data: CallModelData[Any]) -> ModelInputData:
        """Return ``data.model_data`` with its input items compacted, instructions unchanged.

        Warns (``UserWarning``, once per filter) when the run's previous model call was not
        reported to it: the filter is not the run's hooks, and the window cannot calibrate.
        """
        previous = _SENT.get()
        unheard = previous is not None and previous.filter is self and not previous.heard
        if unheard and not self._warned:
            self._warned = True
            warnings.warn(_UNHEARD, UserWarning, stacklevel=2)
        given = data.model_data
        items = await self._held.aprepare(given.input, given.instructions)
        _SENT.set(_Sent(self, self._held.latest))
        return ModelInputData(input=items, instructions=given.instructions)

    async def on_llm_end(
        self, context: RunContextWrapper[Any], agent: Agent[Any], response: ModelResponse
    ) -> None:
        """Report ``response.usage.input_tokens`` to the window of the run's call (run hooks).

        The SDK's ``Usage.input_tokens`` is the provider's input count, cached tokens included
        (OpenAI's convention; a model class of your own reports it the same way).
        """
        del context, agent
        sent = _SENT.get()
        if sent is not None and sent.filter is self:
            sent.heard = True
            report(sent.window, response.usage.input_tokens)

    @property
    def recall_tool(self) -> FunctionTool:
        """The ``cutctx_recall`` function tool: ``Agent(tools=[..., window.recall_tool])``.

        It answers from the window of the conversation that holds the original.

        Raises:
            ValidationError: when the filter was made without ``recall=True``.
        """
        if self._tool is None:
            definition = self._held.latest.recall_tool
            if definition is None:
                raise ValidationError(
                    "ContextWindowFilter.recall_tool: recall is off (ContextWindowFilter(..., "
                    "recall=True))",
                    details={"field": "recall"},
                )

            async def invoke(context: ToolContext[Any], arguments: str) -> str:
                del context  # the original is found by its digest
                return self.recall(arguments)

            self._tool = FunctionTool(
                name=definition["name"],
                description=definition["description"],
                params_json_schema=definition["parameters"],
                on_invoke_tool=invoke,
                strict_json_schema=False,
            )
        return self._tool
