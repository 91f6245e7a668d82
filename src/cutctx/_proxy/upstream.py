"""The one upstream the proxy forwards to, and which headers cross in each direction.

End-to-end headers (``x-api-key``, ``authorization``, ``anthropic-version``, ``anthropic-beta``,
``user-agent``, ...) go upstream as the client sent them; hop-by-hop headers (``connection``
and the headers it names, ``keep-alive``, ``transfer-encoding``, ``te``, ``trailer``,
``upgrade``, ``proxy-*``) do not, ``host`` names the upstream and ``content-length`` is the
body's own. The proxy's own header (``x-cutctx-conversation``) stays here. No URL from a
request is ever followed: the path and query are joined to the one ``--upstream``, and
redirects come back to the client as they are.
"""

from __future__ import annotations

import http.cookiejar
from typing import TYPE_CHECKING, Final
from urllib.parse import urlsplit

import httpx

if TYPE_CHECKING:
    from collections.abc import AsyncIterable, Iterable

__all__ = ["HOP_BY_HOP", "Upstream", "check_upstream", "request_headers", "response_headers"]

type Headers = list[tuple[bytes, bytes]]

HOP_BY_HOP: Final = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"proxy-authenticate",
        b"proxy-authorization",
        b"proxy-connection",
        b"te",
        b"trailer",
        b"trailers",
        b"transfer-encoding",
        b"upgrade",
    }
)
"""The headers that belong to one connection, never forwarded (RFC 9110, section 7.6.1)."""

_OWN: Final = b"x-cutctx-"
_REQUEST_ONLY: Final = frozenset({b"host", b"content-length"})


def _named_by_connection(headers: Iterable[tuple[bytes, bytes]]) -> set[bytes]:
    """Return the header names the ``connection`` header lists (hop-by-hop as well)."""
    named: set[bytes] = set()
    for name, value in headers:
        if name.lower() == b"connection":
            named.update(token.strip().lower() for token in value.split(b",") if token.strip())
    return named


def request_headers(headers: Iterable[tuple[bytes, bytes]], *, identity: bool) -> Headers:
    """Return the client's headers to send upstream (names lower-cased, order kept).

    ``identity``: ask for an uncompressed body (``accept-encoding: identity``), so the proxy
    reads the usage as the bytes pass; the client gets the same bytes either way.
    """
    headers = list(headers)
    dropped = HOP_BY_HOP | _REQUEST_ONLY | _named_by_connection(headers)
    kept: Headers = []
    for name, value in headers:
        lowered = name.lower()
        if lowered in dropped or lowered.startswith(_OWN):
            continue
        if identity and lowered == b"accept-encoding":
            continue
        kept.append((lowered, value))
    if identity:
        kept.append((b"accept-encoding", b"identity"))
    return kept


def response_headers(headers: Iterable[tuple[bytes, bytes]]) -> Headers:
    """Return the upstream's response headers to relay: all but the hop-by-hop ones."""
    headers = list(headers)
    dropped = HOP_BY_HOP | _named_by_connection(headers)
    return [(name.lower(), value) for name, value in headers if name.lower() not in dropped]


def check_upstream(url: str) -> str:
    """Return ``url`` without a trailing slash, or raise ``ValueError`` saying what is wrong.

    The upstream is an ``http`` or ``https`` URL with a host, and optionally a path prefix
    (``https://example.com/api``), with no query, fragment or credentials.
    """
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as error:
        raise ValueError(f"--upstream {url!r} is not a URL: {error}") from None
    del port
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"--upstream must be an http:// or https:// URL with a host, got {url!r}")
    if parts.query or parts.fragment or parts.username or parts.password:
        raise ValueError(
            "--upstream takes no query, fragment or credentials (the client's headers carry "
            "the key)"
        )
    return url.rstrip("/")


class Upstream:
    """The HTTP client to the one upstream: streams both ways, keeps no cookie, adds no header.

    ``transport`` replaces the network (``httpx.MockTransport`` in tests). No read timeout of
    its own: a model may think for minutes, and the client's own timeout closes the request
    (the proxy then closes the upstream's).
    """

    def __init__(self, url: str, *, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.url = check_upstream(url)
        base = httpx.URL(self.url)
        self._base = base
        self._prefix = base.raw_path.rstrip(b"/")
        refuse = http.cookiejar.DefaultCookiePolicy(allowed_domains=[])
        self._client = httpx.AsyncClient(
            transport=transport,
            timeout=httpx.Timeout(None, connect=30.0),
            limits=httpx.Limits(max_connections=None, max_keepalive_connections=32),
            follow_redirects=False,
            trust_env=False,
            cookies=http.cookiejar.CookieJar(refuse),
        )

    def url_for(self, raw_path: bytes, query: bytes) -> httpx.URL:
        """Return the upstream URL for a request's path and query string, as sent."""
        target = self._prefix + raw_path
        if query:
            target += b"?" + query
        return self._base.copy_with(raw_path=target)

    async def send(
        self,
        method: str,
        url: httpx.URL,
        headers: Headers,
        content: bytes | AsyncIterable[bytes] | None,
    ) -> httpx.Response:
        """Send one request and return the response with its body still to be read.

        Raises:
            httpx.HTTPError: when the upstream cannot be reached or answers no response.
        """
        request = httpx.Request(method, url, headers=headers, content=content)
        return await self._client.send(request, stream=True)

    async def aclose(self) -> None:
        """Close the connections to the upstream."""
        await self._client.aclose()
