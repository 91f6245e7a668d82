"""Whether a value is JSON data a window's state can carry, and where it is not."""

from __future__ import annotations

import math
from typing import Final

from baseaicore import ValidationError

__all__ = ["MAX_DEPTH", "check_json"]

# How deep a message (or a system prompt) may nest: lists and dicts within one another. The
# state holds a message a few levels deeper still, and ``json`` (and ``marshal``, which the
# fingerprint writes) refuse data nested much past a thousand levels.
MAX_DEPTH: Final = 500
_SHOWN: Final = 6  # keys of a long path an error message shows at each end

# Where an item sits: the place of its container and its key there (``None`` at the top).
type _Place = tuple[_Place, str | int] | None


def check_json(value: object, where: str) -> None:
    """Raise unless ``value`` is JSON data that reads back equal.

    That is ``None``, a bool, an int, a finite float, a string, a list or tuple of JSON data,
    or a dict with string keys and JSON data values, nested at most ``MAX_DEPTH`` levels and
    never holding itself.

    Raises:
        ValidationError: naming ``where`` and the keys down to the first value that is not (a
            ``datetime``, ``bytes``, a set, NaN, a key that is not a string, a list that holds
            itself, ...).
    """
    # Depth first, leaving each container by a marker: ``inside`` holds the containers on the
    # path to the item at hand, so a container met again on its own path is a cycle (one that
    # two branches share is not). A place is built into a path only for the error.
    stack: list[tuple[object, _Place, bool]] = [(value, None, False)]
    pop, push = stack.pop, stack.append
    inside: set[int] = set()
    while stack:
        item, place, leaving = pop()
        if leaving:
            inside.discard(id(item))
        elif item is None or isinstance(item, str | int):  # bool is an int
            continue
        elif not isinstance(item, dict | list | tuple):
            _check_leaf(item, where, place)
        elif id(item) in inside:
            raise _refused(where, place, "holds itself, which JSON cannot carry")
        elif len(inside) >= MAX_DEPTH:
            raise _refused(where, place, f"is nested deeper than {MAX_DEPTH} levels")
        else:
            inside.add(id(item))
            push((item, place, True))
            stack.extend(_members(item, where, place))


def _check_leaf(item: object, where: str, place: _Place) -> None:
    if not isinstance(item, float):
        raise _refused(where, place, f"holds a {type(item).__name__}, which JSON cannot carry")
    if not math.isfinite(item):
        raise _refused(where, place, f"is {item!r}, which JSON cannot carry")


def _members(
    item: dict[object, object] | list[object] | tuple[object, ...], where: str, place: _Place
) -> list[tuple[object, _Place, bool]]:
    if isinstance(item, dict):
        members: list[tuple[object, _Place, bool]] = []
        for key, member in item.items():
            if not isinstance(key, str):
                raise _refused(where, place, f"has the key {key!r:.40}, not a string")
            members.append((member, (place, key), False))
        return members
    return [(member, (place, number), False) for number, member in enumerate(item)]


def _refused(where: str, place: _Place, what: str) -> ValidationError:
    keys: list[str | int] = []
    while place is not None:
        place, key = place
        keys.append(key)
    keys.reverse()
    shown = [f"[{key!r}]" for key in keys]
    if len(shown) > 2 * _SHOWN:
        shown[_SHOWN:-_SHOWN] = [f"...({len(keys) - 2 * _SHOWN} more)..."]
    path = where + "".join(shown)
    return ValidationError(
        f"ContextWindow: {path} {what} (a window's state is JSON)", details={"field": path}
    )
