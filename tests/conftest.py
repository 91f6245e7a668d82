"""Test-run settings only; shared strategies and helpers live in importable modules."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import pytest
from hypothesis import HealthCheck, settings

if TYPE_CHECKING:
    from collections.abc import Iterator

# Shared machines are noisy: no per-example deadline; the example count keeps the gate fast.
settings.register_profile(
    "cutctx", deadline=None, max_examples=150, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("cutctx")


@pytest.fixture(autouse=True)
def event_loop_of_its_own() -> Iterator[None]:
    """Give each test an event loop of its own, closed after it.

    The frameworks' synchronous runners share the thread's default loop (the Agents SDK leaves it
    open after ``shutdown_asyncgens()``, Pydantic AI's ``run_sync`` reuses it), in their tests
    and in the integration guide's examples alike: a loop left open warns when it is collected,
    in whichever test runs then.
    """
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    yield
    asyncio.set_event_loop(None)
    loop.run_until_complete(loop.shutdown_asyncgens())
    loop.close()
