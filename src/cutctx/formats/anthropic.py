"""Anthropic Messages API conversations to and from cutctx transcripts.

The top-level ``system`` (a string or text blocks) is the first turn, ``system``: pinned, priced,
never emitted and returned unchanged as ``binding.system``. Each message is one turn ``m<i>``,
except a user message carrying ``tool_result`` blocks: each result is its own ``TOOL`` turn (the
first ``m<i>``, the others ``m<i>.<block>``) and its other blocks one ``USER`` turn
``m<i>.<block>``, so each result can be masked on its own. The assistant turn with ``tool_use``
blocks and every turn of the user message answering it share one ``tool_call_id`` (the turn id
of the assistant message): one exchange. ``thinking`` blocks, and server or MCP tool uses with
their results, live inside their assistant turn, so they are kept or removed with it and never
edited; a ``compaction`` block pins its message. Unknown blocks are carried through unchanged.
A ``system`` message inside ``messages`` is an untouchable ``SYSTEM`` turn, sent where it stood.

The input must be a valid request (user first, every ``tool_use`` answered at the head of the
next message). A run of messages of one role is what the API makes of it, one message: priced
with one framing by ``count_tokens`` (the estimates keep one on each message, a reserve), its
results first; ``from_transcript`` keeps the output valid by the rules of ``_anthropic_order``
(merging neighbours compaction made, and ``FILLER_TEXT`` where a merge is not allowed), whose
filler price is reserved in the estimates. See ``docs/formats/anthropic.md`` for the rules.

>>> transcript, binding = to_transcript([{"role": "user", "content": "hi"}], system="Be brief.")
>>> transcript.turn_ids(), from_transcript(transcript, binding), binding.system
(('system', 'm0'), [{'role': 'user', 'content': 'hi'}], 'Be brief.')
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any, Final, cast

from cutctx._core.values import Role, Transcript, TranscriptTurn
from cutctx.formats._anthropic_blocks import FORMAT, USES, block_of, blocks, excerpted
from cutctx.formats._anthropic_order import (
    FILLER_TEXT,
    THINKING,
    alternate,
    check_order,
    check_unique,
    place_breakpoint,
)
from cutctx.formats._cache_marks import with_cache_control, without_cache_control
from cutctx.formats._common import (
    Binding,
    Message,
    Pricer,
    as_json,
    check_dict,
    collect,
    counting,
    fail,
    field_of,
    is_empty,
    restore,
    shown,
    stub_content,
    summary_text,
    system_text,
    system_turn,
    text_field,
)
from cutctx.formats._format import Format, Presentation, Rendered, WindowHooks
from cutctx.formats._ids import NO_IDS, taken_ids
from cutctx.formats._images import (
    ANTHROPIC_IMAGE_MAX_TOKENS,
    ANTHROPIC_IMAGE_PIXELS_PER_TOKEN,
)
from cutctx.formats._reader import Answer, Out, Reader, ReaderState, Scanned, StreamReader

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from cutctx._core.protocols import TokenEstimator
    from cutctx._core.report import CompactedTranscript

__all__ = [
    "ANTHROPIC",
    "FILLER_TEXT",
    "FORMAT",
    "IMAGE_MAX_TOKENS",
    "IMAGE_PIXELS_PER_TOKEN",
    "count_tokens",
    "from_transcript",
    "to_transcript",
]

IMAGE_PIXELS_PER_TOKEN: Final = ANTHROPIC_IMAGE_PIXELS_PER_TOKEN
"""Anthropic prices an image at ``width * height / 750`` tokens (after scaling)."""

IMAGE_MAX_TOKENS: Final = ANTHROPIC_IMAGE_MAX_TOKENS
"""Anthropic scales larger images down to about this many tokens; an image whose size cannot be
read (a URL or file source, a corrupt header) is priced at it."""

_IN_MESSAGE_RESULTS: Final = {
    "web_search_tool_result": "server_tool_use",
    "web_fetch_tool_result": "server_tool_use",
    "code_execution_tool_result": "server_tool_use",
    "bash_code_execution_tool_result": "server_tool_use",
    "text_editor_code_execution_tool_result": "server_tool_use",
    "tool_search_tool_result": "server_tool_use",
    "mcp_tool_result": "mcp_tool_use",
}


class _Anthropic(Format[Message], WindowHooks[Message], Presentation):
    """The Messages API format (``ANTHROPIC``)."""

    __slots__ = ()

    @property
    def name(self) -> str:
        return FORMAT

    @property
    def system_field(self) -> str | None:
        return "system"

    def tool_definition(
        self, name: str, description: str, parameters: Mapping[str, Any]
    ) -> dict[str, Any]:
        return {"name": name, "description": description, "input_schema": dict(parameters)}

    def pieces(
        self, message: Mapping[str, Any], *, estimator: TokenEstimator, tokens: int
    ) -> tuple[list[tuple[str, int]], int]:
        del tokens
        pricer = self.pricer(estimator)
        calls: list[tuple[str, int]] = []
        thoughts = 0
        content = message.get("content")
        for block in content if isinstance(content, list) else ():
            kind = block.get("type")
            if kind == "tool_use":
                name = block["name"]
                price = pricer.framing + pricer.text(name)
                calls.append((name, price + pricer.text(as_json(block.get("input")))))
            elif kind == "thinking":
                thoughts += pricer.text(block["thinking"])
            elif kind == "redacted_thinking":
                thoughts += pricer.text(block["data"])
        return calls, thoughts

    def head(self, system: object, *, estimator: TokenEstimator) -> tuple[TranscriptTurn, ...]:
        # Always one turn: it carries the reserve of the filler that may open the output.
        pricer = Pricer.of(FORMAT, estimator)
        read = system_text(FORMAT, system, pricer)
        text, cost = read if read is not None else ("", 0)
        return (system_turn(text, cost + _reserve(pricer)),)

    def reader(
        self,
        *,
        estimator: TokenEstimator | None = None,
        priority: Callable[[int, dict[str, Any]], int] | None = None,
        pin: Callable[[int, dict[str, Any]], bool] | None = None,
    ) -> Reader[Message]:
        return _AnthropicReader(self.pricer(estimator), priority=priority, pin=pin)

    def settled(self, message: Message) -> bool:
        return _settled(message)

    def without_cache_markers(self, message: Message) -> Message:
        return cast("Message", without_cache_control(message))

    def with_cache_markers(
        self, request: list[Message], marked: Sequence[tuple[Message, Message]]
    ) -> list[Message]:
        return with_cache_control(request, marked)

    def render(
        self, view: Transcript | CompactedTranscript, binding: Binding[Message]
    ) -> Rendered[Message]:
        built: list[tuple[dict[str, Any], int, int | None]] = []
        pricer = Pricer.of(FORMAT, binding.estimator)
        for piece in collect(FORMAT, view, binding):
            if piece.index is None:
                summary = {"role": "user", "content": summary_text(piece.text)}
                built.append((summary, piece.cost, None))
                continue
            message = binding.messages[piece.index]
            if None in piece.masked:  # an observation, masked or excerpted whole
                message = dict(message)
                message["content"] = stub_content(message["content"], piece.masked[None], "text")
            elif piece.masked:
                content = list(message["content"])
                for block_index, stub in piece.masked.items():
                    assert block_index is not None  # noqa: S101 - tool results are split by block
                    block = dict(content[block_index])
                    if block_index in piece.excerpts:  # one text block; images and the like stay
                        block["content"] = excerpted(pricer, piece.index, block, stub)
                    else:
                        block["content"] = stub_content(block.get("content"), stub, "text")
                    content[block_index] = block
                message = dict(message)
                message["content"] = content
            built.append((message, piece.cost, piece.index))
        # A filler costs nothing as a message: its price is reserved (by the head, and by each
        # assistant message with thinking or compaction), as count_tokens reads it.
        messages, costs, joined_ = alternate(built, 0)
        return Rendered(restore(binding, messages), costs, joined_)

    def count_tokens(
        self,
        messages: Sequence[Message],
        *,
        estimator: TokenEstimator | None = None,
        system: object = None,
    ) -> int:
        estimator = counting(estimator)
        pricer = Pricer.of(FORMAT, estimator)
        (head,) = self.head(system, estimator=pricer.estimator)
        read, _ = _scan(messages, pricer.estimator, strict=False)
        # The filler reserves are counted, as every request the formats make prices them.
        return head.token_estimate + sum(turn.token_estimate for turn in read.turns)

    def mark_cache(self, request: list[Message], stable: int, system: object) -> list[Message]:
        marked = list(request)
        place_breakpoint(cast("list[Any]", marked), stable, system)
        return marked


ANTHROPIC: Final[Format[Message]] = _Anthropic()
"""The Messages API ``Format``; ``format="anthropic"`` names it.

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
    """Map a Messages API conversation (and its top-level ``system``) onto a transcript.

    A message's ``"sticky": true`` (or a true ``pin(index, message)``) pins its turns and its
    ``"priority": n`` (or ``priority(index, message)``) becomes their ``cutctx.priority``;
    neither key is sent on. A ``tool_result``'s turn names its tool in ``cutctx.tool_name``.

    Raises:
        ValidationError: naming the message ``index`` in ``details`` for a non-list, a message
            that is not an object, an unknown role, a conversation that does not open with a
            user message, a message with no content (but a final assistant one), a
            ``tool_result`` whose ``tool_use`` is not in the message before it (or that follows
            another block of its message or run), a ``tool_use`` left unanswered, thinking
            after another assistant message, a ``system`` message holding tool or thinking
            blocks, a tool use id used twice, a server or MCP tool result with no use before it
            in its message, or a field of the wrong type.

    .. versionadded:: 0.1.0
    .. versionchanged:: 0.1.1
       Messages of one role in a row, and ``system`` messages, are accepted.
    """
    made = ANTHROPIC.to_transcript(
        messages, estimator=estimator, system=system, priority=priority, pin=pin
    )
    return cast("tuple[Transcript, Binding[M]]", made)


def from_transcript[M: Message](
    view: Transcript | CompactedTranscript, binding: Binding[M]
) -> list[M]:
    """Rebuild Messages API messages from a (compacted) view of ``binding``'s transcript.

    Kept messages are the caller's own dicts, in order, unless a neighbour was removed and they
    had to be merged; a masked ``tool_result`` is a copy whose ``content`` is the stub (ids,
    ``is_error`` and ``cache_control`` kept; images inside the result are masked with the text);
    a summary is a user message opening with ``SUMMARY_LABEL`` (its trailing whitespace
    removed). The top-level ``system`` is never emitted: send ``binding.system``.

    Raises:
        ValidationError: for a binding of another format or a view it cannot have produced.
    """
    binding_ = cast("Binding[Message]", binding)
    return cast("list[M]", ANTHROPIC.from_transcript(view, binding_))


def count_tokens(
    messages: Sequence[Message],
    *,
    estimator: TokenEstimator | None = None,
    system: str | Sequence[Mapping[str, Any]] | None = None,
) -> int:
    """Return what ``messages`` and ``system`` cost under this format's pricing rules.

    That is the sum of the turns' estimates, the filler reserves included (one on the ``system``
    turn, one on each assistant message with thinking or compaction), as ``to_transcript``,
    ``compact_messages`` and the window price a request; a filler message (``FILLER_TEXT``)
    costs nothing, its price being reserved. The estimator is ``TextEstimator()`` by default, as
    ``compact_messages``'. Counting needs no valid request: a partial history (a ``tool_use``
    still waiting for its result, two messages of one role in a row) is priced message by message.

    >>> count_tokens([{"role": "user", "content": "twelve chars"}])  # 3, and the reserve's 7
    10

    Raises:
        ValidationError: for a field of the wrong type, as ``to_transcript`` does.

    .. versionchanged:: 0.1.1
       The filler reserves are counted, and the default estimator is ``TextEstimator()``.
    """
    return ANTHROPIC.count_tokens(messages, estimator=estimator, system=system)


def _is_filler(content: object) -> bool:
    """Whether a user message's ``content`` is a filler the format put in.

    That is ``FILLER_TEXT``, or it as one text block (the form a cache breakpoint on it takes,
    ``cache_control`` and all).
    """
    if content == FILLER_TEXT:
        return True
    if not isinstance(content, list | tuple) or len(content) != 1:
        return False
    block = content[0]
    return (
        isinstance(block, dict)
        and block.get("type") == "text"
        and block.get("text") == FILLER_TEXT
        and block.keys() <= {"type", "text", "cache_control"}
    )


def _reserve(pricer: Pricer) -> int:
    """Return the price of the filler message (reserved where one may be needed)."""
    return pricer.framing + pricer.text(FILLER_TEXT)


def _scan(
    messages: Sequence[Message], estimator: object, *, strict: bool
) -> tuple[Scanned[Message], int]:
    """Read a whole history; also return the filler reserves added (``count_tokens``)."""
    reader = _AnthropicReader(Pricer.of(FORMAT, estimator), strict=strict)
    read = reader.read(messages, final=True)
    return read, reader.reserved


def _role_of(index: int, item: dict[str, Any]) -> str:
    """Return the message's role; raise for one the Messages API has not, or a Chat message."""
    role = item.get("role")
    if role not in ("user", "assistant", "system"):
        raise fail(FORMAT, index, f"unknown role {shown(role)}", role=shown(role))
    if "tool_calls" in item or "tool_call_id" in item:
        raise fail(
            FORMAT,
            index,
            "holds Chat Completions tool_calls/tool_call_id; the Messages API carries "
            "tool_use and tool_result blocks (is this a Chat request? --format openai_chat)",
        )
    return cast("str", role)


def _settled(message: object) -> bool:
    """Whether a message keeps its verdict when more come (an empty assistant one: not)."""
    return not (field_of(message, "role") == "assistant" and is_empty(field_of(message, "content")))


class _AnthropicReader(StreamReader[Message]):
    """Reads Messages API messages; its state holds what the next message must answer.

    State: ``count``, ``previous`` (the role before), ``pending`` (the last assistant
    message's ``tool_use`` names by id), ``opener`` (its index), ``key`` (its turn id) and
    ``seen`` (every tool use id so far, with the message that made it: an id is used once).
    """

    __slots__ = ("reserved",)

    fmt = FORMAT

    def __init__(
        self,
        pricer: Pricer,
        *,
        strict: bool = True,
        priority: Callable[[int, dict[str, Any]], int] | None = None,
        pin: Callable[[int, dict[str, Any]], bool] | None = None,
    ) -> None:
        self.reserved = 0  # the filler reserves added to the turns read (not sent)
        super().__init__(pricer, strict=strict, settled=_settled, priority=priority, pin=pin)

    def initial(self) -> ReaderState:
        return {
            "count": 0,
            "previous": None,
            "pending": {},
            "opener": None,
            "key": None,
            "seen": NO_IDS,
        }

    def taken(self, state: ReaderState) -> ReaderState:
        return taken_ids(FORMAT, state)

    def message(self, state: ReaderState, index: int, item: dict[str, Any], out: Out) -> None:
        pricer, strict = self.pricer, self.strict
        role = _role_of(index, item)
        content = item.get("content")
        previous = state["previous"]
        pending: dict[str, str] = state["pending"]
        if strict:
            check_order(index, role, previous, content, last=out.last)
            # Calls wait for their results in the next user message (a run of assistant
            # messages is one message: its calls are answered after the run).
            if pending and not (role == "user" or role == previous == "assistant"):
                raise _unanswered(state["opener"], list(pending))
        if role == previous:  # the API merges the run into one message: framed once
            self.reserved += pricer.framing
        state["previous"] = role
        turn_id = f"m{index}"
        if role == "system":
            text, cost = _system_message(pricer, index, content)
            reserve = _reserve(pricer)  # a filler goes before it if compaction leaves no user
            self.reserved += reserve
            turn = TranscriptTurn(turn_id, Role.SYSTEM, text, pricer.framing + cost + reserve)
            out.whole(turn, index)
            return
        if role == "assistant":
            text, cost, ids, flags = _assistant(pricer, index, content, strict=strict)
            if strict:
                state["seen"] = check_unique(index, ids, state["seen"])
            if flags:  # thinking or compaction: a filler may have to go before it
                reserve = _reserve(pricer)
                cost += reserve
                self.reserved += reserve
            uses = ids["tool_use"]
            run = previous == "assistant" and bool(pending)  # its calls join the run's exchange
            key = state["key"] if run else turn_id
            turn = TranscriptTurn(
                turn_id,
                Role.ASSISTANT,
                text,
                pricer.framing + cost,
                key if uses else None,
                pinned="compaction" in flags,
            )
            out.whole(turn, index)
            if uses:
                named = _use_names(cast("list[Any]", content))  # uses come from a list
                state["pending"] = {**(pending if run else {}), **named}
                if not run:
                    state["opener"], state["key"] = index, turn_id
            elif not run:
                state["pending"] = {}
            return
        key = state["key"] if pending else None
        answered, closed = _user(pricer, index, content, key, pending, out, strict=strict)
        # A run of user messages is the one message the API merges them into: results first,
        # so the next message may still answer the calls left only if this one holds nothing
        # else.
        left = {call_id: name for call_id, name in pending.items() if call_id not in answered}
        if left and strict and (closed or not answered):
            raise _unanswered(state["opener"], list(left))
        state["pending"] = left

    def finish(self, state: ReaderState) -> None:
        if state["pending"] and self.strict:
            raise _unanswered(state["opener"], list(state["pending"]))

    def read(self, messages: Sequence[Message], *, final: bool = False) -> Scanned[Message]:
        self.reserved = 0
        return super().read(messages, final=final)


def _unanswered(opener: int, missing: list[str]) -> Exception:
    return fail(
        FORMAT,
        opener,
        f"tool_use {missing[0]!r:.60} has no tool_result in the next message",
        tool_use_ids=missing[:10],
    )


def _use_names(content: list[Any]) -> dict[str, str]:
    """Map each ``tool_use`` id of an assistant message's ``content`` to its tool's name."""
    return {
        block["id"]: block["name"]  # strings: ``blocks`` checked them
        for block in content
        if isinstance(block, dict)
        and block.get("type") == "tool_use"
        and isinstance(block.get("name"), str)
    }


def _user(  # noqa: PLR0917 - one private call site
    pricer: Pricer,
    index: int,
    content: object,
    key: str | None,
    pending: Mapping[str, str],
    out: Out,
    *,
    strict: bool,
) -> tuple[set[str], bool]:
    """Add the turns of user message ``index``.

    Return the tool_use ids it answers, and whether it holds anything but results (then no
    result may follow in the run).
    """
    turn_id = f"m{index}"
    if _is_filler(content):  # a filler the format put in: its price is reserved elsewhere
        out.whole(TranscriptTurn(turn_id, Role.USER, "", 0), index)
        return set(), True
    if not isinstance(content, list | tuple):
        text, cost = blocks(pricer, index, content, "content")
        out.whole(TranscriptTurn(turn_id, Role.USER, text, pricer.framing + cost), index)
        return set(), True
    answers: list[Answer] = []
    answered: set[str] = set()
    other = False  # a block that is not a result came before
    for position, value in enumerate(content):
        where = f"content[{position}]"
        block = check_dict(FORMAT, index, value, where)
        if block.get("type") != "tool_result":
            other = True
            continue
        call_id = text_field(FORMAT, index, block.get("tool_use_id"), f"{where}.tool_use_id")
        if strict and (key is None or call_id in answered or call_id not in pending):
            raise fail(
                FORMAT,
                index,
                f"tool_result for {call_id!r:.60} has no matching tool_use in the message before "
                "it (or answers it twice)",
                tool_use_id=call_id,
            )
        if strict and other:
            raise fail(
                FORMAT,
                index,
                f"{where}: a tool_result must come before the other blocks of its message",
                tool_use_id=call_id,
            )
        answered.add(call_id)
        content_of = block.get("content")
        text, cost = blocks(pricer, index, content_of, f"{where}.content", within="tool_result")
        answers.append(Answer(position, text, cost, pending.get(call_id)))
    if not answers:
        text, cost = blocks(pricer, index, content, "content")
        out.whole(TranscriptTurn(turn_id, Role.USER, text, pricer.framing + cost), index)
        return set(), True
    price = partial(block_of, pricer, index)
    out.answers(pricer.framing, index, key, answers, content, "content", price)
    return answered, other


_NOT_IN_SYSTEM: Final = USES | THINKING | {"tool_result"} | set(_IN_MESSAGE_RESULTS)


def _system_message(pricer: Pricer, index: int, content: object) -> tuple[str, int]:
    """Render and price a ``system`` message's content: a string or text (and tool) blocks."""
    if isinstance(content, list | tuple):
        for position, value in enumerate(content):
            kind = check_dict(FORMAT, index, value, f"content[{position}]").get("type")
            if kind in _NOT_IN_SYSTEM:
                raise fail(FORMAT, index, f"content[{position}]: a system message holds no {kind}")
    return blocks(pricer, index, content, "content")


def _assistant(
    pricer: Pricer, index: int, content: object, *, strict: bool
) -> tuple[str, int, dict[str, list[str]], set[str]]:
    """Render and price an assistant message.

    Return its call ids by kind of use, and its flags: ``thinking`` if it holds thinking
    blocks, ``compaction`` if it holds the provider's compaction summary.
    """
    text, cost = blocks(pricer, index, content, "content")
    ids: dict[str, list[str]] = {kind: [] for kind in USES}
    flags: set[str] = set()
    if isinstance(content, list | tuple):
        for position, block in enumerate(content):
            kind = block.get("type")
            if kind in USES:
                where = f"content[{position}].id"
                call_id = text_field(FORMAT, index, block.get("id"), where)
                if strict and any(call_id in group for group in ids.values()):
                    raise fail(FORMAT, index, f"{where} repeats the tool use id {call_id!r:.60}")
                ids[kind].append(call_id)
            elif kind in _IN_MESSAGE_RESULTS:
                where = f"content[{position}].tool_use_id"
                call_id = text_field(FORMAT, index, block.get("tool_use_id"), where)
                if strict and call_id not in ids[_IN_MESSAGE_RESULTS[kind]]:
                    raise fail(
                        FORMAT,
                        index,
                        f"{kind} for {call_id!r:.60} has no {_IN_MESSAGE_RESULTS[kind]} before it "
                        "in the same message",
                        tool_use_id=call_id,
                    )
            elif kind in THINKING:
                flags.add("thinking")
            elif kind == "compaction":
                flags.add("compaction")
    return text, cost, ids, flags
