"""A fast, process-independent fingerprint of messages: SHA-256 over their raw strings.

A window's state carries the fingerprint of the messages it has seen, so a window restored in
another process can check in one linear pass that the history it is handed starts with them.
Each message is written by ``marshal`` in its format version 0 — each value's type tag, each
string's length and raw UTF-8 bytes (a lone surrogate as its code point), in order, with no
back-references or interning marks, so equal data writes equal bytes whatever objects hold it —
and the bytes go into one running hash. A message ``marshal`` cannot write (an SDK object, a
mapping that is not a dict) is first made plain data; anything else is not message data. Why
not canonical JSON, and what a change of Python version would cost: docs/design.md, "The
fingerprint".
"""

from __future__ import annotations

import hashlib
import marshal
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from baseaicore import ValidationError

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

__all__ = ["Fingerprint"]

_VERSION: Final = 0  # see the module docstring: no back-references, no interning marks

type _Data = str | int | float | list[Any] | tuple[Any, ...] | dict[Any, Any] | None


class Fingerprint:
    """The running fingerprint of a history's first ``count`` messages."""

    __slots__ = ("_data", "_hash", "count")

    def __init__(self, data: Callable[[Any], object]) -> None:
        self._hash = hashlib.sha256()
        self._data = data  # a message as the data it holds (the format's ``fingerprint_data``)
        self.count = 0

    def feed(self, messages: Sequence[object], start: int) -> None:
        """Add ``messages[start:]`` (the ones after the first ``count``).

        Each message is written on its own (a marshalled value is self-delimiting), so feeding
        a history in several steps gives the fingerprint of feeding it at once.
        """
        data, dumps, update = self._data, marshal.dumps, self._hash.update
        for index in range(start, len(messages)):
            value: Any = data(messages[index])
            try:
                written = dumps(value, _VERSION)
            except ValueError:  # not plain data: an SDK object, a mapping that is not a dict
                written = dumps(_plain(value, index), _VERSION)
            update(written)
        self.count = len(messages)

    def copy(self) -> Fingerprint:
        """Return a copy that goes on independently."""
        made = Fingerprint(self._data)
        made._hash, made.count = self._hash.copy(), self.count
        return made

    def hexdigest(self) -> str:
        """Return the fingerprint so far (64 hex digits)."""
        return self._hash.copy().hexdigest()

    @classmethod
    def of(cls, messages: Sequence[object], data: Callable[[Any], object]) -> Fingerprint:
        """Return the fingerprint of every message of ``messages``, each read by ``data``."""
        made = cls(data)
        made.feed(messages, 0)
        return made


def _plain(value: object, index: int) -> _Data:
    """Return ``value`` as plain data ``marshal`` writes.

    Strings, numbers, ``None``, dicts, lists and tuples stay as they are (their items made
    plain); a mapping becomes a dict and an SDK object what its ``model_dump`` gives.

    Raises:
        ValidationError: for anything else (``messages[index]`` is not message data).
    """
    kind = type(value)
    if kind is str or kind is int or kind is float or kind is bool or value is None:
        return value  # type: ignore[return-value]
    if kind is list or kind is tuple:
        return kind(_plain(item, index) for item in value)  # type: ignore[attr-defined]
    if isinstance(value, Mapping):
        return {_plain(key, index): _plain(item, index) for key, item in value.items()}
    dump = getattr(value, "model_dump", None)
    if not callable(dump):
        raise ValidationError(
            f"ContextWindow: messages[{index}] holds a {kind.__name__}, which is not message data",
            details={"index": index, "type": kind.__name__},
        )
    return _plain(dump(exclude_none=True), index)  # an SDK object: the data it holds
