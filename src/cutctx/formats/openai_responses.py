"""OpenAI Responses API input items to and from cutctx transcripts.

One turn per item, with ids ``m0``, ``m1``, ... by position. ``message`` items map by role
(``system`` and ``developer`` are untouchable ``SYSTEM`` turns); ``function_call`` and
``custom_tool_call`` items are ``ASSISTANT`` turns, their outputs ``TOOL`` turns joined to them
by ``call_id``; consecutive calls (a parallel batch) form one exchange with all their outputs; a
``reasoning`` item joins the exchange of the item it precedes, so it is never sent without it.
An exchange's ``tool_call_id`` is the turn id of its first item. Only an output's body is ever
masked. See ``docs/formats/openai_responses.md`` for the pricing rules.

>>> transcript, binding = to_transcript([{"role": "user", "content": "hi"}])
>>> transcript.turn_ids(), from_transcript(transcript, binding)
(('m0',), [{'role': 'user', 'content': 'hi'}])
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any, Final

from cutctx._core.values import Role, Transcript, TranscriptTurn
from cutctx.formats._common import (
    AUDIO_TOKENS,
    FILE_TOKENS,
    Binding,
    Part,
    Pricer,
    as_json,
    check_dict,
    check_messages,
    collect,
    fail,
    joined,
    openai_image_tokens,
    read_marks,
    render_content,
    stub_content,
    system_text,
    system_turn,
    text_field,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from cutctx._core.protocols import TokenEstimator
    from cutctx._core.report import CompactedTranscript

__all__ = ["FORMAT", "count_tokens", "from_transcript", "to_transcript"]

FORMAT: Final = "openai_responses"

_ROLES: Final = {
    "system": Role.SYSTEM,
    "developer": Role.SYSTEM,
    "user": Role.USER,
    "assistant": Role.ASSISTANT,
}
_CALLS: Final = {"function_call": "arguments", "custom_tool_call": "input"}
_OUTPUTS: Final = {
    "function_call_output": "function_call",
    "custom_tool_call_output": "custom_tool_call",
}


def to_transcript(
    messages: list[dict[str, Any]],
    *,
    estimator: TokenEstimator | None = None,
    system: str | list[dict[str, Any]] | None = None,
    priority: Callable[[int, dict[str, Any]], int] | None = None,
    pin: Callable[[int, dict[str, Any]], bool] | None = None,
) -> tuple[Transcript, Binding]:
    """Map Responses API input items onto a transcript and the binding to map it back.

    ``system``, if given, stands for the request's ``instructions``: a pinned turn that is
    priced but never emitted (``binding.system`` returns it unchanged). An item's
    ``"sticky": true`` (or a true ``pin(index, item)``) pins its turn and its ``"priority": n``
    (or ``priority(index, item)``) becomes the turn's ``cutctx.priority``; neither key is sent
    on. An output's turn names its call's tool in ``cutctx.tool_name``.

    Raises:
        ValidationError: naming the item ``index`` in ``details`` for a non-list, an item that
            is not an object, an unknown role or item type, an output whose call is missing or
            comes before it, a call without its output, or a field of the wrong type.

    .. versionchanged:: 0.1.0
       ``sticky`` and ``priority`` keys, the ``priority`` and ``pin`` callables, tool names.
    """
    pricer = Pricer.of(FORMAT, estimator)
    items = check_messages(FORMAT, messages)
    scan = _Scan(pricer)
    for index, item in enumerate(items):
        scan.add(index, item)
    scan.finish()
    turns: list[TranscriptTurn] = []
    parts: dict[str, Part] = {}
    head = system_text(FORMAT, system, pricer)
    if head is not None:
        turn = system_turn(*head)
        turns.append(turn)
        parts[turn.turn_id] = Part(turn, -1, None, maskable=False, siblings=1)
    for index, (role, text, cost) in enumerate(scan.rows):
        turn = TranscriptTurn(f"m{index}", role, text, pricer.framing + cost, scan.keys[index])
        turns.append(turn)
        parts[turn.turn_id] = Part(turn, index, None, maskable=role is Role.TOOL, siblings=1)
    sent = read_marks(FORMAT, items, turns, parts, scan.tool_names, priority=priority, pin=pin)
    return Transcript(tuple(turns)), Binding(FORMAT, sent, system, parts, pricer.estimator)


class _Scan:
    """Reads items in order, pairing calls with outputs and reasoning with what follows it."""

    __slots__ = ("answered", "batch", "calls", "keys", "pricer", "rows", "tool_names", "waiting")

    def __init__(self, pricer: Pricer) -> None:
        self.pricer = pricer
        self.rows: list[tuple[Role, str, int]] = []
        self.keys: list[str | None] = []
        # call_id -> (key, call type, index, tool name)
        self.calls: dict[str, tuple[str, str, int, str]] = {}
        self.tool_names: dict[str, str] = {}  # an output's turn id -> its call's tool name
        self.answered: set[str] = set()
        self.waiting: list[int] = []  # reasoning items waiting for the item they precede
        self.batch: str | None = None  # the key of the current run of calls

    def add(self, index: int, item: dict[str, Any]) -> None:
        """Read item ``index``; a reasoning item's key is settled by the item after it."""
        kind = item.get("type", "message" if "role" in item else None)
        if kind == "reasoning":
            text, cost = _reasoning(self.pricer, index, item)
            self.rows.append((Role.ASSISTANT, text, cost))
            self.keys.append(None)
            self.waiting.append(index)
            return
        first = f"m{self.waiting[0]}" if self.waiting else f"m{index}"
        if kind == "message":
            role, text, cost = _message(self.pricer, index, item)
            self.batch = None
            key = first if self.waiting else None
        elif kind in _CALLS:
            role = Role.ASSISTANT
            text, cost = self._call(index, item, kind, first)
            key = self.batch
        elif kind in _OUTPUTS:
            role = Role.TOOL
            key = self._output(index, item, kind)
            text, cost = _parts(self.pricer, index, item.get("output"), "output")
        else:
            raise fail(FORMAT, index, f"unknown item type {kind!r:.40}", type=repr(kind)[:40])
        for position in self.waiting:
            self.keys[position] = key
        self.waiting.clear()
        self.rows.append((role, text, cost))
        self.keys.append(key)

    def _call(self, index: int, item: dict[str, Any], kind: str, first: str) -> tuple[str, int]:
        call_id = text_field(FORMAT, index, item.get("call_id"), "call_id")
        if call_id in self.calls:
            raise fail(FORMAT, index, f"call_id {call_id!r:.60} is used twice", call_id=call_id)
        name = text_field(FORMAT, index, item.get("name"), "name")
        argument = _CALLS[kind]
        arguments = text_field(FORMAT, index, item.get(argument), argument)
        self.batch = self.batch or first
        self.calls[call_id] = (self.batch, kind, index, name)
        pricer = self.pricer
        return f"[tool call {name} {arguments}]", pricer.text(name) + pricer.text(arguments)

    def _output(self, index: int, item: dict[str, Any], kind: str) -> str:
        call_id = text_field(FORMAT, index, item.get("call_id"), "call_id")
        call = self.calls.get(call_id)
        if call is None or call[1] != _OUTPUTS[kind] or call_id in self.answered:
            raise fail(
                FORMAT,
                index,
                f"{kind} answers call_id {call_id!r:.60}, which no earlier "
                f"{_OUTPUTS[kind]} item made (or which is already answered)",
                call_id=call_id,
            )
        self.answered.add(call_id)
        self.tool_names[f"m{index}"] = call[3]
        self.batch = None
        return call[0]

    def finish(self) -> None:
        """Tie trailing reasoning items together; raise for a call without its output."""
        if len(self.waiting) > 1:
            for position in self.waiting:
                self.keys[position] = f"m{self.waiting[0]}"
        for call_id, (_, _, index, _) in self.calls.items():
            if call_id not in self.answered:
                raise fail(
                    FORMAT, index, f"call_id {call_id!r:.60} has no output item", call_id=call_id
                )


def from_transcript(
    view: Transcript | CompactedTranscript, binding: Binding
) -> list[dict[str, Any]]:
    """Rebuild Responses input items from a (compacted) view of ``binding``'s transcript.

    Kept items are the caller's own dicts, in order; a masked output is a copy whose ``output``
    is the stub (a string, or one ``input_text`` part if it was a list); a summary is an
    assistant ``message`` item. Request-level ``system=`` is never emitted.

    Raises:
        ValidationError: for a binding of another format or a view it cannot have produced.
    """
    out: list[dict[str, Any]] = []
    for piece in collect(FORMAT, view, binding):
        if piece.index < 0:
            out.append({"type": "message", "role": "assistant", "content": piece.text})
            continue
        item = binding.messages[piece.index]
        if piece.masked:
            item = dict(item)
            item["output"] = stub_content(item.get("output"), piece.masked[None], "input_text")
        out.append(item)
    return out


def count_tokens(
    messages: list[dict[str, Any]],
    *,
    estimator: TokenEstimator | None = None,
    system: str | list[dict[str, Any]] | None = None,
) -> int:
    """Return what the items (and ``system``) cost under this format's pricing rules.

    >>> count_tokens([{"role": "user", "content": "twelve chars"}])
    3

    Raises:
        ValidationError: as ``to_transcript`` does.
    """
    return to_transcript(messages, estimator=estimator, system=system)[0].token_estimate()


def _message(pricer: Pricer, index: int, item: dict[str, Any]) -> tuple[Role, str, int]:
    role = item.get("role")
    kind = _ROLES.get(role) if isinstance(role, str) else None
    if kind is None:
        raise fail(FORMAT, index, f"unknown role {role!r:.40}", role=repr(role)[:40])
    text, cost = _parts(pricer, index, item.get("content"), "content")
    return kind, text, cost


def _reasoning(pricer: Pricer, index: int, item: dict[str, Any]) -> tuple[str, int]:
    """Price a reasoning item by its summary and content texts.

    ``encrypted_content`` is opaque and not priced.
    """
    texts: list[str] = []
    for field in ("summary", "content"):
        blocks = item.get(field)
        if blocks is None:
            continue
        if not isinstance(blocks, list | tuple):
            raise fail(FORMAT, index, f"{field} must be a list, got {type(blocks).__name__}")
        for position, value in enumerate(blocks):
            block = check_dict(FORMAT, index, value, f"{field}[{position}]")
            texts.append(text_field(FORMAT, index, block.get("text"), f"{field}[{position}].text"))
    return joined(texts), sum(pricer.text(text) for text in texts)


def _parts(pricer: Pricer, index: int, content: object, name: str) -> tuple[str, int]:
    """Render and price a message's ``content`` or an output's ``output``."""
    return render_content(
        FORMAT,
        pricer,
        index,
        content,
        name,
        partial(_part, pricer, index),
    )


def _part(pricer: Pricer, index: int, value: object, where: str) -> tuple[str, int]:
    """Render and price one part: text, refusal, image, audio, file or another type."""
    part = check_dict(FORMAT, index, value, where)
    kind = part.get("type")
    if kind in ("input_text", "output_text", "refusal"):
        field = "refusal" if kind == "refusal" else "text"
        text = text_field(FORMAT, index, part.get(field), f"{where}.{field}")
        return text, pricer.text(text)
    if kind == "input_image":
        return "[image]", openai_image_tokens(part.get("image_url"), part.get("detail"))
    if kind == "input_audio":
        return "[audio]", AUDIO_TOKENS
    if kind == "input_file":
        return "[file]", FILE_TOKENS
    if isinstance(kind, str):
        return f"[{kind}]", pricer.text(as_json(part))
    raise fail(FORMAT, index, f"{where} has no string type")
