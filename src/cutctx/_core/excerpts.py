r"""Excerpts of a tool result over the cap, and pages of an original for recall.

A *line* is text ending in ``"\n"``; the last line of a text may lack it, and nothing else
splits lines (``"\r"`` stays inside its line). An excerpt is the original's first lines, exactly
one elision line, and its last lines, verbatim and whole; the elision line says how many lines
and tokens were left out and names the original's digest (the one a masked stub of it carries).
When not even the first line fits, the excerpt keeps that line's head, cut at a character
(a window's quick excerpts: at one of 1 024 evenly spaced places), followed by a line break and
the elision line. A page is a run of the original's lines from a given line, ending with a line
that says where to go on when lines remain.

Everything here is pure: the caller hands in the function that prices a text. The choices (the
head and tail split, the wording, the search) are in docs/design.md, "Excerpts".
"""

from __future__ import annotations

import math
import re
from bisect import bisect_right
from typing import TYPE_CHECKING, Final, NamedTuple

from baseaicore import ValidationError

from cutctx._core.digest import json_string_digest

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    Price = Callable[[str], int]

__all__ = [
    "Elision",
    "check_recall_tool",
    "elision_line",
    "excerpt",
    "lines_of",
    "page",
    "parse_excerpt",
    "priced_excerpt",
    "shown_excerpt",
]

_ELISION: Final = re.compile(
    r"\[cutctx: ([0-9]+) lines? left out \(([0-9]+) tokens?\), sha256:([0-9a-f]{64})"
    r"(?:; call (.+) with this sha256 and start_line=([0-9]+) to read them)?\]",
    re.ASCII | re.DOTALL,
)
_MARK: Final = "[cutctx: "
"""How every elision line starts: a cheap test before the pattern."""
_SHOWN: Final = 40
"""Characters of a bad argument shown in a page's explanation."""


class Elision(NamedTuple):
    """What an excerpt kept of its original, read back by ``parse_excerpt``.

    ``head`` and ``tail`` count the whole lines kept at either end; ``cut`` the characters kept
    of the first line when no whole line is (0 otherwise). ``left_lines``, ``left_tokens``,
    ``digest``, ``recall_tool`` and ``start_line`` are what the elision line says.
    """

    head: int
    cut: int
    tail: int
    left_lines: int
    left_tokens: int
    digest: str
    recall_tool: str | None
    start_line: int | None


def lines_of(text: str) -> list[str]:
    r"""Return the lines of ``text``, each with its ``"\n"`` (the last may lack it).

    ``"".join(lines_of(text)) == text``; the empty text has no lines.
    """
    pieces = text.split("\n")
    lines = [piece + "\n" for piece in pieces[:-1]]
    if pieces[-1]:
        lines.append(pieces[-1])
    return lines


def check_recall_tool(owner: str, value: object) -> str | None:
    """Return ``value`` if it is ``None`` or a tool name on one line, else raise."""
    if value is None:
        return None
    if not isinstance(value, str) or not value or value.isspace() or "\n" in value:
        raise ValidationError(
            f"{owner}.recall_tool must be None or a tool name on one line, got {value!r:.40}",
            details={"field": f"{owner}.recall_tool", "expected": "a tool name on one line"},
        )
    return value


def _count(text: str) -> int:
    """Return how many lines ``text`` holds, without splitting it."""
    return text.count("\n") + (1 if text and not text.endswith("\n") else 0)


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def elision_line(
    left_lines: int,
    left_tokens: int,
    digest: str,
    recall_tool: str | None = None,
    start_line: int = 1,
) -> str:
    """Return the elision line (without its line break) for the facts given.

    ``[cutctx: 412 lines left out (5120 tokens), sha256:<hex>]``; with ``recall_tool`` it goes
    on ``; call <tool> with this sha256 and start_line=<n> to read them]``.
    """
    said = (
        f"[cutctx: {_plural(left_lines, 'line')} left out ({_plural(left_tokens, 'token')}), "
        f"sha256:{digest}"
    )
    if recall_tool is not None:
        said += f"; call {recall_tool} with this sha256 and start_line={start_line} to read them"
    return said + "]"


def _largest(fits: Callable[[int], bool], low: int, high: int) -> int:
    """Return the largest ``k`` in ``[low, high]`` that ``fits``, given that ``low`` fits.

    Galloping (``low + 1, low + 2, low + 4, ...``), then halving between the last fit and the
    first miss: the texts priced stay within twice the size of the answer, however long the
    original. Exact for prices that never fall as text is added; deterministic for any.
    """
    good, step = low, 1
    while good < high:
        probe = min(high, good + step)
        if not fits(probe):
            high = probe - 1
            break
        good, step = probe, step * 2
    while good < high:
        middle = (good + high + 1) // 2
        if fits(middle):
            good = middle
        else:
            high = middle - 1
    return good


_PIECE: Final = 2048
"""Characters priced together while locating an excerpt's end (see ``_Running``)."""
_SLACK: Final = 2
"""Tokens by which a text and a line priced apart may fall short of pricing them joined.

A line whose own price, added to the exact price of the longest excerpt found, passes the room
by more than this is not tried as a whole excerpt: a line break joining two texts, the rounding
of a price and the elision line's figures move a price by a token (measured: at most one, for
``TextEstimator`` and cl100k, over JSON, logs and code)."""
_GUESSES: Final = 4
"""Exact prices guided by the estimate before the search halves instead."""
_NEAR: Final = 128
"""An excerpt priced within ``room // _NEAR`` tokens of its room (under 1 %) ends the search."""
_CUTS: Final = 1024
"""Places a first line too long to keep whole may be cut at, evenly spaced (see ``cut_size``)."""


class _Running:
    """Estimated prices of the first ``k`` items of ``items`` (lines or characters), read lazily.

    The items are priced ``_PIECE`` characters at a time, and each piece's price is shared out
    over its items by their length: one pass over what is read, however many figures are asked.
    ``backwards`` reads the items from the end (a piece is priced in its original order).
    """

    __slots__ = ("backwards", "base", "items", "price", "sums", "whole")

    def __init__(
        self,
        items: Sequence[str],
        price: Price,
        base: int,
        whole: int | None,
        *,
        backwards: bool = False,
    ) -> None:
        self.items, self.price, self.base, self.backwards = items, price, base, backwards
        self.whole = whole  # the price of all the items, when known: never priced again
        self.sums = [0.0]  # ``base``, the empty text's price (a framing), is left out

    def at(self, count: int) -> float:
        """Return the estimated price of the first ``count`` items (``count <= len(items)``)."""
        sums = self.sums
        while len(sums) <= count:
            self._read()
        return sums[count]

    def reach(self, limit: float, high: int) -> int:
        """Return the largest ``k <= high`` whose estimate is at most ``limit`` (0 at least)."""
        sums = self.sums
        while sums[-1] <= limit and len(sums) <= high:
            self._read()
        return max(0, min(high, bisect_right(sums, limit) - 1))

    def _read(self) -> None:
        items, sums = self.items, self.sums
        start = len(sums) - 1
        end, size = start, 0
        while end < len(items) and size < _PIECE:
            size += len(items[len(items) - 1 - end] if self.backwards else items[end])
            end += 1
        if self.backwards:
            piece = items[len(items) - end : len(items) - start]
            taken = piece[::-1]
        else:
            piece = taken = items[start:end]
        whole = self.whole if end - start == len(items) else None
        cost = (self.price("".join(piece)) if whole is None else whole) - self.base
        base, run = sums[-1], 0
        for item in taken:
            run += len(item)
            sums.append(base + cost * run / size)


class _Excerpter:
    """One original, its lines and price, and the excerpts made of it (see ``excerpt``).

    The search for the longest excerpt that fits prices whole candidate excerpts, as the
    contract asks (prices need not add up), but few of them: an estimate that does add up (the
    original read once in pieces, ``_Running``), corrected by each exact price, names the next
    candidate, and the search halves when the estimate misleads it. For prices that never fall
    as text is added it finds what halving alone would find.
    """

    __slots__ = (
        "base",
        "chunks",
        "digest",
        "heads",
        "known",
        "lines",
        "price",
        "quick",
        "recall_tool",
        "room",
        "tails",
        "total",
    )

    def __init__(  # noqa: PLR0917 - the original, its price and the search's terms
        self,
        text: str,
        total: int,
        price: Price,
        room: int,
        recall_tool: str | None,
        quick: bool = False,
    ) -> None:
        self.quick = quick
        self.lines = lines_of(text)
        self.total = total
        self.price = price
        self.room = room
        self.recall_tool = recall_tool
        self.digest = json_string_digest(text)
        self.known: dict[tuple[int, int, int], tuple[str, int]] = {}  # the texts tried, priced
        self.base = price("")
        self.heads = _Running(self.lines, price, self.base, total)
        self.tails = _Running(self.lines, price, self.base, total, backwards=True)
        self.chunks: _Running | None = None  # the first line's, made when it is to be cut

    def left(self, head: int, tail: int, cut: int = 0) -> int:
        """Return the tokens an excerpt keeping ``head``, ``tail`` (or ``cut``) leaves out.

        Exact: the original's price less the kept text's. Quick: less the estimate of what is
        kept (``_Running``: the kept lines, or the first line's ``cut`` characters, read in
        priced pieces), rounded. Never below 0.
        """
        if not self.quick:
            lines = self.lines
            kept = "".join(lines[:head]) + (lines[0][:cut] if cut else "")
            kept += "".join(lines[len(lines) - tail :]) if tail else ""
            return max(0, self.total - self.price(kept))
        estimate = self.heads.at(head) + self.tails.at(tail)
        if cut:
            estimate += self.first().at(cut // self.cut_size())
        return max(0, self.total - self.base - math.floor(estimate + 0.5))

    def text(self, head: int, tail: int, cut: int = 0) -> str:
        """Return the excerpt keeping ``head`` and ``tail`` whole lines (or ``cut`` characters)."""
        lines = self.lines
        kept_head = "".join(lines[:head]) + (lines[0][:cut] if cut else "")
        kept_tail = "".join(lines[len(lines) - tail :]) if tail else ""
        left = self.left(head, tail, cut)
        said = elision_line(len(lines) - head - tail, left, self.digest, self.recall_tool, head + 1)
        return kept_head + ("\n" if cut else "") + said + ("\n" if kept_tail else "") + kept_tail

    def cut_size(self) -> int:
        """Return the characters between two places the first line may be cut at.

        Quick: one of ``_CUTS`` evenly spaced places; exact: any character.
        """
        return max(1, len(self.lines[0]) // _CUTS) if self.quick else 1

    def first(self) -> _Running:
        """Return the running estimate of the first line, read ``cut_size()`` characters a step."""
        if self.chunks is None:
            line, size = self.lines[0], self.cut_size()
            chunks = [line[start : start + size] for start in range(0, len(line), size)]
            whole = self.total if len(self.lines) == 1 else None
            self.chunks = _Running(chunks, self.price, self.base, whole)
        return self.chunks

    def made(self, head: int, tail: int, cut: int = 0) -> tuple[str, int]:
        """Return the excerpt ``text(head, tail, cut)`` and its price (each made once)."""
        key = (head, tail, cut)
        found = self.known.get(key)
        if found is None:
            text = self.text(head, tail, cut)
            found = self.known[key] = (text, self.price(text))
        return found

    def cost(self, head: int, tail: int, cut: int = 0) -> int:
        """Return the price of the excerpt ``text(head, tail, cut)``."""
        return self.made(head, tail, cut)[1]

    def settle(
        self,
        cost: Callable[[int], int],
        guess: Callable[[float, int, int], int],
        estimate: Callable[[int], float],
        next_price: Callable[[int], int],
        *,
        low: int,
        high: int,
    ) -> int:
        """Return a ``k`` in ``[low, high]`` whose ``cost`` fits, given ``low`` fits.

        The ``k`` returned is the largest that fits, or one whose cost is within ``near()`` of
        the room: the search aims a little under the room, so that its first exact price
        usually ends it. ``estimate(k)`` adds up (it may be off by a constant: each exact price
        corrects it); ``guess(limit, low, high)`` is the largest ``k`` in ``[low, high]`` it
        puts at most at ``limit``; ``next_price(k)`` the price of what ``k + 1`` adds (0 if
        unknown). The longest fit found is kept when what the next step adds alone passes the
        room by more than ``_SLACK``; otherwise the next step is priced whole. After
        ``_GUESSES`` exact prices the search gallops from the longest fit and halves, as
        ``_largest`` does.
        """
        room, near = self.room, self.near()
        fits, over = low, high + 1
        price = cost(low)
        if near is not None and room - price <= near:
            return low
        aim = room if near is None else room - near // 2
        shift = price - estimate(low)
        tries, stride = 0, 1
        while over - fits > 1:
            tries += 1
            if tries > _GUESSES:
                probe = fits + stride if over > high else (fits + over) // 2
                probe, stride = min(probe, over - 1), stride * 2
            else:
                probe = min(max(guess(aim - shift, fits, over - 1), fits), over - 1)
                if probe == fits:
                    if cost(fits) + next_price(fits) - self.base - _SLACK > room:
                        return fits
                    probe = fits + 1
            price = cost(probe)
            if price > room:
                over = probe
            elif near is not None and room - price <= near:
                return probe
            else:
                fits = probe
            shift = price - estimate(probe)
        return fits

    def near(self) -> int | None:
        """Return how far under the room an excerpt may end the search, or ``None``.

        Quick: ``_NEAR``'s share of the room; exact: ``None``, the longest that fits.
        """
        return max(_SLACK, self.room // _NEAR) if self.quick else None

    def best(self) -> tuple[str, int] | None:
        """Return the excerpt the documented split gives and its price, or ``None``."""
        if self.cost(0, 0) > self.room:
            return None
        count, lines, heads, tails = len(self.lines), self.lines, self.heads, self.tails
        price = self.price

        # Lines are taken in turn, head first: after m steps the head holds ceil(m/2) lines
        # and the tail floor(m/2); at least one line is always left out.
        def turns(limit: float, low: int, high: int) -> int:
            steps = low
            while steps < high and heads.at((steps + 2) // 2) + tails.at((steps + 1) // 2) <= limit:
                steps += 1
            return steps

        def taken(steps: int) -> int:  # the price of the line step ``steps + 1`` takes
            line = lines[steps // 2] if steps % 2 == 0 else lines[count - 1 - steps // 2]
            return price(line)

        steps = self.settle(
            lambda m: self.cost((m + 1) // 2, m // 2),
            turns,
            lambda m: heads.at((m + 1) // 2) + tails.at(m // 2),
            taken,
            low=0,
            high=count - 1,
        )
        head, tail = (steps + 1) // 2, steps // 2
        if steps < count - 1:
            if steps % 2 == 0:  # the head's next line did not fit: the tail goes on alone
                fixed = heads.at(head)
                tail = self.settle(
                    lambda t: self.cost(head, t),
                    lambda limit, low, high: (
                        tails.reach(limit - fixed, high) if high > low else low
                    ),
                    lambda t: fixed + tails.at(t),
                    lambda t: price(lines[count - 1 - t]),
                    low=tail,
                    high=count - 1 - head,
                )
            else:  # the tail's did not: the head goes on alone
                fixed = tails.at(tail)
                head = self.settle(
                    lambda h: self.cost(h, tail),
                    lambda limit, low, high: (
                        heads.reach(limit - fixed, high) if high > low else low
                    ),
                    lambda h: fixed + heads.at(h),
                    lambda h: price(lines[h]),
                    low=head,
                    high=count - 1 - tail,
                )
        cut = 0
        if head == 0:
            # Not even the first line fits whole: keep its head, cut at a multiple of
            # ``cut_size()`` characters, and never all of it (its whole text would read as a
            # kept line).
            size = self.cut_size()
            longest = (len(lines[0].removesuffix("\n")) - 1) // size
            if longest > 0:
                first, chunks = self.first(), self.first().items
                fixed = tails.at(tail)
                cut = size * self.settle(
                    lambda c: self.cost(0, tail, c * size),
                    lambda limit, low, high: (
                        first.reach(limit - fixed, high) if high > low else low
                    ),
                    lambda c: fixed + first.at(c),
                    lambda c: price(chunks[c]) if size > 1 else 0,
                    low=0,
                    high=longest,
                )
        return self.made(head, tail, cut)


def excerpt(
    text: str,
    max_tokens: int,
    price: Price,
    framing: int = 0,
    *,
    recall_tool: str | None = None,
) -> str | None:
    r"""Return the excerpt of ``text`` that ``price`` puts, with ``framing``, within ``max_tokens``.

    The excerpt is the first lines of ``text``, one elision line and its last lines, verbatim
    and whole, so that ``framing + price(excerpt) <= max_tokens``; the elision line says how
    many lines and tokens were left out (the tokens: ``price(text)`` less the price of the kept
    lines) and names ``sha256:`` + the digest a masked stub of ``text`` carries. Lines are taken
    in turn, head first (first, last, second, second to last, ...); when one end's next line
    does not fit, the other end goes on alone. When not even the first line fits, its head is
    kept, cut at a character, then a line break and the elision line. With ``recall_tool``
    the elision line also says how to read the rest (``call <tool> with this sha256 and
    start_line=<n>``); without it, it names no tool.

    Returns ``None`` when ``text`` fits whole (nothing to leave out) or not even the elision
    line fits.

    >>> log = "".join(f"line {n}\n" for n in range(1, 41))
    >>> print(excerpt(log, 36, lambda text: len(text) // 4), end="")  # doctest: +ELLIPSIS
    line 1
    line 2
    [cutctx: 36 lines left out (70 tokens), sha256:e6e9d5bc...]
    line 39
    line 40

    .. versionadded:: 0.1.1

    Raises:
        ValidationError: if ``recall_tool`` is given and is not a name on one line.
    """
    made = priced_excerpt(text, max_tokens, price, framing, recall_tool=recall_tool)
    return None if made is None else made[0]


def priced_excerpt(
    text: str,
    max_tokens: int,
    price: Price,
    framing: int = 0,
    *,
    recall_tool: str | None = None,
    quick: bool = False,
) -> tuple[str, int] | None:
    """Return ``excerpt(...)`` and ``price`` of it, or ``None`` as ``excerpt`` does.

    ``quick`` (a window's excerpts of new results) prices each candidate once and few of them:
    the elision line's tokens are the original's price less an *estimate* of the kept lines,
    the excerpt is the longest that fits or one within 1 % of the room, and a first line too
    long to keep whole is cut at one of 1 024 evenly spaced places.

    Raises:
        ValidationError: as ``excerpt``.
    """
    check_recall_tool("excerpt", recall_tool)
    room = max_tokens - framing
    total = price(text)
    if total <= room or not text:
        return None
    return _Excerpter(text, total, price, room, recall_tool, quick).best()


def parse_excerpt(original: str, text: str) -> Elision | None:
    """Return what the excerpt ``text`` kept of ``original``, or ``None`` if it is no excerpt.

    An excerpt is a prefix of ``original``'s whole lines (or, alone, the head of its first
    line cut at a character and a line break), one elision line whose counts of lines left out
    (and start line, when it names a tool) are true, and a suffix of ``original``'s whole
    lines; the elision line ends with a line break exactly when a tail follows. The digest and
    the token figure it states are read, not checked (they are written by ``excerpt`` alone).
    """
    lines = lines_of(text)
    offset = 0
    for index, line in enumerate(lines):
        start, offset = offset, offset + len(line)
        if not line.startswith(_MARK):
            continue
        said = _ELISION.fullmatch(line.removesuffix("\n"))
        if said is None or line.endswith("\n") != (offset < len(text)):
            continue
        tail = text[offset:]
        found = _read(original, text[:start], tail, index, said) or (
            _read_cut(original, text[:start], tail, said) if index == 1 else None
        )
        if found is not None:
            return found
    return None


def shown_excerpt(parts: Sequence[str], shown: Sequence[bool], text: str) -> str:
    r"""Return the excerpt ``text`` of ``"\n".join(parts)`` with the parts not ``shown`` left out.

    A tool result of several blocks is read as their texts joined by line breaks, a block that is
    not text (an image) as a label line (``[image]``); ``text`` is an excerpt of that reading. A
    format that sends such blocks as themselves beside the excerpt sends this instead: of the
    excerpt's head and tail, what the shown parts hold, in order and verbatim, joined as they
    are in the reading, and the elision line between them on a line of its own. Its text is
    the excerpt's less whole lines: the excerpt's price bounds it.

    >>> parts = ["\n".join(f"line {n}" for n in range(1, 41)), "[image]"]
    >>> cut = excerpt("\n".join(parts), 36, lambda text: len(text) // 4)
    >>> cut.splitlines()[-2:]
    ['line 40', '[image]']
    >>> print(shown_excerpt(parts, [True, False], cut))  # doctest: +ELLIPSIS
    line 1
    line 2
    [cutctx: 37 lines left out (72 tokens), sha256:2f1d612d...]
    line 40

    Raises:
        ValueError: if ``text`` is no excerpt of the joined parts.
    """
    original = "\n".join(parts)
    said = parse_excerpt(original, text)
    if said is None:
        raise ValueError("shown_excerpt: the text is no excerpt of the parts")
    lines = lines_of(original)
    head = said.cut or sum(map(len, lines[: said.head]))
    tail = sum(map(len, lines[len(lines) - said.tail :])) if said.tail else 0
    elision = text[head + (1 if said.cut else 0) : len(text) - tail].removesuffix("\n")
    starts, kept = [], []  # where each shown part starts in the reading and in what is sent
    at = sent = 0
    for part, show in zip(parts, shown, strict=True):
        if show:
            starts.append((at, sent, len(part)))
            kept.append(part)
            sent += len(part) + 1
        at += len(part) + 1
    sends = "\n".join(kept)

    def where(position: int) -> int:  # the place in what is sent of a place in the reading
        for start, start_sent, size in starts:
            if position <= start + size:
                return start_sent + max(0, position - start)
        return len(sends)

    before = sends[: where(head)]
    after = sends[where(len(original) - tail) :] if tail else ""
    return (
        before
        + ("\n" if before and not before.endswith("\n") else "")
        + elision
        + ("\n" + after if after else "")
    )


def _tail_start(original: str, head: int, tail: str) -> int | None:
    """Return where ``tail`` begins in ``original``: whole last lines, after ``head`` chars."""
    start = len(original) - len(tail)
    if start <= head or not original.endswith(tail):
        return None
    if tail and original[start - 1] != "\n":
        return None
    return start


def _elision(said: re.Match[str], middle: str, head: int, cut: int, tail: str) -> Elision | None:
    """Return the reading if the elision line's counts are true of the ``middle`` left out."""
    left_lines = int(said.group(1))
    start_line = None if said.group(5) is None else int(said.group(5))
    if left_lines != _count(middle) or start_line not in (None, head + 1):
        return None
    return Elision(
        head,
        cut,
        _count(tail),
        left_lines,
        int(said.group(2)),
        said.group(3),
        said.group(4),
        start_line,
    )


def _read(original: str, head: str, tail: str, lines: int, said: re.Match[str]) -> Elision | None:
    """Read ``head`` (``lines`` whole lines), the elision line and ``tail`` against ``original``."""
    if not original.startswith(head):
        return None
    start = _tail_start(original, len(head), tail)
    if start is None:
        return None
    return _elision(said, original[len(head) : start], lines, 0, tail)


def _read_cut(original: str, head: str, tail: str, said: re.Match[str]) -> Elision | None:
    """Read ``head`` as the first line's head cut at a character, then its line break."""
    cut = head.removesuffix("\n")
    if not cut or not original.startswith(cut) or original[len(cut) : len(cut) + 1] in ("", "\n"):
        return None
    start = _tail_start(original, len(cut), tail)
    if start is None:
        return None
    return _elision(said, original[:start], 0, len(cut), tail)


def _hint(first: int, last: int, count: int) -> str:
    return f"[cutctx_recall: lines {first}-{last} of {count}; continue with start_line={last + 1}]"


def _refusal(name: str, value: object) -> str:
    return f"[cutctx_recall: {name} must be an integer of at least 1, got {value!r:.{_SHOWN}}]"


def page(text: str, start_line: object, max_tokens: object, price: Price) -> str:
    r"""Return ``text``'s lines from ``start_line`` (counted from 1) that fit ``max_tokens``.

    The lines come verbatim, with their line endings. A page always holds at least one whole
    line, even one over ``max_tokens``. When lines remain it ends with exactly one line
    ``[cutctx_recall: lines {a}-{b} of {n}; continue with start_line={b+1}]``, counted in
    ``max_tokens``; the last page has none. A bad argument (``start_line`` not an integer or
    below 1, or past the last line; ``max_tokens`` not an integer or below 1) gives back a
    one-line explanation instead, never an exception: a model reads it.

    >>> page("a\nb\nc\n", 2, 100, len)
    'b\nc\n'

    .. versionadded:: 0.1.1
    """
    for name, value in (("start_line", start_line), ("max_tokens", max_tokens)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            return _refusal(name, value)
    assert isinstance(start_line, int)  # noqa: S101 - checked just above
    assert isinstance(max_tokens, int)  # noqa: S101 - checked just above
    lines = lines_of(text)
    count = len(lines)
    if start_line > count:
        return (
            f"[cutctx_recall: start_line {start_line} is past the end: "
            f"the text has {_plural(count, 'line')}]"
        )
    first = start_line

    def body(last: int) -> str:
        run = "".join(lines[first - 1 : last])
        return run if last == count else run + _hint(first, last, count)

    def fits(last: int) -> bool:
        return price(body(last)) <= max_tokens

    last = _largest(fits, first, count) if fits(first) else first
    return body(last)
