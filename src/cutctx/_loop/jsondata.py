"""Whether a value is JSON data a window's state can carry, and where it is not."""

from __future__ import annotations

import math

from baseaicore import ValidationError

__all__ = ["check_json"]


def check_json(value: object, where: str) -> None:
    """Raise unless ``value`` is JSON data that reads back equal.

    That is ``None``, a bool, an int, a finite float, a string, a list or tuple of JSON data,
    or a dict with string keys and JSON data values.

    Raises:
        ValidationError: naming ``where`` and the key of the first value that is not (a
            ``datetime``, ``bytes``, a set, NaN, a key that is not a string, ...).
    """
    stack: list[tuple[object, str]] = [(value, where)]
    pop, push = stack.pop, stack.append
    while stack:
        item, path = pop()
        if item is None or isinstance(item, str | int):  # bool is an int
            continue
        if isinstance(item, dict):
            for key, member in item.items():
                if not isinstance(key, str):
                    raise _refused(f"{path} has the key {key!r:.40}, not a string", path)
                push((member, f"{path}[{key!r}]"))
        elif isinstance(item, list | tuple):
            for number, member in enumerate(item):
                push((member, f"{path}[{number}]"))
        elif isinstance(item, float):
            if not math.isfinite(item):
                raise _refused(f"{path} is {item!r}, which JSON cannot carry", path)
        else:
            raise _refused(f"{path} holds a {type(item).__name__}, which JSON cannot carry", path)


def _refused(what: str, path: str) -> ValidationError:
    return ValidationError(
        f"ContextWindow: {what} (a window's state is JSON)", details={"field": path}
    )
