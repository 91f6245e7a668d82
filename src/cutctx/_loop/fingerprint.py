"""A fast, process-independent fingerprint of messages: what a restored window checks.

A window's state carries the fingerprint of the messages it has seen, so a window restored in
another process can check in one linear pass that the history it is handed starts with them.
The fingerprint has two halves, ``RAW.CANONICAL``:

- **raw**: SHA-256 over each message as ``marshal`` (format version 0) writes it — each value's
  type tag, each string's length and raw UTF-8 bytes (a lone surrogate as its code point), in
  the order the message holds them, with no back-references or interning marks, so equal data
  in the same order writes equal bytes whatever objects hold it. The walk is C: the fast check.
- **canonical**: a chain of SHA-256 digests, one link a message, over the message with every
  dict's keys sorted and tuples read as lists — what survives a store that reorders keys
  (PostgreSQL ``jsonb``, ``json.dumps(sort_keys=True)``). A chain, so a restored fingerprint
  continues from its saved digest without reading the old messages again.

A history matches a saved fingerprint when its raw half is equal (one C pass) or, failing that,
its canonical half (a Python walk, paid once by a history whose keys came back in another
order). A message ``marshal`` cannot write (an SDK object, a mapping that is not a dict) is first
made plain data; anything else is not message data. The reasoning: docs/design.md, "The
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
_START: Final = hashlib.sha256(b"cutctx canonical fingerprint").digest()  # the chain's seed
_NESTED: Final = (dict, list, tuple)
_HALF: Final = 64  # hex digits of one SHA-256 digest
_LIST_HEADER: Final = len(marshal.dumps([], _VERSION))  # a list's type tag and length
_SLICE: Final = 64  # messages written and hashed at a time

type _Data = str | int | float | bytes | list[Any] | tuple[Any, ...] | dict[Any, Any] | None


class Fingerprint:
    """The running fingerprint of a history's first ``count`` messages (both halves)."""

    __slots__ = ("_canonical", "_data", "_hash", "count")

    def __init__(self, data: Callable[[Any], object]) -> None:
        self._hash = hashlib.sha256()
        self._canonical: bytes | None = _START  # None only inside ``resume``, before it knows
        self._data = data  # a message as the data it holds (the format's ``fingerprint_data``)
        self.count = 0

    def feed(self, messages: Sequence[object], start: int) -> None:
        """Add ``messages[start:]`` (the ones after the first ``count``).

        Each message is written on its own (a marshalled value is self-delimiting, a chain link
        is one message), so feeding a history in several steps gives the fingerprint of feeding
        it at once.
        """
        data = self._data
        values = [data(messages[index]) for index in range(start, len(messages))]
        # A C pass a slice: a list is written as its header and then each item as ``dumps``
        # writes it alone, so the bytes after the header are the messages' own, one after
        # another. Slices of ``_SLICE`` messages are hashed while their bytes are still in the
        # CPU's cache (one ``dumps`` of a long history writes megabytes before they are read).
        hashed = self._hash.copy()  # kept only if every message is written
        try:
            for first in range(0, len(values), _SLICE):
                written = marshal.dumps(values[first : first + _SLICE], _VERSION)
                hashed.update(memoryview(written)[_LIST_HEADER:])
        except ValueError:  # a message to make plain first: one at a time, below
            self._feed_each(messages, start)
            return
        self._hash = hashed
        link = self._canonical
        if link is not None:
            for index, value in enumerate(values, start):
                link = _link(link, value, index)
        self._canonical = link
        self.count = len(messages)

    def _feed_each(self, messages: Sequence[object], start: int) -> None:
        """``feed``, a message at a time (for a history holding one ``marshal`` cannot write)."""
        data, dumps, update = self._data, marshal.dumps, self._hash.update
        link = self._canonical
        for index in range(start, len(messages)):
            value: Any = data(messages[index])
            try:
                written = dumps(value, _VERSION)
            except ValueError:  # not plain data: an SDK object, a mapping that is not a dict
                value = _plain(value, index)
                written = dumps(value, _VERSION)
            update(written)
            if link is not None:
                link = _link(link, value, index)
        self._canonical = link
        self.count = len(messages)

    def copy(self) -> Fingerprint:
        """Return a copy that goes on independently."""
        made = Fingerprint(self._data)
        made._hash, made._canonical, made.count = self._hash.copy(), self._canonical, self.count
        return made

    def hexdigest(self) -> str:
        """Return the fingerprint so far: ``RAW.CANONICAL``, 64 hex digits each."""
        assert self._canonical is not None  # noqa: S101 - resume sets it before it returns
        return f"{self._hash.hexdigest()}.{self._canonical.hex()}"

    @classmethod
    def of(cls, messages: Sequence[object], data: Callable[[Any], object]) -> Fingerprint:
        """Return the fingerprint of every message of ``messages``, each read by ``data``."""
        made = cls(data)
        made.feed(messages, 0)
        return made

    @classmethod
    def resume(
        cls, messages: Sequence[object], data: Callable[[Any], object], saved: str
    ) -> Fingerprint | None:
        """Return the running fingerprint of ``messages`` if they are the ones ``saved`` names.

        Equal content is the same history whatever the order of its keys: the raw half is
        checked first (one C pass); only when it differs is the canonical half computed. A
        ``saved`` digest of another shape matches nothing. The fingerprint returned continues
        from ``messages`` as they are now (their raw half), so the next state saved from it
        checks fast against a history handed over in the same order again.
        """
        raw, dot, canonical = saved.partition(".")
        if not dot or len(raw) != _HALF or len(canonical) != _HALF:
            return None
        try:
            saved_link = bytes.fromhex(canonical)
        except ValueError:
            return None
        made = cls(data)
        made._canonical = None  # the raw half alone first
        made.feed(messages, 0)
        if made._hash.hexdigest() == raw:
            made._canonical = saved_link
            return made
        link = _START
        for index, message in enumerate(messages):
            link = _link(link, data(message), index)
        if link != saved_link:
            return None
        made._canonical = link
        return made


def _link(link: bytes, value: object, index: int) -> bytes:
    """Return the canonical chain's next digest after ``link``, for the message ``value``."""
    chained = hashlib.sha256(link)
    chained.update(marshal.dumps(_canonical(value, index), _VERSION))
    return chained.digest()


def _canonical(value: object, index: int) -> _Data:
    """Return ``value`` as plain data with every dict's keys sorted and every tuple a list.

    Keys of one type sort as they compare; keys that do not compare (mixed types) by their
    ``repr``, which is deterministic too.

    Raises:
        ValidationError: for a value that is not message data (as ``_plain``).
    """
    kind = type(value)
    if kind is dict:
        mapping: dict[Any, Any] = value  # type: ignore[assignment]
        try:
            keys = sorted(mapping)
        except TypeError:
            keys = sorted(mapping, key=repr)
        return {
            key: _canonical(item, index) if type(item := mapping[key]) in _NESTED else item
            for key in keys
        }
    if kind is list or kind is tuple:
        return [
            _canonical(item, index) if type(item) in _NESTED else item
            for item in value  # type: ignore[attr-defined]
        ]
    if kind is str or kind is int or kind is float or kind is bool or kind is bytes:
        return value  # type: ignore[return-value]
    if value is None:
        return None
    return _canonical(_plain(value, index), index)  # a mapping, an SDK object: its data


def _plain(value: object, index: int) -> _Data:
    """Return ``value`` as plain data ``marshal`` writes.

    Strings, numbers, ``None``, dicts, lists and tuples stay as they are (their items made
    plain); a mapping becomes a dict and an SDK object what its ``model_dump`` gives.

    Raises:
        ValidationError: for anything else (``messages[index]`` is not message data).
    """
    kind = type(value)
    if kind is str or kind is int or kind is float or kind is bool or kind is bytes:
        return value  # type: ignore[return-value]
    if value is None:
        return None
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
