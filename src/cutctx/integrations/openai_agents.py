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

.. versionadded:: 0.2.0
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Unpack

try:
    from agents.run_config import ModelInputData
except ImportError as missing:  # the extra is not installed: say which one
    raise ImportError(
        "cutctx.integrations.openai_agents needs the OpenAI Agents SDK: "
        'pip install "cutctx[openai-agents]"'
    ) from missing

from cutctx.formats import OPENAI_RESPONSES
from cutctx.integrations._options import Options, WindowOptions

if TYPE_CHECKING:
    from collections.abc import Mapping

    from agents.run_config import CallModelData

    from cutctx._loop.compact import CompactedMessages
    from cutctx._loop.window import ContextWindow, WindowStats

__all__ = ["ContextWindowFilter"]


class ContextWindowFilter:
    """Compact the input items of every model call of one Agents SDK conversation.

    ``max_tokens`` and ``window_options`` are ``ContextWindow``'s (``compact_at``,
    ``compact_to``, ``keep_first``, ``estimator``, ``summarize``, ``priority``, ...), with the same
    meaning and defaults; ``system`` is the agent's instructions, taken from each call (a change
    starts the window over). Call it as the SDK does: ``await window(data)``.

    Raises:
        ValidationError: for an option ``ContextWindow`` refuses (or ``system``/``format``).

    .. versionadded:: 0.2.0
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

    @property
    def window(self) -> ContextWindow:
        """The conversation's window (its ``stats``, ``last`` compaction and ``system``)."""
        return self._window

    @property
    def stats(self) -> WindowStats:
        """The window's ``stats``: requests, compactions, resets, the stable prefix."""
        return self._window.stats

    @property
    def last(self) -> CompactedMessages[Any] | None:
        """The window's latest compaction (its request, report and plan), if any."""
        return self._window.last

    def state(self) -> dict[str, Any]:
        """Return the window's ``state()``: JSON data, for ``from_state`` in another process."""
        return self._window.state()

    @classmethod
    def from_state(
        cls, state: Mapping[str, Any], max_tokens: int, **window_options: Unpack[WindowOptions]
    ) -> ContextWindowFilter:
        """Return the filter that continues ``state``, given the same options again.

        The callables (``estimator``, ``summarize``, ``policy``, ``priority``, ``pin``) must be
        the ones the state was made with; the rest of the window's settings travel in the state.

        Raises:
            ValidationError: for a state that is not a window's, or callables it was not made with.
        """
        made = cls(max_tokens, **window_options)
        made._window = made._options.restore(state)
        return made
