"""The files of the frameworks' formats, whose messages are objects, not JSON.

A LangChain file is the list ``langchain_core.messages.messages_to_dict`` writes (and
``messages_from_dict`` reads); a Pydantic AI file the list
``pydantic_ai.messages.ModelMessagesTypeAdapter`` writes in JSON mode (what
``result.all_messages_json()`` holds). This is the one module of the command line that imports a
framework, and only when ``--format`` names it (an optional extra; the import contract says so).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from collections.abc import Callable

    from cutctx.formats import Format

__all__ = ["Codec", "codec_of"]


@dataclass(frozen=True, slots=True)
class Codec:
    """How a framework's messages (objects) are read from JSON data and written back to it."""

    load: Callable[[list[Any]], list[Any]]
    dump: Callable[[list[Any]], list[Any]]
    writer: str
    """What writes such a file, named in the error for a file that is not one."""


def _langchain() -> Codec:
    from langchain_core.messages import (  # noqa: PLC0415 - an optional extra, when named
        messages_from_dict,
        messages_to_dict,
    )

    return Codec(messages_from_dict, messages_to_dict, "langchain_core's messages_to_dict")


def _pydantic_ai() -> Codec:
    from pydantic_ai.messages import (  # noqa: PLC0415 - an optional extra, when named
        ModelMessagesTypeAdapter,
    )

    def dump(messages: list[Any]) -> list[Any]:
        return list(ModelMessagesTypeAdapter.dump_python(messages, mode="json"))

    return Codec(ModelMessagesTypeAdapter.validate_python, dump, "ModelMessagesTypeAdapter")


_CODECS: Final[dict[str, Callable[[], Codec]]] = {
    "langchain": _langchain,
    "pydantic_ai": _pydantic_ai,
}
"""The formats whose messages are objects, by name, each with how its files are read and written."""


def codec_of(fmt: Format[Any]) -> Codec | None:
    """Return how files of ``fmt``'s messages are read and written; ``None``: they are JSON.

    Raises:
        ImportError: when the framework is not installed (its extra is named).
    """
    make = _CODECS.get(fmt.name)
    return None if make is None else make()
