"""What the three provider formats share: the binding, the pricing rules and the view walk.

A format maps each wire message (or input item) onto turns, records in a ``Binding`` where every
turn came from, and later rebuilds the messages of a compacted view from that record: a kept
message is the caller's very dict, a masked tool result is a shallow copy with only its body
replaced, and a summary turn is rendered fresh. Pricing is additive over the pieces of a message
(its framing, each text, each call, each medium), so the estimate of a kept message is exactly
what ``count_tokens`` charges for it.
"""

from __future__ import annotations

import base64
import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final

from baseaicore import ValidationError

from cutctx._core.estimators import CharRatioEstimator, TokenizerEstimator
from cutctx._core.report import CompactedTranscript
from cutctx._core.values import SUMMARY_TURN_ID_PREFIX, Role, Transcript, TranscriptTurn
from cutctx._policies.masking import TOOL_NAME_METADATA
from cutctx._policies.priority import PRIORITY_METADATA

if TYPE_CHECKING:
    from collections.abc import Callable

    from cutctx._core.protocols import TokenEstimator

__all__ = [
    "AUDIO_TOKENS",
    "FILE_TOKENS",
    "OPENAI_IMAGE_BASE_TOKENS",
    "OPENAI_IMAGE_TILE_TOKENS",
    "OPENAI_IMAGE_UNSIZED_TOKENS",
    "PRIORITY_KEY",
    "STICKY_KEY",
    "Binding",
    "Part",
    "Piece",
    "Pricer",
    "as_view",
    "check_dict",
    "check_messages",
    "collect",
    "fail",
    "image_size",
    "openai_image_tokens",
    "read_marks",
    "system_turn",
]

OPENAI_IMAGE_BASE_TOKENS: Final = 85
"""An OpenAI image at ``detail: "low"`` costs this; at high detail it is the base per image."""

OPENAI_IMAGE_TILE_TOKENS: Final = 170
"""An OpenAI high-detail image costs this per 512-pixel tile, on top of the base."""

OPENAI_IMAGE_UNSIZED_TOKENS: Final = OPENAI_IMAGE_BASE_TOKENS + 8 * OPENAI_IMAGE_TILE_TOKENS
"""A high- or auto-detail OpenAI image whose size cannot be read: the most the tile rule allows
(8 tiles, 1 445 tokens), so an unknown image is never under-priced."""

AUDIO_TOKENS: Final = 1_000
"""An audio input part: its duration is not in the part's metadata; about 100 s of speech."""

FILE_TOKENS: Final = 3_000
"""A file or document the text of which cannot be read (a PDF, an uploaded file id, a URL)."""


STICKY_KEY: Final = "sticky"
"""A message key (context-clipper's): ``true`` pins the message's turns. Never sent on."""

PRIORITY_KEY: Final = "priority"
"""A message key (context-clipper's): an integer, the priority of the message's turns
(``cutctx.priority``). Never sent on."""

_MARK_KEYS: Final = (STICKY_KEY, PRIORITY_KEY)


def fail(fmt: str, index: int | None, message: str, **details: object) -> ValidationError:
    """Build the one-line error for bad input, naming the message ``index`` in ``details``."""
    where = f"messages[{index}]: " if index is not None else ""
    return ValidationError(
        f"{fmt}: {where}{message}", details={"format": fmt, "index": index, **details}
    )


def check_messages(fmt: str, messages: object) -> tuple[dict[str, Any], ...]:
    """Return ``messages`` as a tuple of dicts, or raise naming the first bad one."""
    if not isinstance(messages, list | tuple):
        raise fail(fmt, None, f"messages must be a list, got {type(messages).__name__}")
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            raise fail(fmt, index, f"the message must be an object, got {type(message).__name__}")
    return tuple(messages)


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
    """Serialize a JSON value compactly, key order kept, for pricing opaque parts and inputs."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


@dataclass(frozen=True, slots=True)
class Pricer:
    """Prices the pieces of a message with one estimator.

    With a ``TokenizerEstimator`` a text costs ``len(encode(text))`` and every message (and every
    tool call) adds the estimator's ``per_message`` framing. Any other estimator prices a text by
    ``estimate_tokens`` and adds no framing, so a one-text message always costs exactly
    ``estimator.estimate_tokens(text)`` — the price a masking stub is given.
    """

    estimator: TokenEstimator
    framing: int

    @classmethod
    def of(cls, fmt: str, estimator: object) -> Pricer:
        """Return the pricer for ``estimator`` (``CharRatioEstimator()`` when ``None``)."""
        if estimator is None:
            return cls(CharRatioEstimator(), 0)
        if isinstance(estimator, TokenizerEstimator):
            return cls(estimator, estimator.per_message)
        if not callable(getattr(estimator, "estimate_tokens", None)):
            raise fail(fmt, None, "estimator must have estimate_tokens(text) -> int")
        return cls(estimator, 0)  # type: ignore[arg-type]

    def text(self, text: str) -> int:
        """Return the tokens of ``text`` without framing."""
        estimator = self.estimator
        if isinstance(estimator, TokenizerEstimator):
            return len(estimator.encode(text))
        count = estimator.estimate_tokens(text)
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise ValidationError(
                f"estimator returned {count!r} for a text; it must return an int >= 0",
                details={"field": "estimator"},
            )
        return count


@dataclass(frozen=True, slots=True)
class Part:
    """Where one turn came from.

    ``index`` is its message (``-1`` for request-level ``system=``), ``block`` the content block
    it starts at when a message is split (Anthropic tool results), ``maskable`` whether its body
    may be masked, and ``siblings`` how many turns its message was split into.
    """

    turn: TranscriptTurn
    index: int
    block: int | None
    maskable: bool
    siblings: int


@dataclass(frozen=True, slots=True)
class Binding:
    """What ``from_transcript`` needs to rebuild the messages of a view.

    It holds the messages as they are to be sent — the caller's own dicts (not copied, never
    changed), except that one carrying ``sticky`` or ``priority`` is held as a copy without
    those keys — the request-level ``system`` exactly as given, each turn's origin and the
    estimator that priced them.

    .. versionadded:: 0.1.0
    """

    format: str
    messages: tuple[dict[str, Any], ...]
    system: object
    parts: Mapping[str, Part]
    estimator: TokenEstimator = field(repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.parts, MappingProxyType):
            object.__setattr__(self, "parts", MappingProxyType(dict(self.parts)))


def system_turn(text: str, cost: int) -> TranscriptTurn:
    """Return the pinned turn that stands for request-level ``system=``; never emitted."""
    return TranscriptTurn("system", Role.SYSTEM, text, cost, None, pinned=True)


def read_marks(
    fmt: str,
    items: tuple[dict[str, Any], ...],
    turns: list[TranscriptTurn],
    parts: dict[str, Part],
    tool_names: Mapping[str, str],
    *,
    priority: Callable[[int, dict[str, Any]], int] | None = None,
    pin: Callable[[int, dict[str, Any]], bool] | None = None,
) -> tuple[dict[str, Any], ...]:
    """Mark the turns of ``items`` in place; return the messages as they are to be sent.

    A message's ``sticky: true`` or a true ``pin(index, message)`` pins its turns; its
    ``priority`` key, or ``priority(index, message)`` in its place, becomes their
    ``cutctx.priority``; ``tool_names`` (turn id to tool) becomes ``cutctx.tool_name``. A
    message with either key is sent as a copy without both; any other is sent as it is.

    Raises:
        ValidationError: naming the message for a ``sticky`` that is not a bool or a
            ``priority`` that is not an int (either key's or either callable's), or a
            ``priority``/``pin`` that is not callable.
    """
    for name, function in (("priority", priority), ("pin", pin)):
        if function is not None and not callable(function):
            raise fail(fmt, None, f"{name} must be callable(index, message)", field=name)
    marks: dict[int, tuple[bool, str | None]] = {}
    sent: list[dict[str, Any]] | None = None
    for index, message in enumerate(items):
        sticky, rank = False, None
        if STICKY_KEY in message or PRIORITY_KEY in message:
            sticky = _flag(fmt, index, message.get(STICKY_KEY, False), "sticky")
            if PRIORITY_KEY in message:
                rank = _integer(fmt, index, message[PRIORITY_KEY], "priority")
            if sent is None:
                sent = list(items)
            sent[index] = {k: v for k, v in message.items() if k not in _MARK_KEYS}
        if pin is not None:
            sticky = _flag(fmt, index, pin(index, message), "pin(index, message)") or sticky
        if priority is not None:
            rank = _integer(fmt, index, priority(index, message), "priority(index, message)")
        if sticky or rank is not None:
            marks[index] = (sticky, None if rank is None else str(rank))
    if marks or tool_names:
        _mark_turns(turns, parts, marks, tool_names)
    return items if sent is None else tuple(sent)


def _mark_turns(
    turns: list[TranscriptTurn],
    parts: dict[str, Part],
    marks: Mapping[int, tuple[bool, str | None]],
    tool_names: Mapping[str, str],
) -> None:
    """Replace each marked turn (pinned, priority, tool name) in ``turns`` and ``parts``."""
    for position, turn in enumerate(turns):
        part = parts[turn.turn_id]
        mark = marks.get(part.index)
        tool_name = tool_names.get(turn.turn_id)
        if mark is None and tool_name is None:
            continue
        metadata = dict(turn.metadata)
        pinned = turn.pinned
        if mark is not None:
            pinned = pinned or mark[0]
            if mark[1] is not None:
                metadata[PRIORITY_METADATA] = mark[1]
        if tool_name is not None:
            metadata[TOOL_NAME_METADATA] = tool_name
        marked = dataclasses.replace(turn, pinned=pinned, metadata=metadata)
        turns[position] = marked
        parts[turn.turn_id] = dataclasses.replace(part, turn=marked)


def _flag(fmt: str, index: int, value: object, what: str) -> bool:
    if not isinstance(value, bool):
        raise fail(fmt, index, f"{what} must be true or false, got {type(value).__name__}")
    return value


def _integer(fmt: str, index: int, value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise fail(fmt, index, f"{what} must be an integer, got {type(value).__name__}")
    return value


@dataclass(slots=True)
class Piece:
    """One message (or summary) of a view, in view order.

    ``index`` is its source message (``-1`` for a summary, whose text is ``text``); ``masked``
    maps the block of each masked part (``None`` for a whole body) to its stub.
    """

    index: int
    text: str = ""
    masked: dict[int | None, str] = field(default_factory=dict)
    seen: int = 0
    siblings: int = 1


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
                pieces.append(Piece(-1, turn.content))
                continue
            raise fail(
                fmt, None, f"turn {turn.turn_id!r} is not from this binding", turn_id=turn.turn_id
            )
        if part.index < 0:
            continue
        if current is None or current.index != part.index:
            _close(fmt, current)
            current = Piece(part.index, siblings=part.siblings)
            pieces.append(current)
        current.seen += 1
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
    _close(fmt, current)
    return pieces


def _close(fmt: str, piece: Piece | None) -> None:
    if piece is not None and piece.seen != piece.siblings:
        raise fail(
            fmt,
            piece.index,
            f"the view holds {piece.seen} of the message's {piece.siblings} turns",
        )


def image_size(data: str) -> tuple[int, int] | None:
    """Read a PNG's or GIF's width and height from the head of its base64 data, if it is one.

    Only the first 32 bytes are decoded: the size is metadata, never inferred from the length.
    """
    try:
        head = base64.b64decode(data[:44], validate=False)
    except ValueError:
        return None
    if head[:8] == b"\x89PNG\r\n\x1a\n" and len(head) >= 24:
        width = int.from_bytes(head[16:20], "big")
        height = int.from_bytes(head[20:24], "big")
    elif head[:4] == b"GIF8" and len(head) >= 10:
        width = int.from_bytes(head[6:8], "little")
        height = int.from_bytes(head[8:10], "little")
    else:
        return None
    if width <= 0 or height <= 0:
        return None
    return width, height


def data_url_payload(url: object) -> str | None:
    """Return the base64 payload of a ``data:...;base64,`` URL, else ``None``."""
    if isinstance(url, str) and url.startswith("data:"):
        head, _, payload = url.partition(",")
        if head.endswith(";base64"):
            return payload
    return None


def _ceil_div(numerator: int, denominator: int) -> int:
    return -(-numerator // denominator)


def openai_image_tokens(url: object, detail: object) -> int:
    """Price an OpenAI image from its metadata, never from the length of its data.

    85 at low detail; else 85 + 170 per 512-px tile after OpenAI's scaling (fit in 2048x2048,
    then the shortest side down to 768) when the size is readable from a PNG or GIF data URL,
    else ``OPENAI_IMAGE_UNSIZED_TOKENS``.
    """
    if detail == "low":
        return OPENAI_IMAGE_BASE_TOKENS
    payload = data_url_payload(url)
    size = image_size(payload) if payload is not None else None
    if size is None:
        return OPENAI_IMAGE_UNSIZED_TOKENS
    width, height = size
    # Exact integer scaling: a side scaled by num/den is side * num / den. If the shortest side
    # is still over 768 after fitting in 2048, the two steps compose to 768 / shortest.
    num, den = 1, 1
    if max(width, height) > 2048:
        num, den = 2048, max(width, height)
    if min(width, height) * num > 768 * den:
        num, den = 768, min(width, height)
    tiles = _ceil_div(width * num, den * 512) * _ceil_div(height * num, den * 512)
    return OPENAI_IMAGE_BASE_TOKENS + OPENAI_IMAGE_TILE_TOKENS * tiles


def stub_content(original: object, stub: str, part_type: str) -> object:
    """Return the masked body: the stub as a string, or as one text part if it was a list."""
    if isinstance(original, list | tuple):
        return [{"type": part_type, "text": stub}]
    return stub


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
    texts: list[str] = []
    cost = 0
    for position, value in enumerate(content):
        text, price = part(value, f"{where}[{position}]")
        cost += price
        if text or not skip_empty:
            texts.append(text)
    return joined(texts), cost


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
