"""The proxy's ASGI app: HTTP in, one ``ContextWindow`` step per request, HTTP out.

``POST /v1/messages`` (Anthropic), ``POST /v1/chat/completions`` (OpenAI Chat) and ``POST
/v1/responses`` (OpenAI Responses with a full ``input`` list) run the conversation's window over
the request's history and send the compacted request upstream; every other request is forwarded
as it came. Responses come back as the upstream sent them (status, headers, bytes; a stream
event by event). The window advances — usage reported, state saved — only when the upstream
answered 2xx and its stream ended: a failed request leaves the conversation as it was, so the
client's retry sends the same upstream request. What cutctx cannot read passes through
(fail-open) and is logged. See docs/proxy.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, cast

import httpx
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from cutctx import ContextWindow, TextEstimator
from cutctx._proxy.budget import ToolPrices, request_budget
from cutctx._proxy.conversations import new_conversation_id, prefix_digests
from cutctx._proxy.store import StoreUnavailable
from cutctx._proxy.upstream import Upstream, request_headers, response_headers
from cutctx._proxy.usage import Api, EventStream, Usage, from_json
from cutctx.formats import presentation_of, resolve

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable

    from starlette.types import Receive, Scope, Send

    from cutctx._proxy.store import Store

__all__ = [
    "COMPACT_AT",
    "COMPACT_TO",
    "CONVERSATION_HEADER",
    "DEFAULT_MAX_BODY",
    "DEFAULT_TTL",
    "MAX_RESULT_TOKENS",
    "MIN_RESULT_TOKENS",
    "ROUTES",
    "create_app",
]

LOG: Final = logging.getLogger("cutctx.proxy")

ROUTES: Final[dict[str, Api]] = {
    "/v1/messages": "anthropic",
    "/v1/chat/completions": "openai_chat",
    "/v1/responses": "openai_responses",
}
"""The paths whose ``POST`` requests the proxy compacts, and their formats."""

CONVERSATION_HEADER: Final = "x-cutctx-conversation"
"""The request header that names a conversation (otherwise found by the history it continues)."""

DEFAULT_MAX_BODY: Final = 32 * 1024 * 1024
"""The largest request body read (``--max-body``); a larger one is answered 413."""

DEFAULT_TTL: Final = 7 * 24 * 3600.0
"""How long an idle conversation's window is kept (``--ttl``), in seconds."""

COMPACT_AT: Final = 0.9
COMPACT_TO: Final = 0.4
MAX_RESULT_TOKENS: Final = 0.06
MIN_RESULT_TOKENS: Final = 300
"""The window's settings: compact rarely and deep, excerpt large results (docs/proxy.md)."""

_STATE_VERSION: Final = 1
_MAX_KEEP_FIRST: Final = 4
_EXPIRE_EVERY: Final = 3600.0
_SERIALISED: Final = {"ensure_ascii": False, "separators": (",", ":")}


class UpstreamCut(Exception):
    """The upstream's stream broke off: the client's connection is closed the same way."""


# -- what a request holds ----------------------------------------------------------------------


@dataclass(slots=True)
class Incoming:
    """A request the proxy can compact: its parsed body and what the window needs of it."""

    api: Api
    body: dict[str, Any]
    field: str
    messages: list[Any]
    system: Any
    budget: int
    tools: int
    marked: bool
    keep_first: int
    digests: list[str]


@dataclass(slots=True)
class Served:
    """One step's outcome: the window, what goes upstream, and the figures for the log."""

    window: ContextWindow
    content: bytes | None  # None: the original bytes (nothing was cut)
    compacted: bool
    history_tokens: int
    sent_tokens: int
    seen: int


@dataclass(slots=True)
class Figures:
    """What the proxy did for one conversation (or for all: ``/cutctx/stats``)."""

    requests: int = 0
    passed_through: int = 0
    compactions: int = 0
    history_tokens: int = 0
    sent_tokens: int = 0
    input_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    last_used: float = field(default=0.0, compare=False)

    def as_json(self) -> dict[str, Any]:
        """Return the figures as JSON data, with the tokens saved and the cache-read share."""
        share = self.cache_read_tokens / self.input_tokens if self.input_tokens else 0.0
        return {
            "requests": self.requests,
            "passed_through": self.passed_through,
            "compactions": self.compactions,
            "history_tokens": self.history_tokens,
            "sent_tokens": self.sent_tokens,
            "tokens_saved": self.history_tokens - self.sent_tokens,
            "input_tokens": self.input_tokens,
            "cache_read_tokens": self.cache_read_tokens,
            "cache_write_tokens": self.cache_write_tokens,
            "cache_read_share": round(share, 4),
        }


@dataclass(slots=True)
class Line:
    """The one log line of a request, filled in as it is served."""

    method: str
    path: str
    started: float
    conversation: str = "-"
    history_tokens: int | None = None
    sent_tokens: int | None = None
    compacted: bool = False
    note: str = ""
    status: int | str = "-"
    usage: Usage | None = None
    added: float | None = None
    windowed: bool = False

    def text(self) -> str:
        tokens = "-"
        if self.history_tokens is not None and self.sent_tokens is not None:
            tokens = f"{self.history_tokens}->{self.sent_tokens}"
        read = self.usage.cache_read if self.usage else "-"
        write = self.usage.cache_write if self.usage else "-"
        added = f"{self.added * 1000:.1f}ms" if self.added is not None else "-"
        note = f" note={self.note}" if self.note else ""
        return (
            f"{self.method} {self.path} conversation={self.conversation} tokens={tokens} "
            f"compacted={'yes' if self.compacted else 'no'} status={self.status} "
            f"cache_read={read} cache_write={write} added={added}{note}"
        )


def _why(error: BaseException) -> str:
    """Name an error for the log without its text (a message may quote the request)."""
    details = getattr(error, "details", None) or {}
    where = "".join(
        f",{key}={details[key]}"
        for key in ("index", "field")
        if key in details and isinstance(details[key], int | str)
    )
    return f"{type(error).__name__}{where}"


def _canonical(value: object) -> bytes:
    text = json.dumps(value, ensure_ascii=True, separators=(",", ":"), sort_keys=True)
    return text.encode("ascii")


def _keep_first(api: Api, messages: list[Any]) -> int:
    """Count the user messages before the first answer (the task and what frames it)."""
    count = 0
    for message in messages:
        if not isinstance(message, dict):
            break
        role = message.get("role")
        kind = message.get("type", "message")
        if role in ("system", "developer") and kind == "message" and api != "anthropic":
            continue
        if role != "user" or kind != "message":
            break
        count += 1
    return min(count, _MAX_KEEP_FIRST)


# -- the proxy -----------------------------------------------------------------------------------


class _Conversations:
    """One asyncio lock per conversation in flight, dropped when nobody holds or waits."""

    def __init__(self) -> None:
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}

    @contextlib.asynccontextmanager
    async def held(self, conversation: str) -> AsyncIterator[None]:
        lock, users = self._locks.get(conversation, (None, 0))
        if lock is None:
            lock = asyncio.Lock()
        self._locks[conversation] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock_, users_ = self._locks[conversation]
            if users_ == 1:
                del self._locks[conversation]
            else:
                self._locks[conversation] = (lock_, users_ - 1)


@contextlib.asynccontextmanager
async def _store_lock(store: Store, conversation: str) -> AsyncIterator[None]:
    """Hold ``store.lock(conversation)`` on a thread of its own for as long as the block runs.

    The store's lock is synchronous and may belong to the thread (or connection) that took it,
    so one thread takes it, waits for the block to end, and releases it.
    """
    loop = asyncio.get_running_loop()
    taken: asyncio.Future[None] = loop.create_future()
    done = threading.Event()

    def settle(error: BaseException | None) -> None:
        if taken.done():
            return
        if error is None:
            taken.set_result(None)
        else:
            taken.set_exception(error)

    def hold() -> None:
        try:
            with store.lock(conversation):
                loop.call_soon_threadsafe(settle, None)
                done.wait()
        except BaseException as error:  # noqa: BLE001 - handed to the waiting request
            with contextlib.suppress(RuntimeError):  # the loop is gone: nobody waits
                loop.call_soon_threadsafe(settle, error)

    threading.Thread(target=hold, name=f"cutctx-lock-{conversation[:12]}", daemon=True).start()
    try:
        await taken
        yield
    finally:
        done.set()


class _Live:
    """The windows this process saved last, warm, by conversation (the most recent ``size``).

    A window is taken out for a step and put back only when its step was saved, with the text
    saved: a step that failed upstream leaves nothing here, and a state another process saved
    since does not match, so both are restored from the store instead.
    """

    def __init__(self, size: int = 256) -> None:
        self._size = size
        self._mutex = threading.Lock()
        self._windows: OrderedDict[str, tuple[str, ContextWindow, dict[str, Any]]] = OrderedDict()

    def take(
        self, conversation: str, saved: str | None
    ) -> tuple[ContextWindow, dict[str, Any]] | None:
        with self._mutex:
            live = self._windows.pop(conversation, None)
        if live is None or saved is None or live[0] != saved:
            return None
        return live[1], live[2]

    def put(
        self, conversation: str, saved: str, window: ContextWindow, envelope: dict[str, Any]
    ) -> None:
        with self._mutex:
            self._windows[conversation] = (saved, window, envelope)
            self._windows.move_to_end(conversation)
            while len(self._windows) > self._size:
                self._windows.popitem(last=False)


class _Advance:
    """Saves a step once its answer is complete: as it completes (``early``) or at the end."""

    def __init__(self, save: Callable[[Usage | None], Awaitable[None]], *, early: bool) -> None:
        self._save = save
        self._early = early
        self._ready = False
        self._done = False
        self._usage: Usage | None = None

    async def reached(self, usage: Usage | None, line: Line) -> None:
        """The answer is complete (a 2xx whose stream ended): save now or at ``finish``."""
        self._ready, self._usage = True, usage
        if self._early:
            await self._run(line)

    async def finish(self, line: Line) -> None:
        """The exchange is over: save a complete answer not saved yet."""
        if self._ready:
            await self._run(line)

    async def _run(self, line: Line) -> None:
        if self._done:
            return
        self._done = True
        try:
            await self._save(self._usage)
        except Exception as error:  # noqa: BLE001 - the answer still reaches the client
            line.note = f"{line.note} unsaved:{_why(error)}".strip()


class _Relay(StreamingResponse):
    """A streamed response that runs ``cleanup`` however it ends (done, cut, or left)."""

    def __init__(
        self,
        content: AsyncIterator[bytes],
        status_code: int,
        headers: list[tuple[bytes, bytes]],
        cleanup: Callable[[], Awaitable[None]],
    ) -> None:
        super().__init__(content, status_code)
        self.raw_headers = headers
        self._content = content
        self._cleanup = cleanup

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            with contextlib.suppress(Exception):
                await cast("Any", self._content).aclose()
            await self._cleanup()


class _QuietCuts(logging.Filter):
    """Keep the server's traceback of a cut stream out of the log (the proxy logs it)."""

    def filter(self, record: logging.LogRecord) -> bool:
        info = record.exc_info
        return not (info and isinstance(info[1], UpstreamCut))


class Proxy:
    """The proxy's state: the upstream, the store, the windows' settings and the figures."""

    def __init__(
        self,
        upstream: Upstream,
        store: Store,
        *,
        max_tokens: int | None,
        max_body: int,
        ttl: float,
    ) -> None:
        self.upstream = upstream
        self.store = store
        self.max_tokens = max_tokens
        self.max_body = max_body
        self.ttl = ttl
        self._estimator = TextEstimator()
        self._tools = ToolPrices(self._estimator)
        self._conversations = _Conversations()
        self._live = _Live()
        self.total = Figures()
        self.figures: dict[str, Figures] = {}

    # -- routing --------------------------------------------------------------------------------

    async def handle(self, request: Request) -> Response:
        """Serve one request: ours, compacted, or forwarded as it came."""
        path = request.url.path
        method = request.method
        if path == "/healthz" and method in ("GET", "HEAD"):
            return JSONResponse({"status": "ok"})
        if path == "/cutctx/stats" and method == "GET":
            return JSONResponse(self.stats())
        api = ROUTES.get(path) if method == "POST" else None
        line = Line(method, path, time.perf_counter())
        if api is None:
            return await self._forward(request, line)
        return await self._compact(request, api, line)

    def stats(self) -> dict[str, Any]:
        """Return the figures per conversation and in all."""
        return {
            "conversations": {key: value.as_json() for key, value in self.figures.items()},
            "total": self.total.as_json(),
        }

    # -- forwarding as it came ------------------------------------------------------------------

    async def _forward(self, request: Request, line: Line) -> Response:
        headers = request_headers(request.headers.raw, identity=False)
        length = request.headers.get("content-length")
        if length is not None:
            headers.append((b"content-length", length.encode("latin-1")))
        has_body = length is not None or "transfer-encoding" in request.headers
        content = request.stream() if has_body else None
        return await self._send(request, headers, content, line, api=None)

    # -- compacting -----------------------------------------------------------------------------

    async def _compact(self, request: Request, api: Api, line: Line) -> Response:
        raw = await self._body(request)
        if raw is None:
            line.status, line.note = 413, "over --max-body"
            LOG.info("%s", line.text())
            return _error(api, 413, "request_too_large", self._too_large())
        headers = request_headers(request.headers.raw, identity=True)
        try:
            incoming = await run_in_threadpool(self._read, api, raw)
        except Exception as error:  # noqa: BLE001 - fail-open: forwarded as it came
            return await self._pass(request, api, raw, headers, line, why=f"unread:{_why(error)}")
        if isinstance(incoming, str):
            return await self._pass(request, api, raw, headers, line, why=incoming)
        named = _valid_name(request.headers.get(CONVERSATION_HEADER, "").strip())
        try:
            conversation = named or await run_in_threadpool(self.store.continued, incoming.digests)
        except StoreUnavailable as error:
            return await self._pass(request, api, raw, headers, line, why=f"store:{_why(error)}")
        line.conversation = conversation or new_conversation_id()
        return await self._step(request, incoming, raw, headers, line, named=named is not None)

    async def _step(
        self,
        request: Request,
        incoming: Incoming,
        raw: bytes,
        headers: list[tuple[bytes, bytes]],
        line: Line,
        *,
        named: bool,
    ) -> Response:
        conversation = line.conversation
        held = contextlib.AsyncExitStack()
        await held.__aenter__()
        try:
            await held.enter_async_context(self._conversations.held(conversation))
            await held.enter_async_context(_store_lock(self.store, conversation))
            saved = await run_in_threadpool(self.store.load, conversation)
            served = await run_in_threadpool(self._serve, conversation, incoming, saved)
        except BaseException as error:
            await held.aclose()
            if not isinstance(error, Exception):
                raise
            where = "store" if isinstance(error, StoreUnavailable) else "unserved"
            return await self._pass(
                request, incoming.api, raw, headers, line, why=f"{where}:{_why(error)}"
            )
        line.history_tokens, line.sent_tokens = served.history_tokens, served.sent_tokens
        line.compacted, line.windowed = served.compacted, True

        async def save(usage: Usage | None) -> None:
            await run_in_threadpool(self._advance, conversation, incoming, served, usage)

        # The step is saved after the answer's last bytes left, off the client's wait: its next
        # request finds this conversation by the history saved before and waits for the lock.
        # A new conversation has no history saved yet, so its first step is saved before.
        advance = _Advance(save, early=saved is None and not named)
        content = raw if served.content is None else served.content
        return await self._send(
            request, headers, content, line, api=incoming.api, advance=advance, release=held.aclose
        )

    async def _pass(
        self,
        request: Request,
        api: Api,
        raw: bytes,
        headers: list[tuple[bytes, bytes]],
        line: Line,
        *,
        why: str,
    ) -> Response:
        """Forward a compactable request as it came (fail-open), saying why in the log."""
        line.note = why
        return await self._send(request, headers, raw, line, api=api)

    async def _body(self, request: Request) -> bytes | None:
        """Return the request body, or ``None`` when it is over ``max_body``."""
        length = request.headers.get("content-length", "")
        if length.isdigit() and int(length) > self.max_body:
            return None
        parts: list[bytes] = []
        size = 0
        with contextlib.suppress(ClientDisconnect):
            async for chunk in request.stream():
                size += len(chunk)
                if size > self.max_body:
                    return None
                parts.append(chunk)
        return b"".join(parts)

    def _too_large(self) -> str:
        return (
            f"cutctx proxy: the request body is over the proxy's limit of {self.max_body} bytes "
            "(--max-body)"
        )

    def _read(self, api: Api, raw: bytes) -> Incoming | str:
        """Parse a compactable request; a string says why it passes through instead.

        Raises:
            ValueError: for a body that is not JSON (the caller passes it through).
        """
        body = json.loads(raw)
        if not isinstance(body, dict):
            return "unread:not-an-object"
        field_ = "input" if api == "openai_responses" else "messages"
        messages = body.get(field_)
        if api == "openai_responses" and body.get("previous_response_id") is not None:
            return "previous_response_id"
        if not isinstance(messages, list) or not messages:
            return f"no-{field_}"
        budget = request_budget(body, self.max_tokens)
        if budget is None:
            return "unknown-model"
        fmt = resolve(api)
        system_field = presentation_of(fmt).system_field
        system = body.get(system_field) if system_field is not None else None
        tools = self._tools.price(body.get("tools"))
        if budget - tools < 1:
            return "tools-over-budget"
        salt = f"{api}:{hashlib.sha256(_canonical(system)).hexdigest()}"
        return Incoming(
            api=api,
            body=body,
            field=field_,
            messages=messages,
            system=system,
            budget=budget - tools,
            tools=tools,
            marked=api == "anthropic" and b'"cache_control"' in raw,
            keep_first=_keep_first(api, messages),
            digests=prefix_digests(messages, salt=salt),
        )

    def _serve(self, conversation: str, incoming: Incoming, saved: str | None) -> Served:
        """Run the window's step over the request's history (on a worker thread)."""
        window, envelope = self._restored(conversation, incoming, saved)
        if window is None:
            envelope = None
            window = ContextWindow(
                incoming.api,
                max_tokens=incoming.budget,
                compact_at=COMPACT_AT,
                compact_to=COMPACT_TO,
                max_result_tokens=_result_cap(incoming.budget),
                keep_first=incoming.keep_first,
                system=incoming.system,
                cache_breakpoints=incoming.api == "anthropic" and not incoming.marked,
            )
        else:
            window.set_system(incoming.system)
        before = window.stats
        messages = incoming.messages
        request = window.prepare(messages)
        after = window.stats
        compacted = after.compactions > before.compactions
        history, sent = self._figures(incoming, window, request, envelope, compacted=compacted,
                                      reset=after.resets > before.resets)  # fmt: skip
        content = None
        if request != messages:
            body = {**incoming.body, incoming.field: request}
            content = json.dumps(body, **_SERIALISED).encode("utf-8")  # type: ignore[arg-type]
        return Served(window, content, compacted, history, sent, len(messages))

    def _restored(
        self, conversation: str, incoming: Incoming, saved: str | None
    ) -> tuple[ContextWindow | None, dict[str, Any] | None]:
        """Return the conversation's window as ``saved`` left it, and the envelope's figures.

        The window this process saved last is used as it is (warm) when the store still holds
        what it saved; any other saved state is restored with ``ContextWindow.from_state``.
        ``(None, None)``: no usable state (none, another budget, unreadable).
        """
        live = self._live.take(conversation, saved)
        window: ContextWindow | None
        envelope: dict[str, Any] | None
        if live is not None:
            window, envelope = live
        else:
            window, envelope = None, _envelope(saved)
        if envelope is None or (envelope.get("budget"), envelope.get("marked")) != (
            incoming.budget,
            incoming.marked,
        ):
            return None, None
        if window is None:
            try:
                window = ContextWindow.from_state(envelope["window"])
            except Exception:  # noqa: BLE001 - a state this version cannot read: start anew
                return None, None
        return window, envelope

    def _figures(
        self,
        incoming: Incoming,
        window: ContextWindow,
        request: list[Any],
        envelope: dict[str, Any] | None,
        *,
        compacted: bool,
        reset: bool,
    ) -> tuple[int, int]:
        """Return the history's and the request's estimated tokens, pricing only what is new."""
        if compacted and window.last is not None:
            plan = window.last.plan
            return plan.tokens_before, plan.tokens_after_estimate
        fmt = resolve(incoming.api)
        messages = incoming.messages
        seen = envelope.get("seen") if envelope is not None else None
        if reset or type(seen) is not int or not 0 < seen <= len(messages):
            history = fmt.count_tokens(messages, estimator=self._estimator, system=incoming.system)
            if request == messages:
                return history, history
            sent = fmt.count_tokens(request, estimator=self._estimator, system=incoming.system)
            return history, sent
        assert envelope is not None  # noqa: S101 - seen came from it
        new = messages[seen:]
        added = fmt.count_tokens(new, estimator=self._estimator) if new else 0
        sent_added = added
        if new and request[-len(new) :] != new:
            sent_added = fmt.count_tokens(request[-len(new) :], estimator=self._estimator)
        return envelope["history_tokens"] + added, envelope["sent_tokens"] + sent_added

    def _advance(
        self, conversation: str, incoming: Incoming, served: Served, usage: Usage | None
    ) -> None:
        """After a 2xx answer: report the usage to the window and save its state."""
        window = served.window
        if usage is not None:
            window.report_usage(max(0, usage.input_tokens - incoming.tools))
        envelope = {
            "version": _STATE_VERSION,
            "budget": incoming.budget,
            "marked": incoming.marked,
            "seen": served.seen,
            "history_tokens": served.history_tokens,
            "sent_tokens": served.sent_tokens,
            "window": window.state(),
        }
        text = json.dumps(envelope, separators=(",", ":"))
        self.store.save(conversation, text, incoming.digests[-1])
        del envelope["window"]
        self._live.put(conversation, text, window, envelope)

    # -- sending and relaying -------------------------------------------------------------------

    async def _send(
        self,
        request: Request,
        headers: list[tuple[bytes, bytes]],
        content: bytes | AsyncIterator[bytes] | None,
        line: Line,
        *,
        api: Api | None,
        advance: _Advance | None = None,
        release: Callable[[], Awaitable[None]] | None = None,
    ) -> Response:
        """Send the request upstream and return the response that relays its answer.

        ``api``: the request's format (its answer's usage is read), ``None`` for a request
        forwarded as it came. ``advance`` runs when the answer is a complete 2xx; ``release``
        when the exchange is over, however it ends.
        """
        raw_path = request.scope.get("raw_path") or request.url.path.encode("utf-8")
        url = self.upstream.url_for(raw_path, request.scope.get("query_string", b""))
        line.added = time.perf_counter() - line.started
        try:
            answer = await self.upstream.send(request.method, url, headers, content)
        except (httpx.HTTPError, OSError) as error:
            if release is not None:
                await release()
            line.status = 502
            line.note = f"{line.note} upstream:{type(error).__name__}".strip()
            LOG.info("%s", line.text())
            self._count(line)
            message = f"cutctx proxy: the upstream could not be reached ({type(error).__name__})"
            return _error(api or _api_of(request.url.path), 502, "upstream_unreachable", message)
        line.status = answer.status_code
        ok = 200 <= answer.status_code < 300
        chunks = self._relayed(answer, line, api, advance if ok else None)

        async def done() -> None:
            await answer.aclose()
            if advance is not None:
                await advance.finish(line)
            if release is not None:
                await release()
            LOG.info("%s", line.text())
            self._count(line)

        return _Relay(chunks, answer.status_code, response_headers(answer.headers.raw), done)

    async def _relayed(
        self,
        answer: httpx.Response,
        line: Line,
        api: Api | None,
        advance: _Advance | None,
    ) -> AsyncIterator[bytes]:
        """Yield the answer's bytes as they arrive, reading its usage (and advancing) on the way.

        An event stream is read event by event and advanced when its last event goes by; any
        other body is held back by one chunk, so it is read whole and advanced before its last
        bytes leave. An answer that breaks off raises ``UpstreamCut``.
        """
        ok = 200 <= answer.status_code < 300
        streamed = answer.headers.get("content-type", "").startswith("text/event-stream")
        events = EventStream(api) if api is not None and streamed else None
        parts: list[bytes] | None = [] if api is not None and not streamed and ok else None
        held: bytes | None = None
        advanced = False
        try:
            async for chunk in _raw(answer):
                if events is not None:
                    if events.feed(chunk) and not advanced:
                        advanced = True
                        line.usage = events.usage
                        if advance is not None:
                            await advance.reached(events.usage, line)
                    yield chunk
                    continue
                if parts is not None:
                    parts.append(chunk)
                if held is not None:
                    yield held
                held = chunk
        except httpx.HTTPError as error:
            line.note = f"{line.note} cut:{type(error).__name__}".strip()
            raise UpstreamCut(line.note) from None
        if events is not None and not events.completed:
            line.usage = events.usage
            line.note = f"{line.note} unfinished".strip()
        if parts is not None:
            line.usage = from_json(cast("Api", api), b"".join(parts))
            if advance is not None:
                await advance.reached(line.usage, line)
        if held is not None:
            yield held

    def _count(self, line: Line) -> None:
        """Add a served request to the figures of its conversation and of all."""
        rows = [self.total]
        if line.conversation != "-":
            rows.append(self.figures.setdefault(line.conversation, Figures()))
        now = time.monotonic()
        for row in rows:
            row.requests += 1
            row.last_used = now
            if not line.windowed:
                row.passed_through += 1
            if line.compacted:
                row.compactions += 1
            if line.history_tokens is not None and line.sent_tokens is not None:
                row.history_tokens += line.history_tokens
                row.sent_tokens += line.sent_tokens
            if line.usage is not None:
                row.input_tokens += line.usage.input_tokens
                row.cache_read_tokens += line.usage.cache_read
                row.cache_write_tokens += line.usage.cache_write

    # -- upkeep -----------------------------------------------------------------------------------

    async def expire(self) -> int:
        """Drop the conversations idle longer than ``ttl`` (their windows and their figures)."""
        dropped = await run_in_threadpool(self.store.expire, self.ttl)
        horizon = time.monotonic() - self.ttl
        for key in [key for key, row in self.figures.items() if row.last_used < horizon]:
            del self.figures[key]
        return dropped


async def _raw(answer: httpx.Response) -> AsyncIterator[bytes]:
    """Yield the answer's bytes as they came (its body already, when a transport read it)."""
    if answer.is_stream_consumed:  # a transport that answered with bytes (httpx.MockTransport)
        yield answer.content
        return
    async for chunk in answer.aiter_raw():
        yield chunk


def _result_cap(budget: int) -> int | None:
    """Return the window's result cap: 6 % of its budget, never under 300 tokens.

    An excerpt smaller than that keeps too little to be worth its place (and the window's
    excerpts keep at least 200 tokens of a result); a window under 600 tokens excerpts nothing.
    """
    if budget < 2 * MIN_RESULT_TOKENS:
        return None
    return max(round(MAX_RESULT_TOKENS * budget), MIN_RESULT_TOKENS)


def _valid_name(name: str) -> str | None:
    """Return a conversation name from the header when it is one (printable, at most 200)."""
    if 0 < len(name) <= 200 and name.isascii() and name.isprintable():
        return name
    return None


def _envelope(saved: str | None) -> dict[str, Any] | None:
    if saved is None:
        return None
    try:
        envelope = json.loads(saved)
    except ValueError:
        return None
    if not isinstance(envelope, dict) or envelope.get("version") != _STATE_VERSION:
        return None
    return envelope


def _api_of(path: str) -> Api:
    """The API whose error shape a path's client reads (Anthropic's, else OpenAI's)."""
    return (
        "anthropic" if path.startswith("/v1/messages") or path == "/v1/complete" else "openai_chat"
    )


def _error(api: Api, status: int, code: str, message: str) -> Response:
    """Return an error in the provider's own shape, so the client's SDK reads it."""
    if api == "anthropic":
        kind = {413: "request_too_large", 502: "api_error"}.get(status, "api_error")
        body: dict[str, Any] = {"type": "error", "error": {"type": kind, "message": message}}
    else:
        kind = "invalid_request_error" if status < 500 else "server_error"
        body = {"error": {"message": message, "type": kind, "param": None, "code": code}}
    return JSONResponse(body, status_code=status)


def create_app(
    upstream: str,
    *,
    store: Store,
    max_tokens: int | None = None,
    max_body: int = DEFAULT_MAX_BODY,
    ttl: float = DEFAULT_TTL,
    transport: httpx.AsyncBaseTransport | None = None,
) -> Starlette:
    """Return the proxy as an ASGI app forwarding to ``upstream``, keeping windows in ``store``.

    ``max_tokens`` is the most input a request may carry (``None``: the model table, less the
    reply's room); ``max_body`` the largest body read; ``ttl`` how long an idle conversation is
    kept; ``transport`` replaces the network to the upstream (tests). The app closes its
    connections to the upstream when it stops; the store stays the caller's to close.

    Raises:
        ValueError: for an upstream that is not an http(s) URL.
    """
    proxy = Proxy(Upstream(upstream, transport=transport), store,
                  max_tokens=max_tokens, max_body=max_body, ttl=ttl)  # fmt: skip
    quiet = logging.getLogger("uvicorn.error")
    if not any(isinstance(each, _QuietCuts) for each in quiet.filters):
        quiet.addFilter(_QuietCuts())

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        del app

        async def upkeep() -> None:
            while True:
                with contextlib.suppress(Exception):
                    await proxy.expire()
                await asyncio.sleep(min(_EXPIRE_EVERY, proxy.ttl))

        task = asyncio.create_task(upkeep())
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            await proxy.upstream.aclose()

    methods = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
    app = Starlette(
        routes=[Route("/{path:path}", proxy.handle, methods=methods)], lifespan=lifespan
    )
    app.state.proxy = proxy
    return app
