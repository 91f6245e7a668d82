"""A small agent transcript whose tool results outgrow a result cap, shared by the excerpt tests.

Priced by the character default (``ceil(len / 4)``), each result with 3 tokens of framing::

    s     SYSTEM      10
    task  USER        20   pinned
    a1    ASSISTANT   10   call c1
    r1    TOOL       ~363  call c1   120 lines of build log
    n1    ASSISTANT   10
    a2    ASSISTANT   10   call c2
    r2    TOOL       ~243  call c2   80 lines of test output
    n2    ASSISTANT   10
"""

from __future__ import annotations

import math
from typing import Final

from cutctx import CompactionBudget, Role, Transcript, TranscriptTurn

CAP: Final = 80
FRAMING: Final = 3


def chars(text: str) -> int:
    """The character default's price, restated."""
    return math.ceil(len(text) / 4)


def log(lines: int, word: str = "step") -> str:
    """A log of ``lines`` numbered lines."""
    return "".join(f"{word} {n}: ok\n" for n in range(1, lines + 1))


def result(turn_id: str, call: str, text: str) -> TranscriptTurn:
    """A tool result priced at its text plus ``FRAMING``."""
    return TranscriptTurn(turn_id, Role.TOOL, text, chars(text) + FRAMING, call)


BUILD_LOG: Final = log(120, "build")
TEST_LOG: Final = log(80, "test")

AGENT: Final = Transcript(
    (
        TranscriptTurn("s", Role.SYSTEM, "You are careful.", 10),
        TranscriptTurn("task", Role.USER, "Fix the build.", 20, pinned=True),
        TranscriptTurn("a1", Role.ASSISTANT, "build it", 10, "c1"),
        result("r1", "c1", BUILD_LOG),
        TranscriptTurn("n1", Role.ASSISTANT, "it fails", 10),
        TranscriptTurn("a2", Role.ASSISTANT, "test it", 10, "c2"),
        result("r2", "c2", TEST_LOG),
        TranscriptTurn("n2", Role.ASSISTANT, "tests fail", 10),
    )
)


def capped(max_tokens: int, protected: int = 2, cap: int | None = CAP) -> CompactionBudget:
    """A budget over ``AGENT`` with the result cap (two protected turns: ``r2`` and ``n2``)."""
    return CompactionBudget(max_tokens, protected, max_result_tokens=cap)
