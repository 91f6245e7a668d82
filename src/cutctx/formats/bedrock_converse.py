"""AWS Bedrock Converse messages to and from cutctx transcripts.

Messages are ``{"role": "user" | "assistant", "content": [blocks]}`` dicts, each block a one-key
object (``text``, ``image``, ``document``, ``toolUse``, ``toolResult``, ``reasoningContent``,
``cachePoint``, ``guardContent``, ...), as boto3's ``converse`` takes them (image bytes raw) or
as Converse's JSON carries them (base64 text); boto3 is never imported. ``system=`` is a string
or Converse's list of system blocks: a pinned turn, priced, never emitted.

Each message is one turn ``m<i>``, except a user message holding ``toolResult`` blocks: each
result is its own ``TOOL`` turn (the first ``m<i>``, the others ``m<i>.<block>``) and its other
blocks one ``USER`` turn ``m<i>.<block>``. An assistant message with ``toolUse`` blocks and every
turn of the message answering it share one ``tool_call_id``: one exchange. Assistant messages
are never edited, so ``reasoningContent`` goes out unchanged or not at all.

The input must be a valid request (user first, strict alternation, every ``toolUse`` answered in
the next message by as many ``toolResult`` blocks with the same ids); so is the output: adjacent
messages of one role are merged, except behind an assistant message holding reasoning, where a
user filler (``FILLER_TEXT``) goes between, as before an assistant message that would open the
request. ``mark_cache`` adds a ``cachePoint`` while the request holds fewer than four. See
``docs/formats/bedrock_converse.md``.

>>> transcript, binding = to_transcript([{"role": "user", "content": [{"text": "hi"}]}])
>>> transcript.turn_ids(), from_transcript(transcript, binding)
(('m0',), [{'role': 'user', 'content': [{'text': 'hi'}]}])

.. versionadded:: 0.1.1
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import TYPE_CHECKING, Any, Final, cast

from cutctx._core.values import Role, Transcript, TranscriptTurn
from cutctx.formats._bedrock_blocks import (
    FORMAT,
    block_of,
    cache_points,
    kind_of,
    result_of,
)
from cutctx.formats._cache_marks import without_cache_points
from cutctx.formats._common import (
    Binding,
    Message,
    Pricer,
    block_pieces,
    check_dict,
    counting,
    fail,
    field_of,
    framed_content,
    joined,
    restore,
    shown,
    system_turn,
    text_field,
)
from cutctx.formats._format import Format, Presentation, Rendered, WindowHooks
from cutctx.formats._ids import NO_IDS, first_use, taken_ids, with_ids
from cutctx.formats._plain import plain
from cutctx.formats._reader import Answer, Out, Reader, ReaderState, StreamReader

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from cutctx._core.protocols import TokenEstimator
    from cutctx._core.report import CompactedTranscript

__all__ = [
    "BEDROCK_CONVERSE",
    "FILLER_TEXT",
    "FORMAT",
    "MAX_CACHE_POINTS",
    "count_tokens",
    "from_transcript",
    "to_transcript",
]

FILLER_TEXT: Final = "(earlier turns were compacted)"
"""The user message put before an assistant message that would open the request, or that holds
reasoning and would follow another assistant message."""

MAX_CACHE_POINTS: Final = 4
"""Converse refuses a request with more ``cachePoint`` blocks than this (system and messages)."""

_CACHE_POINT: Final = {"cachePoint": {"type": "default"}}


class _BedrockConverse(Format[Message], WindowHooks[Message], Presentation):
    """The Converse format (``BEDROCK_CONVERSE``)."""

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
        spec = {"name": name, "description": description, "inputSchema": {"json": dict(parameters)}}
        return {"toolSpec": spec}

    def pieces(
        self, message: Mapping[str, Any], *, estimator: TokenEstimator, tokens: int
    ) -> tuple[list[tuple[str, int]], int]:
        del tokens
        pricer = self.pricer(estimator)
        calls: list[tuple[str, int]] = []
        thoughts = 0
        content = message.get("content")
        for position, block in enumerate(content if isinstance(content, list) else ()):
            _, price = block_of(pricer, -1, block, f"content[{position}]")
            if "toolUse" in block:
                calls.append((block["toolUse"]["name"], price))
            elif "reasoningContent" in block:
                thoughts += price
        return calls, thoughts

    def without_cache_markers(self, message: Message) -> Message:
        return cast("Message", without_cache_points(message))

    def fingerprint_data(self, message: Message) -> object:
        return plain(message) if isinstance(message, Mapping) else message

    def head(self, system: object, *, estimator: TokenEstimator) -> tuple[TranscriptTurn, ...]:
        if system is None:
            return ()
        return (system_turn(*_system(system, self.pricer(estimator))),)

    def request_overhead(self, estimator: TokenEstimator) -> int:
        # The filler that may open a request is reserved in every request, not in a message.
        return _reserve(self.pricer(estimator))

    def reader(
        self,
        *,
        estimator: TokenEstimator | None = None,
        priority: Callable[[int, dict[str, Any]], int] | None = None,
        pin: Callable[[int, dict[str, Any]], bool] | None = None,
    ) -> Reader[Message]:
        return _ConverseReader(self.pricer(estimator), priority=priority, pin=pin)

    def render(
        self, view: Transcript | CompactedTranscript, binding: Binding[Message]
    ) -> Rendered[Message]:
        built = block_pieces(
            FORMAT,
            view,
            binding,
            field="content",
            summary=lambda text: {"role": "user", "content": [{"text": text}]},
            masked=_masked_result,
        )
        messages, costs, merged = _alternate(built)
        return Rendered(restore(binding, messages), costs, merged)

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
        read = _ConverseReader(pricer, strict=False).read(messages, final=True)
        turns = sum(turn.token_estimate for turn in (*head, *read.turns))
        return turns + self.request_overhead(pricer.estimator)

    def mark_cache(self, request: list[Message], stable: int, system: object) -> list[Message]:
        if stable <= 0:
            return request
        held = cache_points(system) + sum(
            cache_points(field_of(message, "content")) for message in request
        )
        message = request[stable - 1]
        content = field_of(message, "content")
        if held >= MAX_CACHE_POINTS or not isinstance(content, list) or not content:
            return request
        if isinstance(content[-1], Mapping) and "cachePoint" in content[-1]:
            return request
        marked = list(request)
        marked[stable - 1] = {
            **cast("Mapping[str, Any]", message),
            "content": [*content, _CACHE_POINT],
        }
        return marked


BEDROCK_CONVERSE: Final[Format[Message]] = _BedrockConverse()
"""The Converse ``Format``; ``format="bedrock_converse"`` names it.

.. versionadded:: 0.1.1
"""


def to_transcript[M: Message](
    messages: Sequence[M],
    *,
    estimator: TokenEstimator | None = None,
    system: object = None,
    priority: Callable[[int, dict[str, Any]], int] | None = None,
    pin: Callable[[int, dict[str, Any]], bool] | None = None,
) -> tuple[Transcript, Binding[M]]:
    """Map Converse ``messages`` (and ``system``) onto a transcript and the binding back.

    A message's ``"sticky": true`` (or a true ``pin(index, message)``) pins its turns and its
    ``"priority": n`` (or ``priority(index, message)``) becomes their ``cutctx.priority``;
    neither key is sent on. A ``toolResult``'s turn names its tool in ``cutctx.tool_name``.

    Raises:
        ValidationError: naming the message ``index`` in ``details`` for a non-list, a message
            that is not an object, a role other than ``user`` and ``assistant``, content that
            is not a non-empty list, a block that is not a one-key object, a request that does
            not open with a user message or does not alternate, a ``toolUse`` not answered in
            the next message (as many ``toolResult`` blocks, the same ids), a result without
            its use, a tool use id used twice, an error result with no content, more than four
            ``cachePoint`` blocks, a tool ``input`` JSON cannot hold, or a field of the wrong
            type.

    .. versionadded:: 0.1.1
    """
    made = BEDROCK_CONVERSE.to_transcript(
        messages, estimator=estimator, system=system, priority=priority, pin=pin
    )
    return cast("tuple[Transcript, Binding[M]]", made)


def from_transcript[M: Message](
    view: Transcript | CompactedTranscript, binding: Binding[M]
) -> list[M]:
    """Rebuild Converse messages from a (compacted) view of ``binding``'s transcript.

    Kept messages are the caller's own dicts, in order, unless a neighbour was removed and they
    had to be merged; a masked ``toolResult`` is a copy whose ``content`` is one text block, the
    stub (``toolUseId`` and ``status`` kept); a summary is a user message of one text block
    opening with ``SUMMARY_LABEL``. ``system`` is never emitted: send ``binding.system``.

    Raises:
        ValidationError: for a binding of another format or a view it cannot have produced.

    .. versionadded:: 0.1.1
    """
    binding_ = cast("Binding[Message]", binding)
    return cast("list[M]", BEDROCK_CONVERSE.from_transcript(view, binding_))


def count_tokens(
    messages: Sequence[Message],
    *,
    estimator: TokenEstimator | None = None,
    system: object = None,
) -> int:
    """Return what ``messages`` and ``system`` cost under this format's pricing rules.

    That is the sum of the turns' estimates (a message holding reasoning with its filler
    reserve) plus ``request_overhead``, the reserve of the filler that may open a request. A
    partial history (a ``toolUse`` still waiting for its result) is priced message by message.
    The estimator is ``TextEstimator()`` by default, as ``compact_messages``'.

    >>> count_tokens([{"role": "user", "content": [{"text": "twelve chars"}]}])
    10

    Raises:
        ValidationError: for a field of the wrong type, as ``to_transcript`` does.

    .. versionadded:: 0.1.1

    .. versionchanged:: 0.1.1
       The opening filler's reserve is the request's overhead, no longer the head turn's; the
       default estimator is ``TextEstimator()``.
    """
    return BEDROCK_CONVERSE.count_tokens(messages, estimator=estimator, system=system)


def _reserve(pricer: Pricer) -> int:
    """Return the price of a filler message: what each place that may need one reserves."""
    return pricer.framing + pricer.text(FILLER_TEXT)


def _is_filler(message: Mapping[str, Any]) -> bool:
    return message.get("role") == "user" and message.get("content") == [{"text": FILLER_TEXT}]


def _reasons(message: Mapping[str, Any]) -> bool:
    content = message.get("content")
    return isinstance(content, list | tuple) and any(
        isinstance(block, Mapping) and "reasoningContent" in block for block in content
    )


def _system(system: object, pricer: Pricer) -> tuple[str, int]:
    """Read and price ``system``: a string or a list of text, guard and cache point blocks."""
    if isinstance(system, str):
        return system, pricer.framing + pricer.text(system)
    if not isinstance(system, list | tuple):
        raise fail(
            FORMAT, None, f"system must be a string or a list of blocks, got {shown(system)}"
        )
    texts: list[str] = []
    cost = pricer.framing
    for block in system:
        kind = next(iter(block), None) if isinstance(block, Mapping) and len(block) == 1 else None
        text: object
        if kind == "text" and isinstance(block["text"], str):
            text = block["text"]
        elif kind == "guardContent" and isinstance(block["guardContent"], Mapping):
            inner = block["guardContent"].get("text")
            text = inner.get("text") if isinstance(inner, Mapping) else None
        elif kind == "cachePoint":
            continue
        else:
            text = None
        if not isinstance(text, str):
            raise fail(FORMAT, None, "system must be a string or a list of text blocks")
        texts.append(text)
        cost += pricer.text(text)
    return joined([text for text in texts if text]), cost


def _masked_result(block: Mapping[str, Any], stub: str) -> dict[str, Any]:
    """Return a ``toolResult`` block whose content is the stub (its id and status kept)."""
    return {"toolResult": {**block["toolResult"], "content": [{"text": stub}]}}


def _alternate(
    built: list[tuple[dict[str, Any], int, int]],
) -> tuple[list[dict[str, Any]], list[int], frozenset[int]]:
    """Merge adjacent messages of one role; a filler where a merge is not allowed.

    A user filler goes before an assistant message that would open the request, and between two
    assistant messages the second of which holds reasoning (it stays first in its message). A
    filler costs 0: its price is reserved (by the head, and by each message holding reasoning).
    """
    out: list[dict[str, Any]] = []
    costs: list[int] = []
    merged: set[int] = set()
    for message, cost, source in built:
        role = message["role"]
        if (not out and role == "assistant") or (
            out and out[-1]["role"] == role == "assistant" and _reasons(message)
        ):
            out.append({"role": "user", "content": [{"text": FILLER_TEXT}]})
            costs.append(0)
        elif out and out[-1]["role"] == role:
            out[-1] = {**out[-1], "content": [*out[-1]["content"], *message["content"]]}
            costs[-1] += cost
            if source >= 0:
                merged.add(source)
            continue
        out.append(message)
        costs.append(cost)
    return out, costs, frozenset(merged)


class _ConverseReader(StreamReader[Message]):
    """Reads Converse messages; its state holds what the next message must answer.

    State: ``count``, ``previous`` (the role before), ``pending`` (the last assistant
    message's ``toolUse`` names by id), ``opener`` (its index), ``key`` (its turn id), ``seen``
    (every tool use id so far, with the message that made it) and ``points`` (the
    ``cachePoint`` blocks so far). Without ``strict`` only field shapes (``count_tokens``).
    """

    __slots__ = ()

    fmt = FORMAT

    def initial(self) -> ReaderState:
        return {
            "count": 0,
            "previous": None,
            "pending": {},
            "opener": None,
            "key": None,
            "seen": NO_IDS,
            "points": 0,
        }

    def taken(self, state: ReaderState) -> ReaderState:
        return taken_ids(FORMAT, state)

    def message(self, state: ReaderState, index: int, item: dict[str, Any], out: Out) -> None:
        pricer, strict = self.pricer, self.strict
        role = item.get("role")
        if role not in ("user", "assistant"):
            hint = " (pass the system prompt as system=)" if role == "system" else ""
            raise fail(FORMAT, index, f"unknown role {shown(role)}{hint}", role=shown(role))
        content = item.get("content")
        if not isinstance(content, list | tuple):
            raise fail(FORMAT, index, f"content must be a list, got {type(content).__name__}")
        kinds = [kind_of(index, block, f"content[{n}]")[0] for n, block in enumerate(content)]
        state["points"] += kinds.count("cachePoint")
        pending: dict[str, str] = state["pending"]
        if strict:
            _check_order(index, role, content, kinds, state)
        state["previous"] = role
        turn_id = f"m{index}"
        if role == "assistant":
            text, cost = _content(pricer, index, item)
            uses: dict[str, str] = {}
            for position, kind in enumerate(kinds):
                if kind == "toolUse":
                    use = content[position]["toolUse"]
                    call_id = use["toolUseId"]
                    if strict and (
                        call_id in uses or first_use(state["seen"], call_id) is not None
                    ):
                        raise fail(
                            FORMAT, index, f"the tool use id {use['toolUseId']!r:.60} is used twice"
                        )
                    uses[use["toolUseId"]] = use["name"]
            state["seen"] = with_ids(state["seen"], uses, index)
            if _reasons(item):
                cost += _reserve(pricer)  # a filler may have to go before it
            key = turn_id if uses else None
            out.whole(TranscriptTurn(turn_id, Role.ASSISTANT, text, cost, key), index)
            state["pending"], state["opener"], state["key"] = uses, index, turn_id
            return
        key = state["key"] if pending else None
        results = [position for position, kind in enumerate(kinds) if kind == "toolResult"]
        answered: list[str] = []
        for position in results:
            answered.append(_answered(index, content, position, pending, answered, strict=strict))
        if strict and len(answered) != len(pending):
            missing = [use_id for use_id in pending if use_id not in answered]
            raise _unanswered(state["opener"], missing)
        state["pending"] = {}
        if not results:
            text, cost = _content(pricer, index, item)
            out.whole(TranscriptTurn(turn_id, Role.USER, text, cost), index)
            return
        answers = [
            Answer(
                position,
                *result_of(
                    pricer,
                    index,
                    content[position]["toolResult"],
                    f"content[{position}].toolResult",
                ),
                pending.get(use_id),
            )
            for position, use_id in zip(results, answered, strict=True)
        ]
        price = partial(block_of, pricer, index)
        out.answers(pricer.framing, index, key, answers, content, "content", price)

    def finish(self, state: ReaderState) -> None:
        if self.strict and state["pending"]:
            raise _unanswered(state["opener"], list(state["pending"]))


def _check_order(
    index: int, role: str, content: Sequence[Any], kinds: list[str], state: ReaderState
) -> None:
    """Raise for a message out of Converse's order (``state`` is before it, its points after)."""
    if not content:
        raise fail(FORMAT, index, f"a {role} message must have content")
    if index == 0 and role != "user":
        raise fail(FORMAT, index, "the conversation must open with a user message")
    if role == state["previous"]:
        raise fail(FORMAT, index, f"two {role} messages in a row (strict alternation)")
    if state["points"] > MAX_CACHE_POINTS:
        raise fail(FORMAT, index, f"more than {MAX_CACHE_POINTS} cachePoint blocks")
    if state["pending"] and (role != "user" or "toolResult" not in kinds):
        raise _unanswered(state["opener"], list(state["pending"]))
    if role == "assistant" and "toolResult" in kinds:
        raise fail(FORMAT, index, "an assistant message cannot hold toolResult blocks")
    if role == "user" and "toolUse" in kinds:
        raise fail(FORMAT, index, "a user message cannot hold toolUse blocks")


def _answered(
    index: int,
    content: Sequence[Any],
    position: int,
    pending: Mapping[str, str],
    answered: list[str],
    *,
    strict: bool,
) -> str:
    """Check the ``toolResult`` at ``position`` (after ``answered``); return its use's id."""
    where = f"content[{position}].toolResult"
    result = check_dict(FORMAT, index, content[position]["toolResult"], where)
    use_id = text_field(FORMAT, index, result.get("toolUseId"), f"{where}.toolUseId")
    status = result.get("status")
    if strict and (use_id not in pending or use_id in answered):
        raise _unmatched(index, use_id)
    if strict and status not in (None, "success", "error"):
        raise fail(FORMAT, index, f"{where}.status must be success or error")
    if strict and status == "error" and not result.get("content"):
        raise fail(FORMAT, index, f"{where}: an error result must have content")
    return use_id


def _unmatched(index: int, use_id: str) -> Exception:
    return fail(
        FORMAT,
        index,
        f"toolResult for {use_id!r:.60} has no toolUse in the message before it "
        "(or answers it twice)",
        tool_use_id=use_id,
    )


def _content(pricer: Pricer, index: int, item: dict[str, Any]) -> tuple[str, int]:
    """Read and price a message as one turn (framing included; a filler costs nothing)."""
    price = partial(block_of, pricer, index)
    return framed_content(
        FORMAT, pricer, index, item["content"], "content", price, filler=_is_filler(item)
    )


def _unanswered(opener: int, missing: list[str]) -> Exception:
    return fail(
        FORMAT,
        opener,
        f"toolUse {missing[0]!r:.60} has no toolResult in the next message",
        tool_use_ids=missing[:10],
    )
