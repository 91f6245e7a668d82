"""A plan's actions held as columns: what a plan keeps instead of one object per turn.

A plan is read far more often whole (by the gate, the executor, its JSON form) than turn by turn,
and an agent loop that compacts on every turn should not pay for — nor make the garbage
collector traverse — one ``TurnAction`` per turn it keeps. ``ActionTable`` holds the same
information in columns: the ids, one action code per turn, and the stubs and summary groups
where there are any. ``CompactionPlan.actions`` builds the ``TurnAction`` tuple from it on first
read; the table is the plan's substance, and the gate checks it.

Selectors (``kinds.translate(...)``) turn the codes into one flag byte per turn, which
``itertools.compress`` and ``sum`` consume without a Python loop.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import compress, repeat
from typing import TYPE_CHECKING, Final

from cutctx._core.values import Action, TurnAction, trusted_action, trusted_replacement

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

__all__ = [
    "ACTIONS",
    "CODES",
    "DROP",
    "DROPPED",
    "EXCERPT",
    "EXCERPTED",
    "FOLD",
    "KEEP",
    "KEPT",
    "MASK",
    "MASKED",
    "REPLACED",
    "STAYS",
    "SUMMARIZE",
    "SUMMARIZED",
    "TOUCHED",
    "ActionTable",
    "indices",
    "selector",
]

KEEP: Final = 0
MASK: Final = 1
SUMMARIZE: Final = 2
DROP: Final = 3
EXCERPT: Final = 4
ACTIONS: Final = (Action.KEEP, Action.MASK, Action.SUMMARIZE, Action.DROP, Action.EXCERPT)
"""The action of each code."""
CODES: Final = {action: code for code, action in enumerate(ACTIONS)}
"""The code of each action."""


def selector(*codes: int) -> bytes:
    """Return a ``bytes.translate`` table mapping ``codes`` to 1 and every other byte to 0."""
    return bytes(1 if byte in codes else 0 for byte in range(256))


KEPT: Final = selector(KEEP)
MASKED: Final = selector(MASK)
SUMMARIZED: Final = selector(SUMMARIZE)
DROPPED: Final = selector(DROP)
EXCERPTED: Final = selector(EXCERPT)
REPLACED: Final = selector(MASK, EXCERPT)
"""The turns whose body a replacement takes the place of (masked or excerpted)."""
STAYS: Final = selector(KEEP, MASK, EXCERPT)
"""The turns that stay in the view (kept, masked or excerpted)."""
TOUCHED: Final = selector(MASK, SUMMARIZE, DROP)
"""The turns a plan masks or removes: what no untouchable turn may undergo (an excerpt may)."""
FOLD: Final = bytes(
    SUMMARIZE if byte == SUMMARIZE else DROP if byte == DROP else KEEP for byte in range(256)
)
"""Codes with ``MASK`` and ``EXCERPT`` folded into ``KEEP``: an exchange agrees when its folded
codes do."""


def indices(flags: bytes | bytearray) -> Iterator[int]:
    """Return the indices whose flag byte is set, in order."""
    return compress(range(len(flags)), flags)


@dataclass(frozen=True, slots=True)
class ActionTable:
    """One plan's actions, as columns indexed by turn position.

    ``kinds`` holds one code (``KEEP``, ``MASK``, ``SUMMARIZE``, ``DROP``, ``EXCERPT``) per turn.
    ``stub_texts`` and ``stub_tokens`` are empty when nothing is masked or excerpted, else hold
    each masked turn's stub and each excerpted turn's excerpt, with its price (``None`` and 0
    elsewhere); ``groups`` is empty when nothing is
    summarized, else holds each summarized turn's group id (``None`` elsewhere).
    ``plain_stubs`` says that no stub holds a character JSON escapes (true of the stubs the
    masking policy writes when its label holds none), so the JSON form of a stub is the text in
    quotes. Made only by cutctx's own code, which keeps the columns aligned; the gate checks
    what they say.
    """

    turn_ids: tuple[str, ...]
    kinds: bytes
    stub_texts: tuple[str | None, ...] = ()
    stub_tokens: tuple[int, ...] = ()
    groups: tuple[str | None, ...] = ()
    plain_stubs: bool = False

    @classmethod
    def of(cls, actions: Sequence[TurnAction]) -> ActionTable:
        """Return the table of ``actions`` (each a valid ``TurnAction``)."""
        kinds = bytes([CODES[action.action] for action in actions])
        texts: tuple[str | None, ...] = ()
        tokens: tuple[int, ...] = ()
        groups: tuple[str | None, ...] = ()
        if MASK in kinds or EXCERPT in kinds:
            replacements = [action.replacement for action in actions]
            texts = tuple(None if r is None else r.content for r in replacements)
            tokens = tuple(0 if r is None else r.token_estimate for r in replacements)
        if SUMMARIZE in kinds:
            groups = tuple(action.summary_group for action in actions)
        return cls(tuple(action.turn_id for action in actions), kinds, texts, tokens, groups)

    def rows(
        self, start: int = 0, stop: int | None = None
    ) -> Iterator[tuple[str, int, str | None, int, str | None]]:
        """Return (turn id, code, stub text, stub tokens, group) per turn, ``start`` to ``stop``.

        All turns by default; absent columns read as None / 0.
        """
        span = slice(start, stop)
        return zip(
            self.turn_ids[span],
            self.kinds[span],
            self.stub_texts[span] or repeat(None),
            self.stub_tokens[span] or repeat(0),
            self.groups[span] or repeat(None),
            strict=False,
        )

    def actions(self) -> tuple[TurnAction, ...]:
        """Return the actions as ``TurnAction`` values, one per turn, in order."""
        return tuple(
            trusted_action(
                turn_id,
                ACTIONS[code],
                group,
                None if text is None else trusted_replacement(text, estimate),
            )
            for turn_id, code, text, estimate, group in self.rows()
        )
