"""Whether a value is data a window's state can carry, and its lossless JSON form.

Message data is JSON's values and raw ``bytes`` (boto3's images and redacted reasoning,
google-genai's signatures). ``to_json_data`` writes ``bytes`` as ``{"$bytes": base64}`` and a dict
that has a key starting with ``$`` as ``{"$dict": the dict}``, so every value reads back equal
through ``from_json_data``, whatever keys the caller's own dicts hold.
"""

from __future__ import annotations

import base64
import math
from typing import Final, cast

from baseaicore import ValidationError

__all__ = ["MAX_DEPTH", "check_json", "from_json_data", "refused", "to_json_data"]

# How deep a message (or a system prompt) may nest: lists and dicts within one another. The
# state holds a message a few levels deeper still, and ``json`` (and ``marshal``, which the
# fingerprint writes) refuse data nested much past a thousand levels.
MAX_DEPTH: Final = 500
_SHOWN: Final = 6  # keys of a long path an error message shows at each end


def refused(why: str, *, field: str = "state", **details: object) -> ValidationError:
    """Return the error for a saved window state that cannot continue: one wording for all.

    ``ContextWindow.from_state: {why}``, whether ``from_state`` found it or (for what only the
    history shows) the first ``prepare`` after it; ``field`` names the part of the state.
    """
    return ValidationError(f"ContextWindow.from_state: {why}", details={"field": field, **details})


# Where an item sits: the place of its container and its key there (``None`` at the top).
type _Place = tuple[_Place, str | int] | None


def check_json(value: object, where: str) -> None:
    """Raise unless ``value`` is message data that reads back equal (``to_json_data``).

    That is ``None``, a bool, an int, a finite float, a string, ``bytes``, a list or tuple of
    such data, or a dict with string keys and such values, nested at most ``MAX_DEPTH`` levels
    and never holding itself.

    Raises:
        ValidationError: naming ``where`` and the keys down to the first value that is not (a
            ``datetime``, a set, NaN, a key that is not a string, a list that holds itself, ...).
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
        elif item is None or isinstance(item, str | int | bytes):  # bool is an int
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


_BYTES: Final = "$bytes"
_DICT: Final = "$dict"


def to_json_data(value: object) -> object:
    """Return checked message data (``check_json``) as JSON data ``from_json_data`` reads back.

    What holds no ``bytes`` and no dict with a ``$`` key is returned as it is (not copied).
    """
    if isinstance(value, bytes):
        return {_BYTES: base64.b64encode(value).decode("ascii")}
    if isinstance(value, dict):
        mapping = cast("dict[str, object]", value)
        made = {key: to_json_data(item) for key, item in mapping.items()}
        if any(key.startswith("$") for key in mapping):
            return {_DICT: made}
        return made if any(made[key] is not item for key, item in mapping.items()) else value
    if isinstance(value, list | tuple):
        items = [to_json_data(item) for item in value]
        return items if any(map(_is_not, items, value)) else value
    return value


def from_json_data(value: object) -> object:
    """Return the message data ``to_json_data`` wrote as ``value`` (tags read back).

    Raises:
        ValidationError: for a ``$bytes`` tag that is not base64 text.
    """
    if isinstance(value, dict):
        mapping = cast("dict[str, object]", value)
        if len(mapping) == 1:
            if _BYTES in mapping:
                return _bytes_of(mapping[_BYTES])
            inner = mapping.get(_DICT)
            if isinstance(inner, dict):
                return {key: from_json_data(item) for key, item in inner.items()}
        made = {key: from_json_data(item) for key, item in mapping.items()}
        return made if any(made[key] is not item for key, item in mapping.items()) else value
    if isinstance(value, list):
        items = [from_json_data(item) for item in value]
        return items if any(map(_is_not, items, value)) else value
    return value


def _is_not(first: object, second: object) -> bool:
    return first is not second


def _bytes_of(text: object) -> bytes:
    if isinstance(text, str):
        try:
            return base64.b64decode(text.encode("ascii"), validate=True)
        except ValueError:  # binascii.Error, UnicodeEncodeError
            pass
    raise ValidationError(
        f"ContextWindow.from_state: malformed state ({_BYTES} holds {text!r:.40}, "
        "not base64 bytes)",
        details={"field": _BYTES},
    )
