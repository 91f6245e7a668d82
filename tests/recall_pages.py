"""Reading an original back through ``cutctx_recall`` by its continue hints, checking each page.

The reader follows only what the pages say (docs/agent-loop.md, "Excerpts and recall"): a page
of whole lines ends with ``[cutctx_recall: lines a-b of n; continue with start_line=b+1]``; a
page inside one long line ends with ``[cutctx_recall: line l of n, characters a-b of m; continue
with start_line=.., start_char=..]`` on a line of its own (the original's own line break serves
when the run ends the line); the last page has no hint. It checks every page against the
original and returns the pages, whose join must be the original.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Final

from tests.excerpt_cases import lines_of

if TYPE_CHECKING:
    from collections.abc import Callable

LINES: Final = re.compile(
    r"\[cutctx_recall: lines (\d+)-(\d+) of (\d+); continue with start_line=(\d+)\]"
)
CHARS: Final = re.compile(
    r"\[cutctx_recall: line (\d+) of (\d+), characters (\d+)-(\d+) of (\d+); "
    r"continue with start_line=(\d+)(?:, start_char=(\d+))?\]"
)


def pages_of(
    answer: Callable[[dict[str, Any]], str], digest: str, original: str, **extra: Any
) -> list[str]:
    """Page ``original`` from its start by the hints; return each page's piece of it.

    ``answer`` is ``window.recall`` (or a ``cutctx.recall`` over a history); ``extra`` goes
    into every call's arguments (``max_tokens``).
    """
    kept = lines_of(original)
    line, char, pieces, pages = 1, 1, [], 0
    while True:
        pages += 1
        assert pages <= len(original) + 1, "the pages do not move on"
        arguments = {"sha256": digest, "start_line": line, **extra}
        if char != 1:
            arguments["start_char"] = char
        made = answer(arguments)
        rest = "".join(kept[line - 1 :])[char - 1 :]
        if made == rest:
            pieces.append(made)
            return pieces
        body, _, last = made.rpartition("\n")
        whole = LINES.fullmatch(last)
        if whole is not None:
            first, end, count, following = map(int, whole.groups())
            assert (char, first, count, following) == (1, line, len(kept), end + 1), made
            assert body + "\n" == "".join(kept[first - 1 : end])
            pieces.append(body + "\n")
            line = following
            continue
        part = CHARS.fullmatch(last)
        assert part is not None, f"a page that is not the rest ends without a hint: {made!r:.200}"
        number, count, start, end, size = map(int, part.groups()[:5])
        assert (number, count, start, size) == (line, len(kept), char, len(kept[line - 1]))
        piece = kept[line - 1][start - 1 : end]
        assert made == (piece + last if piece.endswith("\n") else f"{piece}\n{last}"), made
        following_line, following_char = part.group(6), part.group(7)
        if end < size:
            assert (int(following_line), following_char) == (line, str(end + 1))
        else:
            assert (int(following_line), following_char) == (line + 1, None)
        pieces.append(piece)
        line, char = int(following_line), int(following_char or 1)


def read_all(answer: Callable[[dict[str, Any]], str], digest: str, original: str) -> str:
    """The pages of ``original`` joined (see ``pages_of``)."""
    return "".join(pages_of(answer, digest, original))
