"""Recall: the originals of masked and excerpted tool results, paged back to the model.

A stub and an elision line name their original by ``sha256:`` digest (the digest of the
result's body, as a stub carries it). With recall on, they also name the tool ``cutctx_recall``;
the model calls it with that digest, and the caller routes the call to ``window.recall`` (or,
for a service that keeps only the history, ``cutctx.recall``), which answers with the
original's lines from ``start_line`` within ``max_tokens``, ending with a hint to continue.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from baseaicore import ValidationError

from cutctx._core.digest import json_string_digest
from cutctx._core.estimators import resolve_estimator
from cutctx._core.excerpts import page
from cutctx._core.values import DEFAULT_PLACEHOLDER, Role, check_count
from cutctx.formats import resolve

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from cutctx._core.protocols import TokenEstimator
    from cutctx._core.values import TranscriptTurn
    from cutctx._loop.settings import Settings
    from cutctx.formats import Format, FormatName

__all__ = [
    "DEFAULT_PAGE_TOKENS",
    "RECALL_PLACEHOLDER",
    "RECALL_TOOL",
    "RecallIndex",
    "answer",
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
    "Read the original of a tool result that was masked or excerpted to fit the context: give "
    "the sha256 its stub or elision line names, and the line to start from. Long originals come "
    "in pages; each page ends by saying which start_line continues it."
)


def tool_of(fmt: Format[Any], page_tokens: int) -> dict[str, Any]:
    """Return the recall tool's definition in ``fmt``'s shape; pages default to ``page_tokens``."""
    parameters = {
        "type": "object",
        "properties": {
            "sha256": {
                "type": "string",
                "description": "The 64 hex digits after sha256: in the stub or elision line.",
            },
            "start_line": {
                "type": "integer",
                "minimum": 1,
                "default": 1,
                "description": "The first line to read (1 is the first line of the original).",
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
        if text is None:
            return f"[{RECALL_TOOL}: no tool result with sha256 {digest[:64]!r} is known here]"
        limit = read.get("max_tokens", cap)
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            return f"[{RECALL_TOOL}: max_tokens must be an integer of at least 1]"
        pricer = fmt.pricer(estimator)
        room = max(1, min(limit, cap) - pricer.framing)
        return page(text, read.get("start_line", 1), room, pricer.text)


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
        return (
            f"[{RECALL_TOOL}: this window was restored from a state and has not seen its "
            "history yet: call prepare(history) first, or cutctx.recall(history, ...)]"
        )
    cap = settings.cap or DEFAULT_PAGE_TOKENS
    return index.answer(arguments, fmt=fmt, estimator=settings.estimator, cap=cap)


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

    ``messages`` is the history (of ``format``) that holds the original tool result;
    ``arguments`` the call's (a mapping or its JSON text). It reads the whole history: a
    window answers the same in O(1) (``window.recall``).

    Returns:
        The original's lines from ``start_line`` within ``max_tokens`` (ending with one line
        naming the ``start_line`` that continues, if any are left), or a one-line explanation
        for an unknown digest or a bad argument.

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
    transcript, _ = fmt.to_transcript(messages, estimator=chosen)
    index = RecallIndex()
    index.add(transcript.turns)
    return index.answer(arguments, fmt=fmt, estimator=chosen, cap=max(1, cap))
