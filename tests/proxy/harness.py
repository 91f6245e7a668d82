"""The proxy in front of the fake upstream, both on real sockets of 127.0.0.1, for one test."""

from __future__ import annotations

import contextlib
import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from cutctx._proxy.app import create_app
from cutctx._proxy.store import MemoryStore
from tests.proxy.fake_upstream import FakeUpstream
from tests.proxy.serving import serving

if TYPE_CHECKING:
    from collections.abc import Iterator

    from starlette.applications import Starlette

    from cutctx._proxy.store import Store


@dataclass
class Lines(logging.Handler):
    """Collects the proxy's log lines."""

    lines: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        logging.Handler.__init__(self)

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())

    __hash__ = logging.Handler.__hash__


@dataclass
class Running:
    """A running proxy and the fake upstream behind it."""

    fake: FakeUpstream
    url: str
    upstream_url: str
    app: Starlette
    store: Store
    log: Lines

    def stats(self) -> dict[str, Any]:
        """The proxy's figures once every request the upstream got is counted (a request is
        counted when its answer has been relayed, just after the client read its end)."""
        deadline = time.monotonic() + 10
        while True:
            result: dict[str, Any] = self.app.state.proxy.stats()
            if result["total"]["requests"] >= len(self.fake.received):
                return result
            if time.monotonic() > deadline:
                return result
            time.sleep(0.01)


@contextlib.contextmanager
def running(
    *, max_tokens: int | None = 6_000, store: Store | None = None, **options: Any
) -> Iterator[Running]:
    """Start the fake upstream and a proxy in front of it; stop both when the block ends."""
    fake = FakeUpstream()
    store = store if store is not None else MemoryStore()
    log = Lines()
    logger = logging.getLogger("cutctx.proxy")
    logger.addHandler(log)
    level = logger.level
    logger.setLevel(logging.INFO)
    try:
        with serving(fake.app, lifespan="off") as upstream_url:
            app = create_app(upstream_url, store=store, max_tokens=max_tokens, **options)
            with serving(app) as url:
                yield Running(fake, url, upstream_url, app, store, log)
    finally:
        logger.removeHandler(log)
        logger.setLevel(level)
