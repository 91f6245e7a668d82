"""OpenAI Chat Completions messages to and from cutctx transcripts.

One turn per message, with ids ``m0``, ``m1``, ... by position. ``system`` and ``developer``
messages are ``SYSTEM`` turns (untouchable); an assistant message with ``tool_calls`` and the
``tool`` messages answering it share one ``tool_call_id`` (the turn id of the assistant message),
so every plan keeps, masks, summarizes or drops them as one exchange. Only a ``tool`` message's
body is ever masked. A call id may come back in a later exchange (servers that number calls
``call_0``, ``call_1``, ... in every turn): a tool message answers the call of that id in the
assistant message just before it. See ``docs/formats/openai_chat.md`` for the pricing rules.

>>> transcript, binding = to_transcript([{"role": "user", "content": "hi"}])
>>> transcript.turn_ids(), from_transcript(transcript, binding)
(('m0',), [{'role': 'user', 'content': 'hi'}])
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any, Final, cast

from cutctx._core.estimators import TokenizerEstimator
from cutctx._core.metadata import FRAMING_METADATA, NAMED_FRAMING
from cutctx._core.values import EMPTY_METADATA, Role, Transcript, TranscriptTurn
from cutctx.formats._common import (
    AUDIO_TOKENS,
    FILE_TOKENS,
    Binding,
    Message,
    Part,
    Pricer,
    as_json,
    check_dict,
    collect,
    counting,
    fail,
    is_empty,
    joined,
    openai_image_tokens,
    render_content,
    restore,
    shown,
    stub_content,
    summary_text,
    text_field,
)
from cutctx.formats._format import Format, Presentation, Rendered, WindowHooks
from cutctx.formats._reader import Out, Reader, ReaderState, Scanned, StreamReader

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from cutctx._core.protocols import TokenEstimator
    from cutctx._core.report import CompactedTranscript

__all__ = [
    "FORMAT",
    "OPENAI_CHAT",
    "REPLY_PRIMING_TOKENS",
    "count_tokens",
    "from_transcript",
    "request_overhead",
    "to_transcript",
]

FORMAT: Final = "openai_chat"

REPLY_PRIMING_TOKENS: Final = 3
"""What every request adds, with a tokenizer, for the reply's priming
(``<|start|>assistant<|message|>``, OpenAI's ``num_tokens_from_messages``): a cost of the
request, not of any message, so no turn carries it.

.. versionadded:: 0.1.1
"""

_NAME_TOKENS: Final = 1
"""What a ``name`` adds, with a tokenizer, besides its own tokens (OpenAI's ``tokens_per_name``)."""

_TOOL_ROLE: Final = "tool"

_PAIRING_BLOCKS: Final = frozenset({"tool_use", "tool_result"})
"""Anthropic's call and result blocks: in a Chat message they are another format's (Chat pairs
calls and results through ``tool_calls`` and ``tool`` messages), never an unknown part to price
as text, which would lose the pairing. Other unknown part types are priced as their JSON."""

_ROLES: Final = {
    "system": Role.SYSTEM,
    "developer": Role.SYSTEM,
    "user": Role.USER,
    "assistant": Role.ASSISTANT,
    "tool": Role.TOOL,
}


class _OpenAIChat(Format[Message], WindowHooks[Message], Presentation):
    """The Chat Completions format (``OPENAI_CHAT``)."""

    __slots__ = ()

    @property
    def name(self) -> str:
        return FORMAT

    def pricer(self, estimator: TokenEstimator | None) -> Pricer:
        return Pricer.of(FORMAT, estimator, roles=True)

    def request_overhead(self, estimator: TokenEstimator) -> int:
        return request_overhead(estimator)

    def pieces(
        self, message: Mapping[str, Any], *, estimator: TokenEstimator, tokens: int
    ) -> tuple[list[tuple[str, int]], int]:
        del tokens
        pricer = self.pricer(estimator)
        calls: list[tuple[str, int]] = []
        for call in message.get("tool_calls") or ():
            kind = call.get("type", "function")
            body = call[kind]
            argument = body["arguments"] if kind == "function" else body["input"]
            price = pricer.framing + pricer.role("tool") + pricer.text(body["name"])
            calls.append((body["name"], price + pricer.text(argument)))
        return calls, 0

    def reader(
        self,
        *,
        estimator: TokenEstimator | None = None,
        priority: Callable[[int, dict[str, Any]], int] | None = None,
        pin: Callable[[int, dict[str, Any]], bool] | None = None,
    ) -> Reader[Message]:
        return _ChatReader(self.pricer(estimator), priority=priority, pin=pin)

    def render(
        self, view: Transcript | CompactedTranscript, binding: Binding[Message]
    ) -> Rendered[Message]:
        out: list[dict[str, Any]] = []
        costs: list[int] = []
        for piece in collect(FORMAT, view, binding):
            costs.append(piece.cost)
            if piece.index is None:
                out.append({"role": "user", "content": summary_text(piece.text)})
                continue
            message = binding.messages[piece.index]
            if piece.masked:
                message = dict(message)
                message["content"] = stub_content(
                    message.get("content"), piece.masked[None], "text"
                )
            out.append(message)
        return Rendered(restore(binding, out), costs)

    def count_tokens(
        self,
        messages: Sequence[Message],
        *,
        estimator: TokenEstimator | None = None,
        system: object = None,
    ) -> int:
        estimator = counting(estimator)
        pricer = self.pricer(estimator)
        head = self.head(system, estimator=pricer.estimator)
        read = _build(messages, pricer.estimator, strict=False)
        return sum(turn.token_estimate for turn in (*head, *read.turns)) + self.request_overhead(
            pricer.estimator
        )


OPENAI_CHAT: Final[Format[Message]] = _OpenAIChat()
"""The Chat Completions ``Format``; ``format="openai_chat"`` names it.

.. versionadded:: 0.1.1
"""


def to_transcript[M: Message](
    messages: Sequence[M],
    *,
    estimator: TokenEstimator | None = None,
    system: str | Sequence[Mapping[str, Any]] | None = None,
    priority: Callable[[int, dict[str, Any]], int] | None = None,
    pin: Callable[[int, dict[str, Any]], bool] | None = None,
) -> tuple[Transcript, Binding[M]]:
    """Map Chat Completions ``messages`` onto a transcript and the binding to map it back.

    ``system``, if given, is request-level text kept outside the list: a pinned turn that is
    priced but never emitted (``binding.system`` returns it unchanged). A message's
    ``"sticky": true`` (or a true ``pin(index, message)``) pins its turn and its
    ``"priority": n`` (or ``priority(index, message)``) becomes the turn's ``cutctx.priority``;
    neither key is sent on. A tool message's turn names its tool in ``cutctx.tool_name``.

    Raises:
        ValidationError: naming the message ``index`` in ``details`` for a non-list, a message
            that is not an object, an unknown role, a tool message whose call is missing, a
            tool call without its answer, one assistant message repeating a call id in its
            ``tool_calls``, a user message with no content, or a field of the wrong type. A
            call id an earlier exchange used is no error.

    .. versionadded:: 0.1.0
    .. versionchanged:: 0.1.1
       With a ``TokenizerEstimator`` a message's price holds its role's tokens (a tool
       message's, its call's) and a ``name`` adds 1; a call id reused by a later exchange is
       accepted.
    """
    made = OPENAI_CHAT.to_transcript(
        messages, estimator=estimator, system=system, priority=priority, pin=pin
    )
    return cast("tuple[Transcript, Binding[M]]", made)


class _ChatReader(StreamReader[Message]):
    """Reads Chat Completions messages; its state holds the calls still waiting for answers.

    State: ``count``, ``pending`` (the open calls' tool names by call id), ``opener`` (the
    index of the assistant message that made them) and ``key`` (its turn id).
    """

    __slots__ = ()

    fmt = FORMAT

    def initial(self) -> ReaderState:
        return {"count": 0, "pending": {}, "opener": None, "key": None}

    def message(self, state: ReaderState, index: int, item: dict[str, Any], out: Out) -> None:
        pricer, strict = self.pricer, self.strict
        role = item.get("role")
        kind = _ROLES.get(role) if isinstance(role, str) else None
        if kind is None:
            raise fail(FORMAT, index, f"unknown role {shown(role)}", role=shown(role))
        pending: dict[str, str] = state["pending"]
        if pending and kind is not Role.TOOL:
            if strict:
                raise _unanswered(state["opener"], pending)
            pending.clear()
        if strict and kind is Role.USER and is_empty(item.get("content")):
            raise fail(FORMAT, index, "a user message must have content")
        turn_id = f"m{index}"
        text, cost = _content(pricer, index, item.get("content"))
        call_key: str | None = None
        metadata = EMPTY_METADATA
        if kind is Role.TOOL:  # its role is priced with its call (see ``_calls``)
            named = _name(pricer, index, item)
            if named:  # a stub of it is sent with the name too: it is priced with it
                cost += named
                metadata = {FRAMING_METADATA: NAMED_FRAMING}
            call_id = text_field(FORMAT, index, item.get("tool_call_id"), "tool_call_id")
            if call_id in pending:
                out.tool_names[turn_id] = pending.pop(call_id)
                call_key = state["key"]
            elif strict:
                raise fail(
                    FORMAT,
                    index,
                    f"tool message answers call {call_id!r:.60}, which the assistant message "
                    "just before it did not make (or which is already answered)",
                    call_id=call_id,
                )
        else:
            texts = [text] if text else []
            cost += pricer.role(str(role)) + _name(pricer, index, item)
            if kind is Role.ASSISTANT:
                cost += _optional_text(pricer, index, item, "refusal", texts=texts)
                names, call_cost = _calls(pricer, index, item.get("tool_calls"), texts)
                cost += call_cost
                if names:
                    state["pending"], state["opener"], state["key"] = names, index, turn_id
                    call_key = turn_id
            text = joined(texts)
        turn = TranscriptTurn(
            turn_id, kind, text, pricer.framing + cost, call_key, metadata=metadata
        )
        out.add(turn, Part(turn, index, None, maskable=kind is Role.TOOL, siblings=1))

    def finish(self, state: ReaderState) -> None:
        if state["pending"] and self.strict:
            raise _unanswered(state["opener"], state["pending"])


def _build(
    messages: Sequence[Message],
    estimator: object,
    *,
    strict: bool,
) -> Scanned[Message]:
    """Read a whole history; without ``strict`` only field shapes (``count_tokens``)."""
    reader = _ChatReader(Pricer.of(FORMAT, estimator, roles=True), strict=strict)
    return reader.read(messages, final=True)


def from_transcript[M: Message](
    view: Transcript | CompactedTranscript, binding: Binding[M]
) -> list[M]:
    """Rebuild Chat Completions messages from a (compacted) view of ``binding``'s transcript.

    Kept messages are the caller's own dicts, in order; a masked tool message is a copy whose
    ``content`` is the stub (a string, or one text part if it was a list); a summary is a
    ``user`` message opening with ``SUMMARY_LABEL``. Request-level ``system=`` is never
    emitted.

    Raises:
        ValidationError: for a binding of another format or a view it cannot have produced.
    """
    binding_ = cast("Binding[Message]", binding)
    return cast("list[M]", OPENAI_CHAT.from_transcript(view, binding_))


def count_tokens(
    messages: Sequence[Message],
    *,
    estimator: TokenEstimator | None = None,
    system: str | Sequence[Mapping[str, Any]] | None = None,
) -> int:
    """Return what ``messages`` (and ``system``) cost under this format's pricing rules.

    That is the sum of their turns' estimates plus ``request_overhead(estimator)``: with a
    ``TokenizerEstimator`` the reply's priming, so plain-text messages cost exactly what
    OpenAI's ``num_tokens_from_messages`` counts. Counting needs no valid request: a partial
    history (a tool call still waiting for its answer) is priced message by message. The
    estimator is ``TextEstimator()`` by default, as ``compact_messages``'.

    >>> count_tokens([{"role": "user", "content": "twelve chars"}])
    3

    Raises:
        ValidationError: for a field of the wrong type, as ``to_transcript`` does.

    .. versionchanged:: 0.1.1
       With a ``TokenizerEstimator``: the roles, 1 per ``name`` and the reply's priming. The
       default estimator is ``TextEstimator()``.
    """
    return OPENAI_CHAT.count_tokens(messages, estimator=estimator, system=system)


def request_overhead(estimator: TokenEstimator | None = None) -> int:
    """Return what a request costs beyond its messages: the tokens no turn carries.

    ``REPLY_PRIMING_TOKENS`` with a ``TokenizerEstimator``, 0 with any other estimator (the
    character default prices no framing). A budget for the messages is the context window
    less this.

    >>> request_overhead()
    0

    .. versionadded:: 0.1.1
    """
    return REPLY_PRIMING_TOKENS if isinstance(estimator, TokenizerEstimator) else 0


def _name(pricer: Pricer, index: int, message: dict[str, Any]) -> int:
    """Return the price of a message's ``name``: its tokens, and 1 more with a tokenizer."""
    value = message.get("name")
    if value is None:
        return 0
    cost = pricer.text(text_field(FORMAT, index, value, "name"))
    return cost + _NAME_TOKENS if pricer.roles else cost


def _unanswered(opener: int, pending: Mapping[str, str]) -> Exception:
    missing = sorted(pending)
    return fail(
        FORMAT,
        opener,
        f"tool call {missing[0]!r:.60} has no tool message answering it",
        call_ids=missing[:10],
    )


def _optional_text(
    pricer: Pricer,
    index: int,
    message: dict[str, Any],
    name: str,
    *,
    texts: list[str],
) -> int:
    value = message.get(name)
    if value is None:
        return 0
    text = text_field(FORMAT, index, value, name)
    if text:
        texts.append(text)
    return pricer.text(text)


def _content(pricer: Pricer, index: int, content: object) -> tuple[str, int]:
    """Render and price a message's ``content``: a string, a list of parts, or absent."""
    return render_content(
        FORMAT,
        pricer,
        index,
        content,
        "content",
        partial(_part, pricer, index),
    )


def _part(pricer: Pricer, index: int, value: object, where: str) -> tuple[str, int]:
    """Render and price one content part: text, refusal, image, audio, file or another type."""
    part = check_dict(FORMAT, index, value, where)
    kind = part.get("type")
    if kind in ("text", "refusal"):
        text = text_field(FORMAT, index, part.get(kind), f"{where}.{kind}")
        return text, pricer.text(text)
    if kind == "image_url":
        image = check_dict(FORMAT, index, part.get("image_url"), f"{where}.image_url")
        return "[image]", openai_image_tokens(image.get("url"), image.get("detail"))
    if kind == "input_audio":
        return "[audio]", AUDIO_TOKENS
    if kind == "file":
        return "[file]", FILE_TOKENS
    if isinstance(kind, str) and kind in _PAIRING_BLOCKS:
        raise fail(
            FORMAT,
            index,
            f"{where} is an Anthropic {kind!r} block, not a Chat Completions part (text, "
            "image_url, input_audio, file, refusal): Chat pairs a call and its result through "
            "tool_calls and a tool message",
            type=kind,
        )
    if isinstance(kind, str):
        return f"[{kind}]", pricer.text(as_json(part))
    raise fail(FORMAT, index, f"{where} has no string type")


def _calls(
    pricer: Pricer, index: int, calls: object, texts: list[str]
) -> tuple[dict[str, str], int]:
    """Read and price an assistant message's ``tool_calls``: framing, name and arguments each.

    With a tokenizer each call also carries the role tokens of the tool message answering
    it, so that message costs its framing and body alone, as a masking stub is priced.
    Returns each call's tool name by its id, in order, and the price.
    """
    if calls is None:
        return {}, 0
    if not isinstance(calls, list | tuple):
        raise fail(FORMAT, index, f"tool_calls must be a list, got {type(calls).__name__}")
    ids: dict[str, str] = {}
    cost = 0
    answer = pricer.role(_TOOL_ROLE)
    for position, value in enumerate(calls):
        where = f"tool_calls[{position}]"
        call = check_dict(FORMAT, index, value, where)
        call_id = text_field(FORMAT, index, call.get("id"), f"{where}.id")
        if call_id in ids:
            raise fail(FORMAT, index, f"{where} repeats the call id {call_id!r:.60}")
        kind = call.get("type", "function")
        if kind == "function":
            body = check_dict(FORMAT, index, call.get("function"), f"{where}.function")
            argument = "arguments"
        elif kind == "custom":
            body = check_dict(FORMAT, index, call.get("custom"), f"{where}.custom")
            argument = "input"
        else:
            raise fail(FORMAT, index, f"{where} has unknown type {shown(kind)}")
        name = text_field(FORMAT, index, body.get("name"), f"{where}.{kind}.name")
        arguments = text_field(FORMAT, index, body.get(argument), f"{where}.{kind}.{argument}")
        ids[call_id] = name
        cost += pricer.framing + pricer.text(name) + pricer.text(arguments) + answer
        texts.append(f"[tool call {name} {arguments}]")
    return ids, cost
