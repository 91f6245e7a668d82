"""Anthropic Messages API conversations to and from cutctx transcripts.

The top-level ``system`` (a string or text blocks) is the first turn, ``system``: pinned, priced,
never emitted and returned unchanged as ``binding.system``. Each message is one turn ``m<i>``,
except a user message carrying ``tool_result`` blocks: each result is its own ``TOOL`` turn (the
first ``m<i>``, the others ``m<i>.<block>``) and its other blocks one ``USER`` turn
``m<i>.<block>``, so each result can be masked on its own. The assistant turn with ``tool_use``
blocks and every turn of the user message answering it share one ``tool_call_id`` (the turn id
of the assistant message): one exchange. ``thinking`` blocks live inside their assistant turn,
so they are kept or removed with it and never edited.

The input must be a valid request: user first, then strict alternation, every ``tool_use``
answered in the next message. ``from_transcript`` keeps the output valid: adjacent same-role
messages are merged (their blocks concatenated), except that an assistant message holding
thinking blocks is never merged behind another (its thinking must stay first): a short user
message, ``FILLER_TEXT``, goes between them, and before an assistant message that would open the
conversation. The price of that filler is reserved in the estimates (on the ``system`` turn and
on every assistant turn with thinking), so a plan that fits still fits. See
``docs/formats/anthropic.md`` for the pricing rules.

>>> transcript, binding = to_transcript([{"role": "user", "content": "hi"}], system="Be brief.")
>>> transcript.turn_ids(), from_transcript(transcript, binding), binding.system
(('system', 'm0'), [{'role': 'user', 'content': 'hi'}], 'Be brief.')
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any, Final

from cutctx._core.values import Role, Transcript, TranscriptTurn
from cutctx.formats._common import (
    FILE_TOKENS,
    Binding,
    Part,
    Pricer,
    as_json,
    check_dict,
    check_messages,
    collect,
    fail,
    image_size,
    joined,
    read_marks,
    render_content,
    stub_content,
    system_text,
    system_turn,
    text_field,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from cutctx._core.protocols import TokenEstimator
    from cutctx._core.report import CompactedTranscript

__all__ = [
    "FILLER_TEXT",
    "FORMAT",
    "IMAGE_MAX_TOKENS",
    "IMAGE_PIXELS_PER_TOKEN",
    "count_tokens",
    "from_transcript",
    "to_transcript",
]

FORMAT: Final = "anthropic"

FILLER_TEXT: Final = "(earlier turns were compacted)"
"""The user message put before an assistant message that would otherwise open the output or
follow another assistant message it cannot be merged with."""

IMAGE_PIXELS_PER_TOKEN: Final = 750
"""Anthropic prices an image at ``width * height / 750`` tokens (after scaling)."""

IMAGE_MAX_TOKENS: Final = 1_600
"""Anthropic scales larger images down to about this many tokens; an image whose size cannot be
read (JPEG, URL or file sources) is priced at it."""

_IMAGE_MAX_EDGE: Final = 1_568
_THINKING: Final = frozenset({"thinking", "redacted_thinking"})


def to_transcript(
    messages: list[dict[str, Any]],
    *,
    estimator: TokenEstimator | None = None,
    system: str | list[dict[str, Any]] | None = None,
    priority: Callable[[int, dict[str, Any]], int] | None = None,
    pin: Callable[[int, dict[str, Any]], bool] | None = None,
) -> tuple[Transcript, Binding]:
    """Map a Messages API conversation (and its top-level ``system``) onto a transcript.

    A message's ``"sticky": true`` (or a true ``pin(index, message)``) pins its turns and its
    ``"priority": n`` (or ``priority(index, message)``) becomes their ``cutctx.priority``;
    neither key is sent on. Each ``tool_result``'s turn names its ``tool_use``'s tool in
    ``cutctx.tool_name``.

    Raises:
        ValidationError: naming the message ``index`` in ``details`` for a non-list, a message
            that is not an object, an unknown role, a conversation that does not open with a
            user message or does not alternate, a ``tool_result`` whose ``tool_use`` is not in
            the message before it, a ``tool_use`` left unanswered, or a field of the wrong type.

    .. versionchanged:: 0.1.0
       ``sticky`` and ``priority`` keys, the ``priority`` and ``pin`` callables, tool names.
    """
    transcript, binding, _ = _scan(messages, estimator, system, priority, pin)
    return transcript, binding


def from_transcript(
    view: Transcript | CompactedTranscript, binding: Binding
) -> list[dict[str, Any]]:
    """Rebuild Messages API messages from a (compacted) view of ``binding``'s transcript.

    Kept messages are the caller's own dicts, in order, unless a neighbour was removed and they
    had to be merged; a masked ``tool_result`` is a copy whose ``content`` is the stub (ids,
    ``is_error`` and ``cache_control`` kept; images inside the result are masked with the text);
    a summary is an assistant message (its trailing whitespace removed, which Anthropic
    rejects). The top-level ``system`` is never emitted: send ``binding.system``.

    Raises:
        ValidationError: for a binding of another format, a view it cannot have produced, or a
            summary with no text.
    """
    built: list[dict[str, Any]] = []
    for piece in collect(FORMAT, view, binding):
        if piece.index < 0:
            text = piece.text.rstrip()
            if not text:
                raise fail(
                    FORMAT, None, "a summary must hold some text; Anthropic rejects empty text"
                )
            built.append({"role": "assistant", "content": text})
            continue
        message = binding.messages[piece.index]
        if piece.masked:
            content = list(message["content"])
            for block_index, stub in piece.masked.items():
                assert block_index is not None  # noqa: S101 - tool results are split by block
                block = dict(content[block_index])
                block["content"] = stub_content(block.get("content"), stub, "text")
                content[block_index] = block
            message = dict(message)
            message["content"] = content
        built.append(message)
    return _alternate(built)


def count_tokens(
    messages: list[dict[str, Any]],
    *,
    estimator: TokenEstimator | None = None,
    system: str | list[dict[str, Any]] | None = None,
) -> int:
    """Return what ``messages`` and ``system`` cost under this format's pricing rules.

    The filler reserves that ``to_transcript`` adds to its estimates are not counted.

    >>> count_tokens([{"role": "user", "content": "twelve chars"}])
    3

    Raises:
        ValidationError: as ``to_transcript`` does.
    """
    transcript, _, reserved = _scan(messages, estimator, system)
    return transcript.token_estimate() - reserved


def _scan(
    messages: object,
    estimator: object,
    system: object,
    priority: Callable[[int, dict[str, Any]], int] | None = None,
    pin: Callable[[int, dict[str, Any]], bool] | None = None,
) -> tuple[Transcript, Binding, int]:
    """Build the transcript and binding; also return the tokens reserved for fillers."""
    pricer = Pricer.of(FORMAT, estimator)
    items = check_messages(FORMAT, messages)
    reserve = pricer.framing + pricer.text(FILLER_TEXT)
    reserved = reserve
    head = system_text(FORMAT, system, pricer)
    text, cost = head if head is not None else ("", 0)
    turn = system_turn(text, cost + reserve)
    turns: list[TranscriptTurn] = [turn]
    parts: dict[str, Part] = {turn.turn_id: Part(turn, -1, None, maskable=False, siblings=1)}
    pending: list[str] = []
    names: dict[str, str] = {}  # the open tool_use blocks' tool names, by id
    tool_names: dict[str, str] = {}
    opener, key = -1, ""
    previous: str | None = None
    for index, message in enumerate(items):
        role = message.get("role")
        if role not in ("user", "assistant"):
            hint = " (pass the system prompt as system=)" if role == "system" else ""
            raise fail(FORMAT, index, f"unknown role {role!r:.40}{hint}", role=repr(role)[:40])
        if previous is None and role != "user":
            raise fail(FORMAT, index, "the conversation must open with a user message")
        if role == previous:
            raise fail(
                FORMAT,
                index,
                f"two {role} messages in a row; merge them first (strict alternation)",
            )
        previous = role
        turn_id = f"m{index}"
        content = message.get("content")
        if role == "assistant":
            text, cost, names, thinking = _assistant(pricer, index, content)
            if thinking:
                cost += reserve
                reserved += reserve
            turn = TranscriptTurn(
                turn_id, Role.ASSISTANT, text, pricer.framing + cost, turn_id if names else None
            )
            turns.append(turn)
            parts[turn_id] = Part(turn, index, None, maskable=False, siblings=1)
            pending, opener, key = list(names), index, turn_id
            continue
        answered = _user(pricer, index, content, turn_id, key if pending else None, turns, parts)
        for call_id, result_id in answered.items():
            tool_names[result_id] = names[call_id]
        missing = [call_id for call_id in pending if call_id not in answered]
        if missing:
            raise fail(
                FORMAT,
                opener,
                f"tool_use {missing[0]!r:.60} has no tool_result in the next message",
                tool_use_ids=missing[:10],
            )
        pending = []
    if pending:
        raise fail(
            FORMAT,
            opener,
            f"tool_use {pending[0]!r:.60} has no tool_result in the next message",
            tool_use_ids=pending[:10],
        )
    sent = read_marks(FORMAT, items, turns, parts, tool_names, priority=priority, pin=pin)
    binding = Binding(FORMAT, sent, system, parts, pricer.estimator)
    return Transcript(tuple(turns)), binding, reserved


def _user(  # noqa: PLR0917 - one private call site
    pricer: Pricer,
    index: int,
    content: object,
    turn_id: str,
    key: str | None,
    turns: list[TranscriptTurn],
    parts: dict[str, Part],
) -> dict[str, str]:
    """Add the turns of user message ``index``; return the ids it answers, to their turns' ids."""
    if not isinstance(content, list | tuple):
        text, cost = _blocks(pricer, index, content, "content")
        turn = TranscriptTurn(turn_id, Role.USER, text, pricer.framing + cost)
        turns.append(turn)
        parts[turn_id] = Part(turn, index, None, maskable=False, siblings=1)
        return {}
    results: list[tuple[int, str, str, int]] = []
    answered: dict[str, str] = {}
    rest: list[int] = []
    for position, value in enumerate(content):
        where = f"content[{position}]"
        block = check_dict(FORMAT, index, value, where)
        if block.get("type") != "tool_result":
            rest.append(position)
            continue
        call_id = text_field(FORMAT, index, block.get("tool_use_id"), f"{where}.tool_use_id")
        if key is None or call_id in answered:
            raise fail(
                FORMAT,
                index,
                f"tool_result for {call_id!r:.60} has no matching tool_use in the message before "
                "it (or answers it twice)",
                tool_use_id=call_id,
            )
        text, cost = _blocks(pricer, index, block.get("content"), f"{where}.content")
        answered[call_id] = turn_id if not results else f"{turn_id}.{position}"
        results.append((position, call_id, text, cost))
    if not results:
        text, cost = _blocks(pricer, index, content, "content")
        turn = TranscriptTurn(turn_id, Role.USER, text, pricer.framing + cost)
        turns.append(turn)
        parts[turn_id] = Part(turn, index, None, maskable=False, siblings=1)
        return answered
    siblings = len(results) + (1 if rest else 0)
    for number, (position, call_id, text, cost) in enumerate(results):
        part_id = answered[call_id]
        framing = pricer.framing if number == 0 else 0
        turn = TranscriptTurn(part_id, Role.TOOL, text, framing + cost, key)
        turns.append(turn)
        parts[part_id] = Part(turn, index, position, maskable=True, siblings=siblings)
    if rest:
        texts: list[str] = []
        cost = 0
        for position in rest:
            text, price = _block(pricer, index, content[position], f"content[{position}]")
            cost += price
            if text:
                texts.append(text)
        part_id = f"{turn_id}.{rest[0]}"
        turn = TranscriptTurn(part_id, Role.USER, joined(texts), cost, key)
        turns.append(turn)
        parts[part_id] = Part(turn, index, rest[0], maskable=False, siblings=siblings)
    return answered


def _assistant(
    pricer: Pricer, index: int, content: object
) -> tuple[str, int, dict[str, str], bool]:
    """Render and price an assistant message; return its tool names by tool_use id, thinking."""
    text, cost = _blocks(pricer, index, content, "content")
    ids: dict[str, str] = {}
    thinking = False
    if isinstance(content, list | tuple):
        for position, block in enumerate(content):
            kind = block.get("type")
            if kind == "tool_use":
                where = f"content[{position}].id"
                call_id = text_field(FORMAT, index, block.get("id"), where)
                if call_id in ids:
                    raise fail(FORMAT, index, f"{where} repeats the tool_use id {call_id!r:.60}")
                ids[call_id] = block["name"]  # a string: _blocks checked it
            elif kind in _THINKING:
                thinking = True
    return text, cost, ids, thinking


def _blocks(pricer: Pricer, index: int, content: object, where: str) -> tuple[str, int]:
    """Render and price content that is a string, a list of blocks, or absent."""
    return render_content(
        FORMAT,
        pricer,
        index,
        content,
        where,
        partial(_block, pricer, index),
        skip_empty=True,
    )


def _block(pricer: Pricer, index: int, value: object, where: str) -> tuple[str, int]:  # noqa: PLR0911 - one branch per block type reads best
    """Render (for summarizers) and price one content block."""
    block = check_dict(FORMAT, index, value, where)
    kind = block.get("type")
    if kind == "text":
        text = text_field(FORMAT, index, block.get("text"), f"{where}.text")
        return text, pricer.text(text)
    if kind == "thinking":
        thought = text_field(FORMAT, index, block.get("thinking"), f"{where}.thinking")
        return "", pricer.text(thought)
    if kind == "redacted_thinking":
        data = text_field(FORMAT, index, block.get("data"), f"{where}.data")
        return "", pricer.text(data)
    if kind == "tool_use":
        name = text_field(FORMAT, index, block.get("name"), f"{where}.name")
        arguments = as_json(block.get("input"))
        return (
            f"[tool call {name} {arguments}]",
            pricer.framing + pricer.text(name) + pricer.text(arguments),
        )
    if kind == "tool_result":
        return _blocks(pricer, index, block.get("content"), f"{where}.content")
    if kind == "image":
        return "[image]", _image_tokens(block.get("source"))
    if kind == "document":
        return "[document]", _document_tokens(pricer, block.get("source"))
    if isinstance(kind, str):
        return f"[{kind}]", pricer.text(as_json(block))
    raise fail(FORMAT, index, f"{where} has no string type")


def _image_tokens(source: object) -> int:
    """Price an image at ``width * height / 750`` after scaling its long edge to 1568 px.

    At most ``IMAGE_MAX_TOKENS``, which is also the price when the size cannot be read from a
    PNG or GIF header.
    """
    data = source.get("data") if isinstance(source, dict) else None
    size = image_size(data) if isinstance(data, str) else None
    if size is None:
        return IMAGE_MAX_TOKENS
    width, height = size
    edge = max(width, height)
    if edge > _IMAGE_MAX_EDGE:
        pixels, scale = width * height * _IMAGE_MAX_EDGE * _IMAGE_MAX_EDGE, edge * edge
    else:
        pixels, scale = width * height, 1
    return min(-(-pixels // (scale * IMAGE_PIXELS_PER_TOKEN)), IMAGE_MAX_TOKENS)


def _document_tokens(pricer: Pricer, source: object) -> int:
    """A plain-text document costs its text; any other source costs ``FILE_TOKENS``."""
    if isinstance(source, dict):
        if source.get("type") == "text" and isinstance(source.get("data"), str):
            return pricer.text(source["data"])
        if source.get("type") == "content" and isinstance(source.get("content"), str):
            return pricer.text(source["content"])
    return FILE_TOKENS


def _alternate(built: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Restore user-first strict alternation by merging neighbours, or a filler between them."""
    out: list[dict[str, Any]] = []
    for message in built:
        role = message["role"]
        if not out or out[-1]["role"] == role:
            if role == "assistant" and (not out or _thinks(message)):
                out.append({"role": "user", "content": FILLER_TEXT})
            elif out:
                out[-1] = _merge(out[-1], message)
                continue
        out.append(message)
    return out


def _thinks(message: Mapping[str, Any]) -> bool:
    content = message.get("content")
    return isinstance(content, list | tuple) and any(
        isinstance(block, dict) and block.get("type") in _THINKING for block in content
    )


def _merge(first: Mapping[str, Any], second: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(first)
    merged["content"] = _as_blocks(first.get("content")) + _as_blocks(second.get("content"))
    return merged


def _as_blocks(content: object) -> list[Any]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    return list(content) if isinstance(content, list | tuple) else []
