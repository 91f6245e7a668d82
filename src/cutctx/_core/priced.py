"""One price for a large text however many times a step asks for it.

A window's step prices a new tool result when it reads the message, and again when it
excerpts it; a 200 kB result priced twice doubles what the step costs. Inside ``pricing_once()``
the built-in estimators remember the prices of the large texts they priced (by the text's
identity: the same ``str`` object, not an equal one), and hand the price back when asked again.
Nothing is remembered outside the block, so no text outlives the step that priced it, and each
thread or task has its own block (a context variable).
"""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

__all__ = ["LARGE_TEXT", "priced_once", "pricing_once"]

LARGE_TEXT: Final = 16_384
"""Characters from which a text's price is remembered: smaller ones cost less to price again."""

type _Memo = dict[tuple[int, int], tuple[object, str, int]]

_MEMO: ContextVar[_Memo | None] = ContextVar("cutctx_priced", default=None)


@contextmanager
def pricing_once() -> Iterator[None]:
    """Within the block, a large text one estimator priced is not priced again."""
    token = _MEMO.set({})
    try:
        yield
    finally:
        _MEMO.reset(token)


def priced_once(owner: object, text: str, price: Callable[[str], int]) -> int:
    """Return ``price(text)``; inside ``pricing_once()``, once per large ``text`` and ``owner``.

    ``owner`` is the estimator whose price this is. The memo holds ``owner`` and ``text``
    themselves, so their identities cannot be reused by other objects while it lives.
    """
    if len(text) < LARGE_TEXT:
        return price(text)
    memo = _MEMO.get()
    if memo is None:
        return price(text)
    key = (id(owner), id(text))
    found = memo.get(key)
    if found is not None:
        return found[2]
    count = price(text)
    memo[key] = (owner, text, count)
    return count
