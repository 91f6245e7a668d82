"""Shared hypothesis strategies: random transcripts that stress every contract.

The transcripts mix plain chat, exchanges whose members sit far apart or interleave (a small pool
of call ids shared by turns anywhere), orphan results (a call id used once), system turns in the
middle, pinned turns (inside exchanges too) and zero-token turns; budgets range from zero to above
the transcript's total.
"""

from __future__ import annotations

import dataclasses

from hypothesis import strategies as st

from cutctx import CompactionBudget, Role, Transcript, TranscriptTurn

# Characters JSON escapes (quote, backslash, control characters), non-ASCII ones and an
# astral one (four UTF-8 bytes).
AWKWARD = '"\\\n\t\x00\x1f\x7fé中𝄞a'
SURROGATES = st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF, exclude_categories=())
ANY_TEXT = st.text(st.sampled_from(AWKWARD) | SURROGATES | st.characters(exclude_categories=()))
# JSON data (strings with any code point, lone surrogates included).
JSON_DATA = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | ANY_TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(ANY_TEXT, inner, max_size=4),
    max_leaves=20,
)

# Weighted towards agent runs: tool results and assistant calls, some chat, few system turns.
ROLES = (Role.USER, Role.ASSISTANT, Role.ASSISTANT, Role.TOOL, Role.TOOL, Role.TOOL, Role.SYSTEM)
CALL_IDS = ("c0", "c1", "c2", "c3", "c4", "c5")


@st.composite
def turns(draw: st.DrawFn, index: int) -> TranscriptTurn:
    """One turn at position ``index`` (its id is derived from it, so ids stay unique)."""
    role = draw(st.sampled_from(ROLES))
    call = draw(st.none() | st.sampled_from(CALL_IDS) | st.just(f"orphan{index}"))
    if role in (Role.SYSTEM, Role.USER):
        call = draw(st.none() | st.just(call)) if call is not None else None
    content = draw(st.text(alphabet="abcdefgh xyz\n\u00e9\u4e2d", max_size=300))
    estimate = draw(st.integers(min_value=0, max_value=400))
    pinned = draw(st.integers(min_value=0, max_value=9)) == 0
    return TranscriptTurn(f"t{index}", role, content, estimate, call, pinned)


@st.composite
def transcripts(draw: st.DrawFn, max_turns: int = 24) -> Transcript:
    """A transcript of up to ``max_turns`` turns with scattered and interleaved exchanges."""
    count = draw(st.integers(min_value=0, max_value=max_turns))
    return Transcript(tuple(draw(turns(index)) for index in range(count)))


def untouchable_tokens(transcript: Transcript, protected: int) -> int:
    """The tokens of the untouchable set, restated here from contract 2 for the strategies (a
    request's own tokens, ``request_tokens``, are untouchable too)."""
    first_protected = len(transcript.turns) - protected
    return transcript.request_tokens + sum(
        turn.token_estimate
        for index, turn in enumerate(transcript.turns)
        if turn.role is Role.SYSTEM or turn.pinned or index >= first_protected
    )


@st.composite
def budgets(draw: st.DrawFn, transcript: Transcript) -> CompactionBudget:
    """A budget for ``transcript``: mostly between its untouchable set and its total, sometimes
    below the untouchable set (unsatisfiable), zero, or above the total; protecting few turns
    usually and sometimes all of them and more."""
    count = len(transcript.turns)
    protected = draw(
        st.integers(min_value=0, max_value=4) | st.integers(min_value=0, max_value=count + 2)
    )
    floor = untouchable_tokens(transcript, protected)
    total = transcript.token_estimate()
    max_tokens = draw(
        st.integers(min_value=floor, max_value=max(floor, total))
        | st.integers(min_value=0, max_value=total + 50)
        | st.sampled_from((0, floor, total))
    )
    return CompactionBudget(max_tokens, protected)


@st.composite
def cases(draw: st.DrawFn, max_turns: int = 24) -> tuple[Transcript, CompactionBudget]:
    """A transcript and a budget for it."""
    transcript = draw(transcripts(max_turns))
    return transcript, draw(budgets(transcript))


@st.composite
def prioritized(draw: st.DrawFn, transcript: Transcript) -> Transcript:
    """``transcript`` with priorities: each turn gets ``cutctx.priority`` from a few levels
    (negative ones too) or none at all, so levels, ties and mixed exchanges all occur."""
    turns = []
    for original in transcript.turns:
        level = draw(st.none() | st.integers(min_value=-1, max_value=3))
        metadata = {**original.metadata, "cutctx.priority": str(level)}
        turns.append(
            original if level is None else dataclasses.replace(original, metadata=metadata)
        )
    return Transcript(tuple(turns))


@st.composite
def prioritized_cases(draw: st.DrawFn, max_turns: int = 24) -> tuple[Transcript, CompactionBudget]:
    """A transcript whose turns carry priorities, and a budget for it."""
    transcript = draw(prioritized(draw(transcripts(max_turns))))
    return transcript, draw(budgets(transcript))


@st.composite
def prioritized_agent_cases(
    draw: st.DrawFn, max_rounds: int = 8
) -> tuple[Transcript, CompactionBudget]:
    """An agent run of chat turns and call-and-results exchanges, each turn at its own priority
    (so an exchange's members often differ), few pins, and a budget for it."""
    turns: list[TranscriptTurn] = []
    for round_ in range(draw(st.integers(min_value=1, max_value=max_rounds))):
        results = draw(st.integers(min_value=0, max_value=2))
        call = f"c{round_}" if results else None
        roles = [Role.ASSISTANT] + [Role.TOOL] * results if call else [Role.USER]
        for role in roles:
            level = draw(st.integers(min_value=0, max_value=2))
            turns.append(
                TranscriptTurn(
                    f"t{len(turns)}",
                    role,
                    draw(st.text(alphabet="ab \u00e9", max_size=40)),
                    draw(st.integers(min_value=0, max_value=300)),
                    call,
                    draw(st.integers(min_value=0, max_value=14)) == 0,
                    {"cutctx.priority": str(level)},
                )
            )
    transcript = Transcript(tuple(turns))
    return transcript, draw(budgets(transcript))


TOOL_NAMES = ("search", "memory", "shell")


@st.composite
def named_tool_cases(draw: st.DrawFn, max_turns: int = 24) -> tuple[Transcript, CompactionBudget]:
    """A case whose tool results mostly name their tool (``cutctx.tool_name``), as the formats
    record it; some name none."""
    transcript, budget = draw(cases(max_turns))
    turns = []
    for original in transcript.turns:
        name = draw(st.none() | st.sampled_from(TOOL_NAMES)) if original.role is Role.TOOL else None
        metadata = {**original.metadata, "cutctx.tool_name": str(name)}
        turns.append(original if name is None else dataclasses.replace(original, metadata=metadata))
    return Transcript(tuple(turns)), budget


LOG_LINES = st.sampled_from(("ok", "error: cache miss", "  at step 3", "", "é中 [x]")) | st.text(
    alphabet="ab \t\u00e9[]", max_size=60
)


@st.composite
def capped_cases(draw: st.DrawFn, max_turns: int = 10) -> tuple[Transcript, CompactionBudget]:
    """A case whose tool results are often long logs priced near their text (by the character
    default, plus a little framing), and a budget that caps what one result may cost: mostly
    between the untouchable set (each result over the cap at the cap) and the total."""
    transcript, budget = draw(cases(max_turns))
    turns = []
    for original in transcript.turns:
        if original.role is not Role.TOOL or draw(st.integers(min_value=0, max_value=3)) == 0:
            turns.append(original)
            continue
        count = draw(st.integers(min_value=1, max_value=80))
        lines = draw(st.lists(LOG_LINES, min_size=count, max_size=count))
        text = "\n".join(lines) + draw(st.sampled_from(["", "\n"]))
        framing = draw(st.integers(min_value=0, max_value=12))
        estimate = -(-len(text) // 4) + framing
        turns.append(dataclasses.replace(original, content=text, token_estimate=estimate))
    capped = Transcript(tuple(turns))
    cap = draw(st.integers(min_value=1, max_value=160) | st.integers(min_value=30, max_value=90))
    protected = budget.protected_recent_turns
    floor = sum(
        min(turn.token_estimate, cap) if turn.role is Role.TOOL else turn.token_estimate
        for index, turn in enumerate(capped.turns)
        if turn.role is Role.SYSTEM or turn.pinned or len(capped.turns) - index <= protected
    )
    total = capped.token_estimate()
    max_tokens = draw(
        st.integers(min_value=floor, max_value=max(floor, total))
        | st.integers(min_value=0, max_value=total + 50)
        | st.sampled_from((0, floor, max(0, floor - 1), total))
    )
    return capped, CompactionBudget(max_tokens, protected, max_result_tokens=cap)
