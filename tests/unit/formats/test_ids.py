"""The log of tool use ids a reader's state carries (``formats._ids``)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from baseaicore import ValidationError
from hypothesis import given
from hypothesis import strategies as st

from cutctx.formats import ANTHROPIC, BEDROCK_CONVERSE, Format
from cutctx.formats._ids import NO_IDS, first_use, ids_log, with_ids

IDS = st.text(alphabet=st.sampled_from('ab\n\t"\\1é'), max_size=5)


@given(st.lists(st.lists(IDS, max_size=3, unique=True), max_size=6), IDS)
def test_an_id_is_found_exactly_when_logged_with_its_first_message(
    messages: list[list[str]], probe: str
) -> None:
    """Invariant: ``first_use`` answers the index of the first message that logged an id, and
    ``None`` for any other id, whatever newlines, tabs, quotes or shared prefixes the ids hold."""
    log, first = NO_IDS, dict[str, int]()
    for index, ids in enumerate(messages):
        log = with_ids(log, ids, index)
        for call_id in ids:
            first.setdefault(call_id, index)
    for call_id, index in first.items():
        assert first_use(log, call_id) == index
    assert first_use(log, probe) == first.get(probe)


def test_the_map_an_earlier_release_saved_reads_as_its_log() -> None:
    assert ids_log({"a": 1, "b\n": 3}) == with_ids(with_ids(NO_IDS, ["a"], 1), ["b\n"], 3)
    assert ids_log('\n"a"\t1') == '\n"a"\t1'
    assert ids_log({"a": "1"}) is None
    assert ids_log([]) is None


def _anthropic(call_id: str) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": call_id, "name": "t", "input": {}}],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": call_id, "content": "x"}],
        },
    ]


def _converse(call_id: str) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": [{"text": "go"}]},
        {
            "role": "assistant",
            "content": [{"toolUse": {"toolUseId": call_id, "name": "t", "input": {}}}],
        },
        {
            "role": "user",
            "content": [{"toolResult": {"toolUseId": call_id, "content": [{"text": "x"}]}}],
        },
    ]


@pytest.mark.parametrize(
    ("fmt", "history"), [(ANTHROPIC, _anthropic), (BEDROCK_CONVERSE, _converse)]
)
def test_a_reader_state_of_an_earlier_release_continues_and_still_refuses_a_reused_id(
    fmt: Format[Any], history: Any
) -> None:
    """A state saved with ``seen`` as ``{id: index}`` continues the reading it saved."""
    reader = fmt.reader()
    reader.read(history("t1"))
    state = json.loads(json.dumps(reader.getstate()))
    assert isinstance(state["seen"], str)
    state["seen"] = {"t1": 1}  # as an earlier release saved it
    again = fmt.reader()
    again.setstate(state)
    assert again.getstate() == reader.getstate()
    again.read(history("t2")[1:])
    with pytest.raises(ValidationError, match="used"):
        again.read(history("t1")[1:])
    state["seen"] = {"t1": "one"}
    with pytest.raises(ValidationError, match="not a reader state"):
        fmt.reader().setstate(state)
