"""Benchmark recall: can a long agent session still reach a fact an earlier tool result held?

Run ``python benchmarks/recall.py`` from the repository root (it needs the dev extras, as
``benchmarks/loop.py`` does, whose session and audit it reuses). It builds the deterministic
(seeded) 600-step coding-agent session of ``benchmarks/loop.py`` and changes it in two ways,
chosen in advance from a seed of its own:

* **Large results.** About one tool call in fifty returns a result of 30 % to 100 % of the
  window (a big file, a long build log), over the result cap (``max_result_tokens``, a quarter
  of the window by default), so the window sends it as an excerpt: its first lines, one elision
  line, its last lines.
* **Facts.** A *fact* is a unique token (``fact-017-3fa9c2d1``) planted at the end of one line
  of one tool result — the line chosen in advance — and *needed* ``k`` steps later, ``k`` one
  of ``DISTANCES``. Every large result holds one fact (so some lie in an excerpt's left-out
  middle); the others are in results of every size.

Each session is rendered in OpenAI Chat and Anthropic Messages form and fed, step by step, to
three windows (``ContextWindow``, 32 000 tokens, ``compact_at=0.8``, ``compact_to=0.5``,
``keep_first=1``, cl100k, the default result cap; Anthropic with ``cache_breakpoints=True``):

* ``recall off``: ``recall=False`` (the default);
* ``recall on``: ``recall=True``, handed the same history;
* ``recall+calls``: ``recall=True``, and at a step that needs a fact the request lacks but
  names (below), the model calls ``cutctx_recall``: the history goes on with an assistant
  message calling it (for each such fact, ``{"sha256": ..., "start_line": ...}``) and the
  results ``window.recall`` gave, and that extra request is sent before the session's next step.

At the step that needs a fact, the request (the messages ``prepare`` returned) is judged:

* **present**: the fact's token is in the request (the result whole, or the fact in an
  excerpt's head or tail, or in a recall result still in context);
* **reachable with one recall call**: not present, but the request holds a stub or an elision
  line naming the ``sha256:`` of the fact's result (computed here from the original, as the
  digest a stub carries: SHA-256 of the text written as a JSON string) and
  ``window.recall({"sha256": <it>, "start_line": <the fact's line, counted from 1>})`` — the
  start line found from the original by the line index — returns a page holding the fact;
* **lost**: neither (the result, stub and all, was dropped; or recall is off).

For every reachable fact it also pages the original from ``start_line=1`` by the pages' continue
hints, as a model that knows no line would, and counts the calls until a page holds the fact;
every page is checked to be the original's lines verbatim. ``recall+calls`` also counts its calls
and whether each called fact is present in the very next request.

Per window it reports those shares (overall, by distance, and for the facts in excerpted
results), **prefix-hit** and the counts of ``benchmarks/loop.py`` (the same definitions and
independent counters: requests over ``max_tokens``, invalid, missing the task), compactions,
resets, the per-step median of ``prepare`` and the median time of one ``window.recall`` call.
The target: prefix-hit with recall on within 1 point of recall off.

``--smoke`` runs a 60-step session in a 12 000-token window (``scripts/gate`` runs it) and
exits non-zero if a request is over, invalid or missing the task, a recall page is not verbatim,
a called fact is missing from the next request, a fact is reachable with recall off, or recall on
reaches fewer facts than recall off holds; it judges no prefix-hit target. ``--check`` also
exits non-zero if the prefix-hit target is missed. ``--json PATH`` writes every figure as JSON.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import random
import re
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cutctx import ContextWindow
from cutctx.formats import anthropic, openai_chat
from loop import (
    COMPACT_AT,
    COMPACT_TO,
    ENCODING,
    KEEP_FIRST,
    SEED,
    Auditor,
    Config,
    Corpus,
    Session,
    agent_session,
    anthropic_messages,
    chat_messages,
    cl100k,
    same,
)
from run import environment  # the sibling benchmark's record of the machine

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from types import ModuleType

STEPS = 600
MAX_TOKENS = 32_000
SMOKE_STEPS = 60
SMOKE_MAX_TOKENS = 12_000
FACT_SEED = 20_261_218
BIG_SHARE = 0.02
"""Share of tool calls whose result is large: over the result cap."""
BIG_LEAST = 2
"""Large results in a session however short."""
BIG_SIZE = (0.3, 1.0)
"""A large result's size, as fractions of the window."""
FACT_EVERY = 4
"""One fact per this many steps (besides the one in every large result)."""
DISTANCES = (1, 4, 16, 64, 256)
"""Steps between the result that holds a fact and the step that needs it."""
PREFIX_TARGET = 0.01
"""Recall on's prefix-hit may fall at most this far below recall off's."""
FORMATS = (openai_chat, anthropic)
DIGEST_NAMED = re.compile(r"sha256:([0-9a-f]{64})")
HINT = re.compile(r"\[cutctx_recall: lines [0-9]+-([0-9]+) of [0-9]+; continue with start_line=")


# ----------------------------------------------------------------------------- the session


@dataclass(frozen=True, slots=True)
class Fact:
    """A token planted at the end of line ``line`` (counted from 0) of call ``call_id``'s result.

    The result arrives at step ``source`` and the fact is needed at step ``needed``; ``big``:
    the result is over the cap (it is sent as an excerpt).
    """

    number: int
    token: str
    call_id: str
    line: int
    source: int
    needed: int
    big: bool
    original: str

    @property
    def distance(self) -> int:
        """Steps from the result to the step that needs it."""
        return self.needed - self.source

    @property
    def digest(self) -> str:
        """The digest a stub of the result names: SHA-256 of the text as a JSON string."""
        written = json.dumps(self.original, ensure_ascii=False)
        return hashlib.sha256(written.encode()).hexdigest()


def _plant(text: str, line: int, token: str) -> str:
    lines = text.split("\n")
    lines[line] = f"{lines[line]} {token}"
    return "\n".join(lines)


def recall_session(steps: int, max_tokens: int) -> tuple[Session, list[Fact]]:
    """Return the session of ``benchmarks/loop.py`` with large results and facts planted."""
    base = agent_session(steps)
    rng = random.Random(FACT_SEED)
    low, high = (int(share * max_tokens) for share in BIG_SIZE)
    corpus = Corpus(rng, high * 4)
    distances = tuple(k for k in DISTANCES if k < steps // 2) or (1,)
    events = list(base.events)
    # The tool calls, by the step (1 + event index) whose messages hold their results.
    calls = [
        (index + 1, position)
        for index, event in enumerate(events)
        for position in range(len(event.calls))
    ]
    big = set(rng.sample(calls, max(BIG_LEAST, round(len(calls) * BIG_SHARE))))
    chosen: dict[tuple[int, int], int] = {}  # spot -> distance
    for spot in sorted(big):
        fits = [k for k in distances if spot[0] + k < steps]
        if fits:
            chosen[spot] = rng.choice(fits)
    for number in range(steps // FACT_EVERY):
        k = distances[number % len(distances)]
        spots = [spot for spot in calls if spot[0] + k < steps and spot not in chosen]
        if spots:
            chosen[rng.choice(spots)] = k
    facts: list[Fact] = []
    for number, (spot, k) in enumerate(sorted(chosen.items())):
        step, position = spot
        event = events[step - 1]
        call = event.calls[position]
        result = corpus.text(low, high) if spot in big else call.result
        line = rng.randrange(result.count("\n") + 1)
        token = f"fact-{number:03d}-{rng.getrandbits(32):08x}"
        result = _plant(result, line, token)
        replaced = list(event.calls)
        replaced[position] = dataclasses.replace(call, result=result)
        events[step - 1] = dataclasses.replace(event, calls=tuple(replaced))
        facts.append(Fact(number, token, call.call_id, line, step, step + k, spot in big, result))
    for spot in big - chosen.keys():  # a large result that holds no fact is large all the same
        step, position = spot
        event = events[step - 1]
        replaced = list(event.calls)
        replaced[position] = dataclasses.replace(replaced[position], result=corpus.text(low, high))
        events[step - 1] = dataclasses.replace(event, calls=tuple(replaced))
    return Session(base.system, base.task, tuple(events)), facts


def recall_messages(module: ModuleType, calls: list[tuple[str, dict[str, Any], str]]) -> list[Any]:
    """The messages of one model turn that calls ``cutctx_recall``: (call id, arguments, page)."""
    if module is anthropic:
        uses = [
            {"type": "tool_use", "id": call_id, "name": "cutctx_recall", "input": arguments}
            for call_id, arguments, _ in calls
        ]
        results = [
            {"type": "tool_result", "tool_use_id": call_id, "content": page}
            for call_id, _, page in calls
        ]
        return [
            {"role": "assistant", "content": [{"type": "text", "text": "Reading it back."}, *uses]},
            {"role": "user", "content": results},
        ]
    tool_calls = [
        {
            "id": call_id,
            "type": "function",
            "function": {"name": "cutctx_recall", "arguments": json.dumps(arguments)},
        }
        for call_id, arguments, _ in calls
    ]
    results = [
        {"role": "tool", "tool_call_id": call_id, "content": page} for call_id, _, page in calls
    ]
    return [
        {"role": "assistant", "content": "Reading it back.", "tool_calls": tool_calls},
        *results,
    ]


# ----------------------------------------------------------------------------- the loops


@dataclass(frozen=True, slots=True)
class Spec:
    """One window of the benchmark: with recall or not, and whether the model calls it."""

    name: str
    recall: bool
    calls: bool = False


SPECS = (
    Spec("recall off", recall=False),
    Spec("recall on", recall=True),
    Spec("recall+calls", recall=True, calls=True),
)


def new_window(module: ModuleType, config: Config, *, recall: bool) -> ContextWindow:
    """The window of ``benchmarks/loop.py``'s ``window`` loop, with ``recall``."""
    return ContextWindow(
        module.FORMAT,
        max_tokens=config.max_tokens,
        compact_at=COMPACT_AT,
        compact_to=COMPACT_TO,
        keep_first=KEEP_FIRST,
        system=config.system if module is anthropic else None,
        estimator=cl100k(),
        cache_breakpoints=module is anthropic,
        recall=recall,
    )


@dataclass(slots=True)
class Judged:
    """What one request says of one needed fact."""

    fact: Fact
    present: bool
    reachable: bool
    pages_from_start: int | None = None


@dataclass(slots=True)
class Run:
    """One window in one format: its figures."""

    format: str
    spec: Spec
    judged: list[Judged] = field(default_factory=list)
    requests: int = 0
    prefix_tokens: int = 0
    request_tokens: int = 0
    over: int = 0
    invalid: int = 0
    missing_task: int = 0
    compactions: int = 0
    resets: int = 0
    excerpted: int = 0
    calls: int = 0
    found_after_call: int = 0
    not_verbatim: int = 0
    first_problem: str = ""
    step_seconds: list[float] = field(default_factory=list)
    recall_seconds: list[float] = field(default_factory=list)

    @property
    def prefix_hit(self) -> float:
        """Prefix tokens over request tokens."""
        return self.prefix_tokens / self.request_tokens if self.request_tokens else 0.0

    def share(self, what: Callable[[Judged], bool], among: Callable[[Judged], bool]) -> str:
        """``what`` over the judged facts ``among`` picks, as a percentage and counts."""
        pool = [judged for judged in self.judged if among(judged)]
        hits = sum(1 for judged in pool if what(judged))
        return f"{hits / len(pool):.0%} ({hits}/{len(pool)})" if pool else ""


def every(judged: Judged) -> bool:
    """Every judged fact."""
    del judged
    return True


def present(judged: Judged) -> bool:
    """The fact is in the request."""
    return judged.present


def reachable(judged: Judged) -> bool:
    """Not in the request, but one recall call reads it back."""
    return judged.reachable


def either(judged: Judged) -> bool:
    """Present, or reachable with one recall call."""
    return judged.present or judged.reachable


class Lane:
    """One window being driven over one format's session: its history, requests and run."""

    def __init__(
        self,
        module: ModuleType,
        spec: Spec,
        config: Config,
        auditor: Auditor,
        facts: Sequence[Fact],
    ) -> None:
        self.module = module
        self.spec = spec
        self.auditor = auditor
        self.window = new_window(module, config, recall=spec.recall)
        self.run = Run(module.FORMAT, spec)
        self.skip = 1 if module is openai_chat else 0  # the system message is not counted
        self.history: list[Any] = []
        self.previous: list[Any] = []
        self.task: dict[str, Any] = {}
        self.needed: dict[int, list[Fact]] = {}
        for fact in facts:
            self.needed.setdefault(fact.needed, []).append(fact)
        self.elided: set[str] = set()

    def step(self, number: int, added: list[Any]) -> None:
        """Append step ``number``'s messages, send the request, judge the facts it needs."""
        if number == 0:
            self.task = added[-1]
        self.history.extend(added)
        request = self.send()
        wanted: list[tuple[Fact, int]] = []
        for fact in self.needed.get(number, ()):
            judged = self.judge(fact, request)
            self.run.judged.append(judged)
            if judged.reachable:
                wanted.append((fact, fact.line + 1))
        if self.spec.calls and wanted:
            self.call(number, wanted)

    def send(self) -> list[Any]:
        """Prepare the history, time it, audit the request; return it."""
        start = time.perf_counter()
        request = self.window.prepare(self.history)
        self.run.step_seconds.append(time.perf_counter() - start)
        self.audit(request)
        self.previous = request
        self.run.compactions = self.window.stats.compactions
        self.run.resets = self.window.stats.resets
        return request

    def recall(self, arguments: dict[str, Any]) -> str:
        """``window.recall``, timed."""
        start = time.perf_counter()
        page = self.window.recall(arguments)
        self.run.recall_seconds.append(time.perf_counter() - start)
        return page

    def judge(self, fact: Fact, request: list[Any]) -> Judged:
        """Whether ``request`` holds ``fact``, or names its result so one recall reads it."""
        text = json.dumps(request)
        if fact.token in text:
            return Judged(fact, present=True, reachable=False)
        if f"sha256:{fact.digest}" not in text:
            return Judged(fact, present=False, reachable=False)
        page = self.recall({"sha256": fact.digest, "start_line": fact.line + 1})
        if not self.spec.recall:  # the page is the one line saying recall is off
            return Judged(fact, present=False, reachable=fact.token in page)
        self.check_page(fact, fact.line + 1, page)
        if fact.token not in page:
            return Judged(fact, present=False, reachable=False)
        return Judged(fact, present=False, reachable=True, pages_from_start=self.pages(fact))

    def pages(self, fact: Fact) -> int | None:
        """The recall calls from ``start_line=1``, by the hints, until a page holds the fact."""
        start, calls = 1, 0
        while True:
            page = self.recall({"sha256": fact.digest, "start_line": start})
            calls += 1
            self.check_page(fact, start, page)
            if fact.token in page:
                return calls
            hint = HINT.search(page)
            if hint is None:
                return None
            start = int(hint.group(1)) + 1

    def check_page(self, fact: Fact, start: int, page: str) -> None:
        """Count a page that is not the original's lines from ``start`` verbatim."""
        hint = HINT.search(page)
        body = page[: hint.start()] if hint is not None else page
        lines = fact.original.split("\n")
        rest = "\n".join(lines[start - 1 :])
        if not body or not rest.startswith(body) or (hint is None and body != rest):
            self.run.not_verbatim += 1
            self.problem(f"a page of {fact.token} from line {start} is not the original's")

    def call(self, number: int, wanted: list[tuple[Fact, int]]) -> None:
        """The model calls ``cutctx_recall`` for each fact wanted; send the extra request."""
        calls = []
        for fact, start in wanted:
            arguments = {"sha256": fact.digest, "start_line": start}
            call_id = f"recall_{number}_{fact.number}"
            calls.append((call_id, arguments, self.recall(arguments)))
        self.history.extend(recall_messages(self.module, calls))
        text = json.dumps(self.send())
        self.run.calls += len(wanted)
        for fact, _ in wanted:
            if fact.token in text:
                self.run.found_after_call += 1
            else:
                self.problem(f"{fact.token} is missing from the request after its recall call")

    def audit(self, request: list[Any]) -> None:
        """Count the request's prefix hit, whether it is over, invalid or without the task,
        and the excerpts it sends."""
        run, auditor = self.run, self.auditor
        run.requests += 1
        before = self.previous[self.skip :]
        shared = True
        for index, message in enumerate(request[self.skip :]):
            tokens = auditor.message_tokens(message)
            run.request_tokens += tokens
            shared = shared and index < len(before) and same(message, before[index])
            if shared:
                run.prefix_tokens += tokens
        problems = auditor.problems(request)
        over = auditor.over(request)
        task = auditor.holds_task(request, self.task)
        run.over += over
        run.invalid += bool(problems)
        run.missing_task += not task
        if problems or over or not task:
            what = "; ".join(problems) or ("over max_tokens" if over else "task missing")
            self.problem(f"request {run.requests - 1}: {what}")
        text = json.dumps(request)
        for found in re.finditer(
            r"\[cutctx: [0-9]+ lines? left out[^\]]*sha256:([0-9a-f]{64})", text
        ):
            self.elided.add(found.group(1))
        run.excerpted = len(self.elided)

    def problem(self, what: str) -> None:
        """Keep the first problem."""
        if not self.run.first_problem:
            self.run.first_problem = what[:300]


def drive(
    session: Session, facts: list[Fact], config: Config, log: Callable[[str], None]
) -> list[Run]:
    """Run every window over the session in both formats, interleaved step by step."""
    rendered = {openai_chat: chat_messages(session), anthropic: anthropic_messages(session)}
    pristine = {module: json.dumps(steps) for module, steps in rendered.items()}
    lanes = [
        Lane(module, spec, config, Auditor(module, config), facts)
        for module in FORMATS
        for spec in SPECS
    ]
    started = time.perf_counter()
    for number in range(len(session.events) + 1):
        for lane in lanes:
            lane.step(number, rendered[lane.module][number])
        if number and number % 100 == 0:
            log(f"  step {number}: {time.perf_counter() - started:.1f} s")
    for module, steps in rendered.items():
        if json.dumps(steps) != pristine[module]:
            raise SystemExit(f"{module.FORMAT}: a window changed the caller's messages")
    return [lane.run for lane in lanes]


# ----------------------------------------------------------------------------- reporting


def checks(runs: list[Run]) -> list[tuple[str, str, bool, bool]]:
    """The benchmark's checks: (check, measured, met, a correctness check)."""
    found: list[tuple[str, str, bool, bool]] = []
    by_name = {(run.format, run.spec.name): run for run in runs}
    for run in runs:
        name = f"{run.format} {run.spec.name}"
        found.extend(
            [
                (f"{name}: 0 requests over max_tokens", str(run.over), not run.over, True),
                (f"{name}: 0 invalid requests", str(run.invalid), not run.invalid, True),
                (
                    f"{name}: the task in every request",
                    f"missing from {run.missing_task}",
                    not run.missing_task,
                    True,
                ),
                (
                    f"{name}: every recall page verbatim",
                    f"{run.not_verbatim} not",
                    not run.not_verbatim,
                    True,
                ),
            ]
        )
        if run.spec.calls:
            found.append(
                (
                    f"{name}: every called fact in the next request",
                    f"{run.found_after_call} of {run.calls}",
                    run.found_after_call == run.calls,
                    True,
                )
            )
        off = by_name.get((run.format, "recall off"))
        if run.spec.name == "recall off":
            reached = sum(1 for judged in run.judged if judged.reachable)
            found.append((f"{name}: no fact reachable", str(reached), not reached, True))
        elif off is not None and not run.spec.calls:
            held = sum(1 for judged in off.judged if judged.present)
            mine = sum(1 for judged in run.judged if either(judged))
            found.append(
                (
                    f"{name}: present or reachable >= recall off's present",
                    f"{mine} / {held}",
                    mine >= held,
                    True,
                )
            )
            found.append(
                (
                    f"{name}: prefix-hit within {PREFIX_TARGET * 100:g} point of recall off",
                    f"{run.prefix_hit:.1%} / {off.prefix_hit:.1%}",
                    run.prefix_hit >= off.prefix_hit - PREFIX_TARGET,
                    False,
                )
            )
    return found


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def _ms(seconds: list[float]) -> str:
    return f"{statistics.median(seconds) * 1e3:.2f}" if seconds else ""


def table(runs: list[Run]) -> str:
    """The runs as a Markdown table."""
    lines = [
        (
            "| format | window | facts | present | reachable with one call | present or reachable "
            "| prefix-hit | compactions | resets | excerpted results | recall calls "
            "| found after the call | over | invalid | task missing | median ms | recall ms |"
        ),
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for run in runs:
        calls = f"{run.calls}" if run.spec.calls else ""
        after = f"{run.found_after_call}" if run.spec.calls else ""
        lines.append(
            f"| {run.format} | {run.spec.name} | {len(run.judged)} "
            f"| {run.share(present, every)} | {run.share(reachable, every)} "
            f"| {run.share(either, every)} | {run.prefix_hit:.1%} | {run.compactions} "
            f"| {run.resets} | {run.excerpted} | {calls} | {after} | {run.over} | {run.invalid} "
            f"| {run.missing_task} | {_ms(run.step_seconds)} "
            f"| {_ms(run.recall_seconds) if run.spec.recall else ''} |"
        )
    return "\n".join(lines)


def at_distance(k: int) -> Callable[[Judged], bool]:
    """Whether a judged fact was needed ``k`` steps after its result."""

    def among(judged: Judged) -> bool:
        return judged.fact.distance == k

    return among


def by_distance(runs: list[Run]) -> str:
    """Present / reachable by the distance to the result, and for excerpted results."""
    shown = [run for run in runs if not run.spec.calls]
    head = " | ".join(f"{run.format} {run.spec.name}" for run in shown)
    lines = [
        f"| facts | {head} |",
        "|---|" + "---:|" * len(shown),
    ]
    distances = sorted({judged.fact.distance for judged in runs[0].judged})
    rows = [(f"needed {_plural(k, 'step')} later", at_distance(k)) for k in distances]
    rows.append(("in a result over the cap (excerpted)", lambda judged: judged.fact.big))
    rows.append(("in a result within the cap", lambda judged: not judged.fact.big))
    for label, among in rows:
        cells = " | ".join(
            f"{run.share(present, among)} + {run.share(reachable, among)}" for run in shown
        )
        lines.append(f"| {label} | {cells} |")
    return "\n".join(lines)


def pages_line(runs: list[Run]) -> str:
    """How many calls paging from ``start_line=1`` takes to reach a reachable fact."""
    parts = []
    for run in runs:
        if not run.spec.recall or run.spec.calls:
            continue
        counts = [j.pages_from_start for j in run.judged if j.pages_from_start is not None]
        if counts:
            parts.append(
                f"{run.format}: median {statistics.median(counts):g}, max {max(counts)} "
                f"(of {len(counts)} reachable facts)"
            )
    return "; ".join(parts)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; return 0, or 1 if a correctness check fails (see ``--smoke``)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=None, help="requests (default 600)")
    parser.add_argument(
        "--max-tokens", type=int, default=None, help="the window's size (default 32000)"
    )
    parser.add_argument(
        "--json", type=Path, default=None, help="also write every figure to this file"
    )
    parser.add_argument("--smoke", action="store_true", help="a short session: does it run, right?")
    parser.add_argument(
        "--check", action="store_true", help="exit 1 if the prefix target is missed"
    )
    args = parser.parse_args(argv)
    steps = args.steps or (SMOKE_STEPS if args.smoke else STEPS)
    max_tokens = args.max_tokens or (SMOKE_MAX_TOKENS if args.smoke else MAX_TOKENS)
    if steps < 2:
        parser.error("--steps must be >= 2")

    def log(text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    started = time.perf_counter()
    session, facts = recall_session(steps, max_tokens)
    config = Config(max_tokens, session.system)
    built = time.perf_counter() - started
    log(f"session of {steps} steps, {len(facts)} facts, built in {built:.1f} s")
    runs = drive(session, facts, config, log)
    log(f"ran in {time.perf_counter() - started:.1f} s")
    found = checks(runs)
    big = sum(1 for fact in facts if fact.big)
    print(
        f"cutctx recall benchmark: {steps} steps, {max_tokens:,}-token window, "
        f"compact_at {COMPACT_AT} -> compact_to {COMPACT_TO}, keep_first={KEEP_FIRST}, "
        f"default result cap, cl100k; {len(facts)} facts ({big} in large results), "
        f"needed {', '.join(map(str, sorted({fact.distance for fact in facts})))} steps later; "
        f"session seed {SEED}, fact seed {FACT_SEED}; Python {environment()['python']}"
    )
    tool_tokens = {
        module.FORMAT: len(
            ENCODING.encode(json.dumps(new_window(module, config, recall=True).recall_tool))
        )
        for module in FORMATS
    }
    print(
        "The cutctx_recall definition (window.recall_tool) as JSON: "
        + ", ".join(f"{tokens} cl100k tokens ({name})" for name, tokens in tool_tokens.items())
        + "."
    )
    print()
    print(table(runs))
    print()
    print("Present + reachable with one recall call, by fact:")
    print()
    print(by_distance(runs))
    pages = pages_line(runs)
    if pages:
        print()
        print(f"Recall calls from start_line=1 to a reachable fact: {pages}.")
    problems = [f"- {run.format} {run.spec.name}: {run.first_problem}" for run in runs]
    problems = [line for line, run in zip(problems, runs, strict=True) if run.first_problem]
    if problems:
        print()
        print("First problem of each window that had one:")
        print("\n".join(problems))
    print()
    if args.smoke and not args.check:
        wrong = [check for check, _, met, correctness in found if correctness and not met]
        verdict = "; failed: " + "; ".join(wrong) if wrong else ": every correctness check met"
        print(f"Smoke run: every window ran {steps} steps{verdict}.")
        print("(A short run judges no prefix-hit target: the full run does.)")
    else:
        print("| check | measured | met |")
        print("|---|---:|---|")
        for check, measured, met, _ in found:
            print(f"| {check} | {measured} | {'yes' if met else 'NO'} |")
    if args.json is not None:
        document = {
            "environment": environment(),
            "steps": steps,
            "max_tokens": max_tokens,
            "compact_at": COMPACT_AT,
            "compact_to": COMPACT_TO,
            "keep_first": KEEP_FIRST,
            "session_seed": SEED,
            "fact_seed": FACT_SEED,
            "recall_tool_tokens": tool_tokens,
            "facts": [
                {
                    "token": fact.token,
                    "call_id": fact.call_id,
                    "line": fact.line,
                    "source_step": fact.source,
                    "needed_step": fact.needed,
                    "large_result": fact.big,
                    "sha256": fact.digest,
                }
                for fact in facts
            ],
            "runs": [
                {
                    "format": run.format,
                    "window": run.spec.name,
                    "recall": run.spec.recall,
                    "model_calls_recall": run.spec.calls,
                    "present": [judged.fact.token for judged in run.judged if judged.present],
                    "reachable": [judged.fact.token for judged in run.judged if judged.reachable],
                    "pages_from_start": {
                        judged.fact.token: judged.pages_from_start
                        for judged in run.judged
                        if judged.pages_from_start is not None
                    },
                    "prefix_hit": run.prefix_hit,
                    "prefix_tokens": run.prefix_tokens,
                    "request_tokens": run.request_tokens,
                    "requests": run.requests,
                    "compactions": run.compactions,
                    "resets": run.resets,
                    "excerpted_results": run.excerpted,
                    "recall_calls": run.calls if run.spec.calls else None,
                    "found_after_call": run.found_after_call if run.spec.calls else None,
                    "over": run.over,
                    "invalid": run.invalid,
                    "missing_task": run.missing_task,
                    "pages_not_verbatim": run.not_verbatim,
                    "first_problem": run.first_problem or None,
                    "median_step_seconds": statistics.median(run.step_seconds),
                    "median_recall_seconds": (
                        statistics.median(run.recall_seconds) if run.recall_seconds else None
                    ),
                }
                for run in runs
            ],
            "checks": [
                {"check": c, "measured": m, "met": ok, "correctness": k} for c, m, ok, k in found
            ],
        }
        args.json.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    missed = [check for check in found if not check[2] and (check[3] or args.check)]
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
