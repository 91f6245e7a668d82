"""Benchmark the audit layer: making, storing, reading back, verifying and explaining a record.

Run ``python benchmarks/records.py`` (standard library plus cutctx only). It plans
``default_chain`` over the agent transcripts of ``benchmarks/run.py`` (200 and 20 000 turns, the
``most`` budget: masking fits) and reports the median of ``--repeat`` runs of each step. The
re-derivation inside ``verify`` is a full plan, so ``verify`` costs a plan plus the comparison.
``--smoke`` runs 200 turns once, so the script cannot rot.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cutctx import CompactionPlan, CompactionRecord, default_chain, explain, verify
from cutctx._audit.records import transcript_digest
from run import BUDGETS, agent_transcript, budget_for

if TYPE_CHECKING:
    from collections.abc import Callable

    from cutctx import CompactionBudget, CompactionPolicy, Transcript


def median_ms(work: Callable[[], object], repeat: int) -> float:
    """Return the median wall time of ``repeat`` runs of ``work``, in milliseconds."""
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        work()
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


def steps_for(
    policy: CompactionPolicy, transcript: Transcript, budget: CompactionBudget
) -> dict[str, Callable[[], object]]:
    """Return each step of the audit layer, as work to time, for one transcript and budget."""
    plan = policy.decide(transcript, budget)
    record = CompactionRecord.of(plan, transcript, budget, policy)
    text = json.dumps(record.to_dict())
    return {
        "plan (default_chain), for scale": lambda: policy.decide(transcript, budget),
        "transcript digest": lambda: transcript_digest(transcript),
        "CompactionRecord.of": lambda: CompactionRecord.of(plan, transcript, budget, policy),
        "to_dict + json.dumps": lambda: json.dumps(record.to_dict()),
        "json.loads + from_dict": lambda: CompactionRecord.from_dict(json.loads(text)),
        "CompactionPlan.from_json": lambda: CompactionPlan.from_json(
            plan.to_json(), transcript=transcript, budget=budget
        ),
        "verify": lambda: verify(record, transcript),
        "explain": lambda: explain(plan, transcript, budget),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="200,20000")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args(argv)
    sizes = [200] if args.smoke else [int(size) for size in args.sizes.split(",")]
    repeat = 1 if args.smoke else args.repeat
    policy = default_chain(prompt_id="summaries/v1")
    print("| turns | step | median ms |")
    print("|---:|---|---:|")
    for size in sizes:
        transcript = agent_transcript(size)
        budget = budget_for(transcript, BUDGETS["most"])
        record = CompactionRecord.of(policy.decide(transcript, budget), transcript, budget, policy)
        steps = steps_for(policy, transcript, budget)
        if not verify(record, transcript).ok:
            print("error: a fresh record does not verify", file=sys.stderr)
            return 1
        for name, work in steps.items():
            print(f"| {size:,} | {name} | {median_ms(work, repeat):.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
