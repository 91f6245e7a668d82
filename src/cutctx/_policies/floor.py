"""``FloorChain``: the window's default chain from ``default_messages_policy(version=3)`` on.

It decides exactly as ``PolicyChain`` over the same members; its version says how a window
planning with it cuts a *small* window — one whose untouchable turns (the system prompt, the
pinned ones, the protected tail) alone pass ``compact_to``, so that no cut reaches it. Version 2
aimed such a cut just under ``compact_at``: on real agent sessions, whose system prompt and last
exchanges fill most of a small window, that left room for no step, and the window cut (and lost
its cached prefix) on almost every step. A window planning with this chain sends every message
while the request fits under ``max_tokens``, and once it does not, aims the cut at the fixed
turns and ``compact_to``'s share of the room beside them, so the next steps append
(docs/agent-loop.md, "The compaction rule").
"""

from __future__ import annotations

from typing import ClassVar

from cutctx._policies.chain import PolicyChain

__all__ = ["FloorChain"]


class FloorChain(PolicyChain):
    """A ``PolicyChain`` whose version tells a window to cut a small window deeper.

    Its plans are ``PolicyChain``'s over the same members; only its version differs
    (``1.1.0``), so a window's state names which rule its cuts followed.

    .. versionadded:: 0.1.1
    """

    __slots__ = ()

    _VERSION: ClassVar[str] = "1.1.0"

    def __repr__(self) -> str:
        return f"FloorChain({list(self.policies)!r})"
