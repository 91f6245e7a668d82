"""The metadata keys cutctx reads and writes, and the message keys its users write: their one home.

A turn's ``metadata`` is the caller's, but the keys under the ``cutctx.`` prefix are cutctx's:

- ``KIND_METADATA`` (``cutctx.kind``): what the executor made of a turn, ``MASKED_KIND``
  (``"masked"``, its body replaced by a stub) or ``SUMMARY_KIND`` (``"summary"``, the turn that
  stands for a summary group). The masking policy never masks a turn already masked.
- ``EXCERPT_KIND`` (``"excerpt"``): a tool result sent as an excerpt, whose turn also carries
  ``ORIGINAL_TOKENS_METADATA`` (``cutctx.original_tokens``) and ``ORIGINAL_SHA256_METADATA``
  (``cutctx.original_sha256``): the original's estimate and digest, which a stub of it names.
- ``SUMMARY_GROUP_METADATA`` (``cutctx.summary_group``) and ``REPLACED_TURN_COUNT_METADATA``
  (``cutctx.replaced_turn_count``, in decimal): on a summary turn, the group it stands for and
  how many turns it replaced.
- ``TOOL_NAME_METADATA`` (``cutctx.tool_name``): on a tool result's turn, the tool that produced
  it, which the formats record and ``exclude_tools`` reads.
- ``PRIORITY_METADATA`` (``cutctx.priority``): a turn's priority, an integer in decimal, which
  the formats record and the priority policy reads.
- ``FRAMING_METADATA`` (``cutctx.framing``): on a tool result whose message costs more than its
  text (an observation — a user message read as a tool result — its role's tokens with a
  tokenizer; a Chat tool message its ``name``), those tokens in decimal; a stub of it is priced
  with them, as the format's ``count_tokens`` prices the stub's message. It is turn metadata
  only: no message is sent with it.

A provider message may carry two keys of context-clipper's, which the formats read and never send
on: ``STICKY_KEY`` (``"sticky"``: ``true`` pins the message's turns) and ``PRIORITY_KEY``
(``"priority"``: an integer, the priority of its turns). Both are public (``cutctx.STICKY_KEY``,
``cutctx.PRIORITY_KEY``).
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "EXCERPT_KIND",
    "FRAMING_METADATA",
    "KIND_METADATA",
    "MASKED_KIND",
    "ORIGINAL_SHA256_METADATA",
    "ORIGINAL_TOKENS_METADATA",
    "PRIORITY_KEY",
    "PRIORITY_METADATA",
    "REPLACED_TURN_COUNT_METADATA",
    "STICKY_KEY",
    "SUMMARY_GROUP_METADATA",
    "SUMMARY_KIND",
    "TOOL_NAME_METADATA",
]

KIND_METADATA: Final = "cutctx.kind"
"""The metadata key naming what the executor made of a turn: ``MASKED_KIND`` or ``SUMMARY_KIND``."""

MASKED_KIND: Final = "masked"
"""``cutctx.kind`` of a masked turn (its body replaced by a stub)."""

SUMMARY_KIND: Final = "summary"
"""``cutctx.kind`` of the turn that stands for a summary group."""

EXCERPT_KIND: Final = "excerpt"
"""``cutctx.kind`` of an excerpted tool result (its body replaced by an excerpt)."""

ORIGINAL_TOKENS_METADATA: Final = "cutctx.original_tokens"
"""On an excerpted turn: the original's token estimate, in decimal."""

ORIGINAL_SHA256_METADATA: Final = "cutctx.original_sha256"
"""On an excerpted turn: the original's digest (64 hex digits), as a stub of it names."""

SUMMARY_GROUP_METADATA: Final = "cutctx.summary_group"
"""The metadata key holding a summary turn's group id."""

REPLACED_TURN_COUNT_METADATA: Final = "cutctx.replaced_turn_count"
"""The metadata key holding how many turns a summary turn replaced, in decimal."""

TOOL_NAME_METADATA: Final = "cutctx.tool_name"
"""The metadata key under which a tool result's turn names the tool that produced it."""

PRIORITY_METADATA: Final = "cutctx.priority"
"""The metadata key holding a turn's priority, an integer written in decimal."""

STICKY_KEY: Final = "sticky"
"""A message key (context-clipper's): ``true`` pins the message's turns. Never sent on.

.. versionadded:: 0.1.1
"""

PRIORITY_KEY: Final = "priority"
"""A message key (context-clipper's): an integer, the priority of the message's turns
(``cutctx.priority``). Never sent on.

.. versionadded:: 0.1.1
"""

FRAMING_METADATA: Final = "cutctx.framing"
NAMED_FRAMING: Final = "named"
"""``FRAMING_METADATA``'s value on a tool result whose message carries more than its text (a
Chat ``name``): a stub of it costs what the turn costs beyond its text's own price, priced when
the stub is (a figure read into the metadata would depend on the estimator that read it)."""
"""On an observation's turn: what its message costs beyond a stub's price, in decimal."""
