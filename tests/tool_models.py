"""A LangChain chat model base for the tests' scripted models: tools bound, nothing called.

The unit tests and the fleet's worker agents script their models differently (a step count, a
failure, the turn a thread is on), but each binds the agent's tools by ignoring them — the
script already knows what to call — and names itself ``scripted``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from langchain_core.language_models import BaseChatModel

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from langchain_core.language_models import LanguageModelInput
    from langchain_core.messages import AIMessage
    from langchain_core.runnables import Runnable
    from langchain_core.tools import BaseTool


class ScriptedToolModel(BaseChatModel):
    """A chat model whose subclass's ``_generate`` follows a script; binding tools is a no-op."""

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: str | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        del tools, tool_choice, kwargs
        return self  # it only ever returns AIMessages
