r"""Every tool use id a history has used, as one string a reader's state carries.

The providers refuse an id used twice anywhere in a request, so a reader remembers every id so
far, with the message that used it first. A reader's state is copied at every chunk and saved
with the window's state at every step; held as a dict, those ids were most of what a long
Anthropic or Converse session's step copied, sorted and wrote. Held as one string (an
immutable value), they are never copied, and written and read in one piece.

The string is a log: for each id, ``"\n"``, the id as a JSON string, ``"\t"`` and the index of
its message. A JSON string holds neither a raw newline nor a raw tab, so ``"\n" + id + "\t"``
is found in the log exactly where that id's entry starts, and nowhere else.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Final

from cutctx.formats._common import fail

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = ["NO_IDS", "first_use", "ids_log", "taken_ids", "with_ids"]

NO_IDS: Final = ""  # the log of a history that has used no id


def _entry(call_id: object, index: int) -> str:
    """Return the log's entry for ``call_id``, first used by message ``index``."""
    return f"\n{json.dumps(call_id)}\t{index}"


def first_use(log: str, call_id: str) -> int | None:
    """Return the index of the message that first used ``call_id``, or ``None`` if none did."""
    needle = f"\n{json.dumps(call_id)}\t"
    at = log.find(needle)
    if at < 0:
        return None
    start = at + len(needle)
    end = log.find("\n", start)
    return int(log[start:] if end < 0 else log[start:end])


def with_ids(log: str, call_ids: Iterable[str], index: int) -> str:
    """Return ``log`` with ``call_ids``, first used by message ``index``, added."""
    return log + "".join(_entry(call_id, index) for call_id in call_ids)


def taken_ids(fmt: str, state: dict[str, Any]) -> dict[str, Any]:
    """Return a reader state whose ``seen`` is a log (an earlier release's map read as one).

    Raises:
        ValidationError: for a ``seen`` that is neither.
    """
    log = ids_log(state["seen"])
    if log is None:
        raise fail(fmt, None, "not a reader state of this format", field="state")
    state["seen"] = log
    return state


def ids_log(value: object) -> str | None:
    """Return a saved log (or the ``{id: index}`` map earlier releases saved) as a log.

    ``None`` for anything else: not a reader state's ids.
    """
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and all(type(index) is int for index in value.values()):
        return "".join(_entry(call_id, index) for call_id, index in value.items())
    return None
