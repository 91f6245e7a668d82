"""``ObservationMaskingPolicy``: replace old tool results with a digest stub, for free."""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Final

from baseaicore import ValidationError

from cutctx._draft import BuiltinPolicy, Draft, Stub, estimator_marks, keep_all
from cutctx._estimators import CharRatioEstimator
from cutctx._values import (
    DEFAULT_PLACEHOLDER,
    Action,
    CompactionBudget,
    Role,
    Transcript,
    TurnReplacement,
    check_count,
    check_str,
)

if TYPE_CHECKING:
    from cutctx._invariants import Layout
    from cutctx._typing import TokenEstimator

__all__ = ["ObservationMaskingPolicy"]

MASKED_KIND: Final = "masked"
_DIGEST_TAIL: Final = "0" * 64 + ")"
"""As long as a stub's digest and closing bracket: all a length-only estimator needs to price it."""


class ObservationMaskingPolicy(BuiltinPolicy):
    """Masks old ``TOOL`` bodies, oldest first, only until the budget fits.

    A stub reads ``{placeholder} (original: {n} tokens, sha256:{hex})``: the label, the original's
    token estimate and the SHA-256 of its UTF-8 text, never an excerpt. It is priced by
    ``estimator`` (``CharRatioEstimator()`` when ``None``), and a turn whose stub would not be
    smaller is left alone. The ``keep_recent_results`` most recent ``TOOL`` turns are never
    masked, whatever the budget; neither is an untouchable turn nor one already masked.

    Raises:
        ValidationError: for a negative ``keep_recent_results``, an empty or non-string
            ``placeholder`` or an ``estimator`` without ``estimate_tokens``.
    """

    __slots__ = ("_estimator", "_keep_recent_results", "_placeholder")

    _NAME: Final = "observation_masking"
    _VERSION: Final = "1.0.0"

    def __init__(
        self,
        keep_recent_results: int = 2,
        placeholder: str = DEFAULT_PLACEHOLDER,
        *,
        estimator: TokenEstimator | None = None,
    ) -> None:
        self._keep_recent_results = check_count(
            "ObservationMaskingPolicy", "keep_recent_results", keep_recent_results
        )
        self._placeholder = check_str("ObservationMaskingPolicy", "placeholder", placeholder)
        if estimator is not None and not callable(getattr(estimator, "estimate_tokens", None)):
            raise ValidationError(
                "ObservationMaskingPolicy.estimator must have estimate_tokens(text) -> int",
                details={"field": "ObservationMaskingPolicy.estimator"},
            )
        self._estimator: TokenEstimator = (
            estimator if estimator is not None else CharRatioEstimator()
        )

    @property
    def name(self) -> str:
        """``observation_masking``."""
        return self._NAME

    @property
    def version(self) -> str:
        """``1.0.0``."""
        return self._VERSION

    @property
    def keep_recent_results(self) -> int:
        """How many of the most recent ``TOOL`` turns are never masked."""
        return self._keep_recent_results

    @property
    def placeholder(self) -> str:
        """The label at the head of every stub."""
        return self._placeholder

    @property
    def estimator(self) -> TokenEstimator:
        """The estimator that prices stubs."""
        return self._estimator

    def __repr__(self) -> str:
        return (
            f"ObservationMaskingPolicy(keep_recent_results={self._keep_recent_results}, "
            f"placeholder={self._placeholder!r}, estimator={self._estimator!r})"
        )

    def stub(self, content: str, token_estimate: int) -> str:
        """Return the stub that would replace a body of ``content`` priced at ``token_estimate``."""
        digest = hashlib.sha256(content.encode("utf-8")).hexdigest()
        return f"{self._placeholder} (original: {token_estimate} tokens, sha256:{digest})"

    def _draft(self, transcript: Transcript, budget: CompactionBudget, shape: Layout) -> Draft:
        total = transcript.token_estimate()
        if total <= budget.max_tokens:
            return keep_all(transcript)
        turns = transcript.turns
        tool = Role.TOOL
        results = [index for index, turn in enumerate(turns) if turn.role is tool]
        floor = len(results) - self._keep_recent_results
        draft = Draft([Action.KEEP] * len(turns))
        estimate = self._estimator.estimate_tokens
        # The character default prices by length alone, so the digest can wait for the plan
        # (see ``Stub``); any other estimator may read the digest, so it gets the whole stub.
        by_length = type(self._estimator) is CharRatioEstimator
        for index in results[: max(floor, 0)]:
            if total <= budget.max_tokens:
                break
            turn = turns[index]
            if shape.untouchable[index] or turn.metadata.get("cutctx.kind") == MASKED_KIND:
                continue
            if by_length:
                head = f"{self._placeholder} (original: {turn.token_estimate} tokens, sha256:"
                cost = estimate(head + _DIGEST_TAIL)
                replacement: TurnReplacement | Stub = Stub(head, cost)
            else:
                stub = self.stub(turn.content, turn.token_estimate)
                cost = estimate(stub)
                replacement = TurnReplacement(stub, cost)
            if cost >= turn.token_estimate:
                continue
            draft.actions[index] = Action.MASK
            draft.replacements[index] = replacement
            total -= turn.token_estimate - cost
        if draft.replacements:
            draft.estimator_ratio, draft.estimator_name = estimator_marks(self._estimator)
        return draft
