"""Token estimators: the character-ratio default and a wrapper for any real tokenizer."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from baseaicore import ValidationError

from cutctx._core.values import check_count, check_ratio, check_str

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

__all__ = ["CharRatioEstimator", "TokenizerEstimator", "encoded_length"]


@dataclass(frozen=True, slots=True)
class CharRatioEstimator:
    """The documented default: ``ceil(len(text) / chars_per_token)``, counting characters.

    The ratio rides on every plan whose figures it produced (``CompactionPlan.estimator_ratio``).

    >>> CharRatioEstimator().estimate_tokens("twelve chars")
    3
    """

    chars_per_token: float = 4.0

    def __post_init__(self) -> None:
        object.__setattr__(
            self,
            "chars_per_token",
            check_ratio("CharRatioEstimator", "chars_per_token", self.chars_per_token),
        )

    def estimate_tokens(self, text: str) -> int:
        """Return ``ceil(len(text) / chars_per_token)``."""
        return math.ceil(len(text) / self.chars_per_token)


@dataclass(frozen=True, slots=True)
class TokenizerEstimator:
    """Prices text with a real tokenizer's ``encode`` plus a fixed per-message framing cost.

    ``encode`` is any callable from text to a sequence of token ids (a tiktoken
    ``Encoding.encode``, or ``lambda s: tokenizer.encode(s).ids`` for Hugging Face
    ``tokenizers``). cutctx imports no tokenizer. ``name`` is recorded on every plan whose
    figures it produced (``CompactionPlan.estimator_name``). ``per_message`` is added to every
    estimate, because each text cutctx prices is the body of one message.

    .. versionadded:: 0.1.0
    """

    encode: Callable[[str], Sequence[int]]
    name: str
    per_message: int = 3

    def __init__(
        self, encode: Callable[[str], Sequence[int]], *, name: str, per_message: int = 3
    ) -> None:
        if not callable(encode):
            raise ValidationError(
                "TokenizerEstimator.encode must be callable, got " + type(encode).__name__,
                details={"field": "TokenizerEstimator.encode"},
            )
        object.__setattr__(self, "encode", encode)
        object.__setattr__(self, "name", check_str("TokenizerEstimator", "name", name))
        object.__setattr__(
            self, "per_message", check_count("TokenizerEstimator", "per_message", per_message)
        )

    def estimate_tokens(self, text: str) -> int:
        """Return the number of tokens ``encode`` yields for ``text``, plus ``per_message``."""
        return encoded_length(self, text) + self.per_message


def encoded_length(estimator: TokenizerEstimator, text: str) -> int:
    """Return the number of tokens ``estimator.encode`` yields for ``text``, without framing.

    A text holding a lone surrogate (bytes decoded with ``surrogateescape``) that ``encode``
    refuses is counted with each lone surrogate as U+FFFD, what a UTF-8 request body holds.
    """
    try:
        tokens = estimator.encode(text)
    except UnicodeEncodeError:
        repaired = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
        tokens = estimator.encode(repaired)
    try:
        return len(tokens)
    except TypeError:
        raise ValidationError(
            f"TokenizerEstimator {estimator.name!r}: encode returned {type(tokens).__name__}, "
            "not a sequence of token ids",
            details={"field": "TokenizerEstimator.encode"},
        ) from None
