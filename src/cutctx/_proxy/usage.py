"""What the upstream reported: the input it counted and its cache, from JSON and SSE bodies.

The three APIs report usage their own way: Anthropic's ``input_tokens`` leaves out what the
cache read or wrote (``cache_read_input_tokens``, ``cache_creation_input_tokens``), so the
whole input is their sum; OpenAI Chat's ``prompt_tokens`` and Responses' ``input_tokens``
include their cached part (``prompt_tokens_details`` / ``input_tokens_details.cached_tokens``).
A stream is read as it passes: ``EventStream.feed`` takes the bytes as they arrive and says when
the stream's last event (``message_stop``, ``data: [DONE]``, ``response.completed``) went by.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Final, Literal

__all__ = ["Api", "EventStream", "Usage", "from_json"]

type Api = Literal["anthropic", "openai_chat", "openai_responses"]
"""The API of a route whose requests the proxy compacts (the format's name)."""


@dataclass(frozen=True, slots=True)
class Usage:
    """The input the upstream counted for one request, and how much of it the cache served.

    ``input_tokens`` is the whole input (cached or not), ``cache_read`` the tokens read from the
    cache, ``cache_write`` those written to it (Anthropic only; 0 for OpenAI).
    """

    input_tokens: int
    cache_read: int = 0
    cache_write: int = 0


def _count(value: object) -> int:
    """Return ``value`` when it is a count (an int >= 0), else 0."""
    return value if type(value) is int and value >= 0 else 0


def _anthropic(usage: object, before: Usage | None = None) -> Usage | None:
    """Read an Anthropic ``usage`` object; fields it leaves out keep their value in ``before``."""
    if not isinstance(usage, dict):
        return before
    base = before or Usage(0)
    plain = usage.get("input_tokens")
    read = usage.get("cache_read_input_tokens")
    write = usage.get("cache_creation_input_tokens")
    if plain is None and read is None and write is None:
        return before  # a delta that counts only the output
    old_plain = base.input_tokens - base.cache_read - base.cache_write
    plain_ = _count(plain) if plain is not None else old_plain
    read_ = _count(read) if read is not None else base.cache_read
    write_ = _count(write) if write is not None else base.cache_write
    return Usage(plain_ + read_ + write_, read_, write_)


def _openai(usage: object, total: str, details: str) -> Usage | None:
    """Read an OpenAI ``usage`` object: ``total`` the input's field, ``details`` its cache's."""
    if not isinstance(usage, dict) or type(usage.get(total)) is not int:
        return None
    cached = usage.get(details)
    read = _count(cached.get("cached_tokens")) if isinstance(cached, dict) else 0
    return Usage(_count(usage[total]), read)


def _of(api: Api, usage: object) -> Usage | None:
    if api == "anthropic":
        return _anthropic(usage)
    if api == "openai_chat":
        return _openai(usage, "prompt_tokens", "prompt_tokens_details")
    return _openai(usage, "input_tokens", "input_tokens_details")


def from_json(api: Api, body: bytes) -> Usage | None:
    """Return the usage a JSON response body reports, or ``None`` (not JSON, no usage)."""
    try:
        data = json.loads(body)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    return _of(api, data.get("usage"))


_ENDS: Final[dict[str, frozenset[str]]] = {
    "anthropic": frozenset({"message_stop"}),
    "openai_responses": frozenset({"response.completed", "response.incomplete"}),
}
_REPORTS: Final = frozenset(
    {"message_start", "message_delta", "response.completed", "response.incomplete"}
)
_FAILED: Final = frozenset({"error", "response.failed", "response.error"})
_TYPE: Final = re.compile(rb'"type"\s*:\s*"([^"]{1,80})"')
"""An event's ``type`` field, for a stream that names its events only in their data."""


class EventStream:
    """Reads a server-sent event stream as it passes, for its usage and its end.

    ``feed(chunk)`` takes the bytes as they arrive (an event may span chunks) and returns
    whether the stream's last event has now gone by; ``usage`` is what it reported, ``failed``
    whether it carried an error event.
    """

    __slots__ = ("_api", "_buffer", "completed", "failed", "usage")

    def __init__(self, api: Api) -> None:
        self._api: Api = api
        self._buffer = b""
        self.usage: Usage | None = None
        self.completed = False
        self.failed = False

    def feed(self, chunk: bytes) -> bool:
        """Take the next bytes of the stream; return whether its last event went by in them."""
        buffer = (self._buffer + chunk).replace(b"\r\n", b"\n")
        *events, self._buffer = buffer.split(b"\n\n")
        for event in events:
            self._event(event)
        return self.completed

    def _event(self, raw: bytes) -> None:
        name = ""
        data: list[bytes] = []
        for line in raw.split(b"\n"):
            field, _, value = line.partition(b":")
            value = value.removeprefix(b" ")
            if field == b"event":
                name = value.decode("utf-8", "replace")
            elif field == b"data":
                data.append(value)
        payload = b"\n".join(data)
        if self._api == "openai_chat":
            self._chat(payload)
            return
        if not name and (found := _TYPE.search(payload[:200])) is not None:
            name = found.group(1).decode("utf-8", "replace")
        if name in _FAILED:
            self.failed = True
            return
        if name in _REPORTS:
            self._report(name, _parsed(payload))
        if name in _ENDS[self._api]:
            self.completed = not self.failed

    def _report(self, name: str, parsed: dict[str, Any]) -> None:
        if self._api == "anthropic":
            holder = parsed.get("message") if name == "message_start" else parsed
            if isinstance(holder, dict):
                self.usage = _anthropic(holder.get("usage"), self.usage)
            return
        response = parsed.get("response")
        if isinstance(response, dict):
            self.usage = _of(self._api, response.get("usage")) or self.usage

    def _chat(self, payload: bytes) -> None:
        if payload.strip() == b"[DONE]":
            self.completed = not self.failed
            return
        if b'"usage"' not in payload and b'"error"' not in payload:
            return  # most chunks: a delta of the reply, nothing to read
        parsed = _parsed(payload)
        if "error" in parsed:
            self.failed = True
        usage = _of("openai_chat", parsed.get("usage"))
        if usage is not None:
            self.usage = usage


def _parsed(payload: bytes) -> dict[str, Any]:
    """Return an event's data as a JSON object, or an empty one."""
    try:
        data = json.loads(payload)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}
