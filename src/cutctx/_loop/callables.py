"""How ``observation=`` is called: with the message, or with ``(index, message)`` as ``pin=`` is.

One documented rule, decided once when the window (or ``compact_messages``) is made, never at a
call: the callable's parameters are read with ``inspect.signature``, which sees through
``functools.partial``, bound methods and objects with ``__call__``.

- It is called with the message alone when it takes one positional argument, and with
  ``(index, message)`` when it takes two.
- When it can take either (a default, or ``*args``), it is called with the message alone
  exactly when it requires one argument; otherwise with ``(index, message)``.
- A callable whose signature Python cannot read (a few builtins, such as ``bool``) is called
  with the message alone.
- A callable that can take neither is refused: ``ValidationError``, naming it.
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any

from baseaicore import ValidationError

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["two_argument"]

_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


def two_argument(
    function: Callable[..., bool], *, owner: str = "ContextWindow", name: str = "observation"
) -> Callable[[int, dict[str, Any]], bool]:
    """Return ``function`` as a callable of ``(index, message)``, by the module's rule.

    Raises:
        ValidationError: naming ``owner`` and ``name``, for a callable that can be called
            neither with the message alone nor with ``(index, message)``.
    """
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):  # no signature to read: the documented shape, the message
        return _of_message(function)
    one, two = _takes(signature, 1), _takes(signature, 2)
    if one and not two:
        return _of_message(function)
    if two and not one:
        return function
    if one:  # either fits: the message alone when exactly one argument is required
        required = sum(
            1
            for parameter in signature.parameters.values()
            if parameter.kind in _POSITIONAL and parameter.default is inspect.Parameter.empty
        )
        return _of_message(function) if required == 1 else function
    raise ValidationError(
        f"{owner}: {name} must take the message or (index, message), "
        f"got {_named(function)} taking {signature}",
        details={"field": name, "signature": str(signature)},
    )


def _takes(signature: inspect.Signature, count: int) -> bool:
    """Whether a call with ``count`` positional arguments binds to ``signature``."""
    try:
        signature.bind(*range(count))
    except TypeError:
        return False
    return True


def _of_message(function: Callable[..., bool]) -> Callable[[int, dict[str, Any]], bool]:
    def called(index: int, message: dict[str, Any]) -> bool:
        del index
        return function(message)

    return called


def _named(function: object) -> str:
    named = getattr(function, "__qualname__", None)
    return named if isinstance(named, str) else type(function).__name__
