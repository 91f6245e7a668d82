"""A fast, process-independent fingerprint of messages: SHA-256 over their raw strings.

A window's state carries the fingerprint of the messages it has seen, so a window restored in
another process can tell in one linear pass whether the history it is handed starts with them.
It is not canonical JSON (a digest of every message's canonical JSON costs several times more):
the walk feeds each value's type and raw text, in the order the message holds them, into one
running hash. Equal data in equal order gives the same fingerprint in any process; a lone
surrogate is fed as its code point (``surrogatepass``), so no string is refused.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from baseaicore import ValidationError

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

__all__ = ["Fingerprint"]


class Fingerprint:
    """The running fingerprint of a history's first ``count`` messages."""

    __slots__ = ("_data", "_hash", "count")

    def __init__(self, data: Callable[[Any], object]) -> None:
        self._hash = hashlib.sha256()
        self._data = data  # a message as the data it holds (the format's ``fingerprint_data``)
        self.count = 0

    def feed(self, messages: Sequence[object], start: int) -> None:
        """Add ``messages[start:]`` (the ones after the first ``count``)."""
        pieces: list[str] = []
        data = self._data
        for index in range(start, len(messages)):
            pieces.append("\x1e")  # a message boundary
            _walk(data(messages[index]), pieces.append, index)
        self._hash.update("".join(pieces).encode("utf-8", "surrogatepass"))
        self.count = len(messages)

    def hexdigest(self) -> str:
        """Return the fingerprint so far (64 hex digits)."""
        return self._hash.copy().hexdigest()

    @classmethod
    def of(cls, messages: Sequence[object], data: Callable[[Any], object]) -> Fingerprint:
        """Return the fingerprint of every message of ``messages``, each read by ``data``."""
        made = cls(data)
        made.feed(messages, 0)
        return made


def _walk(value: object, out: Callable[[str], None], index: int) -> None:  # noqa: PLR0912 - one branch per JSON type, strings inlined
    # Strings, most of what a message holds, are written here rather than by a call each:
    # the walk is the restore's one linear pass, so it is kept tight.
    kind = type(value)
    if kind is str:
        out(f"s{len(value)}:")  # type: ignore[arg-type]
        out(value)  # type: ignore[arg-type]
    elif kind is dict or isinstance(value, Mapping):
        out(f"{{{len(value)}")  # type: ignore[arg-type]
        for key, item in value.items():  # type: ignore[attr-defined]
            if type(key) is str:
                out(f"s{len(key)}:")
                out(key)
            else:
                _walk(key, out, index)
            if type(item) is str:
                out(f"s{len(item)}:")
                out(item)
            else:
                _walk(item, out, index)
    elif kind is list or kind is tuple:
        out(f"[{len(value)}")  # type: ignore[arg-type]
        for item in value:  # type: ignore[attr-defined]
            if type(item) is str:
                out(f"s{len(item)}:")
                out(item)
            else:
                _walk(item, out, index)
    elif kind is int:
        out(f"i{value:x};")  # hexadecimal: no length limit, as decimal text has
    elif value is None or kind is bool or kind is float:
        out(f"{kind.__name__[0]}{value!r};")
    else:
        dump = getattr(value, "model_dump", None)
        if not callable(dump):
            raise ValidationError(
                f"ContextWindow: messages[{index}] holds a {kind.__name__}, which is not "
                "message data",
                details={"index": index, "type": kind.__name__},
            )
        _walk(dump(exclude_none=True), out, index)  # an SDK object: the data it holds
