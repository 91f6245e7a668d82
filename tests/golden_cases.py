"""Named transcripts, budgets and policies for the determinism goldens (no randomness anywhere).

Each case is built by plain loops over fixed figures, so it is the same on every machine and
Python version. The small turn builders are shared with the unit tests.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from cutctx import (
    CompactionBudget,
    CompactionPolicy,
    DropOldestPolicy,
    ExcerptingPolicy,
    ObservationMaskingPolicy,
    PolicyChain,
    PriorityPolicy,
    Role,
    SummarizingPolicy,
    Transcript,
    TranscriptTurn,
    default_chain,
)
from tests.oracle import is_untouchable, untouchable_total

if TYPE_CHECKING:
    from collections.abc import Callable

PROMPT_ID = "summaries/v1"
PROTECTED = 2
RESULT_CAP = 120
"""The result cap of the excerpting goldens."""


def system(turn_id: str, tokens: int, content: str | None = None) -> TranscriptTurn:
    """A system turn."""
    return TranscriptTurn(turn_id, Role.SYSTEM, content or f"system {turn_id}", tokens)


def user(
    turn_id: str, tokens: int, *, pinned: bool = False, call: str | None = None
) -> TranscriptTurn:
    """A user turn (``call`` only to build unusual exchanges)."""
    return TranscriptTurn(turn_id, Role.USER, f"user {turn_id}", tokens, call, pinned)


def assistant(
    turn_id: str, tokens: int, call: str | None = None, *, pinned: bool = False
) -> TranscriptTurn:
    """An assistant turn, opening the exchange ``call`` if given."""
    return TranscriptTurn(turn_id, Role.ASSISTANT, f"assistant {turn_id}", tokens, call, pinned)


def tool(
    turn_id: str,
    tokens: int,
    call: str | None = None,
    *,
    pinned: bool = False,
    content: str | None = None,
) -> TranscriptTurn:
    """A tool result in the exchange ``call``."""
    body = content if content is not None else f"result {turn_id}"
    return TranscriptTurn(turn_id, Role.TOOL, body, tokens, call, pinned)


def simple_chat() -> Transcript:
    """A system prompt and three questions with their answers."""
    return Transcript(
        (
            system("s", 15),
            user("u1", 30),
            assistant("a1", 60),
            user("u2", 25),
            assistant("a2", 80),
            user("u3", 20),
            assistant("a3", 45),
        )
    )


def long_chat() -> Transcript:
    """A system prompt and forty alternating turns of varied sizes."""
    turns = [system("s", 40)]
    for k in range(40):
        size = 20 + (k * 37) % 90
        turns.append(user(f"u{k}", size) if k % 2 == 0 else assistant(f"a{k}", size))
    return Transcript(tuple(turns))


def tool_heavy_agent() -> Transcript:
    """A pinned task, then eight rounds of call, large result and short comment."""
    turns = [system("s", 30), user("task", 50, pinned=True)]
    for k in range(8):
        log = "".join(f"line {line} of step {k}\n" for line in range(20 + 10 * k))
        turns.append(assistant(f"call{k}", 20, f"c{k}"))
        turns.append(tool(f"result{k}", 150 + 60 * k, f"c{k}", content=log))
        turns.append(assistant(f"note{k}", 15))
    turns.append(assistant("answer", 40))
    return Transcript(tuple(turns))


def multi_call_exchange() -> Transcript:
    """One assistant turn issuing three calls whose results share its call id."""
    return Transcript(
        (
            system("s", 10),
            user("u1", 20),
            assistant("a1", 20, "batch"),
            tool("r1", 300, "batch"),
            tool("r2", 250, "batch"),
            tool("r3", 200, "batch"),
            assistant("a2", 30),
            user("u2", 25),
            assistant("a3", 35),
        )
    )


def scattered_exchange() -> Transcript:
    """A call answered far later, interleaved with a second exchange and plain chat."""
    return Transcript(
        (
            system("s", 10),
            assistant("a1", 20, "far"),
            user("u1", 30),
            assistant("a2", 20, "near"),
            tool("r2", 200, "near"),
            user("u2", 40),
            assistant("a3", 50),
            user("u3", 35),
            tool("r1", 400, "far"),
            assistant("a4", 25),
            user("u4", 30),
            assistant("a5", 30),
        )
    )


def orphaned_result() -> Transcript:
    """A tool result whose call id matches nothing (an exchange of one), amid chat."""
    return Transcript(
        (
            system("s", 10),
            user("u1", 40),
            tool("lost", 500, "nobody"),
            assistant("a1", 60),
            user("u2", 30),
            assistant("a2", 70),
            user("u3", 20),
            assistant("a3", 25),
        )
    )


def entirely_pinned() -> Transcript:
    """Every turn pinned: nothing may leave."""
    return Transcript(
        (
            user("u1", 40, pinned=True),
            assistant("a1", 50, "c", pinned=True),
            tool("r1", 300, "c", pinned=True),
            assistant("a2", 30, pinned=True),
        )
    )


def prioritized(level: int, turn: TranscriptTurn) -> TranscriptTurn:
    """``turn`` at priority ``level`` (its ``cutctx.priority``)."""
    return TranscriptTurn(
        turn.turn_id,
        turn.role,
        turn.content,
        turn.token_estimate,
        turn.tool_call_id,
        turn.pinned,
        {**turn.metadata, "cutctx.priority": str(level)},
    )


def prioritized_agent() -> Transcript:
    """A pinned brief, then six rounds of call, result and note at varied priorities (an
    exchange's call and result often differ), and a last question without one."""
    turns = [system("s", 30), prioritized(9, user("brief", 50, pinned=True))]
    for k in range(6):
        log = "".join(f"row {row} of lookup {k}\n" for row in range(15 + 8 * k))
        turns.append(prioritized((k * 2) % 4, assistant(f"call{k}", 20, f"c{k}")))
        turns.append(prioritized(k % 3, tool(f"result{k}", 120 + 45 * k, f"c{k}", content=log)))
        turns.append(prioritized(1 + k % 2, assistant(f"note{k}", 25)))
    turns.append(user("ask", 30))
    return Transcript(tuple(turns))


def priced(turn_id: str, text: str, call: str | None) -> TranscriptTurn:
    """A tool result priced as the character default prices its text, plus 4 of framing."""
    return TranscriptTurn(turn_id, Role.TOOL, text, -(-len(text) // 4) + 4, call)


def oversized_results() -> Transcript:
    """An agent run whose tool results outgrow any sensible share of the window: a long file,
    one line of minified JSON, a short result, an orphan build log, and a last test log (in the
    protected tail) larger than a tight budget; one result has CRLF lines and non-ASCII text."""
    source = "".join(f"{n:4d}  def step_{n}(state):  # é\n" for n in range(1, 241))
    minified = '{"items":[' + ",".join(f'{{"id":{n},"ok":true}}' for n in range(260)) + "]}"
    build = "".join(f"[{n:03d}] compiling module_{n}.c … ok\r\n" for n in range(150))
    tests = "".join(f"test_case_{n} ... {'FAILED' if n % 37 == 0 else 'ok'}\n" for n in range(320))
    return Transcript(
        (
            system("s", 30),
            user("task", 40, pinned=True),
            assistant("read", 20, "c1"),
            priced("file", source, "c1"),
            assistant("query", 20, "c2"),
            priced("json", minified, "c2"),
            assistant("peek", 20, "c3"),
            priced("short", "3 files changed\n", "c3"),
            priced("build", build, "orphan"),
            assistant("run", 20, "c4"),
            priced("tests", tests, "c4"),
            assistant("report", 30),
        )
    )


def empty() -> Transcript:
    """No turns at all."""
    return Transcript(())


CASES: dict[str, Callable[[], Transcript]] = {
    "simple_chat": simple_chat,
    "long_chat": long_chat,
    "tool_heavy_agent": tool_heavy_agent,
    "multi_call_exchange": multi_call_exchange,
    "scattered_exchange": scattered_exchange,
    "orphaned_result": orphaned_result,
    "entirely_pinned": entirely_pinned,
    "prioritized_agent": prioritized_agent,
    "oversized_results": oversized_results,
    "empty": empty,
}


def budgets(
    transcript: Transcript, max_result_tokens: int | None = None
) -> dict[str, CompactionBudget]:
    """The budgets of a case, by name; a name whose figure repeats an earlier one is left out.

    ``fits`` is the total; ``tight`` keeps two thirds of what lies above the untouchable set;
    ``very_tight`` a tenth of it; ``unsatisfiable`` is one token under the untouchable set.
    With ``max_result_tokens`` every budget carries that cap, the untouchable set counts each
    tool result over it at the cap (what a policy may count it at before excerpting), and
    ``cramped`` keeps a fortieth (so that excerpted results have to go as well).
    """
    total = transcript.token_estimate()
    floor = untouchable_total(transcript, CompactionBudget(total, PROTECTED))
    if max_result_tokens is not None:
        floor -= sum(
            turn.token_estimate - max_result_tokens
            for position, turn in enumerate(transcript.turns)
            if turn.role is Role.TOOL
            and turn.token_estimate > max_result_tokens
            and is_untouchable(transcript, CompactionBudget(total, PROTECTED), position)
        )
    figures = {
        "fits": total,
        "tight": floor + (total - floor) * 2 // 3,
        "very_tight": floor + (total - floor) // 10,
        "unsatisfiable": floor - 1,
    }
    if max_result_tokens is not None:
        figures["cramped"] = floor + (total - floor) // 40
    chosen: dict[str, CompactionBudget] = {}
    for name, figure in figures.items():
        if figure >= 0 and all(b.max_tokens != figure for b in chosen.values()):
            chosen[name] = CompactionBudget(figure, PROTECTED, max_result_tokens=max_result_tokens)
    return chosen


@dataclass(frozen=True)
class GoldenPolicy:
    """A policy configuration whose plans are recorded, under budgets with ``max_result_tokens``.

    One directory holds one configuration, the cap included: a policy recorded under a cap is
    recorded under that cap only.
    """

    make: Callable[[], CompactionPolicy]
    max_result_tokens: int | None = None

    @property
    def directory(self) -> str:
        """The goldens directory: the policy's name and version."""
        policy = self.make()
        return f"{policy.name}@{policy.version}"


POLICIES: tuple[GoldenPolicy, ...] = (
    GoldenPolicy(ObservationMaskingPolicy),
    GoldenPolicy(lambda: SummarizingPolicy(PROMPT_ID)),
    GoldenPolicy(DropOldestPolicy),
    GoldenPolicy(lambda: default_chain(prompt_id=PROMPT_ID)),
    GoldenPolicy(
        lambda: PolicyChain(
            (SummarizingPolicy(PROMPT_ID), ObservationMaskingPolicy(), DropOldestPolicy())
        )
    ),
    GoldenPolicy(PriorityPolicy),
    # compact_messages' priority mode; one directory holds one configuration, so this one is
    # recorded as a chain of one.
    GoldenPolicy(lambda: PolicyChain((PriorityPolicy(mask_results=True),))),
    # Excerpts, under a result cap of RESULT_CAP tokens: alone, first in the full chain, and
    # before priority shedding.
    GoldenPolicy(ExcerptingPolicy, RESULT_CAP),
    GoldenPolicy(
        lambda: PolicyChain(
            (
                ExcerptingPolicy(),
                ObservationMaskingPolicy(),
                SummarizingPolicy(PROMPT_ID),
                DropOldestPolicy(),
            )
        ),
        RESULT_CAP,
    ),
    GoldenPolicy(
        lambda: PolicyChain((ExcerptingPolicy(), PriorityPolicy(mask_results=True))), RESULT_CAP
    ),
)
