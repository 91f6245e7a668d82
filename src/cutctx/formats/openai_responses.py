"""OpenAI Responses API input items to and from cutctx transcripts.

One turn per item, with ids ``m0``, ``m1``, ... by position. ``message`` items map by role
(``system`` and ``developer`` are untouchable ``SYSTEM`` turns, as is an
``additional_tools`` item). Items that must travel together
share one ``tool_call_id`` (the turn id of the group's first item): a call and its output (by
``call_id``), a run of consecutive calls with all their outputs, an ``mcp_approval_request`` and
its response, a ``reasoning`` item and the item it precedes, and every item sharing the
``call_id`` of an item type cutctx does not know. Hosted-tool items are units of their own; a
``compaction`` item is pinned. Only an output whose body is its ``output`` text is ever masked
(a ``TOOL`` turn); everything else is kept or removed whole, never edited. See
``docs/formats/openai_responses.md`` for the rules and prices.

>>> transcript, binding = to_transcript([{"role": "user", "content": "hi"}])
>>> transcript.turn_ids(), from_transcript(transcript, binding)
(('m0',), [{'role': 'user', 'content': 'hi'}])
"""

from __future__ import annotations

import dataclasses
from functools import partial
from typing import TYPE_CHECKING, Any, Final, cast

from cutctx._core.values import Role, Transcript, TranscriptTurn
from cutctx.formats._common import (
    Binding,
    Message,
    Part,
    Pricer,
    collect,
    counting,
    excerpt_content,
    fail,
    field_of,
    restore,
    stub_content,
    summary_text,
    text_field,
)
from cutctx.formats._format import Format, Presentation, Rendered, WindowHooks
from cutctx.formats._reader import Out, Reader, ReaderState, Scanned, StreamReader
from cutctx.formats._responses_items import (
    FORMAT,
    MASKABLE,
    TEXT_PARTS,
    as_text,
    call_item,
    generated_image,
    kind_of,
    message_item,
    output_item,
    part_of,
    reasoning_item,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from cutctx._core.protocols import TokenEstimator
    from cutctx._core.report import CompactedTranscript

__all__ = [
    "FORMAT",
    "OPENAI_RESPONSES",
    "count_tokens",
    "from_transcript",
    "to_transcript",
]


_PAIRS: Final = {  # a call's item type -> the type of the output that answers it by call_id
    "function_call": "function_call_output",
    "custom_tool_call": "custom_tool_call_output",
    "computer_call": "computer_call_output",
    "local_shell_call": "local_shell_call_output",
    "shell_call": "shell_call_output",
    "apply_patch_call": "apply_patch_call_output",
}
_CALL_OF: Final = {output: call for call, output in _PAIRS.items()}
# Hosted-tool and reference items: each a unit of its own, kept or removed whole.
_HOSTED: Final = frozenset(
    {
        "web_search_call",
        "file_search_call",
        "code_interpreter_call",
        "image_generation_call",
        "mcp_call",
        "mcp_list_tools",
        "item_reference",
    }
)


class _OpenAIResponses(Format[Message], WindowHooks[Message], Presentation):
    """The Responses API input-items format (``OPENAI_RESPONSES``)."""

    __slots__ = ()

    @property
    def name(self) -> str:
        return FORMAT

    def reader(
        self,
        *,
        estimator: TokenEstimator | None = None,
        priority: Callable[[int, dict[str, Any]], int] | None = None,
        pin: Callable[[int, dict[str, Any]], bool] | None = None,
    ) -> Reader[Message]:
        return _ResponsesReader(self.pricer(estimator), priority=priority, pin=pin)

    @property
    def system_field(self) -> str | None:
        return "instructions"

    def tool_definition(
        self, name: str, description: str, parameters: Mapping[str, Any]
    ) -> dict[str, Any]:
        return {
            "type": "function",
            "name": name,
            "description": description,
            "parameters": dict(parameters),
        }

    def pieces(
        self, message: Mapping[str, Any], *, estimator: TokenEstimator, tokens: int
    ) -> tuple[list[tuple[str, int]], int]:
        pricer = self.pricer(estimator)
        kind = message.get("type")
        if kind in ("function_call", "custom_tool_call"):
            argument = message["arguments"] if kind == "function_call" else message["input"]
            return [(message["name"], pricer.text(message["name"]) + pricer.text(argument))], 0
        if kind == "reasoning":
            return [], tokens  # the whole item is reasoning
        return [], 0

    def settled(self, message: Message) -> bool:
        return _settled(message)

    def render(
        self, view: Transcript | CompactedTranscript, binding: Binding[Message]
    ) -> Rendered[Message]:
        out: list[dict[str, Any]] = []
        costs: list[int] = []
        for piece in collect(FORMAT, view, binding):
            costs.append(piece.cost)
            if piece.index is None:
                out.append({"type": "message", "role": "user", "content": summary_text(piece.text)})
                continue
            item = binding.messages[piece.index]
            if piece.masked and item.get("type", "message") == "message":  # an observation
                item = dict(item)
                item["content"] = stub_content(
                    item.get("content"), piece.masked[None], "input_text"
                )
            elif piece.masked:
                item = dict(item)
                stub = piece.masked[None]
                if None in piece.excerpts:  # one input_text part; images and files stay
                    read = partial(part_of, Pricer.of(FORMAT, binding.estimator), piece.index)
                    item["output"] = excerpt_content(
                        item.get("output"), stub, read, TEXT_PARTS, "input_text"
                    )
                else:
                    item["output"] = stub_content(item.get("output"), stub, "input_text")
            out.append(item)
        return Rendered(restore(binding, out), costs)

    def count_tokens(
        self,
        messages: Sequence[Message],
        *,
        estimator: TokenEstimator | None = None,
        system: object = None,
    ) -> int:
        estimator = counting(estimator)
        pricer = Pricer.of(FORMAT, estimator)
        head = self.head(system, estimator=pricer.estimator)
        read = _build(messages, pricer.estimator, strict=False)
        return sum(turn.token_estimate for turn in (*head, *read.turns))


OPENAI_RESPONSES: Final[Format[Message]] = _OpenAIResponses()
"""The Responses API ``Format``; ``format="openai_responses"`` names it.

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
    """Map Responses API input items onto a transcript and the binding to map it back.

    ``system``, if given, stands for the request's ``instructions``: a pinned turn that is
    priced but never emitted (``binding.system`` returns it unchanged). An item's
    ``"sticky": true`` (or a true ``pin(index, item)``) pins its turn and its ``"priority": n``
    (or ``priority(index, item)``) becomes the turn's ``cutctx.priority``; neither key is sent
    on. An output's turn names its call's tool (or the call's type) in ``cutctx.tool_name``.

    Raises:
        ValidationError: naming the item ``index`` in ``details`` for a non-list, an item that
            is not an object, an unknown role, an item with no type, an output (or approval
            response) whose call is missing or comes after it, a ``call_id`` used by two calls, a
            call without its output, a user message with no content, or a field of the wrong
            type.

    .. versionadded:: 0.1.0
    """
    made = OPENAI_RESPONSES.to_transcript(
        messages, estimator=estimator, system=system, priority=priority, pin=pin
    )
    return cast("tuple[Transcript, Binding[M]]", made)


def _build(messages: Sequence[Message], estimator: object, *, strict: bool) -> Scanned[Message]:
    """Read a whole history; without ``strict`` only field shapes (``count_tokens``)."""
    return _ResponsesReader(Pricer.of(FORMAT, estimator), strict=strict).read(messages, final=True)


class _ResponsesReader(StreamReader[Message]):
    """Reads input items and joins the ones that must travel together, chunk by chunk.

    Joined items share a key, the turn id of their group's first item: a call and its output, a
    run of consecutive calls, an approval request and its response, a reasoning item and the
    item after it, and every item carrying one unknown item's ``call_id``. A call, an approval
    request and an unknown item carrying a ``call_id`` are keyed from the start (a group of one
    until something joins it), so no item read later changes an earlier key. Trailing reasoning
    items wait for the next chunk (``settled``).

    State: ``count``; ``calls`` (by ``call_id``: its type, index, group, tool name and whether
    it is answered), ``approvals`` (by request id: its group and whether it is answered),
    ``carriers`` (by ``call_id``: the group of the first item that carried it) and ``batch``
    (the group of the current run of calls, or ``None``).
    """

    __slots__ = ("waiting",)

    fmt = FORMAT

    def __init__(
        self,
        pricer: Pricer,
        *,
        strict: bool = True,
        priority: Callable[[int, dict[str, Any]], int] | None = None,
        pin: Callable[[int, dict[str, Any]], bool] | None = None,
    ) -> None:
        # reasoning turns waiting, within one chunk, for the item they precede
        self.waiting: list[tuple[TranscriptTurn, Part]] = []
        super().__init__(pricer, strict=strict, settled=_settled, priority=priority, pin=pin)

    def initial(self) -> ReaderState:
        return {"count": 0, "calls": {}, "approvals": {}, "carriers": {}, "batch": None}

    def message(self, state: ReaderState, index: int, item: dict[str, Any], out: Out) -> None:  # noqa: PLR0912, PLR0915 - one branch per item family
        pricer, strict = self.pricer, self.strict
        kind = kind_of(index, item)
        if kind == "reasoning":
            text, cost = reasoning_item(pricer, index, item)
            turn = TranscriptTurn(f"m{index}", Role.ASSISTANT, text, pricer.framing + cost)
            self.waiting.append((turn, Part(turn, index, None, maskable=False, siblings=1)))
            if out.last:  # trailing reasoning items travel together
                self._release(out, None if len(self.waiting) == 1 else self.waiting[0][1].index)
            return
        batch, state["batch"] = state["batch"], None
        joins: list[int] = []  # the groups this item joins
        opener = False  # keyed from the start: something may join it later
        register: list[tuple[str, str, object]] = []  # entries to record once its group is known
        pinned = False
        role = Role.ASSISTANT
        if kind == "message":
            role, text, cost = message_item(pricer, index, item, strict=strict)
        elif kind in _PAIRS:
            call_id = text_field(FORMAT, index, item.get("call_id"), "call_id")
            calls = state["calls"]
            if call_id in calls:
                if strict:
                    raise fail(
                        FORMAT,
                        index,
                        f"call_id {call_id!r:.60} is used by two calls",
                        call_id=call_id,
                        first_index=calls[call_id][1],
                    )
                joins.append(calls[call_id][2])
            carried = state["carriers"].get(call_id)
            if carried is not None:
                if strict and call_id not in calls:
                    raise fail(
                        FORMAT,
                        index,
                        f"call_id {call_id!r:.60} was carried by an earlier item before its call",
                        call_id=call_id,
                    )
                joins.append(carried)
            if batch is not None:
                joins.append(batch)
            text, cost, name = call_item(pricer, index, item, kind)
            opener = True
            if call_id not in calls:
                register.append(("calls", call_id, [kind, index, None, name, False]))
            register.append(("carriers", call_id, None))
            register.append(("batch", "", None))
        elif kind in _CALL_OF:
            role = Role.TOOL if kind in MASKABLE else Role.USER
            # local_shell_call_output names its call by ``id`` in the API reference.
            field = "call_id" if "call_id" in item or kind != "local_shell_call_output" else "id"
            call_id = text_field(FORMAT, index, item.get(field), field)
            call = state["calls"].get(call_id)
            if call is None or call[0] != _CALL_OF[kind] or call[4]:
                if strict:
                    raise fail(
                        FORMAT,
                        index,
                        f"{kind} answers call_id {call_id!r:.60}, which no earlier "
                        f"{_CALL_OF[kind]} item made (or which is already answered)",
                        call_id=call_id,
                    )
            else:
                call[4] = True
                joins.append(call[2])
                out.tool_names[f"m{index}"] = call[3]
            text, cost = output_item(pricer, index, item, kind)
        elif kind == "mcp_approval_request":
            request = text_field(FORMAT, index, item.get("id"), "id")
            approvals = state["approvals"]
            if request in approvals:
                if strict:
                    raise fail(FORMAT, index, f"approval request id {request!r:.60} is used twice")
            else:
                register.append(("approvals", request, None))
            opener = True
            text, cost = as_text(pricer, kind, item)
        elif kind == "mcp_approval_response":
            role = Role.USER
            request = text_field(
                FORMAT, index, item.get("approval_request_id"), "approval_request_id"
            )
            approval = state["approvals"].get(request)
            if approval is None or approval[1]:
                if strict:
                    raise fail(
                        FORMAT,
                        index,
                        f"mcp_approval_response answers {request!r:.60}, which no earlier "
                        "mcp_approval_request made (or which is already answered)",
                        approval_request_id=request,
                    )
            else:
                approval[1] = True
                joins.append(approval[0])
            text, cost = as_text(pricer, kind, item)
        elif kind == "compaction":
            pinned = True
            content = text_field(FORMAT, index, item.get("encrypted_content"), "encrypted_content")
            text, cost = "[compaction]", pricer.text(content)
        elif kind == "additional_tools":  # tools offered from here on: kept, like a system message
            role = Role.SYSTEM
            text, cost = as_text(pricer, kind, item)
        elif kind == "image_generation_call":
            text, cost = "[image_generation_call]", generated_image(index, item)
        else:  # hosted items and types cutctx does not know: priced whole, never edited
            text, cost = as_text(pricer, kind, item)
            carrier = item.get("call_id")
            if kind not in _HOSTED and isinstance(carrier, str):
                carried = state["carriers"].get(carrier)
                if carried is None:
                    opener = True
                    register.append(("carriers", carrier, None))
                else:
                    joins.append(carried)
            elif kind == "mcp_call":
                approval = state["approvals"].get(item.get("approval_request_id"))
                if approval is not None:
                    joins.append(approval[0])
        groups = set(joins)
        if len(groups) > 1 and strict:
            raise fail(FORMAT, index, "the item joins two exchanges that an earlier item began")
        waiting = self.waiting
        root = min([*groups, *(part.index for _, part in waiting[:1]), index])  # type: ignore[type-var]
        for table, name, value in register:
            if table == "calls":
                assert isinstance(value, list)  # noqa: S101 - made above
                value[2] = root
                state["calls"][name] = value
            elif table == "approvals":
                state["approvals"][name] = [root, False]
            elif table == "carriers":
                state["carriers"].setdefault(name, root)
            else:
                state["batch"] = root
        keyed = bool(groups) or bool(waiting) or opener
        key = f"m{root}" if keyed else None
        self._release(out, root if waiting else None)
        turn = TranscriptTurn(f"m{index}", role, text, pricer.framing + cost, key, pinned=pinned)
        out.add(turn, Part(turn, index, None, maskable=role is Role.TOOL, siblings=1))

    def _release(self, out: Out, root: int | None) -> None:
        """Add the waiting reasoning turns, keyed by the group ``root`` they joined."""
        for turn, part in self.waiting:
            keyed = turn if root is None else dataclasses.replace(turn, tool_call_id=f"m{root}")
            out.add(keyed, dataclasses.replace(part, turn=keyed))
        self.waiting.clear()

    def read(self, messages: Sequence[Message], *, final: bool = False) -> Scanned[Message]:
        self.waiting.clear()
        try:
            return super().read(messages, final=final)
        finally:
            self.waiting.clear()

    def finish(self, state: ReaderState) -> None:
        if self.strict:
            for call_id, (_, index, _, _, answered) in state["calls"].items():
                if not answered:
                    raise fail(
                        FORMAT,
                        index,
                        f"call_id {call_id!r:.60} has no output item",
                        call_id=call_id,
                    )


def _settled(message: object) -> bool:
    """Whether an item keeps its turn when more items come: a reasoning item joins the next."""
    return field_of(message, "type") != "reasoning"


def from_transcript[M: Message](
    view: Transcript | CompactedTranscript, binding: Binding[M]
) -> list[M]:
    """Rebuild Responses input items from a (compacted) view of ``binding``'s transcript.

    Kept items are the caller's own dicts, in order; a masked output is a copy whose ``output``
    is the stub (a string, or one ``input_text`` part if it was a list); a summary is a user
    ``message`` item opening with ``SUMMARY_LABEL``. Request-level ``system=`` is never
    emitted.

    Raises:
        ValidationError: for a binding of another format or a view it cannot have produced.
    """
    binding_ = cast("Binding[Message]", binding)
    return cast("list[M]", OPENAI_RESPONSES.from_transcript(view, binding_))


def count_tokens(
    messages: Sequence[Message],
    *,
    estimator: TokenEstimator | None = None,
    system: str | Sequence[Mapping[str, Any]] | None = None,
) -> int:
    """Return what the items (and ``system``) cost under this format's pricing rules.

    Counting needs no valid request: a partial history (a call still waiting for its output, an
    output whose call is elsewhere) is priced item by item.

    >>> count_tokens([{"role": "user", "content": "twelve chars"}])
    3

    Raises:
        ValidationError: for a field of the wrong type, as ``to_transcript`` does.
    """
    return OPENAI_RESPONSES.count_tokens(messages, estimator=estimator, system=system)
