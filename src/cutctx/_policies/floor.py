"""``FloorChain`` and ``RoomChain``: the window's default chains from versions 3 and 4 on.

They decide exactly as ``PolicyChain`` over the same members; their version says how a window
planning with one cuts a *small* window. ``FloorChain`` (``default_messages_policy(version=3)``):
a window whose untouchable turns (the system prompt, the pinned ones, the protected tail) alone
pass ``compact_to``, so that no cut reaches it. Version 2 aimed such a cut just under
``compact_at``: on real agent sessions, whose system prompt and last exchanges fill most of a
small window, that left room for no step, and the window cut (and lost its cached prefix) on
almost every step. A window planning with it sends every message while the request fits under
``max_tokens``, and once it does not, aims the cut at the fixed turns and ``compact_to``'s share
of the room beside them, so the next steps append (docs/agent-loop.md, "The compaction rule").

``RoomChain`` (``default_messages_policy(version=4)``) cuts the same way every window whose
fixed turns alone take at least ``max_tokens - compact_at`` (a fifth of the window by default),
also at the steps whose protected tail is small. Such a window, cut to ``compact_to`` itself,
kept little beside its fixed turns (the system prompt of a real agent is often half the window),
so those steps lost the exchanges the next ones quote.
"""

from __future__ import annotations

from typing import ClassVar

from cutctx._policies.chain import PolicyChain

__all__ = ["FloorChain", "RoomChain"]


class FloorChain(PolicyChain):
    """A ``PolicyChain`` whose version tells a window to cut a small window deeper.

    Its plans are ``PolicyChain``'s over the same members; only its version differs
    (``1.1.0``), so a window's state names which rule its cuts followed.

    .. versionadded:: 0.1.1
    """

    __slots__ = ()

    _VERSION: ClassVar[str] = "1.1.0"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({list(self.policies)!r})"


class RoomChain(FloorChain):
    """A ``FloorChain`` whose version tells a window that a large fixed share makes it small.

    Its plans are ``PolicyChain``'s over the same members; only its version differs
    (``1.2.0``): a window planning with it cuts as a small window whenever its fixed turns take
    at least ``max_tokens - compact_at`` (docs/agent-loop.md, "The compaction rule").

    .. versionadded:: 0.1.1
    """

    __slots__ = ()

    _VERSION: ClassVar[str] = "1.2.0"
