"""The proxy's parts on their own: the budget table, usage readers, header filtering."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from cutctx import TextEstimator
from cutctx._proxy.budget import CONTEXT_SIZES, ToolPrices, context_size, request_budget
from cutctx._proxy.upstream import Upstream, check_upstream, request_headers, response_headers
from cutctx._proxy.usage import EventStream, Usage, from_json
from tests.proxy.fake_upstream import FakeUpstream


class TestBudget:
    @pytest.mark.parametrize(
        ("model", "context"),
        [
            ("claude-sonnet-4-5-20250929", 200_000),
            ("gpt-4o-mini", 128_000),
            ("gpt-4.1-nano", 1_047_576),
            ("gpt-5-codex", 400_000),
            ("o4-mini", 200_000),
            ("o3", 200_000),
        ],
    )
    def test_the_longest_matching_prefix_gives_the_context(self, model: str, context: int) -> None:
        size = context_size(model)
        assert size is not None
        assert size.context == context

    @pytest.mark.parametrize("model", ["llama-3", "", None, 42, "GPT-4O"])
    def test_a_model_the_table_does_not_know_has_no_budget(self, model: object) -> None:
        assert context_size(model) is None
        assert request_budget({"model": model, "max_tokens": 10}, None) is None

    def test_max_tokens_of_the_proxy_wins_over_the_table(self) -> None:
        assert request_budget({"model": "anything"}, 12_345) == 12_345

    @pytest.mark.parametrize(
        ("field", "value", "budget"),
        [
            ("max_tokens", 32_000, 168_000),
            ("max_completion_tokens", 1_000, 199_000),
            ("max_output_tokens", 0, 200_000),
            ("max_tokens", "many", 136_000),  # not a count: the model's largest reply
            ("max_tokens", 300_000, None),  # no room left
        ],
    )
    def test_the_replys_room_is_taken_off_the_context(
        self, field: str, value: object, budget: int | None
    ) -> None:
        assert request_budget({"model": "claude-opus-4-1", field: value}, None) == budget

    def test_the_table_is_documented_row_for_row(self) -> None:
        from tests.test_docs import ROOT  # noqa: PLC0415

        page = (ROOT / "docs" / "proxy.md").read_text("utf-8")
        for size in CONTEXT_SIZES:
            assert (
                f"| `{size.prefix}*` | {size.context:_} | {size.reply:_} |".replace("_", " ")
                in page
            ), size

    def test_tools_are_priced_once_per_set(self) -> None:
        calls: list[str] = []

        class Counting(TextEstimator):
            def estimate_tokens(self, text: str) -> int:
                calls.append(text)
                return super().estimate_tokens(text)

        prices = ToolPrices(Counting(), size=2)
        tools: list[dict[str, Any]] = [{"name": "sh", "input_schema": {"type": "object"}}]
        first = prices.price(tools)
        assert prices.price(json.loads(json.dumps(tools))) == first > 0
        assert len(calls) == 1
        assert prices.price(None) == prices.price([]) == 0
        prices.price([{"name": "a"}])
        prices.price([{"name": "b"}])  # the first set is forgotten (two are kept)
        prices.price(tools)
        assert len(calls) == 4


def events(*pairs: tuple[str | None, object]) -> bytes:
    out = b""
    for name, data in pairs:
        text = data if isinstance(data, str) else json.dumps(data)
        out += (f"event: {name}\n" if name else "").encode() + f"data: {text}\n\n".encode()
    return out


ANTHROPIC_STREAM = events(
    ("message_start", {"type": "message_start", "message": {"usage": {
        "input_tokens": 10, "cache_read_input_tokens": 500, "cache_creation_input_tokens": 40,
        "output_tokens": 1}}}),
    ("content_block_delta", {"type": "content_block_delta", "delta": {"text": "hi"}}),
    ("message_delta", {"type": "message_delta", "usage": {"output_tokens": 9}}),
    ("message_stop", {"type": "message_stop"}),
)  # fmt: skip


class TestUsage:
    def test_anthropic_counts_what_the_cache_read_and_wrote(self) -> None:
        body = {"usage": {"input_tokens": 10, "cache_read_input_tokens": 500,
                          "cache_creation_input_tokens": 40}}  # fmt: skip
        assert from_json("anthropic", json.dumps(body).encode()) == Usage(550, 500, 40)

    def test_openai_counts_include_their_cached_part(self) -> None:
        chat = {"usage": {"prompt_tokens": 900, "prompt_tokens_details": {"cached_tokens": 640}}}
        responses = {"usage": {"input_tokens": 700, "input_tokens_details": {"cached_tokens": 0}}}
        assert from_json("openai_chat", json.dumps(chat).encode()) == Usage(900, 640)
        assert from_json("openai_responses", json.dumps(responses).encode()) == Usage(700)

    @pytest.mark.parametrize(
        "body", [b"not json", b"[1]", b'{"usage": null}', b'{"usage": {"prompt_tokens": "9"}}']
    )
    def test_a_body_without_usage_reports_none(self, body: bytes) -> None:
        assert from_json("openai_chat", body) is None

    @pytest.mark.parametrize("size", [1, 2, 7, 64, 10_000])
    def test_a_stream_is_read_in_chunks_of_any_size(self, size: int) -> None:
        stream = EventStream("anthropic")
        data = ANTHROPIC_STREAM.replace(b"\n", b"\r\n")
        ends = [stream.feed(data[at : at + size]) for at in range(0, len(data), size)]
        assert ends[-1]
        assert not any(ends[:-1])
        assert stream.usage == Usage(550, 500, 40)

    def test_an_anthropic_delta_may_restate_the_input(self) -> None:
        stream = EventStream("anthropic")
        stream.feed(ANTHROPIC_STREAM[: ANTHROPIC_STREAM.index(b"event: message_delta")])
        stream.feed(events(("message_delta", {"usage": {"input_tokens": 12, "output_tokens": 3}})))
        assert stream.usage == Usage(552, 500, 40)

    def test_an_error_event_means_the_stream_did_not_complete(self) -> None:
        stream = EventStream("anthropic")
        stream.feed(ANTHROPIC_STREAM[: ANTHROPIC_STREAM.index(b"event: message_delta")])
        stream.feed(events(("error", {"type": "error", "error": {"type": "overloaded_error"}})))
        assert not stream.feed(events(("message_stop", {"type": "message_stop"})))
        assert stream.failed

    def test_a_chat_stream_ends_at_done_with_or_without_usage(self) -> None:
        with_usage = EventStream("openai_chat")
        assert not with_usage.feed(events((None, {"choices": [{"delta": {"content": "x"}}]})))
        with_usage.feed(events((None, {"choices": [], "usage": {"prompt_tokens": 77}})))
        assert with_usage.feed(events((None, "[DONE]")))
        assert with_usage.usage == Usage(77)
        without = EventStream("openai_chat")
        assert without.feed(events((None, {"choices": []}), (None, "[DONE]")))
        assert without.usage is None
        failed = EventStream("openai_chat")
        assert not failed.feed(events((None, {"error": {"message": "x"}}), (None, "[DONE]")))

    @pytest.mark.parametrize("named", [True, False])
    def test_a_responses_stream_ends_at_its_completed_event(self, named: bool) -> None:
        stream = EventStream("openai_responses")
        completed = {"type": "response.completed", "response": {"usage": {
            "input_tokens": 321, "input_tokens_details": {"cached_tokens": 300}}}}  # fmt: skip
        created = {"type": "response.created", "response": {"usage": None}}
        assert not stream.feed(events(("response.created" if named else None, created)))
        assert stream.feed(events(("response.completed" if named else None, completed)))
        assert stream.usage == Usage(321, 300)

    def test_a_failed_response_did_not_complete(self) -> None:
        stream = EventStream("openai_responses")
        assert not stream.feed(events(("response.failed", {"type": "response.failed"})))
        assert stream.failed


class TestHeaders:
    def test_hop_by_hop_and_the_proxys_own_headers_are_not_forwarded(self) -> None:
        given = [
            (b"Connection", b"keep-alive, X-Hop"),
            (b"X-Hop", b"1"),
            (b"Keep-Alive", b"timeout=5"),
            (b"Transfer-Encoding", b"chunked"),
            (b"TE", b"trailers"),
            (b"Upgrade", b"h2c"),
            (b"Proxy-Authorization", b"Basic x"),
            (b"Host", b"127.0.0.1:8787"),
            (b"Content-Length", b"12"),
            (b"X-Cutctx-Conversation", b"c1"),
            (b"X-Api-Key", b"sk-1"),
            (b"Anthropic-Beta", b"a,b"),
            (b"Accept-Encoding", b"gzip"),
        ]
        assert request_headers(given, identity=False) == [
            (b"x-api-key", b"sk-1"),
            (b"anthropic-beta", b"a,b"),
            (b"accept-encoding", b"gzip"),
        ]
        assert request_headers(given, identity=True)[-2:] == [
            (b"anthropic-beta", b"a,b"),
            (b"accept-encoding", b"identity"),
        ]

    def test_response_headers_lose_only_the_hop_by_hop_ones(self) -> None:
        given = [
            (b"Content-Type", b"text/event-stream"),
            (b"Transfer-Encoding", b"chunked"),
            (b"Request-Id", b"req_1"),
            (b"Set-Cookie", b"a=1"),
            (b"Set-Cookie", b"b=2"),
            (b"Connection", b"close"),
        ]
        assert response_headers(given) == [
            (b"content-type", b"text/event-stream"),
            (b"request-id", b"req_1"),
            (b"set-cookie", b"a=1"),
            (b"set-cookie", b"b=2"),
        ]

    @pytest.mark.parametrize(
        "url",
        [
            "ftp://example.com",
            "example.com",
            "http://",
            "https://example.com/?key=1",
            "https://user:pw@example.com",
            "http://[::1",
            "https://example.com:99999",
        ],
    )
    def test_an_upstream_that_is_no_http_url_is_refused(self, url: str) -> None:
        with pytest.raises(ValueError, match="--upstream"):
            check_upstream(url)

    def test_the_path_and_query_join_the_upstreams_own_path(self) -> None:
        upstream = Upstream("https://example.com/api/", transport=httpx.MockTransport(_echo))
        url = upstream.url_for(b"/v1/messages", b"beta=true&x=%20")
        assert str(url) == "https://example.com/api/v1/messages?beta=true&x=%20"

        async def send() -> httpx.Response:
            answer = await upstream.send("GET", url, [(b"x-api-key", b"k")], None)
            await answer.aread()
            await upstream.aclose()
            return answer

        answer = asyncio.run(send())
        assert answer.json() == {"url": str(url), "headers": {
            "host": "example.com", "x-api-key": "k"}}  # fmt: skip


def _echo(request: httpx.Request) -> httpx.Response:
    return httpx.Response(
        200, json={"url": str(request.url), "headers": dict(request.headers.items())}
    )


def test_the_fake_upstream_counts_like_the_provider() -> None:
    """The fake's usage is 1.3 times the request's cl100k size, cache included."""
    fake = FakeUpstream()
    body = {"messages": [{"role": "user", "content": "hello there"}], "system": "Be brief."}
    count, cached = fake.count(body, "anthropic")
    again, cached_again = fake.count(body, "anthropic")
    assert count == again > 0
    assert (cached, cached_again) == (0, count)
