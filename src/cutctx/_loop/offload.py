"""Run a step's CPU-bound part off the event loop, as a transaction a cancellation cannot split.

``ContextWindow.aprepare`` hands each synchronous part of a step (reading and pricing the new
messages, planning, rendering) to ``off_loop``: the loop runs its other coroutines meanwhile,
and the step's state is adopted on the loop, in one assignment, after the last part returned.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["off_loop"]


async def off_loop[**P, T](function: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """Return ``function(*args, **kwargs)``, run in the running loop's default executor.

    The call sees the caller's context variables, as ``asyncio.to_thread`` gives them. When the
    awaiting task is cancelled, a thread cannot be stopped: this waits for the call to finish
    (further cancellations wait too), drops what it returned or raised, and then raises
    ``asyncio.CancelledError``, so that nothing of the call outlives the awaiting task.
    """
    loop = asyncio.get_running_loop()
    context = contextvars.copy_context()
    call = functools.partial(context.run, function, *args, **kwargs)
    future = loop.run_in_executor(None, call)
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:
        while not future.done():
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait((future,))
        if not future.cancelled():
            future.exception()  # read: the dropped call's own failure is no one's to report
        raise
