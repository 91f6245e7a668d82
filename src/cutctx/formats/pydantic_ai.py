"""Pydantic AI messages (``ModelRequest`` / ``ModelResponse``) to and from cutctx transcripts.

Each message is read as the OpenAI Chat messages Pydantic AI's ``OpenAIChatModel`` sends for it
and priced exactly as ``cutctx.formats.openai_chat`` prices those: a ``ModelRequest`` becomes one
Chat message per part (``SystemPromptPart`` a ``system`` message, ``UserPromptPart`` a ``user``
message, ``ToolReturnPart`` and a tool-bound ``RetryPromptPart`` a ``tool`` message, tool results
first), a ``ModelResponse`` one ``assistant`` message (its ``TextPart`` texts, each
``ThinkingPart`` in ``<think>`` tags, its ``ToolCallPart`` calls with their JSON arguments).
Parts the Chat model does not send (deltas, native tools, files a model made) cost nothing.

A ``SystemPromptPart`` is a ``SYSTEM`` turn, never changed; the turns of one message are kept or
removed together, and a response's calls travel with the request that answers them. Only a
tool result is masked: the request comes back as a copy whose result part holds the stub. A
summary is a ``ModelRequest`` with one ``UserPromptPart`` opening with ``SUMMARY_LABEL``. Importing
this module imports ``pydantic_ai`` (``pip install "cutctx[pydantic-ai]"``).

>>> from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart
>>> messages = [ModelRequest.user_text_prompt("Fix the build."),
...             ModelResponse(parts=[TextPart("On it.")])]
>>> transcript, binding = to_transcript(messages)
>>> transcript.turn_ids(), from_transcript(transcript, binding) == messages
(('m0', 'm1'), True)

.. versionadded:: 0.1.1
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Final, cast

try:
    from pydantic_ai.messages import (
        ERROR_OUTCOMES,
        AudioUrl,
        BinaryContent,
        CachePoint,
        CompactionPart,
        DocumentUrl,
        ImageUrl,
        ModelMessage,
        ModelRequest,
        ModelResponse,
        RetryFeedbackCause,
        RetryFeedbackPart,
        RetryInfo,
        RetryPromptPart,
        SystemPromptPart,
        TextContent,
        TextPart,
        ThinkingPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )
except ImportError as missing:  # the extra is not installed: say which one
    raise ImportError(
        "cutctx.formats.pydantic_ai needs Pydantic AI: in a cutctx checkout, "
        'pip install ".[pydantic-ai]" (cutctx 0.1.1 is not on PyPI yet; see its README)'
    ) from missing

from cutctx.formats._common import fail, summary_text
from cutctx.formats._via_chat import ChatMessage, ViaChat

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from cutctx._core.protocols import TokenEstimator
    from cutctx._core.report import CompactedTranscript
    from cutctx._core.values import Transcript
    from cutctx.formats._common import Binding
    from cutctx.formats._format import Format

__all__ = ["FORMAT", "PYDANTIC_AI", "count_tokens", "from_transcript", "to_transcript"]

FORMAT: Final = "pydantic_ai"

_TEXT_MEDIA: Final = ("text/", "application/json", "application/xml")
_STAMPED: Final = (
    SystemPromptPart,
    UserPromptPart,
    ToolReturnPart,
    RetryFeedbackPart,
    RetryPromptPart,
)


class _PydanticAI(ViaChat[ModelMessage]):
    """Pydantic AI's ``ModelMessage`` lists (``PYDANTIC_AI``)."""

    __slots__ = ()

    @property
    def name(self) -> str:
        return FORMAT

    def kind_of(self, index: int, message: object) -> str:
        if not isinstance(message, ModelRequest | ModelResponse):
            raise fail(
                FORMAT,
                index,
                f"must be a Pydantic AI ModelRequest or ModelResponse, got "
                f"{type(message).__name__}",
            )
        return message.kind

    def chat_of(self, index: int, message: ModelMessage) -> list[ChatMessage]:
        if isinstance(message, ModelResponse):
            return _response(message)
        results: list[ChatMessage] = []
        rest: list[ChatMessage] = []
        files: list[Any] = []
        for block, part in enumerate(message.parts):
            if isinstance(part, ToolReturnPart):
                text, found = part.model_response_str_and_user_content()
                files.extend(found)
                results.append(_tool(part.tool_call_id, text, block))
            elif isinstance(part, RetryPromptPart):  # deprecated, still found in histories
                if part.tool_name is None:
                    rest.append(_user(_feedback(part)))
                else:
                    results.append(_tool(part.tool_call_id, _retried(part), block))
            elif isinstance(part, SystemPromptPart):
                rest.append(ChatMessage({"role": "system", "content": part.content}))
            elif isinstance(part, UserPromptPart):
                rest.append(_user(_content(index, part.content)))
            elif isinstance(part, RetryFeedbackPart):
                rest.append(_user(part.model_response()))
            elif isinstance(part, CompactionPart) and part.content:
                rest.append(ChatMessage(_user(part.content).message, pinned=True))
        if files:
            rest.append(_user(_content(index, files)))
        return [*results, *rest]  # tool results lead the request, as Pydantic AI sends them

    def masked(self, message: ModelMessage, stubs: Mapping[int | None, str]) -> ModelMessage:
        if not isinstance(message, ModelRequest):  # only requests hold results
            raise fail(FORMAT, None, "only a ModelRequest's tool results can be masked")
        parts = list(message.parts)
        for block, stub in stubs.items():
            if block is None:  # an observation: the request's user prompt, masked whole
                parts = [
                    dataclasses.replace(p, content=stub) if isinstance(p, UserPromptPart) else p
                    for p in parts
                ]
                continue
            part = parts[block]
            if isinstance(part, ToolReturnPart):
                # A plain result (a typed part's kind does not fit a stub), sent as it is: a
                # stub is no error, so an error outcome becomes a success.
                outcome = "success" if part.outcome in ERROR_OUTCOMES else part.outcome
                parts[block] = ToolReturnPart(
                    part.tool_name,
                    stub,
                    part.tool_call_id,
                    metadata=part.metadata,
                    timestamp=part.timestamp,
                    outcome=outcome,
                )
            elif isinstance(part, RetryPromptPart) and part.tool_name is not None:
                parts[block] = ToolReturnPart(
                    part.tool_name, stub, part.tool_call_id, timestamp=part.timestamp
                )
        return dataclasses.replace(message, parts=parts)

    def summary(self, text: str, beside: Sequence[ModelMessage]) -> ModelMessage:
        # The nearest message's timestamp, not the clock: the same view renders equal messages.
        for message in beside:
            if isinstance(message, ModelResponse):
                when = message.timestamp
            else:
                stamped = [p.timestamp for p in message.parts if isinstance(p, _STAMPED)]
                if not stamped:
                    continue
                when = stamped[0]
            return ModelRequest(parts=[UserPromptPart(summary_text(text), timestamp=when)])
        return ModelRequest(parts=[UserPromptPart(summary_text(text))])


PYDANTIC_AI: Final[Format[ModelMessage]] = _PydanticAI()
"""The Pydantic AI ``Format``; ``format="pydantic_ai"`` names it.

.. versionadded:: 0.1.1
"""


def _response(message: ModelResponse) -> list[ChatMessage]:
    """Return the assistant message of a response: texts and thinking joined, then its calls."""
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    for part in message.parts:
        if isinstance(part, TextPart):
            texts.append(part.content)
        elif isinstance(part, ThinkingPart) and part.content:
            texts.append(f"<think>\n{part.content}\n</think>")
        elif isinstance(part, ToolCallPart):
            calls.append(
                {
                    "id": part.tool_call_id,
                    "type": "function",
                    "function": {"name": part.tool_name, "arguments": part.args_as_json_str()},
                }
            )
    if not texts and not calls:
        return []  # nothing the Chat model sends
    chat: dict[str, Any] = {"role": "assistant", "content": "\n\n".join(texts) if texts else None}
    if calls:
        chat["tool_calls"] = calls
    return [ChatMessage(chat)]


def _tool(call_id: str, text: str, block: int) -> ChatMessage:
    chat = {"role": "tool", "tool_call_id": call_id, "content": text}
    return ChatMessage(chat, maskable=True, block=block)


def _user(content: object) -> ChatMessage:
    return ChatMessage({"role": "user", "content": content})


def _retried(part: RetryPromptPart) -> str:
    """Return what a tool-bound retry is sent as: the call's result again, as an error."""
    content = part.content if isinstance(part.content, str) else list(part.content)
    return ToolReturnPart(
        part.tool_name or "", content, part.tool_call_id, outcome="retried"
    ).model_response_str()


def _feedback(part: RetryPromptPart) -> str:
    """Return what a tool-less retry is sent as: the feedback part it always meant."""
    cause: RetryFeedbackCause = (
        "model_retry" if isinstance(part.content, str) else "validation_error"
    )
    return RetryFeedbackPart(part.content, retry=RetryInfo(cause=cause)).model_response()


def _content(index: int, content: object) -> object:
    """Return a user prompt's content as the Chat model sends it: a string or a list of parts."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list | tuple):
        raise fail(FORMAT, index, f"a user prompt must be a string or a list, got {content!r:.40}")
    sent: list[dict[str, Any]] = []
    for item in content:
        if isinstance(item, str):
            sent.append({"type": "text", "text": item})
        elif isinstance(item, TextContent):
            sent.append({"type": "text", "text": item.content})
        elif isinstance(item, ImageUrl):
            image: dict[str, Any] = {"url": item.url}
            if item.vendor_metadata and "detail" in item.vendor_metadata:
                image["detail"] = item.vendor_metadata["detail"]
            sent.append({"type": "image_url", "image_url": image})
        elif isinstance(item, BinaryContent):
            sent.append(_binary(item))
        elif isinstance(item, AudioUrl):
            sent.append({"type": "input_audio", "input_audio": {"data": item.url}})
        elif isinstance(item, DocumentUrl):
            sent.append({"type": "file", "file": {"file_data": item.url}})
        elif not isinstance(item, CachePoint):  # a video or an uploaded file: a file part
            sent.append({"type": "file", "file": {}})
    return sent


def _binary(item: BinaryContent) -> dict[str, Any]:
    if item.media_type.startswith(_TEXT_MEDIA):
        return {"type": "text", "text": item.data.decode("utf-8", errors="replace")}
    if item.is_image:
        image: dict[str, Any] = {"url": item.data_uri}
        if item.vendor_metadata and "detail" in item.vendor_metadata:
            image["detail"] = item.vendor_metadata["detail"]
        return {"type": "image_url", "image_url": image}
    if item.is_audio:
        return {"type": "input_audio", "input_audio": {"data": "", "format": item.format}}
    return {"type": "file", "file": {"filename": f"filename.{item.format}"}}


def to_transcript[M: ModelMessage](
    messages: Sequence[M],
    *,
    estimator: TokenEstimator | None = None,
    system: str | Sequence[Mapping[str, Any]] | None = None,
    priority: Callable[[int, dict[str, Any]], int] | None = None,
    pin: Callable[[int, dict[str, Any]], bool] | None = None,
) -> tuple[Transcript, Binding[M]]:
    """Map Pydantic AI ``messages`` onto a transcript and the binding to map it back.

    ``system``, if given, is request-level text (an agent's ``instructions``): a pinned turn,
    priced as a Chat ``system`` message and never emitted. ``priority`` and ``pin`` are called
    with each message's history index and its Chat form (``{"kind": "request" | "response",
    "messages": [...]}``).

    Raises:
        ValidationError: naming the message ``index`` for anything but a ``ModelRequest`` or
            ``ModelResponse``, or a history OpenAI would refuse (a call no request answers, a
            result no call precedes, an empty user prompt).

    .. versionadded:: 0.1.1
    """
    made = PYDANTIC_AI.to_transcript(
        messages, estimator=estimator, system=system, priority=priority, pin=pin
    )
    return cast("tuple[Transcript, Binding[M]]", made)


def from_transcript[M: ModelMessage](
    view: Transcript | CompactedTranscript, binding: Binding[M]
) -> list[M]:
    """Rebuild Pydantic AI messages from a (compacted) view of ``binding``'s transcript.

    Kept messages are the caller's own objects, in order; a request with a masked result is a
    copy whose result parts hold the stubs; a summary is a ``ModelRequest``.

    Raises:
        ValidationError: for a binding of another format or a view it cannot have produced.

    .. versionadded:: 0.1.1
    """
    rebuilt = PYDANTIC_AI.from_transcript(view, cast("Binding[ModelMessage]", binding))
    return cast("list[M]", rebuilt)


def count_tokens(
    messages: Sequence[ModelMessage],
    *,
    estimator: TokenEstimator | None = None,
    system: str | Sequence[Mapping[str, Any]] | None = None,
) -> int:
    """Return what ``messages`` (and ``system``) cost, priced as their Chat messages.

    A partial history (a call still waiting for its result) is priced message by message.

    Raises:
        ValidationError: for anything but a ``ModelRequest`` or ``ModelResponse``.

    .. versionadded:: 0.1.1
    """
    return PYDANTIC_AI.count_tokens(messages, estimator=estimator, system=system)
