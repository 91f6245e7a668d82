"""Test-run settings for the integration tests: each test runs on an event loop of its own.

The frameworks' synchronous runners share the thread's default loop: the Agents SDK leaves it
open after ``shutdown_asyncgens()`` and Pydantic AI's ``run_sync`` reuses it, so async
generators started afterwards would warn. A fresh loop per test keeps the frameworks apart.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from collections.abc import Iterator


@pytest.fixture(autouse=True)
def event_loop_of_its_own() -> Iterator[None]:
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    yield
    asyncio.set_event_loop(None)
    loop.run_until_complete(loop.shutdown_asyncgens())
    loop.close()
