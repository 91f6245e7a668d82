"""Reading a history in chunks gives what reading it whole gives, for every built-in format.

A format's ``Reader`` carries its state from one chunk to the next (JSON data, as a window
stores it between steps): the turns, their parts, the messages as sent and, for a history the
provider refuses, the error, never depend on where the history was split, on whether the state
went through JSON between chunks, or on how many messages a chunk left for the next one.
"""

from __future__ import annotations

import itertools
import json
from typing import TYPE_CHECKING, Any

import pytest
from baseaicore import ValidationError
from hypothesis import given
from hypothesis import strategies as st

from cutctx import CharRatioEstimator
from cutctx.formats import (
    ANTHROPIC,
    BEDROCK_CONVERSE,
    GEMINI,
    OPENAI_CHAT,
    OPENAI_RESPONSES,
    Format,
    Scanned,
)
from cutctx.formats.langchain import LANGCHAIN
from cutctx.formats.pydantic_ai import PYDANTIC_AI
from tests import bedrock_strategies, gemini_strategies
from tests import format_strategies as fs
from tests import framework_strategies as frs

if TYPE_CHECKING:
    from collections.abc import Sequence

FORMATS: dict[str, tuple[Format[Any], st.SearchStrategy[list[Any]]]] = {
    "openai_chat": (OPENAI_CHAT, fs.chat_conversations()),
    "openai_responses": (OPENAI_RESPONSES, fs.responses_conversations()),
    "anthropic": (ANTHROPIC, fs.anthropic_conversations()),
    "anthropic_runs": (ANTHROPIC, fs.anthropic_runs()),
    "langchain": (LANGCHAIN, frs.langchain_conversations()),
    "pydantic_ai": (PYDANTIC_AI, frs.pydantic_ai_conversations()),
    "gemini": (GEMINI, gemini_strategies.gemini_histories()),
    "bedrock_converse": (BEDROCK_CONVERSE, bedrock_strategies.bedrock_histories()),
}
NAMES = sorted(FORMATS)


def verdict(read: Any) -> tuple[str, Any]:
    """Call ``read``; return what it read (turns, parts, messages sent) or the error's words."""
    try:
        scanned: Scanned[Any] = read()
    except ValidationError as error:
        return "refused", (error.message, error.details.get("index"))
    return "read", (scanned.turns, dict(scanned.parts), scanned.sent, scanned.originals)


def whole(fmt: Format[Any], messages: Sequence[Any]) -> Scanned[Any]:
    """Read ``messages`` as one chunk."""
    return fmt.reader(estimator=CharRatioEstimator()).read(messages, final=True)


def chunked(
    fmt: Format[Any], messages: Sequence[Any], cuts: Sequence[int], *, through_json: bool
) -> Scanned[Any]:
    """Read ``messages`` split at ``cuts``, each chunk by a fresh reader set to the last state."""
    bounds = [0, *sorted(set(cuts)), len(messages)]
    turns: list[Any] = []
    parts: dict[str, Any] = {}
    sent: list[Any] = []
    originals: list[Any] = []
    state = None
    left: list[Any] = []  # what a chunk left for the next one
    for number, (start, end) in enumerate(itertools.pairwise(bounds)):
        reader = fmt.reader(estimator=CharRatioEstimator())
        if state is not None:
            reader.setstate(json.loads(json.dumps(state)) if through_json else state)
        chunk = [*left, *messages[start:end]]
        final = number == len(bounds) - 2
        read = reader.read(chunk, final=final)
        left = chunk[len(read.sent) :]
        assert final or len(read.sent) <= len(chunk)
        turns.extend(read.turns)
        parts.update(read.parts)
        sent.extend(read.sent)
        originals.extend(read.originals)
        state = reader.getstate()
    assert not left
    return Scanned(tuple(turns), parts, tuple(sent), tuple(originals))


@st.composite
def split(draw: st.DrawFn, name: str) -> tuple[list[Any], list[int]]:
    """A conversation of format ``name`` and where to cut it."""
    messages = draw(FORMATS[name][1])
    cuts = draw(st.lists(st.integers(0, len(messages)), max_size=4))
    return messages, cuts


@st.composite
def broken(draw: st.DrawFn, name: str) -> tuple[list[Any], list[int]]:
    """A conversation with one message removed, repeated or moved: often one it refuses."""
    messages, cuts = draw(split(name))
    if messages:
        position = draw(st.integers(0, len(messages) - 1))
        how = draw(st.sampled_from(["remove", "repeat", "swap"]))
        if how == "remove":
            del messages[position]
        elif how == "repeat":
            messages.insert(position, messages[position])
        elif position + 1 < len(messages):
            messages[position], messages[position + 1] = messages[position + 1], messages[position]
    return messages, [min(cut, len(messages)) for cut in cuts]


class TestReaderChunkInvariance:
    @pytest.mark.parametrize("name", NAMES)
    @given(data=st.data())
    def test_a_valid_history_read_in_any_split_is_read_as_whole(
        self, name: str, data: st.DataObject
    ) -> None:
        """Would catch a rule spanning a chunk's boundary that the reader's state forgets (a
        call answered in the next chunk, a key given before its group is known, Gemini's
        function responses or Converse's tool results cut off from their calls)."""
        fmt = FORMATS[name][0]
        messages, cuts = data.draw(split(name))
        through_json = data.draw(st.booleans())
        expected = verdict(lambda: whole(fmt, messages))
        assert expected[0] == "read"
        got = verdict(lambda: chunked(fmt, messages, cuts, through_json=through_json))
        assert got == expected

    @pytest.mark.parametrize("name", NAMES)
    @given(data=st.data())
    def test_any_history_gets_one_verdict_whatever_its_split(
        self, name: str, data: st.DataObject
    ) -> None:
        """Would catch a history refused whole but accepted in chunks (an id reused across a
        boundary, an empty message checked as if it ended the history), or refused in other
        words or at another index."""
        fmt = FORMATS[name][0]
        messages, cuts = data.draw(broken(name))
        expected = verdict(lambda: whole(fmt, messages))
        got = verdict(lambda: chunked(fmt, messages, cuts, through_json=True))
        assert got == expected

    @pytest.mark.parametrize("name", NAMES)
    @given(data=st.data())
    def test_a_refused_chunk_leaves_the_reader_as_it_was(
        self, name: str, data: st.DataObject
    ) -> None:
        """Would catch a reader that keeps half of a chunk it refused."""
        fmt = FORMATS[name][0]
        messages, cuts = data.draw(split(name))
        cut = min(cuts, default=0)
        reader = fmt.reader()
        reader.read(messages[:cut])
        before = reader.getstate()
        with pytest.raises(ValidationError):
            reader.read([*messages[cut:], "not a message"], final=True)
        assert reader.getstate() == before
