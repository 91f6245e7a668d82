"""Agent loops through the proxy, driven by the official SDKs, against the fake upstream.

Each loop alternates streamed and whole answers. What the upstream got is checked with the
independent validators of ``tests/format_validators.py`` and counted the fake provider's way.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from tests.format_validators import (
    anthropic_cache_problems,
    anthropic_problems,
    chat_problems,
    responses_problems,
)
from tests.proxy.agents import (
    ANTHROPIC_TOOLS,
    CHAT_TOOLS,
    KEY,
    RESPONSES_TOOLS,
    SYSTEM,
    anthropic_client,
    anthropic_step,
    openai_client,
    output,
    responses_step,
)
from tests.proxy.agents import chat_step as chat_step_
from tests.proxy.fake_upstream import provider_count
from tests.proxy.harness import Running, running

if TYPE_CHECKING:
    from collections.abc import Callable

BUDGET = 6_000
STEPS = 100
CALIBRATED = 2  # the requests after the first two reports are within the budget


def anthropic_run(run: Running, task: str, steps: int, *, stream: Callable[[int], bool]) -> None:
    client = anthropic_client(run.url)
    history: list[dict[str, Any]] = [{"role": "user", "content": task}]
    try:
        for step in range(steps):
            reply = anthropic_step(client, history, stream=stream(step))
            use = next(block for block in reply["content"] if block["type"] == "tool_use")
            history.append(reply)
            result = {
                "type": "tool_result",
                "tool_use_id": use["id"],
                "content": output(task, step),
            }
            history.append({"role": "user", "content": [result]})
    finally:
        client.close()


def chat_run(run: Running, task: str, steps: int, *, stream: Callable[[int], bool]) -> None:
    client = openai_client(run.url)
    history: list[dict[str, Any]] = [{"role": "user", "content": task}]
    try:
        for step in range(steps):
            reply = chat_step_(client, history, stream=stream(step))
            history.append(reply)
            call = reply["tool_calls"][0]["id"]
            history.append({"role": "tool", "tool_call_id": call, "content": output(task, step)})
    finally:
        client.close()


def responses_run(run: Running, task: str, steps: int, *, stream: Callable[[int], bool]) -> None:
    client = openai_client(run.url)
    history: list[dict[str, Any]] = [{"role": "user", "content": task}]
    try:
        for step in range(steps):
            items = responses_step(client, history, stream=stream(step))
            history.extend(items)
            call = next(item for item in items if item["type"] == "function_call")
            history.append(
                {"type": "function_call_output", "call_id": call["call_id"],
                 "output": output(task, step)}
            )  # fmt: skip
    finally:
        client.close()


def alternate(step: int) -> bool:
    return step % 2 == 1


class TestAgentLoops:
    def test_an_anthropic_loop_is_valid_within_budget_keeps_the_task_and_compacts(self) -> None:
        task = "Task: make the build of the parser green."
        with running(max_tokens=BUDGET) as run:
            anthropic_run(run, task, STEPS, stream=alternate)
            posts = run.fake.posts("/v1/messages")
            stats = run.stats()
        assert len(posts) == STEPS
        for number, post in enumerate(posts):
            body = post.json()
            messages = body["messages"]
            assert anthropic_problems(messages) == [], number
            assert anthropic_cache_problems(messages, body["system"]) == [], number
            assert task_of(messages) == task
            assert messages[0]["role"] == "user"
            assert (body["system"], body["tools"], body["max_tokens"]) == (
                SYSTEM,
                ANTHROPIC_TOOLS,
                1024,
            )
            key = post.headers.get("x-api-key") or post.headers["authorization"]
            assert key.removeprefix("Bearer ") == KEY
            assert post.headers["anthropic-version"]
            assert post.query == ""
            if number >= CALIBRATED:
                assert provider_count(body, "/v1/messages") <= BUDGET, number
        assert len(posts[-1].json()["messages"]) < 2 * STEPS - 1
        assert stats["total"]["requests"] == STEPS
        assert stats["total"]["compactions"] >= 3
        assert stats["total"]["passed_through"] == 0
        assert len(stats["conversations"]) == 1

    def test_a_chat_loop_is_valid_within_budget_keeps_the_task_and_compacts(self) -> None:
        task = "Task: find why the cache misses."
        with running(max_tokens=BUDGET) as run:
            chat_run(run, task, STEPS, stream=alternate)
            posts = run.fake.posts("/v1/chat/completions")
        assert len(posts) == STEPS
        for number, post in enumerate(posts):
            body = post.json()
            messages = body["messages"]
            assert chat_problems(messages) == [], number
            assert messages[:2] == [
                {"role": "system", "content": SYSTEM},
                {"role": "user", "content": task},
            ]
            assert body["tools"] == CHAT_TOOLS
            assert post.headers["authorization"] == f"Bearer {KEY}"
            assert body.get("stream", False) == alternate(number)
            if alternate(number):
                assert body["stream_options"] == {"include_usage": True}
            if number >= CALIBRATED:
                assert provider_count(body, "/v1/chat/completions") <= BUDGET, number
        assert len(posts[-1].json()["messages"]) < 2 * STEPS

    def test_a_responses_loop_is_valid_within_budget_keeps_the_task_and_compacts(self) -> None:
        task = "Task: port the tokenizer to the new API."
        with running(max_tokens=BUDGET) as run:
            responses_run(run, task, STEPS, stream=alternate)
            posts = run.fake.posts("/v1/responses")
        assert len(posts) == STEPS
        for number, post in enumerate(posts):
            body = post.json()
            items = body["input"]
            assert responses_problems(items) == [], number
            assert items[0] == {"role": "user", "content": task}
            assert (body["instructions"], body["tools"], body["store"]) == (
                SYSTEM,
                RESPONSES_TOOLS,
                False,
            )
            if number >= CALIBRATED:
                assert provider_count(body, "/v1/responses") <= BUDGET, number
        assert len(posts[-1].json()["input"]) < 2 * STEPS


def task_of(messages: list[dict[str, Any]]) -> str:
    """The text of the first user message (a string, or its text blocks)."""
    first = next(message for message in messages if message.get("role") == "user")
    content = first["content"]
    if isinstance(content, str):
        return content
    return "".join(
        block["text"] for block in content if block.get("type") in ("text", "input_text")
    )


def requests_by_task(run: Running, path: str) -> dict[str, list[bytes]]:
    """The upstream request bodies, grouped by the task that opens each."""
    grouped: dict[str, list[bytes]] = {}
    for post in run.fake.posts(path):
        body = post.json()
        task = task_of(body["input" if path == "/v1/responses" else "messages"])
        grouped.setdefault(task, []).append(post.body)
    return grouped


class TestConversations:
    def test_two_interleaved_conversations_are_told_apart_without_a_header(self) -> None:
        tasks = ["Task A: fix the lexer.", "Task B: document the parser."]
        with running(max_tokens=3_000) as solo:
            for task in tasks:
                chat_run(solo, task, 14, stream=alternate)
            alone = requests_by_task(solo, "/v1/chat/completions")
        with running(max_tokens=3_000) as run:
            histories: dict[str, list[dict[str, Any]]] = {
                task: [{"role": "user", "content": task}] for task in tasks
            }
            for step in range(14):
                for task in tasks:  # A, B, A, B, ...: each request continues its own history
                    client = openai_client(run.url)
                    reply = chat_step_(client, histories[task], stream=alternate(step))
                    client.close()
                    call = reply["tool_calls"][0]["id"]
                    histories[task] += [
                        reply,
                        {"role": "tool", "tool_call_id": call, "content": output(task, step)},
                    ]
            together = requests_by_task(run, "/v1/chat/completions")
            stats = run.stats()
        assert together == alone
        assert len(stats["conversations"]) == 2
        assert all(row["compactions"] >= 1 for row in stats["conversations"].values())

    def test_twelve_concurrent_conversations_send_what_each_sends_alone(self) -> None:
        tasks = [f"Task {n}: make module {n} pass its tests." for n in range(12)]
        steps = 10
        with running(max_tokens=2_000) as solo:
            for task in tasks:
                anthropic_run(solo, task, steps, stream=alternate)
            alone = requests_by_task(solo, "/v1/messages")
        with running(max_tokens=2_000) as run, ThreadPoolExecutor(12) as pool:
            done = [
                pool.submit(anthropic_run, run, task, steps, stream=alternate) for task in tasks
            ]
            for each in done:
                each.result()
            together = requests_by_task(run, "/v1/messages")
            stats = run.stats()["total"]
        assert together == alone
        assert stats["passed_through"] == 0
        assert stats["compactions"] >= 12
        assert all(len(bodies) == steps for bodies in alone.values())

    def test_the_header_names_the_conversation(self) -> None:
        with running(max_tokens=BUDGET) as run:
            client = openai_client(run.url, default_headers={"x-cutctx-conversation": "mine-1"})
            history: list[dict[str, Any]] = [{"role": "user", "content": "Task: one."}]
            chat_step_(client, history, stream=False)
            client.close()
            stats = run.stats()
            received = run.fake.posts("/v1/chat/completions")[0]
        assert list(stats["conversations"]) == ["mine-1"]
        assert "x-cutctx-conversation" not in received.headers

    def test_a_history_the_client_compacted_itself_starts_a_new_window(self) -> None:
        task = "Task: shorten the build."
        with running(max_tokens=BUDGET) as run:
            chat_run(run, task, 3, stream=alternate)
            client = openai_client(run.url)
            summary = [{"role": "user", "content": task + " (So far: three runs, all green.)"}]
            reply = chat_step_(client, summary, stream=False)
            client.close()
            stats = run.stats()
        assert reply["tool_calls"]
        assert len(stats["conversations"]) == 2
        assert stats["total"]["passed_through"] == 0


HOUR = {"type": "ephemeral", "ttl": "1h"}


def markers_of(body: dict[str, Any]) -> list[dict[str, Any]]:
    """Every ``cache_control`` of a Messages API request, in order: system, then messages."""
    blocks = list(body["system"]) if isinstance(body["system"], list) else []
    for message in body["messages"]:
        if isinstance(message["content"], list):
            blocks.extend(message["content"])
    return [block["cache_control"] for block in blocks if "cache_control" in block]


class TestCacheMarkers:
    def test_a_marker_moved_every_turn_is_kept_and_the_cache_keeps_hitting(self) -> None:
        """Claude Code's way: two one-hour markers on the system prompt, one on the last block
        of the last user message, moved every request."""
        task = "Task: keep the cache warm."
        system = [
            {"type": "text", "text": "You are a CLI agent.", "cache_control": HOUR},
            {"type": "text", "text": SYSTEM, "cache_control": HOUR},
        ]
        with running(max_tokens=BUDGET) as run:
            client = anthropic_client(run.url)
            history: list[dict[str, Any]] = [
                {"role": "user", "content": [{"type": "text", "text": task}]}
            ]
            for step in range(40):
                marked = [*history[:-1], {**history[-1], "content": [
                    *history[-1]["content"][:-1],
                    {**history[-1]["content"][-1], "cache_control": HOUR},
                ]}]  # fmt: skip
                reply = anthropic_step(client, marked, stream=True, system=system)
                use = next(block for block in reply["content"] if block["type"] == "tool_use")
                result = {"type": "tool_result", "tool_use_id": use["id"],
                          "content": output(task, step)}  # fmt: skip
                history += [reply, {"role": "user", "content": [result]}]
            client.close()
            posts = [post.json() for post in run.fake.posts("/v1/messages")]
            stats = run.stats()
        for number, body in enumerate(posts):
            assert anthropic_problems(body["messages"]) == [], number
            assert body["system"] == system
            assert markers_of(body) == [HOUR, HOUR, HOUR], number  # the client's three, no more
            assert body["messages"][-1]["content"][-1]["cache_control"] == HOUR
        assert len(posts[-1]["messages"]) < len(history) - 1
        assert stats["total"]["cache_read_share"] >= 0.7
