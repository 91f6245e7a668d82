"""Recall: the originals of masked and excerpted tool results, paged back to the model.

A stub and an elision line name their original by ``sha256:`` digest (the digest of the
result's body, as a stub carries it). With recall on, they also name the tool ``cutctx_recall``;
the model calls it with that digest, and the caller routes the call to ``window.recall`` (or,
for a service that keeps only the history, ``cutctx.recall``), which answers with the
original's lines from ``start_line`` within ``max_tokens``, ending with a hint to continue.

A page is whole lines (``excerpts.page``) or, when one line alone is over the page (minified
JSON, base64), a run of that line's characters from ``start_char``: the hint then names the
``start_line`` and ``start_char`` that continue, so every page fits and the pages joined are the
original exactly. No argument is ever formatted whole (an integer of 5 000 digits cannot be).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from baseaicore import ValidationError

from cutctx._core.digest import json_string_digest
from cutctx._core.estimators import resolve_estimator
from cutctx._core.excerpts import lines_of, page
from cutctx._core.values import DEFAULT_PLACEHOLDER, Role, check_count
from cutctx._policies.stubs import INDEX_DIGITS
from cutctx.formats import resolve

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence

    from cutctx._core.protocols import TokenEstimator
    from cutctx._core.values import Transcript, TranscriptTurn
    from cutctx._loop.settings import Settings
    from cutctx.formats import Format, FormatName

__all__ = [
    "DEFAULT_PAGE_TOKENS",
    "RECALL_PLACEHOLDER",
    "RECALL_TOOL",
    "RecallIndex",
    "answer",
    "knows",
    "recall",
    "tool_of",
]

RECALL_TOOL: Final = "cutctx_recall"
"""The name of the recall tool (stubs and elision lines name it when recall is on)."""

RECALL_PLACEHOLDER: Final = (
    f"{DEFAULT_PLACEHOLDER[:-1]}; {RECALL_TOOL} reads it back by this sha256]"
)
"""The label of a masked stub when recall is on: it names the tool that reads the original."""

DEFAULT_PAGE_TOKENS: Final = 2_000
"""A recall page's ``max_tokens`` when no result cap says otherwise."""

_DESCRIPTION: Final = (
    "Read the original of a tool result that was masked, excerpted or dropped to fit the "
    "context: give the sha256 its stub, elision line or index names, and the line to start "
    "from. Long originals come in pages; each page ends by saying which start_line (and, "
    "inside a long line, start_char) continues it."
)
_UNKNOWN: Final = f"[{RECALL_TOOL}: no tool result with sha256 "
_UNSEEN: Final = (
    f"[{RECALL_TOOL}: this window was restored from a state and has not seen its history yet"
)
_HEX_DIGITS: Final = 64
_SHOWN: Final = 40
"""The most characters of a bad argument an explanation quotes."""


def tool_of(fmt: Format[Any], page_tokens: int) -> dict[str, Any]:
    """Return the recall tool's definition in ``fmt``'s shape; pages default to ``page_tokens``."""
    parameters = {
        "type": "object",
        "properties": {
            "sha256": {
                "type": "string",
                "description": ("The hex digits after sha256: in the stub, elision line or index."),
            },
            "start_line": {
                "type": "integer",
                "minimum": 1,
                "default": 1,
                "description": "The first line to read (1 is the first line of the original).",
            },
            "start_char": {
                "type": "integer",
                "minimum": 1,
                "default": 1,
                "description": "The first character of start_line to read (1 is its first).",
            },
            "max_tokens": {
                "type": "integer",
                "minimum": 1,
                "default": page_tokens,
                "description": f"The most tokens of one page (at most {page_tokens}).",
            },
        },
        "required": ["sha256"],
    }
    return fmt.tool_definition(RECALL_TOOL, _DESCRIPTION, parameters)


class RecallIndex:
    """The originals of every tool result seen, by the digest a stub of it names.

    ``complete`` is false while it may lack results (a window restored from a state indexes
    the old messages when it is first asked).
    """

    __slots__ = ("complete", "texts")

    def __init__(self, *, complete: bool = True) -> None:
        self.texts: dict[str, str] = {}
        self.complete = complete

    def fill(self, turns: Iterable[TranscriptTurn]) -> None:
        """Index the tool results among ``turns``, every one the window holds: now complete."""
        self.add(turns)
        self.complete = True

    def add(self, turns: Iterable[TranscriptTurn]) -> None:
        """Index the tool results among ``turns``."""
        texts = self.texts
        for turn in turns:
            if turn.role is Role.TOOL:
                texts.setdefault(json_string_digest(turn.content), turn.content)

    def answer(
        self, arguments: object, *, fmt: Format[Any], estimator: TokenEstimator, cap: int
    ) -> str:
        """Return the page ``arguments`` ask for, or a one-line explanation (never raises).

        ``max_tokens`` defaults to ``cap`` and is clamped to it; the page's message, framing
        included, is priced within it.
        """
        read = _arguments(arguments)
        if isinstance(read, str):
            return read
        digest = read.get("sha256")
        if not isinstance(digest, str) or not digest:
            return f"[{RECALL_TOOL}: sha256 (a string, the digest a stub names) is required]"
        digest = digest.strip().removeprefix("sha256:")
        text = self.texts.get(digest)
        if text is None and INDEX_DIGITS <= len(digest) < _HEX_DIGITS:
            # A recall index names a result by the first INDEX_DIGITS digits of its digest.
            found = [key for key in self.texts if key.startswith(digest)]
            if len(found) > 1:
                return f"[{RECALL_TOOL}: {digest!r} begins {len(found)} digests; give all 64]"
            text = self.texts[found[0]] if found else None
        if text is None:
            return f"{_UNKNOWN}{digest[:64]!r} is known here]"
        limit = read.get("max_tokens", cap)
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            return f"[{RECALL_TOOL}: max_tokens must be an integer of at least 1]"
        pricer = fmt.pricer(estimator)
        room = max(1, min(limit, cap) - pricer.framing)
        return paged(text, read.get("start_line", 1), read.get("start_char", 1), room, pricer.text)


def paged(
    text: str, start_line: object, start_char: object, room: int, price: Callable[[str], int]
) -> str:
    r"""Return the page of ``text`` from ``start_line`` and ``start_char`` within ``room``.

    Whole lines while the first of them fits (``excerpts.page``); else the longest run of the
    line's characters from ``start_char`` that fits with its hint (at least one), ending with
    ``[cutctx_recall: line {l} of {n}, characters {a}-{b} of {m}; continue with start_line=..,
    start_char=..]`` on a line of its own (the line break before it is the original's when the
    run ends the line). An empty original is an empty page; a bad argument a one-line
    explanation.

    >>> paged("a\nb\n", 2, 1, 100, len)
    'b\n'
    >>> print(paged("0123456789" * 12, 1, 1, 100, len))
    012345
    [cutctx_recall: line 1 of 1, characters 1-6 of 120; continue with start_line=1, start_char=7]
    """
    for name, value in (("start_line", start_line), ("start_char", start_char)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            return f"[{RECALL_TOOL}: {name} must be an integer of at least 1, got {_shown(value)}]"
    assert isinstance(start_line, int)  # noqa: S101 - checked just above
    assert isinstance(start_char, int)  # noqa: S101 - checked just above
    lines = lines_of(text)
    count = len(lines)
    if not lines and start_line == start_char == 1:
        return ""
    if start_line > count:
        return f"[{RECALL_TOOL}: start_line is past the end: the text has {_count(count, 'line')}]"
    line = lines[start_line - 1]
    if start_char > len(line):
        return (
            f"[{RECALL_TOOL}: start_char is past the end of line {start_line}: it has "
            f"{_count(len(line), 'character')}]"
        )
    if start_char == 1:
        whole = page(text, start_line, room, price)
        if price(whole) <= room:
            return whole
    return _characters(line, start_line, count, start_char, room, price)


def _characters(  # noqa: PLR0917 - one line's position, as paged names it
    line: str, number: int, count: int, start: int, room: int, price: Callable[[str], int]
) -> str:
    """Return the characters of ``line`` (line ``number`` of ``count``) from ``start`` that fit."""
    size = len(line)

    def body(end: int) -> str:
        run = line[start - 1 : end]
        if end == size and number == count:
            return run  # the rest of the original: the last page
        following = (
            f"start_line={number}, start_char={end + 1}"
            if end < size
            else f"start_line={number + 1}"
        )
        hint = (
            f"[{RECALL_TOOL}: line {number} of {count}, characters {start}-{end} of {size}; "
            f"continue with {following}]"
        )
        return run + hint if run.endswith("\n") else f"{run}\n{hint}"

    good, step, high = start, 1, size  # galloping, then halving: priced texts stay small
    if price(body(good)) > room:
        return body(good)  # not even one character fits with its hint: one, to move on
    while good < high:
        probe = min(high, good + step)
        if price(body(probe)) > room:
            high = probe - 1
            break
        good, step = probe, step * 2
    while good < high:
        middle = (good + high + 1) // 2
        if price(body(middle)) <= room:
            good = middle
        else:
            high = middle - 1
    return body(good)


def _count(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def _shown(value: object) -> str:
    """``value``'s repr, cut short; an integer too long to write is named, not written."""
    if isinstance(value, int) and value.bit_length() > 128:  # about 39 digits
        return f"an integer of {value.bit_length()} bits"
    return f"{value!r:.{_SHOWN}}"


def answer(
    index: RecallIndex | None,
    arguments: object,
    fmt: Format[Any],
    settings: Settings,
    *,
    unseen: bool = False,
) -> str:
    """Answer a window's recall call from its ``index`` (``None``: recall is off).

    ``unseen``: the window was restored and has not been handed its history yet.
    """
    if index is None:
        return f"[{RECALL_TOOL}: recall is off for this window (ContextWindow(recall=True))]"
    if unseen:
        return f"{_UNSEEN}: call prepare(history) first, or cutctx.recall(history, ...)]"
    cap = settings.max_result_tokens or DEFAULT_PAGE_TOKENS
    return index.answer(arguments, fmt=fmt, estimator=settings.estimator, cap=cap)


def knows(answer: str) -> bool:
    """Whether a window's recall ``answer`` came from a window that could know the original.

    False for "no tool result with that sha256 is known here" and "not seen its history yet":
    another window (of another conversation) may know it.
    """
    return not answer.startswith((_UNKNOWN, _UNSEEN))


def _arguments(arguments: object) -> Mapping[str, Any] | str:
    if isinstance(arguments, str | bytes):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return f"[{RECALL_TOOL}: the arguments are not JSON]"
    if not isinstance(arguments, Mapping):
        return f"[{RECALL_TOOL}: the arguments must be an object with sha256]"
    return arguments


def recall(
    messages: Sequence[Any],
    arguments: object,
    *,
    format: FormatName | Format[Any],
    estimator: TokenEstimator | str | None = None,
    max_tokens: int = DEFAULT_PAGE_TOKENS,
) -> str:
    """Answer a ``cutctx_recall`` call from a history alone: a page of the original.

    ``messages`` is the history (of ``format``) that holds the original tool result — the
    history a tool sees, ending with the assistant's unanswered call, is read up to that call;
    ``arguments`` the call's (a mapping or its JSON text). It reads the whole history: a
    window answers the same in O(1) (``window.recall``).

    Returns:
        The original's lines from ``start_line`` within ``max_tokens`` (ending with one line
        naming the ``start_line`` that continues, if any are left), or, when one line is over
        the page, that line's characters from ``start_char`` (the hint names both); an empty
        original is an empty page; a one-line explanation for an unknown digest or a bad
        argument.

    Raises:
        ValidationError: for malformed messages, an unknown format or a bad ``max_tokens``.

    .. versionadded:: 0.1.1
    """
    fmt = resolve(format, owner="recall")
    cap = check_count("recall", "max_tokens", max_tokens)
    if cap < 1:
        raise ValidationError(
            f"recall: max_tokens must be at least 1, got {cap}", details={"field": "max_tokens"}
        )
    chosen = resolve_estimator(estimator, owner="recall")  # None: TextEstimator
    transcript = _readable(fmt, messages, chosen)
    index = RecallIndex()
    index.add(transcript.turns)
    return index.answer(arguments, fmt=fmt, estimator=chosen, cap=max(1, cap))


def _readable(fmt: Format[Any], messages: Sequence[Any], estimator: TokenEstimator) -> Transcript:
    """Return the transcript of ``messages``, or of those before its unanswered last turn.

    The history a tool sees ends with the assistant's call asking for the page, unanswered,
    which the format refuses (naming the message). It is read up to that message when nothing
    after it reads as anything but the assistant's (a user message or a result after an
    unanswered call is a malformed history, refused as it is).

    Raises:
        ValidationError: the format's, for any other history it refuses.
    """
    try:
        return fmt.to_transcript(messages, estimator=estimator)[0]
    except ValidationError as refused:
        details = refused.details if isinstance(refused.details, Mapping) else {}
        where = details.get("index")
        if not isinstance(where, int) or isinstance(where, bool) or not 0 < where < len(messages):
            raise
        fmt.reader(estimator=estimator).read(messages)  # refused short of its end: raised as is
        for message in messages[where:]:
            try:
                alone = fmt.to_transcript([message], estimator=estimator)[0]
            except ValidationError:
                continue  # an assistant message whose calls are not answered yet
            if any(turn.role is not Role.ASSISTANT for turn in alone.turns):
                raise refused from None
        return fmt.to_transcript(messages[:where], estimator=estimator)[0]
