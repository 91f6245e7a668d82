"""Benchmark ``compact_to`` across window and result sizes: the prompt cache and needed facts.

Run ``python benchmarks/compact_to.py`` from the repository root (dev extras: tiktoken with its
offline cl100k encoding). For each result profile it builds one seeded coding-agent session in
OpenAI Chat form, as ``benchmarks/needed_fact.py`` does (a system prompt, the task, then per
step an assistant tool call and its result, three fact lines planted in every result, and before
each request one earlier fact that request needs), with results of:

* ``small``: 60 to 300 cl100k tokens;
* ``mixed``: 60 to 3 000 tokens, weighted 45/30/25 (``needed_fact.py``'s);
* ``large``: 1 000 to 8 000 tokens, weighted 60/40 (an agent reading whole files and logs).

Each session is fed step by step to ``ContextWindow("openai_chat", max_tokens=W,
keep_first=1, recall=True, estimator=cl100k)`` at every window size ``W`` (8 000 to 200 000) and
every ``compact_to`` candidate: ``0.4``, ``0.5``, ``0.6``, ``default`` (the window's default of
this version, ``compact_to`` not given) and ``0.1.1`` (the former default: half the window, or
``compact_at`` less 10 000 tokens when that is more). Reported per run: **uncached** (input
tokens a prompt cache does not hold: per request, the cl100k tokens of the messages after its
longest leading run equal, message by message, to the previous request's; summed over the
session, in millions), compactions, mean steps between compactions, prefix-hit, and
**present** (the share of requests holding the fact they need verbatim).

``--smoke`` runs 40 steps at 8 000 and 32 000 tokens. ``--windows``, ``--profiles`` and
``--candidates`` (comma-separated) select; ``--json PATH`` writes every figure. ``--check``
exits non-zero if at any window size the default sends more uncached tokens than
``compact_to=0.5``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

if not __package__:  # run as a script: the sibling benchmark is importable
    sys.path.insert(0, str(Path(__file__).resolve().parent))

from cutctx import ContextWindow
from needed_fact import (
    ESTIMATOR,
    SEED,
    Pricer,
    Session,
    run,
    session,
)

STEPS = 300
SMOKE_STEPS = 40
WINDOWS = (8_000, 16_000, 32_000, 64_000, 128_000, 200_000)
SMOKE_WINDOWS = (8_000, 32_000)
PROFILES: dict[str, tuple[tuple[int, int, int], ...]] = {
    "small": ((60, 300, 1),),
    "mixed": ((60, 300, 45), (300, 1_000, 30), (1_000, 3_000, 25)),
    "large": ((1_000, 3_000, 60), (3_000, 8_000, 40)),
}
CANDIDATES = ("0.4", "0.5", "0.6", "default", "0.1.1")
COMPACT_AT = 0.8
FORMER_MOST_CUT = 10_000


def profile_session(buckets: tuple[tuple[int, int, int], ...], steps: int) -> Session:
    """Return a seeded session whose results are drawn from ``buckets`` (low, high, weight)."""
    return session(steps, SEED, buckets)


def compact_to_of(candidate: str, max_tokens: int) -> float | int | None:
    """Return the ``compact_to`` argument a candidate names at ``max_tokens``."""
    if candidate == "default":
        return None
    if candidate == "0.1.1":
        at = int(COMPACT_AT * max_tokens)
        return max(int(0.5 * max_tokens), at - FORMER_MOST_CUT)
    return float(candidate)


def measure(data: Session, max_tokens: int, candidate: str, price: Pricer) -> dict[str, float]:
    """Return one run's figures."""
    window = ContextWindow(
        "openai_chat",
        max_tokens=max_tokens,
        compact_at=COMPACT_AT,
        compact_to=compact_to_of(candidate, max_tokens),
        keep_first=1,
        estimator=ESTIMATOR,
        recall=True,
    )
    tally = run(data, window.prepare, max_tokens, price, recall=True)
    row = tally.row()
    compactions = window.stats.compactions
    return {
        "uncached_m": (tally.tokens - tally.shared) / 1e6,
        "compactions": compactions,
        "steps_between": tally.requests / compactions if compactions else float("inf"),
        "prefix_hit": row["prefix_hit"],
        "present": row["present"],
        "over": row["over"],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=STEPS)
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--windows", default=",".join(map(str, WINDOWS)))
    parser.add_argument("--profiles", default=",".join(PROFILES))
    parser.add_argument("--candidates", default=",".join(CANDIDATES))
    args = parser.parse_args(argv)
    steps = SMOKE_STEPS if args.smoke else args.steps
    windows = SMOKE_WINDOWS if args.smoke else tuple(map(int, args.windows.split(",")))
    candidates = args.candidates.split(",")
    figures: dict[str, dict[str, dict[str, dict[str, float]]]] = {}
    price = Pricer()
    print(f"compact_to benchmark: {steps} steps, cl100k, compact_at {COMPACT_AT}")
    print(
        f"{'profile':<7}{'window':>8}  {'compact_to':<11}{'uncached M':>11}{'cuts':>6}"
        f"{'steps/cut':>10}{'prefix-hit':>11}{'present':>9}{'over':>6}"
    )
    for profile in args.profiles.split(","):
        data = profile_session(PROFILES[profile], steps)
        figures[profile] = {}
        for max_tokens in windows:
            rows = figures[profile][str(max_tokens)] = {}
            for candidate in candidates:
                row = rows[candidate] = measure(data, max_tokens, candidate, price)
                print(
                    f"{profile:<7}{max_tokens:>8}  {candidate:<11}{row['uncached_m']:>11.3f}"
                    f"{row['compactions']:>6.0f}{row['steps_between']:>10.1f}"
                    f"{row['prefix_hit']:>10.1f}%{row['present']:>8.1f}%{row['over']:>6.0f}",
                    flush=True,
                )
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    failed = any(
        row["over"] for runs in figures.values() for rows in runs.values() for row in rows.values()
    )
    if args.check and "default" in candidates and "0.5" in candidates:
        missed = [
            f"{profile} at {size}"
            for profile, runs in figures.items()
            for size, rows in runs.items()
            if rows["default"]["uncached_m"] > rows["0.5"]["uncached_m"]
        ]
        print("default sends no more uncached tokens than 0.5:", missed or "met")
        failed = failed or bool(missed)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
