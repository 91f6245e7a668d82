"""``TextEstimator`` counts a long text in pieces and gives the estimate of the whole."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from cutctx._core import text_estimator
from cutctx._core.text_estimator import TextEstimator, _Counts, _pieces
from tests.estimator_corpus import corpus

# Texts where the classes meet at every kind of place: line breaks in runs, digits before
# marks ("+", "=" among them), hex and base64 runs, words, indents, other scripts, emoji.
ALPHABET = 'ab1f0 \t\n,."{}:+=/_-é中가😀'
TEXTS = st.text(alphabet=ALPHABET, max_size=400) | st.lists(
    st.sampled_from(["deadbeef" * 3, "QUJD" * 7 + "==", "    x = 1,\n", "\n\n", '9,"', "1+="]),
    max_size=40,
).map("".join)


def whole(text: str) -> int:
    """The estimate counted in one piece (the oracle: no cut at all)."""
    counts = _Counts()
    counts.add(text)
    return counts.estimate()


@settings(max_examples=300, deadline=None)
@given(text=TEXTS, piece=st.integers(min_value=1, max_value=40))
def test_a_text_counted_in_pieces_is_estimated_as_the_whole(text: str, piece: int) -> None:
    """Cut wherever the pieces may be cut (small pieces: many cuts), the counts add up to the
    whole text's: it would catch a cut that splits a run, or a look-behind that sees across."""
    original = text_estimator._PIECE
    text_estimator._PIECE = piece
    try:
        pieces = _pieces(text)
        assert "".join(pieces) == text
        assert TextEstimator().estimate_tokens(text) == whole(text)
    finally:
        text_estimator._PIECE = original


def test_every_corpus_text_is_estimated_as_the_whole_when_cut_into_pieces() -> None:
    """The same over the seeded corpus of every class of text, cut every 64 characters."""
    original = text_estimator._PIECE
    text_estimator._PIECE = 64
    try:
        for _kind, text in corpus(seed=5, per_class=6):
            assert TextEstimator().estimate_tokens(text) == whole(text)
    finally:
        text_estimator._PIECE = original
