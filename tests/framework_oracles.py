"""What the frameworks' own OpenAI model classes send: the oracles of the framework formats.

The framework formats price a message as the OpenAI Chat messages the framework sends for it;
these helpers ask the framework itself. Pydantic AI's mapping is a private method of its
``OpenAIChatModel`` (no request is made: the client is never used).
"""

from __future__ import annotations

import asyncio
import functools
from typing import TYPE_CHECKING, Any

from langchain_core.messages import convert_to_openai_messages
from pydantic_ai.models import ModelRequestParameters
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

if TYPE_CHECKING:
    from collections.abc import Coroutine

    from langchain_core.messages import BaseMessage
    from pydantic_ai.messages import ModelMessage


def sent_by_langchain(messages: list[BaseMessage]) -> list[dict[str, Any]]:
    """The OpenAI Chat messages LangChain makes of ``messages``."""
    return convert_to_openai_messages(messages)


def sent_by_pydantic_ai(messages: list[ModelMessage]) -> list[dict[str, Any]]:
    """The OpenAI Chat messages Pydantic AI's ``OpenAIChatModel`` sends for ``messages``."""
    mapped = run_async(_chat_model()._map_messages(messages, ModelRequestParameters()))
    return [dict(message) for message in mapped]


@functools.cache
def _chat_model() -> OpenAIChatModel:
    """One model for every mapping (making one builds an HTTP client: slow)."""
    return OpenAIChatModel("gpt-4o", provider=OpenAIProvider(api_key="offline"))


def run_async[T](work: Coroutine[Any, Any, T]) -> T:
    """Run ``work`` on a loop of its own, closed after, leaving the thread's current loop alone.

    (``asyncio.run`` unsets the current loop, which Pydantic AI's ``run_sync`` keeps open: the
    orphaned loop would warn when collected.)
    """
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(work)
    finally:
        loop.close()
