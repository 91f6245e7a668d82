"""Benchmark cutctx against its targets: plan, each policy, apply, the hashing floor and memory.

Run ``python benchmarks/run.py`` (standard library plus cutctx only). It builds deterministic
agent transcripts — a system prompt, a pinned task, then mostly assistant tool calls with bulky
tool results of mixed sizes (200 B to 64 kB), some multi-call exchanges and some plain chat — at
200, 2 000, 20 000 and 200 000 turns, and measures the median of ``--repeat`` timed runs of:

* ``default_chain`` planning under three budgets (see ``BUDGETS``: ``deep``, where masking alone
  cannot fit and the chain goes on to summarize; ``most`` and ``half``, where masking fits), and
  once more reading ``plan.actions`` (made on first read) after planning;
* each policy alone under the deep budget;
* ``apply`` of each budget's chain plan (its ``plan_hash`` included: each run applies a fresh
  plan);
* the *floor* of each plan: SHA-256 of exactly the bodies that plan masks, each written as a JSON
  string and UTF-8 encoded whole (``json.dumps(body, ensure_ascii=False)``, as the stub's digest
  is defined), plus one trivial Python pass over the turns.

It also records the peak extra memory (``tracemalloc``) while the chain plans, relative to the
transcript's text size (the sum of ``len(content)`` over its turns; every body is ASCII, so that
is also its UTF-8 size). Timings keep the garbage collector on, as an application would, and
collect before each sample. The samples are taken in rounds — one sample of every measure,
floor and size per round — so a slow spell of a shared machine falls on all of them alike.

``--smoke`` runs tiny sizes once or twice and exits non-zero if anything errors, so the benchmark
cannot rot (``scripts/gate`` runs it). ``--json PATH`` writes every figure as JSON.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import platform
import random
import statistics
import sys
import time
import tracemalloc
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cutctx import (
    Action,
    CharRatioEstimator,
    CompactionBudget,
    CompactionExecutor,
    CompactionPlan,
    DropOldestPolicy,
    ObservationMaskingPolicy,
    Role,
    SummarizingPolicy,
    Transcript,
    TranscriptTurn,
    default_chain,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from cutctx import CompactionPolicy

SIZES = (200, 2_000, 20_000, 200_000)
SMOKE_SIZES = (60, 400)
SEED = 20_240_601
PROMPT_ID = "bench/summary-v1"
BUDGETS = {"deep": 0.05, "most": 0.12, "half": 0.5}
"""The budgets, as fractions of the transcript's estimate (never below the untouchable set).

``deep``: below what masking every eligible tool result leaves (about 8 % here), so the chain
goes on to summarize (and would drop if the summary did not fit). ``most``: masking alone fits
after masking about 90 % of the text. ``half``: masking alone fits after about half of it."""
MIN_SAMPLE_SECONDS = 0.02
"""Small sizes time a loop of runs lasting at least this long and report the time per run."""

# Tool-result sizes in bytes: (low, high, weight). Mostly small and medium, a few very large.
BODY_BUCKETS = ((200, 1_000, 45), (1_000, 4_000, 35), (4_000, 16_000, 15), (16_000, 64_000, 5))
TOOLS = ("read_file", "run_tests", "grep", "list_dir", "shell", "http_get", "git_diff")
WORDS = (
    *("build", "cache", "key", "module", "import", "failed", "passed", "test", "step", "compile"),
    *("link", "error", "warning", "config", "value", "path", "request", "response", "token"),
    *("batch", "worker", "queue", "retry", "timeout", "commit", "branch", "merge", "diff"),
    *("schema", "field", "index", "table", "query", "user", "session", "update", "return"),
)


# ----------------------------------------------------------------------------- transcripts


def corpus(rng: random.Random, size: int) -> str:
    """Return ``size`` characters of log-, code- and JSON-like ASCII lines."""
    lines: list[str] = []
    length = 0
    while length < size:
        kind = rng.randrange(4)
        words = " ".join(rng.choice(WORDS) for _ in range(rng.randrange(3, 12)))
        if kind == 0:
            line = (
                f"2024-06-{rng.randrange(1, 29):02d}T{rng.randrange(24):02d}:"
                f"{rng.randrange(60):02d}:{rng.randrange(60):02d}Z "
                f"{rng.choice(('INFO', 'WARN', 'DEBUG', 'ERROR'))} {words}"
            )
        elif kind == 1:
            line = f'{{"id": {rng.randrange(10**6)}, "name": "{words}", "ok": true}},'
        elif kind == 2:
            line = f"    def {rng.choice(WORDS)}_{rng.randrange(100)}(self): return {words!r}"
        else:
            line = f"src/{rng.choice(WORDS)}/{rng.choice(WORDS)}.py:{rng.randrange(900)}: {words}"
        lines.append(line)
        length += len(line) + 1
    return "\n".join(lines)[:size]


def agent_transcript(turn_count: int, seed: int = SEED) -> Transcript:
    """Return a deterministic agent session of exactly ``turn_count`` turns.

    System prompt, pinned task (everything before the first assistant turn is pinned, as an agent
    loop does), then 80 % single tool calls, 8 % multi-call exchanges (one assistant turn, two to
    four results sharing its call id) and 12 % plain chat (a user message and a reply).
    """
    rng = random.Random(seed)
    text = corpus(rng, 1 << 20)
    limit = len(text) - BODY_BUCKETS[-1][1]
    estimate = CharRatioEstimator().estimate_tokens
    weights = [bucket[2] for bucket in BODY_BUCKETS]
    turns: list[TranscriptTurn] = []

    def add(role: Role, content: str, call: str | None = None, *, pinned: bool = False) -> None:
        turns.append(
            TranscriptTurn(f"m{len(turns)}", role, content, estimate(content), call, pinned)
        )

    def body() -> str:
        low, high, _ = rng.choices(BODY_BUCKETS, weights)[0]
        start = rng.randrange(limit)
        return text[start : start + rng.randrange(low, high)]

    def prose(low: int, high: int) -> str:
        start = rng.randrange(limit)
        return text[start : start + rng.randrange(low, high)]

    add(Role.SYSTEM, "You are a coding agent. Follow the rules.\n" + prose(1_500, 2_500))
    add(Role.USER, "Task: fix the failing nightly build.\n" + prose(300, 800), pinned=True)
    call_number = 0
    while len(turns) < turn_count:
        roll = rng.random()
        if roll < 0.88:
            call = f"call_{call_number}"
            call_number += 1
            results = 1 if roll < 0.80 else rng.randrange(2, 5)
            arguments = json.dumps({"path": f"src/{rng.choice(WORDS)}.py", "n": results})
            add(
                Role.ASSISTANT,
                f"Calling {rng.choice(TOOLS)} {arguments}. " + prose(60, 300),
                call,
            )
            for _ in range(results):
                add(Role.TOOL, body(), call)
        else:
            add(Role.USER, prose(40, 400))
            add(Role.ASSISTANT, prose(100, 1_200))
    return Transcript(tuple(turns[:turn_count]))


def text_size(transcript: Transcript) -> int:
    """The transcript's text size: the sum of ``len(content)`` (ASCII here, so also bytes)."""
    return sum(len(turn.content) for turn in transcript.turns)


# ----------------------------------------------------------------------------- measuring


def floor_work(transcript: Transcript, plan: CompactionPlan) -> Callable[[], object]:
    """Return the floor of ``plan``: the stub digests of the bodies it masks, plus one pass.

    Each digest is computed the plain way, whole: SHA-256 of ``json.dumps(body,
    ensure_ascii=False)`` as UTF-8.
    """
    turns = transcript.turns
    masked = [
        turns[index].content
        for index, action in enumerate(plan.actions)
        if action.action is Action.MASK
    ]
    sha256, dumps = hashlib.sha256, json.dumps

    def work() -> object:
        digests = [
            sha256(dumps(content, ensure_ascii=False).encode("utf-8")).hexdigest()
            for content in masked
        ]
        total = 0
        for turn in turns:
            total += turn.token_estimate
        return digests, total

    return work


@dataclass(frozen=True, slots=True)
class Sample:
    """A timing: the median and every sample in seconds, and the runs each sample averaged."""

    median: float
    samples: list[float]
    loops: int


@dataclass(slots=True)
class Timer:
    """One measure being timed: what ``setup()`` prepares (untimed) is one run.

    A sample is one run, or the average of a loop of ``loops`` runs when one run is shorter than
    ``MIN_SAMPLE_SECONDS``. The garbage collector stays on; it is emptied before every sample.
    """

    setup: Callable[[], Callable[[], object]]
    loops: int = 1
    samples: list[float] = field(default_factory=list)

    def warm_up(self) -> None:
        """Run once untimed (first touch, lazy imports), then size the loop from a timed run."""
        self.setup()()
        run = self.setup()
        start = time.perf_counter()
        run()
        once = time.perf_counter() - start
        self.loops = max(1, int(MIN_SAMPLE_SECONDS / once)) if once > 0 else 1

    def sample(self) -> None:
        """Take one sample."""
        runs = [self.setup() for _ in range(self.loops)]
        gc.collect()
        start = time.perf_counter()
        for run in runs:
            run()
        self.samples.append((time.perf_counter() - start) / self.loops)
        del runs

    def result(self) -> Sample:
        """The median and every sample."""
        return Sample(statistics.median(self.samples), list(self.samples), self.loops)


def interleaved(timers: list[Timer], repeat: int) -> None:
    """Take ``repeat`` samples of every timer, one round of all timers at a time.

    Shared machines drift (a busy neighbour slows everything for a while); taking the samples
    of every measure — its floor and every size included — in rounds spreads any slow spell
    over all of them alike, so the medians, and the ratios between them, stay comparable.
    """
    for timer in timers:
        timer.warm_up()
    for _ in range(repeat):
        for timer in timers:
            timer.sample()


@dataclass(slots=True)
class Row:
    """One measure at one size: its timer, its floor's timer and what the plan did."""

    size: int
    measure: str
    timer: Timer
    floor_timer: Timer | None = None
    notes: dict[str, Any] = field(default_factory=dict)

    @property
    def time(self) -> Sample:
        """The measure's samples and median."""
        return self.timer.result()

    @property
    def floor(self) -> Sample | None:
        """The floor's samples and median, if the measure has a floor."""
        return None if self.floor_timer is None else self.floor_timer.result()

    @property
    def ratio(self) -> float | None:
        """The measure's median over its floor's median, if it has a floor."""
        return None if self.floor is None else self.time.median / self.floor.median


def plan_notes(plan: CompactionPlan, transcript: Transcript) -> dict[str, Any]:
    """What a plan did: action counts, the bytes it masks, its figures."""
    counts = {kind.value: 0 for kind in Action}
    hashed = 0
    for action, turn in zip(plan.actions, transcript.turns, strict=True):
        counts[action.action.value] += 1
        if action.action is Action.MASK:
            hashed += len(turn.content)
    return {
        "actions": counts,
        "masked_bytes": hashed,
        "requests": len(plan.summarization_requests),
        "tokens_before": plan.tokens_before,
        "tokens_after_estimate": plan.tokens_after_estimate,
        "budget_unmet": plan.budget_unmet,
    }


def planning(
    policy: CompactionPolicy, transcript: Transcript, budget: CompactionBudget
) -> Callable[[], object]:
    """Return one planning run over a fresh transcript value (built untimed).

    A transcript keeps what it derives (its layout) for the plans made over it; an agent loop
    plans each new transcript once, so every sample gets a new value holding the same turns.
    """
    fresh = Transcript(transcript.turns)
    return lambda: policy.decide(fresh, budget)


def planning_collector_paused(
    policy: CompactionPolicy, transcript: Transcript, budget: CompactionBudget
) -> Callable[[], object]:
    """Return one planning run with Python's cyclic garbage collector paused (for comparison:
    what the collector's full passes over a large heap add to the library's own work)."""
    fresh = Transcript(transcript.turns)

    def run() -> object:
        gc.disable()
        try:
            return policy.decide(fresh, budget)
        finally:
            gc.enable()

    return run


def planning_and_reading(
    policy: CompactionPolicy, transcript: Transcript, budget: CompactionBudget
) -> Callable[[], object]:
    """Return one planning run that also reads ``plan.actions`` (made on first read), as a
    caller that inspects every action does; an agent loop that only applies never pays it."""
    fresh = Transcript(transcript.turns)
    return lambda: policy.decide(fresh, budget).actions


def applying(
    policy: CompactionPolicy, transcript: Transcript, budget: CompactionBudget
) -> Callable[[], object]:
    """Plan afresh (untimed, so ``plan_hash`` is not cached yet) and return one apply run."""
    plan = policy.decide(transcript, budget)
    summaries = {r.group_id: "Summary of the earlier work." for r in plan.summarization_requests}
    executor = CompactionExecutor()
    return lambda: executor.apply(transcript, plan, summaries)


def peak_memory(
    policy: CompactionPolicy, transcript: Transcript, budget: CompactionBudget
) -> tuple[int, int]:
    """Return the peak bytes ``tracemalloc`` sees allocated while ``policy`` plans, and the bytes
    still held afterwards (the plan, and the layout the transcript keeps).

    The plan is made over a fresh transcript value, so what it derives and keeps is counted.
    """
    transcript = Transcript(transcript.turns)
    gc.collect()
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        plan = policy.decide(transcript, budget)
        held, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    del plan
    return peak - before, held - before


def untouchable_tokens(transcript: Transcript, protected: int) -> int:
    """The tokens no budget can remove (system, pinned and the last ``protected`` turns)."""
    first = len(transcript.turns) - protected
    return sum(
        turn.token_estimate
        for index, turn in enumerate(transcript.turns)
        if turn.role is Role.SYSTEM or turn.pinned or index >= first
    )


def budget_for(transcript: Transcript, fraction: float) -> CompactionBudget:
    """``fraction`` of the estimate, raised to the untouchable set if that is larger."""
    wanted = int(transcript.token_estimate() * fraction)
    return CompactionBudget(max(wanted, untouchable_tokens(transcript, 4)))


def prepare_size(size: int, log: Callable[[str], None]) -> tuple[list[Row], dict[str, Any]]:
    """Build the transcript of ``size`` turns, measure memory, and set up its rows (untimed)."""
    started = time.perf_counter()
    transcript = agent_transcript(size)
    info: dict[str, Any] = {
        "turns": size,
        "text_bytes": text_size(transcript),
        "tokens": transcript.token_estimate(),
        "build_seconds": round(time.perf_counter() - started, 3),
    }
    megabytes = info["text_bytes"] / 1e6
    log(f"{size} turns: {megabytes:.1f} MB of text, built in {info['build_seconds']} s")
    budgets = {name: budget_for(transcript, fraction) for name, fraction in BUDGETS.items()}
    info["budgets"] = {name: budget.max_tokens for name, budget in budgets.items()}
    deep = budgets["deep"]
    chain = default_chain(prompt_id=PROMPT_ID)
    measures: list[tuple[str, CompactionPolicy, CompactionBudget]] = [
        *((f"default_chain plan ({name})", chain, budget) for name, budget in budgets.items()),
        ("masking alone (deep)", ObservationMaskingPolicy(), deep),
        ("summarizing alone (deep)", SummarizingPolicy(PROMPT_ID), deep),
        ("drop_oldest alone (deep)", DropOldestPolicy(), deep),
    ]
    rows: list[Row] = []
    for name, policy, budget in measures:
        plan = policy.decide(transcript, budget)
        rows.append(
            Row(
                size,
                name,
                Timer(partial(planning, policy, transcript, budget)),
                Timer(partial(floor_work, transcript, plan)),
                plan_notes(plan, transcript),
            )
        )
    most = budgets["most"]
    rows.append(
        Row(
            size,
            "default_chain plan (most), collector paused",
            Timer(partial(planning_collector_paused, chain, transcript, most)),
        )
    )
    rows.append(
        Row(
            size,
            "default_chain plan (most), then plan.actions read",
            Timer(partial(planning_and_reading, chain, transcript, most)),
        )
    )
    for name, budget in budgets.items():
        rows.append(
            Row(
                size,
                f"apply ({name} chain plan)",
                Timer(partial(applying, chain, transcript, budget)),
            )
        )
    info["peak_planning_bytes"] = {}
    info["held_after_planning_bytes"] = {}
    for name, budget in budgets.items():
        peak, held = peak_memory(chain, transcript, budget)
        info["peak_planning_bytes"][name] = peak
        info["held_after_planning_bytes"][name] = held
        log(f"  peak extra memory planning ({name}): {peak / 1e6:.2f} MB (held {held / 1e6:.2f})")
    return rows, info


def measure(
    sizes: list[int], repeat: int, log: Callable[[str], None]
) -> tuple[list[Row], list[dict[str, Any]]]:
    """Set up every size, then time every measure of every size in interleaved rounds."""
    rows: list[Row] = []
    infos: list[dict[str, Any]] = []
    for size in sizes:
        size_rows, info = prepare_size(size, log)
        rows.extend(size_rows)
        infos.append(info)
    timers = [timer for row in rows for timer in (row.timer, row.floor_timer) if timer is not None]
    log(f"timing {len(timers)} measures and floors, {repeat} interleaved rounds")
    interleaved(timers, repeat)
    for row in rows:
        floor = "" if row.floor is None else f" (floor {row.floor.median * 1e3:.2f} ms)"
        log(f"  {row.size} turns, {row.measure}: {row.time.median * 1e3:.2f} ms{floor}")
    return rows, infos


# ----------------------------------------------------------------------------- reporting


def table(rows: list[Row]) -> str:
    """Return the results as a Markdown table."""
    lines = [
        "| turns | measure | median ms | floor ms | x floor | masked MB | samples ms |",
        "|---:|---|---:|---:|---:|---:|---|",
    ]
    for row in rows:
        floor = "" if row.floor is None else f"{row.floor.median * 1e3:.2f}"
        ratio = "" if row.ratio is None else f"{row.ratio:.2f}"
        masked = row.notes.get("masked_bytes")
        masked_text = "" if masked is None else f"{masked / 1e6:.1f}"
        samples = " ".join(f"{value * 1e3:.1f}" for value in row.time.samples)
        lines.append(
            f"| {row.size:,} | {row.measure} | {row.time.median * 1e3:.2f} | {floor} | {ratio} "
            f"| {masked_text} | {samples} |"
        )
    return "\n".join(lines)


def targets(rows: list[Row], infos: list[dict[str, Any]]) -> list[tuple[str, str, bool | None]]:
    """Check the performance targets on the sizes measured: (target, measured, met).

    ``met`` is ``None`` where the target does not apply (a plan that masks nothing has no
    hashing floor to compare with).
    """
    by = {(row.size, row.measure): row for row in rows}
    checks: list[tuple[str, str, bool | None]] = []
    chain_rows = tuple(f"default_chain plan ({name})" for name in BUDGETS)
    for name in chain_rows:
        row = by.get((200, name))
        if row is not None:
            ms = row.time.median * 1e3
            checks.append((f"{name}, 200 turns <= 2 ms", f"{ms:.2f} ms", ms <= 2.0))
        for size in (20_000, 200_000):
            row = by.get((size, name))
            if row is not None and row.ratio is not None:
                target = f"{name}, {size:,} turns <= 2.5 x floor"
                if not row.notes["actions"][Action.MASK.value]:
                    # Nothing masked: the floor is a bare loop, and no ratio to it means much.
                    per_turn = row.time.median / size * 1e6
                    checks.append((target, f"n/a: masks nothing ({per_turn:.2f} µs/turn)", None))
                    continue
                checks.append((target, f"{row.ratio:.2f} x", row.ratio <= 2.5))
    apply_rows = tuple(f"apply ({name} chain plan)" for name in BUDGETS)
    for name in apply_rows:
        row = by.get((20_000, name))
        if row is not None:
            ms = row.time.median * 1e3
            checks.append((f"{name}, 20,000 turns <= 30 ms", f"{ms:.2f} ms", ms <= 30.0))
    for name in (*chain_rows, *apply_rows):
        small, large = by.get((20_000, name)), by.get((200_000, name))
        if small is not None and large is not None:
            growth = large.time.median / small.time.median
            checks.append((f"{name}: 200,000 / 20,000 <= 11", f"{growth:.2f}", growth <= 11))
    for info in infos:
        for name, peak in info["peak_planning_bytes"].items():
            fraction = peak / info["text_bytes"]
            target = f"peak extra memory planning ({name}), {info['turns']:,} turns <= 10 % of text"
            checks.append((target, f"{fraction:.1%}", fraction <= 0.10))
    return checks


def environment() -> dict[str, Any]:
    """Where the figures were taken."""
    return {
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "machine": platform.machine(),
        "platform": platform.platform(),
    }


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; return 0, or 1 if a target is missed under ``--check``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sizes",
        type=lambda text: [int(v) for v in text.split(",")],
        default=None,
        help="comma-separated turn counts (default: 200,2000,20000,200000)",
    )
    parser.add_argument(
        "--repeat", type=int, default=None, help="timed samples per measure (default 5)"
    )
    parser.add_argument(
        "--json", type=Path, default=None, help="also write every figure to this file"
    )
    parser.add_argument(
        "--smoke", action="store_true", help="tiny sizes, two samples: does it run?"
    )
    parser.add_argument(
        "--check", action="store_true", help="exit 1 if a performance target is missed"
    )
    args = parser.parse_args(argv)
    sizes = args.sizes or (list(SMOKE_SIZES) if args.smoke else list(SIZES))
    repeat = args.repeat or (2 if args.smoke else 5)
    if repeat < 1 or any(size < 8 for size in sizes):
        parser.error("--repeat must be >= 1 and every size >= 8 turns")

    def log(text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    rows, infos = measure(sizes, repeat, log)
    checks = targets(rows, infos)
    print(
        f"cutctx benchmark: {repeat} samples per measure, medians; Python {environment()['python']}"
    )
    print()
    print(table(rows))
    print()
    print(
        "| turns | text MB | tokens | budget | max_tokens | peak extra memory planning "
        "| held after (plan + layout) |"
    )
    print("|---:|---:|---:|---|---:|---:|---:|")
    for info in infos:
        for name, peak in info["peak_planning_bytes"].items():
            held = info["held_after_planning_bytes"][name]
            print(
                f"| {info['turns']:,} | {info['text_bytes'] / 1e6:.1f} | {info['tokens']:,} "
                f"| {name} | {info['budgets'][name]:,} "
                f"| {peak / 1e6:.2f} MB ({peak / info['text_bytes']:.1%}) "
                f"| {held / 1e6:.2f} MB ({held / info['text_bytes']:.1%}) |"
            )
    if checks:
        print()
        print("| target | measured | met |")
        print("|---|---:|---|")
        for target, measured, met in checks:
            verdict = "n/a" if met is None else "yes" if met else "NO"
            print(f"| {target} | {measured} | {verdict} |")
    if args.json is not None:
        document = {
            "environment": environment(),
            "repeat": repeat,
            "budget_fractions": BUDGETS,
            "sizes": infos,
            "rows": [
                {
                    "turns": row.size,
                    "measure": row.measure,
                    "median_seconds": row.time.median,
                    "samples_seconds": row.time.samples,
                    "loops_per_sample": row.time.loops,
                    "floor_median_seconds": None if row.floor is None else row.floor.median,
                    "ratio_to_floor": row.ratio,
                    **row.notes,
                }
                for row in rows
            ],
            "targets": [{"target": t, "measured": m, "met": ok} for t, m, ok in checks],
        }
        args.json.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    if args.check and any(met is False for _, _, met in checks):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
