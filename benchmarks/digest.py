"""Measure the stub digest against its floor and against a raw SHA-256 of the same bodies.

Run ``python benchmarks/digest.py [--turns N] [--repeat R]``. It builds the agent transcript of
``benchmarks/run.py`` and digests every tool result three ways, in interleaved rounds: the raw
SHA-256 of the UTF-8 body (what stubs carried before the 0.1 digest), the floor (SHA-256 of
``json.dumps(body, ensure_ascii=False)`` as UTF-8, whole) and cutctx's sliced digest. It prints
the median time of each and its throughput.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import time
from typing import TYPE_CHECKING

from cutctx import Role
from cutctx._core.digest import json_string_digest
from run import agent_transcript

if TYPE_CHECKING:
    from collections.abc import Callable


def main() -> None:
    """Time the three digests over the tool results and print the medians."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=2_000)
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    transcript = agent_transcript(args.turns)
    bodies = [turn.content for turn in transcript.turns if turn.role is Role.TOOL]
    megabytes = sum(len(body.encode("utf-8")) for body in bodies) / 1e6

    def raw() -> object:
        return [hashlib.sha256(body.encode("utf-8")).hexdigest() for body in bodies]

    def floor() -> object:
        return [
            hashlib.sha256(json.dumps(body, ensure_ascii=False).encode("utf-8")).hexdigest()
            for body in bodies
        ]

    def sliced() -> object:
        return [json_string_digest(body) for body in bodies]

    measures: dict[str, Callable[[], object]] = {
        "raw sha256": raw,
        "floor": floor,
        "cutctx": sliced,
    }
    samples: dict[str, list[float]] = {name: [] for name in measures}
    for _ in range(args.repeat):
        for name, work in measures.items():
            start = time.perf_counter()
            work()
            samples[name].append(time.perf_counter() - start)
    print(f"{len(bodies)} tool results, {megabytes:.1f} MB")
    for name, times in samples.items():
        median = statistics.median(times)
        print(f"{name:>10}: {median * 1e3:8.1f} ms  {megabytes / median:7.0f} MB/s")


if __name__ == "__main__":
    main()
