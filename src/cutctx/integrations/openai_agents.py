"""OpenAI Agents SDK: ``ContextWindowFilter``, a ``ContextWindow`` as the model input filter.

>>> from agents import RunConfig, Runner                            # doctest: +SKIP
>>> window = ContextWindowFilter(32_000, keep_first=1)              # doctest: +SKIP
>>> Runner.run_sync(agent, task,                                    # doctest: +SKIP
...                 run_config=RunConfig(call_model_input_filter=window))

Before every model call the SDK hands the filter the input items (Responses API items, rebuilt
by the SDK on every turn) and the instructions; the filter returns a ``ModelInputData`` with the
items compacted by one window and the instructions unchanged (priced as the window's
``system``). Keep one filter per conversation; its ``state()`` is JSON data to store beside an
SDK ``Session``, and ``ContextWindowFilter.from_state`` continues it in another process.
Importing this module imports the Agents SDK (``pip install "cutctx[openai-agents]"``).

.. versionadded:: 0.1.1
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Unpack

try:
    from agents.run_config import ModelInputData
except ImportError as missing:  # the extra is not installed: say which one
    raise ImportError(
        "cutctx.integrations.openai_agents needs the OpenAI Agents SDK: in a cutctx checkout, "
        'pip install ".[openai-agents]" (cutctx 0.1.1 is not on PyPI yet; see its README)'
    ) from missing

from cutctx.formats import OPENAI_RESPONSES
from cutctx.integrations._options import HeldWindow, Options, WindowOptions

if TYPE_CHECKING:
    from agents.run_config import CallModelData


__all__ = ["ContextWindowFilter"]


class ContextWindowFilter(HeldWindow):
    """Compact the input items of every model call of one Agents SDK conversation.

    ``max_tokens`` and ``window_options`` are ``ContextWindow``'s (``compact_at``,
    ``compact_to``, ``keep_first``, ``estimator``, ``summarize``, ``priority``, ...), with the same
    meaning and defaults; ``system`` is the agent's instructions, taken from each call (a change
    starts the window over). Call it as the SDK does: ``await window(data)``.

    Raises:
        ValidationError: for an option ``ContextWindow`` refuses (or ``system``/``format``).

    .. versionadded:: 0.1.1
    """

    __slots__ = ("_options", "_window")

    def __init__(self, max_tokens: int, **window_options: Unpack[WindowOptions]) -> None:
        self._options = Options("ContextWindowFilter", OPENAI_RESPONSES, max_tokens, window_options)
        self._window = self._options.new(None)

    async def __call__(self, data: CallModelData[Any]) -> ModelInputData:
        """Return ``data.model_data`` with its input items compacted, instructions unchanged."""
        given = data.model_data
        if self._window.system != given.instructions:
            self._window = self._options.new(given.instructions)
        items = await self._window.aprepare(given.input)
        return ModelInputData(input=items, instructions=given.instructions)
