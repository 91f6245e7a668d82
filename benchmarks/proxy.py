"""Benchmark ``cutctx proxy``: the latency it adds, its memory, and the prompt cache it keeps.

Run ``python benchmarks/proxy.py`` from the repository root (it needs the dev and proxy extras;
``--smoke`` runs every part at a small size in seconds and checks nothing but that it runs).
Everything runs in this process, with no network: the client reaches each path through
``httpx.ASGITransport`` and every path reaches the same fake Anthropic upstream through
``httpx.MockTransport``. The upstream answers ``POST /v1/messages`` with a short message whose
``usage`` a simulated prompt cache fills in (``PromptCache``, Anthropic's rules below).

1. **Latency**: ten conversations whose histories start at 60 messages (~80 000 tokens; a
   system prompt, seven tools, tool calls and results of ~2 600 tokens), taking turns, each
   request one short exchange longer, sent (a) directly to the upstream, (b) through a bare
   relay (a Starlette route that forwards the body with httpx and returns the answer, nothing
   else), and (c) through the proxy (``create_app`` over a SQLite store in a temporary
   directory; the model's context size, so nothing is cut). The three are interleaved request
   by request; the median and p95 of each and the proxy's added latency (proxy less direct,
   proxy less relay) are reported, and the added CPU time (the process's, all threads: what
   a loaded machine does not stretch), for a client that marks the newest block for the cache as
   Claude Code does and for one that sends no markers. Also the proxy's first request of each
   conversation (the window prices the whole history).
2. **Memory**: the process's resident set before and after 1 000 conversations (six messages
   each) have gone through the proxy and sit idle in its SQLite store, and the store's size.
3. **Cache**: a 200-step agent session (``benchmarks/loop.py``'s, in Anthropic form), sent the
   way Claude Code sends it — two cache breakpoints on the system prompt and one on the last
   block of the last user message, moving every request — directly (the full history every
   time) and through the proxy with ``--max-tokens`` (40 000 by default). The upstream's usage
   is the cache's: the share of input tokens read from the cache and the input cost
   (uncached 1.0, cache write 1.25, cache read 0.1), proxy against direct. ``--sweep`` also
   runs the window's settings that matter for the cache (``compact_at``, ``compact_to``,
   ``max_result_tokens``) over the same session, in the library, with the same cache, with the
   client's markers and with the window's own (``cache_breakpoints=True``, no client markers;
   still against the direct session with Claude Code's markers).

``PromptCache`` follows Anthropic's documented rules: the prompt is tools, then system, then
messages, read as content blocks; a request with ``cache_control`` on a block writes the prefix
that ends there; a later request reads the longest written prefix that ends at one of its own
breakpoints or at most 20 blocks before one; what lies between that and its last breakpoint is
written, the rest is uncached. The 5-minute lifetime and the minimum cacheable length are left
out. A block's tokens are its JSON text's characters over four.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import gc
import hashlib
import json
import random
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
from starlette.applications import Starlette
from starlette.responses import Response
from starlette.routing import Route

from cutctx import ContextWindow
from cutctx._proxy.app import COMPACT_AT, COMPACT_TO, MAX_RESULT_TOKENS, create_app
from cutctx._proxy.store import SqliteStore
from loop import Corpus, agent_session, anthropic_messages

if TYPE_CHECKING:
    from collections.abc import Iterator

    from starlette.requests import Request

Message = dict[str, Any]
Body = dict[str, Any]

MODEL = "claude-sonnet-4-5"
REPLY_TOKENS = 4_096
UPSTREAM = "http://upstream.invalid"
HEADERS = {"x-api-key": "sk-benchmark", "anthropic-version": "2023-06-01"}
MARK = {"type": "ephemeral"}
LOOKBACK = 20
PRICES = {"uncached": 1.0, "write": 1.25, "read": 0.1}
CONVERSATIONS = 10  # the latency run's, taking turns
TOOLS = ("read_file", "run_tests", "grep", "list_dir", "shell", "git_diff", "edit_file")


# -- the simulated provider ---------------------------------------------------------------------


@dataclass
class Usage:
    """Input tokens by how the cache served them."""

    read: int = 0
    write: int = 0
    uncached: int = 0

    def add(self, other: Usage) -> None:
        self.read += other.read
        self.write += other.write
        self.uncached += other.uncached

    @property
    def total(self) -> int:
        return self.read + self.write + self.uncached

    @property
    def cost(self) -> float:
        return (
            self.uncached * PRICES["uncached"]
            + self.write * PRICES["write"]
            + self.read * PRICES["read"]
        )

    @property
    def read_share(self) -> float:
        return self.read / self.total if self.total else 0.0


def _unmarked(value: object) -> Any:  # noqa: ANN401 - JSON data of any shape
    if isinstance(value, dict):
        return {k: _unmarked(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_unmarked(v) for v in value]
    return value


def blocks(body: Body) -> Iterator[tuple[bytes, int, bool]]:
    """The prompt's content blocks in cache order: (canonical text, tokens, marked)."""

    def block(where: str, value: object) -> tuple[bytes, int, bool]:
        marked = isinstance(value, dict) and "cache_control" in value
        text = json.dumps([where, _unmarked(value)], sort_keys=True).encode()
        return text, max(1, len(text) // 4), marked

    for tool in body.get("tools") or ():
        yield block("tool", tool)
    system = body.get("system")
    for part in [system] if isinstance(system, str) else system or ():
        yield block("system", part)
    for message in body["messages"]:
        content = message["content"]
        for index, part in enumerate([content] if isinstance(content, str) else content):
            yield block(f"{message['role']}:{index == 0}", part)


class PromptCache:
    """Anthropic's prompt cache, simulated (see the module docstring)."""

    def __init__(self) -> None:
        self.written: set[bytes] = set()
        self.usage = Usage()

    def serve(self, body: Body) -> Usage:
        chain = hashlib.sha256()
        hashes: list[bytes] = []
        ends: list[int] = []
        breakpoints: list[int] = []
        total = 0
        for position, (text, tokens, marked) in enumerate(blocks(body)):
            chain.update(text)
            hashes.append(chain.copy().digest())
            total += tokens
            ends.append(total)
            if marked:
                breakpoints.append(position)
        hit = -1
        for point in breakpoints:
            for position in range(point, max(-1, point - LOOKBACK), -1):
                if hashes[position] in self.written:
                    hit = max(hit, position)
                    break
        read = ends[hit] if hit >= 0 else 0
        cached = ends[breakpoints[-1]] if breakpoints else 0
        usage = Usage(read, max(0, cached - read), total - max(read, cached))
        self.written.update(hashes[point] for point in breakpoints)
        self.usage.add(usage)
        return usage


def upstream(cache: PromptCache) -> httpx.MockTransport:
    """The fake Anthropic upstream: a short answer whose usage ``cache`` fills in."""

    async def answer(request: httpx.Request) -> httpx.Response:
        body = json.loads(await request.aread())
        usage = cache.serve(body)
        return httpx.Response(
            200,
            json={
                "id": "msg_benchmark",
                "type": "message",
                "role": "assistant",
                "model": body.get("model"),
                "content": [{"type": "text", "text": "Done."}],
                "stop_reason": "end_turn",
                "stop_sequence": None,
                "usage": {
                    "input_tokens": usage.uncached,
                    "cache_creation_input_tokens": usage.write,
                    "cache_read_input_tokens": usage.read,
                    "output_tokens": 2,
                },
            },
        )

    return httpx.MockTransport(answer)


# -- the three paths ----------------------------------------------------------------------------


class Path3:
    """A client's way to the upstream: an async ``send(body) -> answer`` and its cleanup."""

    def __init__(self, transport: httpx.AsyncBaseTransport, base: str) -> None:
        self.client = httpx.AsyncClient(transport=transport, base_url=base, timeout=60.0)

    async def send(self, body: Body) -> dict[str, Any]:
        answer = await self.client.post("/v1/messages", content=json.dumps(body), headers=HEADERS)
        answer.raise_for_status()
        return dict(answer.json())

    async def aclose(self) -> None:
        await self.client.aclose()


def direct(cache: PromptCache) -> Path3:
    """Straight to the upstream."""
    return Path3(upstream(cache), UPSTREAM)


def bare_relay(cache: PromptCache) -> Path3:
    """A relay that forwards the body and returns the answer, and does nothing else."""
    client = httpx.AsyncClient(transport=upstream(cache), base_url=UPSTREAM, timeout=60.0)

    async def relay(request: Request) -> Response:
        keep = ("x-api-key", "anthropic-version", "content-type")
        headers = {name: request.headers[name] for name in keep if name in request.headers}
        answer = await client.post(request.url.path, content=await request.body(), headers=headers)
        return Response(answer.content, answer.status_code, media_type="application/json")

    app = Starlette(routes=[Route("/v1/messages", relay, methods=["POST"])])
    return Path3(httpx.ASGITransport(app=app), "http://relay.invalid")


def through_proxy(cache: PromptCache, store_dir: Path, max_tokens: int | None) -> Path3:
    """Through ``cutctx proxy``'s app over a SQLite store in ``store_dir``."""
    store = SqliteStore(store_dir / "proxy.sqlite3")
    app = create_app(UPSTREAM, store=store, max_tokens=max_tokens, transport=upstream(cache))
    return Path3(httpx.ASGITransport(app=app), "http://proxy.invalid")


def client_body(system: list[Message], tools: list[Message], history: list[Message]) -> Body:
    """What Claude Code sends: its history, the last block of the last message marked."""
    last = dict(history[-1])
    content = last["content"]
    if isinstance(content, str):
        content = [{"type": "text", "text": content}]
    last["content"] = [*content[:-1], {**content[-1], "cache_control": MARK}]
    return {
        "model": MODEL,
        "max_tokens": REPLY_TOKENS,
        "system": system,
        "tools": tools,
        "messages": [*history[:-1], last],
    }


def make_tools(corpus: Corpus) -> list[Message]:
    return [
        {
            "name": name,
            "description": corpus.text(120, 160),
            "input_schema": {
                "type": "object",
                "properties": {"path": {"type": "string", "description": corpus.text(20, 40)}},
                "required": ["path"],
            },
        }
        for name in TOOLS
    ]


def make_system(corpus: Corpus) -> list[Message]:
    """Two blocks, both marked, as Claude Code sends them."""
    return [
        {"type": "text", "text": "You are a coding agent.", "cache_control": MARK},
        {"type": "text", "text": corpus.text(1_200, 1_600), "cache_control": MARK},
    ]


# -- 1. latency ---------------------------------------------------------------------------------


def exchange(corpus: Corpus, number: int, result: tuple[int, int]) -> list[Message]:
    """An assistant tool call and its result."""
    call = f"toolu_{number:06d}"
    return [
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": corpus.text(20, 60)},
                {"type": "tool_use", "id": call, "name": "read_file", "input": {"path": "a.py"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": call, "content": corpus.text(*result)}
            ],
        },
    ]


def long_history(corpus: Corpus, messages: int, result: tuple[int, int]) -> list[Message]:
    history: list[Message] = [
        {"role": "user", "content": [{"type": "text", "text": corpus.text(200, 400)}]}
    ]
    number = 0
    while len(history) < messages - 1:
        history += exchange(corpus, number, result)
        number += 1
    return history


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


async def latency(
    requests: int, messages: int, result: tuple[int, int], *, marked: bool
) -> dict[str, Any]:
    """The three paths' times; ``marked``: Claude Code's moving markers, else none (an SDK)."""
    rng = random.Random(7)
    corpus = Corpus(rng, 120_000)
    system, tools = make_system(corpus), make_tools(corpus)
    if not marked:
        system = _unmarked(system)
    history = long_history(corpus, messages, result)

    def request_body(system: list[Message], tools: list[Message], history: list[Message]) -> Body:
        body = client_body(system, tools, history)
        return body if marked else unmarked_body(body)

    histories = []
    for number in range(CONVERSATIONS):  # told apart by their first message
        first = copy.deepcopy(history[0])
        first["content"][0]["text"] = f"Conversation {number}. " + first["content"][0]["text"]
        histories.append([first, *history[1:]])
    with tempfile.TemporaryDirectory() as folder:
        paths = {
            "direct": direct(PromptCache()),
            "relay": bare_relay(PromptCache()),
            "proxy": through_proxy(PromptCache(), Path(folder), None),
        }
        tokens = sum(tokens for _, tokens, _ in blocks(client_body(system, tools, history)))
        times: dict[str, list[float]] = {name: [] for name in paths}
        first_requests: list[float] = []
        for conversation in histories:  # each conversation's first request
            body = request_body(system, tools, conversation)
            for name, path in paths.items():
                started = time.perf_counter()
                await path.send(body)
                if name == "proxy":
                    first_requests.append(time.perf_counter() - started)
        cpu: dict[str, list[float]] = {name: [] for name in paths}
        for number in range(requests):  # then each in turn, one short exchange longer
            turn = number % CONVERSATIONS
            histories[turn] = [*histories[turn], *exchange(corpus, 10_000 + number, (20, 80))]
            body = request_body(system, tools, histories[turn])
            for name, path in paths.items():
                started, used = time.perf_counter(), time.process_time()
                await path.send(body)
                times[name].append(time.perf_counter() - started)
                cpu[name].append(time.process_time() - used)
        for path in paths.values():
            await path.aclose()
    median = {name: statistics.median(values) for name, values in times.items()}
    p95 = {name: percentile(values, 0.95) for name, values in times.items()}
    return {
        "client": "claude-code markers" if marked else "no markers",
        "messages": f"{messages}..{max(len(each) for each in histories)}",
        "tokens": tokens,
        "median_ms": {name: round(value * 1000, 2) for name, value in median.items()},
        "p95_ms": {name: round(value * 1000, 2) for name, value in p95.items()},
        "added_median_ms": round((median["proxy"] - median["direct"]) * 1000, 2),
        "added_p95_ms": round((p95["proxy"] - p95["direct"]) * 1000, 2),
        "over_relay_median_ms": round((median["proxy"] - median["relay"]) * 1000, 2),
        # CPU time (every thread of the process): what the machine's other load does not stretch
        "added_cpu_median_ms": round(
            (statistics.median(cpu["proxy"]) - statistics.median(cpu["direct"])) * 1000, 2
        ),
        "first_request_median_ms": round(statistics.median(first_requests) * 1000, 2),
    }


# -- 2. memory ----------------------------------------------------------------------------------


def rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS in /proc/self/status")


async def memory(conversations: int) -> dict[str, Any]:
    rng = random.Random(11)
    corpus = Corpus(rng, 40_000)
    system, tools = make_system(corpus), make_tools(corpus)
    with tempfile.TemporaryDirectory() as folder:
        proxy = through_proxy(PromptCache(), Path(folder), None)
        warm = long_history(corpus, 6, (100, 400))
        await proxy.send(client_body(system, tools, warm))
        gc.collect()
        before = rss_kib()
        for number in range(conversations):
            history = long_history(corpus, 6, (100, 400))
            history[0]["content"][0]["text"] = f"Task {number}: " + history[0]["content"][0]["text"]
            await proxy.send(client_body(system, tools, history))
        gc.collect()
        after = rss_kib()
        await proxy.aclose()
        size = sum(path.stat().st_size for path in Path(folder).glob("proxy.sqlite3*"))
    return {
        "conversations": conversations,
        "rss_before_mib": round(before / 1024, 1),
        "rss_after_mib": round(after / 1024, 1),
        "rss_added_kib_per_conversation": round((after - before) / conversations, 1),
        "store_kib_per_conversation": round(size / 1024 / conversations, 1),
    }


# -- 3. cache -----------------------------------------------------------------------------------


def session_histories(steps: int) -> tuple[list[Message], list[Message], list[list[Message]]]:
    """The system prompt, the tools and each step's history of the 200-step session."""
    session = agent_session(steps)
    corpus = Corpus(random.Random(3), 20_000)
    system = [
        {"type": "text", "text": "You are a coding agent.", "cache_control": MARK},
        {"type": "text", "text": session.system, "cache_control": MARK},
    ]
    histories = []
    history: list[Message] = []
    for step in anthropic_messages(session):
        history = [*history, *step]
        histories.append(history)
    return system, make_tools(corpus), histories


async def cache(steps: int, max_tokens: int) -> dict[str, Any]:
    system, tools, histories = session_histories(steps)
    direct_cache, proxy_cache = PromptCache(), PromptCache()
    with tempfile.TemporaryDirectory() as folder:
        paths = [direct(direct_cache), through_proxy(proxy_cache, Path(folder), max_tokens)]
        for history in histories:
            body = client_body(system, tools, history)
            for path in paths:
                await path.send(body)
        for path in paths:
            await path.aclose()
    return {
        "steps": steps,
        "max_tokens": max_tokens,
        "last_history_tokens": sum(
            tokens for _, tokens, _ in blocks(client_body(system, tools, histories[-1]))
        ),
        "direct": figures(direct_cache.usage),
        "proxy": figures(proxy_cache.usage),
        "cost_ratio": round(proxy_cache.usage.cost / direct_cache.usage.cost, 3),
    }


def figures(usage: Usage) -> dict[str, Any]:
    return {
        "input_tokens": usage.total,
        "read_share": round(usage.read_share, 4),
        "write_tokens": usage.write,
        "uncached_tokens": usage.uncached,
        "cost": round(usage.cost),
    }


MODES = {
    "client": "the client's moving markers, handed to the window as they are (as the proxy does)",
    "window": "no client markers: the window places its own (cache_breakpoints=True)",
}
SETTINGS = (
    (COMPACT_AT, COMPACT_TO, MAX_RESULT_TOKENS),
    (0.8, None, 0.25),
    (0.9, 0.4, 0.25),
    (0.9, 0.4, 0.1),
    (0.9, 0.3, 0.06),
    (0.95, 0.4, 0.06),
    (0.9, 0.5, 0.06),
)


def unmarked_body(body: Body) -> Body:
    return {**body, "messages": _unmarked(body["messages"])}


def sweep(
    steps: int, max_tokens: int, settings: tuple[tuple[float, float | None, float], ...]
) -> list[dict[str, Any]]:
    """The cache's figures for the window's settings over the session, in the library.

    The window serves the history the proxy would hand it (tools off its budget, priced here)
    with the given settings, in each of ``MODES``; the direct session is the client's own.
    """
    system, tools, histories = session_histories(steps)
    tool_tokens = sum(tokens for _, tokens, _ in blocks({"tools": tools, "messages": []}))
    direct_cache = PromptCache()
    for history in histories:
        direct_cache.serve(client_body(system, tools, history))
    rows = []
    for mode in MODES:
        for compact_at, compact_to, result_cap in settings:
            window = ContextWindow(
                "anthropic",
                max_tokens=max_tokens - tool_tokens,
                compact_at=compact_at,
                compact_to=compact_to,
                max_result_tokens=result_cap,
                keep_first=1,
                system=system if mode != "window" else _unmarked(system),
                cache_breakpoints=mode == "window",
            )
            provider = PromptCache()
            for history in histories:
                body = client_body(system, tools, history)
                if mode == "client":
                    body = {**body, "messages": window.prepare(body["messages"])}
                else:
                    body = unmarked_body(body)
                    body = {**body, "system": _unmarked(system)}
                    body["messages"] = window.prepare(body["messages"])
                usage = provider.serve(body)
                window.report_usage(max(0, usage.total - tool_tokens))
            rows.append(
                {
                    "mode": mode,
                    "compact_at": compact_at,
                    "compact_to": compact_to,
                    "max_result_tokens": result_cap,
                    "compactions": window.stats.compactions,
                    "resets": window.stats.resets,
                    "read_share": round(provider.usage.read_share, 4),
                    "cost_ratio": round(provider.usage.cost / direct_cache.usage.cost, 3),
                }
            )
    return rows


# -- the run ------------------------------------------------------------------------------------


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--smoke", action="store_true", help="every part, small, in seconds")
    parser.add_argument("--requests", type=int, default=60, help="timed requests per path")
    parser.add_argument("--conversations", type=int, default=1_000)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--max-tokens", type=int, default=40_000, help="the cache run's budget")
    parser.add_argument("--sweep", action="store_true", help="also the window settings' sweep")
    parser.add_argument(
        "--parts", default="memory,latency,cache", help="which parts to run (comma-separated)"
    )
    arguments = parser.parse_args(argv)
    if arguments.smoke:
        arguments.requests, arguments.conversations, arguments.steps = 3, 10, 20
        arguments.max_tokens = 12_000
    size = (8, (200, 400)) if arguments.smoke else (60, (2_400, 2_800))
    parts = set(arguments.parts.split(","))
    results: dict[str, Any] = {}
    if "memory" in parts:
        results["memory"] = asyncio.run(memory(arguments.conversations))  # first: a small heap
        print("memory", json.dumps(results["memory"]), flush=True)
    if "latency" in parts:
        for marked in (True, False):
            results["latency"] = asyncio.run(
                latency(arguments.requests, size[0], size[1], marked=marked)
            )
            print("latency", json.dumps(results["latency"]), flush=True)
    if "cache" in parts:
        results["cache"] = asyncio.run(cache(arguments.steps, arguments.max_tokens))
        print("cache", json.dumps(results["cache"]), flush=True)
    if arguments.sweep or arguments.smoke:
        settings = SETTINGS[:2] if arguments.smoke else SETTINGS
        for row in sweep(arguments.steps, arguments.max_tokens, settings):
            print("sweep", json.dumps(row), flush=True)
    if {"latency", "cache"} <= results.keys() and not arguments.smoke:
        cache_ = results["cache"]
        print(
            "targets: "
            f"cache reads {cache_['proxy']['read_share']:.1%} (>= 85 %), "
            f"cost {cache_['cost_ratio']:.2f}x direct (<= 0.5x), "
            f"added latency median {results['latency']['added_median_ms']} ms (<= 30 ms)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
