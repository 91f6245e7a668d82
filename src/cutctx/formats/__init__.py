"""Provider message formats: the edge between wire messages and cutctx transcripts.

Each module speaks one format — ``openai_chat`` (Chat Completions messages),
``openai_responses`` (Responses API input items) and ``anthropic`` (Messages API) — with the same
three functions: ``to_transcript(messages, *, estimator=None, system=None)`` returns the
transcript and the ``Binding`` that maps it back, ``from_transcript(view, binding)`` rebuilds a
valid request from any view a plan produced, and ``count_tokens`` prices messages by the rules
the estimates use. The core never imports this package.

.. versionadded:: 0.1.0
"""

from cutctx.formats import anthropic as anthropic
from cutctx.formats import openai_chat as openai_chat
from cutctx.formats import openai_responses as openai_responses
from cutctx.formats._common import Binding as Binding

__all__ = ["Binding", "anthropic", "openai_chat", "openai_responses"]

Binding.__module__ = __name__
