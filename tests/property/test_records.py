"""Records on random transcripts, budgets and policy configurations: round trip, then tamper.

Would catch: a plan or record that does not survive its JSON; a record that a fresh ``verify``
does not reproduce byte for byte; and any single edit to a stored record, or any single change to
the transcript, that ``verify`` lets pass or fails to name; and any value, anywhere in a stored
plan or record, that makes reading or verifying fail with an untyped error.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

import pytest
from baseaicore import ValidationError
from hypothesis import given, note, reject
from hypothesis import strategies as st

from cutctx import (
    BudgetUnsatisfiable,
    CompactionPlan,
    CompactionRecord,
    Role,
    Transcript,
    TranscriptTurn,
    Verification,
    verify,
)
from tests.policy_strategies import policies
from tests.strategies import cases

if TYPE_CHECKING:
    from cutctx import CompactionBudget, CompactionPolicy

type Case = tuple[Transcript, CompactionBudget]
type Path = tuple[str | int, ...]

_HEX = re.compile(r"[0-9a-f]{16}|[0-9a-f]{64}")
# What verify says, by the top-level key that was edited (see docs/records.md).
NAMED = {
    "plan": "the record's plan_hash does not match its plan",
    "plan_hash": "the record's plan_hash does not match its plan",
    "budget": "the record's budget was edited",
    "policy": "the record's policy (name, version or configuration) was edited",
    "transcript_digest": "the record's transcript digest was edited",
    "format": "the record's format was edited",
    "tokenizer": "the record's tokenizer was edited",
    "keep_first": "the record's keep_first was edited",
    "system_digest": "the record's system digest was edited",
}
SEAL_LABELS = {"transcript_digest": "transcript digest", "system_digest": "system digest"}


def record_for(case: Case, policy: CompactionPolicy, **fields: Any) -> CompactionRecord:
    """The record of ``policy``'s plan for the case (cases it refuses are not generated)."""
    transcript, budget = case
    try:
        plan = policy.decide(transcript, budget)
    except BudgetUnsatisfiable:
        reject()
    return CompactionRecord.of(plan, transcript, budget, policy, **fields)


def leaves(value: Any, path: Path = ()) -> list[Path]:
    """Every path to a leaf (a value that is not an object or an array) of JSON data."""
    if isinstance(value, dict):
        return [p for key, item in value.items() for p in leaves(item, (*path, key))]
    if isinstance(value, list):
        return [p for index, item in enumerate(value) for p in leaves(item, (*path, index))]
    return [path]


def changed(value: Any, path: Path) -> Any:
    """A different value of the same JSON type (one that keeps a digest a digest)."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, float):
        return value / 2
    if isinstance(value, str):
        if _HEX.fullmatch(value):
            return ("1" if value[0] == "0" else "0") + value[1:]
        return value + "x"
    # null: a value its field accepts (a digest, a count, or a name)
    return {"system_digest": "a" * 64, "keep_first": 1}.get(str(path[-1]), "x")


def edit(data: dict[str, Any], path: Path) -> None:
    """Change the leaf at ``path`` of ``data`` in place."""
    parent: Any = data
    for step in path[:-1]:
        parent = parent[step]
    parent[path[-1]] = changed(parent[path[-1]], path)


@given(cases(), policies)
def test_any_plan_through_a_record_and_back_verifies_byte_identical(
    case: Case, policy: CompactionPolicy
) -> None:
    """A record read back from its JSON is equal, its plan reads back equal with the same hash,
    and ``verify`` (rebuilding the policy from the record alone) re-derives it byte for byte."""
    transcript, budget = case
    record = record_for(case, policy, format="openai_chat", tokenizer="chars", keep_first=0)
    back = CompactionRecord.from_dict(json.loads(json.dumps(record.to_dict())))
    assert back == record
    plan = CompactionPlan.from_dict(back.to_dict()["plan"], transcript=transcript, budget=budget)
    assert plan.plan_hash() == record.plan_hash
    assert plan == policy.decide(transcript, budget)
    assert verify(back, transcript) == Verification(ok=True, differences=())


@given(cases(), policies, st.data())
def test_any_single_edit_of_a_stored_record_is_found_and_named(
    case: Case, policy: CompactionPolicy, data: st.DataObject
) -> None:
    """Edit one value anywhere in the record's JSON (the plan, its hash, the budget, the policy
    and its configuration, the digests, the command-line fields, the seal): either the record
    no longer reads (a ValidationError naming the field) or ``verify`` fails naming it."""
    transcript, _ = case
    record = record_for(case, policy, format="anthropic", tokenizer="chars")
    stored = json.loads(json.dumps(record.to_dict()))
    path = data.draw(st.sampled_from(leaves(stored)), label="path")
    edit(stored, path)
    note(f"edited {path}")
    top = str(path[0])
    if top == "schema_version":
        with pytest.raises(ValidationError, match="schema_version"):
            CompactionRecord.from_dict(stored)
        return
    result = verify(CompactionRecord.from_dict(stored), transcript)
    note(repr(result))
    assert not result.ok
    if top == "seal":
        label = SEAL_LABELS.get(str(path[1]), str(path[1]))
        expected = f"the record's {label}"
    else:
        expected = NAMED[top]
    assert any(difference.startswith(expected) for difference in result.differences)


@st.composite
def transcript_changes(draw: st.DrawFn, transcript: Transcript) -> Transcript:
    """The transcript with exactly one thing changed: a field of one turn, or one turn more or
    less."""
    turns = list(transcript.turns)
    kinds = ["append"] + (["field", "remove"] if turns else [])
    kind = draw(st.sampled_from(kinds))
    if kind == "append":
        turns.append(TranscriptTurn("extra", Role.USER, "one more", 1))
        return Transcript(tuple(turns))
    index = draw(st.integers(min_value=0, max_value=len(turns) - 1))
    if kind == "remove":
        del turns[index]
        return Transcript(tuple(turns))
    turn = turns[index]
    fields: dict[str, Any] = {
        "turn_id": turn.turn_id,
        "role": turn.role,
        "content": turn.content,
        "token_estimate": turn.token_estimate,
        "tool_call_id": turn.tool_call_id,
        "pinned": turn.pinned,
        "metadata": dict(turn.metadata),
    }
    name = draw(st.sampled_from(sorted(fields)))
    fields[name] = {
        "turn_id": turn.turn_id + "'",
        "role": Role.USER if turn.role is not Role.USER else Role.ASSISTANT,
        "content": turn.content + "!",
        "token_estimate": turn.token_estimate + 1,
        "tool_call_id": None if turn.tool_call_id else "c0",
        "pinned": not turn.pinned,
        "metadata": {**turn.metadata, "note": "added"},
    }[name]
    turns[index] = TranscriptTurn(**fields)
    return Transcript(tuple(turns))


@given(cases(), policies, st.data())
def test_any_single_change_to_the_transcript_is_found_and_named(
    case: Case, policy: CompactionPolicy, data: st.DataObject
) -> None:
    """Change one field of one turn (id, role, content, estimate, call id, pin, metadata), or
    add or remove a turn: ``verify`` fails, and its first difference names the transcript."""
    transcript, _ = case
    record = record_for(case, policy)
    other = data.draw(transcript_changes(transcript), label="transcript")
    result = verify(record, other)
    note(repr(result))
    assert not result.ok
    assert result.differences[0].startswith("the transcript is not the one the record was made for")


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.floats(-2, 2) | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner),
    max_leaves=6,
)


def nodes(value: Any, path: Path = ()) -> list[Path]:
    """Every path to a value (containers included, the root excluded) of JSON data."""
    found: list[Path] = [path] if path else []
    if isinstance(value, dict):
        return found + [p for key, item in value.items() for p in nodes(item, (*path, key))]
    if isinstance(value, list):
        return found + [p for index, item in enumerate(value) for p in nodes(item, (*path, index))]
    return found


def replaced(data: Any, path: Path, value: Any) -> None:
    parent: Any = data
    for step in path[:-1]:
        parent = parent[step]
    parent[path[-1]] = value


@given(cases(), policies, st.data())
def test_any_value_anywhere_in_a_stored_plan_is_read_or_refused_with_a_typed_error(
    case: Case, policy: CompactionPolicy, data: st.DataObject
) -> None:
    """Put any JSON value at any place of a plan's dict: ``from_dict`` returns a plan (that passed
    the gate) or raises ``ValidationError`` (or ``BudgetUnsatisfiable``), never a KeyError,
    TypeError or other untyped error."""
    transcript, budget = case
    try:
        plan = policy.decide(transcript, budget)
    except BudgetUnsatisfiable:
        reject()
    stored = plan.to_dict()
    path = data.draw(st.sampled_from(nodes(stored)), label="path")
    replaced(stored, path, data.draw(json_values, label="value"))
    refused: ValidationError | BudgetUnsatisfiable | None = None
    try:
        back = CompactionPlan.from_dict(stored, transcript=transcript, budget=budget)
    except (ValidationError, BudgetUnsatisfiable) as error:
        refused = error
    if refused is not None:
        assert refused.message
        assert "\n" not in refused.message
        return
    again = CompactionPlan.from_json(back.to_json(), transcript=transcript, budget=budget)
    assert again == back


@given(cases(), policies, st.data())
def test_any_value_anywhere_in_a_stored_record_is_verified_or_refused_with_a_typed_error(
    case: Case, policy: CompactionPolicy, data: st.DataObject
) -> None:
    """Put any JSON value at any place of a record's dict: ``from_dict`` raises
    ``ValidationError``, or ``verify`` returns a ``Verification`` that is not ok, never an
    untyped error."""
    transcript, _ = case
    stored = record_for(case, policy).to_dict()
    path = data.draw(st.sampled_from(nodes(stored)), label="path")
    value = data.draw(json_values, label="value")
    original: Any = stored
    for step in path:
        original = original[step]
    replaced(stored, path, value)
    try:
        record = CompactionRecord.from_dict(stored)
    except ValidationError:
        return
    result = verify(record, transcript)
    assert result.ok == (json.dumps(value, sort_keys=True) == json.dumps(original, sort_keys=True))
