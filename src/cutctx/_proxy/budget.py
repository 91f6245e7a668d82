"""The budget of one request: the most input it may carry, and what the window gets of it.

``--max-tokens N`` is the most input a request may carry as the provider counts it: the system
prompt, the tool definitions and the messages together. Without it, the model's context size
from ``CONTEXT_SIZES`` (by the longest name prefix) less the reply's room (the request's own
``max_tokens`` / ``max_completion_tokens`` / ``max_output_tokens``, or the model's largest reply
when it names none); a model the table does not know gets no budget and passes through.
The window prices the system prompt itself; the tools are priced here with the window's
estimator and taken off its budget (see docs/proxy.md).
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Mapping

    from cutctx import TokenEstimator

__all__ = ["CONTEXT_SIZES", "ContextSize", "ToolPrices", "context_size", "request_budget"]


@dataclass(frozen=True, slots=True)
class ContextSize:
    """A model family's context window and the longest reply it writes, in tokens."""

    prefix: str
    context: int
    reply: int


CONTEXT_SIZES: Final[tuple[ContextSize, ...]] = (
    ContextSize("claude-", 200_000, 64_000),
    ContextSize("gpt-5", 400_000, 128_000),
    ContextSize("gpt-4.1", 1_047_576, 32_768),
    ContextSize("gpt-4o", 128_000, 16_384),
    ContextSize("gpt-4-turbo", 128_000, 4_096),
    ContextSize("o1", 200_000, 100_000),
    ContextSize("o3", 200_000, 100_000),
    ContextSize("o4", 200_000, 100_000),
    ContextSize("codex-", 400_000, 128_000),
)
"""The context sizes the proxy knows, by model name prefix (the longest matching prefix wins)."""

_REPLY_FIELDS: Final = ("max_tokens", "max_completion_tokens", "max_output_tokens")


def context_size(model: object) -> ContextSize | None:
    """Return the table's entry for ``model`` (the longest prefix that matches), or ``None``."""
    if not isinstance(model, str):
        return None
    found = [size for size in CONTEXT_SIZES if model.startswith(size.prefix)]
    return max(found, key=lambda size: len(size.prefix), default=None)


def request_budget(body: Mapping[str, object], max_tokens: int | None) -> int | None:
    """Return the most input ``body`` may carry (system, tools and messages), or ``None``.

    ``max_tokens`` (the proxy's ``--max-tokens``) wins; else the model's context size less the
    reply's room. ``None``: an unknown model, or a reply that leaves no room.
    """
    if max_tokens is not None:
        return max_tokens
    size = context_size(body.get("model"))
    if size is None:
        return None
    reply = size.reply
    for field in _REPLY_FIELDS:
        value = body.get(field)
        if type(value) is int and value >= 0:
            reply = value
            break
    room = size.context - reply
    return room if room > 0 else None


class ToolPrices:
    """The estimator's price of a request's tool definitions, remembered by their digest.

    Agents send the same tools with every request (tens of kilobytes for a coding agent), and
    pricing them is the slowest part of a step; the last ``size`` sets are remembered.
    """

    def __init__(self, estimator: TokenEstimator, size: int = 64) -> None:
        self._estimator = estimator
        self._size = size
        self._prices: OrderedDict[str, int] = OrderedDict()

    def price(self, tools: object) -> int:
        """Return the price of ``tools`` (``0`` for none), as the window's estimator counts."""
        if tools is None or tools == []:
            return 0
        text = json.dumps(tools, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
        key = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
        price = self._prices.get(key)
        if price is None:
            price = self._estimator.estimate_tokens(text)
            self._prices[key] = price
            if len(self._prices) > self._size:
                self._prices.popitem(last=False)
        else:
            self._prices.move_to_end(key)
        return price
