"""A list of counts as one JSON string: how a state carries a price per held turn.

A long session's state holds a price for every turn the window has read; as a JSON list of
numbers, writing, sealing and reading those numbers was half of a restore's JSON work. Packed, the
list is one string: a width code (``H``, ``I`` or ``Q``: unsigned 16, 32 or 64 bits, the
narrowest every count fits) and then the counts as little-endian integers of that width, in
base64. The same counts always pack to the same string. A count of 2**64 or more (no tokenizer
reaches it; a custom estimator might) leaves the list as it is, which a reader takes as well.
"""

from __future__ import annotations

import base64
import struct
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["pack", "unpack"]

_WIDTHS: Final = (("H", 1 << 16), ("I", 1 << 32), ("Q", 1 << 64))
_SIZES: Final = {code: struct.calcsize("<" + code) for code, _ in _WIDTHS}


def pack(counts: Sequence[int]) -> str | list[int]:
    """Return ``counts`` (non-negative) packed, or as a list if one is too large to pack."""
    top = max(counts, default=0)
    for code, bound in _WIDTHS:
        if top < bound:
            raw = struct.pack(f"<{len(counts)}{code}", *counts)
            return code + base64.b64encode(raw).decode("ascii")
    return list(counts)


def unpack(text: str) -> list[int]:
    """Return the counts ``text`` (as ``pack`` made it) holds.

    Raises:
        ValueError: for a text ``pack`` does not make (its width code, its base64, its length).
    """
    code, body = text[:1], text[1:]
    size = _SIZES.get(code)
    if size is None:
        raise ValueError(f"{text[:12]!r} is not a list of packed counts")
    try:
        raw = base64.b64decode(body, validate=True)
    except ValueError:  # binascii.Error
        raise ValueError(f"{text[:12]!r} is not a list of packed counts") from None
    if len(raw) % size:
        raise ValueError(f"{len(raw)} bytes are not a whole number of {size}-byte counts")
    return list(struct.unpack(f"<{len(raw) // size}{code}", raw))
