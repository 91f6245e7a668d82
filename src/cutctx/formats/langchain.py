"""LangChain messages (``BaseMessage``) to and from cutctx transcripts.

Each message is read as the OpenAI Chat message LangChain sends for it
(``langchain_core.messages.convert_to_openai_messages``: tool calls with their JSON arguments,
content blocks and images) and priced exactly as ``cutctx.formats.openai_chat`` prices that, so
the two counts agree. A ``SystemMessage`` is a ``SYSTEM`` turn (never changed); an ``AIMessage``'s
``tool_calls`` and the ``ToolMessage`` objects answering them are one exchange; only a
``ToolMessage``'s content is ever masked. What comes back are LangChain objects: a kept message
is the caller's own, a masked one a ``model_copy`` with the stub as its content, a summary a
``HumanMessage`` opening with ``SUMMARY_LABEL``. Importing this module imports ``langchain_core``
(``pip install "cutctx[langchain]"``).

>>> from langchain_core.messages import AIMessage, HumanMessage
>>> messages = [HumanMessage("Fix the build."), AIMessage("On it.")]
>>> transcript, binding = to_transcript(messages)
>>> transcript.turn_ids(), from_transcript(transcript, binding) == messages
(('m0', 'm1'), True)
>>> count_tokens(messages)  # by TextEstimator(), compact_messages' default
9

.. versionadded:: 0.1.1
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, cast

try:
    from langchain_core.messages import (
        BaseMessage,
        HumanMessage,
        ToolMessage,
        convert_to_openai_messages,
    )
except ImportError as missing:  # the extra is not installed: say which one
    raise ImportError(
        "cutctx.formats.langchain needs LangChain: in a cutctx checkout, "
        'pip install ".[langchain]" (cutctx 0.1.1 is not on PyPI yet; see its README)'
    ) from missing

from cutctx.formats._common import fail, shown, stub_content, summary_text
from cutctx.formats._via_chat import ChatMessage, ViaChat

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from cutctx._core.protocols import TokenEstimator
    from cutctx._core.report import CompactedTranscript
    from cutctx._core.values import Transcript
    from cutctx.formats._common import Binding
    from cutctx.formats._format import Format

__all__ = ["FORMAT", "LANGCHAIN", "count_tokens", "from_transcript", "to_transcript"]

FORMAT: Final = "langchain"


class _LangChain(ViaChat[BaseMessage]):
    """LangChain's ``BaseMessage`` lists (``LANGCHAIN``)."""

    __slots__ = ()

    @property
    def name(self) -> str:
        return FORMAT

    def kind_of(self, index: int, message: object) -> str:
        if not isinstance(message, BaseMessage):
            raise fail(
                FORMAT,
                index,
                f"must be a LangChain BaseMessage, got {type(message).__name__}",
            )
        return message.type

    def chat_of(self, index: int, message: BaseMessage) -> list[ChatMessage]:
        try:
            read = convert_to_openai_messages([message])
        except (ValueError, TypeError, KeyError) as error:
            raise fail(
                FORMAT,
                index,
                f"cannot be read as an OpenAI Chat message: {shown(str(error), 80)}",
            ) from None
        result = isinstance(message, ToolMessage)
        return [ChatMessage(chat, result and chat.get("role") == "tool") for chat in read]

    def masked(self, message: BaseMessage, stubs: Mapping[int | None, str]) -> BaseMessage:
        stub = stubs[None]
        return message.model_copy(update={"content": stub_content(message.content, stub, "text")})

    def summary(self, text: str, beside: Sequence[BaseMessage]) -> BaseMessage:
        del beside
        return HumanMessage(summary_text(text))


LANGCHAIN: Final[Format[BaseMessage]] = _LangChain()
"""The LangChain ``Format``; ``format="langchain"`` names it.

.. versionadded:: 0.1.1
"""


def to_transcript[M: BaseMessage](
    messages: Sequence[M],
    *,
    estimator: TokenEstimator | None = None,
    system: str | Sequence[Mapping[str, Any]] | None = None,
    priority: Callable[[int, dict[str, Any]], int] | None = None,
    pin: Callable[[int, dict[str, Any]], bool] | None = None,
) -> tuple[Transcript, Binding[M]]:
    """Map LangChain ``messages`` onto a transcript and the binding to map it back.

    ``system``, if given, is request-level text (an agent's ``system_prompt``): a pinned turn,
    priced as a Chat ``system`` message and never emitted. ``priority`` and ``pin`` are called
    with each message's history index and its Chat form (``{"kind": message.type, "messages":
    [...]}``).

    Raises:
        ValidationError: naming the message ``index`` for anything but a ``BaseMessage``, a
            message LangChain cannot convert, or a history OpenAI would refuse (a tool call
            without its ``ToolMessage``, a ``ToolMessage`` no call precedes, an empty
            ``HumanMessage``).

    .. versionadded:: 0.1.1
    """
    made = LANGCHAIN.to_transcript(
        messages, estimator=estimator, system=system, priority=priority, pin=pin
    )
    return cast("tuple[Transcript, Binding[M]]", made)


def from_transcript[M: BaseMessage](
    view: Transcript | CompactedTranscript, binding: Binding[M]
) -> list[M]:
    """Rebuild LangChain messages from a (compacted) view of ``binding``'s transcript.

    Kept messages are the caller's own objects, in order; a masked ``ToolMessage`` is a
    ``model_copy`` whose ``content`` is the stub; a summary is a ``HumanMessage``.

    Raises:
        ValidationError: for a binding of another format or a view it cannot have produced.

    .. versionadded:: 0.1.1
    """
    rebuilt = LANGCHAIN.from_transcript(view, cast("Binding[BaseMessage]", binding))
    return cast("list[M]", rebuilt)


def count_tokens(
    messages: Sequence[BaseMessage],
    *,
    estimator: TokenEstimator | None = None,
    system: str | Sequence[Mapping[str, Any]] | None = None,
) -> int:
    """Return what ``messages`` (and ``system``) cost, priced as their Chat messages.

    A partial history (a call still waiting for its ``ToolMessage``) is priced message by message.

    Raises:
        ValidationError: for anything but a ``BaseMessage``, or a field of the wrong type.

    .. versionadded:: 0.1.1
    """
    return LANGCHAIN.count_tokens(messages, estimator=estimator, system=system)
