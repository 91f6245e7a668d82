"""Message data with raw bytes as base64 text: what a window's fingerprint reads of it.

The SDK-style dicts of Gemini and Converse may hold ``bytes`` (an image's, a signature's); the
fingerprint reads only plain JSON-like data, so each bytes value is read as its base64 text.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping

__all__ = ["plain"]


def plain(value: object) -> object:
    """Return ``value`` with every ``bytes`` in it as base64 text (containers copied)."""
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, Mapping):
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [plain(item) for item in value]
    return value
