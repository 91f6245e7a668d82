"""``FloorChain``: the window's default chain from ``default_messages_policy(version=3)`` on.

It decides exactly as ``PolicyChain`` over the same members; its version says what a window
does with it. A small window — one whose untouchable turns (the system prompt, the pinned ones,
the protected tail) alone pass ``compact_to`` — cannot reach ``compact_to`` by any cut, and
the chain's masking there buys back little: a stub still costs its call, and every new stub
changes the request where it sits, so the cached prefix ends there. A window planning with this
chain cuts a small window with the chain's drop-oldest member alone: the oldest whole exchanges
go, down to the fixed turns and ``compact_to``'s share of the room beside them, and the next
steps append (docs/agent-loop.md, "The compaction rule").
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from cutctx._policies.chain import PolicyChain
from cutctx._policies.drop import DropOldestPolicy

if TYPE_CHECKING:
    from cutctx._core.protocols import CompactionPolicy

__all__ = ["FloorChain"]


class FloorChain(PolicyChain):
    """A ``PolicyChain`` whose small-window cuts are its drop-oldest member's alone.

    Its plans are ``PolicyChain``'s over the same members; only its version differs
    (``1.1.0``), so a window's state names which cut it made.

    .. versionadded:: 0.1.1
    """

    __slots__ = ()

    _VERSION: ClassVar[str] = "1.1.0"

    def __repr__(self) -> str:
        return f"FloorChain({list(self.policies)!r})"

    @property
    def floor(self) -> CompactionPolicy | None:
        """The member a small window cuts with: the last ``DropOldestPolicy``, or ``None``."""
        for member in reversed(self.policies):
            if type(member) is DropOldestPolicy:
                return member
        return None
