"""Shared helpers for the format unit tests: a tokenizer whose counts a person can do by hand."""

from __future__ import annotations

from typing import TYPE_CHECKING

from baseaicore import sha256_of

from cutctx import DEFAULT_PLACEHOLDER, TokenizerEstimator

if TYPE_CHECKING:
    from collections.abc import Sequence


def words(text: str) -> Sequence[int]:
    """One token per whitespace-separated word: counts anyone can check by eye."""
    return [0] * len(text.split())


WORDS = TokenizerEstimator(words, name="words", per_message=3)


def stub(body: str, tokens: int) -> str:
    """The masking stub for ``body`` priced at ``tokens``, restated from docs/policies.md."""
    digest = sha256_of(body)
    return f"{DEFAULT_PLACEHOLDER} (original: {tokens} tokens, sha256:{digest})"
