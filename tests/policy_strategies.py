"""Hypothesis strategies for built-in policies in any configuration, chains of them included."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hypothesis import strategies as st

from cutctx import (
    DEFAULT_PLACEHOLDER,
    BoundedSummarizingPolicy,
    CharRatioEstimator,
    DropOldestPolicy,
    ObservationMaskingPolicy,
    PolicyChain,
    PriorityPolicy,
    SummarizingPolicy,
    default_chain,
)

if TYPE_CHECKING:
    from cutctx import CompactionPolicy

PLACEHOLDERS = (DEFAULT_PLACEHOLDER, "[gone]", 'quote " and \\ \u00e9')
PROMPTS = ("summaries/v1", "p")

ESTIMATORS = st.none() | st.sampled_from((3.0, 4.0, 2.5)).map(CharRatioEstimator)
maskings = st.builds(
    ObservationMaskingPolicy,
    st.integers(min_value=0, max_value=4),
    st.sampled_from(PLACEHOLDERS),
    estimator=ESTIMATORS,
    exclude_tools=st.sampled_from(((), ("memory",), ("memory", "search"))),
    min_reclaim=st.sampled_from((0, 50)),
)
priorities = st.builds(
    PriorityPolicy,
    mask_results=st.booleans(),
    keep_recent_results=st.integers(min_value=0, max_value=3),
    placeholder=st.sampled_from(PLACEHOLDERS),
    estimator=ESTIMATORS,
)
boundeds = st.builds(
    BoundedSummarizingPolicy,
    st.sampled_from(PROMPTS),
    max_input_tokens=st.integers(min_value=1, max_value=500),
    target_ratio=st.sampled_from((0.1, 0.2, 1.0)),
)
summarizings = st.builds(
    SummarizingPolicy,
    st.sampled_from(PROMPTS),
    st.sampled_from((0.1, 0.2, 0.5, 1.0)),
    st.integers(min_value=1, max_value=5),
)
leaves: st.SearchStrategy[CompactionPolicy] = st.one_of(
    maskings, summarizings, boundeds, priorities, st.just(DropOldestPolicy())
)
chains = st.lists(leaves, min_size=1, max_size=3).map(PolicyChain)
defaults = st.builds(
    default_chain,
    prompt_id=st.sampled_from(PROMPTS),
    keep_recent_results=st.integers(min_value=0, max_value=3),
    target_ratio=st.sampled_from((0.1, 0.2)),
    min_span_turns=st.integers(min_value=1, max_value=4),
)
policies: st.SearchStrategy[CompactionPolicy] = st.one_of(
    leaves,
    chains,
    defaults,
    st.tuples(chains, leaves).map(PolicyChain),  # a chain inside a chain
)
"""Any built-in policy a record can describe and ``verify`` rebuild from its configuration."""
