"""TextEstimator counts a long text in pieces: the same estimate as the whole text at once.

Would catch: a cut that a pattern, a look-around or a two-character count spans (a run of one
character before a line break, ``"\\r\\n"``, ``"\\n\\n"``, an indent), a guard read per piece
instead of over the whole text (the pass for runs of letters or digits), and rounding each piece
up instead of the sum.
"""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from cutctx import TextEstimator
from cutctx._core.text_estimator import _LONG, _Marked, _pieces
from tests.estimator_corpus import CLASSES, sample

ATOMS = st.sampled_from(
    [*"ab1 \n\r\t+=-{}\",:.", "\n\n", "\r\n", "aaaaaaa", "+++++++", "======", "\u2500\u2500",
     "é", "中文", "  ", "0123456789abcdef0123", "x" * 20, "\n  ", "'s", "Ω"]
)  # fmt: skip


def whole(text: str) -> int:
    """Version 2's estimate with every pass over the whole text (as for a short one)."""
    marked = _Marked.of(text)
    return max(0, math.ceil(marked.total_of(alnum=marked.alnum)))


def in_pieces(text: str, size: int) -> int:
    """Version 2's estimate counting ``text`` in pieces of about ``size`` characters."""
    marked = [_Marked.of(piece) for piece in _pieces(text, size)]
    alnum = any(piece.alnum for piece in marked)
    return max(0, math.ceil(round(math.fsum(piece.total_of(alnum=alnum) for piece in marked), 6)))


@settings(max_examples=400, deadline=None)
@given(st.lists(ATOMS, min_size=1, max_size=80).map("".join), st.integers(1, 64))
def test_any_text_counted_in_pieces_is_estimated_as_counted_whole(text: str, size: int) -> None:
    """Cut into pieces as small as one character's worth, the estimate is the same."""
    assert "".join(_pieces(text, size)) == text
    assert in_pieces(text, size) == whole(text)


@settings(max_examples=30, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from(CLASSES), st.integers(0, 10**6)), min_size=8, max_size=30),
    st.sampled_from(("\n", "\n\n", "\r\n", "")),
)
def test_a_long_text_of_the_corpus_classes_is_estimated_as_counted_whole(
    drawn: list[tuple[str, int]], joint: str
) -> None:
    """Texts over the length counted in pieces, of every class the estimator knows: the public
    estimate (in pieces of 16 kB) is the whole text's."""
    text = joint.join(sample(kind, seed) for kind, seed in drawn)
    while len(text) <= _LONG:
        text += joint + text
    assert TextEstimator().estimate_tokens(text) == whole(text)
