"""The proxy's rarer paths, in process: upstream answers made by ``httpx.MockTransport``."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from cutctx import ContextWindow
from cutctx._cli import main
from cutctx._proxy.app import Proxy, _envelope, _keep_first, _Live, _result_cap, create_app
from cutctx._proxy.store import MemoryStore, StoreUnavailable
from tests.proxy.test_app import long_history, messages_body

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Iterator

    from starlette.applications import Starlette

ANTHROPIC_EVENTS = [
    (
        b'event: message_start\ndata: {"type":"message_start","message":{"usage":'
        b'{"input_tokens":900,"output_tokens":1}}}\n\n'
    ),
    b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0}\n\n',
    b'event: message_stop\ndata: {"type":"message_stop"}\n\n',
]


async def chunks(parts: list[bytes]) -> AsyncIterator[bytes]:
    for part in parts:
        yield part


def answering(parts: list[bytes], *, sse: bool, status: int = 200) -> Callable[..., Any]:
    """A mock upstream that answers every request with ``parts``, one chunk each."""
    kind = "text/event-stream" if sse else "application/json"

    def handler(request: httpx.Request) -> httpx.Response:
        del request
        return httpx.Response(status, headers={"content-type": kind}, content=chunks(parts))

    return handler


@contextlib.contextmanager
def app_with(
    handler: Callable[..., Any], store: MemoryStore | None = None, **options: Any
) -> Iterator[tuple[Starlette, httpx.AsyncClient]]:
    app = create_app(
        "http://upstream.test",
        store=store or MemoryStore(),
        transport=httpx.MockTransport(handler),
        **{"max_tokens": 3_000, **options},
    )
    client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://proxy")
    yield app, client


def post(client: httpx.AsyncClient, body: bytes, path: str = "/v1/messages") -> httpx.Response:
    async def send() -> httpx.Response:
        async with client:
            return await client.post(path, content=body)

    return asyncio.run(send())


def proxy_of(app: Starlette) -> Proxy:
    proxy: Proxy = app.state.proxy
    return proxy


class TestRelayEdges:
    def test_a_json_answer_in_several_chunks_arrives_whole_and_advances(self) -> None:
        answer = json.dumps({"usage": {"input_tokens": 1_500}}).encode()
        parts = [answer[:10], answer[10:20], answer[20:]]
        store = MemoryStore()
        with app_with(answering(parts, sse=False), store) as (app, client):
            got = post(client, messages_body(long_history(3)))
            figures = proxy_of(app).stats()["total"]
        assert got.content == answer
        assert figures["input_tokens"] == 1_500
        assert figures["requests"] == 1

    def test_a_stream_that_ends_before_its_last_event_does_not_advance(self) -> None:
        store = MemoryStore()
        with app_with(answering(ANTHROPIC_EVENTS[:2], sse=True), store) as (app, client):
            got = post(client, messages_body(long_history(3), stream=True))
            (conversation,) = proxy_of(app).figures
        assert got.content == b"".join(ANTHROPIC_EVENTS[:2])
        assert store.load(conversation) is None

    def test_a_complete_stream_advances(self) -> None:
        store = MemoryStore()
        with app_with(answering(ANTHROPIC_EVENTS, sse=True), store) as (app, client):
            post(client, messages_body(long_history(3), stream=True))
            (conversation,) = proxy_of(app).figures
        assert store.load(conversation) is not None

    def test_a_stream_passed_through_is_relayed_without_a_window(self) -> None:
        with app_with(answering(ANTHROPIC_EVENTS, sse=True), max_tokens=None) as (app, client):
            body = messages_body(long_history(3), stream=True, model="unknown-model")
            got = post(client, body)
            figures = proxy_of(app).stats()["total"]
        assert got.content == b"".join(ANTHROPIC_EVENTS)
        assert figures["passed_through"] == 1
        assert figures["input_tokens"] == 900

    def test_a_chat_stream_without_usage_advances_without_a_report(self) -> None:
        events = [b'data: {"choices":[{"delta":{"content":"x"}}]}\n\n', b"data: [DONE]\n\n"]
        store = MemoryStore()
        body = json.dumps(
            {"model": "gpt-4o", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
        ).encode()
        with app_with(answering(events, sse=True), store) as (app, client):
            post(client, body, "/v1/chat/completions")
            (conversation,) = proxy_of(app).figures
        assert store.load(conversation) is not None

    def test_an_answer_a_transport_already_read_is_relayed(self) -> None:
        def handler(request: httpx.Request) -> httpx.Response:
            del request
            return httpx.Response(200, json={"data": []})

        with app_with(handler) as (_, client):

            async def send() -> httpx.Response:
                async with client:
                    return await client.get("/v1/models")

            got = asyncio.run(send())
        assert got.json() == {"data": []}

    def test_an_unreachable_upstream_answers_502_in_openais_shape_off_the_routes(self) -> None:
        def handler(request: httpx.Request) -> httpx.Response:
            raise httpx.ConnectError("refused", request=request)

        with app_with(handler) as (_, client):

            async def send() -> httpx.Response:
                async with client:
                    return await client.get("/v1/models")

            got = asyncio.run(send())
        assert got.status_code == 502
        assert got.json()["error"]["code"] == "upstream_unreachable"


class LockDownStore(MemoryStore):
    def lock(self, conversation: str) -> contextlib.AbstractContextManager[None]:
        raise StoreUnavailable(conversation[:0] + "down")


class SaveDownStore(MemoryStore):
    def save(self, conversation: str, state: str, history_digest: str) -> None:
        del conversation, state, history_digest
        raise StoreUnavailable("down")


class TestStoreEdges:
    def test_a_lock_the_store_cannot_take_means_pass_through(self) -> None:
        body = messages_body(long_history(30))
        answer = json.dumps({"usage": {"input_tokens": 10}}).encode()
        seen: list[bytes] = []

        def handler(request: httpx.Request) -> httpx.Response:
            seen.append(request.content)
            return httpx.Response(200, content=chunks([answer]))

        with app_with(handler, LockDownStore()) as (app, client):
            got = post(client, body)
            figures = proxy_of(app).stats()["total"]
        assert got.content == answer
        assert seen == [body]
        assert figures["passed_through"] == 1

    def test_a_save_that_fails_still_answers_the_client(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        answer = json.dumps({"usage": {"input_tokens": 10}}).encode()
        with (
            caplog.at_level("INFO", "cutctx.proxy"),
            app_with(answering([answer], sse=False), SaveDownStore()) as (_, client),
        ):
            got = post(client, messages_body(long_history(3)))
        assert got.content == answer
        assert "unsaved:StoreUnavailable" in caplog.records[-1].getMessage()

    def test_tools_over_the_budget_pass_through(self, caplog: pytest.LogCaptureFixture) -> None:
        tools = [{"name": f"t{n}", "description": "d " * 400} for n in range(20)]
        with (
            caplog.at_level("INFO", "cutctx.proxy"),
            app_with(answering([b"{}"], sse=False), max_tokens=2_000) as (_, client),
        ):
            post(client, messages_body(long_history(3), tools=tools))
        assert "tools-over-budget" in caplog.records[-1].getMessage()


class TestState:
    def test_a_saved_state_that_cannot_be_read_starts_a_new_window(self) -> None:
        store = MemoryStore()
        proxy = proxy_of(create_app("http://x", store=store, max_tokens=3_000))
        body = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
        incoming = proxy._read("openai_chat", json.dumps(body).encode())
        assert not isinstance(incoming, str)
        saved = json.dumps({"version": 1, "budget": 3_000, "marked": False, "window": {"x": 1}})
        assert proxy._restored("c", incoming, saved) == (None, None)
        assert proxy._restored("c", incoming, None) == (None, None)

    @pytest.mark.parametrize("saved", ["not json", "[1]", '{"version": 0}'])
    def test_an_envelope_of_another_kind_is_none(self, saved: str) -> None:
        assert _envelope(saved) is None

    def test_the_warm_windows_keep_the_latest(self) -> None:
        live = _Live(size=1)
        window = ContextWindow("openai_chat", max_tokens=1_000)
        live.put("a", "state-a", window, {})
        live.put("b", "state-b", window, {})
        assert live.take("a", "state-a") is None
        assert live.take("b", "state-other") is None  # another process saved since
        live.put("b", "state-b", window, {})
        assert live.take("b", "state-b") == (window, {})

    def test_expiry_forgets_idle_conversations_and_their_figures(self) -> None:
        proxy = proxy_of(create_app("http://x", store=MemoryStore(), ttl=0.000001))
        proxy.figures["old"] = type(proxy.total)(requests=1)
        asyncio.run(proxy.expire())
        assert proxy.figures == {}


@pytest.mark.parametrize(
    ("budget", "cap"), [(150_000, 9_000), (6_000, 360), (2_000, 300), (600, 300), (599, None)]
)
def test_the_result_cap_is_six_percent_but_never_under_300_tokens(
    budget: int, cap: int | None
) -> None:
    assert _result_cap(budget) == cap


class TestKeepFirst:
    @pytest.mark.parametrize(
        ("api", "messages", "kept"),
        [
            ("openai_chat", [{"role": "system", "content": "s"}, {"role": "user", "content": "t"},
                             {"role": "assistant", "content": "a"}], 1),
            ("openai_responses", [{"role": "developer", "content": "d"},
                                  *[{"role": "user", "content": str(n)} for n in range(6)]], 4),
            ("openai_responses", [{"role": "user", "content": "t"}, "not an item"], 1),
            ("anthropic", [{"role": "assistant", "content": "a"}], 0),
        ],
    )  # fmt: skip
    def test_the_task_is_the_user_messages_before_the_first_answer(
        self, api: Any, messages: list[Any], kept: int
    ) -> None:
        assert _keep_first(api, messages) == kept


class TestServe:
    def test_the_server_runs_on_the_bound_socket_and_stops_on_ctrl_c(
        self, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
    ) -> None:
        import uvicorn  # noqa: PLC0415

        ran: list[Any] = []

        def run(server: uvicorn.Server, sockets: list[Any]) -> None:
            ran.append((server.config, sockets[0].getsockname()))
            raise KeyboardInterrupt

        monkeypatch.setattr(uvicorn.Server, "run", run)
        code = main(
            ["proxy", "--upstream", "http://x", "--port", "0", "--store", "memory:",
             "--max-tokens", "5000", "--ttl", "60", "--max-body", "1000"]
        )  # fmt: skip
        ((config, (host, port)),) = ran
        assert code == 0
        assert host == "127.0.0.1"
        assert (config.server_header, config.date_header, config.access_log) == (
            False,
            False,
            False,
        )
        line = capsys.readouterr().err
        assert f"listening on http://127.0.0.1:{port}" in line
        assert "python" in sys.executable
