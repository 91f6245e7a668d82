"""The proxy's HTTP behaviour: what it forwards, what it relays, and what it does on faults."""

from __future__ import annotations

import json
import logging
import threading
from typing import TYPE_CHECKING, Any

import anthropic
import httpx
import openai
import pytest

from cutctx._proxy.store import MemoryStore, StoreUnavailable, open_store
from tests.proxy.agents import KEY, SYSTEM, anthropic_client, anthropic_step, output
from tests.proxy.fake_upstream import Fault
from tests.proxy.harness import running

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

HEADERS = {"x-api-key": KEY, "anthropic-version": "2023-06-01", "content-type": "application/json"}


def long_history(steps: int, task: str = "Task: read the logs.") -> list[dict[str, Any]]:
    """An Anthropic history of ``steps`` tool exchanges (about 330 tokens each)."""
    history: list[dict[str, Any]] = [{"role": "user", "content": task}]
    for step in range(steps):
        history.append(
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": f"toolu_{step}", "name": "sh", "input": {}}]}
        )  # fmt: skip
        history.append(
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": f"toolu_{step}",
                 "content": output(task, step)}]}
        )  # fmt: skip
    return history


def messages_body(messages: list[dict[str, Any]], **extra: Any) -> bytes:
    body = {"model": "claude-sonnet-4-5", "max_tokens": 256, "system": SYSTEM, **extra}
    return json.dumps({**body, "messages": messages}).encode()


HOUR = {"type": "ephemeral", "ttl": "1h"}


def marked_history(steps: int) -> list[dict[str, Any]]:
    """A history whose last block carries the client's one-hour cache marker."""
    history = long_history(steps)
    history[-1]["content"][-1]["cache_control"] = HOUR
    return history


MARKED_SYSTEM = [{"type": "text", "text": SYSTEM, "cache_control": HOUR}]
MARKED = messages_body(marked_history(2), system=MARKED_SYSTEM)


class TestRelay:
    def test_a_whole_answer_is_relayed_byte_for_byte_with_its_status_and_headers(self) -> None:
        with running(max_tokens=50_000) as run, httpx.Client(base_url=run.url) as client:
            answer = client.post("/v1/messages?beta=true", content=MARKED, headers=HEADERS)
            relayed = run.fake.answers[-1]
            received = run.fake.received[-1]
        assert answer.status_code == 200
        assert answer.content == relayed
        assert answer.headers["request-id"] == "req_1"
        assert answer.headers["content-type"] == "application/json"
        assert received.query == "beta=true"
        assert received.body == MARKED  # nothing cut: the client's own bytes

    def test_a_request_without_markers_gets_one_breakpoint_at_its_stable_prefix(self) -> None:
        with running(max_tokens=50_000) as run, httpx.Client(base_url=run.url) as client:
            client.post("/v1/messages", content=messages_body(long_history(3)), headers=HEADERS)
            first = run.fake.received[-1]
            client.post("/v1/messages", content=messages_body(long_history(4)), headers=HEADERS)
            sent = run.fake.received[-1].json()
        assert first.body == messages_body(long_history(3))  # nothing stable yet: as it came
        marked = [
            block
            for message in sent["messages"]
            if isinstance(message["content"], list)
            for block in message["content"]
            if "cache_control" in block
        ]
        assert len(marked) == 1
        assert marked[0]["cache_control"] == {"type": "ephemeral"}

    def test_a_stream_is_relayed_event_by_event_before_the_upstream_ends_it(self) -> None:
        gate = threading.Event()
        with running() as run, httpx.Client(base_url=run.url) as client:
            run.fake.gate = gate
            body = messages_body(long_history(2), stream=True)
            with client.stream("POST", "/v1/messages", content=body, headers=HEADERS) as answer:
                chunks = answer.iter_raw()
                first = next(chunks)
                gate.set()  # only now may the upstream send its last events
                rest = b"".join(chunks)
            sent = run.fake.answers[-1]
        assert first.startswith(b"event: message_start")
        assert not run.fake.gate_timed_out
        assert first + rest == sent
        assert answer.headers["content-type"].startswith("text/event-stream")

    @pytest.mark.parametrize(
        ("method", "path", "body"),
        [
            ("GET", "/v1/models?limit=2&after_id=x%20y", b""),
            ("POST", "/v1/messages/count_tokens", messages_body(long_history(40))),
            ("POST", "/v2/unknown/path?q=1", b"\x00\x01 not json at all"),
            ("HEAD", "/", b""),
            ("DELETE", "/v1/files/file_1", b""),
        ],
    )
    def test_other_requests_are_forwarded_as_they_came(
        self, method: str, path: str, body: bytes
    ) -> None:
        headers = {**HEADERS, "anthropic-beta": "context-management-2025-06-27", "x-extra": "1"}
        with running() as run, httpx.Client(base_url=run.url) as client:
            answer = client.request(method, path, content=body or None, headers=headers)
            received = run.fake.received[-1]
            relayed = run.fake.answers[-1]
        assert received.method == method
        assert (received.path + ("?" + received.query if received.query else "")) == path
        assert received.body == body
        for name in ("x-api-key", "anthropic-version", "anthropic-beta", "x-extra"):
            assert received.headers[name] == headers[name]
        assert answer.status_code == (
            200 if path.startswith(("/v1/models", "/v1/messages")) else 404
        )
        if method != "HEAD":
            assert answer.content == relayed

    def test_hop_by_hop_headers_stay_here(self) -> None:
        headers = {
            **HEADERS,
            "connection": "keep-alive, x-private",
            "x-private": "1",
            "te": "trailers",
        }
        with running() as run, httpx.Client(base_url=run.url) as client:
            client.post("/v1/messages", content=messages_body(long_history(1)), headers=headers)
            received = run.fake.received[-1]
        assert "x-private" not in received.headers
        assert "te" not in received.headers
        assert received.headers["host"] == run.upstream_url.removeprefix("http://")

    def test_healthz_and_stats_answer_here(self) -> None:
        with running() as run, httpx.Client(base_url=run.url) as client:
            assert client.get("/healthz").json() == {"status": "ok"}
            client.post("/v1/messages", content=messages_body(long_history(3)), headers=HEADERS)
            run.stats()
            stats = client.get("/cutctx/stats").json()
        assert run.fake.received[-1].path == "/v1/messages"
        assert stats["total"]["requests"] == 1
        (row,) = stats["conversations"].values()
        assert row["input_tokens"] > 0
        assert set(row) >= {"compactions", "tokens_saved", "cache_read_share"}


class TestCompaction:
    def test_a_compacted_request_keeps_every_other_field_as_sent(self) -> None:
        extra = {
            "thinking": {"type": "adaptive"},
            "context_management": {"edits": [{"type": "clear_tool_uses_20250919"}]},
            "output_config": {"effort": "high"},
            "metadata": {"user_id": "u-1"},
            "temperature": 1.0,
            "tools": [{"name": "sh", "description": "Run.", "input_schema": {"type": "object"}}],
        }
        with running(max_tokens=3_000) as run, httpx.Client(base_url=run.url) as client:
            answer = client.post(
                "/v1/messages", content=messages_body(long_history(30), **extra), headers=HEADERS
            )
            sent = run.fake.received[-1].json()
        assert answer.status_code == 200
        assert len(sent["messages"]) < 61
        assert {key: sent[key] for key in extra} == extra
        assert list(sent) == ["model", "max_tokens", "system", *extra, "messages"]

    def test_the_clients_cache_markers_and_their_ttl_are_kept_when_compacted(self) -> None:
        history = marked_history(30)
        with running(max_tokens=3_000) as run, httpx.Client(base_url=run.url) as client:
            body = messages_body(history, system=MARKED_SYSTEM)
            client.post("/v1/messages", content=body, headers=HEADERS)
            sent = run.fake.received[-1].json()
        assert len(sent["messages"]) < len(history)
        assert sent["system"] == MARKED_SYSTEM
        markers = [
            block["cache_control"]
            for message in sent["messages"]
            if isinstance(message["content"], list)
            for block in message["content"]
            if "cache_control" in block
        ]
        assert markers == [HOUR]  # the client's, where it put it; none added
        assert sent["messages"][-1]["content"][-1]["cache_control"] == HOUR

    def test_an_unknown_model_without_max_tokens_passes_through(self) -> None:
        body = messages_body(long_history(60), model="some-other-model")
        with running(max_tokens=None) as run, httpx.Client(base_url=run.url) as client:
            client.post("/v1/messages", content=body, headers=HEADERS)
            received = run.fake.received[-1]
        assert received.body == body
        assert "unknown-model" in run.log.lines[-1]

    def test_the_model_table_and_the_replys_room_set_the_budget(self) -> None:
        history = long_history(60)  # about 20 000 tokens
        with running(max_tokens=None) as run, httpx.Client(base_url=run.url) as client:
            # 128 000 less a reply of 115 000 leaves 13 000: compacted
            client.post(
                "/v1/chat/completions",
                content=json.dumps(
                    {"model": "gpt-4o-2024-08-06", "max_completion_tokens": 115_000,
                     "messages": [{"role": "user", "content": "Task."}, *[
                         {"role": "user" if n % 2 == 0 else "assistant", "content": "x " * 300}
                         for n in range(61)]]}
                ).encode(),
                headers={"authorization": f"Bearer {KEY}", "content-type": "application/json"},
            )  # fmt: skip
            tight = run.fake.received[-1].json()
            client.post("/v1/messages", content=messages_body(history), headers=HEADERS)
            roomy = run.fake.received[-1].json()
        assert len(tight["messages"]) < 62
        assert len(roomy["messages"]) == len(history)  # 200 000 less 256: all of it fits


class TestFailOpen:
    @pytest.mark.parametrize(
        ("path", "body", "why"),
        [
            ("/v1/messages", b'{"model": "claude-sonnet-4-5", "messages": [', "unread"),
            ("/v1/messages", b"[1, 2, 3]", "not-an-object"),
            ("/v1/messages", messages_body([]), "no-messages"),
            (
                "/v1/messages",
                messages_body([*long_history(40), {"role": "assistant", "content": 42}]),
                "unserved:ValidationError",
            ),
            (
                "/v1/responses",
                json.dumps(
                    {
                        "model": "gpt-5",
                        "previous_response_id": "resp_1",
                        "input": [{"role": "user", "content": "x " * 9000}],
                    }
                ).encode(),
                "previous_response_id",
            ),
            (
                "/v1/responses",
                json.dumps({"model": "gpt-5", "input": "x " * 9000}).encode(),
                "no-input",
            ),
        ],
    )
    def test_a_request_cutctx_cannot_read_is_forwarded_as_it_came(
        self, path: str, body: bytes, why: str
    ) -> None:
        with running(max_tokens=2_000) as run, httpx.Client(base_url=run.url) as client:
            answer = client.post(path, content=body, headers=HEADERS)
            received = run.fake.received[-1]
            relayed = run.fake.answers[-1]
            stats = run.stats()
        assert received.body == body
        assert answer.content == relayed
        assert answer.status_code in (200, 400)  # the upstream's answer, never the proxy's
        assert why in run.log.lines[-1]
        assert stats["total"]["passed_through"] == 1

    def test_a_store_that_is_down_means_pass_through(self) -> None:
        body = messages_body(long_history(40))
        with running(max_tokens=2_000, store=DownStore()) as run:
            with httpx.Client(base_url=run.url) as client:
                answer = client.post("/v1/messages", content=body, headers=HEADERS)
            received = run.fake.received[-1]
        assert answer.status_code == 200
        assert received.body == body
        assert "store:StoreUnavailable" in run.log.lines[-1]


class DownStore(MemoryStore):
    """A store whose backend is down."""

    def continued(self, prefix_digests: Sequence[str]) -> str | None:
        del prefix_digests
        raise StoreUnavailable("down")


class TestLimits:
    @pytest.mark.parametrize(
        ("path", "shape"),
        [
            ("/v1/messages", {"type": "error", "error": {"type": "request_too_large"}}),
            ("/v1/chat/completions", {"error": {"type": "invalid_request_error"}}),
        ],
    )
    @pytest.mark.parametrize("chunked", [False, True])
    def test_a_body_over_the_limit_is_413_in_the_providers_shape(
        self, path: str, shape: dict[str, Any], chunked: bool
    ) -> None:
        body = b'{"messages": ["' + b"x" * 5_000 + b'"]}'
        content: Any = iter([body[:100], body[100:]]) if chunked else body
        with running(max_body=4_096) as run, httpx.Client(base_url=run.url) as client:
            answer = client.post(path, content=content, headers=HEADERS)
            received = list(run.fake.received)
        assert answer.status_code == 413
        error = answer.json()
        if "type" in shape:
            assert error["type"] == "error"
        assert error["error"]["type"] == shape["error"]["type"]
        assert "--max-body" in error["error"]["message"]
        assert received == []

    def test_a_body_under_the_limit_is_forwarded(self) -> None:
        body = messages_body([{"role": "user", "content": "x" * 3_000}])
        with running(max_body=4_096) as run, httpx.Client(base_url=run.url) as client:
            answer = client.post("/v1/messages", content=body, headers=HEADERS)
        assert answer.status_code == 200

    def test_an_upstream_that_cannot_be_reached_is_502_in_the_providers_shape(self) -> None:
        from cutctx._proxy.app import create_app  # noqa: PLC0415
        from tests.proxy.serving import serving  # noqa: PLC0415

        app = create_app("http://127.0.0.1:9", store=MemoryStore(), max_tokens=5_000)
        with serving(app) as url, httpx.Client(base_url=url) as client:
            answer = client.post("/v1/messages", content=messages_body(long_history(1)))
            chat = client.post("/v1/chat/completions", content=b"{}")
        assert answer.status_code == 502
        assert answer.json()["type"] == "error"
        assert chat.status_code == 502
        assert chat.json()["error"]["code"] == "upstream_unreachable"


ERRORS = (anthropic.APIStatusError, anthropic.APIConnectionError)
FAULTS = [
    Fault(429, b'{"type":"error","error":{"type":"rate_limit_error","message":"slow"}}',
          {"retry-after": "7"}),
    Fault(500, b'{"type":"error","error":{"type":"api_error","message":"oops"}}'),
    Fault(529, b'{"type":"error","error":{"type":"overloaded_error","message":"busy"}}'),
    Fault(cut_after=3),
]  # fmt: skip


class TestFaults:
    @pytest.mark.parametrize("fault", FAULTS, ids=["429", "500", "529", "cut"])
    def test_a_fault_reaches_the_client_and_its_retry_sends_the_same_request(
        self, fault: Fault
    ) -> None:
        task = "Task: survive the fault."
        with running(max_tokens=2_500) as run:
            client = anthropic_client(run.url)
            history: list[dict[str, Any]] = [{"role": "user", "content": task}]
            for step in range(12):
                if step == 9:  # a streamed step the window changes (checked below)
                    (conversation,) = run.stats()["conversations"]
                    saved = run.store.load(conversation)
                    at_fault = json.loads(json.dumps(history))
                    run.fake.fail(fault)
                    with pytest.raises(ERRORS) as raised:
                        anthropic_step(client, history, stream=True)
                    assert run.store.load(conversation) == saved  # the window did not advance
                    if isinstance(raised.value, anthropic.APIStatusError):
                        assert raised.value.status_code == fault.status
                        assert raised.value.response.content == fault.body
                        for name, value in fault.headers.items():
                            assert raised.value.response.headers[name] == value
                reply = anthropic_step(client, history, stream=step % 2 == 1)
                use = next(block for block in reply["content"] if block["type"] == "tool_use")
                history += [reply, {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": use["id"],
                     "content": output(task, step)}]}]  # fmt: skip
            client.close()
            posts = [post.body for post in run.fake.posts("/v1/messages")]
            lines = list(run.log.lines)
            assert run.stats()["total"]["passed_through"] == 0
        assert posts[9] == posts[10]  # the retry sends exactly what the failed request sent
        assert json.loads(posts[10])["messages"] != at_fault  # a step the window changed
        with running(max_tokens=2_500) as clean:
            client = anthropic_client(clean.url)
            history = [{"role": "user", "content": task}]
            for step in range(12):
                reply = anthropic_step(client, history, stream=step % 2 == 1)
                use = next(block for block in reply["content"] if block["type"] == "tool_use")
                history += [reply, {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": use["id"],
                     "content": output(task, step)}]}]  # fmt: skip
            client.close()
            unfaulted = [post.body for post in clean.fake.posts("/v1/messages")]
        assert posts[:9] + posts[10:] == unfaulted
        if fault.cut_after is not None:
            assert any("cut:" in line for line in lines)


class TestSecrets:
    def test_no_key_reaches_a_file_the_proxy_wrote_or_its_log(self, tmp_path: Path) -> None:
        store = open_store(f"sqlite:///{tmp_path / 'windows.sqlite3'}")
        handler = logging.FileHandler(tmp_path / "proxy.log")
        logger = logging.getLogger("cutctx.proxy")
        logger.addHandler(handler)
        try:
            with running(max_tokens=2_500, store=store) as run:
                client = anthropic_client(run.url)
                history: list[dict[str, Any]] = [{"role": "user", "content": "Task: hide."}]
                for step in range(10):
                    reply = anthropic_step(client, history, stream=step % 2 == 0)
                    use = next(block for block in reply["content"] if block["type"] == "tool_use")
                    history += [reply, {"role": "user", "content": [
                        {"type": "tool_result", "tool_use_id": use["id"],
                         "content": output("hide", step)}]}]  # fmt: skip
                client.close()
                with openai.OpenAI(api_key=KEY, base_url=f"{run.url}/v1", max_retries=0) as chat:
                    chat.models.list()
                run.stats()
                lines = list(run.log.lines)
        finally:
            logger.removeHandler(handler)
            handler.close()
            store.close()
        written = [path for path in tmp_path.rglob("*") if path.is_file()]
        assert any(path.suffix == ".log" for path in written)
        assert len(lines) == 11
        for path in written:
            data = path.read_bytes()
            assert KEY.encode() not in data, path
            assert b"SECRET" not in data, path
