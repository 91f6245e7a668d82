"""Message formats: the edge between wire messages and cutctx transcripts.

A ``Format`` owns everything one message shape means to cutctx: reading messages into turns,
pricing them as sent, the provider's sequencing rules and pins, and rendering a view back. The
built-in ones are ``OPENAI_CHAT`` (Chat Completions messages), ``OPENAI_RESPONSES`` (Responses
API input items), ``ANTHROPIC`` (Messages API), ``GEMINI`` (google-genai contents) and
``BEDROCK_CONVERSE`` (AWS Bedrock Converse messages); each lives in its module, which also keeps
the functions ``to_transcript(messages, *, estimator=None, system=None)``, ``from_transcript(view,
binding)`` and ``count_tokens``. Everything that takes a format takes a ``Format`` or the name
of a built-in one (``FormatName``), or of one an installed package registers in the entry-point
group ``cutctx.formats`` (``ENTRY_POINT_GROUP``); ``resolve`` turns either into the ``Format``.
The types a format's methods take and return are public here: ``Reader`` and its
``ReaderState``, ``Scanned``, ``Part``, ``Binding``, ``Rendered``; ``cutctx.formats.testing``
checks a format against the contract. The core never imports this package.

>>> resolve("anthropic") is ANTHROPIC, sorted(NAMES)
(True, ['anthropic', 'bedrock_converse', 'gemini', 'openai_chat', 'openai_responses'])

.. versionadded:: 0.1.0
"""

from __future__ import annotations

from types import ModuleType
from typing import Any, Final, Literal

from baseaicore import ValidationError

from cutctx.formats import anthropic as anthropic
from cutctx.formats import bedrock_converse as bedrock_converse
from cutctx.formats import gemini as gemini
from cutctx.formats import openai_chat as openai_chat
from cutctx.formats import openai_responses as openai_responses
from cutctx.formats._common import SUMMARY_LABEL as SUMMARY_LABEL
from cutctx.formats._common import Binding as Binding
from cutctx.formats._common import Message, shown
from cutctx.formats._common import Part as Part
from cutctx.formats._common import summary_text as summary_text
from cutctx.formats._format import Format as Format
from cutctx.formats._format import Presentation as Presentation
from cutctx.formats._format import Rendered as Rendered
from cutctx.formats._format import WindowHooks as WindowHooks
from cutctx.formats._format import hooks_of as hooks_of
from cutctx.formats._format import presentation_of as presentation_of
from cutctx.formats._reader import Reader as Reader
from cutctx.formats._reader import ReaderState as ReaderState
from cutctx.formats._reader import Scanned as Scanned
from cutctx.formats._registry import ENTRY_POINT_GROUP as ENTRY_POINT_GROUP
from cutctx.formats._registry import installed, installed_names
from cutctx.formats.anthropic import ANTHROPIC as ANTHROPIC
from cutctx.formats.bedrock_converse import BEDROCK_CONVERSE as BEDROCK_CONVERSE
from cutctx.formats.gemini import GEMINI as GEMINI
from cutctx.formats.openai_chat import OPENAI_CHAT as OPENAI_CHAT
from cutctx.formats.openai_responses import OPENAI_RESPONSES as OPENAI_RESPONSES

__all__ = [
    "ANTHROPIC",
    "BEDROCK_CONVERSE",
    "ENTRY_POINT_GROUP",
    "GEMINI",
    "NAMES",
    "OPENAI_CHAT",
    "OPENAI_RESPONSES",
    "SUMMARY_LABEL",
    "Binding",
    "Format",
    "FormatName",
    "Part",
    "Presentation",
    "Reader",
    "ReaderState",
    "Rendered",
    "Scanned",
    "WindowHooks",
    "anthropic",
    "available",
    "bedrock_converse",
    "gemini",
    "hooks_of",
    "openai_chat",
    "openai_responses",
    "presentation_of",
    "resolve",
    "summary_text",
]

type FormatName = Literal[
    "openai_chat",
    "openai_responses",
    "anthropic",
    "gemini",
    "bedrock_converse",
    "langchain",
    "pydantic_ai",
]
"""The names of the built-in formats (and of the frameworks'); a misspelt one is a type error.

.. versionadded:: 0.1.1
"""

_BUILT_IN: Final[dict[str, Format[Message]]] = {
    fmt.name: fmt for fmt in (OPENAI_CHAT, OPENAI_RESPONSES, ANTHROPIC, GEMINI, BEDROCK_CONVERSE)
}

_FRAMEWORKS: Final[tuple[str, ...]] = ("langchain", "pydantic_ai")
"""The frameworks' formats, by name: each module imports its framework (an optional extra), so
it is imported only when its name is resolved."""

NAMES: Final[tuple[str, ...]] = tuple(_BUILT_IN)
"""The names of the provider formats (built in, no extra needed), in the order the docs list them.

.. versionadded:: 0.1.1
"""


def available() -> tuple[str, ...]:
    """Return every format name ``resolve`` knows: built-in, frameworks', then installed ones.

    .. versionadded:: 0.1.1
    """
    own = {*_BUILT_IN, *_FRAMEWORKS}
    installed_ = [name for name in installed_names() if name not in own]
    return (*_BUILT_IN, *_FRAMEWORKS, *installed_)


def resolve(format: object, *, owner: str = "format") -> Format[Any]:
    """Return the ``Format`` that ``format`` names: a ``Format``, a name or a built-in's module.

    A name is a built-in format's, a framework's (its extra installed) or one an installed
    package registers in the entry-point group ``ENTRY_POINT_GROUP``.

    Raises:
        ValidationError: for anything else, naming the names it knows (and ``owner``).

    .. versionadded:: 0.1.1
    .. versionchanged:: 0.1.1
       Names registered by installed packages.
    """
    if isinstance(format, Format):
        return format
    if isinstance(format, str) and format in _BUILT_IN:
        return _BUILT_IN[format]
    # A framework's format imports its framework (an optional extra): only when it is named.
    if format == "langchain":
        from cutctx.formats.langchain import LANGCHAIN  # noqa: PLC0415 - see above

        return LANGCHAIN
    if format == "pydantic_ai":
        from cutctx.formats.pydantic_ai import PYDANTIC_AI  # noqa: PLC0415 - see above

        return PYDANTIC_AI
    if isinstance(format, ModuleType):
        named = _BUILT_IN.get(getattr(format, "FORMAT", None))  # type: ignore[arg-type]
        if named is not None:
            return named
    if isinstance(format, str):
        found = installed(format)
        if found is not None:
            return found
    known = sorted(available())
    raise ValidationError(
        f"{owner}: format must be a cutctx.formats.Format or one of {known}, "
        f"got {shown(format, 60)}",
        details={"field": "format", "expected": known},
    )


for _public in (Binding, Format, Part, Presentation, Reader, Rendered, Scanned, WindowHooks):
    _public.__module__ = __name__
del _public
