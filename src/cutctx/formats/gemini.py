"""Gemini ``contents`` (google-genai) to and from cutctx transcripts.

Messages are contents, ``{"role": "user" | "model", "parts": [...]}`` dicts or
``google.genai.types.Content`` objects (read through ``model_dump``, never imported; a kept
object comes back as the very same object). ``system=`` is the request's
``system_instruction``: a pinned turn, priced, never emitted.

Each content is one turn ``m<i>``, except a user content holding ``function_response`` parts:
each response is its own ``TOOL`` turn (the first ``m<i>``, the others ``m<i>.<part>``) and its
other parts one ``USER`` turn ``m<i>.<part>``, so each response can be masked on its own. A
model content with ``function_call`` parts and every turn of the content answering it share one
``tool_call_id`` (the model content's turn id): one exchange. Model contents are never edited:
a part that carried a ``thought_signature`` is sent as it came, or its whole content is gone.

The input must be a valid request (a user content first; every model content's calls answered
by the next content, one response per call, same names, same ids where given). The output is
one too: a new pair of same-role neighbours is merged (two user contents neither of which holds
function responses) or parted by a filler, a content of the other role holding ``FILLER_TEXT``.
Every model content's price holds the reserve of the fillers it may need (one before it, and one
after its responses if it calls functions), and a filler itself costs nothing, so the count of a
request never grows by the fillers put in it. See ``docs/formats/gemini.md``.

>>> transcript, binding = to_transcript([{"role": "user", "parts": [{"text": "hi"}]}])
>>> transcript.turn_ids(), from_transcript(transcript, binding)
(('m0',), [{'role': 'user', 'parts': [{'text': 'hi'}]}])

.. versionadded:: 0.1.1
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import TYPE_CHECKING, Any, Final, cast

from cutctx._core.values import Role, Transcript, TranscriptTurn
from cutctx.formats._common import (
    Binding,
    Message,
    Pricer,
    block_pieces,
    counting,
    fail,
    framed_content,
    joined,
    restore,
    shown,
    system_turn,
)
from cutctx.formats._format import Format, Presentation, Rendered, WindowHooks
from cutctx.formats._gemini_parts import (
    FORMAT,
    IMAGE_TILE_TOKENS,
    IMAGE_UNSIZED_TOKENS,
    body_of,
    calls_of,
    field,
    gemini_image_tokens,
    part_of,
    read_content,
    responses_of,
)
from cutctx.formats._plain import plain
from cutctx.formats._reader import Answer, Out, Reader, ReaderState, StreamReader

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from cutctx._core.protocols import TokenEstimator
    from cutctx._core.report import CompactedTranscript

__all__ = [
    "FILLER_TEXT",
    "FORMAT",
    "GEMINI",
    "IMAGE_TILE_TOKENS",
    "IMAGE_UNSIZED_TOKENS",
    "count_tokens",
    "from_transcript",
    "gemini_image_tokens",
    "to_transcript",
]

FILLER_TEXT: Final = "(earlier turns were compacted)"
"""The one text part of a content put between two new same-role neighbours that may not be
merged, or before a model content that would open the request."""

_ROLES: Final = ("user", "model")


class _Gemini(Format[Message], WindowHooks[Message], Presentation):
    """The Gemini ``contents`` format (``GEMINI``)."""

    __slots__ = ()

    @property
    def name(self) -> str:
        return FORMAT

    @property
    def system_field(self) -> str | None:
        return "system_instruction"

    def tool_definition(
        self, name: str, description: str, parameters: Mapping[str, Any]
    ) -> dict[str, Any]:
        return {"name": name, "description": description, "parameters": dict(parameters)}

    def pieces(
        self, message: Mapping[str, Any], *, estimator: TokenEstimator, tokens: int
    ) -> tuple[list[tuple[str, int]], int]:
        del tokens
        pricer = self.pricer(estimator)
        calls: list[tuple[str, int]] = []
        thoughts = 0
        parts = message.get("parts")
        for position, part in enumerate(parts if isinstance(parts, list) else ()):
            text, price = part_of(pricer, -1, part, f"parts[{position}]")
            if field(part, "function_call")[1] is not None:
                calls.append((field(part, "function_call")[1]["name"], price))
            elif part.get("thought") is True:
                thoughts += price
            del text
        return calls, thoughts

    def head(self, system: object, *, estimator: TokenEstimator) -> tuple[TranscriptTurn, ...]:
        pricer = self.pricer(estimator)
        read = _system(system, pricer)
        return () if read is None else (system_turn(*read),)

    def fingerprint_data(self, message: Message) -> object:
        if isinstance(message, Mapping):
            return plain(message)
        dump = getattr(message, "model_dump", None)
        return dump(mode="json", exclude_none=True) if callable(dump) else message

    def reader(
        self,
        *,
        estimator: TokenEstimator | None = None,
        priority: Callable[[int, dict[str, Any]], int] | None = None,
        pin: Callable[[int, dict[str, Any]], bool] | None = None,
    ) -> Reader[Message]:
        return _GeminiReader(self.pricer(estimator), priority=priority, pin=pin)

    def render(
        self, view: Transcript | CompactedTranscript, binding: Binding[Message]
    ) -> Rendered[Message]:
        built = block_pieces(
            FORMAT,
            view,
            binding,
            field="parts",
            summary=lambda text: {"role": "user", "parts": [{"text": text}]},
            masked=_masked,
        )
        messages, costs, merged = _order(built)
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
        read = _GeminiReader(pricer, strict=False).read(messages, final=True)
        return sum(turn.token_estimate for turn in (*head, *read.turns))


GEMINI: Final[Format[Message]] = _Gemini()
"""The Gemini ``contents`` ``Format``; ``format="gemini"`` names it.

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
    """Map Gemini ``contents`` (and ``system_instruction`` as ``system``) onto a transcript.

    ``system`` is a string, a content (``{"parts": [{"text": ...}]}`` or an SDK ``Content``)
    or a list of strings and text parts. A content's ``"sticky": true`` (or a true ``pin(index,
    content)``) pins its turns and its ``"priority": n`` (or ``priority(index, content)``)
    becomes their ``cutctx.priority``; neither key is sent on. A function response's turn
    names its function in ``cutctx.tool_name``.

    Raises:
        ValidationError: naming the content ``index`` in ``details`` for a non-list, a content
            that is not an object, a role other than ``user`` and ``model``, ``parts`` that are
            not a non-empty list, a request that does not open with a user content, a
            function call not answered by the next content (one response per call, same names
            and ids), a response without its call, a part holding two kinds of data, call
            ``args`` or a ``response`` that are not JSON objects, or a field of the wrong type.

    .. versionadded:: 0.1.1
    """
    made = GEMINI.to_transcript(
        messages, estimator=estimator, system=system, priority=priority, pin=pin
    )
    return cast("tuple[Transcript, Binding[M]]", made)


def from_transcript[M: Message](
    view: Transcript | CompactedTranscript, binding: Binding[M]
) -> list[M]:
    """Rebuild Gemini contents from a (compacted) view of ``binding``'s transcript.

    Kept contents are the caller's own objects, in order, unless one had to be merged with a
    neighbour; a masked function response is a copy whose ``response`` is ``{"output": stub}``
    (``{"error": stub}`` for an error's; its name and id kept, its media parts left out); a
    summary is a user content of one text part opening with ``SUMMARY_LABEL``. ``system`` is
    never emitted: send ``binding.system``.

    Raises:
        ValidationError: for a binding of another format or a view it cannot have produced.

    .. versionadded:: 0.1.1
    """
    binding_ = cast("Binding[Message]", binding)
    return cast("list[M]", GEMINI.from_transcript(view, binding_))


def count_tokens(
    messages: Sequence[Message],
    *,
    estimator: TokenEstimator | None = None,
    system: object = None,
) -> int:
    """Return what ``messages`` and ``system`` cost under this format's pricing rules.

    That is the sum of the turns' estimates, filler reserves included (the price of a kept
    content is what it costs in any request). A partial history (a call still waiting for its
    response) is priced content by content.

    >>> count_tokens([{"role": "user", "parts": [{"text": "twelve chars"}]}])
    3

    Raises:
        ValidationError: for a field of the wrong type, as ``to_transcript`` does.

    .. versionadded:: 0.1.1
    """
    return GEMINI.count_tokens(messages, estimator=estimator, system=system)


def _reserve(pricer: Pricer) -> int:
    """Return the price of a filler content: what a model content reserves for each one."""
    return pricer.framing + pricer.text(FILLER_TEXT)


def _is_filler(message: Mapping[str, Any]) -> bool:
    """Whether ``message`` is a filler content (one text part, ``FILLER_TEXT``)."""
    parts = message.get("parts")
    return isinstance(parts, list | tuple) and len(parts) == 1 and parts[0] == {"text": FILLER_TEXT}


def _system(system: object, pricer: Pricer) -> tuple[str, int] | None:
    """Read and price ``system_instruction``: a string, a content, or strings and text parts."""
    if system is None:
        return None
    read: object = system
    if not isinstance(system, str | list | tuple | Mapping):
        dump = getattr(system, "model_dump", None)
        read = dump(mode="json", exclude_none=True) if callable(dump) else None
    if isinstance(read, Mapping):
        read = read.get("parts") if "parts" in read else [read]
    if isinstance(read, str):
        read = [read]
    texts: list[str] = []
    for item in read if isinstance(read, list | tuple) else [None]:
        text = item.get("text") if isinstance(item, Mapping) else item
        if not isinstance(text, str):
            raise fail(
                FORMAT,
                None,
                "system must be a string, a content of text parts or a list of texts, "
                f"got {shown(system)}",
            )
        texts.append(text)
    return joined(texts), pricer.framing + sum(pricer.text(text) for text in texts)


def _masked(part: Mapping[str, Any], stub: str) -> dict[str, Any]:
    """Return a function response part whose ``response`` is ``{"output": stub}``.

    A response of one string field keeps that field's name (``{"error": stub}``).
    """
    key, response = field(part, "function_response")
    body = {name: value for name, value in response.items() if name not in ("response", "parts")}
    old = response.get("response")
    single = (
        isinstance(old, Mapping) and len(old) == 1 and isinstance(next(iter(old.values())), str)
    )
    body["response"] = {next(iter(old)) if single else "output": stub}
    return {**part, key: body}


def _holds_responses(message: Mapping[str, Any]) -> bool:
    return any(
        isinstance(part, Mapping) and field(part, "function_response")[1] is not None
        for part in message["parts"]
    )


def _order(
    built: list[tuple[dict[str, Any], int, int]],
) -> tuple[list[dict[str, Any]], list[int], frozenset[int]]:
    """Part or merge every new pair of same-role neighbours; open on a user content.

    Two contents of one role that were neighbours in the history stay as they are. Two new
    user neighbours are merged, unless the first holds function responses (a model filler goes
    between); two new model neighbours, and a model content that would open the request, get
    a user filler before the second. ``built`` holds each content, its price and its history
    index (``-1`` for a summary); return the contents, their prices (a filler's is 0: its
    price is reserved by the model content it serves) and the history indices merged into the
    content before them.
    """
    out: list[dict[str, Any]] = []
    costs: list[int] = []
    last: list[int] = []  # the history index each output content ends with
    merged: set[int] = set()
    for message, cost, source in built:
        role = message["role"]
        filler_role = None
        if not out:
            filler_role = "user" if role == "model" else None
        elif out[-1]["role"] == role and not (source >= 0 and source == last[-1] + 1 > 0):
            if role == "model":
                filler_role = "user"
            elif _holds_responses(out[-1]):
                filler_role = "model"
            else:
                out[-1] = {**out[-1], "parts": [*out[-1]["parts"], *message["parts"]]}
                costs[-1] += cost
                last[-1] = -1  # a merged content is no history content's neighbour
                if source >= 0:
                    merged.add(source)
                continue
        if filler_role is not None:
            out.append({"role": filler_role, "parts": [{"text": FILLER_TEXT}]})
            costs.append(0)
            last.append(-1)
        out.append(message)
        costs.append(cost)
        last.append(source)
    return out, costs, frozenset(merged)


type _Call = list[str | None]  # a function call waiting for its response: [name, id or None]


class _GeminiReader(StreamReader[Message]):
    """Reads Gemini contents; its state holds the calls the next content must answer.

    State: ``count``, ``pending`` (the last model content's calls, ``[name, id]`` each),
    ``opener`` (its index) and ``key`` (its turn id). Without ``strict`` only the shape of
    each field is checked (``count_tokens``).
    """

    __slots__ = ()

    fmt = FORMAT

    def initial(self) -> ReaderState:
        return {"count": 0, "pending": [], "opener": None, "key": None}

    def item(self, index: int, message: Message) -> dict[str, Any]:
        return read_content(index, message)

    def message(self, state: ReaderState, index: int, item: dict[str, Any], out: Out) -> None:
        pricer, strict = self.pricer, self.strict
        role = item.get("role")
        if role not in _ROLES:
            hint = {
                "system": " (pass the system instruction as system=)",
                "assistant": " (Gemini's is 'model')",
            }.get(role if isinstance(role, str) else "", "")
            raise fail(FORMAT, index, f"unknown role {shown(role)}{hint}", role=shown(role))
        parts = item.get("parts")
        if not isinstance(parts, list | tuple):
            raise fail(FORMAT, index, f"parts must be a list, got {type(parts).__name__}")
        if strict and not parts:
            raise fail(FORMAT, index, "a content must have parts")
        if strict and index == 0 and role != "user":
            raise fail(FORMAT, index, "the contents must open with a user content")
        calls = calls_of(index, parts)
        responses = responses_of(index, parts)
        pending: list[_Call] = state["pending"]
        if strict and pending and (role != "user" or not responses):
            raise _unanswered(state["opener"], pending)
        turn_id = f"m{index}"
        if role == "model":
            if strict and responses:
                raise fail(FORMAT, index, "a model content cannot hold function responses")
            ids = [call_id for _, _, call_id in calls if call_id is not None]
            if strict and len(set(ids)) != len(ids):
                raise fail(FORMAT, index, "two function calls share one id")
            # a user filler may go before it, a model one after its responses
            reserve = _reserve(pricer) * (2 if calls else 1)
            text, cost = _content(pricer, index, item)
            key = turn_id if calls else None
            out.whole(TranscriptTurn(turn_id, Role.ASSISTANT, text, cost + reserve, key), index)
            state["pending"] = [[name, call_id] for _, name, call_id in calls]
            state["opener"], state["key"] = index, turn_id
            return
        if strict and calls:
            raise fail(FORMAT, index, "a user content cannot hold function calls")
        if strict and responses:
            _check_answers(index, state["opener"], pending, responses)
        key = state["key"] if pending else None
        state["pending"] = []
        if not responses:
            text, cost = _content(pricer, index, item)
            out.whole(TranscriptTurn(turn_id, Role.USER, text, cost), index)
            return
        answers = [
            Answer(position, *body_of(pricer, index, parts[position], f"parts[{position}]"), name)
            for position, name, _ in responses
        ]
        out.answers(
            pricer.framing, index, key, answers, parts, "parts", partial(part_of, pricer, index)
        )

    def finish(self, state: ReaderState) -> None:
        if self.strict and state["pending"]:
            raise _unanswered(state["opener"], state["pending"])


def _content(pricer: Pricer, index: int, item: dict[str, Any]) -> tuple[str, int]:
    """Read and price a message as one turn (framing included; a filler costs nothing)."""
    price = partial(part_of, pricer, index)
    return framed_content(
        FORMAT, pricer, index, item["parts"], "parts", price, filler=_is_filler(item)
    )


def _unanswered(opener: int, pending: Sequence[_Call]) -> Exception:
    name, call_id = pending[0]
    named = name if call_id is None else f"{name} ({call_id})"
    return fail(
        FORMAT,
        opener,
        f"function call {named!r:.60} is not answered by a function_response in the next content",
        calls=[call[0] for call in pending[:10]],
    )


def _check_answers(
    index: int,
    opener: int,
    calls: Sequence[_Call],
    responses: list[tuple[int, str, str | None]],
) -> None:
    """Raise unless ``responses`` answer ``calls`` one to one (same names, same ids)."""
    open_calls = [(name, call_id) for name, call_id in calls]
    for position, name, call_id in responses:
        match = next(
            (
                number
                for number, (called, called_id) in enumerate(open_calls)
                if called == name and called_id == call_id
            ),
            None,
        )
        if match is None:
            named = name if call_id is None else f"{name} ({call_id})"
            raise fail(
                FORMAT,
                index,
                f"parts[{position}]: function_response {named!r:.60} answers no function_call "
                "of the model content before it (or answers it twice)",
                name=name,
                id=call_id,
            )
        del open_calls[match]
    if open_calls:
        raise _unanswered(opener, [[name, call_id] for name, call_id in open_calls])
