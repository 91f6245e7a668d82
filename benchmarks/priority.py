"""Benchmark PriorityPolicy against the drop-oldest and mask-then-drop decisions it generalises.

Run ``python benchmarks/priority.py [--sizes 200,20000] [--repeat 5]``. It takes the agent
transcripts of ``benchmarks/run.py``, gives every turn a priority from four levels (a fixed,
deterministic pattern, so exchanges mix levels), and reports the median planning time of:

* ``DropOldestPolicy`` and ``PriorityPolicy()`` on the transcript without priorities (one
  level: the same decision), and ``PriorityPolicy()`` with the four levels;
* ``PolicyChain([ObservationMaskingPolicy(0), DropOldestPolicy()])`` and
  ``PriorityPolicy(mask_results=True)`` without priorities (the same decision), and
  ``PriorityPolicy(mask_results=True)`` with the four levels;

each under the ``half`` budget of ``run.py`` (half the transcript's tokens above its untouchable
set), with the garbage collector on.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cutctx import (
    DropOldestPolicy,
    ObservationMaskingPolicy,
    PolicyChain,
    PriorityPolicy,
    Transcript,
    TranscriptTurn,
)
from run import agent_transcript, budget_for

if TYPE_CHECKING:
    from cutctx import CompactionBudget, CompactionPolicy


def leveled(transcript: Transcript) -> Transcript:
    """``transcript`` with each turn at priority ``index * 7 % 4`` (the pinned and system turns
    too, where it changes nothing)."""
    return Transcript(
        tuple(
            TranscriptTurn(
                turn.turn_id,
                turn.role,
                turn.content,
                turn.token_estimate,
                turn.tool_call_id,
                turn.pinned,
                {**turn.metadata, "cutctx.priority": str(index * 7 % 4)},
            )
            for index, turn in enumerate(transcript.turns)
        )
    )


def median_ms(
    policy: CompactionPolicy, transcript: Transcript, budget: CompactionBudget, repeat: int
) -> float:
    """The median of ``repeat`` timed plans, each of at least 50 ms of loops, in milliseconds."""
    policy.decide(transcript, budget)
    loops, spent = 1, 0.0
    while True:
        start = time.perf_counter()
        for _ in range(loops):
            policy.decide(transcript, budget)
        spent = time.perf_counter() - start
        if spent >= 0.05:
            break
        loops *= 2
    samples = []
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        for _ in range(loops):
            policy.decide(transcript, budget)
        samples.append((time.perf_counter() - start) / loops)
    return statistics.median(samples) * 1e3


def main(argv: list[str] | None = None) -> int:
    """Print one markdown table row per size and measure."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="200,20000")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    print("| turns | measure | median ms |")
    print("|---:|---|---:|")
    for size in (int(value) for value in args.sizes.split(",")):
        plain = agent_transcript(size)
        ranked = leveled(plain)
        budget = budget_for(plain, 0.5)
        measures: list[tuple[str, CompactionPolicy, Transcript]] = [
            ("DropOldestPolicy, no priorities", DropOldestPolicy(), plain),
            ("PriorityPolicy(), no priorities", PriorityPolicy(), plain),
            ("PriorityPolicy(), four levels", PriorityPolicy(), ranked),
            (
                "masking(0) then drop_oldest, no priorities",
                PolicyChain([ObservationMaskingPolicy(0), DropOldestPolicy()]),
                plain,
            ),
            (
                "PriorityPolicy(mask_results=True), no priorities",
                PriorityPolicy(mask_results=True),
                plain,
            ),
            (
                "PriorityPolicy(mask_results=True), four levels",
                PriorityPolicy(mask_results=True),
                ranked,
            ),
        ]
        for name, policy, transcript in measures:
            print(
                f"| {size:,} | {name} | {median_ms(policy, transcript, budget, args.repeat):.2f} |"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
