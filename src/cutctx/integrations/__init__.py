"""One-line integrations of ``ContextWindow`` with agent frameworks, each an optional extra.

- ``cutctx.integrations.langchain.ContextWindowMiddleware``: an ``AgentMiddleware`` for
  LangChain 1.x ``create_agent`` (``pip install "cutctx[langchain]"``).
- ``cutctx.integrations.openai_agents.ContextWindowFilter``: a
  ``RunConfig(call_model_input_filter=...)`` for the OpenAI Agents SDK
  (``pip install "cutctx[openai-agents]"``).
- ``cutctx.integrations.pydantic_ai.ContextWindowProcessor``: an ``AbstractCapability`` for
  Pydantic AI 2.x (``pip install "cutctx[pydantic-ai]"``).

Each compacts what the model receives on every call and never rewrites the framework's stored
history. Importing this package imports no framework; each module imports only its own, and
raises an ``ImportError`` naming its extra when that framework is not installed. See
``docs/integrations.md``.

.. versionadded:: 0.1.1
"""
