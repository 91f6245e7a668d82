"""A small agent transcript whose tool results outgrow a result cap, and an excerpt oracle.

The oracle (``readings``, ``bare_elision``) restates the excerpt's promise from
docs/contract.md without the code under test.

Priced by the character default (``ceil(len / 4)``), each result with 3 tokens of framing::

    s     SYSTEM      10
    task  USER        20   pinned
    a1    ASSISTANT   10   call c1
    r1    TOOL        396  call c1   120 lines of build log
    n1    ASSISTANT   10
    a2    ASSISTANT   10   call c2
    r2    TOOL        241  call c2   80 lines of test output
    n2    ASSISTANT   10
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING, Final

from baseaicore import sha256_of

from cutctx import CompactionBudget, Role, Transcript, TranscriptTurn
from cutctx._core.digest import json_string_digest
from cutctx._core.excerpts import elision_line

if TYPE_CHECKING:
    from collections.abc import Callable

CAP: Final = 80
FRAMING: Final = 3


def chars(text: str) -> int:
    """The character default's price, restated."""
    return math.ceil(len(text) / 4)


def log(lines: int, word: str = "step") -> str:
    """A log of ``lines`` numbered lines."""
    return "".join(f"{word} {n}: ok\n" for n in range(1, lines + 1))


def result(turn_id: str, call: str, text: str) -> TranscriptTurn:
    """A tool result priced at its text plus ``FRAMING``."""
    return TranscriptTurn(turn_id, Role.TOOL, text, chars(text) + FRAMING, call)


BUILD_LOG: Final = log(120, "build")
TEST_LOG: Final = log(80, "test")

AGENT: Final = Transcript(
    (
        TranscriptTurn("s", Role.SYSTEM, "You are careful.", 10),
        TranscriptTurn("task", Role.USER, "Fix the build.", 20, pinned=True),
        TranscriptTurn("a1", Role.ASSISTANT, "build it", 10, "c1"),
        result("r1", "c1", BUILD_LOG),
        TranscriptTurn("n1", Role.ASSISTANT, "it fails", 10),
        TranscriptTurn("a2", Role.ASSISTANT, "test it", 10, "c2"),
        result("r2", "c2", TEST_LOG),
        TranscriptTurn("n2", Role.ASSISTANT, "tests fail", 10),
    )
)


def capped(max_tokens: int, protected: int = 2, cap: int | None = CAP) -> CompactionBudget:
    """A budget over ``AGENT`` with the result cap (two protected turns: ``r2`` and ``n2``)."""
    return CompactionBudget(max_tokens, protected, max_result_tokens=cap)


def lines_of(text: str) -> list[str]:
    """Lines ending in a newline only (``splitlines`` also splits at carriage returns)."""
    pieces = text.split("\n")
    return [piece + "\n" for piece in pieces[:-1]] + ([pieces[-1]] if pieces[-1] else [])


ELISION: Final = re.compile(
    r"\[cutctx: (\d+) lines? left out \((\d+) tokens?\), sha256:([0-9a-f]{64})"
    r"(?:; call (.+) with this sha256 and start_line=(\d+) to read them)?\]"
)
"""The elision line, restated from docs/contract.md."""


def readings(original: str, made: str) -> list[tuple[int, int, int, re.Match[str]]]:
    """Every way ``made`` is head lines (or a cut first line), one elision line and tail lines.

    Each reading is (head lines, cut characters, tail lines, the elision line's match): a
    brute-force search over the positions, independent of the code under test.
    """
    kept = lines_of(original)
    made_lines = lines_of(made)
    found: list[tuple[int, int, int, re.Match[str]]] = []
    for index, line in enumerate(made_lines):
        said = ELISION.fullmatch(line.removesuffix("\n"))
        if said is None:
            continue
        before = "".join(made_lines[:index])
        after = "".join(made_lines[index + 1 :])
        if line.endswith("\n") != bool(after):
            continue
        tails = [t for t in range(len(kept) + 1) if "".join(kept[len(kept) - t :]) == after]
        heads = [h for h in range(len(kept) + 1) if "".join(kept[:h]) == before]
        found += [(h, 0, t, said) for h in heads for t in tails if h + t < len(kept)]
        cut = before.removesuffix("\n")
        first = kept[0].removesuffix("\n") if kept else ""
        if index == 1 and cut and first.startswith(cut) and len(cut) < len(first):
            found += [(0, len(cut), t, said) for t in tails if t < len(kept)]
    return found


def plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def bare_elision(text: str, price: Callable[[str], int], tool: str | None = None) -> str:
    """The elision line of an excerpt that keeps nothing: the smallest excerpt there is."""
    said = (
        f"[cutctx: {plural(len(lines_of(text)), 'line')} left out "
        f"({plural(max(0, price(text) - price('')), 'token')}), sha256:{sha256_of(text)}"
    )
    if tool is not None:
        said += f"; call {tool} with this sha256 and start_line=1 to read them"
    return said + "]"


def documented_candidates(
    text: str,
    max_tokens: int,
    price: Callable[[str], int],
    framing: int = 0,
    *,
    left: Callable[[int, int, int], int] | None = None,
    places: int | None = None,
) -> list[str]:
    """Every excerpt the documented split makes that fits, in the order it takes them.

    Lines are taken first, last, second, second to last, ..., each candidate priced whole,
    until one does not fit; then the other end goes on alone; when no whole line of the head
    fits, its head is cut at every character in turn (with ``places``, at the multiples of
    ``len(first line) // places``, at least one). ``left(head, tail, cut)`` is the elision
    line's token figure (by default the original's price less the kept text's). The last
    candidate is the longest that fits, for a price that never falls as text is added; it
    prices every candidate, so it is slow. Empty when ``text`` fits whole or nothing fits.
    """
    room = max_tokens - framing
    total = price(text)
    if total <= room or not text:
        return []
    lines = lines_of(text)
    count = len(lines)
    digest = json_string_digest(text)

    def made(head: int, tail: int, cut: int = 0) -> str:
        kept_head = "".join(lines[:head]) + (lines[0][:cut] if cut else "")
        kept_tail = "".join(lines[count - tail :]) if tail else ""
        figure = (
            max(0, total - price(kept_head + kept_tail)) if left is None else left(head, tail, cut)
        )
        said = elision_line(count - head - tail, figure, digest, None, head + 1)
        return kept_head + ("\n" if cut else "") + said + ("\n" if kept_tail else "") + kept_tail

    fitting: list[str] = []

    def fits(head: int, tail: int, cut: int = 0) -> bool:
        candidate = made(head, tail, cut)
        if price(candidate) > room:
            return False
        fitting.append(candidate)
        return True

    if not fits(0, 0):
        return []
    steps = 0
    while steps < count - 1 and fits((steps + 2) // 2, (steps + 1) // 2):
        steps += 1
    head, tail = (steps + 1) // 2, steps // 2
    if steps < count - 1 and steps % 2 == 0:
        while head + tail < count - 1 and fits(head, tail + 1):
            tail += 1
    elif steps < count - 1:
        while head + tail < count - 1 and fits(head + 1, tail):
            head += 1
    if head == 0:
        size = 1 if places is None else max(1, len(lines[0]) // places)
        cut = size
        while cut < len(lines[0].removesuffix("\n")) and fits(0, tail, cut):
            cut += size
    return fitting


def documented_excerpt(
    text: str, max_tokens: int, price: Callable[[str], int], framing: int = 0
) -> str | None:
    """The excerpt the documented split gives: the last candidate that fits, or ``None``."""
    candidates = documented_candidates(text, max_tokens, price, framing)
    return candidates[-1] if candidates else None
