"""Excerpts and pages keep the original's lines whole, whatever the text, cap and price.

The oracle restates the promise (docs/contract.md, "Excerpts"): an excerpt is a prefix of the
original's lines (or, alone, the head of its first line), exactly one elision line naming
``baseaicore.sha256_of(original)`` and a suffix of its lines, priced within the cap; paging
from line 1 by the continue hints gives back every line exactly once.
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING

from baseaicore import sha256_of
from hypothesis import given, note, settings
from hypothesis import strategies as st

from cutctx import TextEstimator
from cutctx._core.excerpts import (
    _Excerpter,
    excerpt,
    page,
    parse_excerpt,
    priced_excerpt,
    shown_excerpt,
)
from tests.excerpt_cases import bare_elision, documented_candidates, documented_excerpt, readings
from tests.excerpt_cases import lines_of as _lines

if TYPE_CHECKING:
    from collections.abc import Callable

HINT = re.compile(r"\[cutctx_recall: lines (\d+)-(\d+) of (\d+); continue with start_line=(\d+)\]")

# Lines of awkward text: carriage returns, tabs, non-ASCII, brackets, and now and then a line
# that is itself an elision or hint line, or one far longer than the rest.
PIECES = st.text(alphabet="ab \t\r[]:;é中\U0001f600", max_size=30) | st.sampled_from(
    [
        "[cutctx: 3 lines left out (4 tokens), sha256:" + "a" * 64 + "]",
        "[cutctx_recall: lines 1-2 of 9; continue with start_line=3]",
        "x" * 700,
        "",
    ]
)
TEXTS = st.builds(
    lambda pieces, end: "\n".join(pieces) + end,
    st.lists(PIECES, max_size=60),
    st.sampled_from(["", "\n"]),
)


def prices() -> st.SearchStrategy[Callable[[str], int]]:
    """A character ratio, or a tokenizer's shape (a framing constant plus one per word)."""
    ratio = st.floats(min_value=0.5, max_value=8.0).map(
        lambda r: lambda text: math.ceil(len(text) / r)
    )
    words = st.integers(min_value=0, max_value=5).map(lambda k: lambda text: k + len(text.split()))
    return ratio | words


@given(
    text=TEXTS,
    cap=st.integers(min_value=1, max_value=400),
    framing=st.integers(min_value=-20, max_value=60),
    price=prices(),
    tool=st.none() | st.just("cutctx_recall"),
)
def test_an_excerpt_is_a_prefix_one_elision_line_and_a_suffix_within_the_cap(
    text: str, cap: int, framing: int, price: Callable[[str], int], tool: str | None
) -> None:
    """Catches an excerpt that edits, reorders or drops part of a kept line, holds a second
    elision line or none, leaves nothing out, states wrong counts or digest, or is priced over
    the cap (its framing included); and an excerpt missing for a text it should cut."""
    made = excerpt(text, cap, price, framing, recall_tool=tool)
    if made is None:
        # The text is empty or fits whole, or not even the smallest excerpt fits.
        assert (
            not text
            or framing + price(text) <= cap
            or framing + price(bare_elision(text, price, tool)) > cap
        )
        return
    note(repr(made))
    assert framing + price(made) <= cap
    found = readings(text, made)
    assert found, "not a prefix, one elision line and a suffix"
    head, _, tail, said = found[0]
    assert int(said.group(1)) == len(_lines(text)) - head - tail
    assert said.group(3) == sha256_of(text)
    assert (said.group(4), said.group(5)) == (
        (None, None) if tool is None else (tool, str(head + 1))
    )


@given(
    text=TEXTS.filter(bool),
    limit=st.integers(min_value=1, max_value=200),
    price=prices(),
)
def test_paging_from_line_one_by_the_hints_gives_back_every_line_exactly(
    text: str, limit: int, price: Callable[[str], int]
) -> None:
    """Catches a page that loses, repeats, reorders or edits a line, a hint that names the
    wrong lines or the wrong next start, a page over its limit that holds more than one line,
    and a last page with a hint."""
    kept = _lines(text)
    count = len(kept)
    start, pieces = 1, []
    while True:
        made = page(text, start, limit, price)
        rest = "".join(kept[start - 1 :])
        if made == rest:  # the last page: the rest, and no hint
            assert price(made) <= limit or len(_lines(made)) == 1
            pieces.append(made)
            break
        hint = HINT.fullmatch(made.rsplit("\n", 1)[-1])
        assert hint is not None, made
        first, last, total, following = map(int, hint.groups())
        assert (first, total, following) == (start, count, last + 1)
        assert first <= last < count
        body = made[: -len(hint.group(0))]
        assert body == "".join(kept[first - 1 : last])
        assert price(made) <= limit or last == first
        pieces.append(body)
        start = following
    assert "".join(pieces) == text


# Parts of a result as read, each one line: a text block's, or a label line another block
# (an image) is read as. Never empty: the reading leaves empty texts out.
PARTS = st.lists(st.tuples(PIECES.filter(bool), st.booleans()), min_size=4, max_size=40)


@given(parts=PARTS, cap=st.integers(min_value=1, max_value=60), price=prices())
def test_a_shown_excerpt_is_the_excerpt_with_the_hidden_parts_lines_left_out(
    parts: list[tuple[str, bool]], cap: int, price: Callable[[str], int]
) -> None:
    """Catches a shown excerpt that keeps a hidden part's line, loses or reorders a shown one,
    moves or rewrites the elision line, or is longer than the excerpt it is made of."""
    texts = [text for text, _ in parts]
    shown = [show for _, show in parts]
    original = "\n".join(texts)
    made = excerpt(original, cap, price)
    if made is None:
        return
    head, cut, tail, said = readings(original, made)[0]
    # With one line a part, the excerpt keeps the first ``head`` parts (or the first one's
    # head, cut) and the last ``tail``; of those, the shown ones are sent.
    kept_head = [t for t, s in zip(texts[:head], shown[:head], strict=True) if s]
    if cut and shown[0]:
        kept_head = [texts[0][:cut]]
    start = len(texts) - tail
    kept_tail = [t for t, s in zip(texts[start:], shown[start:], strict=True) if s]
    expected = (
        "".join(line + "\n" for line in kept_head)
        + said.group(0)
        + "".join("\n" + line for line in kept_tail)
    )
    sent = shown_excerpt(texts, shown, made)
    assert sent == expected
    assert len(sent) <= len(made)
    assert shown_excerpt(texts, [True] * len(texts), made) == made


# Longer texts than ``TEXTS``: the excerpt's search reads them in several pieces.
LONG_TEXTS = st.builds(
    lambda pieces, end: "\n".join(pieces) + end,
    st.lists(st.text(alphabet='ab 1{}",:\t', max_size=60) | st.just("x" * 3000), max_size=150),
    st.sampled_from(["", "\n"]),
)


def words(text: str) -> int:
    """A tokenizer's shape: a framing of three, plus one per word (as cl100k's estimator)."""
    return 3 + len(text.split())


@settings(max_examples=60, deadline=None)
@given(
    text=LONG_TEXTS,
    cap=st.integers(min_value=20, max_value=3_000),
    price=st.sampled_from([TextEstimator().estimate_tokens, words, lambda t: -(-len(t) // 4)]),
)
def test_an_excerpt_is_the_one_trying_every_candidate_gives(
    text: str, cap: int, price: Callable[[str], int]
) -> None:
    """The search prices few candidates, yet keeps the lines trying every one in turn keeps.

    It would catch a search that stops a line short (or long) of the documented split: an
    estimate of the lines' prices that misleads it, a wrong correction from an exact price.
    """
    assert excerpt(text, cap, price) == documented_excerpt(text, cap, price)


def quick(text: str, cap: int, price: Callable[[str], int]) -> str | None:
    made = priced_excerpt(text, cap, price, quick=True)
    return None if made is None else made[0]


@settings(max_examples=60, deadline=None)
@given(
    text=LONG_TEXTS,
    cap=st.integers(min_value=20, max_value=3_000),
    price=st.sampled_from([TextEstimator().estimate_tokens, words, lambda t: -(-len(t) // 4)]),
)
def test_a_quick_excerpt_is_a_documented_candidate_the_longest_or_within_1_percent(
    text: str, cap: int, price: Callable[[str], int]
) -> None:
    """A window's quick excerpt is one that trying every candidate in turn meets (its head cut
    at one of 1 024 places), and the longest that fits or one within 1 % of the cap (at least
    2 tokens): it would catch a search that stops short of both, or leaves the documented split.
    """
    made = quick(text, cap, price)
    left = _Excerpter(text, price(text), price, cap, None, quick=True).left
    candidates = documented_candidates(text, cap, price, left=left, places=1024)
    if made is None:
        assert not candidates
        return
    assert made in candidates
    assert made == candidates[-1] or cap - price(made) <= max(2, cap // 128)


@settings(max_examples=60, deadline=None)
@given(
    text=LONG_TEXTS,
    cap=st.integers(min_value=20, max_value=3_000),
    price=st.sampled_from([TextEstimator().estimate_tokens, words, lambda t: -(-len(t) // 4)]),
)
def test_a_quick_excerpts_tokens_left_out_are_the_exact_figure_within_10_percent(
    text: str, cap: int, price: Callable[[str], int]
) -> None:
    """The quick figure is estimated from the original read in pieces, not priced per
    candidate: within 10 % (and 8 tokens) of the original's price less the kept text's, even
    where a piece mixes a 3 000-character run with short dense lines."""
    made = quick(text, cap, price)
    if made is None:
        return
    read = parse_excerpt(text, made)
    assert read is not None
    lines = _lines(text)
    kept = (
        "".join(lines[: read.head])
        + lines[0][: read.cut]
        + "".join(lines[len(lines) - read.tail :] if read.tail else [])
    )
    exact = max(0, price(text) - price(kept))
    assert abs(read.left_tokens - exact) <= 8 + exact // 10


def wobbly(text: str) -> int:
    """A price that does not add up and sometimes falls as text is added."""
    return len(text) // 3 + (7 if len(text) % 5 == 0 else 0) + text.count("1") % 4


@settings(max_examples=150, deadline=None)
@given(
    text=LONG_TEXTS,
    cap=st.integers(min_value=1, max_value=3_000),
    framing=st.integers(min_value=-20, max_value=60),
    price=st.sampled_from([TextEstimator().estimate_tokens, words, wobbly]),
)
def test_an_excerpt_never_exceeds_its_cap_by_the_estimator(
    text: str, cap: int, framing: int, price: Callable[[str], int]
) -> None:
    """Whatever the price (one that does not add up, or falls as text grows), an excerpt's
    price plus the framing is within the cap; a search that trusted its estimate would not be."""
    made = excerpt(text, cap, price, framing)
    if made is not None:
        assert framing + price(made) <= cap
