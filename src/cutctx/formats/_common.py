"""What the three provider formats share: the binding, the pricing rules and the view walk.

A format maps each wire message (or input item) onto turns, records in a ``Binding`` where every
turn came from, and later rebuilds the messages of a compacted view from that record: a kept
message is the caller's very dict, a masked tool result is a shallow copy with only its body
replaced, and a summary turn is rendered fresh. Pricing is additive over the pieces of a message
(its framing, each text, each call, each medium), so the estimate of a kept message is exactly
what ``count_tokens`` charges for it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final, Protocol, cast

from baseaicore import ValidationError

from cutctx._core.estimators import CharRatioEstimator, TokenizerEstimator, encoded_length
from cutctx._core.excerpts import shown_excerpt
from cutctx._core.metadata import (
    EXCERPT_KIND,
    KIND_METADATA,
)
from cutctx._core.report import CompactedTranscript
from cutctx._core.text_estimator import TextEstimator
from cutctx._core.values import SUMMARY_TURN_ID_PREFIX, Role, Transcript, TranscriptTurn
from cutctx.formats._images import (
    OPENAI_IMAGE_BASE_TOKENS,
    OPENAI_IMAGE_TILE_TOKENS,
    OPENAI_IMAGE_UNSIZED_TOKENS,
    image_size,
    openai_image_tokens,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from cutctx._core.protocols import TokenEstimator

__all__ = [
    "AUDIO_TOKENS",
    "FILE_TOKENS",
    "OPENAI_IMAGE_BASE_TOKENS",
    "OPENAI_IMAGE_TILE_TOKENS",
    "OPENAI_IMAGE_UNSIZED_TOKENS",
    "SUMMARY_LABEL",
    "Binding",
    "Message",
    "Part",
    "Piece",
    "Pricer",
    "SupportsModelDump",
    "as_view",
    "block_pieces",
    "check_dict",
    "collect",
    "fail",
    "framed_content",
    "image_size",
    "openai_image_tokens",
    "restore",
    "shown",
    "summary_text",
    "system_turn",
]

AUDIO_TOKENS: Final = 1_000
"""An audio input part: its duration is not in the part's metadata; about 100 s of speech."""

FILE_TOKENS: Final = 3_000
"""A file or document the text of which cannot be read (a PDF, an uploaded file id, a URL)."""


SUMMARY_LABEL: Final = "[Summary of earlier turns, written for you after they were compacted]"
"""The first line of every rendered summary: a user-side message the model will not take for
its own words, and will not take for an instruction either."""


def summary_text(text: str) -> str:
    """Return the content of the message a summary becomes.

    That is ``SUMMARY_LABEL``, a blank line, then the caller's text, trailing whitespace removed.
    """
    return f"{SUMMARY_LABEL}\n\n{text}".rstrip()


def fail(fmt: str, index: int | None, message: str, **details: object) -> ValidationError:
    """Build the one-line error for bad input, naming the message ``index`` in ``details``."""
    where = f"messages[{index}]: " if index is not None else ""
    return ValidationError(
        f"{fmt}: {where}{message}", details={"format": fmt, "index": index, **details}
    )


class SupportsModelDump(Protocol):
    """An SDK message object (a pydantic model): read through ``model_dump``, never imported."""

    def model_dump(self, *, exclude_none: bool = ...) -> dict[str, Any]:
        """Return the object as plain JSON-shaped dicts and lists."""
        ...


type Message = Mapping[str, Any] | SupportsModelDump
"""What a format reads as one message or item: a dict (any SDK ``TypedDict``) or an SDK object."""

_NESTED: Final = ("content", "tool_calls")
"""Keys whose lists may hold SDK objects inside a dict message (``{"role": "assistant",
"content": response.content}``): read through ``model_dump`` too."""


def read_message(fmt: str, index: int, message: object) -> dict[str, Any]:
    """Return one message read as a dict, never changed.

    A dict is used as it is; an SDK object, or a dict whose ``content`` or ``tool_calls`` list
    holds SDK objects, is read into a new dict (``model_dump(exclude_none=True)``).
    """
    if type(message) is not dict:
        message = _read(fmt, index, message, "the message")
    for key in _NESTED:
        value = message.get(key)
        if type(value) is list and not all(type(entry) is dict for entry in value):
            message = {**message, key: [_nested(entry) for entry in value]}
    return message


def _read(fmt: str, index: int, value: object, what: str) -> dict[str, Any]:
    if isinstance(value, Mapping):
        return dict(value)
    dump = getattr(value, "model_dump", None)
    read = dump(exclude_none=True) if callable(dump) else None
    if not isinstance(read, dict):
        raise fail(fmt, index, f"{what} must be an object, got {type(value).__name__}")
    return read


def _nested(value: object) -> object:
    """Read an SDK object inside a list as a dict; leave anything else for the format to judge."""
    if type(value) is dict:
        return value
    dump = getattr(value, "model_dump", None)
    if callable(dump) and not isinstance(value, Mapping):
        read = dump(exclude_none=True)
        return read if isinstance(read, dict) else value
    return value


def field_of(message: object, key: str) -> object:
    """Return a message's field ``key``: a mapping's item, or an SDK object's attribute."""
    if isinstance(message, Mapping):
        return message.get(key)
    return getattr(message, key, None)


def is_empty(content: object) -> bool:
    """Whether a message's ``content`` is missing: ``None``, an empty string or an empty list."""
    return content is None or (isinstance(content, str | list | tuple) and not content)


def check_dict(fmt: str, index: int, value: object, what: str) -> Mapping[str, Any]:
    """Return ``value`` if it is a mapping, else raise naming ``what`` at ``index``."""
    if not isinstance(value, Mapping):
        raise fail(fmt, index, f"{what} must be an object, got {type(value).__name__}")
    return value


def text_field(fmt: str, index: int, value: object, what: str) -> str:
    """Return ``value`` if it is a string, else raise naming ``what`` at ``index``."""
    if not isinstance(value, str):
        raise fail(fmt, index, f"{what} must be a string, got {type(value).__name__}")
    return value


def as_json(value: object) -> str:
    """Serialize a JSON value compactly, key order kept, for pricing opaque parts and inputs.

    Raises:
        ValidationError: for a value JSON cannot hold (circular, nested past Python's recursion
            limit, or an integer too long to print).
    """
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    except (ValueError, RecursionError) as error:
        raise ValidationError(
            f"a value cannot be priced as JSON: {shown(str(error), 80)}",
            details={"reason": type(error).__name__},
        ) from None


def shown(value: object, limit: int = 40) -> str:
    """Return the start of ``repr(value)`` for an error message; it never raises."""
    if isinstance(value, str):
        return repr(value[: limit + 2])[:limit]
    try:
        return repr(value)[:limit]
    except (ValueError, RecursionError):  # an int too long to print, a list nested too deep
        return f"<{type(value).__name__}>"


@dataclass(frozen=True, slots=True)
class Pricer:
    """Prices the pieces of a message with one estimator.

    With a ``TokenizerEstimator`` a text costs ``len(encode(text))`` and every message (and every
    tool call) adds the estimator's ``per_message`` framing; in a format that prices roles
    (``roles``: Chat Completions) a message's role costs its tokens too. Any other estimator
    prices a text by ``estimate_tokens`` and adds no framing and no role, so a one-text message
    always costs exactly ``estimator.estimate_tokens(text)`` — the price a masking stub is given.
    """

    estimator: TokenEstimator
    framing: int
    roles: bool = False

    @classmethod
    def of(cls, fmt: str, estimator: object, *, roles: bool = False) -> Pricer:
        """Return the pricer for ``estimator`` (``CharRatioEstimator()`` when ``None``).

        ``roles``: the format's messages, with a tokenizer, also cost their role's tokens.
        """
        if estimator is None:
            return cls(CharRatioEstimator(), 0)
        if isinstance(estimator, TokenizerEstimator):
            return cls(estimator, estimator.per_message, roles)
        if not callable(getattr(estimator, "estimate_tokens", None)):
            raise fail(fmt, None, "estimator must have estimate_tokens(text) -> int")
        return cls(estimator, 0)  # type: ignore[arg-type]

    def role(self, role: str) -> int:
        """Return what a message's ``role`` costs: its tokens where roles are priced, else 0."""
        return self.text(role) if self.roles else 0

    def summary(self, text: str) -> int:
        """Return what a summary costs as rendered: a user-side message of ``summary_text``."""
        return self.framing + self.role("user") + self.text(summary_text(text))

    def text(self, text: str) -> int:
        """Return the tokens of ``text`` without framing."""
        estimator = self.estimator
        if isinstance(estimator, TokenizerEstimator):
            return encoded_length(estimator, text)
        count = estimator.estimate_tokens(text)
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise ValidationError(
                f"estimator returned {count!r} for a text; it must return an int >= 0",
                details={"field": "estimator"},
            )
        return count


@dataclass(frozen=True, slots=True)
class Part:
    """Where one turn of a transcript came from (``Binding.parts`` maps turn ids to these).

    ``turn`` is the turn as read; ``index`` its message's position in the whole history, or
    ``None`` for a turn no message carries (request-level ``system=``, a window's request
    overhead: such *head* turns are priced but never rendered); ``block`` the content block it
    starts at when its message is split into several turns (Anthropic's tool results), else
    ``None``; ``maskable`` whether a view may replace its body (a tool result); ``siblings``
    how many turns its message was split into (a view holds all of them or none).

    .. versionadded:: 0.1.1
    """

    turn: TranscriptTurn
    index: int | None
    block: int | None
    maskable: bool
    siblings: int


@dataclass(frozen=True, slots=True)
class Binding[M]:
    """What ``from_transcript`` needs to rebuild the messages of a view.

    It holds the messages as they are to be sent (the caller's dicts, not copied, never changed;
    an SDK object read into a dict; a message carrying ``sticky`` or ``priority`` as a copy
    without those keys), the caller's own message objects (``originals``, returned for the kept
    ones; the key-stripped copy for a marked message), the request-level ``system`` exactly as
    given, each turn's origin and the estimator that priced them. ``M`` is the caller's message
    type.

    .. versionadded:: 0.1.0
    """

    format: str
    messages: tuple[dict[str, Any], ...]
    system: object
    parts: Mapping[str, Part]
    estimator: TokenEstimator = field(repr=False)
    originals: Sequence[M] = field(default=(), repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.parts, MappingProxyType):
            object.__setattr__(self, "parts", MappingProxyType(dict(self.parts)))
        if not isinstance(self.originals, tuple):
            object.__setattr__(self, "originals", tuple(self.originals))


def restore[M](binding: Binding[M], built: list[dict[str, Any]]) -> list[M]:
    """Return ``built`` with every kept message read from an SDK object put back as that object.

    The rest (the caller's dicts, masked copies, summaries, merged messages) are dicts of the
    provider's own message shape, which is what ``M`` stands for.
    """
    swapped: dict[int, object] = {
        id(read): original
        for read, original in zip(binding.messages, binding.originals, strict=False)
        if read is not original
    }
    if not swapped:
        return cast("list[M]", built)
    return cast("list[M]", [swapped.get(id(message), message) for message in built])


def system_turn(text: str, cost: int) -> TranscriptTurn:
    """Return the pinned turn that stands for request-level ``system=``; never emitted."""
    return TranscriptTurn("system", Role.SYSTEM, text, cost, None, pinned=True)


@dataclass(slots=True)
class Piece:
    """One message (or summary) of a view, in view order.

    ``index`` is its source message (``None`` for a summary, whose text is ``text``); ``masked``
    maps the block of each masked part (``None`` for a whole body) to its stub, or to its
    excerpt for the blocks in ``excerpts``; ``cost`` is the sum of its turns' estimates.
    """

    index: int | None
    text: str = ""
    masked: dict[int | None, str] = field(default_factory=dict)
    seen: int = 0
    siblings: int = 1
    cost: int = 0
    excerpts: set[int | None] = field(default_factory=set)


def as_view(fmt: str, view: object) -> Transcript:
    """Accept a ``Transcript`` or a ``CompactedTranscript``; raise for anything else."""
    if isinstance(view, CompactedTranscript):
        return view.transcript
    if not isinstance(view, Transcript):
        raise fail(fmt, None, f"view must be a cutctx.Transcript, got {type(view).__name__}")
    return view


def collect(fmt: str, view: object, binding: object) -> list[Piece]:
    """Walk a view and return its messages and summaries in order.

    Raises:
        ValidationError: for a binding of another format, a turn the binding does not know, a
            changed body on a turn that is not a tool result, or a message only part of whose
            turns are in the view.
    """
    transcript = as_view(fmt, view)
    if not isinstance(binding, Binding) or binding.format != fmt:
        raise fail(fmt, None, f"binding must be a {fmt} Binding from {fmt}.to_transcript")
    parts = binding.parts
    pieces: list[Piece] = []
    current: Piece | None = None
    for turn in transcript.turns:
        part = parts.get(turn.turn_id)
        if part is None:
            if turn.turn_id.startswith(SUMMARY_TURN_ID_PREFIX):
                _close(fmt, current)
                current = None
                pieces.append(Piece(None, turn.content, cost=turn.token_estimate))
                continue
            raise fail(
                fmt, None, f"turn {turn.turn_id!r} is not from this binding", turn_id=turn.turn_id
            )
        if part.index is None:  # a head turn: priced, never rendered
            continue
        if current is None or current.index != part.index:
            _close(fmt, current)
            current = Piece(part.index, siblings=part.siblings)
            pieces.append(current)
        current.seen += 1
        current.cost += turn.token_estimate
        original = part.turn
        if turn is not original and turn.content != original.content:
            if not part.maskable:
                raise fail(
                    fmt,
                    part.index,
                    f"turn {turn.turn_id!r} changed, but only tool results can be masked",
                    turn_id=turn.turn_id,
                )
            current.masked[part.block] = turn.content
            if turn.metadata.get(KIND_METADATA) == EXCERPT_KIND:
                current.excerpts.add(part.block)
    _close(fmt, current)
    return pieces


def _close(fmt: str, piece: Piece | None) -> None:
    if piece is not None and piece.seen != piece.siblings:
        raise fail(
            fmt,
            piece.index,
            f"the view holds {piece.seen} of the message's {piece.siblings} turns",
        )


def block_pieces(
    fmt: str,
    view: object,
    binding: Binding[Any],
    *,
    field: str,
    summary: Callable[[str], dict[str, Any]],
    masked: Callable[[Any, str], Any],
) -> list[tuple[dict[str, Any], int, int]]:
    """Return a view's messages and summaries in order, each with its cost and source index.

    For a format whose message keeps its blocks in one list, ``field`` (Gemini's ``parts``,
    Converse's ``content``), each block ``{"text": ...}`` when it is text. A summary is
    ``summary(summary_text(text))`` at index ``-1``. A message with masked results is a copy
    whose block at each masked position is ``masked(block, stub)``. An observation masked or
    excerpted whole (``observation=``; the position ``None``) is a copy holding its stub as its
    one text block. Kept messages are the binding's own.
    """
    built: list[tuple[dict[str, Any], int, int]] = []
    for piece in collect(fmt, view, binding):
        if piece.index is None:
            built.append((summary(summary_text(piece.text)), piece.cost, -1))
            continue
        message = binding.messages[piece.index]
        if None in piece.masked:
            message = {**message, field: [{"text": piece.masked[None]}]}
        elif piece.masked:
            blocks = list(message[field])
            for position, stub in piece.masked.items():
                blocks[cast("int", position)] = masked(blocks[cast("int", position)], stub)
            message = {**message, field: blocks}
        built.append((message, piece.cost, piece.index))
    return built


def stub_content(original: object, stub: str, part_type: str) -> object:
    """Return the masked body: the stub as a string, or as one text part if it was a list."""
    if isinstance(original, list | tuple):
        return [{"type": part_type, "text": stub}]
    return stub


def excerpt_content(
    original: object,
    excerpt: str,
    part: Callable[[object, str], tuple[str, int]],
    text_types: tuple[str, ...],
    part_type: str,
    *,
    skip_empty: bool = False,
) -> object:
    """Return an excerpted tool result's body: ``excerpt``, as one ``part_type`` text part first.

    Its other parts (images, files: types not in ``text_types``) follow as they are. The
    excerpt is of the body as read (``render_content`` with ``part`` and ``skip_empty``), where
    each of them is a label line such as ``[image]``: those lines are left out of the text
    (``shown_excerpt``), since the part itself is sent. A string body is the excerpt itself.
    """
    if not isinstance(original, list | tuple):
        return excerpt
    read, _ = _read_parts(original, "", part, skip_empty=skip_empty)
    shown = [value.get("type") in text_types for value, _ in read]
    if not all(shown):
        excerpt = shown_excerpt([text for _, text in read], shown, excerpt)
    rest = [value for value in original if value.get("type") not in text_types]
    return [{"type": part_type, "text": excerpt}, *rest]


def _read_parts(
    parts: Sequence[Any],
    where: str,
    part: Callable[[object, str], tuple[str, int]],
    *,
    skip_empty: bool,
) -> tuple[list[tuple[Any, str]], int]:
    """Return the parts a reading shows, each with its text, and the price of them all.

    Empty texts are left out of the reading if ``skip_empty``.
    """
    read: list[tuple[Any, str]] = []
    cost = 0
    for position, value in enumerate(parts):
        text, price = part(value, f"{where}[{position}]")
        cost += price
        if text or not skip_empty:
            read.append((value, text))
    return read, cost


def joined(texts: Sequence[str]) -> str:
    """Join the rendered pieces of a message into a turn's content."""
    return "\n".join(texts)


def render_content(  # noqa: PLR0917 - the format, the place and the part renderer, as named
    fmt: str,
    pricer: Pricer,
    index: int,
    content: object,
    where: str,
    part: Callable[[object, str], tuple[str, int]],
    *,
    skip_empty: bool = False,
) -> tuple[str, int]:
    """Render and price content that is a string, a list of parts, or absent.

    ``part(value, place)`` renders and prices one element of a list (``place`` names it, for
    errors); its texts are joined into the turn's content, empty ones left out if ``skip_empty``.
    """
    if content is None:
        return "", 0
    if isinstance(content, str):
        return content, pricer.text(content)
    if not isinstance(content, list | tuple):
        raise fail(fmt, index, f"{where} must be a string or a list, got {type(content).__name__}")
    read, cost = _read_parts(content, where, part, skip_empty=skip_empty)
    return joined([text for _, text in read]), cost


def framed_content(  # noqa: PLR0917 - render_content's arguments
    fmt: str,
    pricer: Pricer,
    index: int,
    content: object,
    where: str,
    part: Callable[[object, str], tuple[str, int]],
    *,
    filler: bool,
) -> tuple[str, int]:
    """Render and price a message read as one turn, its framing included.

    A ``filler`` (a message the format itself put in a request) reads as ``""`` and costs
    nothing: its price is reserved where it may be needed.
    """
    if filler:
        return "", 0
    text, cost = render_content(fmt, pricer, index, content, where, part)
    return text, pricer.framing + cost


def system_text(fmt: str, system: object, pricer: Pricer) -> tuple[str, int] | None:
    """Price request-level ``system=``: a string or a list of text blocks, framed once."""
    if system is None:
        return None
    if isinstance(system, str):
        return system, pricer.framing + pricer.text(system)
    if isinstance(system, list | tuple):
        texts: list[str] = []
        for block in system:
            text = block.get("text") if isinstance(block, Mapping) else None
            if not isinstance(text, str):
                raise fail(fmt, None, "system must be a string or a list of text blocks")
            texts.append(text)
        return joined(texts), pricer.framing + sum(pricer.text(text) for text in texts)
    raise fail(
        fmt, None, f"system must be a string or a list of blocks, got {type(system).__name__}"
    )


def counting(estimator: TokenEstimator | None) -> TokenEstimator:
    """Return the estimator a format's ``count_tokens`` prices with: ``TextEstimator()`` by default.

    The messages API's one default (``compact_messages``, ``ContextWindow``), so a history
    counted at most ``max_tokens`` comes back from ``compact_messages`` as it was.
    """
    return TextEstimator() if estimator is None else estimator
